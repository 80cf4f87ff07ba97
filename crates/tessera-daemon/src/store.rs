//! Crash-safe state of a daemon: its namespace shard and ownership shard.
//!
//! The authoritative state lives in memory (see `namespace` and `ownership`); every mutation
//! also produces [`DbOp`]s that are made durable here before the mutation is acknowledged.
//!
//! Two files, one committer thread (`crate::committer`):
//!
//! * `meta.wal`, a write-ahead log (framing: `tessera_core::wal`): each batch is one
//!   checksummed record, appended by a single `write` before it is acknowledged. With
//!   `state_durability = "process"` the submitting thread appends it itself; with
//!   `"machine"` the committer drains every batch waiting, appends them as one record and an
//!   `fdatasync` (group commit). A record in the page cache survives `kill -9` of the daemon;
//!   only "machine" survives a power cut, at the price of a device flush per group.
//! * `meta.redb`, the checkpoint: in the background (when idle for a moment, or after enough
//!   operations) the committer applies the logged operations to redb in one transaction with
//!   immediate durability and empties the log.
//!
//! At startup the log is replayed into redb (its operations are absolute puts and deletes, so
//! replaying one twice is harmless; a torn tail is dropped and reported, damage in the middle
//! stops the daemon: see [`crate::state_log`]), then the tables are loaded. Operations are queued while the caller still holds the lock of the
//! in-memory structure they came from, so the log holds them in memory order.

use crate::committer::{Batch, InlineLog, group_committer};
use redb::{
    Database, Durability, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition,
};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;
use tessera_core::catalogue::{CatalogueChange, PendingOp, VersionView};
use tessera_core::name_ops::{Intent, Outcome, StepKey};
use tessera_core::namespace::NamespaceChange;
use tessera_core::ownership::OwnerChange;
use tessera_core::txn_entries::{EntryChange, Moves, PendingName};
use tessera_core::xattrs::XattrChange;
use tessera_core::{Errno, FsError, FsResult, Owner, Run};
use tessera_proto::config::StateDurability;
use tessera_proto::{Attr, Dentry};
use tokio::sync::oneshot;

const DENTRIES: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("dentries");
const INODES: TableDefinition<u64, &[u8]> = TableDefinition::new("inodes");
/// (ino, stripe, run start) -> (run len, stride, count, node, client): one row per run of one
/// owner (schema 2; schema 1 had one row per extent, in the table "owners").
const OWNERS: TableDefinition<(u64, u64, u64), OwnerRow> = TableDefinition::new("owner_runs");
/// (len, stride, count, node, client) of an ownership row.
type OwnerRow = (u64, u64, u64, u32, u64);
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// Internal paths of flush temporaries being built (removed at start if a crash left them).
const FLUSH_TEMPS: TableDefinition<&str, ()> = TableDefinition::new("flush_temps");
/// Clients of this node whose connection has not been dealt with: client id -> (pid, process
/// start time), so that after a restart the daemon can tell which of them have ended.
const CLIENTS: TableDefinition<u64, (u32, u64)> = TableDefinition::new("clients");
/// (client, ino) -> data-log position below which the client published every write: where
/// what the daemon publishes for it, if it ends without publishing, starts.
const PUBLISHED: TableDefinition<(u64, u64), u64> = TableDefinition::new("published");
/// (txn, ino, stripe, run start) -> owner row: the attaches transactions hold back on this
/// ownership shard until their decision (schema 3).
const PENDING_RUNS: TableDefinition<(u64, u64, u64, u64), OwnerRow> =
    TableDefinition::new("pending_runs");
/// (txn, ino) -> the size the transaction extends the inode to (schema 3).
const PENDING_SIZES: TableDefinition<(u64, u64), u64> = TableDefinition::new("pending_sizes");
/// (txn, ino) -> (where the transaction cuts the inode, the name whose PFS copy it cuts at
/// commit or "") (schema 5).
const PENDING_CUTS: TableDefinition<(u64, u64), (u64, &str)> = TableDefinition::new("pending_cuts");
/// Transactions prepared on this node (schema 3).
const PREPARED: TableDefinition<u64, ()> = TableDefinition::new("prepared");
/// Transactions whose home is this node -> 0 open, 1 decided to commit, 2 decided to abort:
/// the decision record (schema 3).
const HOME_TXNS: TableDefinition<u64, u8> = TableDefinition::new("home_txns");
/// (variable name, version) -> the committed version (an encoded `VersionView`) of the
/// catalogue shard (schema 4).
const CAT_VERSIONS: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("cat_versions");
/// Variable name -> the version its next create takes, kept once its versions are deleted
/// (schema 4).
const CAT_NEXT: TableDefinition<&str, u64> = TableDefinition::new("cat_next");
/// (txn, variable name) -> the transaction's pending operation on it (an encoded
/// `PendingOp`) (schema 4).
const CAT_PENDING: TableDefinition<(u64, &str), &[u8]> = TableDefinition::new("cat_pending");
/// (txn, parent, name) -> what the transaction does to the name (an encoded `PendingName`:
/// the entry it creates, the committed one it removes), pending until it ends (schema 4).
const PENDING_DENTRIES: TableDefinition<(u64, &str, &str), &[u8]> =
    TableDefinition::new("pending_dentries");
/// (txn, parent, name) -> (the committed path the created entry was renamed from, the path
/// the removed entry was renamed to; "" for none): how a pending name takes part in its
/// transaction's renames (schema 5).
const PENDING_MOVES: TableDefinition<(u64, &str, &str), (&str, &str)> =
    TableDefinition::new("pending_moves");
/// (ino, name) -> value: the extended attributes of this shard's inodes (schema 5).
const XATTRS: TableDefinition<(u64, &str), &[u8]> = TableDefinition::new("xattrs");
/// Link counts above 1 (ino -> count); an inode without a row has one name.
const LINKS: TableDefinition<u64, u32> = TableDefinition::new("links");
/// Intent id -> an operation on the names of a file held here, not ended yet (an encoded
/// `tessera_core::name_ops::Intent`) (schema 7).
const NAME_INTENTS: TableDefinition<u64, &[u8]> = TableDefinition::new("name_intents");
/// (driving node, intent id, stage) -> the answer (an encoded `name_ops::Outcome`) of a step
/// this shard carried out for another node's intent, until that intent ends (schema 7).
const NAME_STEPS: TableDefinition<(u32, u64, u8), &[u8]> = TableDefinition::new("name_steps");
/// The files of this inode shard whose last name was removed and whose bytes every node has
/// still to release (schema 8).
const FILES_TO_DROP: TableDefinition<u64, ()> = TableDefinition::new("files_to_drop");
/// Set in `meta` when a database is upgraded from before schema 7: its names are checked
/// against their files' link counts once (a crash in a rename could leave a name more).
const NAMES_UNCHECKED_KEY: &str = "names_unchecked";

/// Version of the layout of the database's tables and values (`meta["schema"]`). Checked at
/// every start: a database of another version is refused with both versions named. A
/// database from before the version was recorded has the layout of version 1.
///
/// 2: ownership rows are runs (`owner_runs`), not extents.
/// 3: transactions' pending state and decision records (`pending_runs`, `pending_sizes`,
///    `prepared`, `home_txns`); a version 2 database is upgraded by adding them empty.
/// 4: the catalogue of variables (`cat_versions`, `cat_next`, `cat_pending`) and the entries
///    of files transactions create (`pending_dentries`); a version 2 or 3 database is
///    upgraded by adding the tables it lacks, empty.
/// 5: the files transactions truncate (`pending_cuts`), the names they rename
///    (`pending_moves`), and extended attributes (`xattrs`); upgraded from 2 to 4 the same
///    way.
/// 6: link counts (`links`); upgraded from 2 to 5 the same way (inode rows are unchanged:
///    they never held a count).
/// 7: operations on names spanning shards (`name_intents`, `name_steps`); upgraded from 2 to
///    6 the same way, marking the names to be checked once against the link counts
///    (`meta["names_unchecked"]`).
/// 8: removed files whose bytes are released in the background (`files_to_drop`); upgraded
///    from 2 to 7 the same way.
/// 9: the node's logs are in index format 3 (every record names its file, so that one log can
///    hold many files). The database is unchanged; one of versions 2 to 8 is upgraded the same
///    way when the node holds no logs, and refused when it does (their index format 2 is not
///    read).
pub const STATE_SCHEMA_VERSION: u64 = 9;
const SCHEMA_KEY: &str = "schema";

