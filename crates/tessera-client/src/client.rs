//! A process's handle on a Tessera instance: its connection, its identity (client id) on its
//! node, and the per-file state shared by all of its open handles.

use crate::attr_cache::AttrCache;
use crate::conn::{Conn, Way, is_disconnect};
use crate::file::{File, OpenOptions};
use crate::stat_ahead::{PageDue, StatAhead};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tessera_core::dir_page::{self, DirPage, EntryPlus};
use tessera_core::index::IndexHeader;
use tessera_core::{Errno, FsError, FsResult, RangeMap, RangeSet, path};
use tessera_logstore::{LogView, LogWriter};
use tessera_proto::{
    Attr, AttrChange, ClientCall, DirEntry, Flush, InstanceConfig, InstanceLayout, Link, Mkdir,
    NodeStatus, Nop, ReadLink, Readdir, Release, Rename, Request, Reserve, Rmdir, SetAttr,
    Shutdown, Stat, StatLeased, Status, Symlink, Truncate, TxnDecide, TxnEnroll, TxnJoin, TxnOpen,
    TxnReserve, Unlink, Writing,
};

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
    /// Logs of other processes on this node, read directly: log id -> (view, generation).
    pub foreign: HashMap<u64, (LogView, u64)>,
    /// The keys of `foreign`, oldest first: beyond [`views_kept`] the oldest view is closed
    /// (and opened again when needed).
    foreign_order: std::collections::VecDeque<u64>,
    /// Bumped by every query answer: views older than this are refreshed before use.
    pub query_gen: u64,
    grant: u64,
    /// The number of this process's last list-lock request.
    pub lock_seq: u64,
    pub stats: Stats,
    /// The PFS directory, opened at the first read of a PFS copy.
    pfs_root: Option<tessera_logstore::library_fds::Held<rustix::fd::OwnedFd>>,
    reconnect_for: Duration,
    /// The transaction this process is a member of and the log id it writes under meanwhile:
    /// joined again on every new connection (after a daemon restart).
    pub(crate) txn: Option<(u64, u64)>,
    /// A forked child's transaction, joined under a log of its own at its first connection.
    join_after_fork: Option<u64>,
    /// This process left its transaction ([`Client::txn_leave`]) and its daemon does not
    /// know yet: told before the next request.
    leave_untold: bool,
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
                foreign: HashMap::new(),
                foreign_order: Default::default(),
                query_gen: 0,
                grant: 0,
                lock_seq: 0,
                stats: Stats::default(),
                pfs_root: None,
                reconnect_for,
                txn: None,
                join_after_fork: None,
                leave_untold: false,
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

    /// Whether small requests of this process go through a ring.
    pub fn has_ring(&self) -> bool {
        let mut g = self.lock();
        if g.conn.is_none() {
            let _ = g.reconnect();
        }
        g.conn.as_ref().is_some_and(|c| c.has_ring())
    }

    pub fn stat(&self, path: &str) -> FsResult<Attr> {
        self.through_links_on_miss(path, |p| self.stat_here(p))
    }

    /// [`Client::stat`] without following links among the directories of `path`.
    pub(crate) fn stat_here(&self, path: &str) -> FsResult<Attr> {
        let mut g = self.lock();
        let p = g.resolve(path)?;
        // A member of a transaction sees it through its view: never from the cache.
        let cached = g.attrs.enabled() && g.txn.is_none() && !g.leave_untold;
        let mut ahead = None;
        let mut a = if !cached {
            g.call(Stat { path: p })?
        } else if let Some(a) = g.attrs.get(&p) {
            g.stats.attr_hits += 1;
            a
        } else {
            g.stats.attr_misses += 1;
            let got = g.call(StatLeased { path: p.clone() })?;
            if let Some(lease) = got.lease {
                g.attrs.put(p.clone(), got.attr.clone(), lease);
                if let Some((dir, name)) = path::split(&p) {
                    ahead = g.stat_ahead.miss(dir, name);
                }
            }
            got.attr
        };
        g.count_own_writes(&mut a);
        drop(g);
        if let Some(due) = ahead {
            self.stat_ahead(due);
        }
        Ok(a)
    }

    /// Fetches a page of a directory's listing for stat-ahead (`stat_ahead`): it warms the
    /// attribute cache. A page that cannot be fetched only ends that listing.
    fn stat_ahead(&self, due: PageDue) {
        let user = self.lock().user_path(&due.dir);
        let page = self
            .readdir_page(&user, due.after, STAT_AHEAD_PAGE)
            .ok()
            .map(|p| (p.entries.len() as u64, p.next));
        self.lock().stat_ahead.fetched(&due.dir, page);
    }

    /// Like [`Client::stat`], but a symbolic link (found in the PFS directory) is followed to
    /// its target, which must lie beneath the PFS root.
    pub fn stat_follow(&self, path: &str) -> FsResult<Attr> {
        self.follow(path).map(|(_, a)| a)
    }

    /// The path (as the user writes it) that `path` leads to through symbolic links found in
    /// the PFS directory, each to a target beneath the PFS root, and its attributes.
    pub fn follow(&self, path: &str) -> FsResult<(String, Attr)> {
        let (mut p, pfs) = {
            let g = self.lock();
            (g.resolve(path)?, g.cfg.pfs_dir.display().to_string())
        };
        for _ in 0..=path::MAX_LINK_HOPS {
            // Each lock is released before the call that takes it again.
            let user = self.lock().user_path(&p);
            let a = self.stat(&user)?;
            if a.kind != tessera_proto::FileKind::Symlink {
                return Ok((user, a));
            }
            let target = self.readlink(&user)?;
            p = path::link_target(&p, &target, &pfs)?;
        }
        Err(FsError::new(
            Errno::Loop,
            format!(
                "{path}: more than {} symbolic links in a row",
                path::MAX_LINK_HOPS
            ),
        ))
    }

    /// Creates the symbolic link `path` to `target` (kept as given).
    pub fn symlink(&self, target: &str, path: &str) -> FsResult<()> {
        self.through_links_on_miss(path, |path| {
            let mut g = self.lock();
            let p = g.resolve(path)?;
            g.call(Symlink {
                path: p,
                target: target.to_string(),
            })
        })
    }

    /// Gives the file `from` the further name `to` (a hard link): both name one file.
    pub fn link(&self, from: &str, to: &str) -> FsResult<()> {
        self.through_links_on_miss2(from, to, |from, to| {
            let mut g = self.lock();
            let from = g.resolve(from)?;
            let to = g.resolve(to)?;
            g.call(Link { from, to })
        })
    }

    /// The target of a symbolic link found in the PFS directory.
    pub fn readlink(&self, path: &str) -> FsResult<String> {
        self.through_links_on_miss(path, |path| {
            let mut g = self.lock();
            let p = g.resolve(path)?;
            g.call(ReadLink { path: p })
        })
    }

    pub fn mkdir(&self, path: &str, mode: u32) -> FsResult<()> {
        self.through_links_on_miss(path, |path| {
            let mut g = self.lock();
            let p = g.resolve(path)?;
            g.call(Mkdir { path: p, mode }).map(drop)
        })
    }

    pub fn rmdir(&self, path: &str) -> FsResult<()> {
        self.through_links_on_miss(path, |path| {
            let mut g = self.lock();
            let p = g.resolve(path)?;
            g.call(Rmdir { path: p })
        })
    }

    pub fn unlink(&self, path: &str) -> FsResult<()> {
        self.through_links_on_miss(path, |path| {
            let mut g = self.lock();
            let p = g.resolve(path)?;
            g.call(Unlink { path: p })
        })
    }

    /// The entries of a directory, in name order (asked for in pages).
    pub fn readdir(&self, path: &str) -> FsResult<Vec<DirEntry>> {
        Ok(self
            .readdir_plus(path)?
            .into_iter()
            .map(|(e, _)| e)
            .collect())
    }

    /// The entries of a directory with their attributes where the daemons had them at hand
    /// (readdir-plus; `None`: stat that entry), in name order, asked for in pages of
    /// [`dir_page::DEFAULT_PAGE`] entries per shard.
    pub fn readdir_plus(&self, path: &str) -> FsResult<Vec<EntryPlus>> {
        let mut all = Vec::new();
        let mut after = None;
        loop {
            let page = self.readdir_page(path, after, dir_page::DEFAULT_PAGE)?;
            all.extend(page.entries);
            match page.next {
                Some(next) => after = Some(next),
                None => return Ok(all),
            }
        }
    }

    /// One page of a directory's listing: the entries after `after` (`None`: from the first),
    /// at most `limit` from each shard, and the cursor of the next page.
    pub fn readdir_page(&self, path: &str, after: Option<String>, limit: u32) -> FsResult<DirPage> {
        self.through_links_on_miss(path, |path| {
            let mut g = self.lock();
            let p = g.resolve(path)?;
            let mut page = g.call(Readdir {
                path: p.clone(),
                after: after.clone(),
                limit,
            })?;
            // The attributes warm the cache: `ls -l` and find then stat without requests.
            if let Some(leases) = &page.leases
                && g.txn.is_none()
                && !g.leave_untold
            {
                for ((e, attr), slot) in page.entries.iter().zip(&leases.slots) {
                    if let (Some(a), Some((slot, epoch))) = (attr, slot) {
                        let lease = tessera_proto::AttrLease {
                            slot: *slot,
                            epoch: *epoch,
                            generation: leases.generation,
                            expires_ns: leases.expires_ns,
                        };
                        g.attrs.put(path::join(&p, &e.name), a.clone(), lease);
                    }
                }
            }
            // Kept as the shards said; shown with this process's own writes, as a stat is.
            for (_, attr) in page.entries.iter_mut() {
                if let Some(a) = attr {
                    g.count_own_writes(a);
                }
            }
            Ok(page)
        })
    }

    pub fn rename(&self, from: &str, to: &str) -> FsResult<()> {
        self.through_links_on_miss2(from, to, |from, to| {
            let mut g = self.lock();
            let (from, to) = (g.resolve(from)?, g.resolve(to)?);
            g.call(Rename { from, to })
        })
    }

    /// Sets the size of a file; bytes beyond it are gone for every process.
    pub fn truncate(&self, path: &str, size: u64) -> FsResult<()> {
        tessera_core::run::end_within_limit(size, 0, "truncate")?;
        self.through_links_on_miss(path, |path| {
            let mut g = self.lock();
            let p = g.resolve(path)?;
            let a = g.call(Truncate { path: p, size })?;
            g.truncate_local(a.ino, size)
        })
    }

    /// Writes a file's attached bytes to the PFS (atomically); returns bytes written.
    pub fn flush_path(&self, path: &str) -> FsResult<u64> {
        let mut g = self.lock();
        let p = g.resolve(path)?;
        let flushed = g.call(Flush {
            path: p,
            range: None,
        })?;
        Ok(flushed.bytes)
    }

    /// Changes the permission bits and/or the times of a file or directory (chmod, utimens).
    pub fn set_attr(&self, path: &str, change: AttrChange) -> FsResult<Attr> {
        self.through_links_on_miss(path, |path| {
            let mut g = self.lock();
            let p = g.resolve(path)?;
            g.call(SetAttr { path: p, change })
        })
    }

    /// The status of this process's daemon.
    pub fn status(&self) -> FsResult<NodeStatus> {
        self.lock().call(Status)
    }

    /// Reserves `bytes` of the burst buffer for this process's later writes (what
    /// `fallocate` means here): they will not fail for want of space. Nothing to reserve when
    /// the burst buffer has no capacity set (the device's free space is the limit).
    pub fn preallocate(&self, bytes: u64) -> FsResult<()> {
        self.lock().preallocate(bytes)
    }

    /// Asks this process's daemon to stop.
    pub fn shutdown_daemon(&self) -> FsResult<()> {
        self.lock().call(Shutdown)
    }

    // ----- transactions (D2T) -----

    /// Opens a transaction whose home is this process's daemon; returns its id, which the
    /// other processes join.
    pub fn txn_open(&self) -> FsResult<u64> {
        self.lock().call(TxnOpen {})
    }

    /// Makes this process a member of `txn` (`None`: of none). While a member, what it
    /// publishes (attaches at close, sync, commit) is pending under the transaction: visible
    /// to its members, to everyone else only once the transaction commits. Writes must be
    /// published before the vote to be part of it.
    ///
    /// A member writes to logs of its own, so every write must be published (closed, synced
    /// or committed) before joining or leaving: otherwise `EBUSY`.
    pub fn txn_join(&self, txn: Option<u64>) -> FsResult<()> {
        let mut g = self.lock();
        if g.txn.map(|(t, _)| t) == txn && !g.leave_untold {
            return Ok(());
        }
        g.check_published(if txn.is_some() { "joining" } else { "leaving" })?;
        let log = g.call(TxnJoin { txn, log: None })?;
        g.leave_untold = false;
        // Whether a transaction left this way committed is not known here: its logs are
        // closed at once, as they may be deleted (an abort) and would stay allocated.
        g.switch_logs(txn.map(|t| (t, log)), false);
        Ok(())
    }

    /// What the transaction's coordinator enrolls this process as (its node and client id),
    /// once every write is published (`EBUSY` otherwise, as for [`Client::txn_join`]).
    pub fn txn_identity(&self) -> FsResult<(u32, u64)> {
        let mut g = self.lock();
        g.check_published("joining")?;
        let client = g.client_id()?;
        Ok((g.node, client))
    }

    /// Reserves `count` consecutive transaction ids at this process's daemon (their home);
    /// returns the first. Each is opened by [`Client::txn_enroll`] of its members.
    pub fn txn_reserve(&self, count: u32) -> FsResult<u64> {
        self.lock().call(TxnReserve { count })
    }

    /// Makes the processes `members` (each's [`Client::txn_identity`]) members of `txn`, which
    /// this process opened or reserved (then opened now), at once; returns each one's log id,
    /// in order, which each then takes up with [`Client::txn_enter`].
    pub fn txn_enroll(&self, txn: u64, members: Vec<(u32, u64)>) -> FsResult<Vec<u64>> {
        self.lock().call(TxnEnroll {
            txn,
            members,
            open: true,
        })
    }

    /// Takes up membership of `txn` under `log`, as enrolled by the coordinator: from now on
    /// this process writes as a member (its daemon already counts it as one).
    pub fn txn_enter(&self, txn: u64, log: u64) -> FsResult<()> {
        let mut g = self.lock();
        g.check_published("joining")?;
        g.leave_untold = false;
        g.switch_logs(Some((txn, log)), true);
        Ok(())
    }

    /// Leaves this process's transaction without a round trip: its daemon is told before the
    /// process's next request (a transaction that was decided has no use for it before).
    /// Every write must be published first (`EBUSY` otherwise). The log written under a
    /// transaction that `committed` stays open until the next switch (see `Inner::retired`);
    /// that of one that aborted is closed at once: its files are deleted, and would stay
    /// allocated.
    pub fn txn_leave(&self, committed: bool) -> FsResult<()> {
        let mut g = self.lock();
        if g.txn.is_none() {
            return Ok(());
        }
        g.check_published("leaving")?;
        g.switch_logs(None, committed);
        g.leave_untold = true;
        Ok(())
    }

    /// The transaction this process is a member of.
    pub fn txn_member(&self) -> Option<u64> {
        self.lock().txn.map(|(t, _)| t)
    }

    /// Asks `txn`'s home to commit (`commit`) or abort it; returns once the decision is
    /// durable. A commit that ends in an abort fails with `ECANCELED` and the reasons.
    pub fn txn_decide(&self, txn: u64, commit: bool, reasons: Vec<String>) -> FsResult<()> {
        self.lock().call(TxnDecide {
            txn,
            commit,
            reasons,
        })
    }
}

