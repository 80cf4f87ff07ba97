//! The namespace service, shard side: the entries and inodes this node holds. Each request
//! touches only this node's state; a change is queued to the store under the namespace lock
//! and answered once durable.
//!
//! The entry of a file a transaction's member creates is pending (`tessera_core::txn_entries`):
//! found by its members' lookups and listings only, in the way of everyone else's creates
//! (`EBUSY`), and before any lookup, listing or create meets one, its transaction is resolved
//! by its home if it is prepared here (so the entry appears at the decision record).

use crate::Node;
use crate::rpc::ServePeer;
use crate::store::{DbOp, Pending};
use tessera_core::dir_page::{self, EntryPlus, ShardPage};
use tessera_core::namespace::{Namespace, NamespaceChange, NewNode};
use tessera_core::placement::ino_shard;
use tessera_core::txn_entries::{Seen, Taken, busy};
use tessera_core::{Errno, FsError, FsResult, path};
use tessera_proto::{
    Attr, Created, Dentry, DentryCreate, DentryGet, DentryPut, DentryRemove, FileKind, Found,
    HasChildren, InodeAppend, InodeGet, InodeRemove, InodeSetAttr, InodeSetSize, ListChildren,
    Listed, SealDir, SizeChange,
};

/// The wall clock, for the times stamped on inodes.
pub(crate) fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

impl ServePeer<DentryGet> for Node {
    async fn serve_peer(&self, r: DentryGet) -> FsResult<Found> {
        let p = path::normalize(&r.path)?;
        self.settle_entry(&p, r.view.viewer).await?;
        let seen = self
            .txns
            .entries(|e| e.seen_by(&p, r.view.viewer, &r.view.committed));
        let found = match seen {
            Some(Seen::Pending(Some(dentry))) => {
                let attr = self.shards.namespace(|ns| ns.attr(dentry.ino));
                Some((dentry, attr))
            }
            Some(Seen::Pending(None)) => None,
            Some(Seen::Committed) | None => self.dentry_get(&p).await?,
        };
        // The size of a file a transaction changes depends on the view: the asker learns it
        // as the view sees it (`InodeGetAs`).
        Ok(found.map(|(d, attr)| {
            let pending = !self.txns.pending(|p| p.touching_file(d.ino)).is_empty();
            (d, attr.filter(|_| !pending))
        }))
    }
}

impl ServePeer<DentryCreate> for Node {
    async fn serve_peer(&self, r: DentryCreate) -> FsResult<Created> {
        let p = path::normalize(&r.path)?;
        let new = NewNode {
            kind: r.kind,
            mode: r.mode,
            uid: r.uid,
            gid: r.gid,
            size: 0,
            mtime_ns: now_ns(),
        };
        self.settle_entry(&p, r.txn).await?;
        let parent = path::split(&p)
            .map_or("/", |(parent, _)| parent)
            .to_string();
        self.refuse_sealed(&parent, r.parent_ino)?;
        let pending = self.txns.entries(|e| e.get(&p));
        match pending {
            // Another transaction removes the committed file: to everyone else it is still
            // there, and opened as it is (below). One it only creates is in the way.
            Some((txn, names)) if Some(txn) != r.txn && names.removed.is_none() => {
                return Err(busy(&self.user_path(&p), txn));
            }
            Some((txn, names)) if Some(txn) == r.txn => match names.created {
                Some(dentry) if !r.exclusive => {
                    let attr = self.shards.namespace(|ns| ns.attr(dentry.ino));
                    return Ok(Created {
                        dentry,
                        created: false,
                        attr,
                    });
                }
                Some(_) => return Err(self.exists(&p)),
                // Removed by this transaction: a new file takes the name.
                None => {
                    return self.create_pending(txn, &p, new, r.exclusive).await;
                }
            },
            _ => {}
        }
        // An entry that exists only on the PFS counts as existing.
        if let Some((dentry, attr)) = self.dentry_get(&p).await? {
            if r.exclusive {
                return Err(self.exists(&p));
            }
            return Ok(Created {
                dentry,
                created: false,
                attr,
            });
        }
        if let Some(txn) = r.txn {
            return self.create_pending(txn, &p, new, r.exclusive).await;
        }
        let exclusive = r.exclusive;
        self.change_namespace(|ns| {
            // Under the namespace lock, where an rmdir's seal is checked and set: either the
            // seal is here now, or its check will see this entry.
            self.refuse_sealed(&parent, r.parent_ino)?;
            if let Some((txn, _)) = self.txns.entries(|e| e.get(&p)) {
                return Err(busy(&self.user_path(&p), txn));
            }
            let (dentry, created, ops) = ns
                .create(&p, new, exclusive)
                .map_err(|e| FsError::new(e.errno, self.exists(&p).message))?;
            let attr = ns.attr(dentry.ino);
            Ok((
                Created {
                    dentry,
                    created,
                    attr,
                },
                ops,
            ))
        })
        .await
    }
}

