//! fcntl and flock(2) locks taken through the mount, on the same lock service as the
//! interposer's.
//!
//! Tessera's lock tables know one owner per client connection. Every process on the mount
//! reaches Tessera through the mount's one client, so each lock owner the kernel names (a
//! process's open file table) gets a client connection of its own, opened at its first
//! lock and closed once it holds none: its locks conflict with those of the mount's other
//! processes, and with those of interposed processes anywhere, as POSIX locks between
//! processes do. A flock(2) lock arrives as a whole-file record lock whose owner is the open
//! file description (shared by `dup` and `fork`), released at that description's last
//! close; like the interposer's `flock`, it conflicts with record locks of other owners.
//!
//! Locks synchronise like close and open: before a release, the writes made through the
//! mount to the file are published; after a grant, the mount's handles of the file re-learn
//! its owners, so the next holder reads what the last one wrote under the lock.

use crate::fs::Open;
use crate::handles::Handles;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tessera_client::{Client, File, FsError, InstanceLayout, LockKind, OpenOptions};

/// A lock request as the kernel sends it.
pub struct Request {
    pub ino: u64,
    pub owner: u64,
    /// First and last byte, inclusive (`i64::MAX` or more: to the end of the file).
    pub start: u64,
    pub end: u64,
    /// `F_RDLCK`, `F_WRLCK` or `F_UNLCK`.
    pub typ: i32,
    pub wait: bool,
}

/// A conflicting lock, for `F_GETLK`.
pub struct Held {
    pub start: u64,
    pub end: u64,
    pub typ: i32,
    pub pid: u32,
}

/// One lock owner's connection and the files it has locks on.
struct Owner {
    client: Client,
    files: HashMap<u64, File>,
}

/// The lock owners the kernel named, and how to connect one.
pub struct Locks {
    layout: InstanceLayout,
    node: u32,
    owners: Mutex<HashMap<u64, Arc<Mutex<Owner>>>>,
}

/// Tessera's (offset, length) of an inclusive kernel range; length 0 reaches the end.
pub fn range(start: u64, end: u64) -> (u64, u64) {
    if end >= i64::MAX as u64 {
        (start, 0)
    } else {
        (start, end.saturating_sub(start).saturating_add(1))
    }
}

/// The kernel's inclusive end of a Tessera lock's exclusive end (`u64::MAX`: to the end).
fn kernel_end(end: u64) -> u64 {
    if end == u64::MAX {
        i64::MAX as u64
    } else {
        end.saturating_sub(1)
    }
}

fn kind_of(typ: i32) -> Result<Option<LockKind>, fuser::Errno> {
    match typ {
        libc::F_RDLCK => Ok(Some(LockKind::Shared)),
        libc::F_WRLCK => Ok(Some(LockKind::Exclusive)),
        libc::F_UNLCK => Ok(None),
        _ => Err(fuser::Errno::EINVAL),
    }
}

fn fail(e: FsError) -> fuser::Errno {
    tracing::debug!("lock: {e}");
    crate::convert::errno(&e)
}

impl Locks {
    /// Lock owners connect to node `node` of the instance at `layout`, as the mount does.
    pub fn new(layout: InstanceLayout, node: u32) -> Locks {
        Locks {
            layout,
            node,
            owners: Mutex::default(),
        }
    }

    fn owner(&self, id: u64, create: bool) -> Result<Option<Arc<Mutex<Owner>>>, fuser::Errno> {
        let mut owners = self.owners.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(o) = owners.get(&id) {
            return Ok(Some(o.clone()));
        }
        if !create {
            return Ok(None);
        }
        let client = Client::connect(self.layout.clone(), Some(self.node)).map_err(fail)?;
        let o = Arc::new(Mutex::new(Owner {
            client,
            files: HashMap::new(),
        }));
        owners.insert(id, o.clone());
        Ok(Some(o))
    }

