//! Typed calls: every request is a type that names the type of its answer.
//!
//! A client sends a [`ClientCall`] to the daemon of its node, a daemon a [`PeerCall`] to the
//! shard that holds the data. On the wire a request travels inside its protocol's enum
//! ([`Request`], [`PeerRequest`]: the variant's index says which request it is) and the answer
//! is the encoded [`Answer`] of the request's `Reply` type, followed by a raw data trailer for
//! reads (see [`crate::frame`]). There is no answer enum: a caller decodes the reply type its
//! request names, so answering a request with another request's reply does not compile.
//!
//! The requests are grouped by the service that answers them, one module each; the enums
//! below list them in wire order (a variant's position is its tag: append, never reorder).

pub mod admin;
pub mod catalogue;
pub mod client_logs;
pub mod find;
pub mod flush;
pub mod locality;
pub mod locks;
pub mod names;
pub mod namespace;
pub mod ownership;
pub mod read;
pub mod space;
pub mod txn;
pub mod xattr;

use crate::frame;
use serde::{Serialize, de::DeserializeOwned};
use tessera_core::locks::HeldLock;
use tessera_core::{FsError, FsResult};

pub use admin::*;
pub use catalogue::*;
pub use client_logs::*;
pub use find::*;
pub use flush::*;
pub use locality::*;
pub use locks::*;
pub use names::*;
pub use namespace::*;
pub use ownership::*;
pub use read::*;
pub use space::*;
pub use txn::*;
pub use xattr::*;

/// What a daemon sends back for a request: its reply, or why it failed.
pub type Answer<T> = Result<T, FsError>;

/// A request from a client to its node's daemon.
pub trait ClientCall: Into<Request> + Send + 'static {
    /// What the daemon answers on success.
    type Reply: Serialize + DeserializeOwned + Send + 'static;
    /// A short name for messages.
    const NAME: &'static str;
}

/// A request from a daemon to the shard of another daemon (or its own).
pub trait PeerCall: Into<PeerRequest> + Send + 'static {
    /// What the shard answers on success.
    type Reply: Serialize + DeserializeOwned + Send + 'static;
    /// A short name for messages.
    const NAME: &'static str;
}

