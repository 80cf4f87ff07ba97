//! Byte-range lock service (fcntl record locks on Tessera files).
//!
//! The lock table of a file lives on the node of its inode, so every process of the job, on
//! whatever node, meets the same table. A client's daemon forwards its lock requests there and
//! remembers which nodes hold locks of the client; when the client's connection ends (the
//! process closed its last descriptor or died), the daemon tells those nodes to drop the
//! client's locks. A blocking request (F_SETLKW) waits on the lock node for at most
//! [`LOCK_WAIT_SLICE`] per peer call, then the client's daemon asks again: no peer call outlives
//! the peer timeout, and a waiter whose process disappears stops asking.
//!
//! Locks are volatile, like the kernel's: a daemon restart drops the tables it held.

use crate::Node;
use crate::rpc::{ServeClient, ServePeer};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::Duration;
use tessera_core::locks::{HeldLock, LockKind, LockOwner, LockTable};
use tessera_core::placement::ino_shard;
use tessera_core::{Errno, FsError, FsResult};
use tessera_proto::{GetLock, Lock, ReleaseLocks, TableGetLock, TableLock};

/// Longest one blocking lock call waits on the lock node before the caller asks again.
pub const LOCK_WAIT_SLICE: Duration = Duration::from_secs(5);

/// Lock tables of the files whose inodes live on this node, and what this node's clients hold.
#[derive(Default)]
pub struct LockService {
    state: std::sync::Mutex<LockState>,
    /// Woken on every unlock and release, so waiters re-check.
    changed: tokio::sync::Notify,
    /// For each client of this node: the nodes where it may hold locks.
    held_at: std::sync::Mutex<HashMap<u64, BTreeSet<u32>>>,
}

#[derive(Default)]
struct LockState {
    tables: HashMap<u64, LockTable>,
    /// Owners whose process is gone. A blocking request of such an owner may still be waiting
    /// here (its caller's daemon stopped listening, but this node cannot tell): it must never
    /// be granted. Owner ids are never reused, so the set only grows, by one id per process
    /// that took locks.
    gone: HashSet<u64>,
}

/// The owner id of a client: unique across the job (node id in the high bits).
pub fn owner_id(node: u32, client: u64) -> u64 {
    (u64::from(node) << 40) | (client & ((1 << 40) - 1))
}

fn describe(ino: u64, h: &HeldLock) -> String {
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

impl LockService {
    fn try_lock(
        &self,
        ino: u64,
        owner: LockOwner,
        kind: Option<LockKind>,
        start: u64,
        end: u64,
    ) -> Result<(), HeldLock> {
        let mut state = self.state.lock().expect("lock tables");
        if kind.is_some() && state.gone.contains(&owner.id) {
            return Err(HeldLock {
                start,
                end,
                kind: LockKind::Exclusive,
                owner,
            });
        }
        let tables = &mut state.tables;
        let table = tables.entry(ino).or_default();
        let res = match kind {
            Some(k) => table.try_lock(owner, k, start, end),
            None => {
                table.unlock(owner.id, start, end);
                Ok(())
            }
        };
        if res.is_ok() {
            // An unlock, or a downgrade, may let a waiter in.
            self.changed.notify_waiters();
        }
        if table.is_empty() {
            tables.remove(&ino);
        }
        res
    }

    /// Serves a lock request on this (the inode's) node.
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
        loop {
            // Registered before the check, so an unlock between check and wait is not missed.
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            match self.try_lock(ino, owner, kind, start, end) {
                Ok(()) => return Ok(()),
                Err(held) if held.owner.id == owner.id => {
                    return Err(FsError::new(
                        Errno::Io,
                        format!(
                            "the locks of pid {} were released when its connection to its daemon ended; reopen the file to lock again",
                            owner.pid
                        ),
                    ));
                }
                Err(held) if !wait => {
                    return Err(FsError::new(Errno::Again, describe(ino, &held)));
                }
                Err(held) => {
                    if tokio::time::timeout_at(deadline, notified).await.is_err() {
                        return Err(FsError::new(Errno::Again, describe(ino, &held)));
                    }
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
        let state = self.state.lock().expect("lock tables");
        state
            .tables
            .get(&ino)
            .and_then(|t| t.conflict(owner, kind, start, end))
    }

    /// Drops every lock of `owner_id` on this node's files.
    pub fn release_owner(&self, owner_id: u64) {
        let mut state = self.state.lock().expect("lock tables");
        state.gone.insert(owner_id);
        state.tables.retain(|_, t| {
            t.release_owner(owner_id);
            !t.is_empty()
        });
        // Also wakes a waiting request of the gone owner, which then gives up.
        self.changed.notify_waiters();
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
            self.locks
                .held_at
                .lock()
                .expect("held_at")
                .entry(client)
                .or_default()
                .insert(node);
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
