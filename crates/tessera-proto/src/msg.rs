//! Requests and responses.
//!
//! Clients speak [`Request`]/[`Response`] to the daemon of their node; the daemon fans the work
//! out to the shard owners with [`PeerRequest`]/[`PeerResponse`]. Every variant maps to one
//! primitive of the file system; nothing here carries behaviour.

use serde::{Deserialize, Serialize};
use tessera_core::locks::{HeldLock, LockKind, LockOwner};
use tessera_core::{FsError, Owner, Run};

/// Version of the client and peer protocols; a mismatch is refused at hello.
pub const PROTOCOL_VERSION: u32 = 4;

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
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirEntry {
    pub name: String,
    pub ino: u64,
    pub kind: FileKind,
}

/// One range of a file and the log that holds its newest attached bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnedExtent {
    pub start: u64,
    pub end: u64,
    pub owner: Owner,
}

/// Answer to a query: the owned extents, ascending, and the file size known to the namespace.
/// A ranged query whose extents cover the whole range leaves the size out (`None`): the reader
/// then knows the bytes exist, and the answer needs no trip to the inode's node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owners {
    pub size: Option<u64>,
    pub extents: Vec<OwnedExtent>,
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
    pub extents_owned: u64,
    pub requests: u64,
}

/// Client -> its node's daemon.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Request {
    /// First message on a connection. `resume` re-binds a client id after a reconnect, so the
    /// process keeps appending to the same logs.
    Hello {
        version: u32,
        pid: u32,
        resume: Option<u64>,
    },
    /// Look up (and with `flags.create`, create) a regular file; with `want_owners`, also run
    /// a whole-file query (the session_open of session and MPI-IO consistency).
    Open {
        path: String,
        flags: OpenFlags,
        mode: u32,
        want_owners: bool,
    },
    Stat {
        path: String,
    },
    Mkdir {
        path: String,
        mode: u32,
    },
    Rmdir {
        path: String,
    },
    Unlink {
        path: String,
    },
    Readdir {
        path: String,
    },
    Rename {
        from: String,
        to: String,
    },
    Truncate {
        path: String,
        size: u64,
    },
    /// Change the permission bits and/or times of a file or directory.
    SetAttr {
        path: String,
        change: AttrChange,
    },
    /// The target of a symbolic link (found in the PFS directory).
    ReadLink {
        path: String,
    },
    /// Make the caller the owner of these logical runs of `ino` (its log holds them). With
    /// `upto`, this attach publishes every write stored below that data-log position: what
    /// the daemon publishes for the process if it dies starts there.
    Attach {
        ino: u64,
        runs: Vec<Run>,
        upto: Option<u64>,
    },
    /// Drop the caller's ownership of `[start, end)`; others' ownership stays.
    Detach {
        ino: u64,
        start: u64,
        end: u64,
    },
    DetachFile {
        ino: u64,
    },
    Query {
        ino: u64,
        start: u64,
        end: u64,
    },
    QueryFile {
        ino: u64,
    },
    /// Read logical ranges from other nodes' logs through the daemons: for each owner, its
    /// ranges. The answer is every range's bytes, concatenated in request order.
    Read {
        ino: u64,
        parts: Vec<(Owner, Vec<(u64, u64)>)>,
    },
    /// Write the owned extents of a file (or of one range) to the PFS, atomically.
    Flush {
        path: String,
        range: Option<(u64, u64)>,
    },
    /// Take (`kind: Some`) or release (`None`) a byte-range lock `[start, end)` of `ino` for
    /// this client (fcntl F_SETLK; F_SETLKW with `wait`). `pid` is reported to F_GETLK.
    Lock {
        ino: u64,
        start: u64,
        end: u64,
        kind: Option<LockKind>,
        wait: bool,
        pid: u32,
    },
    /// The first lock of another process that conflicts with `kind` (fcntl F_GETLK).
    GetLock {
        ino: u64,
        start: u64,
        end: u64,
        kind: LockKind,
    },
    /// Reserve burst-buffer space before appending to logs.
    Reserve {
        bytes: u64,
    },
    /// Return unused reserved space.
    Release {
        bytes: u64,
    },
    /// This client keeps logs of `ino` on this node (sent before its first write of the file,
    /// and again after a reconnect): where to look for what it leaves unpublished.
    Writing {
        ino: u64,
    },
    Status,
    Shutdown,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Response {
    Ok,
    Hello {
        client: u64,
        node: u32,
        nodes: u32,
    },
    /// `path` is the file opened: the path asked for, or where its PFS links led.
    Opened {
        attr: Attr,
        owners: Option<Owners>,
        path: String,
    },
    Attr(Attr),
    Entries(Vec<DirEntry>),
    Owners(Owners),
    /// `len` bytes of file data follow this message in the frame (see `frame`).
    Data {
        len: u64,
    },
    Flushed {
        bytes: u64,
        nodes: u32,
    },
    Granted {
        bytes: u64,
    },
    /// Answer to `GetLock`: the conflicting lock, or `None` if the lock could be taken.
    Lock(Option<HeldLock>),
    Status(NodeStatus),
    /// Answer to `ReadLink`.
    Link {
        target: String,
    },
    Err(FsError),
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

/// Daemon -> daemon. Each acts on data the receiver's shard holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum PeerRequest {
    Ping,
    /// Directory entry of `path` (imports it from the PFS on a miss).
    DentryGet {
        path: String,
    },
    /// Create the entry and its inode here; returns the existing one unless `exclusive`.
    DentryCreate {
        path: String,
        kind: FileKind,
        mode: u32,
        uid: u32,
        gid: u32,
        exclusive: bool,
    },
    /// Remove the entry if it still names `ino`.
    DentryRemove {
        path: String,
        ino: u64,
    },
    /// Insert or replace an entry (rename target); returns the replaced entry.
    DentryPut {
        path: String,
        dentry: Dentry,
    },
    ListChildren {
        dir: String,
    },
    HasChildren {
        dir: String,
    },
    InodeGet {
        ino: u64,
    },
    InodeSetSize {
        ino: u64,
        change: SizeChange,
    },
    InodeRemove {
        ino: u64,
    },
    InodeSetAttr {
        ino: u64,
        change: AttrChange,
    },
    OwnAttach {
        ino: u64,
        stripe: u64,
        owner: Owner,
        runs: Vec<Run>,
    },
    OwnDetach {
        ino: u64,
        stripe: u64,
        owner: Owner,
        start: u64,
        end: u64,
    },
    /// The whole ownership map of one stripe, to be cached by node `from` under a lease;
    /// this shard will invalidate the copy before any change to the stripe.
    OwnFetchStripe {
        ino: u64,
        stripe: u64,
        from: u32,
    },
    /// The shard changed a stripe this node holds a copy of: drop it.
    Invalidate {
        ino: u64,
        stripe: u64,
        version: u64,
    },
    /// Every extent of `ino` held by this node, optionally only the caller's.
    OwnQueryFile {
        ino: u64,
        only: Option<Owner>,
    },
    OwnDetachFile {
        ino: u64,
        owner: Owner,
    },
    OwnTruncate {
        ino: u64,
        size: u64,
    },
    /// The file is gone: drop its ownership and delete its logs on this node.
    DropFile {
        ino: u64,
    },
    /// Read logical ranges of the log (ino, client) stored on this node.
    ReadLog {
        ino: u64,
        client: u64,
        ranges: Vec<(u64, u64)>,
    },
    /// Flush a file (or a range of it) to the PFS; sent to the node holding its inode, which
    /// serialises flushes of one file.
    Flush {
        path: String,
        range: Option<(u64, u64)>,
    },
    /// Write these extents, held by logs on this node, into `target` on the PFS.
    FlushPart {
        ino: u64,
        target: String,
        extents: Vec<OwnedExtent>,
    },
    /// Take or release a byte-range lock in the lock table of `ino` (kept on its inode's node).
    /// With `wait`, the answer is delayed until the lock is granted or `LOCK_WAIT_SLICE` has
    /// passed (then `EAGAIN`, and the caller asks again).
    Lock {
        ino: u64,
        owner: LockOwner,
        start: u64,
        end: u64,
        kind: Option<LockKind>,
        wait: bool,
    },
    GetLock {
        ino: u64,
        owner: LockOwner,
        start: u64,
        end: u64,
        kind: LockKind,
    },
    /// The owner is gone (its process closed the connection): drop its locks on every file.
    ReleaseLocks {
        owner_id: u64,
    },
    /// What this node holds and serves (asked by `tessera status`).
    Status,
    /// Stop this daemon (asked by `tessera stop`): it answers, then leaves the host table and
    /// exits.
    Shutdown,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum PeerResponse {
    Ok,
    Pong {
        node: u32,
    },
    /// A directory entry, with its attributes when the inode lives on the same node.
    Found(Option<(Dentry, Option<Attr>)>),
    /// The replaced entry of a `DentryPut`.
    Dentry(Option<Dentry>),
    Created {
        dentry: Dentry,
        created: bool,
        attr: Option<Attr>,
    },
    Entries(Vec<DirEntry>),
    Bool(bool),
    Attr(Attr),
    Extents(Vec<OwnedExtent>),
    /// A stripe's whole map; `cached` says whether a lease was granted (small enough).
    Stripe {
        extents: Vec<OwnedExtent>,
        version: u64,
        cached: bool,
    },
    Bytes(u64),
    /// `len` bytes of log data follow this message in the frame (see `frame`).
    Data {
        len: u64,
    },
    Flushed {
        bytes: u64,
        nodes: u32,
    },
    Lock(Option<HeldLock>),
    Err(FsError),
    Status(NodeStatus),
}

impl Request {
    /// Whether sending the request again (after a lost connection, not knowing whether the
    /// first copy took effect) cannot change the outcome. Exhaustive on purpose: a new request
    /// must say whether it may be resent.
    pub fn is_idempotent(&self) -> bool {
        match self {
            // An exclusive create that took effect would fail the second time.
            Request::Open { flags, .. } => !(flags.create && flags.exclusive),
            // The second copy would fail (EEXIST, ENOENT) or, for a rename, move something else.
            Request::Mkdir { .. }
            | Request::Rmdir { .. }
            | Request::Unlink { .. }
            | Request::Rename { .. } => false,
            // Space counts: a second copy would reserve or release twice.
            Request::Reserve { .. } | Request::Release { .. } => false,
            // A waiting lock may have been granted; a second request would wait behind itself.
            Request::Lock { .. } => false,
            Request::Shutdown => false,
            // Reads, and writes of a state that a second copy sets to the same value.
            Request::Hello { .. }
            | Request::Stat { .. }
            | Request::Readdir { .. }
            | Request::Truncate { .. }
            | Request::SetAttr { .. }
            | Request::ReadLink { .. }
            | Request::Attach { .. }
            | Request::Detach { .. }
            | Request::DetachFile { .. }
            | Request::Query { .. }
            | Request::QueryFile { .. }
            | Request::Read { .. }
            | Request::Flush { .. }
            | Request::GetLock { .. }
            | Request::Writing { .. }
            | Request::Status => true,
        }
    }

    /// A short name of the request for messages.
    pub fn name(&self) -> &'static str {
        match self {
            Request::Hello { .. } => "hello",
            Request::Open { .. } => "open",
            Request::Stat { .. } => "stat",
            Request::Mkdir { .. } => "mkdir",
            Request::Rmdir { .. } => "rmdir",
            Request::Unlink { .. } => "unlink",
            Request::Readdir { .. } => "readdir",
            Request::Rename { .. } => "rename",
            Request::Truncate { .. } => "truncate",
            Request::SetAttr { .. } => "setattr",
            Request::ReadLink { .. } => "readlink",
            Request::Attach { .. } => "attach",
            Request::Detach { .. } => "detach",
            Request::DetachFile { .. } => "detach_file",
            Request::Query { .. } => "query",
            Request::QueryFile { .. } => "query_file",
            Request::Read { .. } => "read",
            Request::Flush { .. } => "flush",
            Request::Lock { .. } => "lock",
            Request::GetLock { .. } => "getlock",
            Request::Reserve { .. } => "reserve",
            Request::Release { .. } => "release",
            Request::Writing { .. } => "writing",
            Request::Status => "status",
            Request::Shutdown => "shutdown",
        }
    }
}

