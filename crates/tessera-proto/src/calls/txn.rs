//! Requests of the transaction service (D2T): a transaction's home daemon (the daemon of
//! the process that opened it) runs its two-phase commit; every daemon keeps the writes made
//! under it pending until the decision, visible only to its members.
//!
//! A transaction id carries its home: the node is the top 16 bits ([`txn_home`]).

use crate::Attr;
use serde::{Deserialize, Serialize};

/// The home node of a transaction id.
pub fn txn_home(txn: u64) -> u32 {
    (txn >> 48) as u32
}

/// The id of the `n`-th transaction opened at `node` (`n` < 2^48).
pub fn txn_id(node: u32, n: u64) -> u64 {
    (u64::from(node) << 48) | (n & ((1 << 48) - 1))
}

/// Open a transaction at this daemon (its home); the answer is its id.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TxnOpen {}

/// From now on this connection is a member of `txn` (`None`: of none): its attaches and size
/// changes are pending under it, and its queries see them. Refused unless the transaction is
/// open at its home. The answer is the log id the process writes under while a member (its
/// client id when it leaves): a transaction's writes go to logs of their own, so that a
/// reader sent to the process's older logs by committed ownership never finds pending bytes
/// there. `log` resumes the id handed out before (after a daemon restart).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TxnJoin {
    pub txn: Option<u64>,
    pub log: Option<u64>,
}

/// Reserve `count` transaction ids at this daemon (their home), opened later by the
/// enrollment of their members ([`TxnEnroll`] with `open`); the answer is the first (the ids
/// are consecutive). A job's processes then name their transactions without asking.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TxnReserve {
    pub count: u32,
}

/// At `txn`'s home (the daemon that opened or reserved it): make the processes `members`
/// (node, client) members of `txn` at once, as [`TxnJoin`] makes one, opening it first if
/// `open` and it was reserved here and not opened yet. Each member's node registers it and
/// hands it a log id; the answer is those log ids, in the order of `members`, which each
/// member then takes up without a further call. A member must have published its writes
/// before (its node cannot check that; the member's library does). Refused unless the
/// transaction is open at this daemon and every member is connected to its node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TxnEnroll {
    pub txn: u64,
    pub members: Vec<(u32, u64)>,
    pub open: bool,
}

/// From a transaction's home to a member's node: make `clients` (connected here) members of
/// `txn`, each with a new log id (the answer, in order); or, with `undo`, take back such an
/// enrollment (the home refused it after).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TxnEnrollNode {
    pub txn: u64,
    pub clients: Vec<u64>,
    pub undo: bool,
}

/// Commit (`commit`) or abort `txn`: answered once the decision is durable at its home. A
/// commit that ends in an abort fails with the reasons.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TxnDecide {
    pub txn: u64,
    pub commit: bool,
    /// Why it aborts (the processes' votes), for the error members see.
    pub reasons: Vec<String>,
}

/// At the home: a process (client `client` of node `node`) joined or left `txn`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TxnMember {
    pub txn: u64,
    pub node: u32,
    pub client: u64,
    pub joined: bool,
}

/// From the home to a member's node: which of `clients` are still members of `txn` there
/// (their connections live). A member whose node no longer counts it, or whose node stays
/// unreachable for `txn_timeout_ms`, is no longer counted by the home.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TxnMembers {
    pub txn: u64,
    pub clients: Vec<u64>,
}

/// At the home: as [`TxnDecide`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TxnHomeDecide {
    pub txn: u64,
    pub commit: bool,
    pub reasons: Vec<String>,
}

/// Make `txn`'s pending state on this node durable and close it to further writes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TxnPrepare {
    pub txn: u64,
}

/// Whether `txn` holds `path` on this shard as the pending entry of file `ino`: the prepare
/// of the shard of a name the transaction renamed away checks that the new name is there.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TxnMovedIn {
    pub txn: u64,
    pub path: String,
    pub ino: u64,
}

/// A member of `txn` truncates `ino` to `size`: every node holds the cut back for the
/// transaction; the inode's node also the size, and `path`, whose PFS copy it cuts at commit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TxnTruncate {
    pub txn: u64,
    pub ino: u64,
    pub size: u64,
    pub path: String,
}

/// `txn` was decided: lay its pending state into the maps (`commit`) or drop it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TxnComplete {
    pub txn: u64,
    pub commit: bool,
}

/// At the home: where `txn` stands.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TxnStatus {
    pub txn: u64,
}

/// Answer to [`TxnStatus`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxnVerdict {
    /// Members may still write, or the commit is under way: not decided.
    Undecided,
    Committed,
    Aborted,
    /// The home has no state of it: never opened, or completed everywhere and forgotten. A
    /// node holding pending state of it treats it as aborted (presumed abort).
    Unknown,
}

/// Whose pending state a query sees: its own transaction's (`viewer`), and those the asker
/// learned were decided to commit (`committed`) and whose completion may not have reached the
/// shard yet. Every other transaction's pending state is left out, and named in the answer if
/// it is prepared (in doubt) and touches what was asked.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TxnView {
    pub viewer: Option<u64>,
    pub committed: Vec<u64>,
}

/// An inode's attributes as `view` sees them (its size includes pending size changes of the
/// transactions the view includes).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InodeGetAs {
    pub ino: u64,
    pub view: TxnView,
}

/// Answer to [`InodeGetAs`]: the attributes, and the prepared transactions left out that
/// would have changed them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AttrAs {
    pub attr: Attr,
    pub excluded: Vec<u64>,
    /// Beyond this, the file's PFS copy is not part of it: a transaction the view includes
    /// cut the file there, and the copy may not be cut yet.
    pub pfs_upto: Option<u64>,
}
