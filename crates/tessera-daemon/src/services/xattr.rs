//! The extended-attribute service: a client names a path, its daemon finds the entry (as the
//! client's view sees it) and asks the inode's shard, which keeps the attributes beside the
//! inode (`tessera_core::xattrs`) and drops them with it. Links (found on the PFS) have none.

use crate::Node;
use crate::rpc::{ServeClient, ServePeer};
use tessera_core::namespace::ROOT_INO;
use tessera_core::placement::ino_shard;
use tessera_core::{Errno, FsError, FsResult, path};
use tessera_proto::{FileKind, InodeXattr, Xattr, XattrOp, XattrReply};

impl ServeClient<Xattr> for Node {
    async fn serve_client(&self, client: u64, r: Xattr) -> FsResult<XattrReply> {
        let p = path::normalize(&r.path)?;
        let (d, _) = self
            .lookup_for(client, &p)
            .await?
            .ok_or_else(|| self.enoent(&p))?;
        if d.kind == FileKind::Symlink {
            return match r.op {
                // A link has none, as on file systems that keep no user attributes on links.
                XattrOp::List => Ok(XattrReply::Names(Vec::new())),
                _ => Err(FsError::new(
                    Errno::NotSup,
                    format!(
                        "{} is a symbolic link in the PFS directory; Tessera keeps no extended attributes on links",
                        self.user_path(&p)
                    ),
                )),
            };
        }
        if d.ino == ROOT_INO {
            // The root is no shard's inode: it keeps no attributes.
            return match r.op {
                XattrOp::List => Ok(XattrReply::Names(Vec::new())),
                XattrOp::Get { name } => Err(FsError::new(
                    Errno::NoData,
                    format!("no extended attribute {name} (Tessera's root keeps none)"),
                )),
                _ => Err(FsError::new(
                    Errno::NotSup,
                    "Tessera's root directory keeps no extended attributes; set them on a directory inside it",
                )),
            };
        }
        self.call(
            ino_shard(d.ino),
            InodeXattr {
                ino: d.ino,
                op: r.op,
            },
        )
        .await
    }
}

impl ServePeer<InodeXattr> for Node {
    async fn serve_peer(&self, r: InodeXattr) -> FsResult<XattrReply> {
        let InodeXattr { ino, op } = r;
        if matches!(op, XattrOp::Get { .. } | XattrOp::List) {
            // Reads change nothing: no state write to wait for.
            return self
                .shards
                .namespace(|ns| ns.xattr(ino, op))
                .map(|(a, _)| a);
        }
        self.change_namespace(|ns| ns.xattr(ino, op)).await
    }
}
