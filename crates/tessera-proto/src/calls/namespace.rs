//! Requests of the namespace service: paths and inodes. A path's entry lives on
//! `path_shard(path)`, an inode on `ino_shard(ino)`; clients name paths, daemons ask the
//! shards.

use crate::{Attr, AttrChange, Dentry, FileKind, OpenFlags, Owners, SizeChange, TxnView};
use serde::{Deserialize, Serialize};

/// Look up (and with `flags.create`, create) a regular file; with `want_owners`, also run a
/// whole-file query (the session_open of session and MPI-IO consistency).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Open {
    pub path: String,
    pub flags: OpenFlags,
    pub mode: u32,
    pub want_owners: bool,
}

/// Answer to [`Open`]. `path` is the file opened: the path asked for, or where its PFS links
/// led.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Opened {
    pub attr: Attr,
    pub owners: Option<Owners>,
    pub path: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stat {
    pub path: String,
}

/// A stat whose answer the client may keep: see [`Leased`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatLeased {
    pub path: String,
}

/// Answer to [`StatLeased`]: the attributes, and how long the client may answer from them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Leased {
    pub attr: Attr,
    pub lease: Option<AttrLease>,
}

/// A client may answer from its copy of an entry's attributes while the clock
/// (`CLOCK_MONOTONIC`, shared by the processes of a host) is before `expires_ns`, the board's
/// generation is `generation` and slot `slot` of its daemon's invalidation board still holds
/// `epoch`: the daemon moves the slot before it lets the entry's shard acknowledge a change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttrLease {
    pub slot: u32,
    pub epoch: u64,
    pub generation: u64,
    pub expires_ns: u64,
}

/// Like [`DentryGet`] for a plain view, and with a lease on the entry's attributes granted
/// to `node` (its run `boot`) when the shard holds the inode too and no transaction is
/// changing the entry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LeaseAttr {
    pub path: String,
    pub node: u32,
    pub boot: u64,
}

/// Answer to [`LeaseAttr`]: the entry as [`DentryGet`] finds it, and whether it is leased
/// (for the shard's lease, counted from when it answered).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LeasedFound {
    pub found: Found,
    pub leased: bool,
}

/// The shard changed the entries under `keys` (`attr_key` of their paths) at `version`:
/// the holder run `boot` moves their slots before it answers. A daemon of another run
/// refuses (`ESTALE`): the copies were handed out by its predecessor, and are waited out.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ForgetAttrs {
    pub boot: u64,
    pub keys: Vec<u64>,
    pub version: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Mkdir {
    pub path: String,
    pub mode: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rmdir {
    pub path: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Unlink {
    pub path: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
/// A page of a directory's listing with the entries' attributes (readdir-plus): the names
/// after `after` (`None`: from the first), at most `limit` from each shard
/// (`tessera_core::dir_page`).
pub struct Readdir {
    pub path: String,
    pub after: Option<String>,
    pub limit: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rename {
    pub from: String,
    pub to: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Truncate {
    pub path: String,
    pub size: u64,
}

/// Change the permission bits and/or times of a file or directory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SetAttr {
    pub path: String,
    pub change: AttrChange,
}

/// The target of a symbolic link (found in the PFS directory).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReadLink {
    pub path: String,
}

/// Directory entry of `path` (imports it from the PFS on a miss) as `view` sees it: the
/// entry of a file its transaction created is pending, seen by its members only.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DentryGet {
    pub path: String,
    pub view: TxnView,
}

/// Answer to [`DentryGet`]: the entry, with its attributes when the inode lives on the same
/// node; `None` if the path does not exist.
pub type Found = Option<(Dentry, Option<Attr>)>;

/// Create the entry and its inode here; returns the existing one unless `exclusive`. Under
/// `txn` the new entry (a file's or a directory's) is pending until the transaction ends.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DentryCreate {
    pub path: String,
    pub kind: FileKind,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub exclusive: bool,
    pub txn: Option<u64>,
    /// The inode of the parent directory the create's check found: refused if an rmdir
    /// sealed it on this node.
    pub parent_ino: u64,
}

/// Answer to [`DentryCreate`], with the attributes when the inode lives on the same node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Created {
    pub dentry: Dentry,
    pub created: bool,
    pub attr: Option<Attr>,
}

