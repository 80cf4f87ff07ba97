//! Requests of extended attributes: a client names a path, its daemon asks the inode's shard.

use serde::{Deserialize, Serialize};
pub use tessera_core::xattrs::{SetMode, XattrOp, XattrReply};

/// Client: an extended-attribute operation on the entry at `path` (not through a link).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Xattr {
    pub path: String,
    pub op: XattrOp,
}

/// Peer: the same, on an inode of the receiver's shard.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InodeXattr {
    pub ino: u64,
    pub op: XattrOp,
}
