//! Hard links: a file's further names. The entries of the names live on their paths' shards
//! like any entry; the inode's shard counts them (`tessera_core::namespace`, kept in the
//! `links` table where above 1), and a file's bytes go with its last name only. A link is
//! made by the inode's shard, count first (`services::names`).
//!
//! A file with a copy in the PFS directory (flushed, or found there) keeps one name: that
//! copy is found by its name, so a second name would read holes where it has the bytes.

use crate::Node;
use crate::rpc::{ServeClient, ServePeer};
use crate::services::namespace_shard::now_ns;
use tessera_core::name_ops::NameOp;
use tessera_core::placement::ino_shard;
use tessera_core::txn_entries::busy;
use tessera_core::{Errno, FsError, FsResult, path};
use tessera_proto::{
    Attr, ChangeNames, DentryLink, DropFile, FileKind, InodeLink, InodeUnlink, Link,
};

impl ServeClient<Link> for Node {
    async fn serve_client(&self, client: u64, r: Link) -> FsResult<()> {
        let from = path::normalize(&r.from)?;
        let to = path::normalize(&r.to)?;
        if let Some(txn) = self.txns.member(client) {
            return Err(FsError::new(
                Errno::NotSup,
                format!(
                    "{}: transaction {txn:016x} would not hold a hard link back until its commit; make links outside the transaction",
                    self.user_path(&to)
                ),
            ));
        }
        let (src, _) = self
            .lookup_for(client, &from)
            .await?
            .ok_or_else(|| self.enoent(&from))?;
        match src.kind {
            FileKind::File => {}
            FileKind::Dir => {
                return Err(self.no_link(&from, "it is a directory (a directory has one name)"));
            }
            FileKind::Symlink => {
                return Err(self.no_link(
                    &from,
                    "it is a symbolic link, kept in the PFS directory; link its target, or make another symbolic link",
                ));
            }
        }
        let (parent, _) = path::split(&to).ok_or_else(|| self.exists(&to))?;
        self.require_dir(parent, None).await?;
        if self.lookup_for(client, &to).await?.is_some() {
            return Err(self.exists(&to));
        }
        // The inode's shard makes the name, with the count raised first (`services::names`).
        let change = ChangeNames {
            file: src,
            op: NameOp::Link { from, to },
        };
        self.call(ino_shard(src.ino), change).await
    }
}

impl ServePeer<InodeLink> for Node {
    async fn serve_peer(&self, r: InodeLink) -> FsResult<Attr> {
        // Under the flush lock: no flush makes a PFS copy while the file gains a name.
        self.flush_locks
            .serialized(r.ino, async {
                self.refuse_link_of_flushed(&r.path).await?;
                self.change_namespace(|ns| ns.link(r.ino, now_ns())).await
            })
            .await
    }
}

impl ServePeer<DentryLink> for Node {
    async fn serve_peer(&self, r: DentryLink) -> FsResult<()> {
        let p = path::normalize(&r.path)?;
        self.settle_entry(&p, None).await?;
        self.change_namespace(|ns| {
            if let Some((txn, _)) = self.txns.entries(|e| e.get(&p)) {
                return Err(busy(&self.user_path(&p), txn));
            }
            Ok(((), ns.put_new(&p, r.dentry)?))
        })
        .await
        .map_err(|e| match e.errno {
            Errno::Exist => self.exists(&p),
            _ => e,
        })
    }
}

impl ServePeer<InodeUnlink> for Node {
    async fn serve_peer(&self, r: InodeUnlink) -> FsResult<bool> {
        self.change_namespace(|ns| Ok(ns.unlink(r.ino, now_ns())))
            .await
    }
}

impl Node {
    /// A file lost one of its names: with its last, it is forgotten everywhere (inode,
    /// ownership, logs on every node). Whether that was its last name.
    pub(crate) async fn drop_name(&self, ino: u64) -> FsResult<bool> {
        let last = self.call(ino_shard(ino), InodeUnlink { ino }).await?;
        if last {
            self.call_all(self.every_node(|| DropFile { ino })).await?;
        }
        Ok(last)
    }

    /// Refuses another name for the file named `p` if it has a PFS copy (found by that name).
    /// Called under the file's flush lock.
    pub(crate) async fn refuse_link_of_flushed(&self, p: &str) -> FsResult<()> {
        if self.on_pfs(p, |pfs, p| pfs.lstat(p)).await?.is_some() {
            return Err(self.no_link(
                p,
                "it has a copy in the PFS directory (flushed, or found there), which keeps one name per file; copy it instead",
            ));
        }
        Ok(())
    }

    fn no_link(&self, p: &str, why: &str) -> FsError {
        FsError::new(
            Errno::Perm,
            format!("cannot link {}: {why}", self.user_path(p)),
        )
    }
}
