//! Lock service: fcntl record locks and list locks on Tessera files.
//!
//! The lock table of a file lives on the node of its inode, so every process of the job, on
//! whatever node, meets the same table; the rules (conflicts, the fair queue, tokens) are
//! `tessera_core::lock_manager`'s. A client's daemon forwards its lock requests there and
//! remembers which nodes hold locks of the client; when the client's connection ends (the
//! process closed its last descriptor or died), the daemon tells those nodes to drop the
//! client's locks. A blocking request waits on the lock node for at most [`LOCK_WAIT_SLICE`]
//! per peer call, then the client's daemon asks again (a list request keeps its place in the
//! queue under its sequence number): no peer call outlives the peer timeout, and a waiter
//! whose process disappears stops asking.
//!
//! Locks are leases of the holder's daemon and tokens fence the writes made under list locks:
//! see [`super::leases`]. Locks are volatile, like the kernel's: a daemon restart drops the
//! tables it held.

use crate::Node;
use crate::rpc::{ServeClient, ServePeer};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::{Duration, Instant};
use tessera_core::lock_list::LockList;
use tessera_core::lock_manager::{ListKey, ListState, LockManager, Token};
use tessera_core::locks::{HeldLock, LockKind, LockOwner, owner_id};
use tessera_core::placement::ino_shard;
use tessera_core::{Errno, FsError, FsResult};
use tessera_proto::{
    GetLock, ListLock, ListUnlock, Lock, ReleaseLocks, TableGetLock, TableListLock,
    TableListUnlock, TableLock,
};

/// Longest one blocking lock call waits on the lock node before the caller asks again.
pub const LOCK_WAIT_SLICE: Duration = Duration::from_secs(5);

/// Lock tables of the files whose inodes live on this node, and what this node's clients hold.
pub struct LockService {
    state: std::sync::Mutex<LockManager>,
    /// Woken on every change that may grant a waiter, so waiters re-check.
    changed: tokio::sync::Notify,
    /// For each client of this node: the nodes where it may hold locks.
    held_at: std::sync::Mutex<HashMap<u64, BTreeSet<u32>>>,
    /// For each lock node this node's clients hold locks on: until when this node's lease
    /// there is surely valid (the send time of the last renewal it acknowledged, plus the
    /// lease). Attaches under list locks are refused past it.
    lease_until: std::sync::Mutex<HashMap<u32, Instant>>,
    /// Revoked list-lock tokens (ino, token): attaches carrying them are refused. Grows by
    /// one entry per revocation, which only a silent holder causes.
    fenced: std::sync::Mutex<HashSet<(u64, Token)>>,
    /// On a lock node: the revoked list locks of each holder node, told to it at each of its
    /// renewals. Only a silent holder adds to it.
    revoked_of: std::sync::Mutex<HashMap<u32, Vec<tessera_proto::Fence>>>,
    /// The time base of the lease clock.
    epoch: Instant,
    /// Requests waiting on this node's tables now (a status figure).
    waiting: std::sync::atomic::AtomicU64,
    /// Locks granted here, and requests that had to wait here, since start (metrics).
    granted: std::sync::atomic::AtomicU64,
    waits: std::sync::atomic::AtomicU64,
}

/// Counts one waiting request while it lives.
struct Waiting<'a>(&'a std::sync::atomic::AtomicU64);

