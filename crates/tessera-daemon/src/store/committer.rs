//! Writing the state log: batches appended in place by the thread that submits them, or
//! grouped by the committer thread, and the checkpoints that move the log into redb.
//!
//! With `state_durability = "process"` a record needs no device flush, so the thread that
//! submits a batch appends it itself, under the log's lock ([`InlineLog`]): an acknowledged
//! change costs one `write`, not a hand-over to the committer thread and back (two wake-ups,
//! about a fifth of a create's daemon CPU on two cores). With `"machine"` every batch goes to
//! the committer thread ([`group_committer`]), which turns all that wait into one record and
//! one `fdatasync`.
//!
//! Checkpoints are the committer thread's in both modes: it applies the logged operations to
//! redb and empties the log. In process mode it does so holding the log's lock. A submitter
//! that finds a checkpoint under way queues its batch instead of waiting for the lock (a
//! runtime worker must not stop for a whole checkpoint) and waits for its acknowledgement;
//! whoever holds the lock next appends the queued batches before anything else. A batch is
//! submitted under the lock of the state it changes, so the next batch on that state is
//! submitted after it was queued, and the log keeps their order.

use crate::store::{DbOp, StoreOptions, apply, die, encode_record};
use redb::Database;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tessera_core::{Errno, FsError, FsResult};
use tessera_proto::config::StateDurability;
use tokio::sync::oneshot;

/// The log is checkpointed into redb after `StoreOptions::checkpoint_idle` without new
/// operations, or after this many logged operations, or this long, whichever comes first. A checkpoint
/// (thousands of B-tree inserts and an fsync on the burst-buffer device) competes with the
/// application for CPU and disk; checkpointing every 2 s made a 4-rank checkpoint write phase
/// 8% slower on the 2-core development machine. It only bounds the log's size and the replay
/// time at startup, so it waits for quiet.
const CHECKPOINT_OPS: usize = 200_000;
const CHECKPOINT_EVERY: Duration = Duration::from_secs(60);

/// Operations to make durable, and where to say when they are.
pub(crate) struct Batch {
    pub ops: Vec<DbOp>,
    pub done: oneshot::Sender<FsResult<()>>,
}

/// What an acknowledgement waits for: nothing (durable already), or the committer.
pub(crate) type Durable = Option<oneshot::Receiver<FsResult<()>>>;

/// An acknowledgement that the store has stopped.
pub(crate) fn stopped() -> Durable {
    let (done, rx) = oneshot::channel();
    let _ = done.send(Err(FsError::new(Errno::Io, "state store has stopped")));
    Some(rx)
}

/// The state log and the operations it holds beyond the last checkpoint.
pub(crate) struct Log {
    file: File,
    len: u64,
    logged: Vec<DbOp>,
    last_op: Instant,
    last_checkpoint: Instant,
    /// Batches submitted while a checkpoint held the lock, in submission order.
    queued: mpsc::Receiver<Batch>,
    closed: bool,
}

impl Log {
    fn header() -> u64 {
        tessera_core::wal::HEADER_LEN as u64
    }

    /// Appends `ops` as one record; a log that cannot be written stops the daemon (what is
    /// in memory could no longer be made durable).
    fn append(&mut self, ops: Vec<DbOp>) {
        if ops.is_empty() {
            return;
        }
        let record = encode_record(&ops.iter().collect::<Vec<_>>());
        if let Err(e) = self.file.write_all_at(&record, self.len) {
            die(
                "appending to the state log",
                &FsError::io("appending to the state log", &e),
            );
        }
        self.len += record.len() as u64;
        self.logged.extend(ops);
        self.last_op = Instant::now();
    }

    /// Appends the queued batches and acknowledges them.
    fn drain(&mut self) {
        while let Ok(b) = self.queued.try_recv() {
            self.append(b.ops);
            let _ = b.done.send(Ok(()));
        }
    }

    fn checkpoint_due(&self, idle: Duration) -> bool {
        !self.logged.is_empty()
            && (self.logged.len() >= CHECKPOINT_OPS
                || self.last_op.elapsed() >= idle
                || self.last_checkpoint.elapsed() >= CHECKPOINT_EVERY)
    }

    fn checkpoint(&mut self, db: &Database) {
        checkpoint(db, &self.file, &mut self.logged, &mut self.len);
        self.last_checkpoint = Instant::now();
    }
}

/// Applies `logged` to redb and empties the log (its header stays).
fn checkpoint(db: &Database, wal: &File, logged: &mut Vec<DbOp>, len: &mut u64) {
    if logged.is_empty() {
        return;
    }
    if let Err(e) = apply(db, logged.iter()) {
        die("checkpoint of the state log", &e);
    }
    // The operations are durable in redb: the log can be emptied.
    if let Err(e) = wal.set_len(Log::header()) {
        die("emptying the state log", &FsError::io("truncate", &e));
    }
    *len = Log::header();
    logged.clear();
}

