//! The Tessera daemon: one per node, for the life of a job.
//!
//! A daemon holds a shard of the namespace (entries placed by a hash of their path, inodes on
//! the node that created them), a shard of the ownership maps (each (file, stripe) placed by
//! hash), the read service for the logs on its node, and flush to the PFS. Clients of its node
//! talk to it over a Unix socket ([`server`]); it coordinates their requests ([`coord`]) by
//! calling the shard owners, itself included, over authenticated TCP ([`peer`], [`shard`]).
//! State that must survive a restart is written through [`store`] before it is acknowledged.
//!
//! Module map:
//! * [`namespace`], [`ownership`]: the in-memory shard structures (no I/O);
//! * [`clients`]: which client ids are bound to live connections, and how far they published;
//! * [`leftovers`]: publishing what a process that ended had not;
//! * [`store`]: redb persistence with group commit; [`state_log`]: its log's replay and
//!   salvage;
//! * [`logs`]: read service and burst-buffer accounting;
//! * [`shard`]: what this daemon does for a peer request;
//! * [`coord`]: what this daemon does for a client request;
//! * [`flush`]: atomic publication of files into the PFS;
//! * [`pfs`]: every access to the PFS directory, never through a link planted there;
//! * [`locks`]: byte-range locks (fcntl record locks), held on the inode's node;
//! * [`peer`], [`server`]: the two transports; [`listen`]: the address peers reach us at.

pub mod cache;
pub mod clients;
pub mod coord;
pub mod flush;
pub mod leftovers;
pub mod listen;
pub mod locks;
pub mod logs;
pub mod namespace;
pub mod ownership;
pub mod peer;
pub mod pfs;
pub mod server;
pub mod shard;
pub mod state_log;
pub mod store;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tessera_core::{Errno, FsError, FsResult};
use tessera_proto::{InstanceConfig, InstanceLayout, PeerRequest, PeerResponse};
use tokio::sync::Notify;

/// The state of one running daemon.
pub struct Node {
    pub id: u32,
    pub cfg: InstanceConfig,
    pub layout: InstanceLayout,
    pub secret: Vec<u8>,
    pub store: store::Store,
    pub ns: Mutex<namespace::Namespace>,
    pub own: Mutex<ownership::Ownership>,
    pub logs: logs::Logs,
    pub peers: peer::Peers,
    next_client: Mutex<u64>,
    pub started: Instant,
    pub requests: AtomicU64,
    pub connected: AtomicU64,
    pub shutdown: Notify,
    pub uid: u32,
    pub gid: u32,
    /// Who holds copies of this node's ownership stripes.
    pub callbacks: Mutex<cache::Callbacks>,
    /// Copies of other nodes' ownership stripes.
    pub stripe_cache: Mutex<cache::StripeCache>,
    /// One flush at a time per file (by inode), on the inode's node.
    flush_locks: Mutex<std::collections::HashMap<u64, Arc<tokio::sync::Mutex<()>>>>,
    /// Byte-range locks of this node's inodes, and where this node's clients hold locks.
    pub locks: locks::LockService,
    /// Which client ids are bound to live connections.
    pub clients: clients::Clients,
    /// The PFS directory, reached only without following links.
    pub pfs: pfs::Pfs,
}

impl Node {
    /// Calls a shard: directly if it is this daemon, over TCP otherwise.
    pub async fn call(&self, node: u32, req: PeerRequest) -> FsResult<PeerResponse> {
        Ok(self.call_reply(node, req).await?.resp)
    }

    /// Like [`Node::call`], keeping the data that follows a `Data` answer.
    pub async fn call_reply(&self, node: u32, req: PeerRequest) -> FsResult<peer::PeerReply> {
        let reply = if node == self.id {
            // Boxed: a flush handler calls back into other shards, this one included.
            Box::pin(self.handle_peer(req)).await?
        } else {
            self.peers.call(node, &req).await?
        };
        match reply.resp {
            PeerResponse::Err(e) => Err(e),
            _ => Ok(reply),
        }
    }