/// Counters kept in the `meta` table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetaKey {
    /// Counter from which inode numbers are minted.
    NextIno,
    /// Counter from which client ids are handed out.
    NextClient,
    /// Counter from which the transactions opened here are numbered.
    NextTxn,
    /// 1 while the names of this shard's files are still to be checked against their counts.
    NamesUnchecked,
}

impl MetaKey {
    fn name(self) -> &'static str {
        match self {
            MetaKey::NextIno => "next_ino",
            MetaKey::NextClient => "next_client",
            MetaKey::NextTxn => "next_txn",
            MetaKey::NamesUnchecked => NAMES_UNCHECKED_KEY,
        }
    }
}

/// One change to persist.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum DbOp {
    PutDentry {
        parent: String,
        name: String,
        dentry: Dentry,
    },
    DelDentry {
        parent: String,
        name: String,
    },
    PutInode(StoredAttr),
    DelInode(u64),
    /// One run of one owner, keyed by (ino, stripe, run start).
    PutOwner {
        ino: u64,
        stripe: u64,
        run: Run,
        owner: Owner,
    },
    DelOwner {
        ino: u64,
        stripe: u64,
        start: u64,
    },
    SetMeta(MetaKey, u64),
    /// A flush is about to create this temporary in the PFS directory.
    PutFlushTemp(String),
    /// The temporary was published or removed.
    DelFlushTemp(String),
    /// A client connected: its process.
    PutClient {
        id: u64,
        pid: u32,
        start: u64,
    },
    /// A client's connection ended and what it left was published (its publication
    /// positions go with it).
    DelClient(u64),
    /// A client published every write of a file stored below `pos` in its data log.
    PutPublished {
        client: u64,
        ino: u64,
        pos: u64,
    },
    /// A transaction's pending attach (see `tessera_core::txn_pending`).
    PutPendingRun {
        txn: u64,
        ino: u64,
        stripe: u64,
        run: Run,
        owner: Owner,
    },
    DelPendingRun {
        txn: u64,
        ino: u64,
        stripe: u64,
        start: u64,
    },
    PutPendingSize {
        txn: u64,
        ino: u64,
        end: u64,
    },
    PutPrepared(u64),
    /// Every pending row of the transaction on this node goes.
    ForgetPending(u64),
    /// The home's record of a transaction: 0 open, 1 commit, 2 abort.
    PutHomeTxn {
        txn: u64,
        state: u8,
    },
    DelHomeTxn(u64),
    /// A committed version of a variable, whole.
    PutCatVersion(VersionView),
    /// Every version of a variable goes; its next create takes `next`.
    DelCatName {
        name: String,
        next: u64,
    },
    /// A transaction's pending operation on a variable, whole (it goes with
    /// `ForgetPending`).
    PutCatPending {
        txn: u64,
        op: PendingOp,
    },
    /// What a transaction does to a name: creates an entry, removes the committed one, or
    /// both (it goes with `ForgetPending`).
    PutPendingDentry {
        txn: u64,
        parent: String,
        name: String,
        pending: PendingName,
    },
    /// The transaction no longer changes the name.
    DelPendingDentry {
        txn: u64,
        parent: String,
        name: String,
    },
    /// Where a transaction cuts a file (it goes with `ForgetPending`).
    PutPendingCut {
        txn: u64,
        ino: u64,
        cut: tessera_core::txn_pending::Cut,
    },
    /// How a pending name takes part in its transaction's renames (it goes with
    /// `DelPendingDentry` and `ForgetPending`).
    PutPendingMoves {
        txn: u64,
        parent: String,
        name: String,
        moves: Moves,
    },
    /// An inode's extended attribute (they all go with `DelInode`).
    PutXattr {
        ino: u64,
        name: String,
        value: Vec<u8>,
    },
    DelXattr {
        ino: u64,
        name: String,
    },
    /// An inode's link count (1 deletes the row; the row goes with `DelInode` too).
    PutLinks {
        ino: u64,
        nlink: u32,
    },
    /// An operation on a file's names, at its current stage.
    PutNameIntent(Intent),
    /// The operation ended.
    DelNameIntent(u64),
    /// The answer of a step carried out for another node's intent.
    PutNameStep {
        key: StepKey,
        outcome: Outcome,
    },
    /// That intent ended: its answers are no longer asked for.
    DelNameStep(StepKey),
    /// Files whose last name went: their bytes are to be released on every node.
    PutFilesToDrop(Vec<u64>),
    /// Every node released them.
    DelFilesToDrop(Vec<u64>),
}

/// An inode as stored: its attributes without the link count, which the `links` table
/// keeps, so inode rows and state-log records read the same as before link counts existed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredAttr {
    pub ino: u64,
    pub kind: tessera_proto::FileKind,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub atime_ns: i64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
}

impl StoredAttr {
    /// The inode's attributes, with the link count its `links` row gives.
    pub fn with_links(self, nlink: u32) -> Attr {
        Attr {
            ino: self.ino,
            kind: self.kind,
            mode: self.mode,
            uid: self.uid,
            gid: self.gid,
            size: self.size,
            atime_ns: self.atime_ns,
            mtime_ns: self.mtime_ns,
            ctime_ns: self.ctime_ns,
            nlink,
        }
    }
}

impl From<Attr> for StoredAttr {
    fn from(a: Attr) -> Self {
        StoredAttr {
            ino: a.ino,
            kind: a.kind,
            mode: a.mode,
            uid: a.uid,
            gid: a.gid,
            size: a.size,
            atime_ns: a.atime_ns,
            mtime_ns: a.mtime_ns,
            ctime_ns: a.ctime_ns,
        }
    }
}

/// A pending entry's change, as the row it writes or deletes.
impl From<EntryChange> for DbOp {
    fn from(c: EntryChange) -> Self {
        match c {
            EntryChange::Put {
                txn,
                parent,
                name,
                pending,
            } => DbOp::PutPendingDentry {
                txn,
                parent,
                name,
                pending,
            },
            EntryChange::Del { txn, parent, name } => DbOp::DelPendingDentry { txn, parent, name },
            EntryChange::Moves {
                txn,
                parent,
                name,
                moves,
            } => DbOp::PutPendingMoves {
                txn,
                parent,
                name,
                moves,
            },
        }
    }
}

/// A catalogue shard's change, as the row it writes or deletes.
impl From<CatalogueChange> for DbOp {
    fn from(c: CatalogueChange) -> Self {
        match c {
            CatalogueChange::Put(v) => DbOp::PutCatVersion(v),
            CatalogueChange::Delete { name, next } => DbOp::DelCatName { name, next },
            CatalogueChange::Pending { txn, op } => DbOp::PutCatPending { txn, op },
            CatalogueChange::Forget { txn } => DbOp::ForgetPending(txn),
        }
    }
}

/// A pending table's change, as the row it writes or deletes.
impl From<tessera_core::txn_pending::PendingChange> for DbOp {
    fn from(c: tessera_core::txn_pending::PendingChange) -> Self {
        use tessera_core::txn_pending::PendingChange as P;
        match c {
            P::Put {
                txn,
                ino,
                stripe,
                run,
                owner,
            } => DbOp::PutPendingRun {
                txn,
                ino,
                stripe,
                run,
                owner,
            },
            P::Del {
                txn,
                ino,
                stripe,
                start,
            } => DbOp::DelPendingRun {
                txn,
                ino,
                stripe,
                start,
            },
            P::Size { txn, ino, end } => DbOp::PutPendingSize { txn, ino, end },
            P::Cut { txn, ino, cut } => DbOp::PutPendingCut { txn, ino, cut },
            P::Prepared { txn } => DbOp::PutPrepared(txn),
            P::Forget { txn } => DbOp::ForgetPending(txn),
        }
    }
}

/// An ownership shard's change, as the row it writes or deletes.
impl From<OwnerChange> for DbOp {
    fn from(c: OwnerChange) -> Self {
        match c {
            OwnerChange::Put {
                ino,
                stripe,
                run,
                owner,
            } => DbOp::PutOwner {
                ino,
                stripe,
                run,
                owner,
            },
            OwnerChange::Del { ino, stripe, start } => DbOp::DelOwner { ino, stripe, start },
        }
    }
}

