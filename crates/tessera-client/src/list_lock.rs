//! List locks through a file handle: lock exactly the byte ranges an access touches, as
//! strided runs, all or nothing (Aarestad et al.). MPI-IO atomic mode builds on them.
//!
//! A list lock is its own owner: it conflicts with every other lock on its bytes, this
//! process's own record locks and list locks included, and a record unlock does not release
//! it. Like a record lock it synchronises: taking one makes every handle of the file in this
//! process re-learn the owners before its next read; releasing one publishes this process's
//! writes first. While it is held, the process's attaches of the file carry its fencing
//! token, so writes made under a lock that was revoked (its daemon did not renew the lease)
//! are refused instead of overwriting bytes another holder now owns.

use crate::File;
use tessera_core::lock_list::{LockList, LockRun};
use tessera_core::{Errno, FsResult};
use tessera_proto::{ListLock, ListUnlock};

/// A list lock held by this process; give it back to [`File::unlock_list`]. Released anyway
/// when the process's connection to its daemon ends.
#[derive(Debug)]
#[must_use = "a list lock is held until it is given to File::unlock_list"]
pub struct HeldList {
    pub token: u64,
    ino: u64,
}

impl File {
    /// Takes a list lock on `runs` of this file (each shared or exclusive). With `wait`,
    /// blocks until every run is granted, in the order requests arrived at the lock table;
    /// without, fails with `EAGAIN` naming what holds the bytes.
    pub fn lock_list(&mut self, runs: &[LockRun], wait: bool) -> FsResult<HeldList> {
        self.check_open()?;
        // Refused here with the run named, before it travels.
        LockList::new(runs.to_vec())?;
        let client = self.client.clone();
        let mut g = client.lock();
        g.lock_seq += 1;
        let req = ListLock {
            ino: self.ino,
            seq: g.lock_seq,
            runs: runs.to_vec(),
            wait,
            pid: std::process::id(),
        };
        let token = g.call(req)?;
        let fs = g.files.entry(self.ino).or_default();
        fs.fences.push(token);
        fs.view_epoch += 1;
        Ok(HeldList {
            token,
            ino: self.ino,
        })
    }

    /// Publishes this process's writes of the file under the lock's token, then releases it.
    /// If the lock was revoked, the writes are refused (`ESTALE`) and dropped: this process
    /// never publishes them, and reads through it no longer see them.
    pub fn unlock_list(&mut self, held: HeldList) -> FsResult<()> {
        self.check_open()?;
        debug_assert_eq!(held.ino, self.ino, "a list lock goes back to its own file");
        let client = self.client.clone();
        let mut g = client.lock();
        let published = self.attach_dirty(&mut g);
        if let Err(e) = &published
            && e.errno == Errno::Stale
        {
            drop_refused(&mut g, self.ino)?;
        }
        if let Some(fs) = g.files.get_mut(&self.ino) {
            fs.fences.retain(|t| *t != held.token);
        }
        let unlocked = g.call(ListUnlock {
            ino: self.ino,
            token: held.token,
        });
        published.and(unlocked)
    }
}

/// Forgets the unpublished writes of a file whose attach was refused: marked published in the
/// index log (so the daemon does not publish them when the process ends) and gone from what
/// this process reads back.
fn drop_refused(g: &mut crate::client::Inner, ino: u64) -> FsResult<()> {
    let dirty: Vec<(u64, u64)> = match g.files.get(&ino) {
        Some(fs) => fs.dirty.ranges().collect(),
        None => return Ok(()),
    };
    let mut writer = g.writer(ino)?;
    for (start, end) in &dirty {
        writer.mark(tessera_core::index::Entry::PublishedRange {
            start: *start,
            end: *end,
            at: 0,
        })?;
    }
    let fs = g.files.get_mut(&ino).expect("dirty came from it");
    for (start, end) in dirty {
        fs.dirty.remove(start, end);
        fs.local.remove(start, end);
    }
    fs.view_epoch += 1;
    Ok(())
}
