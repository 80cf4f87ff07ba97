//! The state database's tables: one list, from which their definitions, their creation when
//! a database is opened (or upgraded from an earlier schema, which lacks some of them) and
//! the handles that `apply` writes through are all generated, so a new table is one line
//! here, its rows in `DbOp`, `apply` and `load`, and a schema version in `schema`.

use redb::{Table, TableDefinition, TableError, WriteTransaction};

/// (len, stride, count, node, client) of an ownership row.
pub(crate) type OwnerRow = (u64, u64, u64, u32, u64);

/// Defines each table's `TableDefinition` (named by its field) and [`Tables`], every table
/// open in one write transaction.
macro_rules! tables {
    ($( $(#[$doc:meta])* $def:ident $field:ident: $key:ty => $value:ty; )*) => {
        $(
            $(#[$doc])*
            pub(crate) const $def: TableDefinition<$key, $value> =
                TableDefinition::new(stringify!($field));
        )*

        /// Every table of the database, open for writing in one transaction.
        pub(super) struct Tables<'txn> {
            $( pub $field: Table<'txn, $key, $value>, )*
        }

        impl<'txn> Tables<'txn> {
            /// Opens every table in `txn`, creating the ones the database lacks (empty).
            pub fn open(txn: &'txn WriteTransaction) -> Result<Self, TableError> {
                Ok(Tables {
                    $( $field: txn.open_table($def)?, )*
                })
            }
        }
    };
}

tables! {
    /// (parent path, name) -> the entry (an encoded `Dentry`) of this namespace shard.
    DENTRIES dentries: (&'static str, &'static str) => &'static [u8];
    /// Inode -> its attributes without the link count (an encoded `StoredAttr`).
    INODES inodes: u64 => &'static [u8];
    /// (ino, stripe, run start) -> (run len, stride, count, node, client): one row per run of one
    /// owner (schema 2; schema 1 had one row per extent, in the table "owners").
    OWNERS owner_runs: (u64, u64, u64) => OwnerRow;
    /// Counters (`MetaKey`) and the schema version (`schema::SCHEMA_KEY`).
    META meta: &'static str => u64;
    /// Internal paths of flush temporaries being built (removed at start if a crash left them).
    FLUSH_TEMPS flush_temps: &'static str => ();
    /// Clients of this node whose connection has not been dealt with: client id -> (pid, process
    /// start time), so that after a restart the daemon can tell which of them have ended.
    CLIENTS clients: u64 => (u32, u64);
    /// (client, ino) -> data-log position below which the client published every write: where
    /// what the daemon publishes for it, if it ends without publishing, starts.
    PUBLISHED published: (u64, u64) => u64;
    /// (txn, ino, stripe, run start) -> owner row: the attaches transactions hold back on this
    /// ownership shard until their decision (schema 3).
    PENDING_RUNS pending_runs: (u64, u64, u64, u64) => OwnerRow;
    /// (txn, ino) -> the size the transaction extends the inode to (schema 3).
    PENDING_SIZES pending_sizes: (u64, u64) => u64;
    /// (txn, ino) -> (where the transaction cuts the inode, the name whose PFS copy it cuts at
    /// commit or "") (schema 5).
    PENDING_CUTS pending_cuts: (u64, u64) => (u64, &'static str);
    /// Transactions prepared on this node (schema 3).
    PREPARED prepared: u64 => ();
    /// Transactions whose home is this node -> 0 open, 1 decided to commit, 2 decided to abort:
    /// the decision record (schema 3).
    HOME_TXNS home_txns: u64 => u8;
    /// (variable name, version) -> the committed version (an encoded `VersionView`) of the
    /// catalogue shard (schema 4).
    CAT_VERSIONS cat_versions: (&'static str, u64) => &'static [u8];
    /// Variable name -> the version its next create takes, kept once its versions are deleted
    /// (schema 4).
    CAT_NEXT cat_next: &'static str => u64;
    /// (txn, variable name) -> the transaction's pending operation on it (an encoded
    /// `PendingOp`) (schema 4).
    CAT_PENDING cat_pending: (u64, &'static str) => &'static [u8];
    /// (txn, parent, name) -> what the transaction does to the name (an encoded `PendingName`:
    /// the entry it creates, the committed one it removes), pending until it ends (schema 4).
    PENDING_DENTRIES pending_dentries: (u64, &'static str, &'static str) => &'static [u8];
    /// (txn, parent, name) -> (the committed path the created entry was renamed from, the path
    /// the removed entry was renamed to; "" for none): how a pending name takes part in its
    /// transaction's renames (schema 5).
    PENDING_MOVES pending_moves: (u64, &'static str, &'static str) => (&'static str, &'static str);
    /// (ino, name) -> value: the extended attributes of this shard's inodes (schema 5).
    XATTRS xattrs: (u64, &'static str) => &'static [u8];
    /// Link counts above 1 (ino -> count); an inode without a row has one name.
    LINKS links: u64 => u32;
    /// Intent id -> an operation on the names of a file held here, not ended yet (an encoded
    /// `tessera_core::name_ops::Intent`) (schema 7).
    NAME_INTENTS name_intents: u64 => &'static [u8];
    /// (driving node, intent id, stage) -> the answer (an encoded `name_ops::Outcome`) of a step
    /// this shard carried out for another node's intent, until that intent ends (schema 7).
    NAME_STEPS name_steps: (u32, u64, u8) => &'static [u8];
    /// The files of this inode shard whose last name was removed and whose bytes every node has
    /// still to release (schema 8).
    FILES_TO_DROP files_to_drop: u64 => ();
}
