//! The namespace service, client side: what a daemon does for its clients' path operations
//! (open, stat, mkdir, rmdir, unlink, readdir, rename, truncate, setattr, readlink).
//!
//! A path's entry lives on `path_shard(path)`, an inode on `ino_shard(ino)`; the shards
//! answer in [`super::namespace_shard`]. The PFS copy of a path changes with it, on the
//! blocking pool.

use crate::Node;
use crate::rpc::ServeClient;
use std::collections::BTreeMap;
use tessera_core::dir_page::{self, DirPage, EntryPlus, ShardPage};
use tessera_core::name_ops::NameOp;
use tessera_core::namespace::ROOT_INO;
use tessera_core::placement::{ino_shard, path_shard};
use tessera_core::{Errno, FsError, FsResult, path};
use tessera_proto::{
    AppendAt, Attr, ChangeNames, Created, Dentry, DentryCreate, DentryGet, DentryRemove, DirEntry,
    FileKind, HasChildren, InodeAppend, InodeAttrs, InodeGet, InodeRemove, InodeSetAttr,
    InodeSetSize, ListChildren, Mkdir, Open, Opened, OwnTruncate, ReadLink, Readdir, Removal,
    RemoveName, Rename, Rmdir, SealDir, SetAttr, SizeChange, Stat, Symlink, Truncate, TxnTruncate,
    TxnView, Unlink,
};

impl ServeClient<Open> for Node {
    async fn serve_client(&self, client: u64, r: Open) -> FsResult<Opened> {
        let Open {
            path,
            flags,
            mode,
            want_owners,
        } = r;
        let mut p = path::normalize(&path)?;
        if p == "/" {
            return Err(self.eisdir(&p));
        }
        let (mut dentry, mut attr) = if flags.create {
            // A file a member creates is pending under its transaction.
            let txn = self.txns.member(client);
            self.create_entry(&p, FileKind::File, mode, flags.exclusive, txn)
                .await?
        } else {
            self.lookup_for(client, &p)
                .await?
                .ok_or_else(|| self.enoent(&p))?
        };
        // A read follows PFS links, each to a target beneath the PFS root; a change never.
        let mut hops = 0;
        while dentry.kind == FileKind::Symlink {
            if flags.write || flags.truncate {
                return Err(self.no_change_through_link(&p, "write"));
            }
            hops += 1;
            if hops > path::MAX_LINK_HOPS {
                return Err(FsError::new(
                    Errno::Loop,
                    format!(
                        "{}: more than {} symbolic links in a row",
                        self.user_path(&path),
                        path::MAX_LINK_HOPS
                    ),
                ));
            }
            let target = self.on_pfs(&p, |pfs, p| pfs.read_link(p)).await?;
            p = path::link_target(&p, &target, &self.cfg.pfs_dir.display().to_string())?;
            (dentry, attr) = self
                .lookup_for(client, &p)
                .await?
                .ok_or_else(|| self.enoent(&p))?;
        }
        if dentry.kind == FileKind::Dir {
            return Err(self.eisdir(&p));
        }
        let view = self.view_of(client);
        if view.viewer.is_some() {
            // A member sees the size its transaction gave the file.
            attr = self.inode_get_as(&view, dentry.ino).await?.attr;
        }
        if flags.truncate && attr.size > 0 {
            attr = self.truncate_ino(&p, dentry.ino, 0, &view).await?;
        }
        let owners = if want_owners {
            Some(self.query_file_as(&view, dentry.ino, 0).await?)
        } else {
            None
        };
        Ok(Opened {
            attr,
            owners,
            path: p,
        })
    }
}

impl ServeClient<AppendAt> for Node {
    async fn serve_client(&self, _: u64, r: AppendAt) -> FsResult<u64> {
        let reserve = InodeAppend {
            ino: r.ino,
            len: r.len,
        };
        self.call(ino_shard(r.ino), reserve).await
    }
}

