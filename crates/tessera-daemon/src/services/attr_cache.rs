//! Attributes that clients cache under leases: the shard that grants them, the daemon that
//! holds them for its clients, and the stat that hands them out.
//!
//! Where the cache lives: in each client process, so that a hit costs no message at all
//! (on two cores any request that reaches a daemon costs 10 µs or more of CPU). The lease,
//! though, is held by the client's daemon, for two reasons:
//!
//! * a shard must tell every holder before it acknowledges a change. A daemon always
//!   answers; a client process may be stopped, busy, or gone. The daemon answers for its
//!   clients by moving a counter on its invalidation board (tessera-shm), which every client
//!   of the node maps read-only and checks on each hit: a client that does not run costs a
//!   change nothing.
//! * a daemon that dies cannot answer; its clients' copies end with their lease, counted
//!   from before the daemon asked, so the shard that waits the lease out acknowledges no
//!   earlier than the last copy's end.
//!
//! Which changes count: every state batch a shard queues is seen here (`Store::observe`)
//! before it is queued, under the lock of the state it changes. A batch that touches an
//! entry's name, its inode (size, times, mode, links), or a transaction's pending state of
//! either moves the shard's version and is acknowledged only after the holders of those
//! entries confirmed (or their leases ended). A grant is given only if the version did not
//! move while the shard read the entry, so a copy is never older than a change that was
//! not told to its holder.

use crate::Node;
use crate::rpc::{ServeClient, ServePeer};
use crate::store::{DbOp, Observer};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tessera_core::attr_leases::{AttrLeases, Tell, attr_key, listing_key};
use tessera_core::placement::path_shard;
use tessera_core::{Errno, FsError, FsResult, path};
use tessera_proto::{
    AttrLease, DentryGet, FileKind, ForgetAttrs, LeaseAttr, Leased, LeasedFound, RegionAt,
    StatLeased, TxnView,
};
use tessera_shm::Board;
use tokio::sync::{mpsc, oneshot};

/// The most leases a shard keeps at once (about 100 bytes each).
const MAX_LEASES: usize = 1 << 20;
/// Parent directories a node keeps checked at most.
const MAX_DIRS: usize = 1 << 16;
/// Slots of the invalidation board (8 bytes each): paths that share one only cost each
/// other a miss.
const BOARD_SLOTS: u32 = 1 << 16;

/// Holders to tell about one change before it is acknowledged.
struct Telling {
    version: u64,
    tells: Vec<Tell>,
    quiet: Duration,
    done: oneshot::Sender<()>,
}

/// A daemon's part in attribute caching, as a shard and as a holder.
pub struct AttrCache {
    node: u32,
    /// This run of the daemon: leases name it, and an invalidation for another run is refused.
    pub boot: u64,
    lease: Duration,
    /// Shard side: who holds copies of this node's entries.
    leases: Mutex<AttrLeases>,
    /// Holder side: the counters this node's clients check; `None` with caching off.
    board: Option<Board>,
    /// Invalidations received; moved before the slots they name.
    forgets: AtomicU64,
    /// Directories this node checked as parents of creates, under its own leases: path key
    /// -> (path, inode, lease end). Dropped by the same invalidations as clients' copies,
    /// under this lock, so a check and an invalidation never cross unseen.
    dirs: Mutex<HashMap<u64, (String, u64, Instant)>>,
    tells: mpsc::UnboundedSender<Telling>,
    telling: Mutex<Option<mpsc::UnboundedReceiver<Telling>>>,
    /// Stats answered with a lease, and without one.
    leased: AtomicU64,
    unleased: AtomicU64,
}

