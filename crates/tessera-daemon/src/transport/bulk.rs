//! The bulk path: the file bytes a daemon fetches from another node's logs, apart from the
//! control messages between daemons.
//!
//! The read service asks for bytes through [`BulkPath`] alone, so a transport can be added
//! without touching the services. Two implementations:
//!
//! * [`TcpBulk`]: `ReadLog` requests on authenticated peer connections of its own (a pool
//!   apart from the control calls', so a 2 MiB transfer never holds a connection a small
//!   request waits for); the bytes are the trailer of the answer, at the instance's security
//!   level, several pieces in flight per peer.
//! * [`InProcessBulk`]: the logs of other nodes held in the same process, read directly: for
//!   tests of several nodes without sockets.
//!
//! An RDMA transport (libfabric or UCX) would implement `fetch` by having the serving node
//! write the log's bytes into a buffer the reader's daemon registered; what it changes and
//! what it does not is in docs/architecture.md.

use crate::logs::Logs;
use crate::transport::peer::Peers;
use bytes::Bytes;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use tessera_core::{Errno, FsError, FsResult};
use tessera_proto::ReadLog;

/// A fetch in flight.
pub type Fetch<'a> = Pin<Box<dyn Future<Output = FsResult<Bytes>> + Send + 'a>>;

/// How a daemon fetches bytes from the logs of another node.
pub trait BulkPath: Send + Sync {
    /// The bytes of `req`'s ranges, concatenated, from the log it names on `node`.
    fn fetch(&self, node: u32, req: ReadLog) -> Fetch<'_>;
}

/// Over TCP, on connections of its own.
pub struct TcpBulk {
    peers: Peers,
}

impl TcpBulk {
    pub fn new(peers: Peers) -> Self {
        TcpBulk { peers }
    }
}

impl BulkPath for TcpBulk {
    fn fetch(&self, node: u32, req: ReadLog) -> Fetch<'_> {
        Box::pin(self.peers.call_data(node, req))
    }
}

/// The logs of nodes in this process, read directly.
#[derive(Default)]
pub struct InProcessBulk {
    nodes: Mutex<HashMap<u32, Arc<Logs>>>,
}

impl InProcessBulk {
    /// Serves `node`'s fetches from `logs`.
    pub fn add(&self, node: u32, logs: Arc<Logs>) {
        self.nodes.lock().expect("nodes").insert(node, logs);
    }
}

impl BulkPath for InProcessBulk {
    fn fetch(&self, node: u32, req: ReadLog) -> Fetch<'_> {
        let logs = self.nodes.lock().expect("nodes").get(&node).cloned();
        Box::pin(async move {
            let logs = logs.ok_or_else(|| {
                FsError::new(
                    Errno::HostDown,
                    format!("node {node} is not in this process"),
                )
            })?;
            logs.read(req.ino, req.client, &req.ranges)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::index::IndexHeader;
    use tessera_proto::InstanceConfig;

    #[test]
    fn in_process_fetches_read_the_other_nodes_logs() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = InstanceConfig::new(2, dir.path().join("pfs"), dir.path().join("bb"));
        std::fs::create_dir_all(&cfg.bb_root).unwrap();
        tessera_logstore::private::private_dir(&cfg.bb_dir(1)).unwrap();
        tessera_logstore::private::private_dir(&cfg.logs_dir(1)).unwrap();
        let (d, i) = cfg.log_paths(1, 7);
        let header = IndexHeader {
            log: 7,
            node: 1,
            epoch: 0,
            txn: false,
        };
        let mut w = tessera_logstore::LogWriter::open(&d, &i, header).unwrap();
        let ino = 0x1_0000_0005;
        let bytes: Vec<u8> = (0..100_000u32).map(|k| (k % 251) as u8).collect();
        w.append(ino, 0, &bytes).unwrap();
        w.sync_index(ino).unwrap();

        let bulk = InProcessBulk::default();
        bulk.add(1, Arc::new(Logs::new(1, &cfg)));
        let req = |ranges: Vec<(u64, u64)>| ReadLog {
            ino,
            client: 7,
            ranges,
        };
        let got =
            futures::executor::block_on(bulk.fetch(1, req(vec![(10, 20_000), (50_000, 50_010)])))
                .unwrap();
        assert_eq!(&got[..19_990], &bytes[10..20_000]);
        assert_eq!(&got[19_990..], &bytes[50_000..50_010]);
        // Bytes the log does not hold, and a node not here: errors, not bytes.
        let e =
            futures::executor::block_on(bulk.fetch(1, req(vec![(99_000, 101_000)]))).unwrap_err();
        assert_eq!(e.errno, Errno::Io, "{e}");
        let e = futures::executor::block_on(bulk.fetch(0, req(vec![(0, 10)]))).unwrap_err();
        assert_eq!(e.errno, Errno::HostDown, "{e}");
    }
}
