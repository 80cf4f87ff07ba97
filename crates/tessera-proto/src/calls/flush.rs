//! Requests of the flush service: publishing files into the PFS, atomically.

use crate::OwnedExtent;
use serde::{Deserialize, Serialize};

/// Write the owned extents of a file (or of one range) to the PFS, atomically.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Flush {
    pub path: String,
    pub range: Option<(u64, u64)>,
}

/// [`Flush`] as sent to the node holding the file's inode, which serialises flushes of one
/// file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FlushFile {
    pub path: String,
    pub range: Option<(u64, u64)>,
}

/// Answer to a flush: the bytes written and the nodes whose logs held them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Flushed {
    pub bytes: u64,
    pub nodes: u32,
}

/// Write these extents, held by logs on this node, into `target` on the PFS.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FlushPart {
    pub ino: u64,
    pub target: String,
    pub extents: Vec<OwnedExtent>,
}