impl ServeClient<Stat> for Node {
    async fn serve_client(&self, client: u64, r: Stat) -> FsResult<Attr> {
        let p = path::normalize(&r.path)?;
        // As the client's view sees it: the lookup asks for the size of a file a
        // transaction changes as the view sees it.
        let (_, attr) = self
            .lookup_for(client, &p)
            .await?
            .ok_or_else(|| self.enoent(&p))?;
        Ok(attr)
    }
}

impl ServeClient<Mkdir> for Node {
    async fn serve_client(&self, client: u64, r: Mkdir) -> FsResult<Attr> {
        let p = path::normalize(&r.path)?;
        if p == "/" {
            return Err(FsError::new(
                Errno::Exist,
                format!("{} already exists", self.user_path(&p)),
            ));
        }
        let (_, attr) = self
            .create_entry(&p, FileKind::Dir, r.mode, true, self.txns.member(client))
            .await?;
        Ok(attr)
    }
}

impl ServeClient<Rmdir> for Node {
    async fn serve_client(&self, client: u64, r: Rmdir) -> FsResult<()> {
        let p = path::normalize(&r.path)?;
        if p == "/" {
            return Err(FsError::new(
                Errno::Inval,
                "the root directory cannot be removed",
            ));
        }
        let (d, _) = self
            .lookup_for(client, &p)
            .await?
            .ok_or_else(|| self.enoent(&p))?;
        if d.kind != FileKind::Dir {
            return Err(FsError::new(
                Errno::NotDir,
                format!("{} is not a directory; use unlink", self.user_path(&p)),
            ));
        }
        let Some(txn) = self.txns.member(client) else {
            // Sealed against creates on every node first, so that none lands between the
            // check for children and the removal (`state::seals`).
            if !self.seal_dir(&p, d.ino).await? {
                return Err(FsError::new(
                    Errno::NotEmpty,
                    format!("directory {} is not empty", self.user_path(&p)),
                ));
            }
            // The directory's inode shard removes the name, then the inode and its PFS copy.
            let removed = self
                .change_names(d, NameOp::Remove { path: p.clone() })
                .await;
            match &removed {
                // Recorded, and completing by itself: the seals stay.
                Ok(()) => {}
                Err(e) if e.errno == Errno::HostDown => {}
                Err(_) => self.unseal_dir(&p, d.ino).await,
            }
            return removed;
        };
        if self.has_children(&p).await? {
            return Err(FsError::new(
                Errno::NotEmpty,
                format!("directory {} is not empty", self.user_path(&p)),
            ));
        }
        if !self.remove_entry_in(&p, d.ino, Some(txn)).await? {
            // A member's removal of a committed directory: it goes when the transaction
            // commits.
            return Ok(());
        }
        // A directory its transaction made, removed again: no PFS copy of its own.
        self.call(ino_shard(d.ino), InodeRemove { ino: d.ino })
            .await
    }
}

impl ServeClient<Unlink> for Node {
    async fn serve_client(&self, client: u64, r: Unlink) -> FsResult<()> {
        let p = path::normalize(&r.path)?;
        if self.txns.member(client).is_none() {
            // One request to the name's shard, which removes the name itself when the
            // file's inode is there too (a file made there and never renamed or linked).
            let ask = RemoveName { path: p.clone() };
            match self.call(path_shard(&p, self.cfg.nodes), ask).await? {
                Removal::Done => return Ok(()),
                Removal::Elsewhere(d) => {
                    return self.change_names(d, NameOp::Remove { path: p }).await;
                }
                // The PFS's alone, or a transaction's: looked up below.
                Removal::NotHere => {}
            }
        }
        let (d, _) = self
            .lookup_for(client, &p)
            .await?
            .ok_or_else(|| self.enoent(&p))?;
        if d.kind == FileKind::Dir {
            return Err(FsError::new(
                Errno::IsDir,
                format!("{} is a directory; use rmdir", self.user_path(&p)),
            ));
        }
        let Some(txn) = self.txns.member(client) else {
            // The file's inode shard removes the name, then (with its last) the file.
            return self.change_names(d, NameOp::Remove { path: p }).await;
        };
        if !self.remove_entry_in(&p, d.ino, Some(txn)).await? {
            // A member's removal of a committed file: it goes when the transaction commits.
            return Ok(());
        }
        // A file its transaction created, removed again: it has no PFS copy, and what the
        // PFS holds under the name is the committed file's, which stays until the commit.
        self.drop_name(d.ino).await.map(drop)
    }
}

