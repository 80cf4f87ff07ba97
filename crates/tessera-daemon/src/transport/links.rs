//! The control links between daemons, behind one interface: how a service's call to another
//! node's shard travels.
//!
//! * [`peer::Peers`](crate::transport::peer::Peers): authenticated TCP, pooled connections (a
//!   daemon);
//! * [`InProcessNet`]: the nodes of an in-process cluster (tests), each request answered by
//!   calling the other node's router; a link can be cut and a node can be down, and calls over
//!   them fail as a lost connection does (`EHOSTDOWN`).

use crate::Node;
use bytes::Bytes;
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use tessera_core::{Errno, FsError, FsResult};
use tessera_proto::PeerRequest;

/// An exchange in flight: the frame of the answer (the encoded reply, then its data).
pub type Exchange<'a> = Pin<Box<dyn Future<Output = FsResult<Bytes>> + Send + 'a>>;

/// How a daemon sends a request to another node and receives its answer.
pub trait PeerLinks: Send + Sync {
    /// Sends `req` to `node`; the answer's frame.
    fn exchange(&self, node: u32, req: PeerRequest) -> Exchange<'_>;
}

impl PeerLinks for crate::transport::peer::Peers {
    fn exchange(&self, node: u32, req: PeerRequest) -> Exchange<'_> {
        Box::pin(async move { self.exchange_frame(node, &req).await })
    }
}

/// The network of an in-process cluster: which nodes are up, which links are cut.
#[derive(Default)]
pub struct InProcessNet {
    nodes: Mutex<HashMap<u32, Weak<Node>>>,
    cut: Mutex<HashSet<(u32, u32)>>,
    /// Woken whenever a node goes down.
    went_down: tokio::sync::Notify,
}

impl InProcessNet {
    /// `node` answers requests from now on.
    pub fn up(&self, id: u32, node: &Arc<Node>) {
        self.nodes
            .lock()
            .expect("nodes")
            .insert(id, Arc::downgrade(node));
    }

    /// `id` answers no request (it crashed or stopped).
    pub fn down(&self, id: u32) {
        self.nodes.lock().expect("nodes").remove(&id);
        self.went_down.notify_waiters();
    }

    /// Returns once `id` is down: what a client connected to it sees as its connection
    /// ending.
    pub async fn down_of(&self, id: u32) {
        loop {
            // Created before the check: a `down` between the two still wakes it.
            let woken = self.went_down.notified();
            if !self.is_up(id) {
                return;
            }
            woken.await;
        }
    }

    /// Whether `id` is up.
    pub fn is_up(&self, id: u32) -> bool {
        self.nodes.lock().expect("nodes").contains_key(&id)
    }

    /// Whether `node` is the incarnation of `id` that is up.
    fn is_current(&self, id: u32, node: &Arc<Node>) -> bool {
        self.nodes
            .lock()
            .expect("nodes")
            .get(&id)
            .is_some_and(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(node)))
    }

    /// Cuts the link between `a` and `b`, both ways.
    pub fn cut(&self, a: u32, b: u32) {
        let mut cut = self.cut.lock().expect("cut");
        cut.insert((a, b));
        cut.insert((b, a));
    }

    /// Mends every cut link.
    pub fn mend(&self) {
        self.cut.lock().expect("cut").clear();
    }

    /// The links of node `from`.
    pub fn links_of(self: &Arc<Self>, from: u32) -> InProcessLinks {
        InProcessLinks {
            from,
            net: self.clone(),
        }
    }

    fn reach(&self, from: u32, to: u32) -> FsResult<Arc<Node>> {
        let unreachable = |why: &str| {
            FsError::new(
                Errno::HostDown,
                format!("node {to} is unreachable from node {from}: {why}"),
            )
        };
        if self.cut.lock().expect("cut").contains(&(from, to)) {
            return Err(unreachable("the link is cut"));
        }
        self.nodes
            .lock()
            .expect("nodes")
            .get(&to)
            .and_then(Weak::upgrade)
            .ok_or_else(|| unreachable("it is down"))
    }
}

/// One node's links in an [`InProcessNet`].
pub struct InProcessLinks {
    from: u32,
    net: Arc<InProcessNet>,
}

impl PeerLinks for InProcessLinks {
    fn exchange(&self, node: u32, req: PeerRequest) -> Exchange<'_> {
        Box::pin(async move {
            let target = self.net.reach(self.from, node)?;
            let answer = target.route_peer(req).await;
            // A node that went down while answering (even if another incarnation is up by
            // now) never sent its answer.
            if !self.net.is_current(node, &target) {
                return Err(FsError::new(
                    Errno::HostDown,
                    format!(
                        "node {node} went down before it answered node {}",
                        self.from
                    ),
                ));
            }
            let mut frame = answer.msg;
            for d in &answer.data {
                frame.extend_from_slice(d);
            }
            Ok(Bytes::from(frame))
        })
    }
}
