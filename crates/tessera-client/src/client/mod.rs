//! A process's handle on a Tessera instance: its connection, its identity (client id) on its
//! node, and the per-file state shared by all of its open handles.
//!
//! This module holds the types and connecting; the rest is split by concern:
//! [`namespace`] (path calls), [`transactions`] (D2T), [`connection`] (calls, reconnecting),
//! [`space`] (burst-buffer grants), [`logs`] (the process's log and views of others'),
//! [`pfs_copy`] (reads from the PFS copy).

mod connection;
mod logs;
mod namespace;
mod pfs_copy;
mod space;
pub use space::Space;
mod transactions;

use crate::attr_cache::AttrCache;
use crate::conn::{Conn, Way};
use crate::file::{File, OpenOptions};
use crate::stat_ahead::StatAhead;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tessera_core::{Errno, FsError, FsResult, RangeMap, RangeSet};
use tessera_logstore::LogView;
use tessera_proto::{InstanceConfig, InstanceLayout, Nop, Request, StageDirection, Staged};

use serde::{Deserialize, Serialize};

/// Entries per shard in a stat-ahead page: with a few shards, a few dozen misses' worth of
/// budget (`stat_ahead::ENTRIES_PER_MISS`) at a time.
const STAT_AHEAD_PAGE: u32 = 512;
/// Bytes of burst-buffer space reserved per request to the daemon (when capacity is limited).
const GRANT_CHUNK: u64 = 64 << 20;

/// The way a request takes to the daemon: a blocking lock (byte-range or list) on the
/// socket, where the daemon notices the process going away while it waits; the rest through
/// the ring when they fit.
fn way_of(req: &Request) -> Way {
    match req {
        Request::Lock(l) if l.wait => Way::Socket,
        Request::ListLock(l) if l.wait => Way::Socket,
        _ => Way::Any,
    }
}

/// Whether this process works through its daemon alone: its descriptor limit is below
/// [`crate::log_sink::THROUGH_DAEMON_BELOW`]. Said once per process on stderr, with the way
/// out.
fn through_daemon() -> bool {
    let limit = tessera_logstore::library_fds::descriptor_limit();
    let through = limit < crate::log_sink::THROUGH_DAEMON_BELOW;
    static SAID: std::sync::Once = std::sync::Once::new();
    if through {
        SAID.call_once(|| {
            eprintln!(
                "tessera: the descriptor limit ({limit}) is too low to keep Tessera's own files out of the program's way; this process works through its daemon alone (every write and read a request: slower). Raise the limit (ulimit -n {}) for full speed.",
                crate::log_sink::THROUGH_DAEMON_BELOW.max(1024)
            );
        });
    }
    through
}

/// How many views of other logs on its node a process keeps open at most: another quarter of
/// its descriptor limit (a view holds 3 descriptors), at most 8192.
fn views_kept() -> usize {
    let quarter = tessera_logstore::library_fds::descriptor_limit() / 4;
    (quarter / 3).clamp(2, 8192) as usize
}

/// Counters of what this process asked of the daemons and where its reads were served
/// from (benchmarks report them; tests check them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    /// Query requests (query, query_file, and opens/syncs that query).
    pub queries: u64,
    /// Attach requests.
    pub attaches: u64,
    /// All requests.
    pub requests: u64,
    /// Bytes read, by source.
    pub read: ReadSources,
    /// Bytes of other nodes copied into this process's log by migration, and those whose
    /// ownership moved here with them (a stripe changed meanwhile keeps its owners).
    #[serde(default)]
    pub migrated_copied: u64,
    #[serde(default)]
    pub migrated: u64,
    /// Stats answered from attributes cached under a lease, and those that asked.
    #[serde(default)]
    pub attr_hits: u64,
    #[serde(default)]
    pub attr_misses: u64,
}

/// Bytes a process read, by where they came from (see `read.rs` for the order of sources).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadSources {
    /// Its own writes that were not attached yet.
    pub own_unattached: u64,
    /// Its own attached writes, from its own data log.
    pub own_log: u64,
    /// Other processes' logs on this node, read straight from their files (no request).
    pub node_logs: u64,
    /// Bytes on other nodes fetched through the daemon when they were needed.
    pub remote: u64,
    /// Bytes on other nodes served from what the handle had read ahead (no request).
    pub read_ahead_hits: u64,
    /// Bytes on other nodes fetched ahead of use, along with needed ones.
    pub read_ahead_fetched: u64,
    /// The file's PFS copy.
    pub pfs: u64,
    /// Holes (no one's bytes, beyond the PFS copy): zeros.
    pub holes: u64,
}