impl AttrCache {
    /// Counts a stat answered with a lease (`true`) or without one.
    pub(crate) fn count_stat(&self, leased: bool) {
        let counter = if leased { &self.leased } else { &self.unleased };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Stats answered with a lease, and without one, since start.
    pub fn stats_counted(&self) -> (u64, u64) {
        (
            self.leased.load(Ordering::Relaxed),
            self.unleased.load(Ordering::Relaxed),
        )
    }

    /// `restarted`: this node had state before, so copies of its entries may exist.
    pub fn new(node: u32, lease_ms: u64, restarted: bool) -> Arc<AttrCache> {
        let lease = Duration::from_millis(lease_ms);
        let board = if lease.is_zero() {
            None
        } else {
            Board::create(BOARD_SLOTS)
                .inspect_err(|e| {
                    tracing::warn!("no invalidation board, so clients cache no attributes: {e}")
                })
                .ok()
        };
        let boot = tessera_shm::monotonic_ns() ^ (u64::from(std::process::id()) << 40);
        let (tells, rx) = mpsc::unbounded_channel();
        Arc::new(AttrCache {
            node,
            boot,
            lease,
            leases: Mutex::new(AttrLeases::new(
                lease,
                MAX_LEASES,
                restarted,
                crate::clock::now(),
            )),
            board,
            forgets: AtomicU64::new(0),
            dirs: Mutex::new(HashMap::new()),
            tells,
            telling: Mutex::new(Some(rx)),
            leased: AtomicU64::new(0),
            unleased: AtomicU64::new(0),
        })
    }

    /// Whether leases are granted and kept (`attr_lease_ms` is not 0).
    pub fn caching(&self) -> bool {
        !self.lease.is_zero()
    }

    /// Where clients open the board.
    pub fn board_at(&self) -> Option<RegionAt> {
        use std::os::fd::AsRawFd;
        let fd = self.board.as_ref()?.fd()?;
        Some(RegionAt {
            pid: std::process::id(),
            fd: fd.as_raw_fd(),
        })
    }

    /// The store's observer: every batch that touches entries waits for their holders.
    pub fn observer(self: &Arc<Self>) -> Observer {
        let me = Arc::clone(self);
        Box::new(move |ops| me.see(ops))
    }

    fn see(&self, ops: &[DbOp]) -> Option<oneshot::Receiver<()>> {
        let touched: Vec<Touched> = ops.iter().filter_map(touched).collect();
        if touched.is_empty() {
            return None;
        }
        let now = crate::clock::now();
        let mut leases = self.leases.lock().expect("attr leases");
        let quiet = leases.quiet_for(now);
        // Nobody holds a lease (the common case while files are made and removed): the
        // version moves, and no path is hashed.
        let (keys, inos) = if leases.is_empty() {
            (Vec::new(), Vec::new())
        } else {
            keys_of(&touched)
        };
        let change = leases.change(&keys, &inos, now);
        let mut remote = Vec::new();
        for t in change.tells {
            if t.node == self.node && t.boot == self.boot {
                // This node's own clients: their slots move now, before the batch is queued.
                self.forget_here(&t.keys);
                leases.dropped(t.node, t.boot, &t.keys, change.version);
            } else {
                remote.push(t);
            }
        }
        drop(leases);
        if remote.is_empty() && quiet.is_zero() {
            return None;
        }
        let (done, rx) = oneshot::channel();
        let telling = Telling {
            version: change.version,
            tells: remote,
            quiet,
            done,
        };
        // Refused only when the daemon is stopping: the change is then never acknowledged.
        self.tells.send(telling).ok()?;
        Some(rx)
    }

    /// Moves the slots of `keys` on this node's board (the count of invalidations first, so
    /// that a stat that saw a moved slot also sees the count move).
    fn forget_here(&self, keys: &[u64]) {
        let mut dirs = self.dirs.lock().expect("dirs");
        self.forgets.fetch_add(1, Ordering::SeqCst);
        for k in keys {
            dirs.remove(k);
            if let Some(board) = &self.board {
                board.bump(board.slot_of(*k));
            }
        }
    }

    /// The inode of directory `dir` if this node checked it under a lease that still holds.
    fn known_dir(&self, dir: &str) -> Option<u64> {
        let dirs = self.dirs.lock().expect("dirs");
        match dirs.get(&attr_key(dir)) {
            Some((p, ino, expires)) if p == dir && *expires > crate::clock::now() => Some(*ino),
            _ => None,
        }
    }

    /// Keeps `dir` (inode `ino`), leased from before `asked` when the count of invalidations
    /// was `forgets`, unless one arrived since (it may have been for this directory).
    fn note_dir(&self, dir: &str, ino: u64, forgets: u64, asked: Instant) {
        let mut dirs = self.dirs.lock().expect("dirs");
        if self.forgets.load(Ordering::SeqCst) != forgets {
            return;
        }
        if dirs.len() >= MAX_DIRS {
            let now = crate::clock::now();
            dirs.retain(|_, (_, _, e)| *e > now);
            if dirs.len() >= MAX_DIRS {
                return;
            }
        }
        dirs.insert(attr_key(dir), (dir.to_string(), ino, asked + self.lease));
    }

    /// The shard's lease version now: a grant given later is refused if it moved.
    pub fn lease_version(&self) -> u64 {
        self.leases.lock().expect("attr leases").version()
    }

    /// Grants `node` (run `boot`) one lease on the listing of `dir` covering the entries
    /// (position, inode) if nothing changed since `version`; returns the positions leased.
    pub fn grant_page(
        &self,
        version: u64,
        dir: &str,
        entries: &[(u32, u64)],
        node: u32,
        boot: u64,
    ) -> Vec<u32> {
        let mut leases = self.leases.lock().expect("attr leases");
        if leases.version() != version {
            return Vec::new();
        }
        let inos: Vec<u64> = entries.iter().map(|(_, ino)| *ino).collect();
        match leases.grant_page(listing_key(dir), &inos, node, boot, crate::clock::now()) {
            Some(_) => entries.iter().map(|(i, _)| *i).collect(),
            None => Vec::new(),
        }
    }

    /// Leases for a listing's entries, for the client: each entry the shards leased (`leased`)
    /// is covered by the directory's slot; `forgets` and `asked_ns` as read before asking
    /// them. `None` when an invalidation came meanwhile (it may concern any of them) or
    /// caching is off.
    pub fn page_leases(
        &self,
        dir: &str,
        leased: impl Iterator<Item = bool>,
        forgets: u64,
        asked_ns: u64,
    ) -> Option<tessera_core::dir_page::PageLeases> {
        let board = self.board.as_ref()?;
        let slot = board.slot_of(listing_key(dir));
        let epoch = board.epoch(slot);
        let slots = leased.map(|l| l.then_some((slot, epoch))).collect();
        let leases = tessera_core::dir_page::PageLeases {
            generation: board.generation(),
            expires_ns: asked_ns + self.lease.as_nanos() as u64,
            slots,
        };
        (self.forgets.load(Ordering::SeqCst) == forgets).then_some(leases)
    }

    /// What a listing notes before it asks the shards: the count of invalidations and the
    /// clock (see [`AttrCache::page_leases`]); `None` with caching off.
    pub fn before_asking(&self) -> Option<(u64, u64)> {
        self.board.as_ref()?;
        Some((
            self.forgets.load(Ordering::SeqCst),
            tessera_shm::monotonic_ns(),
        ))
    }

    /// Leases granted and recorded now (for `tessera status`).
    pub fn leases_held(&self) -> usize {
        self.leases.lock().expect("attr leases").len()
    }
}

/// What a state operation changes that a cached attribute may show.
enum Touched<'a> {
    /// A name in a directory (and so the directory's listing).
    Name(&'a str, &'a str),
    Inode(u64),
}