impl PeerRequest {
    /// Whether a second copy of the request cannot change the outcome (see
    /// [`Request::is_idempotent`]). Exhaustive on purpose, as there.
    pub fn is_idempotent(&self) -> bool {
        match self {
            // An exclusive create that took effect would fail the second time.
            PeerRequest::DentryCreate { exclusive, .. } => !exclusive,
            // Returns the entry it replaced: the second copy would return the first's entry.
            PeerRequest::DentryPut { .. } => false,
            PeerRequest::Shutdown => false,
            // Reads; removals guarded by the inode they expect; sets to a value; the same
            // owner's lock taken again (POSIX locks of one owner merge).
            PeerRequest::Ping
            | PeerRequest::DentryGet { .. }
            | PeerRequest::DentryRemove { .. }
            | PeerRequest::ListChildren { .. }
            | PeerRequest::HasChildren { .. }
            | PeerRequest::InodeGet { .. }
            | PeerRequest::InodeSetSize { .. }
            | PeerRequest::InodeRemove { .. }
            | PeerRequest::InodeSetAttr { .. }
            | PeerRequest::OwnAttach { .. }
            | PeerRequest::OwnDetach { .. }
            | PeerRequest::OwnFetchStripe { .. }
            | PeerRequest::Invalidate { .. }
            | PeerRequest::OwnQueryFile { .. }
            | PeerRequest::OwnDetachFile { .. }
            | PeerRequest::OwnTruncate { .. }
            | PeerRequest::DropFile { .. }
            | PeerRequest::ReadLog { .. }
            | PeerRequest::Flush { .. }
            | PeerRequest::FlushPart { .. }
            | PeerRequest::Lock { .. }
            | PeerRequest::GetLock { .. }
            | PeerRequest::ReleaseLocks { .. }
            | PeerRequest::Status => true,
        }
    }
}