/// A namespace shard's change, as the row it writes or deletes.
impl From<NamespaceChange> for DbOp {
    fn from(c: NamespaceChange) -> Self {
        match c {
            NamespaceChange::PutDentry {
                parent,
                name,
                dentry,
            } => DbOp::PutDentry {
                parent,
                name,
                dentry,
            },
            NamespaceChange::DelDentry { parent, name } => DbOp::DelDentry { parent, name },
            NamespaceChange::PutInode(attr) => DbOp::PutInode(attr.into()),
            NamespaceChange::Links { ino, nlink } => DbOp::PutLinks { ino, nlink },
            NamespaceChange::DelInode(ino) => DbOp::DelInode(ino),
            NamespaceChange::NextIno(n) => DbOp::SetMeta(MetaKey::NextIno, n),
            NamespaceChange::Xattr(XattrChange::Put { ino, name, value }) => {
                DbOp::PutXattr { ino, name, value }
            }
            NamespaceChange::Xattr(XattrChange::Del { ino, name }) => DbOp::DelXattr { ino, name },
        }
    }
}

/// Everything the state held at startup.
#[derive(Default, Debug)]
pub struct Loaded {
    pub dentries: Vec<(String, String, Dentry)>,
    pub inodes: Vec<Attr>,
    pub owners: Vec<(u64, u64, Run, Owner)>,
    pub next_ino: u64,
    pub next_client: u64,
    /// Flush temporaries that were being built when the daemon stopped.
    pub flush_temps: Vec<String>,
    /// Clients that were connected when the daemon stopped: (id, pid, process start time).
    pub clients: Vec<(u64, u32, u64)>,
    /// Their publication positions: (client, ino, position).
    pub published: Vec<(u64, u64, u64)>,
    /// Torn or corrupt log records found (and ignored) at startup.
    pub wal_problems: Vec<String>,
    /// Transactions' pending attaches: (txn, ino, stripe, run, owner).
    pub pending_runs: Vec<(u64, u64, u64, Run, Owner)>,
    /// Transactions' pending sizes: (txn, ino, end).
    pub pending_sizes: Vec<(u64, u64, u64)>,
    /// Transactions' cuts: (txn, ino, cut).
    pub pending_cuts: Vec<(u64, u64, tessera_core::txn_pending::Cut)>,
    pub prepared: Vec<u64>,
    /// The transactions this node is the home of, with their record (0 open, 1 commit,
    /// 2 abort).
    pub home_txns: Vec<(u64, u8)>,
    pub next_txn: u64,
    /// The catalogue shard: committed versions, names' next versions, pending operations.
    pub cat_versions: Vec<VersionView>,
    pub cat_next: Vec<(String, u64)>,
    pub cat_pending: Vec<(u64, PendingOp)>,
    /// Names transactions create or remove: (txn, parent, name, changes).
    pub pending_dentries: Vec<(u64, String, String, PendingName)>,
    /// Their parts in renames: (parent, name, moves).
    pub pending_moves: Vec<(String, String, Moves)>,
    /// Extended attributes: (ino, name, value).
    pub xattrs: Vec<(u64, String, Vec<u8>)>,
    /// Operations on names of files held here, not ended.
    pub name_intents: Vec<Intent>,
    /// Answers of steps carried out for other nodes' intents.
    pub name_steps: Vec<(StepKey, Outcome)>,
    /// Removed files whose bytes are still to be released on every node.
    pub files_to_drop: Vec<u64>,
    /// Whether the names of this shard's files are to be checked against their counts (a
    /// database from before schema 7).
    pub names_unchecked: bool,
}

/// Handle to the state log's writers (`crate::committer`).
pub struct Store {
    /// Machine durability: the committer thread's queue; `None` once closed.
    tx: std::sync::Mutex<Option<mpsc::Sender<Batch>>>,
    /// Process durability: the log, written by the submitting thread.
    inline: Option<Arc<InlineLog>>,
    committer: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Sees every batch as it is queued (see [`Store::observe`]).
    observer: std::sync::OnceLock<Observer>,
}

/// Called with each batch as it is queued, under the lock of the state it changes; returns
/// what else must happen before the change may be acknowledged (the holders of cached copies
/// told, `services::attr_cache`).
pub type Observer = Box<dyn Fn(&[DbOp]) -> Option<oneshot::Receiver<()>> + Send + Sync>;

/// An acknowledgement that arrives once the operations are durable (and whoever the
/// observer named was told of them).
pub struct Pending {
    durable: Option<oneshot::Receiver<FsResult<()>>>,
    told: Option<oneshot::Receiver<()>>,
}

impl Pending {
    /// Nothing to wait for.
    pub fn done() -> Pending {
        Pending {
            durable: None,
            told: None,
        }
    }

    pub async fn durable(self) -> FsResult<()> {
        if let Some(rx) = self.durable {
            rx.await.unwrap_or_else(|_| {
                Err(FsError::new(
                    Errno::Io,
                    "state store stopped before the commit completed",
                ))
            })?;
        }
        if let Some(told) = self.told {
            // A dropped sender means the daemon is stopping: nothing is acknowledged then.
            told.await.map_err(|_| {
                FsError::new(
                    Errno::Io,
                    "the daemon stopped before the change was acknowledged",
                )
            })?;
        }
        Ok(())
    }
}

fn db_err(what: &str, e: impl Into<redb::Error>) -> FsError {
    FsError::new(Errno::Io, format!("state database: {what}: {}", e.into()))
}

/// Encodes a batch of operations as one state-log record.
pub(crate) fn encode_record(ops: &[&DbOp]) -> Vec<u8> {
    tessera_core::wal::encode_record(&postcard::to_stdvec(ops).expect("plain data serializes"))
}

/// How a store runs.
#[derive(Clone, Copy, Debug)]
pub struct StoreOptions {
    pub durability: StateDurability,
    /// Checkpoint the log into the database after this long without new operations: a
    /// checkpoint competes with the application for CPU and disk, and only bounds the log's
    /// size and the replay at start.
    pub checkpoint_idle: Duration,
    /// The node, for messages.
    pub node: u32,
}

/// Whether the node directory `dir` holds any log (of any file or process).
fn holds_logs(dir: &Path) -> bool {
    std::fs::read_dir(dir.join("logs")).is_ok_and(|mut d| d.next().is_some())
}

