//! The data that requests and answers carry (see [`crate::calls`] for the requests).
//!
//! Nothing here carries behaviour, except flattening runs into extents for the callers that
//! want extents (flush, the C API).

use serde::{Deserialize, Serialize};
pub use tessera_core::OwnedRun;
use tessera_core::Owner;
pub use tessera_core::meta::{Attr, AttrChange, Dentry, DirEntry, FileKind, SizeChange};

/// Version of the client and peer protocols; a mismatch is refused at hello.
pub const PROTOCOL_VERSION: u32 = 26;

/// One range of a file and the log that holds its newest attached bytes (the flat form of
/// an [`OwnedRun`], for flushes and the C API).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnedExtent {
    pub start: u64,
    pub end: u64,
    pub owner: Owner,
}

/// The pieces of `runs` as extents, in the order of the runs.
pub fn extents_of(runs: &[OwnedRun]) -> impl Iterator<Item = OwnedExtent> + '_ {
    runs.iter().flat_map(|r| {
        r.run.pieces().map(move |(start, end)| OwnedExtent {
            start,
            end,
            owner: r.owner,
        })
    })
}

/// The pieces of disjoint `runs` as extents, ascending, touching pieces of one owner joined.
pub fn sorted_extents(runs: &[OwnedRun]) -> Vec<OwnedExtent> {
    let mut all: Vec<OwnedExtent> = extents_of(runs).collect();
    all.sort_unstable_by_key(|e| e.start);
    let mut out: Vec<OwnedExtent> = Vec::with_capacity(all.len());
    for e in all {
        match out.last_mut() {
            Some(last) if last.end == e.start && last.owner == e.owner => last.end = e.end,
            _ => out.push(e),
        }
    }
    out
}

/// Answer to a query: the owners as runs (disjoint, ascending by start; the pieces of runs of
/// different owners interleave), and the file size known to the namespace. A strided N-1
/// checkpoint answers in one run per writer and stripe, however many pieces each wrote. A
/// ranged query whose runs cover the whole range leaves the size out (`None`): the reader then
/// knows the bytes exist, and the answer needs no trip to the inode's node. A whole-file answer
/// too large for one frame stops before `next`: the runs starting there and after are asked
/// for with `QueryFile { from: next }`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owners {
    pub size: Option<u64>,
    /// Bytes at and beyond this that no one owns are holes, not the PFS copy's (a
    /// transaction the asker sees cut the file there).
    pub pfs_upto: Option<u64>,
    pub runs: Vec<OwnedRun>,
    pub next: Option<u64>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenFlags {
    pub create: bool,
    pub exclusive: bool,
    pub truncate: bool,
    /// Opened for writing (a write open never follows a PFS link).
    pub write: bool,
}

/// What a daemon reports about itself.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeStatus {
    pub node: u32,
    pub pid: u32,
    pub uptime_ms: u64,
    pub bb_dir: String,
    /// Bytes the logs of this node hold on disk.
    pub bb_used: u64,
    /// Bytes reserved by live clients and not written yet.
    pub bb_reserved: u64,
    /// The configured capacity (0: until the device is full).
    pub bb_capacity: u64,
    /// Size and free space of the burst buffer's device.
    pub bb_device_total: u64,
    pub bb_device_free: u64,
    pub clients: u64,
    pub files_owned: u64,
    /// Entries of this node's ownership maps (one per run of one owner).
    pub ownership_entries: u64,
    pub requests: u64,
    /// Queries of stripes held by other daemons answered from a leased copy, and those that
    /// had to ask the stripe's shard.
    pub stripe_copy_hits: u64,
    pub stripe_copy_misses: u64,
    /// List locks granted by this node's lock tables, and their runs, since it started.
    pub list_locks_granted: u64,
    pub list_lock_runs: u64,
    /// The most owners that held locks of one file at once on this node since it started.
    pub lock_peak_holders: u64,
    /// Transactions this node is the home of that are not finished (open, or completing).
    pub txns_at_home: u64,
    /// Of those, the ones still open (not decided).
    pub txns_open: u64,
    /// Transactions holding pending state on this node.
    pub txns_pending: u64,
    /// Logs of this node listed for release whose check is still to come: space that comes
    /// back once nothing owns a byte of them (logs a migration moved away from, and those an
    /// aborted transaction or a member that died unpublished left).
    pub logs_to_release: u64,
    /// Operations on names of files held here that have not ended (a shard they need did
    /// not answer yet).
    pub name_intents: u64,
    /// Removed files whose bytes this node (the shard of their inodes) has still to release on
    /// every node; a removal answers before they are released.
    #[serde(default)]
    pub files_to_drop: u64,
    /// Leases on attributes this node's shard has granted and still counts.
    #[serde(default)]
    pub attr_leases: u64,
    /// Stats this node answered its clients with a lease, and without one.
    #[serde(default)]
    pub stats_leased: u64,
    #[serde(default)]
    pub stats_unleased: u64,
    /// The peer security level this daemon runs with.
    #[serde(default)]
    pub security: crate::peer_auth::Security,
    /// Lock requests (record and list locks) waiting in this node's lock tables now: what a
    /// test awaits before it checks that a conflicting request was not granted.
    #[serde(default)]
    pub lock_waiters: u64,
    /// Where the node serves its metrics (`http://ADDR:PORT/metrics`), if it does.
    #[serde(default)]
    pub metrics_endpoint: Option<String>,
    /// The metrics' samples now (name with labels, value): counters and gauges, histograms
    /// as their count and sum.
    #[serde(default)]
    pub metrics: Vec<(String, f64)>,
}