impl<'a> Waiting<'a> {
    fn new(count: &'a std::sync::atomic::AtomicU64) -> Self {
        count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Waiting(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Default for LockService {
    fn default() -> Self {
        // Tokens start at the clock's nanoseconds, so a restarted node never reuses one.
        let first = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        LockService {
            state: std::sync::Mutex::new(LockManager::new(first)),
            changed: tokio::sync::Notify::new(),
            held_at: Default::default(),
            lease_until: Default::default(),
            fenced: Default::default(),
            revoked_of: Default::default(),
            epoch: crate::clock::now(),
            waiting: Default::default(),
            granted: Default::default(),
            waits: Default::default(),
        }
    }
}

impl LockService {
    fn now_ms(&self) -> u64 {
        crate::clock::since(self.epoch).as_millis() as u64
    }

    /// On a lock node: holder node `node` renewed its lease now; the tokens of its list
    /// locks revoked here, for it to fence. Under the tables' lock, as expiry records what it
    /// revoked: a renewal sees either the holder still holding or every token it lost.
    pub fn renewal_from(&self, node: u32) -> Vec<tessera_proto::Fence> {
        let now = self.now_ms();
        let mut manager = self.manager();
        manager.heard(node, now);
        let revoked = self.revoked_of.lock().expect("revoked");
        revoked.get(&node).cloned().unwrap_or_default()
    }

    /// On a lock node: revokes the locks of the holders not heard from for longer than
    /// `lease_ms`, records each for its holder's next renewal, and wakes the waiters (the
    /// silent holders' queued requests are gone). The list grants revoked, to fence.
    pub fn expire_silent(&self, lease_ms: u64) -> Vec<tessera_core::lock_manager::Revoked> {
        let revoked = {
            let now = self.now_ms();
            let mut manager = self.manager();
            let revoked = manager.expire(now, lease_ms);
            let mut of = self.revoked_of.lock().expect("revoked");
            for r in &revoked {
                of.entry(tessera_core::locks::owner_node(r.holder.id))
                    .or_default()
                    .push(tessera_proto::Fence {
                        ino: r.ino,
                        token: r.token,
                    });
            }
            revoked
        };
        self.changed.notify_waiters();
        revoked
    }

    /// On a lock node: every node that answers has the fence of `token`: its bytes go to the
    /// next request.
    pub fn free_fenced(&self, ino: u64, token: Token) {
        self.manager().fenced(ino, token);
        self.changed.notify_waiters();
    }

    /// The lock nodes where this node's clients may hold locks.
    pub fn lock_nodes(&self) -> BTreeSet<u32> {
        self.held_at
            .lock()
            .expect("held_at")
            .values()
            .flatten()
            .copied()
            .collect()
    }

    /// A renewal sent at `sent` was answered by `lock_node` with the tokens it revoked: they
    /// are fenced here first, then the lease there is valid until `sent + lease`.
    pub fn renewed(
        &self,
        lock_node: u32,
        sent: Instant,
        lease: Duration,
        revoked: Vec<tessera_proto::Fence>,
    ) {
        let mut fenced = self.fenced.lock().expect("fences");
        fenced.extend(revoked.into_iter().map(|f| (f.ino, f.token)));
        drop(fenced);
        let mut until = self.lease_until.lock().expect("leases");
        let t = until.entry(lock_node).or_insert(sent + lease);
        *t = (*t).max(sent + lease);
    }

    /// Until when this node's lease on `lock_node` is surely valid, if it has one.
    pub fn lease_until(&self, lock_node: u32) -> Option<Instant> {
        self.lease_until
            .lock()
            .expect("leases")
            .get(&lock_node)
            .copied()
    }

    /// Fences `token` of `ino` here: attaches carrying it are refused from now on.
    pub fn fence(&self, ino: u64, token: Token) {
        self.fenced.lock().expect("fences").insert((ino, token));
    }

    /// The first of `tokens` fenced here for `ino`.
    pub fn first_fenced(&self, ino: u64, tokens: &[Token]) -> Option<Token> {
        let fenced = self.fenced.lock().expect("fences");
        tokens.iter().copied().find(|t| fenced.contains(&(ino, *t)))
    }

    /// List locks granted (and their runs) and the most holders at once, since the start.
    pub fn figures(&self) -> (tessera_core::lock_manager::Grants, usize) {
        let m = self.manager();
        (m.grants(), m.peak_holders())
    }

    /// Whether list lock `token` of `ino` is fenced here (revoked: attaches carrying it are
    /// refused).
    pub fn is_fenced(&self, ino: u64, token: Token) -> bool {
        self.fenced.lock().expect("fences").contains(&(ino, token))
    }

    /// Lock requests waiting on this node's tables now.
    pub fn waiting(&self) -> u64 {
        self.waiting.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Locks (record and list) granted here, and requests that waited here behind a
    /// conflicting holder, since start.
    pub fn counts(&self) -> (u64, u64) {
        let get = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        (get(&self.granted), get(&self.waits))
    }

    fn count(&self, counter: &std::sync::atomic::AtomicU64) {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    fn manager(&self) -> std::sync::MutexGuard<'_, LockManager> {
        self.state.lock().expect("lock tables")
    }

    /// Serves a record-lock request on this (the inode's) node.
    pub async fn lock(
        &self,
        ino: u64,
        owner: LockOwner,
        kind: Option<LockKind>,
        start: u64,
        end: u64,
        wait: bool,
    ) -> FsResult<()> {
        let deadline = tokio::time::Instant::now() + LOCK_WAIT_SLICE;
        let mut waited = false;
        loop {
            // Registered before the check, so a change between check and wait is not missed.
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let now = self.now_ms();
            let res = self.manager().posix(ino, owner, kind, start, end, now);
            match res {
                Ok(()) => {
                    if kind.is_some() {
                        self.count(&self.granted);
                    }
                    // An unlock, or a downgrade, may let a waiter in.
                    self.changed.notify_waiters();
                    return Ok(());
                }
                Err(e) if e.errno == Errno::Again && wait => {
                    if !std::mem::replace(&mut waited, true) {
                        self.count(&self.waits);
                    }
                    let _counted = Waiting::new(&self.waiting);
                    if tokio::time::timeout_at(deadline, notified).await.is_err() {
                        return Err(e);
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Serves a list-lock request on this (the inode's) node: the token once granted; with
    /// `wait`, `EAGAIN` after [`LOCK_WAIT_SLICE`] with the request still queued.
    pub async fn list_lock(
        &self,
        ino: u64,
        key: ListKey,
        owner: LockOwner,
        list: LockList,
        wait: bool,
    ) -> FsResult<Token> {
        let deadline = tokio::time::Instant::now() + LOCK_WAIT_SLICE;
        let notified = self.changed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let now = self.now_ms();
        let mut state = self.manager().list_lock(ino, key, owner, list, wait, now)?;
        self.changed.notify_waiters();
        let mut waited = false;
        loop {
            match state {
                ListState::Granted(t) => {
                    self.count(&self.granted);
                    return Ok(t);
                }
                ListState::Revoked(t) => {
                    return Err(FsError::new(
                        Errno::Stale,
                        format!(
                            "list lock {t} of inode {ino} was revoked: its holder's daemon did not renew the lease in time"
                        ),
                    ));
                }
                ListState::Waiting(held) => {
                    if !std::mem::replace(&mut waited, true) {
                        self.count(&self.waits);
                    }
                    let counted = Waiting::new(&self.waiting);
                    let woken = tokio::time::timeout_at(deadline, notified.as_mut()).await;
                    drop(counted);
                    if woken.is_err() {
                        return Err(FsError::new(
                            Errno::Again,
                            tessera_core::lock_manager::describe(ino, &held),
                        ));
                    }
                    notified.set(self.changed.notified());
                    notified.as_mut().enable();
                    let now_state = self.manager().list_state(ino, key);
                    state = match now_state {
                        Some(s) => s,
                        None => {
                            return Err(FsError::new(
                                Errno::Io,
                                format!(
                                    "the list lock request of pid {} on inode {ino} was dropped: its process ended or its daemon's lease ran out",
                                    owner.pid
                                ),
                            ));
                        }
                    };
                }
            }
        }
    }

    pub fn get_lock(
        &self,
        ino: u64,
        owner: LockOwner,
        kind: LockKind,
        start: u64,
        end: u64,
    ) -> Option<HeldLock> {
        self.manager().posix_conflict(ino, owner, kind, start, end)
    }

    /// Drops every lock of `owner_id` on this node's files.
    pub fn release_owner(&self, owner_id: u64) {
        self.manager().release_owner(owner_id);
        // Also wakes a waiting request of the gone owner, which then gives up.
        self.changed.notify_waiters();
    }

    fn note_held_at(&self, client: u64, node: u32) {
        self.held_at
            .lock()
            .expect("held_at")
            .entry(client)
            .or_default()
            .insert(node);
    }
}

impl ServeClient<Lock> for Node {
    /// A client's lock request (F_SETLK/F_SETLKW): forwarded to the inode's node; a blocking
    /// one is asked again until granted.
    async fn serve_client(&self, client: u64, r: Lock) -> FsResult<()> {
        self.check_ino(r.ino)?;
        check_range(r.start, r.end)?;
        let node = ino_shard(r.ino);
        let owner = LockOwner {
            id: owner_id(self.id, client),
            pid: r.pid,
        };
        if r.kind.is_some() {
            self.locks.note_held_at(client, node);
        }
        loop {
            let req = TableLock {
                ino: r.ino,
                owner,
                start: r.start,
                end: r.end,
                kind: r.kind,
                wait: r.wait,
            };
            match self.call(node, req).await {
                Ok(()) => return Ok(()),
                Err(e) if r.wait && e.errno == Errno::Again => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

impl ServeClient<GetLock> for Node {
    /// A client's F_GETLK.
    async fn serve_client(&self, client: u64, r: GetLock) -> FsResult<Option<HeldLock>> {
        self.check_ino(r.ino)?;
        check_range(r.start, r.end)?;
        let owner = LockOwner {
            id: owner_id(self.id, client),
            pid: 0,
        };
        let req = TableGetLock {
            ino: r.ino,
            owner,
            start: r.start,
            end: r.end,
            kind: r.kind,
        };
        self.call(ino_shard(r.ino), req).await
    }
}

impl ServeClient<ListLock> for Node {
    /// A client's list lock: forwarded to the inode's node, asked again while it waits.
    async fn serve_client(&self, client: u64, r: ListLock) -> FsResult<u64> {
        self.check_ino(r.ino)?;
        // Checked here too, so a bad request is refused before it travels.
        LockList::new(r.runs.clone())?;
        let node = ino_shard(r.ino);
        let owner = LockOwner {
            id: owner_id(self.id, client),
            pid: r.pid,
        };
        self.locks.note_held_at(client, node);
        // Writes under the lock are published only while the lease is surely valid: renewed
        // now unless it has half a lease left (the renewals, every quarter lease, run only
        // while this node's clients hold locks), so that they are not refused for want of a
        // renewal that had not come round yet.
        if !self.lease_valid_for(node, self.lease() / 2) && !self.renew_lease(node).await {
            return Err(FsError::new(
                Errno::HostDown,
                format!(
                    "the lock table of inode {} on node {node} does not answer; try again later",
                    r.ino
                ),
            ));
        }
        loop {
            let req = TableListLock {
                ino: r.ino,
                owner,
                seq: r.seq,
                runs: r.runs.clone(),
                wait: r.wait,
            };
            match self.call(node, req).await {
                Err(e) if r.wait && e.errno == Errno::Again => continue,
                other => return other,
            }
        }
    }
}

impl ServeClient<ListUnlock> for Node {
    async fn serve_client(&self, _client: u64, r: ListUnlock) -> FsResult<()> {
        self.check_ino(r.ino)?;
        let req = TableListUnlock {
            ino: r.ino,
            token: r.token,
        };
        self.call(ino_shard(r.ino), req).await
    }
}

impl ServePeer<TableLock> for Node {
    async fn serve_peer(&self, r: TableLock) -> FsResult<()> {
        self.locks
            .lock(r.ino, r.owner, r.kind, r.start, r.end, r.wait)
            .await
    }
}

impl ServePeer<TableGetLock> for Node {
    async fn serve_peer(&self, r: TableGetLock) -> FsResult<Option<HeldLock>> {
        Ok(self.locks.get_lock(r.ino, r.owner, r.kind, r.start, r.end))
    }
}

impl ServePeer<TableListLock> for Node {
    async fn serve_peer(&self, r: TableListLock) -> FsResult<u64> {
        let list = LockList::new(r.runs)?;
        let key = ListKey {
            owner: r.owner.id,
            seq: r.seq,
        };
        self.locks
            .list_lock(r.ino, key, r.owner, list, r.wait)
            .await
    }
}

impl ServePeer<TableListUnlock> for Node {
    async fn serve_peer(&self, r: TableListUnlock) -> FsResult<()> {
        let res = self.locks.manager().list_unlock(r.ino, r.token);
        self.locks.changed.notify_waiters();
        res
    }
}

impl ServePeer<ReleaseLocks> for Node {
    async fn serve_peer(&self, r: ReleaseLocks) -> FsResult<()> {
        self.locks.release_owner(r.owner_id);
        Ok(())
    }
}

impl Node {
    /// The client's connection ended: release its locks wherever it took any.
    pub async fn client_gone(&self, client: u64) {
        let nodes = self
            .locks
            .held_at
            .lock()
            .expect("held_at")
            .remove(&client)
            .unwrap_or_default();
        let owner_id = owner_id(self.id, client);
        for node in nodes {
            if let Err(e) = self.call(node, ReleaseLocks { owner_id }).await {
                tracing::warn!("releasing the locks of client {client} on node {node}: {e}");
            }
        }
    }

    /// The configured lease of a lock.
    pub fn lease(&self) -> Duration {
        Duration::from_millis(self.cfg.lock_lease_ms)
    }
}

fn check_range(start: u64, end: u64) -> FsResult<()> {
    if start >= end {
        return Err(FsError::new(
            Errno::Inval,
            format!("lock range [{start}, {end}) is empty or reversed"),
        ));
    }
    Ok(())
}
