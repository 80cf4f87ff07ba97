//! The state machine of a namespace shard: the directory entries whose paths hash to one
//! daemon, and the inodes that daemon created.
//!
//! Entries are keyed by (parent directory, name), so listing a directory's entries on a shard
//! is one ordered range scan. An inode carries the creating node in its number and stays on
//! that node for life, so a rename moves only the entry. Each mutation returns the
//! [`NamespaceChange`]s that bring the persisted tables to the same state; replaying them into
//! [`Namespace::new`] rebuilds exactly this state. The daemon persists the changes, reads the
//! clock and serves the queries; nothing here waits or does I/O.

use crate::meta::{Attr, AttrChange, Dentry, DirEntry, FileKind, SizeChange};
use crate::placement::make_ino;
use crate::xattrs::{XattrOp, XattrReply, Xattrs};
use crate::{Errno, FsError, FsResult, path};
use std::collections::{BTreeMap, HashMap};

/// Inode number of the root directory (never stored: the root always exists).
pub const ROOT_INO: u64 = 1;

/// Counters 0 and 1 are never minted (inode 1 is the root on node 0).
const FIRST_COUNTER: u64 = 2;

/// A change to the persisted namespace tables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NamespaceChange {
    PutDentry {
        parent: String,
        name: String,
        dentry: Dentry,
    },
    DelDentry {
        parent: String,
        name: String,
    },
    PutInode(Attr),
    DelInode(u64),
    /// The counter from which the next inode number is minted.
    NextIno(u64),
    /// An extended attribute set or removed.
    Xattr(crate::xattrs::XattrChange),
    /// An inode's link count changed (1: the count is not stored).
    Links {
        ino: u64,
        nlink: u32,
    },
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

pub struct Namespace {
    node: u32,
    next_counter: u64,
    entries: BTreeMap<(String, String), Dentry>,
    inodes: HashMap<u64, Attr>,
    xattrs: Xattrs,
}

fn key(p: &str) -> FsResult<(String, String)> {
    let (parent, name) = path::split(p)
        .ok_or_else(|| FsError::new(Errno::Inval, "the root directory has no entry"))?;
    Ok((parent.to_string(), name.to_string()))
}

impl Namespace {
    /// The shard of `node` as persisted: its inode counter, entries (parent, name, entry) and
    /// inodes.
    pub fn new(
        node: u32,
        next_counter: u64,
        dentries: impl IntoIterator<Item = (String, String, Dentry)>,
        inodes: impl IntoIterator<Item = Attr>,
    ) -> Self {
        Namespace {
            node,
            next_counter: next_counter.max(FIRST_COUNTER),
            entries: dentries.into_iter().map(|(p, n, d)| ((p, n), d)).collect(),
            inodes: inodes.into_iter().map(|a| (a.ino, a)).collect(),
            xattrs: Xattrs::default(),
        }
    }

    pub fn get(&self, p: &str) -> Option<Dentry> {
        self.entries.get(&key(p).ok()?).copied()
    }

    pub fn attr(&self, ino: u64) -> Option<Attr> {
        self.inodes.get(&ino).cloned()
    }

    /// The shard's extended attributes as persisted: (inode, name, value).
    pub fn with_xattrs(mut self, rows: impl IntoIterator<Item = (u64, String, Vec<u8>)>) -> Self {
        let limits = self.xattrs.limits();
        self.xattrs = Xattrs::load(rows).with_limits(limits);
        self
    }

    /// The same shard with what one inode's extended attributes may hold.
    pub fn with_xattr_limits(mut self, limits: crate::xattrs::XattrLimits) -> Self {
        self.xattrs = std::mem::take(&mut self.xattrs).with_limits(limits);
        self
    }

