//! Where locks are granted: the lock state a node keeps for the files whose lock tables it
//! holds. POSIX record locks ([`LockTable`]) and list locks ([`LockList`]) live side by side
//! and conflict on the same bytes.
//!
//! - **List locks are granted whole or not at all**, each as its own owner (like Linux
//!   open-file-description locks): it conflicts with every other lock on its bytes, the
//!   holder process's own record locks included, and a record unlock never releases it. A
//!   grant carries a fencing token, unique across the node's life and its restarts (the
//!   caller seeds the counter with the clock).
//! - **Waiting list requests queue fairly.** A request is granted when it conflicts with no
//!   held lock and with no request queued before it, so a stream of small requests cannot
//!   starve a large one that waits behind them. A record-lock request does not pass a queued
//!   list request it conflicts with either (it fails with `EAGAIN`, and F_SETLKW asks again).
//! - **Locks are leases of the holder's node.** Each holder's daemon renews ([`LockManager::heard`])
//!   while its processes live; [`LockManager::expire`] drops the record locks and the queued
//!   requests of a node silent for longer than the lease and revokes its list grants. A
//!   revoked grant keeps its bytes until the caller has fenced its token on every node that
//!   could publish writes made under it ([`LockManager::fenced`]): only then can another
//!   request be granted over them.
//!
//! Pure state: time is a millisecond count the caller passes in; waiting and waking are the
//! daemon's.

use crate::lock_list::LockList;
use crate::locks::{HeldLock, LockKind, LockOwner, LockTable, owner_node};
use crate::{Errno, FsError, FsResult};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet, VecDeque};

/// A list lock's fencing token.
pub type Token = u64;

/// A list grant revoked because its holder's node was silent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Revoked {
    pub ino: u64,
    pub token: Token,
    pub holder: LockOwner,
}

/// Names one list request across the holder daemon's repeated asks: the owner and its
/// sequence number of the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ListKey {
    pub owner: u64,
    pub seq: u64,
}

/// Where a list request stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListState {
    Granted(Token),
    /// Queued behind the lock or the earlier request that blocks it.
    Waiting(HeldLock),
    /// Granted, then revoked when its holder's lease ran out.
    Revoked(Token),
}

/// A list lock held by an owner.
#[derive(Clone, Debug)]
struct Grant {
    key: ListKey,
    owner: LockOwner,
    list: LockList,
    token: Token,
    /// The lease ran out: no longer the holder's, but still in the way until fenced.
    revoked: bool,
}

#[derive(Clone, Debug)]
struct Waiter {
    key: ListKey,
    owner: LockOwner,
    list: LockList,
}

/// The locks of one file.
#[derive(Clone, Debug, Default)]
struct FileLocks {
    posix: LockTable,
    grants: Vec<Grant>,
    queue: VecDeque<Waiter>,
}

impl FileLocks {
    fn is_empty(&self) -> bool {
        self.posix.is_empty() && self.grants.is_empty() && self.queue.is_empty()
    }

    /// The first held lock that keeps `list` out, for the error or the wait.
    fn held_conflict(&self, list: &LockList) -> Option<HeldLock> {
        if let Some(g) = self.grants.iter().find(|g| g.list.conflicts(list)) {
            return Some(as_held(g.owner, &g.list));
        }
        self.posix
            .held()
            .into_iter()
            .find(|h| list.conflicts_range(h.start, h.end, h.kind))
    }

    /// What keeps `list` waiting behind the first `ahead` queued requests: the first of them it
    /// conflicts with, else the first held lock it conflicts with.
    fn blocker(&self, list: &LockList, ahead: usize) -> Option<HeldLock> {
        self.queue
            .iter()
            .take(ahead)
            .find(|w| w.list.conflicts(list))
            .map(|w| as_held(w.owner, &w.list))
            .or_else(|| self.held_conflict(list))
    }