impl Inner {
    /// Refuses to change transactions (`what`: joining or leaving) while a write is not
    /// published: a member writes to logs of its own.
    fn check_published(&self, what: &str) -> FsResult<()> {
        let dirty = |ino: &&u64| self.files.get(ino).is_some_and(|fs| !fs.dirty.is_empty());
        if let Some(ino) = self.written.iter().find(dirty) {
            return Err(FsError::new(
                Errno::Busy,
                format!(
                    "inode {ino:#x} has writes this process has not published: close, sync or commit the file before {what} a transaction"
                ),
            ));
        }
        Ok(())
    }

    /// Writes from now on go under `txn` (transaction, log id), or this process's own id.
    /// The writer of the log written until now is kept until the next switch (`retire`) or
    /// closed.
    fn switch_logs(&mut self, txn: Option<(u64, u64)>, retire: bool) {
        self.attrs.clear();
        self.stat_ahead.clear();
        // New writes go to the new log id's log; the old one stays readable through
        // ownership like any other process's.
        for ino in std::mem::take(&mut self.written) {
            let Some(fs) = self.files.get_mut(&ino) else {
                continue;
            };
            fs.writing = false;
            fs.local = RangeMap::default();
            fs.attached = RangeSet::default();
            fs.forgot = true;
        }
        self.retired = self.log.take().filter(|_| retire).map(|(_, s)| s);
        self.txn = txn;
    }