/// The keys and inodes of the leases `touched` concerns. A name's change touches its
/// directory's listing too (leased as a whole page), not the directory's own entry.
fn keys_of(touched: &[Touched]) -> (Vec<u64>, Vec<u64>) {
    let (mut keys, mut inos) = (Vec::new(), Vec::new());
    for t in touched {
        match t {
            Touched::Name(parent, name) => {
                keys.push(attr_key(&path::join(parent, name)));
                keys.push(listing_key(parent));
            }
            Touched::Inode(ino) => inos.push(*ino),
        }
    }
    (keys, inos)
}

/// What `op` changes that a stat or a listing returns, if anything.
fn touched(op: &DbOp) -> Option<Touched<'_>> {
    Some(match op {
        DbOp::PutDentry { parent, name, .. }
        | DbOp::DelDentry { parent, name }
        | DbOp::PutPendingDentry { parent, name, .. }
        | DbOp::DelPendingDentry { parent, name, .. }
        | DbOp::PutPendingMoves { parent, name, .. } => Touched::Name(parent, name),
        DbOp::PutInode(a) => Touched::Inode(a.ino),
        DbOp::DelInode(ino)
        | DbOp::PutLinks { ino, .. }
        | DbOp::PutPendingSize { ino, .. }
        | DbOp::PutPendingCut { ino, .. }
        | DbOp::PutPendingRun { ino, .. } => Touched::Inode(*ino),
        // Ownership, logs, clients, transactions' records, the catalogue, extended
        // attributes and the bookkeeping of name operations and releases change no
        // attribute a stat returns.
        DbOp::PutOwner { .. }
        | DbOp::DelOwner { .. }
        | DbOp::SetMeta(..)
        | DbOp::PutFlushTemp(_)
        | DbOp::DelFlushTemp(_)
        | DbOp::PutClient { .. }
        | DbOp::DelClient(_)
        | DbOp::PutPublished { .. }
        | DbOp::DelPendingRun { .. }
        | DbOp::PutPrepared(_)
        | DbOp::ForgetPending(_)
        | DbOp::PutHomeTxn { .. }
        | DbOp::DelHomeTxn(_)
        | DbOp::PutCatVersion(_)
        | DbOp::DelCatName { .. }
        | DbOp::PutCatPending { .. }
        | DbOp::PutXattr { .. }
        | DbOp::DelXattr { .. }
        | DbOp::PutNameIntent(_)
        | DbOp::DelNameIntent(_)
        | DbOp::PutNameStep { .. }
        | DbOp::DelNameStep(_)
        | DbOp::PutFilesToDrop(_)
        | DbOp::DelFilesToDrop(_) => return None,
    })
}

