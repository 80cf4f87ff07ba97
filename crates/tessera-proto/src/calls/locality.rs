//! Requests of the locality service (FusionFS and Swift): where the bytes of files live, for schedulers.
//!
//! A client's [`Locate`] names many ranges at once; its daemon answers it in three batched
//! rounds, whatever the number of paths: the names on their path shards ([`LocateNames`]),
//! then, together, the inodes on theirs ([`LocateInodes`]) and the ownership runs on every
//! node ([`LocateRuns`]). [`ForwardPing`] is the no-op that takes the same forwarded path
//! (client, its daemon, another daemon), the yardstick of a locate's cost.
//!
//! Migration (FusionFS's migrate-on-open): a reader asks for the stripes of a file with their
//! owners and the version they were read at ([`MigratePlan`], [`OwnStripeAt`]), copies the
//! remote bytes into its own log, and moves ownership with a conditional attach
//! ([`AttachIf`], [`OwnAttachIf`]): a stripe changed since its version keeps its owners. The
//! logs copied from are released after a grace period ([`ReleaseLogs`]).

use serde::{Deserialize, Serialize};
use tessera_core::locality::Placement;
use tessera_core::{FsError, OwnedRun, Owner, Run};

/// One range to locate: `len` `None` is to the end of the file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LocateRange {
    pub path: String,
    pub start: u64,
    pub len: Option<u64>,
}

/// Where the bytes of these ranges live; each answered on its own (one missing path fails
/// only its own entry). At most `max_extents` extents are listed per range.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Locate {
    pub ranges: Vec<LocateRange>,
    pub max_extents: u32,
}

/// Answer to [`Locate`]: one entry per range, in order, and when the answer was assembled
/// (the daemon's clock, nanoseconds since the epoch): answers are advisory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Located {
    pub view_time_ns: i64,
    pub files: Vec<Result<FileLocation, FsError>>,
}

/// Where one range of one file lives.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FileLocation {
    pub ino: u64,
    pub size: u64,
    pub placement: Placement,
}

/// Asks the daemon of `node` for its number, through the asker's daemon.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ForwardPing {
    pub node: u32,
}

/// The entries of normalised paths this shard holds, and the size of each one's PFS copy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LocateNames {
    pub paths: Vec<String>,
}

/// What a path names, for a locate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamedFile {
    pub ino: u64,
    pub kind: crate::FileKind,
    /// The size of its PFS copy, if it has one.
    pub pfs_size: Option<u64>,
    /// The inode's facts, when this shard holds the inode too (the usual case: a file's inode
    /// lives where it was created).
    pub inode: InodeFacts,
}

/// The size of each inode this shard holds, and whether its bytes are unchanged since its
/// last whole-file flush.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LocateInodes {
    pub inos: Vec<u64>,
}

/// Answer per inode of [`LocateInodes`]: (size, flushed clean); `None` if it is gone.
pub type InodeFacts = Option<(u64, bool)>;

/// The ownership runs this node holds within each span `(ino, stripe, start, end)` (within
/// one stripe), at most `max_runs` in all: a span that would pass the bound is answered
/// `None` (the asker pages through it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LocateRuns {
    pub spans: Vec<(u64, u64, u64, u64)>,
    pub max_runs: u32,
}

/// Answer per span of [`LocateRuns`].
pub type SpanRuns = Option<Vec<OwnedRun>>;

/// The stripes of `ino` below its size, each with its owners and the version they were read at
/// (stripes a transaction holds state in are left out).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MigratePlan {
    pub ino: u64,
}

/// One stripe's owners as of `version` on its shard.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StripeAt {
    pub stripe: u64,
    pub version: u64,
    pub runs: Vec<OwnedRun>,
}

/// Make the caller the owner of these runs of `ino` (copies in its log of bytes it read),
/// stripe by stripe, only where the stripe is unchanged since the version it was read at.
/// `upto` as in [`crate::Attach`]; `from`: the owners copied from, whose logs may be released.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AttachIf {
    pub ino: u64,
    /// (stripe, version, runs within the stripe)
    pub stripes: Vec<(u64, u64, Vec<Run>)>,
    pub upto: Option<u64>,
    pub from: Vec<Owner>,
}

/// A stripe's owners and the shard's version now; `None` if a transaction holds state there.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OwnStripeAt {
    pub ino: u64,
    pub stripe: u64,
}

/// The conditional attach of one stripe: applied only if the stripe is unchanged since
/// `version` (answered: whether it was applied).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OwnAttachIf {
    pub ino: u64,
    pub stripe: u64,
    pub owner: Owner,
    pub runs: Vec<Run>,
    pub version: u64,
}

/// After the grace period, remove the logs of `ino` these clients of the receiving node wrote,
/// if they no longer own any of its bytes and their writers ended. `now`: the file was just
/// flushed, so the grace of every such log of it on the receiving node ends.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReleaseLogs {
    pub ino: u64,
    pub clients: Vec<u64>,
    pub now: bool,
}