    /// Counts this process's own unattached writes of the file towards the size it is shown;
    /// attached ones are in the daemon's size already, and may have been cut since by another
    /// process's truncate.
    fn count_own_writes(&self, a: &mut Attr) {
        if let Some(fs) = self.files.get(&a.ino) {
            let unattached_end = fs.dirty.ranges().map(|(_, end)| end).max().unwrap_or(0);
            a.size = a.size.max(unattached_end);
        }
    }

    /// After `fork`, the child must not share the parent's connection or logs: it becomes a
    /// new client with its own logs. Its unattached view of the parent's writes is dropped;
    /// it sees what the parent attached, by the parent's model.
    fn after_fork(&mut self) {
        let pid = std::process::id();
        if pid == self.pid {
            return;
        }
        self.pid = pid;
        self.conn = None;
        self.client_id = 0;
        self.grant = 0;
        self.files.clear();
        self.log = None;
        self.retired = None;
        self.written.clear();
        self.foreign.clear();
        self.foreign_order.clear();
        // The parent's copies stay the parent's; the child's next connection brings its own.
        self.attrs = AttrCache::off();
        self.join_after_fork = self.txn.take().map(|(t, _)| t);
        self.leave_untold = false;
    }

    pub fn resolve(&self, user_path: &str) -> FsResult<String> {
        path::resolve(user_path, &self.cfg.mount)
    }