impl Store {
    /// Opens (or creates) the state in `dir`, replays its log, loads it, and starts the
    /// committer thread.
    pub fn open(dir: &Path, opts: StoreOptions) -> FsResult<(Store, Loaded)> {
        let files = crate::state_log::open(dir)?;
        {
            let db = &files.db;
            let txn = db.begin_write().map_err(|e| db_err("begin", e))?;
            let dentries = txn
                .open_table(DENTRIES)
                .map_err(|e| db_err("dentries", e))?;
            // Unversioned and not empty: written before versions were recorded.
            let unversioned = if dentries.len().map_err(|e| db_err("dentries", e))? > 0 {
                1
            } else {
                STATE_SCHEMA_VERSION
            };
            drop(dentries);
            txn.open_table(INODES).map_err(|e| db_err("inodes", e))?;
            {
                let mut meta = txn.open_table(META).map_err(|e| db_err("meta", e))?;
                let found = meta
                    .get(SCHEMA_KEY)
                    .map_err(|e| db_err("meta", e))?
                    .map_or(unversioned, |v| v.value());
                match found {
                    2..=8 if holds_logs(dir) => {
                        return Err(FsError::new(
                            Errno::Io,
                            format!(
                                "{}: this burst buffer holds logs in index format 2, written by an earlier Tessera (state schema version {found}); this build reads index format 3 (state schema version {STATE_SCHEMA_VERSION}) and does not convert logs: flush the files with the Tessera that wrote them (`tessera flush`), then start this node on a fresh burst buffer",
                                dir.join("logs").display()
                            ),
                        ));
                    }
                    // Versions 2 to 7 lack only tables created below; 8 lacks nothing.
                    2..=8 | STATE_SCHEMA_VERSION => {
                        meta.insert(SCHEMA_KEY, STATE_SCHEMA_VERSION)
                            .map_err(|e| db_err("meta", e))?;
                        // An earlier build's renames could leave a name more than the count.
                        if found < 7 {
                            meta.insert(NAMES_UNCHECKED_KEY, 1)
                                .map_err(|e| db_err("meta", e))?;
                        }
                    }
                    v => {
                        return Err(FsError::new(
                            Errno::Io,
                            format!(
                                "{}: state database schema version {v}; this build reads version {STATE_SCHEMA_VERSION}: run the Tessera that wrote it, or start this node on a fresh burst buffer",
                                dir.join("meta.redb").display()
                            ),
                        ));
                    }
                }
            }
            txn.open_table(OWNERS).map_err(|e| db_err("owners", e))?;
            txn.open_table(FLUSH_TEMPS)
                .map_err(|e| db_err("flush temporaries", e))?;
            txn.open_table(CLIENTS).map_err(|e| db_err("clients", e))?;
            txn.open_table(PUBLISHED)
                .map_err(|e| db_err("published", e))?;
            txn.open_table(PENDING_RUNS)
                .map_err(|e| db_err("pending runs", e))?;
            txn.open_table(PENDING_SIZES)
                .map_err(|e| db_err("pending sizes", e))?;
            txn.open_table(PENDING_CUTS)
                .map_err(|e| db_err("pending cuts", e))?;
            txn.open_table(PENDING_MOVES)
                .map_err(|e| db_err("pending moves", e))?;
            txn.open_table(XATTRS)
                .map_err(|e| db_err("extended attributes", e))?;
            txn.open_table(LINKS).map_err(|e| db_err("links", e))?;
            txn.open_table(NAME_INTENTS)
                .map_err(|e| db_err("name intents", e))?;
            txn.open_table(NAME_STEPS)
                .map_err(|e| db_err("name steps", e))?;
            txn.open_table(FILES_TO_DROP)
                .map_err(|e| db_err("files to drop", e))?;
            txn.open_table(PREPARED)
                .map_err(|e| db_err("prepared", e))?;
            txn.open_table(HOME_TXNS)
                .map_err(|e| db_err("home transactions", e))?;
            txn.open_table(CAT_VERSIONS)
                .map_err(|e| db_err("catalogue versions", e))?;
            txn.open_table(CAT_NEXT)
                .map_err(|e| db_err("catalogue next versions", e))?;
            txn.open_table(CAT_PENDING)
                .map_err(|e| db_err("catalogue pending", e))?;
            txn.open_table(PENDING_DENTRIES)
                .map_err(|e| db_err("pending entries", e))?;
            txn.commit().map_err(|e| db_err("commit", e))?;
        }
        // Replay what the log holds beyond the last checkpoint, then empty it.
        let (ops, problems) = crate::state_log::replay(&files, opts.node)?;
        if !ops.is_empty() {
            apply(&files.db, ops.iter())?;
        }
        crate::state_log::empty(&files)?;
        let mut loaded = load(&files.db)?;
        loaded.wal_problems.extend(problems);
        let (tx, inline, committer) = if opts.durability == StateDurability::Process {
            let (inline, thread) = InlineLog::start(files.db, files.wal, opts)?;
            (None, Some(inline), thread)
        } else {
            let (tx, rx) = mpsc::channel::<Batch>();
            let thread = std::thread::Builder::new()
                .name("tessera-committer".into())
                .spawn(move || group_committer(files.db, files.wal, opts, rx))
                .map_err(|e| FsError::io("starting the committer thread", &e))?;
            (Some(tx), None, thread)
        };
        Ok((
            Store {
                tx: std::sync::Mutex::new(tx),
                inline,
                committer: std::sync::Mutex::new(Some(committer)),
                observer: std::sync::OnceLock::new(),
            },
            loaded,
        ))
    }

    /// Stops accepting operations, lets the committer write what it holds and checkpoint it,
    /// and waits for it: afterwards the database and the state log are closed. Blocks.
    pub fn close(&self) {
        drop(self.tx.lock().unwrap_or_else(|p| p.into_inner()).take());
        if let Some(inline) = &self.inline {
            inline.close();
        }
        let handle = self
            .committer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(h) = handle {
            let _ = h.join();
        }
    }

    /// Queues `ops`; call while holding the lock of the state they change.
    pub fn submit(&self, ops: Vec<DbOp>) -> Pending {
        if ops.is_empty() {
            return Pending::done();
        }
        let told = self.observer.get().and_then(|see| see(&ops));
        Pending {
            told,
            ..self.queue(ops)
        }
    }

    /// The state log written in place (process durability).
    #[cfg(test)]
    pub(crate) fn inline_log(&self) -> Option<&Arc<InlineLog>> {
        self.inline.as_ref()
    }

    /// Installs the observer of every later batch (once; a second one is refused).
    pub fn observe(&self, observer: Observer) -> bool {
        self.observer.set(observer).is_ok()
    }

    /// What to wait for so that everything queued before is durable (for an answer that
    /// depends on earlier changes without making one: a refusal, a repeated step).
    pub fn barrier(&self) -> Pending {
        self.queue(Vec::new())
    }

    fn queue(&self, ops: Vec<DbOp>) -> Pending {
        if let Some(inline) = &self.inline {
            return Pending {
                durable: inline.submit(ops),
                told: None,
            };
        }
        let (done, rx) = oneshot::channel();
        let batch = Batch { ops, done };
        let refused = match self.tx.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            Some(tx) => tx.send(batch).err().map(|mpsc::SendError(b)| b),
            None => Some(batch),
        };
        if let Some(b) = refused {
            let _ = b
                .done
                .send(Err(FsError::new(Errno::Io, "state store has stopped")));
        }
        Pending {
            durable: Some(rx),
            told: None,
        }
    }
}

fn load_err(what: &str) -> impl Fn(redb::Error) -> FsError + '_ {
    move |x| FsError::new(Errno::Io, format!("loading {what}: {x}"))
}

/// Calls `f` with each row of `table`, in key order.
fn each_row<K: redb::Key + 'static, V: redb::Value + 'static>(
    txn: &redb::ReadTransaction,
    table: TableDefinition<K, V>,
    what: &str,
    mut f: impl FnMut(redb::AccessGuard<'_, K>, redb::AccessGuard<'_, V>) -> FsResult<()>,
) -> FsResult<()> {
    let e = load_err(what);
    let t = txn.open_table(table).map_err(|x| e(x.into()))?;
    for row in t.iter().map_err(|x| e(x.into()))? {
        let (k, v) = row.map_err(|x| e(x.into()))?;
        f(k, v)?;
    }
    Ok(())
}

/// The run and owner of an ownership row starting at `start`; a run that is not well formed
/// is damage, reported with the row `which` names.
fn owner_row(
    start: u64,
    (len, stride, count, node, client): OwnerRow,
    which: impl FnOnce() -> String,
) -> FsResult<(Run, Owner)> {
    let run = Run {
        start,
        len,
        stride,
        count,
    };
    if !run.is_valid() {
        return Err(FsError::new(
            Errno::Io,
            format!("{} holds an invalid run {run:?}", which()),
        ));
    }
    Ok((run, Owner { node, client }))
}