impl ServeClient<Readdir> for Node {
    async fn serve_client(&self, client: u64, r: Readdir) -> FsResult<DirPage> {
        let p = path::normalize(&r.path)?;
        let limit = dir_page::check_request(r.after.as_deref(), r.limit)?;
        let (d, _) = self
            .lookup_for(client, &p)
            .await?
            .ok_or_else(|| self.enoent(&p))?;
        if d.kind != FileKind::Dir {
            return Err(FsError::new(
                Errno::NotDir,
                format!("{} is not a directory", self.user_path(&p)),
            ));
        }
        let view = self.view_of(client);
        let plain = view.viewer.is_none() && view.committed.is_empty();
        // Leases on the attributes sent, for the client's cache (not inside a transaction,
        // whose view the cache does not follow).
        let before = self.attrs.before_asking().filter(|_| plain);
        let lease_to = before.map(|_| (self.id, self.attrs.boot));
        let on_shards = self
            .call_all(self.every_node(|| ListChildren {
                dir: p.clone(),
                view: view.clone(),
                after: r.after.clone(),
                limit,
                lease_to,
            }))
            .await?;
        // Each entry goes through the merge with whether its shard leased it.
        let on_shards = on_shards
            .into_iter()
            .map(|l| {
                let mut flags = vec![false; l.page.entries.len()];
                for i in l.leased {
                    if let Some(f) = flags.get_mut(i as usize) {
                        *f = true;
                    }
                }
                let entries = l.page.entries.into_iter().zip(flags);
                ShardPage {
                    entries: entries.map(|((e, a), f)| (e, (a, f))).collect(),
                    bound: l.page.bound,
                }
            })
            .collect();
        let (page, next) = dir_page::merge(on_shards);
        let mut all: BTreeMap<String, (EntryPlus, bool)> = page
            .into_iter()
            .map(|(e, (a, leased))| (e.name.clone(), ((e, a), leased)))
            .collect();
        // Entries that exist only on the PFS appear too, in the page their names fall in (and
        // are imported on the way).
        for (name, _) in self.on_pfs(&p, |pfs, p| pfs.list(p)).await? {
            if all.contains_key(&name)
                || !dir_page::in_page(&name, r.after.as_deref(), next.as_deref())
            {
                continue;
            }
            if let Some((d, attr)) = self.lookup_for(client, &path::join(&p, &name)).await? {
                let entry = DirEntry {
                    name: name.clone(),
                    ino: d.ino,
                    kind: d.kind,
                };
                all.insert(name, ((entry, Some(attr)), false));
            }
        }
        // Attributes the shards of the names did not hold (inodes renamed in from another
        // shard), from the inodes' shards, one request per shard.
        if plain {
            self.fill_attrs(&mut all).await;
        }
        let leases = before.and_then(|(forgets, asked_ns)| {
            let leased = all.values().map(|(_, leased)| *leased);
            self.attrs.page_leases(&p, leased, forgets, asked_ns)
        });
        Ok(DirPage {
            entries: all.into_values().map(|(e, _)| e).collect(),
            next,
            leases,
        })
    }
}