impl ServePeer<DentryRemove> for Node {
    async fn serve_peer(&self, r: DentryRemove) -> FsResult<bool> {
        let p = path::normalize(&r.path)?;
        self.settle_entry(&p, r.txn).await?;
        if let Some(txn) = r.txn {
            self.check_not_done(txn)?;
        }
        // A committed file a member renamed here, then removes: its committed name's rename
        // becomes a removal.
        let mut renamed_from = None;
        let (removed, durable) = self.shards.namespace(|ns| {
            self.txns.entries(|entries| {
                let pending = entries.get(&p);
                let mut ops: Vec<DbOp> = Vec::new();
                let removed = match (pending, r.txn) {
                    // A file its creating transaction removes again (or renamed here).
                    (Some((t, n)), _)
                        if Some(t) == r.txn && n.created.is_some_and(|d| d.ino == r.ino) =>
                    {
                        let (changes, from) = entries.take_created(&p, r.ino)?;
                        ops.extend(changes.into_iter().map(DbOp::from));
                        renamed_from = from;
                        renamed_from.is_none()
                    }
                    (Some((t, _)), _) if Some(t) != r.txn => {
                        return Err(busy(&self.user_path(&p), t));
                    }
                    // A member removes a committed entry: pending until the commit.
                    (_, Some(txn)) => {
                        if let Some(dentry) = ns.get(&p).filter(|d| d.ino == r.ino) {
                            ops.extend(
                                entries
                                    .mark_removed(txn, &p, dentry)?
                                    .into_iter()
                                    .map(DbOp::from),
                            );
                        }
                        false
                    }
                    (_, None) => {
                        let (removed, changes) = ns.remove(&p, r.ino)?;
                        ops.extend(changes.into_iter().map(DbOp::from));
                        removed
                    }
                };
                Ok((removed, self.store.submit(ops)))
            })
        })?;
        durable.durable().await?;
        if let (Some(from), Some(txn)) = (renamed_from, r.txn) {
            let removal = super::txn_rename::move_out(txn, &from, r.ino, None);
            let shard = tessera_core::placement::path_shard(&from, self.cfg.nodes);
            if let Err(e) = self.call(shard, removal).await {
                // The name went and its committed one would still lead here.
                self.doom(txn, &e).await;
                return Err(e);
            }
        }
        Ok(removed)
    }
}

impl ServePeer<DentryPut> for Node {
    async fn serve_peer(&self, r: DentryPut) -> FsResult<Option<Dentry>> {
        let p = path::normalize(&r.path)?;
        self.settle_entry(&p, None).await?;
        self.change_namespace(|ns| {
            if let Some((txn, _)) = self.txns.entries(|e| e.get(&p)) {
                return Err(busy(&self.user_path(&p), txn));
            }
            ns.put(&p, r.dentry)
        })
        .await
    }
}

