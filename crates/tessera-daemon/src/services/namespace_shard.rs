//! The namespace service, shard side: the entries and inodes this node holds. Each request
//! touches only this node's state; a change is queued to the store under the namespace lock
//! and answered once durable.

use crate::Node;
use crate::rpc::ServePeer;
use crate::store::DbOp;
use tessera_core::namespace::{Namespace, NamespaceChange, NewNode};
use tessera_core::{Errno, FsError, FsResult, path};
use tessera_proto::{
    Attr, Created, Dentry, DentryCreate, DentryGet, DentryPut, DentryRemove, DirEntry, Found,
    HasChildren, InodeGet, InodeRemove, InodeSetAttr, InodeSetSize, ListChildren, SizeChange,
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
        self.dentry_get(&path::normalize(&r.path)?).await
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
        let exclusive = r.exclusive;
        self.change_namespace(|ns| {
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
        self.change_namespace(|ns| ns.remove(&p, r.ino)).await
    }
}

impl ServePeer<DentryPut> for Node {
    async fn serve_peer(&self, r: DentryPut) -> FsResult<Option<Dentry>> {
        let p = path::normalize(&r.path)?;
        self.change_namespace(|ns| ns.put(&p, r.dentry)).await
    }
}

impl ServePeer<ListChildren> for Node {
    async fn serve_peer(&self, r: ListChildren) -> FsResult<Vec<DirEntry>> {
        let d = path::normalize(&r.dir)?;
        Ok(self.ns.lock().expect("ns").children(&d))
    }
}

impl ServePeer<HasChildren> for Node {
    async fn serve_peer(&self, r: HasChildren) -> FsResult<bool> {
        let d = path::normalize(&r.dir)?;
        Ok(self.ns.lock().expect("ns").has_children(&d))
    }
}

impl ServePeer<InodeGet> for Node {
    async fn serve_peer(&self, r: InodeGet) -> FsResult<Attr> {
        self.inode(r.ino)
    }
}

impl ServePeer<InodeSetSize> for Node {
    async fn serve_peer(&self, r: InodeSetSize) -> FsResult<Attr> {
        if let (Some(txn), SizeChange::Extend(end)) = (r.txn, r.change) {
            self.check_txn_id(txn)?;
            self.extend_pending(txn, r.ino, end).await?;
            return self.inode(r.ino);
        }
        self.change_namespace(|ns| ns.set_size(r.ino, r.change, now_ns()))
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
    /// Applies a change to this node's namespace shard and waits until it is durable. The
    /// change is queued to the store under the namespace lock, so the store sees changes in
    /// the order they were made. A refused change is answered once the changes before it are
    /// durable too: an entry it found in the way is never one a crash could still take back.
    pub(crate) async fn change_namespace<T>(
        &self,
        change: impl FnOnce(&mut Namespace) -> FsResult<(T, Vec<NamespaceChange>)>,
    ) -> FsResult<T> {
        let (out, pending) = {
            let mut ns = self.ns.lock().expect("ns");
            match change(&mut ns) {
                Ok((out, ops)) => {
                    let ops = ops.into_iter().map(DbOp::from).collect();
                    (Ok(out), self.store.submit(ops))
                }
                Err(e) => (Err(e), self.store.submit(Vec::new())),
            }
        };
        pending.durable().await?;
        out
    }

    fn exists(&self, p: &str) -> FsError {
        FsError::new(
            Errno::Exist,
            format!("{} already exists", self.user_path(p)),
        )
    }

    /// The attributes of an inode this node holds.
    pub fn inode(&self, ino: u64) -> FsResult<Attr> {
        self.ns.lock().expect("ns").attr(ino).ok_or_else(|| {
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
        let found = {
            let ns = self.ns.lock().expect("ns");
            ns.get(p).map(|d| (d, ns.attr(d.ino)))
        };
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
