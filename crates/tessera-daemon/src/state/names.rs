//! Operations on names in flight on this node (`tessera_core::name_ops`): the intents of the
//! files whose inodes this node holds, a lock per file under which its intents are driven
//! one at a time, and the answers of steps this node carried out for other nodes' intents.
//! The store holds the same rows; they are changed here under the namespace lock, in the same
//! order as the store sees them.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use tessera_core::name_ops::{Intent, Outcome, StepKey};
use tokio::sync::Notify;

#[derive(Default)]
pub struct NameIntents {
    /// Intent id -> the intent at its recorded stage.
    intents: Mutex<BTreeMap<u64, Intent>>,
    /// Per file (inode) with intents: held by whoever drives them or begins one, so that an
    /// operation begins only once the ones before it on the same file have ended (a retried
    /// rename never races the first attempt, which would then apply late over what came
    /// after it).
    files: Mutex<HashMap<u64, Arc<tokio::sync::Mutex<()>>>>,
    /// Answers of steps carried out here for other nodes' intents.
    answered: Mutex<HashMap<StepKey, Outcome>>,
    /// Answers other shards recorded for intents that ended here, to be forgotten there.
    forgets: Mutex<Vec<(u32, Vec<StepKey>)>>,
    /// Woken when an intent is left to the background task.
    wake: Notify,
    /// Held (shared) while an operation begins; the check of names against counts holds it
    /// alone, so none begins while it counts.
    gate: tokio::sync::RwLock<()>,
}

impl NameIntents {
    /// Runs `begin` (which records an operation's intent) while no check of names against
    /// counts runs.
    pub async fn beginning<R>(&self, begin: impl FnOnce() -> R) -> R {
        let _gate = self.gate.read().await;
        begin()
    }

    /// Runs `check` while no operation on names begins.
    pub async fn quiet<F: std::future::Future>(&self, check: F) -> F::Output {
        let _gate = self.gate.write().await;
        check.await
    }

