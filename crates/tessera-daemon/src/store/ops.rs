//! The changes a daemon persists ([`DbOp`]), each a put or delete of one row (or one range of
//! rows) of a table; how the in-memory structures' changes become them; and the counters kept
//! in the `meta` table. Their encoding is the state log's record format (golden-tested).

use super::schema::NAMES_UNCHECKED_KEY;
use serde::{Deserialize, Serialize};
use tessera_core::catalogue::{CatalogueChange, PendingOp, VersionView};
use tessera_core::name_ops::{Intent, Outcome, StepKey};
use tessera_core::namespace::NamespaceChange;
use tessera_core::ownership::OwnerChange;
use tessera_core::txn_entries::{EntryChange, Moves, PendingName};
use tessera_core::xattrs::XattrChange;
use tessera_core::{Owner, Run};
use tessera_proto::{Attr, Dentry};

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
    pub(super) fn name(self) -> &'static str {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::encode_record;
    use crate::store::tests::cat_version;
    use tessera_proto::FileKind;

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
}
