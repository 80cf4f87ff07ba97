//! Totals of what clients report in their rings (bytes they read themselves), kept
//! monotonic whatever a client writes there: a figure only ever adds what it grew by, and a
//! client that leaves keeps what it reported in the total.

use std::collections::HashMap;
use tessera_shm::RingReports;

/// Where a client's ring keeps a figure (the client's side writes them, see
/// `tessera_client`'s read statistics).
pub use tessera_proto::reports::{LOCAL_READ_BYTES, PFS_READ_BYTES, SLOTS};

/// A source of reported figures: a ring's reports in the daemon, a plain array in tests.
pub trait Reporter: Send {
    fn get(&self, slot: usize) -> u64;
}

impl Reporter for RingReports {
    fn get(&self, slot: usize) -> u64 {
        RingReports::get(self, slot)
    }
}

/// The live reporters and what they and the departed added up to.
pub struct ReportTotals<R> {
    live: HashMap<u64, (R, [u64; SLOTS])>,
    /// Per slot: what every reporter added, up to its last reading.
    total: [u64; SLOTS],
}

impl<R> Default for ReportTotals<R> {
    fn default() -> Self {
        ReportTotals {
            live: HashMap::new(),
            total: [0; SLOTS],
        }
    }
}

impl<R: Reporter> ReportTotals<R> {
    /// Starts counting client `client`'s reports (replacing an earlier reporter of the id,
    /// whose figures are read a last time first).
    pub fn add(&mut self, client: u64, reporter: R) {
        self.remove(client);
        let mut seen = [0; SLOTS];
        self.take_growth(&reporter, &mut seen);
        self.live.insert(client, (reporter, seen));
    }

    /// Reads client `client`'s figures a last time and stops counting them.
    pub fn remove(&mut self, client: u64) {
        if let Some((reporter, mut seen)) = self.live.remove(&client) {
            self.take_growth(&reporter, &mut seen);
        }
    }

    /// The totals now, per slot.
    pub fn totals(&mut self) -> [u64; SLOTS] {
        let mut live = std::mem::take(&mut self.live);
        for (reporter, seen) in live.values_mut() {
            self.take_growth(reporter, seen);
        }
        self.live = live;
        self.total
    }

    /// Adds what each figure grew by since `seen` (a figure that went down adds nothing and
    /// is not followed down).
    fn take_growth(&mut self, reporter: &R, seen: &mut [u64; SLOTS]) {
        for (slot, seen) in seen.iter_mut().enumerate() {
            let now = reporter.get(slot);
            if now > *seen {
                self.total[slot] = self.total[slot].saturating_add(now - *seen);
                *seen = now;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// A client's report words, shared with the test as the ring is with the client.
    #[derive(Clone, Default)]
    struct Words(Arc<[AtomicU64; SLOTS]>);

    impl Reporter for Words {
        fn get(&self, slot: usize) -> u64 {
            self.0[slot].load(Ordering::Relaxed)
        }
    }

    #[derive(Clone, Debug)]
    enum Step {
        Join(u8),
        Write(u8, usize, u64),
        Leave(u8),
        Scrape,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (0u8..4).prop_map(Step::Join),
            (0u8..4, 0..SLOTS, 0u64..1000).prop_map(|(c, s, v)| Step::Write(c, s, v)),
            (0u8..4).prop_map(Step::Leave),
            Just(Step::Scrape),
        ]
    }

    proptest! {
        /// Against a model that keeps, per client, the highest value each figure reached
        /// while it was counted: the totals are the sum of those, and never go down.
        #[test]
        fn totals_add_each_reporters_highest_figures_and_never_fall(
            steps in proptest::collection::vec(step(), 0..60)
        ) {
            let mut totals: ReportTotals<Words> = ReportTotals::default();
            let mut words: HashMap<u8, Words> = HashMap::new();
            // Per counted client: the highest value read; plus what departed ones reached.
            let mut highest: HashMap<u8, [u64; SLOTS]> = HashMap::new();
            let mut departed = [0u64; SLOTS];
            let mut last = [0u64; SLOTS];
            for s in steps {
                match s {
                    Step::Join(c) => {
                        let w = Words::default();
                        if let (Some(h), Some(old)) = (highest.remove(&c), words.get(&c)) {
                            for i in 0..SLOTS { departed[i] += h[i].max(old.get(i)); }
                        }
                        totals.add(c as u64, w.clone());
                        words.insert(c, w);
                        highest.insert(c, [0; SLOTS]);
                    }
                    Step::Write(c, slot, v) => {
                        if let Some(w) = words.get(&c) {
                            w.0[slot].store(v, Ordering::Relaxed);
                        }
                    }
                    Step::Leave(c) => {
                        totals.remove(c as u64);
                        if let (Some(h), Some(w)) = (highest.remove(&c), words.remove(&c)) {
                            for i in 0..SLOTS { departed[i] += h[i].max(w.get(i)); }
                        }
                    }
                    Step::Scrape => {
                        let now = totals.totals();
                        for (c, h) in highest.iter_mut() {
                            for (i, h) in h.iter_mut().enumerate() { *h = (*h).max(words[c].get(i)); }
                        }
                        let mut want = departed;
                        for h in highest.values() {
                            for i in 0..SLOTS { want[i] += h[i]; }
                        }
                        prop_assert_eq!(now, want);
                        for i in 0..SLOTS { prop_assert!(now[i] >= last[i]); }
                        last = now;
                    }
                }
            }
        }
    }
}