    /// Wakes the background task: an intent was left to it.
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Returns once [`NameIntents::wake`] was called (at once if it was while no one
    /// waited).
    pub async fn woken(&self) {
        self.wake.notified().await
    }

    /// After a start: the intents and answers the store kept. Every intent is taken up
    /// again as one whose last steps may have gone unanswered.
    pub fn load(intents: Vec<Intent>, answered: Vec<(StepKey, Outcome)>) -> NameIntents {
        NameIntents {
            intents: Mutex::new(intents.into_iter().map(|i| (i.id, i.resumed())).collect()),
            answered: Mutex::new(answered.into_iter().collect()),
            ..NameIntents::default()
        }
    }

    /// Records an intent at its stage (or its end, `None` with its id).
    pub fn set(&self, id: u64, intent: Option<Intent>) {
        let mut all = self.intents.lock().expect("intents");
        match intent {
            Some(i) => all.insert(id, i),
            None => all.remove(&id),
        };
    }

    /// Runs `work` under the lock of file `ino`, under which its intents are begun and
    /// driven, after the holders before it; the lock is forgotten after if nothing needs it.
    pub async fn serialized<F: std::future::Future>(&self, ino: u64, work: F) -> F::Output {
        let lock = self.file_lock(ino);
        let out = {
            let _held = lock.lock().await;
            work.await
        };
        self.tidy(ino, lock);
        out
    }

    /// As [`NameIntents::serialized`], unless the lock of file `ino` is held now: then
    /// `None`, at once, and `work` does not run.
    pub async fn unless_held<F: std::future::Future>(
        &self,
        ino: u64,
        work: F,
    ) -> Option<F::Output> {
        let lock = self.file_lock(ino);
        let out = match lock.try_lock() {
            Ok(_held) => Some(work.await),
            Err(_) => None,
        };
        self.tidy(ino, lock);
        out
    }

    /// The lock under which the intents of file `ino` are begun and driven.
    fn file_lock(&self, ino: u64) -> Arc<tokio::sync::Mutex<()>> {
        self.files
            .lock()
            .expect("files")
            .entry(ino)
            .or_default()
            .clone()
    }

    /// Forgets the lock of a file without intents that nobody else holds or waits for.
    fn tidy(&self, ino: u64, lock: Arc<tokio::sync::Mutex<()>>) {
        let mut files = self.files.lock().expect("files");
        // Ours and the map's: nobody else has it.
        if Arc::strong_count(&lock) <= 2 && self.of_file(ino).is_empty() {
            files.remove(&ino);
        }
    }

    /// The intents of file `ino`, as recorded.
    pub fn of_file(&self, ino: u64) -> Vec<Intent> {
        self.intents
            .lock()
            .expect("intents")
            .values()
            .filter(|i| i.file.ino == ino)
            .cloned()
            .collect()
    }

    /// The intent `id` as recorded.
    pub fn get(&self, id: u64) -> Option<Intent> {
        self.intents.lock().expect("intents").get(&id).cloned()
    }

    /// The inodes with an operation on their names in flight.
    pub fn inodes_in_flight(&self) -> HashSet<u64> {
        self.intents
            .lock()
            .expect("intents")
            .values()
            .map(|i| i.file.ino)
            .collect()
    }

    pub fn count(&self) -> usize {
        self.intents.lock().expect("intents").len()
    }

    /// The answer recorded for a step carried out here before.
    pub fn answered(&self, key: StepKey) -> Option<Outcome> {
        self.answered.lock().expect("answered").get(&key).copied()
    }

    pub fn record_answer(&self, key: StepKey, outcome: Outcome) {
        self.answered.lock().expect("answered").insert(key, outcome);
    }

    /// Queues the keys whose answers shards (by node) may forget.
    pub fn to_forget(&self, by_shard: impl IntoIterator<Item = (u32, Vec<StepKey>)>) {
        self.forgets.lock().expect("forgets").extend(by_shard);
    }

    /// The queued keys, by shard.
    pub fn take_forgets(&self) -> Vec<(u32, Vec<StepKey>)> {
        let queued = std::mem::take(&mut *self.forgets.lock().expect("forgets"));
        let mut by_shard: BTreeMap<u32, Vec<StepKey>> = BTreeMap::new();
        for (shard, keys) in queued {
            by_shard.entry(shard).or_default().extend(keys);
        }
        by_shard.into_iter().collect()
    }

    /// Forgets the answers of intents that ended; the keys that were held.
    pub fn forget_answers(&self, keys: &[StepKey]) -> Vec<StepKey> {
        let mut answered = self.answered.lock().expect("answered");
        keys.iter()
            .filter(|k| answered.remove(k).is_some())
            .copied()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::meta::{Dentry, FileKind};
    use tessera_core::name_ops::{NameOp, Stage};

    fn intent(id: u64) -> Intent {
        Intent {
            id,
            file: Dentry {
                ino: 5,
                kind: FileKind::File,
            },
            op: NameOp::Remove { path: "/a".into() },
            stage: Stage::Start,
            retried: false,
        }
    }

    #[test]
    fn intents_by_file_and_loaded_ones_are_retried() {
        let n = NameIntents::load(vec![intent(1)], Vec::new());
        assert!(
            n.get(1).unwrap().retried,
            "loaded intents may have lost answers"
        );
        n.set(2, Some(intent(2)));
        assert_eq!(n.of_file(5).len(), 2);
        assert_eq!(n.inodes_in_flight().into_iter().collect::<Vec<_>>(), [5]);
        let lock = n.file_lock(5);
        let first = Arc::downgrade(&lock);
        assert!(Arc::ptr_eq(&lock, &n.file_lock(5)), "one lock per file");
        n.tidy(5, lock);
        let lock = n.file_lock(5);
        let kept = first.upgrade().is_some_and(|f| Arc::ptr_eq(&lock, &f));
        assert!(kept, "kept while intents remain");
        n.set(1, None);
        n.set(2, None);
        let waiting = n.file_lock(5);
        n.tidy(5, lock);
        let kept = Arc::ptr_eq(&waiting, &n.file_lock(5));
        assert!(kept, "kept while another holds it");
        n.tidy(5, waiting);
        assert!(first.upgrade().is_none(), "forgotten once none remain");
        assert_eq!(n.count(), 0);
        let key = StepKey {
            node: 1,
            intent: 2,
            stage: 0,
        };
        n.record_answer(key, Outcome::Removed(true));
        assert_eq!(n.answered(key), Some(Outcome::Removed(true)));
        assert_eq!(n.forget_answers(&[key, key]), [key]);
        assert_eq!(n.answered(key), None);
    }

    #[tokio::test]
    async fn work_on_a_file_is_serialised_and_skipped_while_held() {
        let n = NameIntents::default();
        let (entered, ran) = (Notify::new(), Notify::new());
        let holder = n.serialized(5, async {
            entered.notify_one();
            ran.notified().await;
            "first"
        });
        let other = async {
            entered.notified().await;
            // Held by the first: skipped at once, the work not run.
            let skipped = n.unless_held(5, async { unreachable!("ran under a held lock") });
            assert!(skipped.await.is_none());
            // Another file's lock is free.
            assert_eq!(n.unless_held(6, async { 6 }).await, Some(6));
            ran.notify_one();
        };
        let (first, ()) = tokio::join!(holder, other);
        assert_eq!(first, "first");
        // Free again, and forgotten: no intents on the file and nobody waits.
        assert_eq!(n.unless_held(5, async { 5 }).await, Some(5));
        assert!(n.files.lock().unwrap().is_empty());
    }
}
