//! The `tessera` command speaking to daemons over the network, as [`ADMIN_NODE`]: it holds
//! the instance secret, so it proves itself as a daemon does, and it can ask any node, on any
//! host, for its status or to stop. Nothing here signals a process.

use std::time::Duration;
use tessera_core::{Errno, FsError, FsResult};
use tessera_daemon::peer::Peers;
use tessera_proto::peer_auth::ADMIN_NODE;
use tessera_proto::{
    CheckNames, InstanceLayout, NamesChecked, NodeStatus, PeerCall, Shutdown, Status,
};

/// How long one node gets to answer an administrative request.
const ANSWER_WITHIN: Duration = Duration::from_secs(10);

/// Administrative connections to the daemons of one instance.
pub struct Admin {
    rt: tokio::runtime::Runtime,
    peers: Peers,
}

impl Admin {
    pub fn new(layout: &InstanceLayout) -> FsResult<Admin> {
        let cfg = layout.load_config()?;
        let secret = layout.load_secret()?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| FsError::io("starting a runtime", &e))?;
        let peers = Peers::new(layout.clone(), secret, ADMIN_NODE, &cfg);
        Ok(Admin { rt, peers })
    }

    /// Asks `node` and waits for its answer.
    pub fn ask<R: PeerCall>(&self, node: u32, req: R) -> FsResult<R::Reply> {
        self.rt.block_on(self.ask_async(node, req))
    }

    /// Asks `node`; for several questions at once under [`Admin::block_on`].
    pub async fn ask_async<R: PeerCall>(&self, node: u32, req: R) -> FsResult<R::Reply> {
        match tokio::time::timeout(ANSWER_WITHIN, self.peers.call(node, req)).await {
            Ok(r) => r,
            Err(_) => Err(FsError::new(
                Errno::HostDown,
                format!("node {node} did not answer within {ANSWER_WITHIN:?}"),
            )),
        }
    }

    /// Runs `f` (questions to several nodes at once) to its end.
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }

    /// Has `node` count the names of its files against their link counts (see
    /// `tessera_daemon::services::names_check`).
    pub fn check_names(&self, node: u32) -> FsResult<NamesChecked> {
        self.ask(node, CheckNames {})
    }

    pub fn status(&self, node: u32) -> FsResult<NodeStatus> {
        self.ask(node, Status)
    }

    /// Asks `node` to stop. A daemon that closed the connection while answering has stopped
    /// as asked.
    pub fn shutdown(&self, node: u32) -> FsResult<()> {
        match self.ask(node, Shutdown) {
            Err(e) if e.message.contains("connection closed") => Ok(()),
            other => other,
        }
    }
}