    /// Grants every queued request that no held lock and no earlier waiter blocks.
    fn grant_queued(&mut self, next_token: &mut Grants) -> usize {
        let mut granted = 0;
        let mut ahead: Vec<Waiter> = Vec::new();
        for w in std::mem::take(&mut self.queue) {
            let blocked = ahead.iter().any(|a| a.list.conflicts(&w.list))
                || self.held_conflict(&w.list).is_some();
            if blocked {
                ahead.push(w);
            } else {
                let token = next_token.take(&w.list);
                self.grants.push(Grant {
                    key: w.key,
                    owner: w.owner,
                    list: w.list,
                    token,
                    revoked: false,
                });
                granted += 1;
            }
        }
        self.queue = ahead.into();
        granted
    }

    /// Distinct owners holding a lock of the file now.
    fn holders(&self) -> usize {
        let mut ids: HashSet<(bool, u64)> = self
            .posix
            .held()
            .iter()
            .map(|h| (false, h.owner.id))
            .collect();
        // Each list grant is an owner of its own.
        ids.extend(self.grants.iter().map(|g| (true, g.token)));
        ids.len()
    }
}

/// Hands out tokens, and counts the grants.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Grants {
    next_token: Token,
    /// List locks granted.
    pub granted: u64,
    /// Runs of the list locks granted.
    pub runs: u64,
}

impl Grants {
    fn take(&mut self, list: &LockList) -> Token {
        self.granted += 1;
        self.runs += list.runs().len() as u64;
        let t = self.next_token;
        self.next_token += 1;
        t
    }
}

/// A list lock reported as the range covering it.
fn as_held(owner: LockOwner, list: &LockList) -> HeldLock {
    let (start, end) = list.extent();
    let kind = if list.runs().iter().any(|r| r.kind == LockKind::Exclusive) {
        LockKind::Exclusive
    } else {
        LockKind::Shared
    };
    HeldLock {
        start,
        end,
        kind,
        owner,
    }
}

/// The lock state of the files whose lock tables live on one node.
#[derive(Debug)]
pub struct LockManager {
    files: HashMap<u64, FileLocks>,
    grants: Grants,
    /// Owners whose process is gone. A request of such an owner may still arrive (its daemon
    /// asked before it learnt): it is never granted. Owner ids are never reused.
    gone: HashSet<u64>,
    /// When each holder node was last heard from (renewal or request), in the caller's ms.
    heard: HashMap<u32, u64>,
    /// The most owners that held locks of one file at once.
    peak_holders: usize,
}

impl LockManager {
    /// An empty manager whose first token is `first_token` (seed it with the clock so that a
    /// restarted node never hands out a token it handed out before).
    pub fn new(first_token: Token) -> Self {
        LockManager {
            files: HashMap::new(),
            grants: Grants {
                next_token: first_token.max(1),
                ..Grants::default()
            },
            gone: HashSet::new(),
            heard: HashMap::new(),
            peak_holders: 0,
        }
    }

    /// The holder node `node` is alive at `now` (its daemon renewed, or asked for a lock).
    pub fn heard(&mut self, node: u32, now: u64) {
        let t = self.heard.entry(node).or_insert(now);
        *t = (*t).max(now);
    }

    fn is_gone(&self, owner: u64) -> bool {
        self.gone.contains(&owner)
    }

    fn gone_error(owner: LockOwner) -> FsError {
        FsError::new(
            Errno::Io,
            format!(
                "the locks of pid {} were released when its connection to its daemon ended; reopen the file to lock again",
                owner.pid
            ),
        )
    }

    fn note_peak(&mut self, ino: u64) {
        if let Some(f) = self.files.get(&ino) {
            self.peak_holders = self.peak_holders.max(f.holders());
        }
    }

    fn tidy(&mut self, ino: u64) {
        if self.files.get(&ino).is_some_and(FileLocks::is_empty) {
            self.files.remove(&ino);
        }
    }