impl Node {
    /// Tells holders of changed entries, until shutdown; each change waits for its own.
    pub async fn keep_telling(self: Arc<Self>) {
        let Some(mut rx) = self.attrs.telling.lock().expect("telling").take() else {
            return;
        };
        while let Some(t) = rx.recv().await {
            let node = self.clone();
            tokio::spawn(async move { node.tell_attr_holders(t).await });
        }
    }

    async fn tell_attr_holders(&self, t: Telling) {
        if !t.quiet.is_zero() {
            tokio::time::sleep(t.quiet).await;
        }
        let version = t.version;
        let calls = t.tells.into_iter().map(|h| async move {
            let ask = ForgetAttrs {
                boot: h.boot,
                keys: h.keys.clone(),
                version,
            };
            let deadline = tokio::time::Instant::from_std(h.expires);
            match tokio::time::timeout_at(deadline, self.call(h.node, ask)).await {
                Ok(Ok(())) => self
                    .attrs
                    .leases
                    .lock()
                    .expect("attr leases")
                    .dropped(h.node, h.boot, &h.keys, version),
                // Unreachable, or a later run of the holder: its copies end with the lease.
                _ => tokio::time::sleep_until(deadline).await,
            }
        });
        futures::future::join_all(calls).await;
        let _ = t.done.send(());
    }
}