    /// A path for messages, as the user writes it.
    pub fn user_path(&self, p: &str) -> String {
        if p == "/" {
            self.cfg.mount.clone()
        } else {
            format!("{}{p}", self.cfg.mount.trim_end_matches('/'))
        }
    }

    fn reconnect(&mut self) -> FsResult<()> {
        let resume = (self.client_id != 0).then_some(self.client_id);
        let deadline = Instant::now()
            + if resume.is_some() {
                self.reconnect_for
            } else {
                Duration::ZERO
            };
        let mut wait = Duration::from_millis(20);
        loop {
            match Conn::connect(
                &self.cfg.socket_path(self.node),
                &self.layout.dir,
                self.cfg.max_frame as usize,
                resume,
            ) {
                Ok((mut conn, bound)) => {
                    let id = bound.client;
                    // Copies under the previous daemon's leases go with it.
                    self.attrs = AttrCache::open(bound.board);
                    if let Some((txn, log)) = self.txn {
                        let again = TxnJoin {
                            txn: Some(txn),
                            log: Some(log),
                        };
                        if let Err(e) = conn.call(again) {
                            // No longer a member (the transaction ended meanwhile): the call
                            // that reconnected fails with why; the process is outside it now.
                            self.txn = None;
                            self.conn = Some(conn);
                            self.client_id = id;
                            return Err(e);
                        }
                    } else if let Some(txn) = self.join_after_fork.take() {
                        let join = TxnJoin {
                            txn: Some(txn),
                            log: None,
                        };
                        match conn.call(join) {
                            Ok(log) => self.txn = Some((txn, log)),
                            // The transaction is over: the child writes outside it, as its
                            // parent does now.
                            Err(e) if e.errno == Errno::Inval => {}
                            // Its home cannot be reached: the child must not write outside
                            // the transaction unnoticed, so its calls fail until it can join.
                            Err(e) => {
                                self.join_after_fork = Some(txn);
                                return Err(e);
                            }
                        }
                    }
                    if resume == Some(id) {
                        // A restarted daemon learns again which files this process writes.
                        for (ino, fs) in &self.files {
                            if fs.writing {
                                conn.call(Writing { ino: *ino })?;
                            }
                        }
                    }
                    self.conn = Some(conn);
                    self.client_id = id;
                    return Ok(());
                }
                // Busy: the daemon is still cleaning up this id's previous connection.
                Err(e)
                    if Instant::now() >= deadline
                        || !matches!(e.errno, Errno::ConnRefused | Errno::Busy) =>
                {
                    return Err(e);
                }
                Err(_) => {
                    std::thread::sleep(wait);
                    wait = (wait * 2).min(Duration::from_millis(500));
                }
            }
        }
    }

