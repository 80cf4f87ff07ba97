//! Removed files whose bytes every node has still to release. An unlink answers once its
//! inode's shard recorded the file here (durably, with the intent's end); the release goes out
//! in the background, in batches ([`crate::services::drops`]), and the file leaves this list
//! once every node answered.

use std::collections::BTreeSet;
use std::sync::Mutex;
use tokio::sync::Notify;

/// Most files released in one request to each node.
pub const DROP_BATCH: usize = 1024;

#[derive(Default)]
pub struct FilesToDrop {
    /// Waiting, and being released (a batch stays here until every node answered).
    files: Mutex<BTreeSet<u64>>,
    /// Woken when files are added.
    wake: Notify,
}

impl FilesToDrop {
    pub fn load(files: Vec<u64>) -> Self {
        FilesToDrop {
            files: Mutex::new(files.into_iter().collect()),
            wake: Notify::new(),
        }
    }

    /// Returns once files were added since the last call (or at once if some were added
    /// while no one waited).
    pub async fn added(&self) {
        self.wake.notified().await
    }

    pub fn add(&self, inos: &[u64]) {
        if inos.is_empty() {
            return;
        }
        self.files.lock().expect("drops").extend(inos);
        self.wake.notify_one();
    }

    /// The next batch to release (it stays listed until [`FilesToDrop::released`]).
    pub fn batch(&self) -> Vec<u64> {
        let files = self.files.lock().expect("drops");
        files.iter().copied().take(DROP_BATCH).collect()
    }

    pub fn released(&self, inos: &[u64]) {
        let mut files = self.files.lock().expect("drops");
        for ino in inos {
            files.remove(ino);
        }
    }

    pub fn count(&self) -> usize {
        self.files.lock().expect("drops").len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_stays_listed_until_released() {
        let d = FilesToDrop::load(vec![3, 1]);
        d.add(&[2]);
        assert_eq!(d.batch(), [1, 2, 3]);
        assert_eq!(d.count(), 3);
        d.released(&[1, 3]);
        assert_eq!(d.batch(), [2]);
        d.add(&(10..10 + DROP_BATCH as u64 + 5).collect::<Vec<_>>());
        assert_eq!(d.batch().len(), DROP_BATCH);
        assert_eq!(d.batch()[0], 2);
    }
}
