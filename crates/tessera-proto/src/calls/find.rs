//! Requests of `tessera find`: each node tests the entries its shard holds beneath a root
//! against the predicates an entry answers (name, type), a page at a time
//! ([`FindEntries`]), and the inodes its shard holds against those on attributes (size,
//! modification time, [`InodeAttrs`]). The command asks every node at once.

use crate::Dentry;
use serde::{Deserialize, Serialize};
use tessera_core::find::Filter;

/// The entries of this shard beneath `root` (an internal path) whose name and type pass
/// `filter`, in key order after `after` (parent, name), looking at no more than `limit`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FindEntries {
    pub root: String,
    pub filter: Filter,
    pub after: Option<(String, String)>,
    pub limit: u32,
}

/// A page of [`FindEntries`]: the entries that passed (path, entry), how many entries
/// beneath the root it looked at and how many of those were not directories, and the key to
/// ask after next (`None`: done).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FoundPage {
    pub found: Vec<(String, Dentry)>,
    pub looked_at: u64,
    pub files_looked_at: u64,
    pub next: Option<(String, String)>,
}

/// The attributes of inodes this shard holds, in order (`None`: gone meanwhile).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InodeAttrs {
    pub inos: Vec<u64>,
}