    /// Sends a request to this process's daemon. If the daemon restarted, the client
    /// reconnects under the same client id (within `TESSERA_RECONNECT_SECS`) and resends.
    pub fn call<R: ClientCall>(&mut self, req: R) -> FsResult<R::Reply> {
        let req: Request = req.into();
        let way = way_of(&req);
        self.call_by::<R>(req, way)
    }

    /// [`Inner::call`], the request taking `way` (the socket, or the ring when it fits).
    fn call_by<R: ClientCall>(&mut self, req: Request, way: Way) -> FsResult<R::Reply> {
        if self.leave_untold && !matches!(req, Request::TxnJoin(_)) {
            // The daemon must know this process left before it handles anything else.
            self.leave_untold = false;
            if let Err(e) = self.call(TxnJoin {
                txn: None,
                log: None,
            }) {
                self.leave_untold = self.conn.is_some();
                return Err(e);
            }
        }
        self.stats.requests += 1;
        if self.conn.is_none() {
            self.reconnect()?;
        }
        let body = tessera_proto::frame::encode(&req);
        let first = self
            .conn
            .as_mut()
            .expect("connected above")
            .exchange(&body, way);
        match first {
            Err(e) if is_disconnect(&e) => {
                self.conn = None;
                self.reconnect()?;
                if !req.is_idempotent() {
                    return Err(FsError::new(
                        Errno::HostDown,
                        format!(
                            "the daemon restarted while handling {}; it may or may not have taken effect: check, then retry",
                            req.name()
                        ),
                    ));
                }
                self.conn
                    .as_mut()
                    .expect("reconnected")
                    .exchange(&body, way)?;
            }
            Err(e) => return Err(e),
            Ok(()) => {}
        }
        self.conn.as_mut().expect("connected").reply::<R>()
    }

