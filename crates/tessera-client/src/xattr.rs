//! Extended attributes of files and directories in Tessera (setxattr and friends): kept by
//! the daemons beside each inode, in the `user.`, `trusted.` and `security.` namespaces.

use crate::Client;
use tessera_core::xattrs::{SetMode, XattrOp, XattrReply};
use tessera_core::{Errno, FsError, FsResult};
use tessera_proto::Xattr;

fn unexpected(reply: XattrReply) -> FsError {
    FsError::new(
        Errno::Proto,
        format!("the daemon answered an extended-attribute call with {reply:?}"),
    )
}

impl Client {
    /// Runs `op` on the entry at `path` itself (a link found on the PFS is not followed).
    pub fn xattr(&self, path: &str, op: XattrOp) -> FsResult<XattrReply> {
        self.through_links_on_miss(path, |path| {
            let mut g = self.lock();
            let p = g.resolve(path)?;
            g.call(Xattr {
                path: p,
                op: op.clone(),
            })
        })
    }

    pub fn get_xattr(&self, path: &str, name: &str) -> FsResult<Vec<u8>> {
        let op = XattrOp::Get {
            name: name.to_string(),
        };
        match self.xattr(path, op)? {
            XattrReply::Value(v) => Ok(v),
            other => Err(unexpected(other)),
        }
    }

    pub fn list_xattrs(&self, path: &str) -> FsResult<Vec<String>> {
        match self.xattr(path, XattrOp::List)? {
            XattrReply::Names(n) => Ok(n),
            other => Err(unexpected(other)),
        }
    }

    pub fn set_xattr(&self, path: &str, name: &str, value: &[u8], mode: SetMode) -> FsResult<()> {
        let op = XattrOp::Set {
            name: name.to_string(),
            value: value.to_vec(),
            mode,
        };
        self.xattr(path, op).map(drop)
    }

    pub fn remove_xattr(&self, path: &str, name: &str) -> FsResult<()> {
        let op = XattrOp::Remove {
            name: name.to_string(),
        };
        self.xattr(path, op).map(drop)
    }
}