    /// Reads or changes the extended attributes of an inode held here.
    pub fn xattr(&mut self, ino: u64, op: XattrOp) -> FsResult<(XattrReply, Vec<NamespaceChange>)> {
        self.inode_mut(ino)?;
        let changes = match op {
            XattrOp::Get { name } => {
                return Ok((XattrReply::Value(self.xattrs.get(ino, &name)?), Vec::new()));
            }
            XattrOp::List => return Ok((XattrReply::Names(self.xattrs.list(ino)), Vec::new())),
            XattrOp::Set { name, value, mode } => self.xattrs.set(ino, &name, value, mode)?,
            XattrOp::Remove { name } => self.xattrs.remove(ino, &name)?,
        };
        Ok((
            XattrReply::Done,
            changes.into_iter().map(NamespaceChange::Xattr).collect(),
        ))
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
    ) -> FsResult<(Dentry, bool, Vec<NamespaceChange>)> {
        let (parent, name) = key(p)?;
        if let Some(d) = self.entries.get(&(parent.clone(), name.clone())) {
            if exclusive {
                return Err(FsError::new(Errno::Exist, format!("{p} already exists")));
            }
            return Ok((*d, false, Vec::new()));
        }
        let (dentry, mut changes) = self.create_inode(new);
        self.entries.insert((parent.clone(), name.clone()), dentry);
        changes.push(NamespaceChange::PutDentry {
            parent,
            name,
            dentry,
        });
        Ok((dentry, true, changes))
    }

