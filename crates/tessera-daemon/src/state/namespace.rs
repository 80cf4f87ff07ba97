//! The namespace shard of one daemon: the directory entries whose paths hash here, and the
//! inodes this daemon created.
//!
//! Entries are keyed by (parent directory, name), so listing a directory's entries on this
//! shard is one ordered range scan. An inode carries the creating node in its number and
//! stays on that node for life, so a rename moves only the entry. The structure is plain
//! in-memory state; every mutation returns the [`DbOp`]s that make it durable.

use crate::store::{DbOp, Loaded, MetaKey};
use std::collections::{BTreeMap, HashMap};
use tessera_core::path;
use tessera_core::placement::make_ino;
use tessera_core::{Errno, FsError, FsResult};
use tessera_proto::{Attr, AttrChange, Dentry, DirEntry, FileKind, SizeChange};

/// Inode number of the root directory (never stored: the root always exists).
pub const ROOT_INO: u64 = 1;

pub struct Namespace {
    node: u32,
    next_counter: u64,
    entries: BTreeMap<(String, String), Dentry>,
    inodes: HashMap<u64, Attr>,
}

/// Attributes of a new file or directory (or of one found on the PFS).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewNode {
    pub kind: FileKind,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub mtime_ns: i64,
}

pub fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

fn key(p: &str) -> FsResult<(String, String)> {
    let (parent, name) = path::split(p)
        .ok_or_else(|| FsError::new(Errno::Inval, "the root directory has no entry"))?;
    Ok((parent.to_string(), name.to_string()))
}

impl Namespace {
    pub fn new(node: u32, loaded: &Loaded) -> Self {
        Namespace {
            node,
            // Counter 0 and 1 are reserved (ino 1 is the root on node 0).
            next_counter: loaded.next_ino.max(2),
            entries: loaded
                .dentries
                .iter()
                .map(|(p, n, d)| ((p.clone(), n.clone()), *d))
                .collect(),
            inodes: loaded.inodes.iter().map(|a| (a.ino, a.clone())).collect(),
        }
    }

    pub fn get(&self, p: &str) -> Option<Dentry> {
        self.entries.get(&key(p).ok()?).copied()
    }

    pub fn attr(&self, ino: u64) -> Option<Attr> {
        self.inodes.get(&ino).cloned()
    }

    pub fn inode_count(&self) -> usize {
        self.inodes.len()
    }

    /// Creates the entry and its inode; an existing entry is returned (`false`) unless
    /// `exclusive`, in which case it is `EEXIST`.
    pub fn create(
        &mut self,
        p: &str,
        new: NewNode,
        exclusive: bool,
    ) -> FsResult<(Dentry, bool, Vec<DbOp>)> {
        if let Some(d) = self.get(p) {
            if exclusive {
                return Err(FsError::new(Errno::Exist, format!("{p} already exists")));
            }
            return Ok((d, false, Vec::new()));
        }
        let ino = make_ino(self.node, self.next_counter);
        self.next_counter += 1;
        let attr = Attr {
            ino,
            kind: new.kind,
            mode: new.mode,
            uid: new.uid,
            gid: new.gid,
            size: new.size,
            atime_ns: new.mtime_ns,
            mtime_ns: new.mtime_ns,
            ctime_ns: new.mtime_ns,
        };
        let dentry = Dentry {
            ino,
            kind: new.kind,
        };
        let (parent, name) = key(p)?;
        self.entries.insert((parent.clone(), name.clone()), dentry);
        self.inodes.insert(ino, attr.clone());
        let ops = vec![
            DbOp::SetMeta(MetaKey::NextIno, self.next_counter),
            DbOp::PutInode(attr),
            DbOp::PutDentry {
                parent,
                name,
                dentry,
            },
        ];
        Ok((dentry, true, ops))
    }

    /// Removes the entry if it still names `ino`.
    pub fn remove(&mut self, p: &str, ino: u64) -> FsResult<(bool, Vec<DbOp>)> {
        let (parent, name) = key(p)?;
        let k = (parent, name);
        Ok(match self.entries.get(&k) {
            Some(d) if d.ino == ino => {
                self.entries.remove(&k);
                let (parent, name) = k;
                (true, vec![DbOp::DelDentry { parent, name }])
            }
            _ => (false, Vec::new()),
        })
    }

    /// Inserts or replaces an entry; returns the replaced one.
    pub fn put(&mut self, p: &str, dentry: Dentry) -> FsResult<(Option<Dentry>, Vec<DbOp>)> {
        let (parent, name) = key(p)?;
        let old = self.entries.insert((parent.clone(), name.clone()), dentry);
        Ok((
            old,
            vec![DbOp::PutDentry {
                parent,
                name,
                dentry,
            }],
        ))
    }