/// The state log written in place by submitting threads (process durability).
pub(crate) struct InlineLog {
    log: Mutex<Log>,
    checkpointing: AtomicBool,
    queue: mpsc::Sender<Batch>,
    /// Asks the checkpointer for an early checkpoint; dropped to stop it.
    wake: Mutex<Option<mpsc::SyncSender<()>>>,
}

impl InlineLog {
    /// Starts the checkpointer thread of a log that holds nothing beyond the database.
    pub fn start(
        db: Database,
        wal: File,
        opts: StoreOptions,
    ) -> FsResult<(Arc<InlineLog>, std::thread::JoinHandle<()>)> {
        let (queue, queued) = mpsc::channel();
        let (wake, woken) = mpsc::sync_channel(1);
        let now = Instant::now();
        let inline = Arc::new(InlineLog {
            log: Mutex::new(Log {
                file: wal,
                len: Log::header(),
                logged: Vec::new(),
                last_op: now,
                last_checkpoint: now,
                queued,
                closed: false,
            }),
            checkpointing: AtomicBool::new(false),
            queue,
            wake: Mutex::new(Some(wake)),
        });
        let it = inline.clone();
        let thread = std::thread::Builder::new()
            .name("tessera-committer".into())
            .spawn(move || it.checkpointer(db, opts, woken))
            .map_err(|e| FsError::io("starting the committer thread", &e))?;
        Ok((inline, thread))
    }

