//! An in-process cluster for unit tests: N nodes' services in one test process, wired as a
//! daemon wires them (`startup::open_node`, `recover`, `spawn_tasks`) but connected by an
//! [`InProcessNet`] instead of sockets, with the failure points the process tests use: a node
//! crashes at an armed failpoint (or when the test says), restarts from its burst buffer,
//! and a link can be cut. Run under a paused tokio clock (`start_paused`), every timer of
//! every node (leases, timeouts, grace periods) moves with `tokio::time::advance`, or by
//! itself while all wait, so a test of a lease expiring or a transaction timing out takes
//! milliseconds.
//!
//! A client is a client id bound on a node; its requests are answered by the node's services
//! directly ([`Cluster::ask`]). The process tests stay: they cover the sockets, the client
//! library and the interposer; these make a failure point to one function.

mod leases_test;
mod migrate_test;
mod ownership_test;
mod stripe_lease_test;
mod txn_test;

use crate::Node;
use crate::failpoints::Failpoints;
use crate::logs::Logs;
use crate::rpc::ServeClient;
use crate::startup::{Wiring, open_node, recover, spawn_tasks};
use crate::transport::bulk::{BulkPath, Fetch, InProcessBulk};
use crate::transport::links::InProcessNet;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use tessera_core::{Errno, FsError, FsResult};
use tessera_proto::{ClientCall, InstanceConfig, InstanceLayout, ReadLog};
use tokio::task::JoinHandle;

/// The bulk path of every node of the cluster: one table of the nodes' logs.
struct SharedBulk(Arc<InProcessBulk>);

impl BulkPath for SharedBulk {
    fn fetch(&self, node: u32, req: ReadLog) -> Fetch<'_> {
        self.0.fetch(node, req)
    }
}

/// A node of the cluster while it runs: the node and its background tasks.
struct Running {
    node: Arc<Node>,
    tasks: Vec<JoinHandle<()>>,
}

/// N nodes in this process.
pub(crate) struct Cluster {
    dir: tempfile::TempDir,
    pub cfg: InstanceConfig,
    layout: InstanceLayout,
    net: Arc<InProcessNet>,
    bulk: Arc<InProcessBulk>,
    nodes: Mutex<Vec<Option<Running>>>,
}

impl Cluster {
    /// Starts `nodes` nodes with the instance's defaults changed by `tune`.
    pub async fn start(nodes: u32, tune: impl FnOnce(&mut InstanceConfig)) -> Cluster {
        let dir = tempfile::tempdir().expect("scratch directory");
        let mut cfg = InstanceConfig::new(nodes, dir.path().join("pfs"), dir.path().join("bb"));
        tune(&mut cfg);
        std::fs::create_dir_all(&cfg.pfs_dir).expect("PFS directory");
        let layout = InstanceLayout::new(dir.path().join("inst"));
        let bulk = Arc::new(InProcessBulk::default());
        for n in 0..nodes {
            bulk.add(n, Arc::new(Logs::new(n, &cfg)));
        }
        let c = Cluster {
            dir,
            cfg,
            layout,
            net: Arc::new(InProcessNet::default()),
            bulk,
            nodes: Mutex::new((0..nodes).map(|_| None).collect()),
        };
        for n in 0..nodes {
            c.boot(n).await;
        }
        c
    }

    /// Opens node `n` from its burst buffer and starts it, as a daemon starts.
    async fn boot(&self, n: u32) {
        let net = self.net.clone();
        let this: Arc<OnceLock<Weak<Node>>> = Arc::default();
        let me = this.clone();
        // A crash at a failpoint: off the network, and nothing more reaches its state.
        let crashed = move |_: &str| {
            net.down(n);
            if let Some(node) = me.get().and_then(Weak::upgrade) {
                node.life.stop();
                node.store.close();
            }
        };
        let wiring = Wiring {
            links: Box::new(self.net.links_of(n)),
            bulk: Box::new(SharedBulk(self.bulk.clone())),
            failpoints: Failpoints::reporting(crashed),
        };
        let (node, loaded) = open_node(
            &self.layout,
            self.cfg.clone(),
            n,
            b"secret".to_vec(),
            wiring,
        )
        .unwrap_or_else(|e| panic!("node {n} did not open: {e}"));
        let _ = this.set(Arc::downgrade(&node));
        let work = recover(&node, &loaded)
            .await
            .unwrap_or_else(|e| panic!("node {n} did not recover: {e}"));
        self.net.up(n, &node);
        let tasks = spawn_tasks(&node, work, loaded.names_unchecked);
        self.nodes.lock().expect("nodes")[n as usize] = Some(Running { node, tasks });
    }

    /// Node `n` (running, or crashed and not yet restarted).
    pub fn node(&self, n: u32) -> Arc<Node> {
        self.nodes.lock().expect("nodes")[n as usize]
            .as_ref()
            .unwrap_or_else(|| panic!("node {n} is not running"))
            .node
            .clone()
    }