impl Node {
    /// Fills in the attributes missing from a page, asking each inode's shard once for all of
    /// its inodes. One that does not answer leaves them out (the client stats those entries).
    async fn fill_attrs(&self, page: &mut BTreeMap<String, (EntryPlus, bool)>) {
        let mut by_shard: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
        for ((e, attr), _) in page.values() {
            if attr.is_none() {
                by_shard.entry(ino_shard(e.ino)).or_default().push(e.ino);
            }
        }
        let asks = by_shard.into_iter().map(|(shard, inos)| async move {
            let got = self.call(shard, InodeAttrs { inos: inos.clone() }).await;
            (inos, got)
        });
        let mut found: BTreeMap<u64, Attr> = BTreeMap::new();
        for (inos, got) in futures::future::join_all(asks).await {
            if let Ok(attrs) = got {
                for (ino, a) in inos.into_iter().zip(attrs) {
                    if let Some(a) = a {
                        found.insert(ino, a);
                    }
                }
            }
        }
        for ((e, attr), _) in page.values_mut() {
            if attr.is_none() {
                *attr = found.get(&e.ino).cloned();
            }
        }
    }
}

impl ServeClient<Rename> for Node {
    async fn serve_client(&self, client: u64, r: Rename) -> FsResult<()> {
        let from = path::normalize(&r.from)?;
        let to = path::normalize(&r.to)?;
        if from == "/" || to == "/" {
            return Err(FsError::new(
                Errno::Inval,
                "the root directory cannot be renamed or replaced",
            ));
        }
        let (src, _) = self
            .lookup_for(client, &from)
            .await?
            .ok_or_else(|| self.enoent(&from))?;
        if from == to {
            return Ok(());
        }
        if path::is_within(&to, &from) {
            return Err(FsError::new(
                Errno::Inval,
                format!("cannot move {} into itself", self.user_path(&from)),
            ));
        }
        if src.kind == FileKind::Dir && self.has_children(&from).await? {
            return Err(FsError::new(
                Errno::XDev,
                format!(
                    "renaming the non-empty directory {} is not supported yet; copy it instead (mv does so by itself)",
                    self.user_path(&from)
                ),
            ));
        }
        let txn = self.txns.member(client);
        let (to_parent, _) = path::split(&to).expect("not the root");
        self.require_dir(to_parent, txn).await?;
        if txn.is_none() && self.on_pfs(&from, |pfs, p| pfs.lstat(p)).await?.is_some() {
            // The PFS copy will move there: fail before the namespace changes if it cannot.
            self.on_pfs(to_parent, |pfs, p| pfs.make_dirs(p).map(drop))
                .await?;
        }
        if let Some((dst, _)) = self.lookup_for(client, &to).await? {
            if dst.ino == src.ino {
                // Two names of one file (hard links): POSIX leaves both.
                return Ok(());
            }
            match (src.kind, dst.kind) {
                (FileKind::File | FileKind::Symlink, FileKind::Dir) => {
                    return Err(self.eisdir(&to));
                }
                (FileKind::Dir, FileKind::File | FileKind::Symlink) => {
                    return Err(FsError::new(
                        Errno::NotDir,
                        format!("{} is not a directory", self.user_path(&to)),
                    ));
                }
                (FileKind::Dir, FileKind::Dir) if self.has_children(&to).await? => {
                    return Err(FsError::new(
                        Errno::NotEmpty,
                        format!("directory {} is not empty", self.user_path(&to)),
                    ));
                }
                _ => {}
            }
        }
        if let Some(txn) = txn {
            self.check_movable_in_txn(&from, &to, src).await?;
            return self.rename_in_txn(txn, &from, &to, src).await;
        }
        // The file's inode shard moves the name (`services::names`).
        self.change_names(src, NameOp::Rename { from, to }).await
    }
}