    /// The data that followed the last `Data` answer.
    pub fn last_data(&self) -> &[u8] {
        self.conn.as_ref().map_or(&[], |c| c.data())
    }

    /// The client id, connecting first if this process has none yet (after fork).
    pub fn client_id(&mut self) -> FsResult<u64> {
        if self.client_id == 0 {
            self.reconnect()?;
        }
        Ok(self.client_id)
    }

    /// Makes sure `bytes` more may be appended to the burst buffer.
    pub fn reserve(&mut self, bytes: u64) -> FsResult<()> {
        if self.cfg.bb_capacity == 0 || self.grant >= bytes {
            self.grant = self.grant.saturating_sub(bytes);
            return Ok(());
        }
        let need = bytes - self.grant;
        let got = match self.call(Reserve {
            bytes: need.max(GRANT_CHUNK),
        }) {
            Err(e) if e.errno == Errno::NoSpace => self.call(Reserve { bytes: need })?,
            other => other?,
        };
        self.grant = self.grant + got - bytes;
        Ok(())
    }

    /// Makes the grant cover `bytes` more without using it (see [`Client::preallocate`]).
    pub fn preallocate(&mut self, bytes: u64) -> FsResult<()> {
        if self.cfg.bb_capacity == 0 || self.grant >= bytes {
            return Ok(());
        }
        let got = self.call(Reserve {
            bytes: bytes - self.grant,
        })?;
        self.grant += got;
        Ok(())
    }