/// Defines a protocol's request enum (one newtype variant per request type, in wire order)
/// and ties each request type to its reply type.
macro_rules! protocol {
    (
        $(#[$meta:meta])*
        pub enum $Enum:ident: $Call:ident {
            $( $(#[$vmeta:meta])* $Var:ident = $name:literal -> $Reply:ty, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
        pub enum $Enum {
            $( $(#[$vmeta])* $Var($Var), )*
        }

        $(
            impl From<$Var> for $Enum {
                fn from(r: $Var) -> Self {
                    $Enum::$Var(r)
                }
            }

            impl $Call for $Var {
                type Reply = $Reply;
                const NAME: &'static str = $name;
            }
        )*

        impl $Enum {
            /// The names of every request, in wire order.
            pub const NAMES: &'static [&'static str] = &[$($name),*];

            /// A short name of the request for messages.
            pub fn name(&self) -> &'static str {
                match self {
                    $( $Enum::$Var(_) => $name, )*
                }
            }
        }
    };
}

protocol! {
    /// Client -> its node's daemon.
    pub enum Request: ClientCall {
        /// First message on a connection.
        Hello = "hello" -> Bound,
        Open = "open" -> Opened,
        Stat = "stat" -> crate::Attr,
        Mkdir = "mkdir" -> crate::Attr,
        Rmdir = "rmdir" -> (),
        Unlink = "unlink" -> (),
        Readdir = "readdir" -> tessera_core::dir_page::DirPage,
        Rename = "rename" -> (),
        Truncate = "truncate" -> crate::Attr,
        SetAttr = "setattr" -> crate::Attr,
        ReadLink = "readlink" -> String,
        Attach = "attach" -> (),
        Detach = "detach" -> (),
        DetachFile = "detach_file" -> (),
        Query = "query" -> crate::Owners,
        QueryFile = "query_file" -> crate::Owners,
        /// The bytes follow the answer in the frame.
        Read = "read" -> Data,
        Flush = "flush" -> Flushed,
        Lock = "lock" -> (),
        /// The conflicting lock, or `None` if the lock could be taken.
        GetLock = "getlock" -> Option<HeldLock>,
        /// The grant's fencing token.
        ListLock = "list_lock" -> u64,
        ListUnlock = "list_unlock" -> (),
        /// The bytes granted.
        Reserve = "reserve" -> u64,
        Release = "release" -> (),
        Writing = "writing" -> (),
        Status = "status" -> crate::NodeStatus,
        Shutdown = "shutdown" -> (),
        /// The new transaction's id.
        TxnOpen = "txn_open" -> u64,
        /// The log id to write under.
        TxnJoin = "txn_join" -> u64,
        TxnDecide = "txn_decide" -> (),
        CatChange = "cat_change" -> (),
        CatLookup = "cat_lookup" -> VersionView,
        /// (name, newest version; 0 for one pending in the asker's transaction).
        CatList = "cat_list" -> Vec<(String, u64)>,
        /// The newest committed version.
        CatWait = "cat_wait" -> u64,
        /// Where the reserved bytes start.
        AppendAt = "append_at" -> u64,
        Xattr = "xattr" -> XattrReply,
        Symlink = "symlink" -> (),
        Link = "link" -> (),
        Locate = "locate" -> Located,
        /// The node that answered.
        ForwardPing = "forward_ping" -> u32,
        MigratePlan = "migrate_plan" -> Vec<StripeAt>,
        /// The bytes whose ownership moved.
        AttachIf = "attach_if" -> u64,
        /// Each member's log id, in order.
        TxnEnroll = "txn_enroll" -> Vec<u64>,
        /// The first id reserved.
        TxnReserve = "txn_reserve" -> u64,
        /// The bytes' position in the data log.
        LogAppend = "log_append" -> u64,
        LogSync = "log_sync" -> LogLens,
        LogMarkIt = "log_mark" -> (),
        /// The bytes follow the answer in the frame.
        LogReadAt = "log_read_at" -> Data,
        /// The bytes of each range the copy held; the bytes follow the answer in the frame.
        ReadPfs = "read_pfs" -> Vec<u64>,
        /// A stat whose answer the client may keep while its lease holds.
        StatLeased = "stat_leased" -> Leased,
        Nop = "nop" -> (),
        Goodbye = "goodbye" -> (),
        Staged = "staged" -> (),
    }
}

protocol! {
    /// Daemon -> daemon. Each acts on data the receiver's shard holds.
    pub enum PeerRequest: PeerCall {
        /// The node that answers.
        Ping = "ping" -> u32,
        DentryGet = "dentry_get" -> Found,
        DentryCreate = "dentry_create" -> Created,
        /// Whether the entry was removed.
        DentryRemove = "dentry_remove" -> bool,
        /// The replaced entry.
        DentryPut = "dentry_put" -> Option<crate::Dentry>,
        ListChildren = "list_children" -> Listed,
        HasChildren = "has_children" -> bool,
        /// With `seal`: whether the node held no child (and sealed the directory).
        SealDir = "seal_dir" -> bool,
        InodeGet = "inode_get" -> crate::Attr,
        InodeSetSize = "inode_set_size" -> crate::Attr,
        InodeRemove = "inode_remove" -> (),
        InodeSetAttr = "inode_set_attr" -> crate::Attr,
        OwnAttach = "own_attach" -> (),
        /// The bytes whose ownership was dropped.
        OwnDetach = "own_detach" -> u64,
        OwnFetchStripe = "own_fetch_stripe" -> Stripe,
        Invalidate = "invalidate" -> (),
        OwnQueryFile = "own_query_file" -> OwnedPage,
        OwnDetachFile = "own_detach_file" -> (),
        OwnTruncate = "own_truncate" -> (),
        DropFile = "drop_file" -> (),
        DropFiles = "drop_files" -> (),
        /// The bytes follow the answer in the frame.
        ReadLog = "read_log" -> Data,
        FlushFile = "flush_file" -> Flushed,
        /// The bytes written.
        FlushPart = "flush_part" -> u64,
        TableLock = "table_lock" -> (),
        TableGetLock = "table_get_lock" -> Option<HeldLock>,
        ReleaseLocks = "release_locks" -> (),
        /// The grant's fencing token.
        TableListLock = "table_list_lock" -> u64,
        TableListUnlock = "table_list_unlock" -> (),
        /// The list locks of the renewing node's clients that were revoked: it fences them
        /// before it trusts its renewed lease.
        RenewLease = "renew_lease" -> Vec<Fence>,
        Fence = "fence" -> (),
        Status = "status" -> crate::NodeStatus,
        Shutdown = "shutdown" -> (),
        TxnMember = "txn_member" -> (),
        TxnHomeDecide = "txn_home_decide" -> (),
        TxnPrepare = "txn_prepare" -> (),
        TxnComplete = "txn_complete" -> (),
        TxnStatus = "txn_status" -> TxnVerdict,
        InodeGetAs = "inode_get_as" -> AttrAs,
        /// The clients that are still members.
        TxnMembers = "txn_members" -> Vec<u64>,
        CatShardChange = "cat_shard_change" -> (),
        CatShardLookup = "cat_shard_lookup" -> VersionView,
        CatShardList = "cat_shard_list" -> Vec<(String, u64)>,
        CatShardWait = "cat_shard_wait" -> u64,
        /// Where the reserved bytes start.
        InodeAppend = "inode_append" -> u64,
        TxnTruncate = "txn_truncate" -> (),
        DentryMoveOut = "dentry_move_out" -> MovedOut,
        DentryMoveIn = "dentry_move_in" -> MovedIn,
        InodeXattr = "inode_xattr" -> XattrReply,
        /// The inode's attributes with its new link count.
        InodeLink = "inode_link" -> crate::Attr,
        /// Whether that was its last name.
        InodeUnlink = "inode_unlink" -> bool,
        DentryLink = "dentry_link" -> (),
        /// One entry per path, in order (`None`: no such entry).
        LocateNames = "locate_names" -> Vec<Option<NamedFile>>,
        /// One entry per inode, in order.
        LocateInodes = "locate_inodes" -> Vec<InodeFacts>,
        /// One entry per span, in order.
        LocateRuns = "locate_runs" -> Vec<SpanRuns>,
        OwnStripeAt = "own_stripe_at" -> Option<StripeAt>,
        /// Whether the attach was applied.
        OwnAttachIf = "own_attach_if" -> bool,
        ReleaseLogs = "release_logs" -> (),
        /// Each client's log id, in order (none for an undo).
        TxnEnrollNode = "txn_enroll_node" -> Vec<u64>,
        ChangeNames = "change_names" -> (),
        NameStep = "name_step" -> tessera_core::name_ops::Outcome,
        ForgetNameSteps = "forget_name_steps" -> (),
        NamesOfNode = "names_of_node" -> NamesPage,
        CheckNames = "check_names" -> NamesChecked,
        TxnMovedIn = "txn_moved_in" -> bool,
        FindEntries = "find_entries" -> FoundPage,
        /// One entry per inode, in order.
        InodeAttrs = "inode_attrs" -> Vec<Option<crate::Attr>>,
        RemoveName = "remove_name" -> Removal,
        /// The entry with its attributes, leased to the asking node when the shard could.
        LeaseAttr = "lease_attr" -> LeasedFound,
        ForgetAttrs = "forget_attrs" -> (),
    }
}

impl Request {
    /// Whether sending the request again (after a lost connection, not knowing whether the
    /// first copy took effect) cannot change the outcome. Exhaustive on purpose: a new request
    /// must say whether it may be resent.
    pub fn is_idempotent(&self) -> bool {
        match self {
            // An exclusive create that took effect would fail the second time.
            Request::Open(o) => !(o.flags.create && o.flags.exclusive),
            // The second copy would fail (EEXIST, ENOENT) or, for a rename, move something else.
            Request::Mkdir(_) | Request::Rmdir(_) | Request::Unlink(_) | Request::Rename(_) => {
                false
            }
            // Space counts: a second copy would reserve or release twice.
            Request::Reserve(_) | Request::Release(_) => false,
            // A waiting lock may have been granted; a second request would wait behind itself.
            Request::Lock(_) | Request::ListLock(_) => false,
            // A second unlock of a token fails (ESTALE) where the first succeeded.
            Request::ListUnlock(_) => false,
            Request::Shutdown(_) => false,
            // A second copy opens (or reserves) other transactions.
            Request::TxnOpen(_) | Request::TxnReserve(_) => false,
            // A second copy adds the chunk twice, or fails (EEXIST, ENOENT).
            Request::CatChange(_) => false,
            // A second copy appends the bytes again; a mark recorded twice is a second
            // record (harmless, but not the same log).
            Request::LogAppend(_) | Request::LogMarkIt(_) => false,
            Request::LogSync(_) | Request::LogReadAt(_) | Request::ReadPfs(_) => true,
            Request::StatLeased(_) | Request::Nop(_) => true,
            // A new connection has another id: a goodbye is never resent.
            Request::Goodbye(_) => false,
            // A second copy counts the bytes twice.
            Request::Staged(_) => false,
            // A second copy reserves a second range.
            Request::AppendAt(_) => false,
            Request::Xattr(r) => r.op.is_idempotent(),
            // A second copy finds the link made (EEXIST).
            Request::Symlink(_) | Request::Link(_) => false,
            // Reads, and writes of a state that a second copy sets to the same value.
            Request::Hello(_)
            | Request::Stat(_)
            | Request::Readdir(_)
            | Request::Truncate(_)
            | Request::SetAttr(_)
            | Request::ReadLink(_)
            | Request::Attach(_)
            | Request::Detach(_)
            | Request::DetachFile(_)
            | Request::Query(_)
            | Request::QueryFile(_)
            | Request::Read(_)
            | Request::Flush(_)
            | Request::GetLock(_)
            | Request::Writing(_)
            | Request::Status(_)
            // Membership is a set at the home; a decision, once taken, is answered again; a
            // member enrolled again keeps its log id.
            | Request::TxnJoin(_)
            | Request::TxnEnroll(_)
            | Request::TxnDecide(_)
            | Request::CatLookup(_)
            | Request::CatList(_)
            | Request::CatWait(_)
            | Request::Locate(_)
            | Request::ForwardPing(_)
            | Request::MigratePlan(_)
            // Applied once: the second copy finds the stripe changed by the first.
            | Request::AttachIf(_) => true,
        }
    }
}

impl PeerRequest {
    /// Whether a second copy of the request cannot change the outcome (see
    /// [`Request::is_idempotent`]). Exhaustive on purpose, as there.
    pub fn is_idempotent(&self) -> bool {
        match self {
            // An exclusive create that took effect would fail the second time.
            PeerRequest::DentryCreate(c) => !c.exclusive,
            // Returns the entry it replaced: the second copy would return the first's entry.
            PeerRequest::DentryPut(_) => false,
            // A second copy finds the first's work done and answers differently.
            PeerRequest::DentryMoveOut(_) | PeerRequest::DentryMoveIn(_) => false,
            PeerRequest::InodeXattr(r) => r.op.is_idempotent(),
            PeerRequest::Shutdown(_) => false,
            // Counts: a second copy adds or takes a name twice.
            PeerRequest::InodeLink(_) | PeerRequest::InodeUnlink(_) => false,
            // A second copy finds the name taken (EEXIST).
            PeerRequest::DentryLink(_) => false,
            // A second copy would begin a second operation.
            PeerRequest::ChangeNames(_) | PeerRequest::RemoveName(_) => false,
            // A second lease replaces the first; a second invalidation moves slots again.
            PeerRequest::LeaseAttr(_) | PeerRequest::ForgetAttrs(_) => true,
            // Answered from the first copy's record; reads; a check that raises counts to
            // the names it finds.
            PeerRequest::NameStep(_)
            | PeerRequest::ForgetNameSteps(_)
            | PeerRequest::NamesOfNode(_)
            | PeerRequest::CheckNames(_)
            | PeerRequest::TxnMovedIn(_)
            | PeerRequest::FindEntries(_)
            | PeerRequest::InodeAttrs(_) => true,
            // Reads; removals guarded by the inode they expect; sets to a value; the same
            // owner's lock taken again (POSIX locks of one owner merge).
            PeerRequest::Ping(_)
            | PeerRequest::DentryGet(_)
            | PeerRequest::DentryRemove(_)
            | PeerRequest::ListChildren(_)
            | PeerRequest::HasChildren(_)
            | PeerRequest::SealDir(_)
            | PeerRequest::InodeGet(_)
            | PeerRequest::InodeSetSize(_)
            | PeerRequest::InodeRemove(_)
            | PeerRequest::InodeSetAttr(_)
            | PeerRequest::OwnAttach(_)
            | PeerRequest::OwnDetach(_)
            | PeerRequest::OwnFetchStripe(_)
            | PeerRequest::Invalidate(_)
            | PeerRequest::OwnQueryFile(_)
            | PeerRequest::OwnDetachFile(_)
            | PeerRequest::OwnTruncate(_)
            | PeerRequest::DropFile(_)
            | PeerRequest::DropFiles(_)
            | PeerRequest::ReadLog(_)
            | PeerRequest::FlushFile(_)
            | PeerRequest::FlushPart(_)
            | PeerRequest::TableLock(_)
            | PeerRequest::TableGetLock(_)
            | PeerRequest::ReleaseLocks(_)
            // Asked again with the same sequence number, a list request finds its place.
            | PeerRequest::TableListLock(_)
            | PeerRequest::RenewLease(_)
            | PeerRequest::Fence(_)
            | PeerRequest::Status(_)
            // Membership is a set; a home answers a repeated decision with the one taken;
            // prepare and completion find their work done the second time.
            | PeerRequest::TxnMember(_)
            | PeerRequest::TxnHomeDecide(_)
            | PeerRequest::TxnPrepare(_)
            | PeerRequest::TxnComplete(_)
            | PeerRequest::TxnStatus(_)
            | PeerRequest::InodeGetAs(_)
            | PeerRequest::TxnMembers(_)
            | PeerRequest::CatShardLookup(_)
            | PeerRequest::CatShardList(_)
            | PeerRequest::CatShardWait(_)
            // A cut is a minimum; the size it sets is the same when resent at once.
            | PeerRequest::TxnTruncate(_)
            | PeerRequest::LocateNames(_)
            | PeerRequest::LocateInodes(_)
            | PeerRequest::LocateRuns(_)
            | PeerRequest::OwnStripeAt(_)
            | PeerRequest::OwnAttachIf(_)
            | PeerRequest::ReleaseLogs(_)
            // A client enrolled again keeps its log id; an undo removes what is there.
            | PeerRequest::TxnEnrollNode(_) => true,
            // As `Request::CatChange`, `Request::AppendAt`.
            PeerRequest::CatShardChange(_) | PeerRequest::InodeAppend(_) => false,
            PeerRequest::TableListUnlock(_) => false,
        }
    }
}

/// Encodes an answer as the message part of a frame body (a data trailer may follow).
pub fn encode_answer<T: Serialize>(answer: &Answer<T>) -> Vec<u8> {
    frame::encode(answer)
}

/// Decodes the answer at the start of a frame body: the reply, and the raw trailer after it.
/// An error answer becomes `Err`; so does a body that is not an answer of type `T`.
pub fn decode_answer<T: DeserializeOwned>(body: &[u8]) -> FsResult<(T, &[u8])> {
    let (answer, rest): (Answer<T>, &[u8]) = frame::split_message(body)?;
    Ok((answer?, rest))
}

/// Checks that a data answer's trailer holds exactly the bytes it announces.
pub fn check_data(data: &Data, trailer: &[u8]) -> FsResult<()> {
    if data.len != trailer.len() as u64 {
        return Err(FsError::new(
            tessera_core::Errno::Proto,
            format!(
                "data answer announces {} bytes but carries {}",
                data.len,
                trailer.len()
            ),
        ));
    }
    Ok(())
}