/// What one process knows about one file, shared by all its handles of that file.
#[derive(Default)]
pub(crate) struct FileState {
    /// The process told its daemon it writes this file under its current log id: its
    /// writes go to that log ([`Inner::writer`]).
    pub writing: bool,
    /// Logical range -> position in this process's data log (newest write wins).
    pub local: RangeMap<u64>,
    /// Written but not yet attached.
    pub dirty: RangeSet,
    /// Attached by this process (and not detached since).
    pub attached: RangeSet,
    /// Bumped when this process takes a lock on the file, syncs it, or publishes its writes:
    /// every handle whose cached owners are older re-learns them before its next read (or
    /// append). Locks, syncs and the dirty set belong to the process, not to the handle they
    /// were made through.
    pub view_epoch: u64,
    /// Tokens of the list locks this process holds on the file: its attaches carry them, so
    /// that writes made under a lock that was revoked are refused.
    pub fences: Vec<u64>,
    /// This process switched logs (joined or left a transaction) after writing the file: its
    /// writes under a log id it may come back to are no longer in `local`, and are read from
    /// that log by its index.
    pub forgot: bool,
}

pub(crate) struct Inner {
    pub layout: InstanceLayout,
    pub cfg: InstanceConfig,
    pub node: u32,
    conn: Option<Conn>,
    pub client_id: u64,
    pid: u32,
    pub files: HashMap<u64, FileState>,
    /// Views of other processes' logs on this node, read directly: at most [`views_kept`],
    /// the least recently used closed first.
    pub foreign: crate::view_cache::ViewCache<LogView>,
    /// Bumped by every query answer: views older than this are refreshed before use.
    pub query_gen: u64,
    grant: u64,
    /// The number of this process's last list-lock request.
    pub lock_seq: u64,
    pub stats: Stats,
    /// The PFS directory, opened at the first read of a PFS copy.
    pfs_root: Option<tessera_logstore::library_fds::Held<rustix::fd::OwnedFd>>,
    reconnect_for: Duration,
    /// The transaction this process is a member of, and the log id it writes under
    /// meanwhile (see [`crate::membership`]).
    pub(crate) membership: crate::membership::Membership,
    /// The process works through its daemon alone (its descriptor limit is too low to keep
    /// its own logs out of the program's way): see [`crate::log_sink`].
    pub(crate) through_daemon: bool,
    /// The log this process writes now (its log id's, for every file it writes on this
    /// node), opened at its first write under that id.
    log: Option<(u64, crate::log_sink::LogSink)>,
    /// The writer of the log of a transaction this process left after it committed, kept
    /// open until the next switch: the transaction's files stay part of the data set, and a
    /// reader of them on this node finds the log's descriptors still open.
    retired: Option<crate::log_sink::LogSink>,
    /// The files this process has written under its current log id: the only ones whose
    /// writes a switch checks and forgets, so that joining or leaving costs what the
    /// transaction wrote, not every file the process has opened.
    written: std::collections::HashSet<u64>,
    /// The host table as last read, and the time its file was changed then.
    pub(crate) hosts: Option<(std::time::SystemTime, tessera_proto::hosts::HostTable)>,
    /// Attributes kept under this connection's daemon's leases.
    attrs: AttrCache,
    /// Which directories' listings warm `attrs` ahead of a sweep of stats.
    stat_ahead: StatAhead,
}

/// A connection to a Tessera instance. Cheap to clone; all clones share one connection.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Mutex<Inner>>,
}

/// The launcher's rank of this process, if it was started by one.
fn launcher_rank() -> Option<u64> {
    let from_env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    from_env("OMPI_COMM_WORLD_RANK")
        .or_else(|| from_env("PMI_RANK"))
        .or_else(|| from_env("SLURM_PROCID"))
}

/// Which daemon this process belongs to: `TESSERA_NODE`, else one registered for this host
/// in the host table, MPI ranks (or process ids) spread over several.
fn choose_node(layout: &InstanceLayout, cfg: &InstanceConfig) -> FsResult<u32> {
    if let Some(n) = std::env::var("TESSERA_NODE")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        return Ok((n % u64::from(cfg.nodes)) as u32);
    }
    let rank = launcher_rank().unwrap_or_else(|| u64::from(std::process::id()));
    let table = layout.load_hosts()?;
    table.node_for(&tessera_proto::hosts::this_host(), rank)
}

impl Client {
    /// Connects to the instance named by `TESSERA_INSTANCE` (or the default one).
    pub fn from_env() -> FsResult<Client> {
        Client::connect(InstanceLayout::from_env(), None)
    }

