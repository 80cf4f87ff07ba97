//! Byte-range locks on an open file (fcntl record locks), held at the lock table of the
//! file's inode.

use super::*;
use tessera_core::FsResult;
use tessera_core::locks::{HeldLock, LockKind};
use tessera_proto::{GetLock, Lock};

impl File {
    /// Takes a shared or exclusive lock on `[offset, offset + len)` (`len == 0`: to end of file,
    /// including later growth) for this process. With `wait`, blocks until it is granted;
    /// without, fails with `EAGAIN` naming the holder. A lock of this process replaces what it
    /// held in the range. Locks are released by [`File::unlock`], at close, or when the process
    /// ends.
    ///
    /// Locks synchronise like close and open do (as NFS locks do): after taking one, every
    /// handle of the file in this process re-learns the owners before its next read (the lock
    /// belongs to the process, not to this handle); releasing one publishes this process's
    /// writes first. Writes made under a lock are thus seen by the next holder, which is what
    /// MPI-IO atomic mode builds on.
    pub fn lock(&mut self, offset: u64, len: u64, kind: LockKind, wait: bool) -> FsResult<()> {
        self.lock_request(offset, len, Some(kind), wait)?;
        self.locked = true;
        self.refresh();
        Ok(())
    }

    /// Releases this process's locks on `[offset, offset + len)` (`len == 0`: to end of file),
    /// after publishing its writes.
    pub fn unlock(&mut self, offset: u64, len: u64) -> FsResult<()> {
        // The process's writes, through whichever handle they were made.
        self.check_open()?;
        let client = self.client.clone();
        let mut g = client.lock();
        self.attach_dirty(&mut g)?;
        drop(g);
        self.lock_request(offset, len, None, false)
    }

    /// The first lock of another process that would conflict with `kind` on the range, or
    /// `None` if it could be taken now (fcntl F_GETLK).
    pub fn get_lock(
        &mut self,
        offset: u64,
        len: u64,
        kind: LockKind,
    ) -> FsResult<Option<HeldLock>> {
        self.check_open()?;
        let (start, end) = lock_range(offset, len)?;
        let client = self.client.clone();
        let mut g = client.lock();
        g.call(GetLock {
            ino: self.ino,
            start,
            end,
            kind,
        })
    }

    pub(super) fn lock_request(
        &mut self,
        offset: u64,
        len: u64,
        kind: Option<LockKind>,
        wait: bool,
    ) -> FsResult<()> {
        self.check_open()?;
        let (start, end) = lock_range(offset, len)?;
        let client = self.client.clone();
        let mut g = client.lock();
        g.call(Lock {
            ino: self.ino,
            start,
            end,
            kind,
            wait,
            pid: std::process::id(),
        })
    }
}
