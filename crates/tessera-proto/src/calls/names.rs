//! Requests of operations on a file's names that span shards (rename, link, unlink, rmdir;
//! `tessera_core::name_ops`): the file's inode shard drives each from an intent it keeps, and
//! the shards it asks carry out each step once.

use crate::Dentry;
use serde::{Deserialize, Serialize};
use tessera_core::name_ops::{NameOp, Step, StepKey};

/// A client's daemon asks the shard of `file`'s inode to carry out `op` (after its own checks
/// of the paths).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChangeNames {
    pub file: Dentry,
    pub op: NameOp,
}

/// A client's daemon asks the shard of `path` to remove that name of a file (an unlink outside
/// transactions), in one request when the file's inode is there too.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RemoveName {
    pub path: String,
}

/// Answer to [`RemoveName`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Removal {
    /// Removed: the inode was on the same shard, which drove the removal.
    Done,
    /// The name leads to a file whose inode is on another shard: ask it ([`ChangeNames`]).
    Elsewhere(Dentry),
    /// No entry here (the name may be the PFS's alone, or a transaction's): look it up.
    NotHere,
}

/// The inode's shard asks a path's shard (or, for `Step::Release`, the replaced file's inode
/// shard) to carry out one step of an intent. A second request with the same key is answered
/// with the first one's outcome, without carrying it out again.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NameStep {
    pub key: StepKey,
    pub step: Step,
}

/// The intents ended: the answers recorded under these keys go.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ForgetNameSteps {
    pub keys: Vec<StepKey>,
}

/// The entries of this shard that name files whose inodes `node` holds, in key order after
/// `after` (parent, name), looking at no more than a page's worth: for the check of names
/// against link counts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NamesOfNode {
    pub node: u32,
    pub after: Option<(String, String)>,
}

/// A page of [`NamesOfNode`]: (path, entry), and the key to ask after next (`None`: done).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NamesPage {
    pub names: Vec<(String, Dentry)>,
    pub next: Option<(String, String)>,
}

/// Administrative: the node checks the names of the files it holds against their link
/// counts, and raises a count below its names (what a crash in a rename of an earlier version
/// could leave: removing one name would have destroyed the file the other leads to).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckNames {}

/// What [`CheckNames`] found.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NamesChecked {
    /// Files whose names were counted.
    pub files: u64,
    /// The files whose count was below their names: (inode, count before, names).
    pub raised: Vec<(u64, u32, Vec<String>)>,
}