    /// The writer of this process's log for `ino`, told to the daemon on the file's first
    /// write under the current log id (the daemon publishes what the process leaves
    /// unpublished if it dies) and opened on the first write of all: the process's own, or its
    /// daemon's for it when it works through its daemon alone. One log holds every file the
    /// process writes on its node.
    pub fn writer(&mut self, ino: u64) -> FsResult<crate::log_sink::LogHandle<'_>> {
        use crate::log_sink::{DaemonLog, LogSink};
        self.client_id()?;
        let log = self.log_id();
        if !self.files.get(&ino).is_some_and(|fs| fs.writing) {
            self.call(Writing { ino })?;
        }
        if self.log.as_ref().is_none_or(|(id, _)| *id != log) {
            let sink = if self.through_daemon {
                LogSink::Daemon(DaemonLog {
                    log,
                    lens: Default::default(),
                })
            } else {
                let (d, i) = self.cfg.log_paths(self.node, log);
                LogSink::Local(Box::new(LogWriter::open(
                    &d,
                    &i,
                    IndexHeader {
                        log,
                        node: self.node,
                        epoch: 0,
                        txn: self.txn.is_some(),
                    },
                )?))
            };
            self.log = Some((log, sink));
        }
        let fs = self.files.entry(ino).or_default();
        if !fs.writing {
            fs.writing = true;
            self.written.insert(ino);
        }
        Ok(crate::log_sink::LogHandle { g: self, ino })
    }

    /// The writer of `ino` if this process writes it now (none is made).
    pub fn written_log(&mut self, ino: u64) -> Option<crate::log_sink::LogHandle<'_>> {
        (self.log.is_some() && self.files.get(&ino).is_some_and(|fs| fs.writing))
            .then_some(crate::log_sink::LogHandle { g: self, ino })
    }

    /// The log this process writes now, if it opened one.
    pub(crate) fn log_sink(&mut self) -> Option<&mut crate::log_sink::LogSink> {
        self.log.as_mut().map(|(_, s)| s)
    }

    /// The id of the logs this process writes now: its client id, or its transaction's log.
    pub fn log_id(&self) -> u64 {
        self.txn.map_or(self.client_id, |(_, log)| log)
    }

    /// Cuts this process's view of `ino` at `size` after a truncate, and records it in the
    /// index log (so its daemon never publishes the cut bytes for it).
    pub fn truncate_local(&mut self, ino: u64, size: u64) -> FsResult<()> {
        if let Some(fs) = self.files.get_mut(&ino) {
            fs.local.truncate(size);
            fs.dirty.truncate(size);
            fs.attached.truncate(size);
        }
        if let Some(mut w) = self.written_log(ino) {
            w.mark(tessera_core::index::Entry::Truncated { size, at: 0 })?;
        }
        Ok(())
    }

    /// The log of another process on this node, refreshed if a query happened since.
    pub fn foreign_view(&mut self, client: u64) -> FsResult<&LogView> {
        let gen_now = self.query_gen;
        let key = client;
        if !self.foreign.contains_key(&key) {
            while self.foreign.len() >= views_kept() {
                let Some(old) = self.foreign_order.pop_front() else {
                    break;
                };
                self.foreign.remove(&old);
            }
            self.foreign_order.push_back(key);
        }
        let cfg = &self.cfg;
        let node = self.node;
        let entry = match self.foreign.entry(key) {
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                let (d, i) = cfg.log_paths(node, client);
                let view = LogView::open(&d, &i)?;
                v.insert((view, gen_now))
            }
        };
        if entry.1 < gen_now {
            entry.0.refresh()?;
            entry.1 = gen_now;
        }
        Ok(&entry.0)
    }

    /// Opens the PFS copy of the file at internal path `p` for reading, resolved beneath the
    /// PFS root (a link there is followed only to a target beneath it); `None` if there is no
    /// such regular file.
    pub fn open_pfs_copy(
        &mut self,
        p: &str,
    ) -> FsResult<Option<tessera_logstore::library_fds::HeldFile>> {
        use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};
        let pfs_dir = &self.cfg.pfs_dir;
        let shown = self.user_path(p);
        let root = match &self.pfs_root {
            Some(r) => r,
            None => {
                let fd = rustix::fs::open(
                    pfs_dir,
                    OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .map_err(|e| {
                    FsError::io(
                        format!("opening the PFS directory {}", pfs_dir.display()),
                        &e.into(),
                    )
                })?;
                self.pfs_root
                    .insert(tessera_logstore::library_fds::Held::new(fd)?)
            }
        };
        let root = root.get();
        let rel = match p.trim_start_matches('/') {
            "" => ".",
            r => r,
        };
        let fd = match rustix::fs::openat2(
            &*root,
            rel,
            OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
        ) {
            Ok(fd) => fd,
            Err(
                rustix::io::Errno::NOENT
                | rustix::io::Errno::NOTDIR
                | rustix::io::Errno::XDEV
                | rustix::io::Errno::LOOP,
            ) => return Ok(None),
            Err(e) => {
                return Err(FsError::io(
                    format!("opening the PFS copy of {shown}"),
                    &e.into(),
                ));
            }
        };
        match rustix::fs::fstat(&fd) {
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile => {
                Ok(Some(tessera_logstore::library_fds::Held::new(fd)?))
            }
            _ => Ok(None),
        }
    }

    /// Returns unused reserved space (best effort).
    fn release_grant(&mut self) {
        if self.grant > 0
            && let Some(c) = self.conn.as_mut()
        {
            let _ = c.call(Release { bytes: self.grant });
            self.grant = 0;
        }
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