impl Node {
    /// The inode of directory `dir` (outside transactions), from this node's leased checks
    /// when it has one: creates in one directory then do not all ask its shard. Still
    /// correct without asking: a directory being removed is sealed on every node before its
    /// children are counted, and each create's entry shard refuses a sealed parent
    /// (`state::seals`); a removal or rename of the directory drops the check here before
    /// it is acknowledged, like any leased copy.
    /// `None`: no such entry.
    pub(crate) async fn leased_dir(&self, dir: &str) -> FsResult<Option<(u64, FileKind)>> {
        if let Some(ino) = self.attrs.known_dir(dir) {
            return Ok(Some((ino, FileKind::Dir)));
        }
        let forgets = self.attrs.forgets.load(Ordering::SeqCst);
        let asked = crate::clock::now();
        let ask = LeaseAttr {
            path: dir.to_string(),
            node: self.id,
            boot: self.attrs.boot,
        };
        let got = self.call(path_shard(dir, self.cfg.nodes), ask).await?;
        let Some((d, _)) = got.found else {
            return Ok(None);
        };
        if got.leased && d.kind == FileKind::Dir {
            self.attrs.note_dir(dir, d.ino, forgets, asked);
        }
        Ok(Some((d.ino, d.kind)))
    }
}

impl ServePeer<ForgetAttrs> for Node {
    async fn serve_peer(&self, r: ForgetAttrs) -> FsResult<()> {
        if r.boot != self.attrs.boot {
            return Err(FsError::new(
                Errno::Stale,
                format!(
                    "node {} restarted since it took these leases; they end by themselves",
                    self.id
                ),
            ));
        }
        self.attrs.forget_here(&r.keys);
        Ok(())
    }
}

impl ServePeer<LeaseAttr> for Node {
    async fn serve_peer(&self, r: LeaseAttr) -> FsResult<LeasedFound> {
        let p = path::normalize(&r.path)?;
        let before = self.attrs.leases.lock().expect("attr leases").version();
        let found = self
            .serve_peer(DentryGet {
                path: p.clone(),
                view: TxnView::default(),
            })
            .await?;
        let mut leased = false;
        // Only attributes this shard holds, of an entry no transaction is changing, and only
        // if nothing changed while they were read.
        if let Some((d, Some(_))) = &found
            && self.txns.entries(|e| e.get(&p)).is_none()
        {
            let mut leases = self.attrs.leases.lock().expect("attr leases");
            if leases.version() == before {
                let now = crate::clock::now();
                leased = leases
                    .grant(attr_key(&p), d.ino, r.node, r.boot, now)
                    .is_some();
            }
        }
        Ok(LeasedFound { found, leased })
    }
}

impl ServeClient<StatLeased> for Node {
    async fn serve_client(&self, client: u64, r: StatLeased) -> FsResult<Leased> {
        let p = path::normalize(&r.path)?;
        let board = self.attrs.board.as_ref();
        let Some(board) = board.filter(|_| p != "/" && self.txns.member(client).is_none()) else {
            self.attrs.count_stat(false);
            let (_, attr) = self
                .lookup_for(client, &p)
                .await?
                .ok_or_else(|| self.enoent(&p))?;
            return Ok(Leased { attr, lease: None });
        };
        let forgets = self.attrs.forgets.load(Ordering::SeqCst);
        let asked_ns = tessera_shm::monotonic_ns();
        let ask = LeaseAttr {
            path: p.clone(),
            node: self.id,
            boot: self.attrs.boot,
        };
        let got = self.call(path_shard(&p, self.cfg.nodes), ask).await?;
        let (d, attr) = got.found.ok_or_else(|| self.enoent(&p))?;
        let attr = match attr {
            Some(a) => a,
            None => self.inode_get_as(&TxnView::default(), d.ino).await?.attr,
        };
        // The slot's epoch now, trusted only if no invalidation came since before the ask:
        // one that came could have moved it for a change this answer predates.
        let slot = board.slot_of(attr_key(&p));
        let lease = AttrLease {
            slot,
            epoch: board.epoch(slot),
            generation: board.generation(),
            expires_ns: asked_ns + self.attrs.lease.as_nanos() as u64,
        };
        let lease =
            (got.leased && self.attrs.forgets.load(Ordering::SeqCst) == forgets).then_some(lease);
        self.attrs.count_stat(lease.is_some());
        Ok(Leased { attr, lease })
    }
}
