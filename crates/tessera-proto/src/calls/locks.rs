//! Requests of the lock service: byte-range (fcntl) locks and list locks, kept in the lock
//! table on the inode's node, and the leases and fences that take a silent holder's locks away.

use serde::{Deserialize, Serialize};
use tessera_core::lock_list::LockRun;
use tessera_core::lock_manager::Token;
use tessera_core::locks::{LockKind, LockOwner};

/// Take (`kind: Some`) or release (`None`) a byte-range lock `[start, end)` of `ino` for this
/// client (fcntl F_SETLK; F_SETLKW with `wait`). `pid` is reported to F_GETLK.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Lock {
    pub ino: u64,
    pub start: u64,
    pub end: u64,
    pub kind: Option<LockKind>,
    pub wait: bool,
    pub pid: u32,
}

/// The first lock of another process that conflicts with `kind` (fcntl F_GETLK).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GetLock {
    pub ino: u64,
    pub start: u64,
    pub end: u64,
    pub kind: LockKind,
}

/// Take or release a lock in the lock table of `ino`. With `wait`, the answer is delayed until
/// the lock is granted or `LOCK_WAIT_SLICE` has passed (then `EAGAIN`, and the caller asks
/// again).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableLock {
    pub ino: u64,
    pub owner: LockOwner,
    pub start: u64,
    pub end: u64,
    pub kind: Option<LockKind>,
    pub wait: bool,
}

/// [`GetLock`] asked of the lock table of `ino`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableGetLock {
    pub ino: u64,
    pub owner: LockOwner,
    pub start: u64,
    pub end: u64,
    pub kind: LockKind,
}

/// The owner is gone (its process closed the connection): drop its locks on every file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReleaseLocks {
    pub owner_id: u64,
}

/// Take a list lock on `runs` of `ino` for this client: granted whole or not at all, its own
/// owner (a record unlock of the process does not release it). Without `wait`, `EAGAIN` names
/// what holds the bytes. `seq` is the client's number for the request, unique per client.
/// The reply is the grant's fencing token: attaches of writes made under the lock carry it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ListLock {
    pub ino: u64,
    pub seq: u64,
    pub runs: Vec<LockRun>,
    pub wait: bool,
    pub pid: u32,
}

/// Release the list lock `token` of `ino` (`ESTALE` if it was revoked).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ListUnlock {
    pub ino: u64,
    pub token: Token,
}

/// [`ListLock`] asked of the lock table of `ino`. With `wait`, the answer is delayed until the
/// lock is granted or `LOCK_WAIT_SLICE` has passed (then `EAGAIN`, and the caller asks again
/// with the same `seq`, keeping its place in the queue).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableListLock {
    pub ino: u64,
    pub owner: LockOwner,
    pub seq: u64,
    pub runs: Vec<LockRun>,
    pub wait: bool,
}

/// [`ListUnlock`] asked of the lock table of `ino`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableListUnlock {
    pub ino: u64,
    pub token: Token,
}

/// The daemon of node `node` is alive and renews the leases of its clients' locks here.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RenewLease {
    pub node: u32,
}

/// The list lock `token` of `ino` was revoked: refuse every attach that carries it from now on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fence {
    pub ino: u64,
    pub token: Token,
}