impl ServePeer<ListChildren> for Node {
    async fn serve_peer(&self, r: ListChildren) -> FsResult<Listed> {
        let d = path::normalize(&r.dir)?;
        let limit = dir_page::check_request(r.after.as_deref(), r.limit)?;
        let changing = self.txns.entries(|e| e.changing_in(&d));
        let others = changing
            .into_iter()
            .filter(|t| Some(*t) != r.view.viewer)
            .collect();
        self.complete_decided(others).await?;
        self.shards.namespace(|ns| {
            // Changes of the namespace wait for this lock; a transaction's pending state does
            // not, and moves the lease version if it changes meanwhile.
            let version = self.attrs.lease_version();
            let plain = r.view.viewer.is_none() && r.view.committed.is_empty();
            // Which names a transaction holds is read here; a completion that changes that
            // also changes the namespace, which waits for this lock and then moves the lease
            // version.
            let (listed, bound, unnamed) = self.txns.entries(|entries| {
                let committed = ns.children_page(&d, r.after.as_deref(), limit);
                let bound = committed.bound;
                let mut all = entries.children(&d, r.view.viewer, committed.entries);
                for t in &r.view.committed {
                    all = entries.children(&d, Some(*t), all);
                }
                // Names a transaction creates come in the page their names fall in.
                all.retain(|e| dir_page::in_page(&e.name, r.after.as_deref(), bound.as_deref()));
                all.sort_by(|a, b| a.name.cmp(&b.name));
                // Attributes of the inodes held here, as a stat outside transactions sees them
                // (a view inside one may see other sizes: its entries come without).
                let listed: Vec<EntryPlus> = all
                    .into_iter()
                    .map(|e| {
                        let attr = (plain && ino_shard(e.ino) == self.id)
                            .then(|| ns.attr(e.ino))
                            .flatten();
                        (e, attr)
                    })
                    .collect();
                let unnamed: Vec<bool> = listed
                    .iter()
                    .map(|(e, _)| entries.get(&path::join(&d, &e.name)).is_none())
                    .collect();
                (listed, bound, unnamed)
            });
            let mut leased = Vec::new();
            if let Some((node, boot)) = r.lease_to.filter(|_| plain) {
                // The pending overlay after the entries (its rank is lower): a change to it
                // meanwhile moved the lease version, and the grant is refused.
                let leasable: Vec<(u32, u64)> = self.txns.pending(|pending| {
                    listed
                        .iter()
                        .zip(&unnamed)
                        .enumerate()
                        .filter(|(_, ((e, attr), unnamed))| {
                            attr.is_some() && **unnamed && pending.touching_file(e.ino).is_empty()
                        })
                        .map(|(i, ((e, _), _))| (i as u32, e.ino))
                        .collect()
                });
                if !leasable.is_empty() {
                    leased = self.attrs.grant_page(version, &d, &leasable, node, boot);
                }
            }
            Ok(Listed {
                page: ShardPage {
                    entries: listed,
                    bound,
                },
                leased,
            })
        })
    }
}

impl ServePeer<SealDir> for Node {
    async fn serve_peer(&self, r: SealDir) -> FsResult<bool> {
        let d = path::normalize(&r.dir)?;
        if !r.seal {
            self.seals.unseal(&d, r.ino);
            return Ok(true);
        }
        // Under the namespace lock, where creates insert their entries.
        self.shards.namespace(|ns| {
            let creating = self.txns.entries(|e| e.creating_in(&d));
            if creating || ns.has_children(&d) {
                return Ok(false);
            }
            let until = crate::clock::now() + crate::state::seals::SEAL_AFTER_REMOVAL;
            self.seals.seal(&d, r.ino, until);
            Ok(true)
        })
    }
}

impl Node {
    /// `ENOENT` if an rmdir sealed `parent` (inode `ino`) here.
    fn refuse_sealed(&self, parent: &str, ino: u64) -> FsResult<()> {
        if self.seals.sealed(parent, ino) {
            return Err(FsError::new(
                Errno::NoEnt,
                format!(
                    "directory {} was removed (or is being removed); create it again first (mkdir)",
                    self.user_path(parent)
                ),
            ));
        }
        Ok(())
    }
}

