//! Requests of the space service: burst-buffer space, and which files a client writes here.

use serde::{Deserialize, Serialize};

/// Reserve burst-buffer space before appending to logs; answered with the bytes granted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reserve {
    pub bytes: u64,
}

/// Return unused reserved space.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Release {
    pub bytes: u64,
}

/// This client keeps logs of `ino` on this node (sent before its first write of the file, and
/// again after a reconnect): where to look for what it leaves unpublished.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Writing {
    pub ino: u64,
}