    /// Mints an inode with no entry naming it yet (a file a transaction creates: its entry is
    /// pending until the transaction commits).
    pub fn create_inode(&mut self, new: NewNode) -> (Dentry, Vec<NamespaceChange>) {
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
            nlink: 1,
        };
        self.inodes.insert(ino, attr.clone());
        let dentry = Dentry {
            ino,
            kind: new.kind,
        };
        let changes = vec![
            NamespaceChange::NextIno(self.next_counter),
            NamespaceChange::PutInode(attr),
        ];
        (dentry, changes)
    }

    /// Removes the entry if it still names `ino` (a stale remove after a rename is a no-op).
    pub fn remove(&mut self, p: &str, ino: u64) -> FsResult<(bool, Vec<NamespaceChange>)> {
        let k = key(p)?;
        Ok(match self.entries.get(&k) {
            Some(d) if d.ino == ino => {
                self.entries.remove(&k);
                let (parent, name) = k;
                (true, vec![NamespaceChange::DelDentry { parent, name }])
            }
            _ => (false, Vec::new()),
        })
    }

    /// Inserts or replaces an entry; returns the replaced one.
    pub fn put(
        &mut self,
        p: &str,
        dentry: Dentry,
    ) -> FsResult<(Option<Dentry>, Vec<NamespaceChange>)> {
        let (parent, name) = key(p)?;
        let old = self.entries.insert((parent.clone(), name.clone()), dentry);
        let change = NamespaceChange::PutDentry {
            parent,
            name,
            dentry,
        };
        Ok((old, vec![change]))
    }

    /// Adds an entry for a name that must be free (`EEXIST` otherwise).
    pub fn put_new(&mut self, p: &str, dentry: Dentry) -> FsResult<Vec<NamespaceChange>> {
        if self.get(p).is_some() {
            return Err(FsError::new(Errno::Exist, format!("{p} already exists")));
        }
        Ok(self.put(p, dentry)?.1)
    }

    /// The entries of this shard in key order after `after` (parent, name), looking at most
    /// `limit` of them, that `keep` accepts; and the key to go on after (`None`: no entry
    /// remains). A page is bounded by what it looks at, whatever it keeps.
    #[allow(clippy::type_complexity)]
    pub fn entries_after(
        &self,
        after: Option<&(String, String)>,
        limit: usize,
        keep: impl Fn(&Dentry) -> bool,
    ) -> (Vec<((String, String), Dentry)>, Option<(String, String)>) {
        use std::ops::Bound;
        let from = match after {
            Some(k) => Bound::Excluded(k.clone()),
            None => Bound::Unbounded,
        };
        let mut range = self.entries.range((from, Bound::Unbounded)).peekable();
        let mut out = Vec::new();
        let mut last = None;
        for _ in 0..limit.max(1) {
            let Some((k, d)) = range.next() else {
                return (out, None);
            };
            if keep(d) {
                out.push((k.clone(), *d));
            }
            last = Some(k.clone());
        }
        let next = range.peek().and(last);
        (out, next)
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

    /// The entries of `dir` after `after`, a page of at most `limit` (in name order).
    pub fn children_page(
        &self,
        dir: &str,
        after: Option<&str>,
        limit: u32,
    ) -> crate::dir_page::ShardPage<DirEntry> {
        use std::ops::Bound;
        let from = match after {
            Some(a) => Bound::Excluded((dir.to_string(), a.to_string())),
            None => Bound::Included((dir.to_string(), String::new())),
        };
        let sorted = self
            .entries
            .range((from, Bound::Unbounded))
            .take_while(|((parent, _), _)| parent == dir)
            .map(|((_, name), d)| DirEntry {
                name: name.clone(),
                ino: d.ino,
                kind: d.kind,
            });
        crate::dir_page::page_of(sorted, after, limit)
    }

    pub fn has_children(&self, dir: &str) -> bool {
        self.entries
            .range((dir.to_string(), String::new())..)
            .next()
            .is_some_and(|((parent, _), _)| parent == dir)
    }

    fn inode_mut(&mut self, ino: u64) -> FsResult<&mut Attr> {
        self.inodes.get_mut(&ino).ok_or_else(|| {
            FsError::new(
                Errno::NoEnt,
                format!("inode {ino:#x} no longer exists (file removed?)"),
            )
        })
    }

    /// Applies `edit` to an inode held here, stamps its change time, and returns the result.
    fn change_inode(
        &mut self,
        ino: u64,
        now_ns: i64,
        edit: impl FnOnce(&mut Attr),
    ) -> FsResult<(Attr, Vec<NamespaceChange>)> {
        let attr = self.inode_mut(ino)?;
        edit(attr);
        attr.ctime_ns = now_ns;
        let attr = attr.clone();
        Ok((attr.clone(), vec![NamespaceChange::PutInode(attr)]))
    }

    /// Changes the size of an inode held here (attach extends, truncate sets).
    pub fn set_size(
        &mut self,
        ino: u64,
        change: SizeChange,
        now_ns: i64,
    ) -> FsResult<(Attr, Vec<NamespaceChange>)> {
        self.change_inode(ino, now_ns, |attr| {
            attr.size = match change {
                SizeChange::Extend(s) => attr.size.max(s),
                SizeChange::Set(s) => s,
            };
            attr.mtime_ns = now_ns;
        })
    }

    /// Reserves `len` bytes at the end of an inode held here for an `O_APPEND` write: returns
    /// where they start and extends the size past them, so appenders never overlap.
    pub fn append(
        &mut self,
        ino: u64,
        len: u64,
        now_ns: i64,
    ) -> FsResult<(u64, Vec<NamespaceChange>)> {
        let at = self.inode_mut(ino)?.size;
        crate::run::end_within_limit(at, len, "append")?;
        let (_, changes) = self.set_size(ino, SizeChange::Extend(at + len), now_ns)?;
        Ok((at, changes))
    }

    /// Changes the permission bits and/or the access and modification times (chmod, utimens).
    pub fn set_attr(
        &mut self,
        ino: u64,
        change: &AttrChange,
        now_ns: i64,
    ) -> FsResult<(Attr, Vec<NamespaceChange>)> {
        self.change_inode(ino, now_ns, |attr| {
            if let Some(m) = change.mode {
                attr.mode = m & 0o7777;
            }
            if let Some(t) = change.atime_ns {
                attr.atime_ns = t;
            }
            if let Some(t) = change.mtime_ns {
                attr.mtime_ns = t;
            }
        })
    }

    /// A file held here gets another name (a hard link): its link count goes up.
    pub fn link(&mut self, ino: u64, now_ns: i64) -> FsResult<(Attr, Vec<NamespaceChange>)> {
        let attr = self.inode_mut(ino)?;
        if attr.kind != FileKind::File {
            return Err(FsError::new(
                Errno::Perm,
                format!("inode {ino:#x} is not a regular file: only files get more names"),
            ));
        }
        if attr.nlink >= crate::meta::MAX_LINKS {
            return Err(FsError::new(
                Errno::MLink,
                format!(
                    "inode {ino:#x} has {} names already, the most Tessera keeps",
                    attr.nlink
                ),
            ));
        }
        self.add_name(ino, now_ns)
    }

    /// Any file or directory held here gets one more name in its count: a rename's new name
    /// while the old one still exists (see `name_ops`), or names found beyond the count.
    pub fn add_name(&mut self, ino: u64, now_ns: i64) -> FsResult<(Attr, Vec<NamespaceChange>)> {
        let attr = self.inode_mut(ino)?;
        attr.nlink += 1;
        let nlink = attr.nlink;
        let (attr, mut changes) = self.change_inode(ino, now_ns, |_| {})?;
        changes.push(NamespaceChange::Links { ino, nlink });
        Ok((attr, changes))
    }

    /// A file held here lost one of its names: its link count goes down, and the inode goes
    /// with its last name (`true`). An inode already gone counts as gone.
    pub fn unlink(&mut self, ino: u64, now_ns: i64) -> (bool, Vec<NamespaceChange>) {
        match self.inodes.get_mut(&ino) {
            Some(attr) if attr.nlink > 1 => {
                attr.nlink -= 1;
                let nlink = attr.nlink;
                let (_, mut changes) = self
                    .change_inode(ino, now_ns, |_| {})
                    .expect("the inode is held here");
                changes.push(NamespaceChange::Links { ino, nlink });
                (false, changes)
            }
            _ => (true, self.remove_inode(ino)),
        }
    }

    pub fn remove_inode(&mut self, ino: u64) -> Vec<NamespaceChange> {
        match self.inodes.remove(&ino) {
            Some(_) => {
                let mut changes: Vec<NamespaceChange> = self
                    .xattrs
                    .remove_all(ino)
                    .into_iter()
                    .map(NamespaceChange::Xattr)
                    .collect();
                changes.push(NamespaceChange::DelInode(ino));
                changes
            }
            None => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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

    fn empty(node: u32) -> Namespace {
        Namespace::new(node, 0, [], [])
    }

    #[test]
    fn create_lookup_list_remove() {
        let mut ns = empty(3);
        let (d, created, ops) = ns.create("/a/x", file(0), true).unwrap();
        assert!(created);
        assert_eq!(crate::placement::ino_shard(d.ino), 3);
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
        assert_eq!(
            ns.create("/", file(0), false).unwrap_err().errno,
            Errno::Inval
        );
        assert_eq!(ns.get("/a/x"), None);
    }

    #[test]
    fn entries_page_by_page() {
        let mut ns = empty(0);
        for i in 0..10 {
            ns.create(&format!("/f{i}"), file(0), true).unwrap();
        }
        let (mut seen, mut after) = (Vec::new(), None);
        loop {
            let (page, next) = ns.entries_after(after.as_ref(), 3, |d| d.ino.is_multiple_of(2));
            assert!(page.len() <= 3);
            seen.extend(page.into_iter().map(|((_, n), _)| n));
            match next {
                Some(k) => after = Some(k),
                None => break,
            }
        }
        let mut want: Vec<String> = (0..10)
            .map(|i| format!("f{i}"))
            .filter(|n| ns.get(&format!("/{n}")).unwrap().ino.is_multiple_of(2))
            .collect();
        want.sort();
        assert_eq!(seen, want);
    }

    #[test]
    fn size_extends_and_sets() {
        let mut ns = empty(0);
        let (d, _, _) = ns.create("/f", file(10), true).unwrap();
        let size = |ns: &mut Namespace, c| ns.set_size(d.ino, c, 2).unwrap().0.size;
        assert_eq!(size(&mut ns, SizeChange::Extend(5)), 10);
        assert_eq!(size(&mut ns, SizeChange::Extend(50)), 50);
        assert_eq!(size(&mut ns, SizeChange::Set(3)), 3);
        ns.remove_inode(d.ino);
        assert_eq!(
            ns.set_size(d.ino, SizeChange::Set(3), 2).unwrap_err().errno,
            Errno::NoEnt
        );
    }

    #[test]
    fn attr_change_keeps_what_it_does_not_name() {
        let mut ns = empty(1);
        let (d, _, _) = ns.create("/f", file(0), true).unwrap();
        let change = AttrChange {
            mode: Some(0o100_755),
            atime_ns: Some(7),
            mtime_ns: None,
        };
        let (a, _) = ns.set_attr(d.ino, &change, 9).unwrap();
        assert_eq!(
            (a.mode, a.atime_ns, a.mtime_ns, a.ctime_ns),
            (0o755, 7, 1, 9)
        );
    }

    /// The persisted tables, as a store would hold them after applying the changes.
    /// Inodes are kept without their link count, which `links` holds where it is above 1,
    /// as the daemon's store keeps them.
    #[derive(Default)]
    struct Tables {
        next_ino: u64,
        dentries: BTreeMap<(String, String), Dentry>,
        inodes: BTreeMap<u64, Attr>,
        links: BTreeMap<u64, u32>,
    }

    impl Tables {
        fn apply(&mut self, changes: Vec<NamespaceChange>) {
            for c in changes {
                match c {
                    NamespaceChange::PutDentry {
                        parent,
                        name,
                        dentry,
                    } => {
                        self.dentries.insert((parent, name), dentry);
                    }
                    NamespaceChange::DelDentry { parent, name } => {
                        self.dentries.remove(&(parent, name));
                    }
                    NamespaceChange::PutInode(a) => {
                        self.inodes.insert(a.ino, Attr { nlink: 1, ..a });
                    }
                    NamespaceChange::DelInode(ino) => {
                        self.inodes.remove(&ino);
                        self.links.remove(&ino);
                    }
                    NamespaceChange::Links { ino, nlink: 1 } => {
                        self.links.remove(&ino);
                    }
                    NamespaceChange::Links { ino, nlink } => {
                        self.links.insert(ino, nlink);
                    }
                    NamespaceChange::NextIno(n) => self.next_ino = n,
                    // Extended attributes have their own model test (`xattrs`).
                    NamespaceChange::Xattr(_) => {}
                }
            }
        }

        fn reload(&self, node: u32) -> Namespace {
            Namespace::new(
                node,
                self.next_ino,
                self.dentries
                    .iter()
                    .map(|((p, n), d)| (p.clone(), n.clone(), *d)),
                self.inodes.values().map(|a| Attr {
                    nlink: self.links.get(&a.ino).copied().unwrap_or(1),
                    ..a.clone()
                }),
            )
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        Create(usize, bool),
        Remove(usize, usize),
        Put(usize, usize),
        Extend(usize, u64),
        Truncate(usize, u64),
        Chmod(usize, u32),
        DropInode(usize),
        Link(usize),
        Unlink(usize),
        PutNew(usize, usize),
    }

    const PATHS: [&str; 6] = ["/a", "/a/x", "/a/y", "/b", "/b/x", "/ab"];

    fn op() -> impl Strategy<Value = Op> {
        let p = 0..PATHS.len();
        let i = 0usize..8;
        prop_oneof![
            (p.clone(), any::<bool>()).prop_map(|(p, x)| Op::Create(p, x)),
            (p.clone(), i.clone()).prop_map(|(p, i)| Op::Remove(p, i)),
            (p, i.clone()).prop_map(|(p, i)| Op::Put(p, i)),
            (i.clone(), 0u64..100).prop_map(|(i, s)| Op::Extend(i, s)),
            (i.clone(), 0u64..100).prop_map(|(i, s)| Op::Truncate(i, s)),
            (i.clone(), any::<u32>()).prop_map(|(i, m)| Op::Chmod(i, m)),
            i.clone().prop_map(Op::DropInode),
            i.clone().prop_map(Op::Link),
            i.clone().prop_map(Op::Unlink),
            (0..PATHS.len(), i).prop_map(|(p, i)| Op::PutNew(p, i)),
        ]
    }

    /// Everything a shard holds, in a comparable order.
    type Snapshot = (u64, BTreeMap<(String, String), Dentry>, BTreeMap<u64, Attr>);

    fn snapshot(ns: &Namespace) -> Snapshot {
        let inodes = ns.inodes.iter().map(|(i, a)| (*i, a.clone())).collect();
        (ns.next_counter, ns.entries.clone(), inodes)
    }

    proptest! {
        /// Replaying the changes into a fresh shard rebuilds exactly the live state, including
        /// the inode counter: an inode minted after the reload never reuses a number.
        #[test]
        fn changes_rebuild_the_state(ops in proptest::collection::vec(op(), 0..60)) {
            let node = 2;
            let mut ns = empty(node);
            let mut tables = Tables::default();
            let mut inos: Vec<u64> = vec![ROOT_INO];
            let pick = |inos: &Vec<u64>, i: usize| inos[i % inos.len()];
            for (t, op) in ops.into_iter().enumerate() {
                let now = t as i64;
                let changes = match op {
                    Op::Create(p, excl) => match ns.create(PATHS[p], file(0), excl) {
                        Ok((d, created, c)) => {
                            prop_assert_eq!(created, c.len() == 3);
                            inos.push(d.ino);
                            c
                        }
                        Err(e) => {
                            prop_assert!(excl && e.errno == Errno::Exist);
                            Vec::new()
                        }
                    },
                    Op::Remove(p, i) => ns.remove(PATHS[p], pick(&inos, i)).unwrap().1,
                    Op::Put(p, i) => {
                        let d = Dentry { ino: pick(&inos, i), kind: FileKind::File };
                        ns.put(PATHS[p], d).unwrap().1
                    }
                    Op::Extend(i, s) => ns
                        .set_size(pick(&inos, i), SizeChange::Extend(s), now)
                        .map(|r| r.1)
                        .unwrap_or_default(),
                    Op::Truncate(i, s) => ns
                        .set_size(pick(&inos, i), SizeChange::Set(s), now)
                        .map(|r| r.1)
                        .unwrap_or_default(),
                    Op::Chmod(i, m) => {
                        let change = AttrChange { mode: Some(m), ..Default::default() };
                        ns.set_attr(pick(&inos, i), &change, now)
                            .map(|r| r.1)
                            .unwrap_or_default()
                    }
                    Op::DropInode(i) => ns.remove_inode(pick(&inos, i)),
                    Op::PutNew(p, i) => {
                        let d = Dentry { ino: pick(&inos, i), kind: FileKind::File };
                        let before = ns.get(PATHS[p]);
                        match ns.put_new(PATHS[p], d) {
                            Ok(c) => {
                                prop_assert!(before.is_none());
                                c
                            }
                            Err(e) => {
                                prop_assert_eq!(e.errno, Errno::Exist);
                                prop_assert_eq!(ns.get(PATHS[p]), before);
                                Vec::new()
                            }
                        }
                    }
                    Op::Link(i) => {
                        let ino = pick(&inos, i);
                        let before = ns.attr(ino).map(|a| a.nlink);
                        match ns.link(ino, now) {
                            Ok((a, c)) => {
                                prop_assert_eq!(Some(a.nlink), before.map(|n| n + 1));
                                c
                            }
                            Err(_) => {
                                prop_assert_eq!(ns.attr(ino).map(|a| a.nlink), before);
                                Vec::new()
                            }
                        }
                    }
                    Op::Unlink(i) => {
                        let ino = pick(&inos, i);
                        let before = ns.attr(ino).map(|a| a.nlink);
                        let (gone, c) = ns.unlink(ino, now);
                        prop_assert_eq!(gone, before.is_none_or(|n| n == 1));
                        prop_assert_eq!(ns.attr(ino).map(|a| a.nlink), before.filter(|n| *n > 1).map(|n| n - 1));
                        c
                    }
                };
                tables.apply(changes);
                let mut reloaded = tables.reload(node);
                prop_assert_eq!(snapshot(&reloaded), snapshot(&ns));
                let fresh = reloaded.create("/fresh", file(0), true).unwrap().0.ino;
                prop_assert!(!inos.contains(&fresh), "inode {:#x} minted twice", fresh);
            }
        }
    }
}