impl ServePeer<HasChildren> for Node {
    async fn serve_peer(&self, r: HasChildren) -> FsResult<bool> {
        let d = path::normalize(&r.dir)?;
        // A file being created in it counts: the directory cannot go from under it.
        let creating = self.txns.entries(|e| e.creating_in(&d));
        Ok(creating || self.shards.namespace(|ns| ns.has_children(&d)))
    }
}

impl ServePeer<InodeGet> for Node {
    async fn serve_peer(&self, r: InodeGet) -> FsResult<Attr> {
        self.inode(r.ino)
    }
}

impl ServePeer<InodeSetSize> for Node {
    async fn serve_peer(&self, r: InodeSetSize) -> FsResult<Attr> {
        // Every attach and truncate passes here: the PFS copy is no longer the whole story.
        self.flush_marks(r.ino, crate::services::locality::FlushMark::Changed);
        if let (Some(txn), SizeChange::Extend(end)) = (r.txn, r.change) {
            self.check_txn_id(txn)?;
            self.extend_pending(txn, r.ino, end).await?;
            return self.inode(r.ino);
        }
        // A plain truncate or extension comes after the decided transactions that set the
        // file's size: theirs is applied first, not over it.
        let touching = self.txns.pending(|p| p.touching_file(r.ino));
        self.complete_decided(touching).await?;
        self.change_namespace(|ns| ns.set_size(r.ino, r.change, now_ns()))
            .await
    }
}

impl ServePeer<InodeAppend> for Node {
    async fn serve_peer(&self, r: InodeAppend) -> FsResult<u64> {
        self.flush_marks(r.ino, crate::services::locality::FlushMark::Changed);
        let touching = self.txns.pending(|p| p.touching_file(r.ino));
        self.complete_decided(touching).await?;
        self.change_namespace(|ns| ns.append(r.ino, r.len, now_ns()))
            .await
    }
}

impl ServePeer<InodeSetAttr> for Node {
    async fn serve_peer(&self, r: InodeSetAttr) -> FsResult<Attr> {
        self.change_namespace(|ns| ns.set_attr(r.ino, &r.change, now_ns()))
            .await
    }
}

impl ServePeer<InodeRemove> for Node {
    async fn serve_peer(&self, r: InodeRemove) -> FsResult<()> {
        self.change_namespace(|ns| Ok(((), ns.remove_inode(r.ino))))
            .await
    }
}

impl Node {
    /// The pending entry of a file `txn` creates at `p`, with its inode, made durable.
    async fn create_pending(
        &self,
        txn: u64,
        p: &str,
        new: NewNode,
        exclusive: bool,
    ) -> FsResult<Created> {
        if self.txns.is_prepared(txn) {
            return Err(FsError::new(
                Errno::Inval,
                format!(
                    "transaction {txn:016x} is committing: creating {} can no longer be part of it (create files before the vote)",
                    self.user_path(p)
                ),
            ));
        }
        let (created, durable) = self.shards.namespace(|ns| {
            self.txns.entries(|entries| {
                // Under the entries lock, as the completion marks it done.
                self.check_not_done(txn)?;
                // Made meanwhile, by another member (pending) or outside the transaction: found
                // as an existing file is. A name this transaction removed is free for it.
                let found = match entries.get(p) {
                    Some((other, _)) if other != txn => {
                        return Err(busy(&self.user_path(p), other));
                    }
                    Some((_, n)) if n.removed.is_some() => n.created,
                    Some((_, n)) => n.created.or_else(|| ns.get(p)),
                    None => ns.get(p),
                };
                if let Some(dentry) = found {
                    if exclusive {
                        return Err(self.exists(p));
                    }
                    let existing = Created {
                        dentry,
                        created: false,
                        attr: ns.attr(dentry.ino),
                    };
                    return Ok((existing, None));
                }
                let (dentry, ops) = ns.create_inode(new);
                let attr = ns.attr(dentry.ino);
                let added = entries.add(txn, p, dentry)?;
                let ops = ops
                    .into_iter()
                    .map(DbOp::from)
                    .chain(added.into_iter().map(DbOp::from))
                    .collect();
                let created = Created {
                    dentry,
                    created: true,
                    attr,
                };
                Ok((created, Some(self.store.submit(ops))))
            })
        })?;
        if let Some(durable) = durable {
            durable.durable().await?;
        }
        Ok(created)
    }