    /// Takes, changes or releases a lock of owner `r.owner` on the file at `path` (its user
    /// path).
    pub fn set(&self, path: &str, r: Request, files: &Handles<Open>) -> Result<(), fuser::Errno> {
        let kind = kind_of(r.typ)?;
        let (offset, len) = range(r.start, r.end);
        let Some(owner) = self.owner(r.owner, kind.is_some())? else {
            // Nothing held: nothing to release.
            return Ok(());
        };
        let mut owner = owner.lock().unwrap_or_else(|e| e.into_inner());
        match kind {
            Some(kind) => {
                if !owner.files.contains_key(&r.ino) {
                    let mut o = OpenOptions::new();
                    o.read(true);
                    let file = owner.client.open(path, &o).map_err(fail)?;
                    owner.files.insert(r.ino, file);
                }
                let file = owner.files.get_mut(&r.ino).expect("just opened");
                file.lock(offset, len, kind, r.wait).map_err(fail)?;
                drop(owner);
                files.each(|o| o.file.ino() == r.ino, |o| o.file.refresh());
            }
            None => {
                publish(r.ino, files);
                if let Some(file) = owner.files.get_mut(&r.ino) {
                    file.unlock(offset, len).map_err(fail)?;
                }
            }
        }
        Ok(())
    }

    /// The first lock of another owner that conflicts with `typ` on the range, if any.
    pub fn get(
        &self,
        path: &str,
        owner: u64,
        start: u64,
        end: u64,
        typ: i32,
    ) -> Result<Option<Held>, fuser::Errno> {
        let Some(kind) = kind_of(typ)? else {
            return Ok(None);
        };
        let (offset, len) = range(start, end);
        let owner = self.owner(owner, true)?.expect("created");
        let owner = owner.lock().unwrap_or_else(|e| e.into_inner());
        let mut o = OpenOptions::new();
        o.read(true);
        let mut file = owner.client.open(path, &o).map_err(fail)?;
        let held = file.get_lock(offset, len, kind).map_err(fail)?;
        let _ = file.close();
        Ok(held.map(|h| Held {
            start: h.start,
            end: kernel_end(h.end),
            typ: match h.kind {
                LockKind::Shared => libc::F_RDLCK,
                LockKind::Exclusive => libc::F_WRLCK,
            },
            pid: h.owner.pid,
        }))
    }

    /// A close by lock owner `owner` of a descriptor of file `ino`: its locks on the file go
    /// (after the mount's writes to it are published), and its connection once it holds
    /// none.
    pub fn release(&self, ino: u64, owner: u64, files: &Handles<Open>) {
        let Ok(Some(held)) = self.owner(owner, false) else {
            return;
        };
        let mut held = held.lock().unwrap_or_else(|e| e.into_inner());
        let Some(file) = held.files.remove(&ino) else {
            return;
        };
        publish(ino, files);
        if let Err(e) = file.close() {
            tracing::warn!("releasing the locks of owner {owner:#x} on inode {ino:#x}: {e}");
        }
        if held.files.is_empty() {
            drop(held);
            self.owners
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&owner);
        }
    }
}

/// Publishes the writes made through the mount to file `ino` (before a lock is released).
fn publish(ino: u64, files: &Handles<Open>) {
    files.each(
        |o| o.file.ino() == ino,
        |o| {
            if let Err(e) = o.file.commit() {
                tracing::warn!("publishing inode {ino:#x} before an unlock: {e}");
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_ranges_become_offset_and_length() {
        assert_eq!(range(0, i64::MAX as u64), (0, 0));
        assert_eq!(range(10, u64::MAX), (10, 0));
        assert_eq!(range(10, 19), (10, 10));
        assert_eq!(range(5, 5), (5, 1));
        assert_eq!(kernel_end(u64::MAX), i64::MAX as u64);
        assert_eq!(kernel_end(20), 19);
    }

    #[test]
    fn only_the_three_lock_types_are_known() {
        assert!(matches!(kind_of(libc::F_RDLCK), Ok(Some(LockKind::Shared))));
        assert!(matches!(
            kind_of(libc::F_WRLCK),
            Ok(Some(LockKind::Exclusive))
        ));
        assert!(matches!(kind_of(libc::F_UNLCK), Ok(None)));
        assert!(kind_of(42).is_err());
    }
}