impl ServeClient<Symlink> for Node {
    async fn serve_client(&self, client: u64, r: Symlink) -> FsResult<()> {
        let p = path::normalize(&r.path)?;
        if r.target.is_empty() || r.target.contains('\0') {
            return Err(FsError::new(
                Errno::NoEnt,
                "a symbolic link needs a non-empty target without NUL bytes",
            ));
        }
        if r.target.len() >= path::MAX_PATH {
            return Err(FsError::new(
                Errno::NameTooLong,
                format!("a link target of {} bytes is too long", r.target.len()),
            ));
        }
        if let Some(txn) = self.txns.member(client) {
            return Err(FsError::new(
                Errno::NotSup,
                format!(
                    "{}: transaction {txn:016x} would not hold a symbolic link back until its commit; make links outside the transaction",
                    self.user_path(&p)
                ),
            ));
        }
        let (parent, _) = path::split(&p).ok_or_else(|| self.exists(&p))?;
        self.require_dir(parent, None).await?;
        if self.lookup_for(client, &p).await?.is_some() {
            return Err(self.exists(&p));
        }
        // Made on the PFS, where links live; the lookup that follows imports it.
        let target = r.target.clone();
        self.on_pfs(&p, move |pfs, p| pfs.symlink(&target, p))
            .await
            .map_err(|e| match e.errno {
                Errno::Exist => self.exists(&p),
                _ => e,
            })?;
        self.lookup(&TxnView::default(), &p)
            .await?
            .ok_or_else(|| self.enoent(&p))
            .map(drop)
    }
}

impl ServeClient<Truncate> for Node {
    async fn serve_client(&self, client: u64, r: Truncate) -> FsResult<Attr> {
        tessera_core::run::end_within_limit(r.size, 0, "truncate")?;
        let p = path::normalize(&r.path)?;
        let (d, _) = self
            .lookup_for(client, &p)
            .await?
            .ok_or_else(|| self.enoent(&p))?;
        match d.kind {
            FileKind::Dir => return Err(self.eisdir(&p)),
            FileKind::Symlink => return Err(self.no_change_through_link(&p, "truncate")),
            FileKind::File => {}
        }
        self.truncate_ino(&p, d.ino, r.size, &self.view_of(client))
            .await
    }
}

impl ServeClient<SetAttr> for Node {
    async fn serve_client(&self, client: u64, r: SetAttr) -> FsResult<Attr> {
        let p = path::normalize(&r.path)?;
        let (d, _) = self
            .lookup_for(client, &p)
            .await?
            .ok_or_else(|| self.enoent(&p))?;
        // A link's own times change (lutimes); it has no mode of its own, as on Linux.
        if d.kind == FileKind::Symlink && r.change.mode.is_some() {
            return Err(FsError::new(
                Errno::NotSup,
                format!(
                    "{} is a symbolic link: links have no mode of their own (change the target's)",
                    self.user_path(&p)
                ),
            ));
        }
        let change = InodeSetAttr {
            ino: d.ino,
            change: r.change,
        };
        self.call(ino_shard(d.ino), change).await
    }
}

impl ServeClient<ReadLink> for Node {
    async fn serve_client(&self, client: u64, r: ReadLink) -> FsResult<String> {
        let p = path::normalize(&r.path)?;
        let (d, _) = self
            .lookup_for(client, &p)
            .await?
            .ok_or_else(|| self.enoent(&p))?;
        if d.kind != FileKind::Symlink {
            return Err(FsError::new(
                Errno::Inval,
                format!("{} is not a symbolic link", self.user_path(&p)),
            ));
        }
        self.on_pfs(&p, |pfs, p| pfs.read_link(p)).await
    }
}

impl Node {
    pub(crate) fn enoent(&self, p: &str) -> FsError {
        FsError::new(
            Errno::NoEnt,
            format!("{}: no such file or directory", self.user_path(p)),
        )
    }

    /// The error for a change asked of a path whose last component is a PFS link.
    fn no_change_through_link(&self, p: &str, what: &str) -> FsError {
        FsError::new(
            Errno::Loop,
            format!(
                "{} is a symbolic link in the PFS directory; Tessera does not {what} through links (name the target instead)",
                self.user_path(p)
            ),
        )
    }