    /// Asks for a list lock (again, with the same key, after a wait that timed out). Without
    /// `wait`, a request that cannot be granted now is not queued: the error names what holds
    /// the bytes.
    pub fn list_lock(
        &mut self,
        ino: u64,
        key: ListKey,
        owner: LockOwner,
        list: LockList,
        wait: bool,
        now: u64,
    ) -> FsResult<ListState> {
        if self.is_gone(owner.id) {
            return Err(Self::gone_error(owner));
        }
        self.heard(owner_node(owner.id), now);
        if let Some(state) = self.list_state(ino, key) {
            return Ok(state);
        }
        let f = self.files.entry(ino).or_default();
        let state = match f.blocker(&list, f.queue.len()) {
            None => {
                let token = self.grants.take(&list);
                f.grants.push(Grant {
                    key,
                    owner,
                    list,
                    token,
                    revoked: false,
                });
                ListState::Granted(token)
            }
            Some(b) if wait => {
                f.queue.push_back(Waiter { key, owner, list });
                ListState::Waiting(b)
            }
            Some(b) => {
                self.tidy(ino);
                return Err(FsError::new(Errno::Again, describe(ino, &b)));
            }
        };
        self.note_peak(ino);
        Ok(state)
    }

    /// Where the request `key` stands, or `None` if it is unknown (never asked, given up, or
    /// unlocked).
    pub fn list_state(&self, ino: u64, key: ListKey) -> Option<ListState> {
        let f = self.files.get(&ino)?;
        if let Some(g) = f.grants.iter().find(|g| g.key == key) {
            return Some(if g.revoked {
                ListState::Revoked(g.token)
            } else {
                ListState::Granted(g.token)
            });
        }
        let pos = f.queue.iter().position(|w| w.key == key)?;
        let w = &f.queue[pos];
        // Granted at the next change if nothing blocks it now: reported as its own range.
        let blocker = f
            .blocker(&w.list, pos)
            .unwrap_or_else(|| as_held(w.owner, &w.list));
        Some(ListState::Waiting(blocker))
    }

    /// Withdraws a queued request (its asker gave up); a granted one stays granted.
    pub fn cancel(&mut self, ino: u64, key: ListKey) {
        if let Some(f) = self.files.get_mut(&ino) {
            f.queue.retain(|w| w.key != key);
            f.grant_queued(&mut self.grants);
        }
        self.note_peak(ino);
        self.tidy(ino);
    }

    /// Releases the list lock `token`. A revoked or unknown token is `ESTALE`: the lock was
    /// taken away when its holder's lease ran out.
    pub fn list_unlock(&mut self, ino: u64, token: Token) -> FsResult<()> {
        let f = self.files.get_mut(&ino);
        let found = f.and_then(|f| {
            let i = f
                .grants
                .iter()
                .position(|g| g.token == token && !g.revoked)?;
            f.grants.swap_remove(i);
            f.grant_queued(&mut self.grants);
            Some(())
        });
        self.note_peak(ino);
        self.tidy(ino);
        found.ok_or_else(|| stale(ino, token))
    }

    /// A record-lock request (`kind: None` unlocks). It conflicts with other owners' record
    /// locks, with every list grant, and with queued list requests (which it may not pass).
    pub fn posix(
        &mut self,
        ino: u64,
        owner: LockOwner,
        kind: Option<LockKind>,
        start: u64,
        end: u64,
        now: u64,
    ) -> FsResult<()> {
        if kind.is_some() && self.is_gone(owner.id) {
            return Err(Self::gone_error(owner));
        }
        self.heard(owner_node(owner.id), now);
        let f = self.files.entry(ino).or_default();
        let res = match kind {
            None => {
                f.posix.unlock(owner.id, start, end);
                f.grant_queued(&mut self.grants);
                Ok(())
            }
            Some(k) => {
                let list_blocker = f
                    .grants
                    .iter()
                    .map(|g| (g.owner, &g.list))
                    .chain(f.queue.iter().map(|w| (w.owner, &w.list)))
                    .find(|(_, l)| l.conflicts_range(start, end, k))
                    .map(|(o, l)| as_held(o, l));
                let res = match list_blocker {
                    Some(b) => Err(b),
                    None => f.posix.try_lock(owner, k, start, end),
                };
                if res.is_ok() {
                    // A lock of the owner replaces what it held in the range: a downgrade to
                    // shared may let a queued request in.
                    f.grant_queued(&mut self.grants);
                }
                res.map_err(|b| FsError::new(Errno::Again, describe(ino, &b)))
            }
        };
        self.note_peak(ino);
        self.tidy(ino);
        res
    }