    /// Calls several shards concurrently; fails with the first error.
    pub async fn call_all(&self, reqs: Vec<(u32, PeerRequest)>) -> FsResult<Vec<PeerResponse>> {
        futures::future::try_join_all(reqs.into_iter().map(|(n, r)| self.call(n, r))).await
    }

    /// The lock that serialises flushes of `ino`.
    pub fn flush_lock(&self, ino: u64) -> Arc<tokio::sync::Mutex<()>> {
        self.flush_locks
            .lock()
            .expect("flush locks")
            .entry(ino)
            .or_default()
            .clone()
    }

    /// Hands out a client id (unique on this node, persisted before use).
    pub async fn new_client_id(&self) -> FsResult<u64> {
        let (id, pending) = {
            let mut next = self.next_client.lock().expect("client counter");
            let id = (*next).max(1);
            *next = id + 1;
            (
                id,
                self.store.submit(vec![store::DbOp::SetMeta(
                    store::MetaKey::NextClient,
                    id + 1,
                )]),
            )
        };
        pending.durable().await?;
        Ok(id)
    }

    /// Whether `id` was handed out by this node (a reconnecting client may keep it).
    pub fn issued_client_id(&self, id: u64) -> bool {
        id >= 1 && id < *self.next_client.lock().expect("client counter")
    }

    /// A path as the user writes it (with the mount prefix), for messages.
    pub fn user_path(&self, p: &str) -> String {
        if p == "/" {
            self.cfg.mount.clone()
        } else {
            format!("{}{p}", self.cfg.mount.trim_end_matches('/'))
        }
    }

    fn count_request(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }
}

/// Removes the flush temporaries a crash left in the PFS directory (their names were recorded
/// before they were created) and forgets them.
async fn remove_flush_temps(node: &Node, temps: &[String]) -> FsResult<()> {
    if temps.is_empty() {
        return Ok(());
    }
    for t in temps {
        match node.pfs.remove_temp(t) {
            Ok(()) => tracing::info!(
                "removed the flush temporary {} a crash left",
                node.pfs.show(t)
            ),
            Err(e) => tracing::warn!("could not remove the flush temporary {t}: {e}"),
        }
    }
    let forget = temps
        .iter()
        .cloned()
        .map(store::DbOp::DelFlushTemp)
        .collect();
    node.store.submit(forget).durable().await
}

/// Runs daemon `node` of the instance in `layout` until it is told to stop.
pub fn run(layout: InstanceLayout, node: u32) -> FsResult<()> {
    // Read buffers of several MiB are allocated per request; above glibc's default mmap
    // threshold each would map (and fault in, and zero) fresh pages. Keeping them in the heap
    // lets freed buffers be reused: page faults were a quarter of the read path's CPU.
    // SAFETY: mallopt only tunes the allocator; called before any thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 64 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("tessera-daemon")
        .build()
        .map_err(|e| FsError::io("starting the runtime", &e))?;
    rt.block_on(serve(layout, node))
}