    fn eisdir(&self, p: &str) -> FsError {
        FsError::new(
            Errno::IsDir,
            format!("{} is a directory", self.user_path(p)),
        )
    }

    fn root_attr(&self) -> Attr {
        Attr {
            ino: ROOT_INO,
            kind: FileKind::Dir,
            mode: 0o755,
            uid: self.uid,
            gid: self.gid,
            size: 0,
            atime_ns: 0,
            mtime_ns: 0,
            ctime_ns: 0,
            nlink: 1,
        }
    }

    pub(crate) async fn inode_get(&self, ino: u64) -> FsResult<Attr> {
        self.call(ino_shard(ino), InodeGet { ino }).await
    }

    /// Entry and attributes of a normalised path as client `client` sees it (the files its
    /// transaction created included); `None` if it does not exist.
    pub async fn lookup_for(&self, client: u64, p: &str) -> FsResult<Option<(Dentry, Attr)>> {
        self.lookup(&self.view_of(client), p).await
    }

    /// Entry and attributes of a normalised path as `view` sees it; `None` if it does not
    /// exist.
    pub async fn lookup(&self, view: &TxnView, p: &str) -> FsResult<Option<(Dentry, Attr)>> {
        if p == "/" {
            return Ok(Some((
                Dentry {
                    ino: ROOT_INO,
                    kind: FileKind::Dir,
                },
                self.root_attr(),
            )));
        }
        let get = DentryGet {
            path: p.to_string(),
            view: view.clone(),
        };
        match self.call(path_shard(p, self.cfg.nodes), get).await? {
            None => Ok(None),
            Some((d, Some(a))) => Ok(Some((d, a))),
            Some((d, None)) => Ok(Some((d, self.inode_get_as(view, d.ino).await?.attr))),
        }
    }

    /// Fails unless `dir` exists and is a directory.
    /// The inode of directory `dir`, or why there is none.
    pub(crate) async fn require_dir(&self, dir: &str, txn: Option<u64>) -> FsResult<u64> {
        // Outside transactions, from this node's leased check (one request per directory and
        // lease, not per create); inside one, as the transaction's view sees it.
        let found = if txn.is_none() && dir != "/" && self.attrs.caching() {
            self.leased_dir(dir).await?
        } else {
            let view = TxnView {
                viewer: txn,
                committed: Vec::new(),
            };
            self.lookup(&view, dir).await?.map(|(d, _)| (d.ino, d.kind))
        };
        match found {
            None => Err(FsError::new(
                Errno::NoEnt,
                format!(
                    "directory {} does not exist; create it first (mkdir)",
                    self.user_path(dir)
                ),
            )),
            Some((_, kind)) if kind != FileKind::Dir => Err(FsError::new(
                Errno::NotDir,
                format!("{} is not a directory", self.user_path(dir)),
            )),
            Some((ino, _)) => Ok(ino),
        }
    }

    async fn create_entry(
        &self,
        p: &str,
        kind: FileKind,
        mode: u32,
        exclusive: bool,
        txn: Option<u64>,
    ) -> FsResult<(Dentry, Attr)> {
        let (parent, _) = path::split(p).expect("not the root");
        let parent_ino = self.require_dir(parent, txn).await?;
        let req = DentryCreate {
            path: p.to_string(),
            kind,
            mode: mode & 0o7777,
            uid: self.uid,
            gid: self.gid,
            exclusive,
            txn,
            parent_ino,
        };
        match self.call(path_shard(p, self.cfg.nodes), req).await? {
            Created {
                dentry,
                attr: Some(a),
                ..
            } => Ok((dentry, a)),
            Created {
                dentry, attr: None, ..
            } => Ok((dentry, self.inode_get(dentry.ino).await?)),
        }
    }

    /// Has the shard of `file`'s inode carry out `op` on its names.
    async fn change_names(&self, file: Dentry, op: NameOp) -> FsResult<()> {
        self.call(ino_shard(file.ino), ChangeNames { file, op })
            .await
    }