    /// The first lock of another owner that a record lock of `kind` on `[start, end)` would
    /// conflict with (fcntl F_GETLK): record locks first, then list grants.
    pub fn posix_conflict(
        &self,
        ino: u64,
        owner: LockOwner,
        kind: LockKind,
        start: u64,
        end: u64,
    ) -> Option<HeldLock> {
        let f = self.files.get(&ino)?;
        f.posix.conflict(owner, kind, start, end).or_else(|| {
            f.grants
                .iter()
                .find(|g| g.list.conflicts_range(start, end, kind))
                .map(|g| as_held(g.owner, &g.list))
        })
    }

    /// Drops every lock and queued request of `owner_id` (its process ended); it can never
    /// lock again.
    pub fn release_owner(&mut self, owner_id: u64) {
        self.gone.insert(owner_id);
        let inos: Vec<u64> = self.files.keys().copied().collect();
        for ino in inos {
            let f = self.files.get_mut(&ino).expect("listed");
            f.posix.release_owner(owner_id);
            f.grants.retain(|g| g.owner.id != owner_id || g.revoked);
            f.queue.retain(|w| w.owner.id != owner_id);
            f.grant_queued(&mut self.grants);
            self.note_peak(ino);
            self.tidy(ino);
        }
    }

    /// Takes the locks of every holder node not heard from for more than `lease_ms` before
    /// `now`: their record locks and queued requests go at once; their list grants are
    /// revoked and returned, for the caller to fence their tokens and then call
    /// [`LockManager::fenced`].
    pub fn expire(&mut self, now: u64, lease_ms: u64) -> Vec<Revoked> {
        let silent: HashSet<u32> = self
            .heard
            .iter()
            .filter(|(_, t)| now.saturating_sub(**t) > lease_ms)
            .map(|(n, _)| *n)
            .collect();
        if silent.is_empty() {
            return Vec::new();
        }
        self.heard.retain(|n, _| !silent.contains(n));
        let of_silent = |id: u64| silent.contains(&owner_node(id));
        let mut revoked = Vec::new();
        let inos: Vec<u64> = self.files.keys().copied().collect();
        for ino in inos {
            let f = self.files.get_mut(&ino).expect("listed");
            let posix_owners: HashSet<u64> = f
                .posix
                .held()
                .iter()
                .map(|h| h.owner.id)
                .filter(|id| of_silent(*id))
                .collect();
            for id in posix_owners {
                f.posix.release_owner(id);
            }
            f.queue.retain(|w| !of_silent(w.owner.id));
            for g in f.grants.iter_mut().filter(|g| !g.revoked) {
                if of_silent(g.owner.id) {
                    g.revoked = true;
                    revoked.push(Revoked {
                        ino,
                        token: g.token,
                        holder: g.owner,
                    });
                }
            }
            f.grant_queued(&mut self.grants);
            self.note_peak(ino);
            self.tidy(ino);
        }
        revoked
    }

    /// The revoked grant `token` is fenced everywhere: its bytes are free for the next request.
    pub fn fenced(&mut self, ino: u64, token: Token) {
        if let Some(f) = self.files.get_mut(&ino) {
            f.grants.retain(|g| !(g.revoked && g.token == token));
            f.grant_queued(&mut self.grants);
        }
        self.note_peak(ino);
        self.tidy(ino);
    }

    /// The most owners that held locks of one file at once.
    pub fn peak_holders(&self) -> usize {
        self.peak_holders
    }

