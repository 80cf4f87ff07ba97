//! The metadata of files and directories: inodes, directory entries and the changes made to
//! them. Plain data, shared by the namespace state machine, the store and the wire (the
//! protocol re-exports these types; their encoding is pinned by its golden tests).

use serde::{Deserialize, Serialize};

/// What an inode is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FileKind {
    File,
    Dir,
    /// A symbolic link found in the PFS directory (Tessera creates none): shown as a link,
    /// followed by a read only to a target beneath the PFS root, never by a change.
    Symlink,
}

/// Attributes of a file or directory (an inode).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attr {
    pub ino: u64,
    pub kind: FileKind,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub atime_ns: i64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    /// The names the file has (hard links); 1 for a directory or a link. Stored apart from
    /// the other attributes (only where it is above 1), so inodes stored before link counts
    /// existed read unchanged.
    pub nlink: u32,
}

/// Most names one file can have (`EMLINK` beyond).
pub const MAX_LINKS: u32 = 65_000;

/// One entry of a directory listing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirEntry {
    pub name: String,
    pub ino: u64,
    pub kind: FileKind,
}

/// A directory entry as stored on its path's shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dentry {
    pub ino: u64,
    pub kind: FileKind,
}

/// A change of permission bits and times (chmod, utimensat); `None` keeps the value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttrChange {
    pub mode: Option<u32>,
    pub atime_ns: Option<i64>,
    pub mtime_ns: Option<i64>,
}

/// How an inode's size changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SizeChange {
    /// Grow to at least this size (attach).
    Extend(u64),
    /// Set exactly (truncate).
    Set(u64),
}