    /// Removes the name `p` of inode `ino` at the shard of its path, in `txn` if given: a
    /// committed entry's removal is then pending (`false`: the file stays until the commit).
    async fn remove_entry_in(&self, p: &str, ino: u64, txn: Option<u64>) -> FsResult<bool> {
        let remove = DentryRemove {
            path: p.to_string(),
            ino,
            txn,
        };
        self.call(path_shard(p, self.cfg.nodes), remove).await
    }

    /// Seals directory `dir` (inode `ino`) against creates on every node that holds no child
    /// of it; `false` (and no seal left) if a node or the PFS copy holds one.
    async fn seal_dir(&self, dir: &str, ino: u64) -> FsResult<bool> {
        let ask = self.every_node(|| SealDir {
            dir: dir.to_string(),
            ino,
            seal: true,
        });
        let answers =
            futures::future::join_all(ask.into_iter().map(|(n, r)| self.call(n, r))).await;
        let mut empty = true;
        let mut failed = None;
        for a in answers {
            match a {
                Ok(sealed) => empty &= sealed,
                Err(e) => failed = Some(e),
            }
        }
        if failed.is_none() && empty {
            empty = !self.on_pfs(dir, |pfs, p| Ok(pfs.has_entries(p))).await?;
        }
        if failed.is_some() || !empty {
            self.unseal_dir(dir, ino).await;
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(empty),
        }
    }

    /// Lifts the seals of an rmdir that did not remove `dir` (a node that does not answer
    /// keeps its seal until it lapses).
    async fn unseal_dir(&self, dir: &str, ino: u64) {
        let ask = self.every_node(|| SealDir {
            dir: dir.to_string(),
            ino,
            seal: false,
        });
        for (n, a) in ask {
            if let Err(e) = self.call(n, a).await {
                tracing::warn!(
                    "node {n} keeps refusing creates in {} for up to {} s: {e}",
                    self.user_path(dir),
                    crate::state::seals::SEAL_AFTER_REMOVAL.as_secs()
                );
            }
        }
    }

    /// Whether any shard (or the PFS copy) holds an entry inside `dir`.
    async fn has_children(&self, dir: &str) -> FsResult<bool> {
        let ask = self.every_node(|| HasChildren {
            dir: dir.to_string(),
        });
        let any = self.call_all(ask).await?.into_iter().any(|b| b);
        Ok(any || self.on_pfs(dir, |pfs, p| Ok(pfs.has_entries(p))).await?)
    }

    /// Sets a file's size everywhere: inode, ownership on every node, PFS copy. In a
    /// transaction (`view.viewer`) every node holds the cut back until it completes.
    async fn truncate_ino(&self, p: &str, ino: u64, size: u64, view: &TxnView) -> FsResult<Attr> {
        if let Some(txn) = view.viewer {
            let cut = |n| {
                self.call(
                    n,
                    TxnTruncate {
                        txn,
                        ino,
                        size,
                        path: p.to_string(),
                    },
                )
            };
            let answers = futures::future::join_all((0..self.cfg.nodes).map(cut)).await;
            let failed = answers.iter().filter(|a| a.is_err()).count();
            if let Some(Err(e)) = answers.into_iter().find(Result::is_err) {
                if failed < self.cfg.nodes as usize {
                    // Cut on some nodes and not on others: the transaction cannot commit
                    // whole any more.
                    self.doom(txn, &e).await;
                }
                return Err(e);
            }
            return Ok(self.inode_get_as(view, ino).await?.attr);
        }
        let set = InodeSetSize {
            ino,
            change: SizeChange::Set(size),
            txn: None,
        };
        let attr = self.call(ino_shard(ino), set).await?;
        self.call_all(self.every_node(|| OwnTruncate { ino, size }))
            .await?;
        self.on_pfs(p, move |pfs, p| pfs.truncate(p, size)).await?;
        Ok(attr)
    }
}