    fn lock(&self) -> MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes `ops` durable, in place unless a checkpoint holds the log (then the answer
    /// waits for it). Call while holding the lock of the state the operations change.
    pub fn submit(&self, ops: Vec<DbOp>) -> Durable {
        if self.checkpointing.load(Ordering::SeqCst) {
            let (done, rx) = oneshot::channel();
            if self.queue.send(Batch { ops, done }).is_err() {
                return stopped();
            }
            // The checkpoint may have ended before the batch was queued, its queue already
            // drained: then nobody else would append it.
            if !self.checkpointing.load(Ordering::SeqCst) {
                let mut log = self.lock();
                if !log.closed {
                    log.drain();
                }
            }
            return Some(rx);
        }
        let mut log = self.lock();
        if log.closed {
            return stopped();
        }
        log.drain();
        log.append(ops);
        if log.logged.len() >= CHECKPOINT_OPS
            && let Some(w) = self.wake.lock().unwrap_or_else(|p| p.into_inner()).as_ref()
        {
            let _ = w.try_send(());
        }
        None
    }

    /// Checkpoints when due, and once more when stopped; then refuses further batches.
    fn checkpointer(&self, db: Database, opts: StoreOptions, woken: mpsc::Receiver<()>) {
        loop {
            let stop = matches!(
                woken.recv_timeout(opts.checkpoint_idle),
                Err(RecvTimeoutError::Disconnected)
            );
            let mut log = self.lock();
            if !stop && !log.checkpoint_due(opts.checkpoint_idle) {
                continue;
            }
            self.checkpointing.store(true, Ordering::SeqCst);
            log.drain();
            log.checkpoint(&db);
            // Cleared before the last drain: a batch queued after that drain sees it cleared
            // and appends itself.
            self.checkpointing.store(false, Ordering::SeqCst);
            log.drain();
            if stop {
                log.checkpoint(&db);
                log.closed = true;
                // Batches that raced the close are refused.
                while let Ok(b) = log.queued.try_recv() {
                    let _ = b
                        .done
                        .send(Err(FsError::new(Errno::Io, "state store has stopped")));
                }
                return;
            }
        }
    }

    /// Stops the checkpointer after a last checkpoint (join its thread to wait for it).
    pub fn close(&self) {
        drop(self.wake.lock().unwrap_or_else(|p| p.into_inner()).take());
    }
}

/// The committer thread of machine durability: groups every batch waiting into one record
/// and one `fdatasync`, acknowledges them, and checkpoints.
pub(crate) fn group_committer(
    db: Database,
    wal: File,
    opts: StoreOptions,
    rx: mpsc::Receiver<Batch>,
) {
    let mut wal_len = Log::header();
    let mut logged: Vec<DbOp> = Vec::new();
    let mut last_checkpoint = Instant::now();
    loop {
        let first = match rx.recv_timeout(opts.checkpoint_idle) {
            Ok(b) => b,
            Err(RecvTimeoutError::Timeout) => {
                checkpoint(&db, &wal, &mut logged, &mut wal_len);
                last_checkpoint = Instant::now();
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => {
                checkpoint(&db, &wal, &mut logged, &mut wal_len);
                return;
            }
        };
        let mut batches = vec![first];
        while let Ok(more) = rx.try_recv() {
            batches.push(more);
        }
        if batches.iter().all(|b| b.ops.is_empty()) {
            // Barriers only: everything queued before them was written by an earlier round.
            for b in batches {
                let _ = b.done.send(Ok(()));
            }
            continue;
        }
        let record = encode_record(&batches.iter().flat_map(|b| &b.ops).collect::<Vec<_>>());
        let mut result = wal
            .write_all_at(&record, wal_len)
            .map_err(|e| FsError::io("appending to the state log", &e));
        wal_len += record.len() as u64;
        if result.is_ok() && opts.durability == StateDurability::Machine {
            result = wal
                .sync_data()
                .map_err(|e| FsError::io("syncing the state log", &e));
        }
        let failed = result.is_err();
        for b in batches {
            logged.extend(b.ops);
            let _ = b.done.send(result.clone());
        }
        if let (true, Err(e)) = (failed, &result) {
            die("appending to the state log", e);
        }
        if logged.len() >= CHECKPOINT_OPS || last_checkpoint.elapsed() >= CHECKPOINT_EVERY {
            checkpoint(&db, &wal, &mut logged, &mut wal_len);
            last_checkpoint = Instant::now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_proto::{Dentry, FileKind};

    /// Names `/f` as inode `ino`: two of them on one name tell their order apart.
    fn name_f(ino: u64) -> Vec<DbOp> {
        vec![DbOp::PutDentry {
            parent: "/".into(),
            name: "f".into(),
            dentry: Dentry {
                ino,
                kind: FileKind::File,
            },
        }]
    }

    fn opts(idle: Duration) -> StoreOptions {
        StoreOptions {
            durability: StateDurability::Process,
            checkpoint_idle: idle,
            node: 0,
        }
    }

    /// The operations a state log holds, in order.
    fn logged_in(dir: &std::path::Path) -> Vec<DbOp> {
        let bytes = std::fs::read(dir.join("meta.wal")).unwrap();
        let scan = tessera_core::wal::scan(&bytes).unwrap();
        crate::store::state_log::decode(&bytes, &scan)
            .into_iter()
            .flat_map(|(_, ops)| ops.expect("intact records"))
            .collect()
    }

    fn inode_of_f(ops: &[DbOp]) -> Vec<u64> {
        ops.iter()
            .filter_map(|op| match op {
                DbOp::PutDentry { dentry, .. } => Some(dentry.ino),
                _ => None,
            })
            .collect()
    }

    #[tokio::test]
    async fn a_batch_queued_during_a_checkpoint_is_logged_before_later_ones() {
        let dir = tempfile::tempdir().unwrap();
        let files = crate::store::state_log::open(dir.path()).unwrap();
        let (log, _thread) =
            InlineLog::start(files.db, files.wal, opts(Duration::from_secs(600))).unwrap();
        // A checkpoint holds the log: the batch waits in the queue, unacknowledged.
        log.checkpointing.store(true, Ordering::SeqCst);
        let mut first = log.submit(name_f(1)).expect("queued while checkpointing");
        assert!(
            first.try_recv().is_err(),
            "acknowledged before it was logged"
        );
        assert!(inode_of_f(&logged_in(dir.path())).is_empty());
        // The next batch on the same state appends the queued one first.
        log.checkpointing.store(false, Ordering::SeqCst);
        assert!(log.submit(name_f(2)).is_none(), "appended in place");
        first.await.unwrap().unwrap();
        assert_eq!(inode_of_f(&logged_in(dir.path())), vec![1, 2]);
    }

    /// Writers on their own names, checkpoints in between, then a crash (nothing closed):
    /// the database and the log together hold each name's last value.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_batches_and_checkpoints_lose_nothing() {
        use crate::store::Store;
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = Store::open(dir.path(), opts(Duration::from_millis(1))).unwrap();
        let store = Arc::new(store);
        let writers = (0..4u64).map(|t| {
            let store = store.clone();
            tokio::spawn(async move {
                for i in 1..=400u64 {
                    let op = DbOp::PutDentry {
                        parent: "/".into(),
                        name: format!("w{t}"),
                        dentry: Dentry {
                            ino: i,
                            kind: FileKind::File,
                        },
                    };
                    store.submit(vec![op]).durable().await.unwrap();
                    if i % 50 == 0 {
                        // Quiet for longer than the idle time: a checkpoint comes.
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                }
            })
        });
        for w in writers.collect::<Vec<_>>() {
            w.await.unwrap();
        }
        // kill -9 now: what the files hold, copied while no checkpoint can run.
        let crashed = tempfile::tempdir().unwrap();
        {
            let _no_checkpoint = store.inline_log().expect("process durability").lock();
            for f in ["meta.redb", "meta.wal"] {
                std::fs::copy(dir.path().join(f), crashed.path().join(f)).unwrap();
            }
        }
        let checkpointed = logged_in(crashed.path()).len();
        assert!(
            checkpointed < 1600,
            "no checkpoint ran: {checkpointed} ops logged"
        );
        let (_s, loaded) = Store::open(crashed.path(), opts(Duration::from_secs(2))).unwrap();
        let mut last: Vec<(String, u64)> = loaded
            .dentries
            .iter()
            .map(|(_, name, d)| (name.clone(), d.ino))
            .collect();
        last.sort();
        let want: Vec<(String, u64)> = (0..4).map(|t| (format!("w{t}"), 400)).collect();
        assert_eq!(last, want);
        assert!(loaded.wal_problems.is_empty());
    }
}