fn load(db: &Database) -> FsResult<Loaded> {
    let txn = db.begin_read().map_err(|x| load_err("state")(x.into()))?;
    let mut out = Loaded::default();
    each_row(&txn, DENTRIES, "dentries", |k, v| {
        let (parent, name) = k.value();
        let dentry: Dentry = tessera_proto::frame::decode(v.value())?;
        out.dentries
            .push((parent.to_string(), name.to_string(), dentry));
        Ok(())
    })?;
    let mut links = HashMap::new();
    each_row(&txn, LINKS, "links", |k, v| {
        links.insert(k.value(), v.value());
        Ok(())
    })?;
    each_row(&txn, INODES, "inodes", |_, v| {
        let stored: StoredAttr = tessera_proto::frame::decode(v.value())?;
        let nlink = links.get(&stored.ino).copied().unwrap_or(1);
        out.inodes.push(stored.with_links(nlink));
        Ok(())
    })?;
    each_row(&txn, OWNERS, "owners", |k, v| {
        let (ino, stripe, start) = k.value();
        let (run, owner) = owner_row(start, v.value(), || {
            format!("ownership row ({ino:#x}, {stripe}, {start})")
        })?;
        out.owners.push((ino, stripe, run, owner));
        Ok(())
    })?;
    let e = load_err("meta");
    let t = txn.open_table(META).map_err(|x| e(x.into()))?;
    let get = |key: MetaKey| -> FsResult<u64> {
        Ok(t.get(key.name())
            .map_err(|x| e(x.into()))?
            .map(|v| v.value())
            .unwrap_or(0))
    };
    out.next_ino = get(MetaKey::NextIno)?;
    out.next_client = get(MetaKey::NextClient)?;
    out.next_txn = get(MetaKey::NextTxn)?;
    out.names_unchecked = get(MetaKey::NamesUnchecked)? == 1;
    each_row(&txn, FLUSH_TEMPS, "flush temporaries", |k, _| {
        out.flush_temps.push(k.value().to_string());
        Ok(())
    })?;
    each_row(&txn, CLIENTS, "clients", |k, v| {
        let (pid, start) = v.value();
        out.clients.push((k.value(), pid, start));
        Ok(())
    })?;
    each_row(&txn, PUBLISHED, "published", |k, v| {
        let (client, ino) = k.value();
        out.published.push((client, ino, v.value()));
        Ok(())
    })?;
    each_row(&txn, PENDING_RUNS, "pending runs", |k, v| {
        let (t, ino, stripe, start) = k.value();
        let (run, owner) = owner_row(start, v.value(), || {
            format!("pending row ({t:#x}, {ino:#x}, {stripe}, {start})")
        })?;
        out.pending_runs.push((t, ino, stripe, run, owner));
        Ok(())
    })?;
    each_row(&txn, PENDING_SIZES, "pending sizes", |k, v| {
        let (t, ino) = k.value();
        out.pending_sizes.push((t, ino, v.value()));
        Ok(())
    })?;
    each_row(&txn, PENDING_CUTS, "pending cuts", |k, v| {
        let (t, ino) = k.value();
        let (at, path) = v.value();
        let path = (!path.is_empty()).then(|| path.to_string());
        out.pending_cuts
            .push((t, ino, tessera_core::txn_pending::Cut { at, path }));
        Ok(())
    })?;
    each_row(&txn, PREPARED, "prepared transactions", |k, _| {
        out.prepared.push(k.value());
        Ok(())
    })?;
    each_row(&txn, HOME_TXNS, "home transactions", |k, v| {
        out.home_txns.push((k.value(), v.value()));
        Ok(())
    })?;
    each_row(&txn, CAT_VERSIONS, "catalogue versions", |_, v| {
        out.cat_versions
            .push(tessera_proto::frame::decode(v.value())?);
        Ok(())
    })?;
    each_row(&txn, CAT_NEXT, "catalogue next versions", |k, v| {
        out.cat_next.push((k.value().to_string(), v.value()));
        Ok(())
    })?;
    each_row(&txn, PENDING_DENTRIES, "pending entries", |k, v| {
        let (t, parent, name) = k.value();
        out.pending_dentries.push((
            t,
            parent.to_string(),
            name.to_string(),
            tessera_proto::frame::decode(v.value())?,
        ));
        Ok(())
    })?;
    each_row(&txn, NAME_INTENTS, "name intents", |_, v| {
        out.name_intents
            .push(tessera_proto::frame::decode(v.value())?);
        Ok(())
    })?;
    each_row(&txn, NAME_STEPS, "name steps", |k, v| {
        let (node, intent, stage) = k.value();
        out.name_steps.push((
            StepKey {
                node,
                intent,
                stage,
            },
            tessera_proto::frame::decode(v.value())?,
        ));
        Ok(())
    })?;
    each_row(&txn, FILES_TO_DROP, "files to drop", |k, _| {
        out.files_to_drop.push(k.value());
        Ok(())
    })?;
    each_row(&txn, XATTRS, "extended attributes", |k, v| {
        let (ino, name) = k.value();
        out.xattrs.push((ino, name.to_string(), v.value().to_vec()));
        Ok(())
    })?;
    each_row(&txn, PENDING_MOVES, "pending moves", |k, v| {
        let (_, parent, name) = k.value();
        let (from, to) = v.value();
        let named = |p: &str| (!p.is_empty()).then(|| p.to_string());
        out.pending_moves.push((
            parent.to_string(),
            name.to_string(),
            Moves {
                from: named(from),
                to: named(to),
            },
        ));
        Ok(())
    })?;
    each_row(&txn, CAT_PENDING, "catalogue pending", |k, v| {
        let (t, _) = k.value();
        out.cat_pending
            .push((t, tessera_proto::frame::decode(v.value())?));
        Ok(())
    })?;
    Ok(out)
}

/// Stops the daemon after a state write failed: memory is ahead of what is durable, and
/// continuing would let the two drift apart silently. A restart reloads the durable state.
pub(crate) fn die(what: &str, e: &FsError) -> ! {
    tracing::error!(
        "{what} failed: {e}; stopping: restart this daemon to reload its durable state"
    );
    std::thread::sleep(Duration::from_millis(200));
    std::process::exit(70)
}