    /// List locks granted and their runs, since the start.
    pub fn grants(&self) -> Grants {
        self.grants
    }

    /// Every list grant of the file: (token, holder, revoked), in grant order.
    pub fn list_grants(&self, ino: u64) -> Vec<(Token, LockOwner, bool)> {
        self.files.get(&ino).map_or_else(Vec::new, |f| {
            f.grants
                .iter()
                .map(|g| (g.token, g.owner, g.revoked))
                .collect()
        })
    }

    /// Queued list requests of the file, first first.
    pub fn queued(&self, ino: u64) -> Vec<ListKey> {
        self.files
            .get(&ino)
            .map_or_else(Vec::new, |f| f.queue.iter().map(|w| w.key).collect())
    }

    /// Files with any lock state.
    pub fn files(&self) -> usize {
        self.files.len()
    }
}

fn stale(ino: u64, token: Token) -> FsError {
    FsError::new(
        Errno::Stale,
        format!(
            "list lock {token} of inode {ino} is no longer held: it was revoked when its holder's daemon stopped renewing its lease, and the writes made under it were refused; lock again and redo them"
        ),
    )
}

/// What holds bytes a request wants, for its `EAGAIN`.
pub fn describe(ino: u64, h: &HeldLock) -> String {
    let kind = match h.kind {
        LockKind::Shared => "a shared (read) lock",
        LockKind::Exclusive => "an exclusive (write) lock",
    };
    let end = if h.end == u64::MAX {
        "end of file".to_string()
    } else {
        h.end.to_string()
    };
    format!(
        "bytes [{}, {end}) of inode {ino} are held under {kind} by pid {}; wait with F_SETLKW or try again later",
        h.start, h.owner.pid
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lock_list::LockRun;
    use crate::locks::owner_id;
    use crate::run::Run;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    const INO: u64 = 7;

    fn owner(node: u32, client: u64) -> LockOwner {
        LockOwner {
            id: owner_id(node, client),
            pid: client as u32,
        }
    }

    fn key(o: LockOwner, seq: u64) -> ListKey {
        ListKey { owner: o.id, seq }
    }

    fn strided(start: u64, len: u64, stride: u64, count: u64, kind: LockKind) -> LockList {
        LockList::new(vec![LockRun {
            run: Run {
                start,
                len,
                stride,
                count,
            },
            kind,
        }])
        .unwrap()
    }

    fn granted(s: ListState) -> Token {
        match s {
            ListState::Granted(t) => t,
            s => panic!("not granted: {s:?}"),
        }
    }

    #[test]
    fn interleaved_ranks_hold_at_once_and_tokens_increase() {
        let mut m = LockManager::new(100);
        let mut tokens = Vec::new();
        for r in 0..8u64 {
            let o = owner(r as u32 % 2, r);
            let l = strided(r * 10, 10, 80, 1000, LockKind::Exclusive);
            tokens.push(granted(m.list_lock(INO, key(o, 1), o, l, true, 0).unwrap()));
        }
        assert!(tokens.windows(2).all(|w| w[0] < w[1]) && tokens[0] >= 100);
        assert_eq!(m.peak_holders(), 8);
        assert_eq!((m.grants().granted, m.grants().runs), (8, 8));
        // A whole-file record lock of another process waits for all of them.
        let p = owner(3, 99);
        let e = m
            .posix(INO, p, Some(LockKind::Exclusive), 0, u64::MAX, 0)
            .unwrap_err();
        assert_eq!(e.errno, Errno::Again);
        for t in tokens {
            m.list_unlock(INO, t).unwrap();
        }
        m.posix(INO, p, Some(LockKind::Exclusive), 0, u64::MAX, 0)
            .unwrap();
        assert_eq!(
            m.list_unlock(INO, 100).unwrap_err().errno,
            Errno::Stale,
            "a second unlock of a token"
        );
    }

    #[test]
    fn a_large_request_is_not_starved_by_small_ones() {
        let mut m = LockManager::new(1);
        let a = owner(0, 1);
        let big = owner(0, 2);
        let small = owner(0, 3);
        let t = granted(
            m.list_lock(
                INO,
                key(a, 1),
                a,
                strided(0, 10, 10, 1, LockKind::Exclusive),
                true,
                0,
            )
            .unwrap(),
        );
        let whole = strided(0, 1000, 1000, 1, LockKind::Exclusive);
        assert!(matches!(
            m.list_lock(INO, key(big, 1), big, whole, true, 0).unwrap(),
            ListState::Waiting(_)
        ));
        // Free bytes, but behind the queued large request: queued, not granted.
        let s = strided(500, 10, 10, 1, LockKind::Exclusive);
        assert!(matches!(
            m.list_lock(INO, key(small, 1), small, s.clone(), true, 0)
                .unwrap(),
            ListState::Waiting(_)
        ));
        // Nor does a record lock pass it, and a non-waiting list request fails.
        assert!(
            m.posix(INO, small, Some(LockKind::Shared), 600, 601, 0)
                .is_err()
        );
        let e = m
            .list_lock(INO, key(small, 2), small, s, false, 0)
            .unwrap_err();
        assert_eq!(e.errno, Errno::Again);
        m.list_unlock(INO, t).unwrap();
        assert!(matches!(
            m.list_state(INO, key(big, 1)),
            Some(ListState::Granted(_))
        ));
        assert!(matches!(
            m.list_state(INO, key(small, 1)),
            Some(ListState::Waiting(_))
        ));
    }

    #[test]
    fn list_locks_are_their_own_owners() {
        let mut m = LockManager::new(1);
        let p = owner(0, 1);
        m.posix(INO, p, Some(LockKind::Exclusive), 0, 100, 0)
            .unwrap();
        // The same process's list lock conflicts with its record lock...
        let l = strided(50, 10, 10, 1, LockKind::Exclusive);
        assert!(m.list_lock(INO, key(p, 1), p, l.clone(), false, 0).is_err());
        m.posix(INO, p, None, 0, 100, 0).unwrap();
        let t = granted(m.list_lock(INO, key(p, 1), p, l, false, 0).unwrap());
        // ...and a record unlock of the process does not release it.
        m.posix(INO, p, None, 0, u64::MAX, 0).unwrap();
        assert_eq!(m.list_grants(INO), vec![(t, p, false)]);
        assert!(m.posix_conflict(INO, p, LockKind::Shared, 55, 56).is_some());
        m.release_owner(p.id);
        assert!(m.list_grants(INO).is_empty());
        assert_eq!(m.files(), 0);
        let again = strided(0, 1, 1, 1, LockKind::Shared);
        assert!(m.list_lock(INO, key(p, 2), p, again, false, 0).is_err());
    }

    #[test]
    fn a_silent_node_loses_its_locks_after_fencing() {
        let mut m = LockManager::new(1);
        let a = owner(1, 1);
        let b = owner(2, 1);
        let l = strided(0, 100, 100, 1, LockKind::Exclusive);
        let t = granted(m.list_lock(INO, key(a, 1), a, l.clone(), true, 0).unwrap());
        m.posix(INO, a, Some(LockKind::Shared), 1000, 2000, 0)
            .unwrap();
        assert!(matches!(
            m.list_lock(INO, key(b, 1), b, l, true, 0).unwrap(),
            ListState::Waiting(_)
        ));
        m.heard(1, 900);
        m.heard(2, 1500);
        assert!(m.expire(1500, 1000).is_empty(), "node 1 heard 600 ms ago");
        m.heard(2, 2500);
        let revoked = Revoked {
            ino: INO,
            token: t,
            holder: a,
        };
        assert_eq!(m.expire(2500, 1000), vec![revoked]);
        // Revoked: not the holder's any more, but still in the way until fenced.
        assert_eq!(m.list_state(INO, key(a, 1)), Some(ListState::Revoked(t)));
        assert!(matches!(
            m.list_state(INO, key(b, 1)),
            Some(ListState::Waiting(_))
        ));
        assert_eq!(m.list_unlock(INO, t).unwrap_err().errno, Errno::Stale);
        // The record lock went at once.
        m.posix(INO, b, Some(LockKind::Exclusive), 1000, 2000, 2500)
            .unwrap();
        m.fenced(INO, t);
        assert!(matches!(
            m.list_state(INO, key(b, 1)),
            Some(ListState::Granted(_))
        ));
        assert_eq!(m.list_state(INO, key(a, 1)), None);
    }

    /// Operations of the property test: owners 0..4 on nodes 0..2 (owner % 2).
    #[derive(Clone, Debug)]
    enum Op {
        List {
            o: u64,
            runs: Vec<LockRun>,
            wait: bool,
        },
        Unlock {
            o: u64,
            pick: usize,
        },
        Posix {
            o: u64,
            kind: Option<bool>,
            s: u64,
            e: u64,
        },
        Release {
            o: u64,
        },
        Tick {
            node: u32,
            ms: u64,
        },
        Fence {
            pick: usize,
        },
    }

    fn lock_run() -> impl Strategy<Value = LockRun> {
        (0u64..60, 1u64..8, 0u64..10, 1u64..5, any::<bool>()).prop_map(
            |(start, len, extra, count, x)| LockRun {
                run: Run {
                    start,
                    len,
                    stride: len + extra,
                    count,
                },
                kind: if x {
                    LockKind::Exclusive
                } else {
                    LockKind::Shared
                },
            },
        )
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            5 => (0u64..4, proptest::collection::vec(lock_run(), 1..4), any::<bool>())
                .prop_map(|(o, runs, wait)| Op::List { o, runs, wait }),
            3 => (0u64..4, any::<usize>()).prop_map(|(o, pick)| Op::Unlock { o, pick }),
            2 => (0u64..4, proptest::option::of(any::<bool>()), 0u64..80, 1u64..30)
                .prop_map(|(o, kind, s, l)| Op::Posix { o, kind, s, e: s + l }),
            1 => (0u64..4).prop_map(|o| Op::Release { o }),
            2 => (0u32..2, 1u64..800).prop_map(|(node, ms)| Op::Tick { node, ms }),
            1 => any::<usize>().prop_map(|pick| Op::Fence { pick }),
        ]
    }

    /// Every byte's holders, expanded: (holder, kind) per byte.
    fn byte_holders(
        m: &LockManager,
        lists: &HashMap<Token, LockList>,
    ) -> BTreeMap<u64, Vec<(String, LockKind)>> {
        let mut bytes: BTreeMap<u64, Vec<(String, LockKind)>> = BTreeMap::new();
        let f = match m.files.get(&INO) {
            Some(f) => f,
            None => return bytes,
        };
        for h in f.posix.held() {
            for b in h.start..h.end.min(200) {
                bytes
                    .entry(b)
                    .or_default()
                    .push((format!("p{}", h.owner.id), h.kind));
            }
        }
        for g in &f.grants {
            assert_eq!(lists[&g.token], g.list, "a grant's bytes never change");
            for r in g.list.runs() {
                for (s, e) in r.run.pieces() {
                    for b in s..e {
                        bytes
                            .entry(b)
                            .or_default()
                            .push((format!("t{}", g.token), r.kind));
                    }
                }
            }
        }
        bytes
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        /// Random requests, unlocks, record locks, process deaths and silences. After every
        /// step: no byte is held by two owners under incompatible kinds; no queued request
        /// could be granted (the queue never stalls); no request was granted while an earlier
        /// queued one it conflicts with still waits (fairness); a silent node's grants are
        /// revoked, never silently dropped.
        #[test]
        fn grants_are_safe_live_and_fair(ops in proptest::collection::vec(op(), 1..60)) {
            let mut m = LockManager::new(1);
            let mut now = 0u64;
            let lease = 1000;
            let mut seq = 0u64;
            let mut lists: HashMap<Token, LockList> = HashMap::new();
            let own = |o: u64| owner((o % 2) as u32, o);
            for op in ops {
                let queue_before: Vec<(ListKey, LockList)> = m
                    .files
                    .get(&INO)
                    .map(|f| f.queue.iter().map(|w| (w.key, w.list.clone())).collect())
                    .unwrap_or_default();
                match op {
                    Op::List { o, runs, wait } => {
                        seq += 1;
                        let list = LockList::new(runs).unwrap();
                        if let Ok(ListState::Granted(t)) =
                            m.list_lock(INO, key(own(o), seq), own(o), list.clone(), wait, now)
                        {
                            lists.insert(t, list);
                        }
                    }
                    Op::Unlock { o, pick } => {
                        let mine: Vec<Token> = m
                            .list_grants(INO)
                            .into_iter()
                            .filter(|(_, ow, r)| ow.id == own(o).id && !r)
                            .map(|(t, _, _)| t)
                            .collect();
                        if !mine.is_empty() {
                            m.list_unlock(INO, mine[pick % mine.len()]).unwrap();
                        }
                    }
                    Op::Posix { o, kind, s, e } => {
                        let k = kind.map(|x| if x { LockKind::Exclusive } else { LockKind::Shared });
                        let _ = m.posix(INO, own(o), k, s, e, now);
                    }
                    Op::Release { o } => m.release_owner(own(o).id),
                    Op::Tick { node, ms } => {
                        now += ms;
                        m.heard(node, now);
                        let before = m.list_grants(INO);
                        let revoked = m.expire(now, lease);
                        for r in &revoked {
                            prop_assert_eq!(r.ino, INO);
                            prop_assert!(before.iter().any(|(bt, o, rv)| *bt == r.token && !rv && *o == r.holder));
                        }
                        let after = m.list_grants(INO);
                        for (t, _, _) in &before {
                            prop_assert!(after.iter().any(|(at, _, _)| at == t), "revoking drops nothing");
                        }
                    }
                    Op::Fence { pick } => {
                        let revoked: Vec<Token> = m
                            .list_grants(INO)
                            .into_iter()
                            .filter(|(_, _, r)| *r)
                            .map(|(t, _, _)| t)
                            .collect();
                        if !revoked.is_empty() {
                            m.fenced(INO, revoked[pick % revoked.len()]);
                        }
                    }
                }
                // Newly granted queued requests.
                for (t, _, _) in m.list_grants(INO) {
                    if let std::collections::hash_map::Entry::Vacant(v) = lists.entry(t) {
                        let f = &m.files[&INO];
                        let g = f.grants.iter().find(|g| g.token == t).unwrap();
                        let pos = queue_before.iter().position(|(k, _)| *k == g.key);
                        prop_assert!(pos.is_some(), "a grant out of nowhere");
                        // Fairness: every earlier conflicting waiter left the queue too.
                        for (k, l) in &queue_before[..pos.unwrap()] {
                            if l.conflicts(&g.list) {
                                prop_assert!(!f.queue.iter().any(|w| w.key == *k));
                            }
                        }
                        v.insert(g.list.clone());
                    }
                }
                // Safety.
                for (b, hs) in byte_holders(&m, &lists) {
                    for (i, (h1, k1)) in hs.iter().enumerate() {
                        for (h2, k2) in &hs[i + 1..] {
                            prop_assert!(h1 == h2 || k1.compatible(*k2), "byte {} held by {} and {}", b, h1, h2);
                        }
                    }
                }
                // Liveness: the queue's head of each conflict chain is blocked by a holder.
                if let Some(f) = m.files.get(&INO) {
                    for (i, w) in f.queue.iter().enumerate() {
                        let ahead = f.queue.iter().take(i).any(|a| a.list.conflicts(&w.list));
                        prop_assert!(ahead || f.held_conflict(&w.list).is_some(), "{:?} could be granted", w.key);
                    }
                }
            }
        }
    }
}
