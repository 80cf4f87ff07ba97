//! Requests of the ownership service: which log holds the newest bytes of each range. The
//! map of each (file, stripe) lives on `stripe_shard(ino, stripe)`.

use crate::OwnedRun;
use serde::{Deserialize, Serialize};
use tessera_core::{Owner, Run};

/// Make the caller the owner of these logical runs of `ino` (its log holds them). With `upto`,
/// this attach publishes every write stored below that data-log position: what the daemon
/// publishes for the process if it dies starts there.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Attach {
    pub ino: u64,
    pub runs: Vec<Run>,
    pub upto: Option<u64>,
    /// Tokens of the list locks the writes were made under: the attach is refused (`ESTALE`)
    /// if any of them was revoked.
    pub fences: Vec<u64>,
}

/// Drop the caller's ownership of `[start, end)`; others' ownership stays.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Detach {
    pub ino: u64,
    pub start: u64,
    pub end: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DetachFile {
    pub ino: u64,
}

/// Who holds `[start, end)`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Query {
    pub ino: u64,
    pub start: u64,
    pub end: u64,
}

/// Who holds every byte of the file: the runs that start at or after `from`, as many as fit
/// in one answer (`Owners::next` says where the rest begins).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueryFile {
    pub ino: u64,
    pub from: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OwnAttach {
    pub ino: u64,
    pub stripe: u64,
    pub owner: Owner,
    pub runs: Vec<Run>,
    /// As [`Attach::fences`]: checked by the stripe's shard against the fences it received.
    pub fences: Vec<u64>,
    /// The transaction the attach is made under: pending until its decision.
    pub txn: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OwnDetach {
    pub ino: u64,
    pub stripe: u64,
    pub owner: Owner,
    pub start: u64,
    pub end: u64,
}

/// The whole ownership map of one stripe, to be cached by node `from` under a lease; this
/// shard will invalidate the copy before any change to the stripe.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OwnFetchStripe {
    pub ino: u64,
    pub stripe: u64,
    pub from: u32,
    /// Whose pending state to lay over the map; a copy is cached only of a stripe no prepared
    /// transaction touches, and only for a view without a transaction of its own.
    pub view: crate::TxnView,
}

/// Answer to [`OwnFetchStripe`]: a stripe's whole map; `cached` says whether a lease was
/// granted (small enough).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stripe {
    pub runs: Vec<OwnedRun>,
    pub version: u64,
    pub cached: bool,
    /// Prepared transactions with bytes here that the view left out.
    pub excluded: Vec<u64>,
}

/// The shard changed a stripe this node holds a copy of: drop it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Invalidate {
    pub ino: u64,
    pub stripe: u64,
    pub version: u64,
}

/// The runs of `ino` held by this node (optionally only `only`'s) that start at or after
/// `from`, ascending by start, at most `max` of them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OwnQueryFile {
    pub ino: u64,
    pub only: Option<Owner>,
    pub from: u64,
    pub max: u32,
    pub view: crate::TxnView,
}

/// Answer to [`OwnQueryFile`]: the runs, and the start of the first run left out (`None`: no
/// run was left out).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnedPage {
    pub runs: Vec<OwnedRun>,
    pub resume: Option<u64>,
    /// Prepared transactions with bytes of the file here that the view left out.
    pub excluded: Vec<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OwnDetachFile {
    pub ino: u64,
    pub owner: Owner,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OwnTruncate {
    pub ino: u64,
    pub size: u64,
}

/// The file is gone: drop its ownership and delete its logs on this node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DropFile {
    pub ino: u64,
}

/// These files are gone (their last names were removed): drop their ownership and delete their
/// logs on this node. Sent in the background, in batches, by the shard of their inodes, and
/// again until every node answered (a repeat finds nothing left to drop).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DropFiles {
    pub inos: Vec<u64>,
}
