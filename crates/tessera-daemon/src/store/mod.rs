//! Crash-safe state of a daemon: its namespace shard and ownership shard.
//!
//! The authoritative state lives in memory (see `namespace` and `ownership`); every mutation
//! also produces [`DbOp`]s that are made durable here before the mutation is acknowledged.
//!
//! Two files, one committer thread ([`committer`]):
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
//! stops the daemon: see [`state_log`]), then the tables are loaded. Operations are queued while the caller still holds the lock of the
//! in-memory structure they came from, so the log holds them in memory order.

mod apply;
pub mod committer;
mod load;
mod ops;
mod schema;
pub mod state_log;
mod tables;

pub(crate) use apply::apply;
pub use load::Loaded;
pub use ops::{DbOp, MetaKey, StoredAttr};
pub use schema::STATE_SCHEMA_VERSION;

use committer::{Batch, InlineLog, group_committer};
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;
use tessera_core::{Errno, FsError, FsResult};
use tessera_proto::config::StateDurability;
use tokio::sync::oneshot;

/// Handle to the state log's writers ([`committer`]).
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

impl Store {
    /// Opens (or creates) the state in `dir`, replays its log, loads it, and starts the
    /// committer thread.
    pub fn open(dir: &Path, opts: StoreOptions) -> FsResult<(Store, Loaded)> {
        let files = state_log::open(dir)?;
        {
            let txn = files.db.begin_write().map_err(|e| db_err("begin", e))?;
            schema::prepare(dir, &txn)?;
            txn.commit().map_err(|e| db_err("commit", e))?;
        }
        // Replay what the log holds beyond the last checkpoint, then empty it.
        let (ops, problems) = state_log::replay(&files, opts.node)?;
        if !ops.is_empty() {
            apply(&files.db, ops.iter())?;
        }
        state_log::empty(&files)?;
        let mut loaded = load::load(&files.db)?;
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

/// Stops the daemon after a state write failed: memory is ahead of what is durable, and
/// continuing would let the two drift apart silently. A restart reloads the durable state.
pub(crate) fn die(what: &str, e: &FsError) -> ! {
    tracing::error!(
        "{what} failed: {e}; stopping: restart this daemon to reload its durable state"
    );
    std::thread::sleep(Duration::from_millis(200));
    std::process::exit(70)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::catalogue::{PendingOp, VersionView};
    use tessera_core::txn_entries::PendingName;
    use tessera_core::{Owner, Run};
    use tessera_proto::Dentry;
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

    pub(super) fn opts(durability: StateDurability) -> StoreOptions {
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

    pub(super) fn cat_version() -> VersionView {
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
        let report = state_log::salvage(dir.path()).unwrap();
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