/// Applies operations to the database in one durable transaction.
pub(crate) fn apply<'a>(db: &Database, ops: impl Iterator<Item = &'a DbOp>) -> FsResult<()> {
    let e = |x: redb::Error| FsError::new(Errno::Io, format!("state commit: {x}"));
    let mut txn = db.begin_write().map_err(|x| e(x.into()))?;
    txn.set_durability(Durability::Immediate)
        .map_err(|x| e(x.into()))?;
    {
        let mut dentries = txn.open_table(DENTRIES).map_err(|x| e(x.into()))?;
        let mut inodes = txn.open_table(INODES).map_err(|x| e(x.into()))?;
        let mut owners = txn.open_table(OWNERS).map_err(|x| e(x.into()))?;
        let mut meta = txn.open_table(META).map_err(|x| e(x.into()))?;
        let mut temps = txn.open_table(FLUSH_TEMPS).map_err(|x| e(x.into()))?;
        let mut clients = txn.open_table(CLIENTS).map_err(|x| e(x.into()))?;
        let mut published = txn.open_table(PUBLISHED).map_err(|x| e(x.into()))?;
        let mut pending_runs = txn.open_table(PENDING_RUNS).map_err(|x| e(x.into()))?;
        let mut pending_sizes = txn.open_table(PENDING_SIZES).map_err(|x| e(x.into()))?;
        let mut pending_cuts = txn.open_table(PENDING_CUTS).map_err(|x| e(x.into()))?;
        let mut prepared = txn.open_table(PREPARED).map_err(|x| e(x.into()))?;
        let mut home_txns = txn.open_table(HOME_TXNS).map_err(|x| e(x.into()))?;
        let mut cat_versions = txn.open_table(CAT_VERSIONS).map_err(|x| e(x.into()))?;
        let mut cat_next = txn.open_table(CAT_NEXT).map_err(|x| e(x.into()))?;
        let mut cat_pending = txn.open_table(CAT_PENDING).map_err(|x| e(x.into()))?;
        let mut pending_dentries = txn.open_table(PENDING_DENTRIES).map_err(|x| e(x.into()))?;
        let mut pending_moves = txn.open_table(PENDING_MOVES).map_err(|x| e(x.into()))?;
        let mut xattrs = txn.open_table(XATTRS).map_err(|x| e(x.into()))?;
        let mut links = txn.open_table(LINKS).map_err(|x| e(x.into()))?;
        let mut name_intents = txn.open_table(NAME_INTENTS).map_err(|x| e(x.into()))?;
        let mut name_steps = txn.open_table(NAME_STEPS).map_err(|x| e(x.into()))?;
        let mut files_to_drop = txn.open_table(FILES_TO_DROP).map_err(|x| e(x.into()))?;
        for op in ops {
            let r: Result<(), redb::StorageError> = match op {
                DbOp::PutDentry {
                    parent,
                    name,
                    dentry,
                } => dentries
                    .insert(
                        (parent.as_str(), name.as_str()),
                        tessera_proto::frame::encode(dentry).as_slice(),
                    )
                    .map(drop),
                DbOp::DelDentry { parent, name } => {
                    dentries.remove((parent.as_str(), name.as_str())).map(drop)
                }
                DbOp::PutInode(attr) => inodes
                    .insert(attr.ino, tessera_proto::frame::encode(attr).as_slice())
                    .map(drop),
                DbOp::DelInode(ino) => inodes
                    .remove(*ino)
                    .and_then(|_| links.remove(*ino))
                    .map(drop)
                    .and_then(|()| {
                        xattrs.retain_in((*ino, "")..(ino.saturating_add(1), ""), |_, _| false)
                    }),
                DbOp::PutLinks { ino, nlink: 1 } => links.remove(*ino).map(drop),
                DbOp::PutLinks { ino, nlink } => links.insert(*ino, *nlink).map(drop),
                DbOp::PutNameIntent(intent) => name_intents
                    .insert(intent.id, tessera_proto::frame::encode(intent).as_slice())
                    .map(drop),
                DbOp::DelNameIntent(id) => name_intents.remove(*id).map(drop),
                DbOp::PutNameStep { key, outcome } => name_steps
                    .insert(
                        (key.node, key.intent, key.stage),
                        tessera_proto::frame::encode(outcome).as_slice(),
                    )
                    .map(drop),
                DbOp::DelNameStep(key) => name_steps
                    .remove((key.node, key.intent, key.stage))
                    .map(drop),
                DbOp::PutFilesToDrop(inos) => inos
                    .iter()
                    .try_for_each(|ino| files_to_drop.insert(*ino, ()).map(drop)),
                DbOp::DelFilesToDrop(inos) => inos
                    .iter()
                    .try_for_each(|ino| files_to_drop.remove(*ino).map(drop)),
                DbOp::PutXattr { ino, name, value } => xattrs
                    .insert((*ino, name.as_str()), value.as_slice())
                    .map(drop),
                DbOp::DelXattr { ino, name } => xattrs.remove((*ino, name.as_str())).map(drop),
                DbOp::PutOwner {
                    ino,
                    stripe,
                    run,
                    owner,
                } => owners
                    .insert(
                        (*ino, *stripe, run.start),
                        (run.len, run.stride, run.count, owner.node, owner.client),
                    )
                    .map(drop),
                DbOp::DelOwner { ino, stripe, start } => {
                    owners.remove((*ino, *stripe, *start)).map(drop)
                }
                DbOp::SetMeta(key, v) => meta.insert(key.name(), *v).map(drop),
                DbOp::PutFlushTemp(p) => temps.insert(p.as_str(), ()).map(drop),
                DbOp::DelFlushTemp(p) => temps.remove(p.as_str()).map(drop),
                DbOp::PutClient { id, pid, start } => clients.insert(*id, (*pid, *start)).map(drop),
                DbOp::DelClient(id) => clients
                    .remove(*id)
                    .map(drop)
                    .and_then(|()| published.retain_in((*id, 0)..=(*id, u64::MAX), |_, _| false)),
                DbOp::PutPublished { client, ino, pos } => {
                    published.insert((*client, *ino), *pos).map(drop)
                }
                DbOp::PutPendingRun {
                    txn,
                    ino,
                    stripe,
                    run,
                    owner,
                } => pending_runs
                    .insert(
                        (*txn, *ino, *stripe, run.start),
                        (run.len, run.stride, run.count, owner.node, owner.client),
                    )
                    .map(drop),
                DbOp::DelPendingRun {
                    txn,
                    ino,
                    stripe,
                    start,
                } => pending_runs.remove((*txn, *ino, *stripe, *start)).map(drop),
                DbOp::PutPendingSize { txn, ino, end } => {
                    pending_sizes.insert((*txn, *ino), *end).map(drop)
                }
                DbOp::PutPendingCut { txn, ino, cut } => pending_cuts
                    .insert(
                        (*txn, *ino),
                        (cut.at, cut.path.as_deref().unwrap_or_default()),
                    )
                    .map(drop),
                DbOp::PutPrepared(t) => prepared.insert(*t, ()).map(drop),
                DbOp::ForgetPending(t) => pending_runs
                    .retain_in(
                        (*t, 0, 0, 0)..=(*t, u64::MAX, u64::MAX, u64::MAX),
                        |_, _| false,
                    )
                    .and_then(|()| pending_sizes.retain_in((*t, 0)..=(*t, u64::MAX), |_, _| false))
                    .and_then(|()| pending_cuts.retain_in((*t, 0)..=(*t, u64::MAX), |_, _| false))
                    .and_then(|()| prepared.remove(*t).map(drop))
                    .and_then(|()| match t.checked_add(1) {
                        Some(after) => cat_pending.retain_in((*t, "")..(after, ""), |_, _| false),
                        None => cat_pending.retain_in((*t, "").., |_, _| false),
                    })
                    .and_then(|()| match t.checked_add(1) {
                        Some(after) => {
                            pending_dentries.retain_in((*t, "", "")..(after, "", ""), |_, _| false)
                        }
                        None => pending_dentries.retain_in((*t, "", "").., |_, _| false),
                    })
                    .and_then(|()| match t.checked_add(1) {
                        Some(after) => {
                            pending_moves.retain_in((*t, "", "")..(after, "", ""), |_, _| false)
                        }
                        None => pending_moves.retain_in((*t, "", "").., |_, _| false),
                    }),
                DbOp::PutHomeTxn { txn, state } => home_txns.insert(*txn, *state).map(drop),
                DbOp::DelHomeTxn(t) => home_txns.remove(*t).map(drop),
                DbOp::PutCatVersion(v) => cat_versions
                    .insert(
                        (v.variable.name.as_str(), v.version),
                        tessera_proto::frame::encode(v).as_slice(),
                    )
                    .map(drop),
                DbOp::DelCatName { name, next } => cat_versions
                    .retain_in((name.as_str(), 0)..=(name.as_str(), u64::MAX), |_, _| false)
                    .and_then(|()| cat_next.insert(name.as_str(), *next).map(drop)),
                DbOp::PutPendingDentry {
                    txn,
                    parent,
                    name,
                    pending,
                } => pending_dentries
                    .insert(
                        (*txn, parent.as_str(), name.as_str()),
                        tessera_proto::frame::encode(pending).as_slice(),
                    )
                    .map(drop),
                DbOp::DelPendingDentry { txn, parent, name } => pending_dentries
                    .remove((*txn, parent.as_str(), name.as_str()))
                    .and_then(|_| pending_moves.remove((*txn, parent.as_str(), name.as_str())))
                    .map(drop),
                DbOp::PutPendingMoves {
                    txn,
                    parent,
                    name,
                    moves,
                } => pending_moves
                    .insert(
                        (*txn, parent.as_str(), name.as_str()),
                        (
                            moves.from.as_deref().unwrap_or_default(),
                            moves.to.as_deref().unwrap_or_default(),
                        ),
                    )
                    .map(drop),
                DbOp::PutCatPending { txn, op } => cat_pending
                    .insert(
                        (*txn, op.name.as_str()),
                        tessera_proto::frame::encode(op).as_slice(),
                    )
                    .map(drop),
            };
            r.map_err(|x| e(x.into()))?;
        }
    }
    txn.commit().map_err(|x| e(x.into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_proto::FileKind;

    fn ops() -> Vec<DbOp> {
        let owner = Owner { node: 1, client: 2 };
        vec![
            DbOp::PutDentry {
                parent: "/".into(),
                name: "f".into(),
                dentry: Dentry {
                    ino: 9,
                    kind: FileKind::File,
                },
            },
            DbOp::PutOwner {
                ino: 9,
                stripe: 0,
                run: Run::single(0, 10),
                owner,
            },
            DbOp::PutOwner {
                ino: 9,
                stripe: 0,
                run: Run::single(20, 10),
                owner,
            },
            DbOp::SetMeta(MetaKey::NextIno, 10),
            DbOp::DelOwner {
                ino: 9,
                stripe: 0,
                start: 0,
            },
        ]
    }

    fn check(loaded: &Loaded) {
        assert_eq!(loaded.dentries.len(), 1);
        assert_eq!(
            loaded.owners,
            vec![(9, 0, Run::single(20, 10), Owner { node: 1, client: 2 })]
        );
        assert_eq!(loaded.next_ino, 10);
    }

    fn opts(durability: StateDurability) -> StoreOptions {
        StoreOptions {
            durability,
            checkpoint_idle: Duration::from_secs(2),
            node: 3,
        }
    }

    #[tokio::test]
    async fn acknowledged_ops_survive_a_crash_before_the_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (store, loaded) = Store::open(dir.path(), opts(StateDurability::Process)).unwrap();
            assert!(loaded.dentries.is_empty());
            let mut all = ops();
            let last = all.pop().unwrap();
            store.submit(all).durable().await.unwrap();
            store.submit(vec![last]).durable().await.unwrap();
            // Simulate kill -9: the log holds the ops, the database may not.
            let wal = std::fs::read(dir.path().join("meta.wal")).unwrap();
            assert!(
                wal.len() > tessera_core::wal::HEADER_LEN,
                "acknowledged before being logged"
            );
            std::fs::copy(dir.path().join("meta.wal"), dir.path().join("saved.wal")).unwrap();
            std::mem::forget(store);
        }
        // A fresh database with only the log: everything comes back from the log.
        let fresh = tempfile::tempdir().unwrap();
        std::fs::copy(dir.path().join("saved.wal"), fresh.path().join("meta.wal")).unwrap();
        let (_s, loaded) = Store::open(fresh.path(), opts(StateDurability::Process)).unwrap();
        check(&loaded);
        assert!(loaded.wal_problems.is_empty());
    }

    #[tokio::test]
    async fn catalogue_rows_and_pending_entries_come_back_after_a_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let mut other = cat_version();
        other.variable.name = "t".into();
        let op = |name: &str| PendingOp {
            name: name.into(),
            delete: true,
            create: None,
        };
        let (t1, t2) = (1 << 48 | 1, 1 << 48 | 2);
        let entry = PendingName {
            created: Some(Dentry {
                ino: 9,
                kind: FileKind::File,
            }),
            removed: None,
        };
        let (store, _) = Store::open(dir.path(), opts(StateDurability::Process)).unwrap();
        let ops = vec![
            DbOp::PutCatVersion(cat_version()),
            DbOp::PutCatVersion(other.clone()),
            DbOp::DelCatName {
                name: "temperature".into(),
                next: 4,
            },
            DbOp::PutCatPending {
                txn: t1,
                op: op("t"),
            },
            DbOp::PutCatPending {
                txn: t1,
                op: op("u"),
            },
            DbOp::PutCatPending {
                txn: t2,
                op: op("t"),
            },
            DbOp::PutPendingDentry {
                txn: t1,
                parent: "/".into(),
                name: "gone".into(),
                pending: entry,
            },
            DbOp::PutPendingDentry {
                txn: t2,
                parent: "/".into(),
                name: "kept".into(),
                pending: entry,
            },
            DbOp::ForgetPending(t1),
        ];
        store.submit(ops).durable().await.unwrap();
        store.close();
        let (_s, loaded) = Store::open(dir.path(), opts(StateDurability::Process)).unwrap();
        assert_eq!(loaded.cat_versions, vec![other]);
        assert_eq!(loaded.cat_next, vec![("temperature".to_string(), 4)]);
        assert_eq!(loaded.cat_pending, vec![(t2, op("t"))]);
        assert_eq!(
            loaded.pending_dentries,
            vec![(t2, "/".to_string(), "kept".to_string(), entry)]
        );
    }

    #[tokio::test]
    async fn close_checkpoints_the_log_and_releases_the_database() {
        let dir = tempfile::tempdir().unwrap();
        let wal = dir.path().join("meta.wal");
        let (store, _) = Store::open(dir.path(), opts(StateDurability::Machine)).unwrap();
        store.submit(ops()).durable().await.unwrap();
        store.close();
        // Once close returns, the log is checkpointed and the files are closed: no waiting.
        assert_eq!(
            std::fs::metadata(&wal).unwrap().len(),
            tessera_core::wal::HEADER_LEN as u64,
            "close returned before the checkpoint"
        );
        let late = store.submit(ops()).durable().await.unwrap_err();
        assert!(late.message.contains("stopped"), "{late}");
        let (_s, loaded) = Store::open(dir.path(), opts(StateDurability::Process)).unwrap();
        check(&loaded);
    }

    /// Writes `version` as the schema of the database in `dir`.
    fn set_schema(dir: &Path, version: u64) {
        let db = redb::Database::open(dir.join("meta.redb")).unwrap();
        let txn = db.begin_write().unwrap();
        txn.open_table(META)
            .unwrap()
            .insert(SCHEMA_KEY, version)
            .unwrap();
        txn.commit().unwrap();
    }

    #[test]
    fn a_version_8_node_is_upgraded_without_logs_and_refused_with_them() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = Store::open(dir.path(), opts(StateDurability::Process)).unwrap();
        store.close();
        set_schema(dir.path(), 8);
        std::fs::create_dir(dir.path().join("logs")).unwrap();
        let (store, _) = Store::open(dir.path(), opts(StateDurability::Process))
            .expect("a version 8 node without logs is upgraded");
        store.close();
        set_schema(dir.path(), 8);
        std::fs::create_dir(dir.path().join("logs/00000000000000a1")).unwrap();
        let e = Store::open(dir.path(), opts(StateDurability::Process))
            .err()
            .expect("opened a version 8 node holding logs");
        assert!(
            e.message.contains("index format 2") && e.message.contains("tessera flush"),
            "{e}"
        );
    }

    #[test]
    fn a_database_of_another_schema_version_is_refused_naming_both() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = Store::open(dir.path(), opts(StateDurability::Process)).unwrap();
        store.close();
        {
            let db = redb::Database::open(dir.path().join("meta.redb")).unwrap();
            let txn = db.begin_write().unwrap();
            {
                let mut meta = txn.open_table(META).unwrap();
                assert_eq!(
                    meta.get(SCHEMA_KEY).unwrap().map(|v| v.value()),
                    Some(STATE_SCHEMA_VERSION),
                    "a new database records its schema version"
                );
                meta.insert(SCHEMA_KEY, 99).unwrap();
            }
            txn.commit().unwrap();
        }
        let e = Store::open(dir.path(), opts(StateDurability::Process))
            .err()
            .expect("opened a database of schema version 99");
        assert!(
            e.message.contains("schema version 99")
                && e.message
                    .contains(&format!("reads version {STATE_SCHEMA_VERSION}")),
            "{e}"
        );
    }

    #[test]
    fn an_unversioned_database_with_entries_is_schema_1() {
        let dir = tempfile::tempdir().unwrap();
        {
            // What a build from before schema versions left: entries, no "schema" key.
            let db = redb::Database::create(dir.path().join("meta.redb")).unwrap();
            let txn = db.begin_write().unwrap();
            txn.open_table(DENTRIES)
                .unwrap()
                .insert(("/", "f"), [0u8].as_slice())
                .unwrap();
            txn.commit().unwrap();
        }
        let e = Store::open(dir.path(), opts(StateDurability::Process))
            .err()
            .expect("opened an unversioned database with entries");
        assert!(e.message.contains("schema version 1;"), "{e}");
    }

    fn cat_version() -> VersionView {
        VersionView {
            version: 3,
            variable: tessera_core::catalogue::Variable {
                name: "temperature".into(),
                elem_type: "f64".into(),
                elem_size: 8,
                dims: vec![4, 4],
            },
            chunks: vec![tessera_core::catalogue::Chunk {
                offsets: vec![0, 0],
                counts: vec![2, 4],
                path: "/t".into(),
                offset: 0,
                len: 64,
            }],
        }
    }

    /// The name of a state operation's variant; exhaustive, so a new variant needs a sample in
    /// the golden test below.
    fn variant(op: &DbOp) -> &'static str {
        match op {
            DbOp::PutDentry { .. } => "PutDentry",
            DbOp::DelDentry { .. } => "DelDentry",
            DbOp::PutInode(_) => "PutInode",
            DbOp::DelInode(_) => "DelInode",
            DbOp::PutOwner { .. } => "PutOwner",
            DbOp::DelOwner { .. } => "DelOwner",
            DbOp::SetMeta(..) => "SetMeta",
            DbOp::PutFlushTemp(_) => "PutFlushTemp",
            DbOp::DelFlushTemp(_) => "DelFlushTemp",
            DbOp::PutClient { .. } => "PutClient",
            DbOp::DelClient(_) => "DelClient",
            DbOp::PutPublished { .. } => "PutPublished",
            DbOp::PutPendingRun { .. } => "PutPendingRun",
            DbOp::DelPendingRun { .. } => "DelPendingRun",
            DbOp::PutPendingSize { .. } => "PutPendingSize",
            DbOp::PutPendingCut { .. } => "PutPendingCut",
            DbOp::PutPendingMoves { .. } => "PutPendingMoves",
            DbOp::PutXattr { .. } => "PutXattr",
            DbOp::DelXattr { .. } => "DelXattr",
            DbOp::PutLinks { .. } => "PutLinks",
            DbOp::PutNameIntent(_) => "PutNameIntent",
            DbOp::DelNameIntent(_) => "DelNameIntent",
            DbOp::PutNameStep { .. } => "PutNameStep",
            DbOp::DelNameStep(_) => "DelNameStep",
            DbOp::PutFilesToDrop(_) => "PutFilesToDrop",
            DbOp::DelFilesToDrop(_) => "DelFilesToDrop",
            DbOp::PutPrepared(_) => "PutPrepared",
            DbOp::ForgetPending(_) => "ForgetPending",
            DbOp::PutHomeTxn { .. } => "PutHomeTxn",
            DbOp::DelHomeTxn(_) => "DelHomeTxn",
            DbOp::PutCatVersion(_) => "PutCatVersion",
            DbOp::DelCatName { .. } => "DelCatName",
            DbOp::PutCatPending { .. } => "PutCatPending",
            DbOp::PutPendingDentry { .. } => "PutPendingDentry",
            DbOp::DelPendingDentry { .. } => "DelPendingDentry",
        }
    }

    /// Golden bytes of the state log: one record per operation kind, and the file header. A
    /// change here breaks the replay of every existing log: bump `wal::VERSION` and re-bless
    /// (`TESSERA_BLESS=1`).
    #[test]
    fn state_log_records_encode_to_their_committed_bytes() {
        let owner = Owner { node: 1, client: 2 };
        let samples = vec![
            DbOp::PutDentry {
                parent: "/a".into(),
                name: "b".into(),
                dentry: Dentry {
                    ino: 5,
                    kind: FileKind::File,
                },
            },
            DbOp::DelDentry {
                parent: "/a".into(),
                name: "b".into(),
            },
            DbOp::PutInode(StoredAttr {
                ino: 5,
                kind: FileKind::Dir,
                mode: 0o755,
                uid: 1,
                gid: 2,
                size: 3,
                atime_ns: 4,
                mtime_ns: -5,
                ctime_ns: 6,
            }),
            DbOp::DelInode(5),
            DbOp::PutOwner {
                ino: 5,
                stripe: 1,
                run: Run::single(10, 10),
                owner,
            },
            DbOp::DelOwner {
                ino: 5,
                stripe: 1,
                start: 10,
            },
            DbOp::SetMeta(MetaKey::NextClient, 7),
            DbOp::PutFlushTemp("/a/.tessera-flush.0.00000000000000ab".into()),
            DbOp::DelFlushTemp("/a/.tessera-flush.0.00000000000000ab".into()),
            DbOp::PutClient {
                id: 3,
                pid: 4242,
                start: 99,
            },
            DbOp::DelClient(3),
            DbOp::PutPublished {
                client: 3,
                ino: 5,
                pos: 4096,
            },
            DbOp::PutPendingRun {
                txn: 1 << 48 | 7,
                ino: 5,
                stripe: 0,
                run: Run::single(0, 10),
                owner,
            },
            DbOp::DelPendingRun {
                txn: 1 << 48 | 7,
                ino: 5,
                stripe: 0,
                start: 0,
            },
            DbOp::PutPendingSize {
                txn: 1 << 48 | 7,
                ino: 5,
                end: 4096,
            },
            DbOp::PutPrepared(1 << 48 | 7),
            DbOp::ForgetPending(1 << 48 | 7),
            DbOp::PutHomeTxn {
                txn: 1 << 48 | 7,
                state: 1,
            },
            DbOp::DelHomeTxn(1 << 48 | 7),
            DbOp::PutCatVersion(cat_version()),
            DbOp::DelCatName {
                name: "temperature".into(),
                next: 4,
            },
            DbOp::PutCatPending {
                txn: 1 << 48 | 7,
                op: PendingOp {
                    name: "temperature".into(),
                    delete: true,
                    create: Some((cat_version().variable, cat_version().chunks)),
                },
            },
            DbOp::PutPendingDentry {
                txn: 1 << 48 | 7,
                parent: "/a".into(),
                name: "b".into(),
                pending: PendingName {
                    created: Some(Dentry {
                        ino: 5,
                        kind: FileKind::File,
                    }),
                    removed: Some(Dentry {
                        ino: 4,
                        kind: FileKind::File,
                    }),
                },
            },
            DbOp::DelPendingDentry {
                txn: 1 << 48 | 7,
                parent: "/a".into(),
                name: "b".into(),
            },
            DbOp::PutPendingCut {
                txn: 1 << 48 | 7,
                ino: 5,
                cut: tessera_core::txn_pending::Cut {
                    at: 10,
                    path: Some("/a/b".into()),
                },
            },
            DbOp::PutPendingMoves {
                txn: 1 << 48 | 7,
                parent: "/a".into(),
                name: "b".into(),
                moves: Moves {
                    from: Some("/a/c".into()),
                    to: None,
                },
            },
            DbOp::PutXattr {
                ino: 5,
                name: "user.origin".into(),
                value: b"run 7".to_vec(),
            },
            DbOp::DelXattr {
                ino: 5,
                name: "user.origin".into(),
            },
            DbOp::PutLinks { ino: 5, nlink: 2 },
            DbOp::PutNameIntent(Intent {
                id: 9,
                file: Dentry {
                    ino: 5,
                    kind: FileKind::File,
                },
                op: tessera_core::name_ops::NameOp::Rename {
                    from: "/a/b".into(),
                    to: "/c".into(),
                },
                stage: tessera_core::name_ops::Stage::Placed {
                    replaced: Some(Dentry {
                        ino: 6,
                        kind: FileKind::File,
                    }),
                },
                retried: false,
            }),
            DbOp::DelNameIntent(9),
            DbOp::PutNameStep {
                key: StepKey {
                    node: 1,
                    intent: 9,
                    stage: 0,
                },
                outcome: Outcome::Replaced(None),
            },
            DbOp::DelNameStep(StepKey {
                node: 1,
                intent: 9,
                stage: 0,
            }),
            DbOp::PutFilesToDrop(vec![5, 6]),
            DbOp::DelFilesToDrop(vec![5]),
        ];
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        let mut text = format!("header {}\n", hex(&tessera_core::wal::header()));
        let mut seen = std::collections::BTreeSet::new();
        for op in &samples {
            assert!(seen.insert(variant(op)), "{} twice", variant(op));
            text += &format!("{} {}\n", variant(op), hex(&encode_record(&[op])));
        }
        assert_eq!(seen.len(), 35, "one sample per operation kind");
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/state-log.txt");
        if std::env::var_os("TESSERA_BLESS").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &text).unwrap();
        }
        let committed = std::fs::read_to_string(&path)
            .expect("tests/golden/state-log.txt (create it with TESSERA_BLESS=1)");
        for (want, got) in committed.lines().zip(text.lines()) {
            assert_eq!(got, want, "the state log format changed");
        }
        assert_eq!(committed.lines().count(), text.lines().count());
    }

    /// A log of one record per operation, each op its own group commit.
    fn log_of(ops: &[DbOp]) -> (Vec<u8>, Vec<usize>) {
        let mut b = tessera_core::wal::header().to_vec();
        let mut starts = Vec::new();
        for op in ops {
            starts.push(b.len());
            b.extend_from_slice(&encode_record(&[op]));
        }
        (b, starts)
    }

    #[test]
    fn a_torn_tail_is_dropped_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        let all = ops();
        let (mut b, _) = log_of(&all);
        b.extend_from_slice(&encode_record(&[&DbOp::DelInode(5)])[..6]);
        std::fs::write(dir.path().join("meta.wal"), &b).unwrap();
        let (_s, loaded) = Store::open(dir.path(), opts(StateDurability::Process)).unwrap();
        check(&loaded);
        assert_eq!(loaded.wal_problems.len(), 1);
        assert!(
            loaded.wal_problems[0].contains("torn tail of 6 bytes"),
            "{:?}",
            loaded.wal_problems
        );
    }

    #[test]
    fn damage_in_the_middle_stops_the_start_and_salvage_keeps_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let all = ops();
        let (mut b, starts) = log_of(&all);
        // Damage the first record (the dentry): everything after it was acknowledged.
        b[starts[0] + 14] ^= 0xff;
        let wal = dir.path().join("meta.wal");
        std::fs::write(&wal, &b).unwrap();
        let e = Store::open(dir.path(), opts(StateDurability::Process))
            .err()
            .expect("started on a damaged log");
        assert_eq!(e.errno, Errno::Io);
        assert!(
            e.message
                .contains(&format!("damaged at byte {}", starts[0])),
            "{e}"
        );
        assert!(e.message.contains("4 intact records after it"), "{e}");
        assert!(e.message.contains("tessera salvage --node 3"), "{e}");
        assert_eq!(
            std::fs::read(&wal).unwrap(),
            b,
            "the damaged log was changed"
        );
        let report = crate::state_log::salvage(dir.path()).unwrap();
        assert_eq!((report.kept_records, report.dropped.len()), (4, 1));
        let saved = report.saved.clone().unwrap();
        assert_eq!(std::fs::read(saved).unwrap(), b, "the damaged log is saved");
        assert!(
            report.to_string().contains("dropped damaged bytes"),
            "{report}"
        );
        let (_s, loaded) = Store::open(dir.path(), opts(StateDurability::Process)).unwrap();
        assert!(
            loaded.dentries.is_empty(),
            "the damaged record's change is gone"
        );
        assert_eq!(
            loaded.owners,
            vec![(9, 0, Run::single(20, 10), Owner { node: 1, client: 2 })]
        );
        assert_eq!(loaded.next_ino, 10);
    }
}
