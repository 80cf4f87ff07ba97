//! Requests of the lock service: byte-range locks, kept in the lock table on the inode's node.

use serde::{Deserialize, Serialize};
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