    /// Entries of this shard directly inside `dir`.
    pub fn children(&self, dir: &str) -> Vec<DirEntry> {
        self.entries
            .range((dir.to_string(), String::new())..)
            .take_while(|((parent, _), _)| parent == dir)
            .map(|((_, name), d)| DirEntry {
                name: name.clone(),
                ino: d.ino,
                kind: d.kind,
            })
            .collect()
    }

    pub fn has_children(&self, dir: &str) -> bool {
        self.entries
            .range((dir.to_string(), String::new())..)
            .next()
            .is_some_and(|((parent, _), _)| parent == dir)
    }

    /// Changes the size of an inode held here (attach extends, truncate sets).
    fn inode_mut(&mut self, ino: u64) -> FsResult<&mut Attr> {
        self.inodes.get_mut(&ino).ok_or_else(|| {
            FsError::new(
                Errno::NoEnt,
                format!("inode {ino:#x} no longer exists (file removed?)"),
            )
        })
    }

    pub fn set_size(
        &mut self,
        ino: u64,
        change: SizeChange,
        now: i64,
    ) -> FsResult<(Attr, Vec<DbOp>)> {
        let attr = self.inode_mut(ino)?;
        let new_size = match change {
            SizeChange::Extend(s) => attr.size.max(s),
            SizeChange::Set(s) => s,
        };
        attr.size = new_size;
        attr.mtime_ns = now;
        attr.ctime_ns = now;
        let attr = attr.clone();
        Ok((attr.clone(), vec![DbOp::PutInode(attr)]))
    }

    /// Changes the permission bits and/or the access and modification times (chmod, utimens).
    pub fn set_attr(
        &mut self,
        ino: u64,
        change: &AttrChange,
        now: i64,
    ) -> FsResult<(Attr, Vec<DbOp>)> {
        let attr = self.inode_mut(ino)?;
        if let Some(m) = change.mode {
            attr.mode = m & 0o7777;
        }
        if let Some(t) = change.atime_ns {
            attr.atime_ns = t;
        }
        if let Some(t) = change.mtime_ns {
            attr.mtime_ns = t;
        }
        attr.ctime_ns = now;
        let attr = attr.clone();
        Ok((attr.clone(), vec![DbOp::PutInode(attr)]))
    }

    pub fn remove_inode(&mut self, ino: u64) -> Vec<DbOp> {
        match self.inodes.remove(&ino) {
            Some(_) => vec![DbOp::DelInode(ino)],
            None => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(size: u64) -> NewNode {
        NewNode {
            kind: FileKind::File,
            mode: 0o644,
            uid: 0,
            gid: 0,
            size,
            mtime_ns: 1,
        }
    }

    #[test]
    fn create_lookup_list_remove() {
        let mut ns = Namespace::new(3, &Loaded::default());
        let (d, created, ops) = ns.create("/a/x", file(0), true).unwrap();
        assert!(created);
        assert_eq!(tessera_core::placement::ino_shard(d.ino), 3);
        assert_eq!(ops.len(), 3);
        assert_eq!(
            ns.create("/a/x", file(0), true).unwrap_err().errno,
            Errno::Exist
        );
        let (again, created, _) = ns.create("/a/x", file(0), false).unwrap();
        assert_eq!((again, created), (d, false));
        ns.create("/a/y", file(0), true).unwrap();
        ns.create("/ab", file(0), true).unwrap();
        let names: Vec<String> = ns.children("/a").into_iter().map(|e| e.name).collect();
        assert_eq!(names, vec!["x", "y"]);
        assert!(ns.has_children("/a") && !ns.has_children("/a/x"));
        assert!(
            !ns.remove("/a/x", d.ino + 1).unwrap().0,
            "stale ino must not remove"
        );
        assert!(ns.remove("/a/x", d.ino).unwrap().0);
        assert_eq!(ns.remove("/", 1).unwrap_err().errno, Errno::Inval);
        assert_eq!(ns.put("/", d).unwrap_err().errno, Errno::Inval);
        assert_eq!(ns.get("/a/x"), None);
    }

    #[test]
    fn size_extends_and_sets() {
        let mut ns = Namespace::new(0, &Loaded::default());
        let (d, _, _) = ns.create("/f", file(10), true).unwrap();
        assert_eq!(
            ns.set_size(d.ino, SizeChange::Extend(5), 2).unwrap().0.size,
            10
        );
        assert_eq!(
            ns.set_size(d.ino, SizeChange::Extend(50), 2)
                .unwrap()
                .0
                .size,
            50
        );
        assert_eq!(ns.set_size(d.ino, SizeChange::Set(3), 2).unwrap().0.size, 3);
        ns.remove_inode(d.ino);
        assert_eq!(
            ns.set_size(d.ino, SizeChange::Set(3), 2).unwrap_err().errno,
            Errno::NoEnt
        );
    }
}