    /// Before a lookup or change of `p` (by `viewer`'s transaction, or outside any): another
    /// transaction's pending entry there is resolved if it is prepared here.
    pub(crate) async fn settle_entry(&self, p: &str, viewer: Option<u64>) -> FsResult<()> {
        let pending = self.txns.entries(|e| e.get(p));
        match pending {
            Some((txn, _)) if Some(txn) != viewer => self.complete_decided(vec![txn]).await,
            _ => Ok(()),
        }
    }

    /// Ends `txn`'s names on this shard. Commit: the entries it removed go, with their files
    /// (inode, bytes on every node, PFS copy), and the ones it created join the namespace.
    /// Abort: the files it created are destroyed; the entries it removed stay.
    ///
    /// Returns once every change is queued to the store, with what stays to wait for: the
    /// store writes in the order it is given, so the caller's last wait covers these too
    /// (one wait for the state log per completion, not one per name).
    pub(crate) async fn complete_entries(&self, txn: u64, commit: bool) -> FsResult<Pending> {
        let mut mine = self.txns.entries(|e| e.take(txn));
        let mut queued = Pending::done();
        while let Some(taken) = mine.first() {
            let done = self
                .complete_name(&path::join(&taken.parent, &taken.name), taken, commit)
                .await;
            match done {
                Ok(p) => queued = p,
                Err(e) => {
                    // Left for the next completion: every step above is idempotent.
                    self.txns.entries(|e| e.restore(txn, mine));
                    return Err(e);
                }
            }
            mine.remove(0);
        }
        Ok(queued)
    }

    /// Applies (`commit`) or undoes one name's pending changes. A name renamed away goes
    /// without its file; a file renamed here from its committed name stays at abort. Files
    /// are renamed in a transaction only while they have no PFS copy; one a flush made
    /// meanwhile follows the file (a crash after it moved finds it gone and leaves it).
    /// The last change, the entry it keeps, is queued, not waited for (see
    /// [`Node::complete_entries`]).
    async fn complete_name(&self, p: &str, taken: &Taken, commit: bool) -> FsResult<Pending> {
        let (n, moves) = (taken.pending, &taken.moves);
        if let (true, Some(old), Some(dest)) = (commit, n.removed, &moves.to) {
            let dest = dest.clone();
            let moved = self.on_pfs(p, move |pfs, p| pfs.rename(p, &dest)).await;
            if let Err(e) = moved {
                tracing::warn!("{}: the PFS copy stays: {e}", self.user_path(p));
            }
            self.change_namespace(|ns| Ok(((), ns.remove(p, old.ino)?.1)))
                .await?;
            if let Some(new) = n.created {
                self.change_namespace(|ns| Ok(((), ns.put(p, new)?.1)))
                    .await?;
            }
            return Ok(Pending::done());
        }
        let (gone, kept) = if commit {
            (n.removed, n.created)
        } else {
            // A committed file renamed here is not the transaction's to destroy.
            (n.created.filter(|_| moves.from.is_none()), None)
        };
        if let Some(old) = gone {
            // A re-run (after an error, or a restart) may find the name removed by the run
            // before; the name is dropped from its file once: again only for a file with no
            // other name (its inode is still there if that run stopped in between).
            let mut drop = true;
            if commit {
                let entry_removed = self.change_namespace(|ns| ns.remove(p, old.ino)).await?;
                drop = entry_removed || self.inode_get(old.ino).await.is_ok_and(|a| a.nlink <= 1);
                let dir = old.kind == FileKind::Dir;
                let removed = self
                    .on_pfs(p, move |pfs, p| {
                        if dir {
                            pfs.remove_dir(p)
                        } else {
                            pfs.remove_file(p)
                        }
                    })
                    .await;
                if let Err(e) = removed {
                    tracing::warn!("{}: the PFS copy stays: {e}", self.user_path(p));
                }
            }
            if drop {
                self.drop_name(old.ino).await?;
            }
        }
        match kept {
            Some(new) => Ok(self.queue_namespace(|ns| Ok(((), ns.put(p, new)?.1)))?.1),
            None => Ok(Pending::done()),
        }
    }

