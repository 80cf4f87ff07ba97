//! Crash-safe state of a daemon: its namespace shard and ownership shard, in redb.
//!
//! The authoritative state lives in memory (see `namespace` and `ownership`); every mutation
//! also produces [`DbOp`]s that are written here before the mutation is acknowledged. A
//! single committer thread drains whatever operations are waiting and writes them in one
//! redb transaction with immediate durability (group commit): under load many attaches share
//! one fsync, and a `kill -9` at any moment loses nothing that was acknowledged.
//!
//! Operations are queued while the caller still holds the lock of the in-memory structure
//! they came from, so the database applies them in the same order as memory did.

use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use std::path::Path;
use std::sync::mpsc;
use tessera_core::{Errno, FsError, FsResult, Owner};
use tessera_proto::{Attr, Dentry};
use tokio::sync::oneshot;

const DENTRIES: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("dentries");
const INODES: TableDefinition<u64, &[u8]> = TableDefinition::new("inodes");
/// (ino, stripe, start) -> (end, node, client)
const OWNERS: TableDefinition<(u64, u64, u64), (u64, u32, u64)> = TableDefinition::new("owners");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");

/// Key of the counter from which inode numbers are minted.
pub const META_NEXT_INO: &str = "next_ino";
/// Key of the counter from which client ids are handed out.
pub const META_NEXT_CLIENT: &str = "next_client";

/// One change to persist.
#[derive(Clone, Debug, PartialEq)]
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
    PutInode(Attr),
    DelInode(u64),
    PutOwner {
        ino: u64,
        stripe: u64,
        start: u64,
        end: u64,
        owner: Owner,
    },
    DelOwner {
        ino: u64,
        stripe: u64,
        start: u64,
    },
    SetMeta(&'static str, u64),
}

/// Everything the database held at startup.
#[derive(Default, Debug)]
pub struct Loaded {
    pub dentries: Vec<(String, String, Dentry)>,
    pub inodes: Vec<Attr>,
    pub owners: Vec<(u64, u64, u64, u64, Owner)>,
    pub next_ino: u64,
    pub next_client: u64,
}

struct Batch {
    ops: Vec<DbOp>,
    done: oneshot::Sender<FsResult<()>>,
}

/// Handle to the committer thread.
pub struct Store {
    tx: mpsc::Sender<Batch>,
}

/// An acknowledgement that arrives once the operations are durable.
pub struct Pending(Option<oneshot::Receiver<FsResult<()>>>);

impl Pending {
    pub async fn durable(self) -> FsResult<()> {
        match self.0 {
            None => Ok(()),
            Some(rx) => rx.await.unwrap_or_else(|_| {
                Err(FsError::new(
                    Errno::Io,
                    "state store stopped before the commit completed",
                ))
            }),
        }
    }
}

fn db_err(what: &str) -> impl Fn(redb::Error) -> FsError + '_ {
    move |e| FsError::new(Errno::Io, format!("state database: {what}: {e}"))
}

impl Store {
    /// Opens (or creates) the database at `path`, loads it, and starts the committer thread.
    pub fn open(path: &Path) -> FsResult<(Store, Loaded)> {
        let db = Database::create(path).map_err(|e| {
            let hint = if e.to_string().contains("already open") {
                " (is another daemon for this node running?)"
            } else {
                ""
            };
            FsError::new(
                Errno::Io,
                format!("opening state database {}: {e}{hint}", path.display()),
            )
        })?;
        // Create the tables so that read transactions find them.
        {
            let txn = db.begin_write().map_err(|e| db_err("begin")(e.into()))?;
            txn.open_table(DENTRIES)
                .map_err(|e| db_err("dentries")(e.into()))?;
            txn.open_table(INODES)
                .map_err(|e| db_err("inodes")(e.into()))?;
            txn.open_table(OWNERS)
                .map_err(|e| db_err("owners")(e.into()))?;
            txn.open_table(META).map_err(|e| db_err("meta")(e.into()))?;
            txn.commit().map_err(|e| db_err("commit")(e.into()))?;
        }
        let loaded = load(&db)?;
        let (tx, rx) = mpsc::channel::<Batch>();
        std::thread::Builder::new()
            .name("tessera-committer".into())
            .spawn(move || committer(db, rx))
            .map_err(|e| FsError::io("starting the committer thread", &e))?;
        Ok((Store { tx }, loaded))
    }

    /// Queues `ops`; call while holding the lock of the state they change.
    pub fn submit(&self, ops: Vec<DbOp>) -> Pending {
        if ops.is_empty() {
            return Pending(None);
        }
        let (done, rx) = oneshot::channel();
        if self.tx.send(Batch { ops, done }).is_err() {
            let (done, rx) = oneshot::channel();
            let _ = done.send(Err(FsError::new(Errno::Io, "state store has stopped")));
            return Pending(Some(rx));
        }
        Pending(Some(rx))
    }
}