/// Create the symbolic link `path` to `target` (kept as given, as a link in the PFS
/// directory).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Symlink {
    pub path: String,
    pub target: String,
}

/// Give the file `from` the further name `to` (a hard link).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Link {
    pub from: String,
    pub to: String,
}

/// Peer: one more name for an inode of the receiver's shard (its link count goes up), unless
/// the file has a PFS copy under `path` (checked under the inode's flush lock, so no flush
/// races it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InodeLink {
    pub ino: u64,
    pub path: String,
}

/// Peer: a new entry, only if the name is free (`EEXIST` otherwise): the further name of a
/// hard link.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DentryLink {
    pub path: String,
    pub dentry: Dentry,
}

/// Peer: one name fewer for an inode of the receiver's shard; the answer says whether it
/// was the last (the inode is then gone, and the file's bytes are to be dropped).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InodeUnlink {
    pub ino: u64,
}

/// Remove the entry if it still names `ino`. Under `txn` a committed entry's removal is
/// pending until the transaction ends (the answer is then `false`: nothing was removed yet,
/// and the file must stay).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DentryRemove {
    pub path: String,
    pub ino: u64,
    pub txn: Option<u64>,
}

/// A member of `txn` renames the entry of `path` (naming `ino`) away to `to` (`None`: the
/// file goes at commit after all, as a removal): pending until the transaction ends.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DentryMoveOut {
    pub path: String,
    pub ino: u64,
    pub txn: u64,
    pub to: Option<String>,
}

/// Answer to [`DentryMoveOut`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MovedOut {
    /// The entry was the committed one (its removal is now pending), not one the
    /// transaction created.
    pub committed: bool,
    /// The created entry was the committed file of this path, renamed there before.
    pub moved_from: Option<String>,
}

/// A member of `txn` renames `dentry` to `path`, from the committed name `from` (`None`: a
/// file the transaction created): pending until the transaction ends.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DentryMoveIn {
    pub path: String,
    pub dentry: Dentry,
    pub txn: u64,
    pub from: Option<String>,
}

/// Answer to [`DentryMoveIn`]: an entry the transaction had created at the path, which the
/// renamed one replaced, and the committed name it had been renamed from, if it had.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MovedIn {
    pub replaced: Option<Dentry>,
    pub moved_from: Option<String>,
}

/// Insert or replace an entry (rename target); returns the replaced entry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DentryPut {
    pub path: String,
    pub dentry: Dentry,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ListChildren {
    pub dir: String,
    /// Whose pending entries are listed too.
    pub view: TxnView,
    /// The page: names after `after`, at most `limit` of those the shard holds.
    pub after: Option<String>,
    pub limit: u32,
    /// The node (and its run) that wants leases on the attributes sent (see [`LeaseAttr`]).
    pub lease_to: Option<(u32, u64)>,
}

/// Answer to [`ListChildren`]: the shard's part of the page, and which of its entries'
/// attributes are leased to the asker (positions in `page.entries`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Listed {
    pub page: tessera_core::dir_page::ShardPage<tessera_core::dir_page::EntryPlus>,
    pub leased: Vec<u32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HasChildren {
    pub dir: String,
}

/// An rmdir's check of one node: with `seal`, whether the node holds no child of `dir` (and
/// then, in the same step, creates in it are refused there); without, the seal of an rmdir that
/// failed is lifted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SealDir {
    pub dir: String,
    pub ino: u64,
    pub seal: bool,
}

/// Reserve `len` bytes at the end of `ino` for an `O_APPEND` write; the answer is where they
/// start (the file's size already covers them), so appenders in different processes never
/// write over each other.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AppendAt {
    pub ino: u64,
    pub len: u64,
}

/// At the inode's shard: as [`AppendAt`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InodeAppend {
    pub ino: u64,
    pub len: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InodeGet {
    pub ino: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InodeSetSize {
    pub ino: u64,
    pub change: SizeChange,
    /// The transaction an extension is made under: pending until its decision.
    pub txn: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InodeRemove {
    pub ino: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InodeSetAttr {
    pub ino: u64,
    pub change: AttrChange,
}