async fn serve(layout: InstanceLayout, id: u32) -> FsResult<()> {
    let cfg = layout.load_config()?;
    if id >= cfg.nodes {
        return Err(FsError::new(
            Errno::Inval,
            format!(
                "node {id} does not exist: the instance has nodes 0..{}",
                cfg.nodes
            ),
        ));
    }
    let secret = layout.load_secret()?;
    // SAFETY: getuid/getgid have no preconditions.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    // Before any state is touched: a host that cannot take part fails at once.
    let listen_ip = listen::resolve(&cfg.listen_host)?;
    let bb = cfg.bb_dir(id);
    // The root may be shared (/dev/shm): created if missing, left as it is. The node's own
    // directory and everything below it are private, or the daemon does not start.
    std::fs::create_dir_all(&cfg.bb_root)
        .map_err(|e| FsError::io(format!("creating {}", cfg.bb_root.display()), &e))?;
    tessera_logstore::private::private_dir(&bb)?;
    tessera_logstore::private::private_dir(&bb.join("logs"))?;
    let (store, loaded) = store::Store::open(
        &bb,
        store::StoreOptions {
            durability: cfg.state_durability,
            checkpoint_idle: std::time::Duration::from_millis(cfg.state_checkpoint_idle_ms),
            node: id,
        },
    )?;
    for problem in &loaded.wal_problems {
        tracing::warn!("{problem}");
    }
    // State from an earlier run means this daemon restarted: copies of its stripes may exist.
    let restarted = loaded.next_client > 1 || !loaded.owners.is_empty();
    let pfs = pfs::Pfs::open(&cfg.pfs_dir)?;
    let node = Arc::new(Node {
        id,
        ns: Mutex::new(namespace::Namespace::new(id, &loaded)),
        own: Mutex::new(ownership::Ownership::load(&loaded.owners)),
        logs: logs::Logs::new(id, &cfg),
        peers: peer::Peers::new(layout.clone(), secret.clone(), id, &cfg),
        next_client: Mutex::new(loaded.next_client.max(1)),
        cfg,
        layout: layout.clone(),
        secret,
        store,
        started: Instant::now(),
        requests: AtomicU64::new(0),
        connected: AtomicU64::new(0),
        shutdown: Notify::new(),
        uid,
        gid,
        flush_locks: Mutex::new(std::collections::HashMap::new()),
        locks: locks::LockService::default(),
        clients: clients::Clients::default(),
        pfs,
        callbacks: Mutex::new(cache::Callbacks::new(restarted)),
        stripe_cache: Mutex::new(cache::StripeCache::default()),
    });
    for problem in node.logs.scan() {
        tracing::warn!("log check: {problem}");
    }
    remove_flush_temps(&node, &loaded.flush_temps).await?;
    node.clients.expect_back(&loaded.clients);
    for (client, ino, pos) in &loaded.published {
        node.clients.note_published(*client, *ino, *pos);
    }
    let (files, extents) = node.own.lock().expect("own").stats();
    tracing::info!(
        node = id,
        inodes = node.ns.lock().expect("ns").inode_count(),
        files,
        extents,
        "state loaded"
    );

    let socket = node.cfg.socket_path(id);
    let unix = server::bind(&socket).await?;
    let tcp = tokio::net::TcpListener::bind((listen_ip, 0))
        .await
        .map_err(|e| FsError::io(format!("listening on {listen_ip}"), &e))?;
    let addr = tcp
        .local_addr()
        .map_err(|e| FsError::io("local address", &e))?;
    tokio::spawn(peer::serve(node.clone(), tcp));
    tokio::spawn(server::serve(node.clone(), unix));
    tokio::spawn(node.clone().watch_absent_clients());
    // Registered last: a node in the host table serves both its clients and its peers.
    let host = tessera_proto::hosts::this_host();
    // 63 bits: TOML integers are signed.
    let incarnation = rand::random::<u64>() >> 1;
    layout.update_hosts(|t| {
        t.register(tessera_proto::HostEntry {
            node: id,
            host: host.clone(),
            addr: addr.to_string(),
            pid: std::process::id(),
            incarnation,
        })
    })?;
    tracing::info!(node = id, %host, socket = %socket.display(), peers = %addr, "ready");

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| FsError::io("installing SIGTERM handler", &e))?;
    tokio::select! {
        _ = node.shutdown.notified() => tracing::info!("shutdown requested"),
        _ = term.recv() => tracing::info!("SIGTERM"),
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupted"),
    }
    // The state is written and its files closed before the node leaves the table: whoever
    // sees it gone may start its successor on the same burst buffer.
    let store_node = node.clone();
    let _ = tokio::task::spawn_blocking(move || store_node.store.close()).await;
    if let Err(e) = layout.update_hosts(|t| t.unregister(id, incarnation)) {
        tracing::warn!("could not remove node {id} from the host table: {e}");
    }
    let _ = std::fs::remove_file(&socket);
    Ok(())
}