    /// Applies a change to this node's namespace shard and waits until it is durable. The
    /// change is queued to the store under the namespace lock, so the store sees changes in
    /// the order they were made. A refused change is answered once the changes before it are
    /// durable too: an entry it found in the way is never one a crash could still take back.
    pub(crate) async fn change_namespace<T>(
        &self,
        change: impl FnOnce(&mut Namespace) -> FsResult<(T, Vec<NamespaceChange>)>,
    ) -> FsResult<T> {
        let (out, pending) = self.shards.namespace(|ns| match change(ns) {
            Ok((out, ops)) => {
                let ops = ops.into_iter().map(DbOp::from).collect();
                (Ok(out), self.store.submit(ops))
            }
            Err(e) => (Err(e), self.store.barrier()),
        });
        pending.durable().await?;
        out
    }

    /// As [`Node::change_namespace`], but returns the durability to wait for instead of
    /// waiting: for a run of changes whose last wait covers them all. A refused change
    /// queues nothing.
    pub(crate) fn queue_namespace<T>(
        &self,
        change: impl FnOnce(&mut Namespace) -> FsResult<(T, Vec<NamespaceChange>)>,
    ) -> FsResult<(T, Pending)> {
        self.shards.namespace(|ns| {
            let (out, ops) = change(ns)?;
            let ops = ops.into_iter().map(DbOp::from).collect();
            Ok((out, self.store.submit(ops)))
        })
    }

    pub(crate) fn exists(&self, p: &str) -> FsError {
        FsError::new(
            Errno::Exist,
            format!("{} already exists", self.user_path(p)),
        )
    }

    /// The attributes of an inode this node holds.
    pub fn inode(&self, ino: u64) -> FsResult<Attr> {
        self.shards.namespace(|ns| ns.attr(ino)).ok_or_else(|| {
            FsError::new(
                Errno::NoEnt,
                format!("inode {ino:#x} does not exist (the file was removed)"),
            )
        })
    }

    /// The entry of `p`; on a miss, a file or directory already on the PFS is imported.
    async fn dentry_get(&self, p: &str) -> FsResult<Found> {
        if p == "/" {
            return Err(FsError::new(
                Errno::Inval,
                "the root has no directory entry",
            ));
        }
        let found = self
            .shards
            .namespace(|ns| ns.get(p).map(|d| (d, ns.attr(d.ino))));
        if found.is_some() {
            return Ok(found);
        }
        // Entries already on the PFS appear in Tessera, links as links; a path through a
        // link, and the temporaries of flushes, do not exist.
        if path::split(p).is_some_and(|(_, name)| name.starts_with(crate::pfs::TMP_MARKER)) {
            return Ok(None);
        }
        let Some(new) = self.on_pfs(p, |pfs, p| pfs.lstat(p)).await? else {
            return Ok(None);
        };
        let imported = self
            .change_namespace(|ns| {
                let (dentry, _, ops) = ns.create(p, new, false)?;
                Ok(((dentry, ns.attr(dentry.ino)), ops))
            })
            .await?;
        tracing::debug!(path = p, "imported from the PFS");
        Ok(Some(imported))
    }
}