    /// Connects to the instance in `layout`, to daemon `node` (or the one chosen by
    /// [`choose_node`]).
    pub fn connect(layout: InstanceLayout, node: Option<u32>) -> FsResult<Client> {
        // Nothing of an instance directory another user could have planted is used.
        layout.check_trusted()?;
        let cfg = layout.load_config()?;
        let node = match node {
            Some(n) => n,
            None => choose_node(&layout, &cfg)?,
        };
        if node >= cfg.nodes {
            return Err(FsError::new(
                Errno::Inval,
                format!(
                    "node {node} does not exist: the instance has nodes 0..{}",
                    cfg.nodes
                ),
            ));
        }
        let (conn, bound) = Conn::connect(
            &cfg.socket_path(node),
            &layout.dir,
            cfg.max_frame as usize,
            None,
        )?;
        let client_id = bound.client;
        let reconnect_for = std::env::var("TESSERA_RECONNECT_SECS")
            .ok()
            .and_then(|v| v.parse().ok())
            .map_or(Duration::from_secs(20), Duration::from_secs);
        let through_daemon = through_daemon();
        Ok(Client {
            inner: Arc::new(Mutex::new(Inner {
                layout,
                cfg,
                node,
                conn: Some(conn),
                client_id,
                pid: std::process::id(),
                files: HashMap::new(),
                foreign: crate::view_cache::ViewCache::new(views_kept()),
                query_gen: 0,
                grant: 0,
                lock_seq: 0,
                stats: Stats::default(),
                pfs_root: None,
                reconnect_for,
                membership: Default::default(),
                log: None,
                retired: None,
                written: Default::default(),
                hosts: None,
                through_daemon,
                attrs: AttrCache::open(bound.board),
                stat_ahead: StatAhead::default(),
            })),
        })
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.after_fork();
        g
    }

    /// For paths that must never wait or disturb (a process ending): the client, unless
    /// another thread holds it, or its state is another process's (a child of `fork` or
    /// `vfork` that has not used Tessera shares or copies its parent's: it must not be reset
    /// or used from here).
    pub(crate) fn try_lock_own(&self) -> Option<MutexGuard<'_, Inner>> {
        let g = match self.inner.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        (g.pid == std::process::id()).then_some(g)
    }

    /// Whether this process could use the client now without waiting (see `try_lock_own`).
    pub fn idle_in_this_process(&self) -> bool {
        self.try_lock_own().is_some()
    }

    /// The instance configuration.
    pub fn config(&self) -> InstanceConfig {
        self.lock().cfg.clone()
    }

    /// The node (daemon) this process belongs to, and its client id there.
    pub fn identity(&self) -> (u32, u64) {
        let g = self.lock();
        (g.node, g.client_id)
    }

    pub fn stats(&self) -> Stats {
        self.lock().stats
    }

    /// Opens a file; see [`OpenOptions`].
    pub fn open(&self, path: &str, opts: &OpenOptions) -> FsResult<File> {
        self.through_links_on_miss(path, |p| File::open(self, p, opts))
    }

    /// Opens an existing file for reading with the default model.
    pub fn open_read(&self, path: &str) -> FsResult<File> {
        self.open(path, OpenOptions::new().read(true))
    }

    /// Creates (or truncates) a file for writing with the default model.
    pub fn create(&self, path: &str) -> FsResult<File> {
        self.open(
            path,
            OpenOptions::new().write(true).create(true).truncate(true),
        )
    }

    /// A request the daemon answers at once, to measure the way there and back: the
    /// library's own way (the ring when the daemon offers one), or the socket alone.
    pub fn nop(&self, socket_only: bool) -> FsResult<()> {
        let way = if socket_only { Way::Socket } else { Way::Any };
        self.lock().call_by::<Nop>(Request::Nop(Nop), way)
    }

    /// Tells this process's daemon that a staging copy moved `bytes` through it, for its
    /// metrics (`tessera_stage_bytes_total`).
    pub fn report_staged(&self, direction: StageDirection, bytes: u64) -> FsResult<()> {
        self.lock().call(Staged { direction, bytes })
    }

    /// Whether this process holds a connection to its daemon: false once the daemon went
    /// away and a reconnection gave up (`TESSERA_RECONNECT_SECS`), until a call reconnects.
    pub fn connected(&self) -> bool {
        self.lock().conn.is_some()
    }

    /// Whether small requests of this process go through a ring.
    pub fn has_ring(&self) -> bool {
        let mut g = self.lock();
        if g.conn.is_none() {
            let _ = g.reconnect();
        }
        g.conn.as_ref().is_some_and(|c| c.has_ring())
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if self.pid == std::process::id() {
            self.release_grant();
            // This id is done: its daemon deals with what it left now, not when the
            // process ends (a library user may go on for long without it).
            self.log = None;
            self.retired = None;
            if let Some(c) = self.conn.as_mut() {
                let _ = c.call(tessera_proto::Goodbye);
            }
        }
    }
}