    /// Whether node `n` is up (it did not crash at a failpoint or by [`Cluster::crash`]).
    pub fn is_up(&self, n: u32) -> bool {
        self.net.is_up(n)
    }

    /// A client of node `n`: a client id bound there, as a hello binds it.
    pub async fn connect(&self, n: u32) -> u64 {
        let node = self.node(n);
        let id = node.new_client_id().await.expect("client id");
        node.clients
            .bind(id, std::process::id())
            .expect("binding the client");
        id
    }

    /// Client `client` of node `n` asks `req`. If the node goes down before it answers,
    /// the client sees its connection end (`EHOSTDOWN`).
    pub async fn ask<R: ClientCall>(&self, n: u32, client: u64, req: R) -> FsResult<R::Reply>
    where
        Node: ServeClient<R>,
    {
        let node = self.node(n);
        tokio::select! {
            answer = node.serve_client(client, req) => answer,
            () = self.net.down_of(n) => Err(FsError::new(
                Errno::HostDown,
                format!("node {n} went down before it answered"),
            )),
        }
    }

    /// Waits until `condition` holds, checking every 10 ms of the cluster's clock, at most
    /// 60 s of it (a paused clock moves on by itself while every task waits).
    pub async fn eventually<F: std::future::Future<Output = bool>>(
        &self,
        what: &str,
        mut condition: impl FnMut() -> F,
    ) {
        let deadline = crate::clock::now() + std::time::Duration::from_secs(60);
        while !condition().await {
            assert!(
                crate::clock::now() < deadline,
                "waited 60 s of the cluster's clock for {what}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    /// Client `client` of node `n` creates the regular file `path`, opened for writing; its
    /// inode.
    pub async fn create(&self, n: u32, client: u64, path: &str) -> u64 {
        let open = tessera_proto::Open {
            path: path.into(),
            flags: tessera_proto::OpenFlags {
                create: true,
                write: true,
                ..Default::default()
            },
            mode: 0o644,
            want_owners: false,
        };
        let opened = self.ask(n, client, open).await;
        opened
            .unwrap_or_else(|e| panic!("creating {path}: {e}"))
            .attr
            .ino
    }

    /// Client `client` of node `n` attaches `runs` of `ino` (written to its log before),
    /// under the list locks `fences`.
    pub async fn attach(
        &self,
        n: u32,
        client: u64,
        ino: u64,
        runs: Vec<tessera_core::Run>,
        fences: Vec<u64>,
    ) -> FsResult<()> {
        let attach = tessera_proto::Attach {
            ino,
            runs,
            upto: None,
            fences,
        };
        self.ask(n, client, attach).await
    }

    /// Writes `bytes` at `offset` of file `ino` into log `log` on node `n`'s burst buffer,
    /// durably, as a client's library writes before it attaches (`txn`: a transaction's log).
    pub fn write_log(&self, n: u32, log: u64, txn: bool, ino: u64, offset: u64, bytes: &[u8]) {
        let (data, index) = self.cfg.log_paths(n, log);
        let header = tessera_core::index::IndexHeader {
            log,
            node: n,
            epoch: 0,
            txn,
        };
        let mut w = tessera_logstore::LogWriter::open(&data, &index, header).expect("log");
        w.append(ino, offset, bytes).expect("append");
        w.sync_index(ino).expect("sync");
    }

    /// Arms `point` on node `n`: it crashes there (see [`crate::failpoints`]).
    pub fn arm(&self, n: u32, point: &str) {
        self.node(n).failpoints.arm(Some(point));
    }

    /// Cuts the link between `a` and `b`.
    pub fn cut(&self, a: u32, b: u32) {
        self.net.cut(a, b);
    }

    /// Mends every cut link.
    pub fn mend(&self) {
        self.net.mend();
    }

    /// Node `n` dies as a process does under kill -9: it leaves the network, its tasks
    /// stop, and only what its state made durable stays (its store's files are closed, so
    /// that a restart can open them).
    pub fn crash(&self, n: u32) {
        self.net.down(n);
        let running = self.nodes.lock().expect("nodes")[n as usize].take();
        if let Some(r) = running {
            r.node.life.stop();
            for t in &r.tasks {
                t.abort();
            }
            r.node.store.close();
        }
    }

    /// Node `n` starts again from its burst buffer (crashing it first if it is up, and
    /// cleaning up after a crash at a failpoint).
    pub async fn restart(&self, n: u32) {
        self.crash(n);
        self.boot(n).await;
    }

    /// The scratch directory holding the nodes' burst buffers and the PFS directory.
    #[allow(dead_code)]
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let nodes = self.nodes.lock().expect("nodes").len() as u32;
        for n in 0..nodes {
            self.crash(n);
        }
    }
}