fn load(db: &Database) -> FsResult<Loaded> {
    let e = |w: &'static str| {
        move |x: redb::Error| FsError::new(Errno::Io, format!("loading {w}: {x}"))
    };
    let txn = db.begin_read().map_err(|x| e("state")(x.into()))?;
    let mut out = Loaded::default();
    let t = txn
        .open_table(DENTRIES)
        .map_err(|x| e("dentries")(x.into()))?;
    for row in t.iter().map_err(|x| e("dentries")(x.into()))? {
        let (k, v) = row.map_err(|x| e("dentries")(x.into()))?;
        let (parent, name) = k.value();
        let dentry: Dentry = tessera_proto::frame::decode(v.value())?;
        out.dentries
            .push((parent.to_string(), name.to_string(), dentry));
    }
    let t = txn.open_table(INODES).map_err(|x| e("inodes")(x.into()))?;
    for row in t.iter().map_err(|x| e("inodes")(x.into()))? {
        let (_, v) = row.map_err(|x| e("inodes")(x.into()))?;
        out.inodes.push(tessera_proto::frame::decode(v.value())?);
    }
    let t = txn.open_table(OWNERS).map_err(|x| e("owners")(x.into()))?;
    for row in t.iter().map_err(|x| e("owners")(x.into()))? {
        let (k, v) = row.map_err(|x| e("owners")(x.into()))?;
        let (ino, stripe, start) = k.value();
        let (end, node, client) = v.value();
        out.owners
            .push((ino, stripe, start, end, Owner { node, client }));
    }
    let t = txn.open_table(META).map_err(|x| e("meta")(x.into()))?;
    let get = |key: &str| -> FsResult<u64> {
        Ok(t.get(key)
            .map_err(|x| e("meta")(x.into()))?
            .map(|v| v.value())
            .unwrap_or(0))
    };
    out.next_ino = get(META_NEXT_INO)?;
    out.next_client = get(META_NEXT_CLIENT)?;
    Ok(out)
}

fn committer(db: Database, rx: mpsc::Receiver<Batch>) {
    while let Ok(first) = rx.recv() {
        let mut batches = vec![first];
        while let Ok(more) = rx.try_recv() {
            batches.push(more);
        }
        let result = apply(&db, &batches);
        let failed = result.is_err();
        if let Err(e) = &result {
            tracing::error!("state commit failed: {e}");
        }
        for b in batches {
            let _ = b.done.send(result.clone());
        }
        if failed {
            // Memory now holds changes the database does not: continuing would make later
            // commits diverge silently. Stop; a restart reloads the last durable state.
            tracing::error!(
                "stopping: the in-memory state is ahead of the database; restart this daemon"
            );
            std::thread::sleep(std::time::Duration::from_millis(200));
            std::process::exit(70);
        }
    }
}

fn apply(db: &Database, batches: &[Batch]) -> FsResult<()> {
    let e = |x: redb::Error| FsError::new(Errno::Io, format!("state commit: {x}"));
    let mut txn = db.begin_write().map_err(|x| e(x.into()))?;
    txn.set_durability(Durability::Immediate)
        .map_err(|x| e(x.into()))?;
    {
        let mut dentries = txn.open_table(DENTRIES).map_err(|x| e(x.into()))?;
        let mut inodes = txn.open_table(INODES).map_err(|x| e(x.into()))?;
        let mut owners = txn.open_table(OWNERS).map_err(|x| e(x.into()))?;
        let mut meta = txn.open_table(META).map_err(|x| e(x.into()))?;
        for op in batches.iter().flat_map(|b| &b.ops) {
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
                DbOp::DelInode(ino) => inodes.remove(*ino).map(drop),
                DbOp::PutOwner {
                    ino,
                    stripe,
                    start,
                    end,
                    owner,
                } => owners
                    .insert((*ino, *stripe, *start), (*end, owner.node, owner.client))
                    .map(drop),
                DbOp::DelOwner { ino, stripe, start } => {
                    owners.remove((*ino, *stripe, *start)).map(drop)
                }
                DbOp::SetMeta(key, v) => meta.insert(*key, *v).map(drop),
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

    #[tokio::test]
    async fn committed_ops_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("meta.redb");
        {
            let (store, loaded) = Store::open(&path).unwrap();
            assert!(loaded.dentries.is_empty());
            let owner = Owner { node: 1, client: 2 };
            store
                .submit(vec![
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
                        start: 0,
                        end: 10,
                        owner,
                    },
                    DbOp::PutOwner {
                        ino: 9,
                        stripe: 0,
                        start: 20,
                        end: 30,
                        owner,
                    },
                    DbOp::SetMeta(META_NEXT_INO, 10),
                ])
                .durable()
                .await
                .unwrap();
            store
                .submit(vec![DbOp::DelOwner {
                    ino: 9,
                    stripe: 0,
                    start: 0,
                }])
                .durable()
                .await
                .unwrap();
        }
        // The committer thread holds the database until its channel closes.
        std::thread::sleep(std::time::Duration::from_millis(50));
        let (_store, loaded) = Store::open(&path).unwrap();
        assert_eq!(loaded.dentries.len(), 1);
        assert_eq!(
            loaded.owners,
            vec![(9, 0, 20, 30, Owner { node: 1, client: 2 })]
        );
        assert_eq!(loaded.next_ino, 10);
    }
}
