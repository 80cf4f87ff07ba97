//! Transaction ids a home handed out ahead of use (D2T): the transaction library's
//! coordinator reserves a block of ids once, every process of the job then names its next
//! transaction with the next id of the block without a message, and the home opens each id
//! when its members are enrolled (at begin). An id opens at most once, and only if it was
//! reserved here: a stale or made-up id is refused as never opened.

use crate::txn_state::TxnId;

/// Ids reserved and not opened yet, as disjoint ascending ranges `[start, end)`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReservedIds {
    ranges: Vec<(TxnId, TxnId)>,
}

impl ReservedIds {
    /// The most blocks kept: a job reserves a block when it used the last one up, so a home
    /// holds a few at most; beyond this the oldest go (their ids are then refused).
    pub const MAX_RANGES: usize = 4096;

    /// Reserves `[first, first + count)` (ids the home's counter has moved past).
    pub fn reserve(&mut self, first: TxnId, count: u64) {
        let end = first.saturating_add(count);
        if count == 0 || self.ranges.iter().any(|(s, e)| first < *e && *s < end) {
            return;
        }
        let at = self.ranges.partition_point(|(s, _)| *s < first);
        self.ranges.insert(at, (first, end));
        if self.ranges.len() > Self::MAX_RANGES {
            let oldest = self
                .ranges
                .iter()
                .enumerate()
                .min_by_key(|(_, (s, _))| *s)
                .map(|(i, _)| i)
                .expect("not empty");
            self.ranges.remove(oldest);
        }
    }

    /// Takes `id` for opening: whether it was reserved and not opened before.
    pub fn take(&mut self, id: TxnId) -> bool {
        let at = self.ranges.partition_point(|(_, e)| *e <= id);
        let Some(&(s, e)) = self.ranges.get(at) else {
            return false;
        };
        if id < s {
            return false;
        }
        match (id == s, id + 1 == e) {
            (true, true) => {
                self.ranges.remove(at);
            }
            (true, false) => self.ranges[at].0 = id + 1,
            (false, true) => self.ranges[at].1 = id,
            (false, false) => {
                self.ranges[at].1 = id;
                self.ranges.insert(at + 1, (id + 1, e));
            }
        }
        true
    }

    /// How many ids are reserved and not opened.
    pub fn len(&self) -> u64 {
        self.ranges.iter().map(|(s, e)| e - s).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[test]
    fn an_id_opens_once_and_only_if_reserved() {
        let mut r = ReservedIds::default();
        r.reserve(10, 4);
        assert!(!r.take(9));
        assert!(r.take(12));
        assert!(!r.take(12), "opened once");
        assert!(r.take(10) && r.take(13) && r.take(11));
        assert!(r.is_empty());
        assert!(!r.take(14));
    }

    proptest! {
        /// Against a set of the ids reserved and not taken: the same answers, and the same
        /// count, whatever the order of reservations and takes (ids taken may be reserved
        /// again here; a home never does, its counter only moves on).
        #[test]
        fn behaves_as_a_set_of_ids(
            ops in proptest::collection::vec((any::<bool>(), 0u64..64, 1u64..8), 0..80),
        ) {
            let mut r = ReservedIds::default();
            let mut model: BTreeSet<u64> = BTreeSet::new();
            for (reserve, at, count) in ops {
                if reserve {
                    // A block overlapping ids still reserved is refused whole.
                    let overlaps = (at..at + count).any(|i| model.contains(&i));
                    r.reserve(at, count);
                    if !overlaps {
                        model.extend(at..at + count);
                    }
                } else {
                    prop_assert_eq!(r.take(at), model.remove(&at));
                }
                prop_assert_eq!(r.len(), model.len() as u64);
            }
        }
    }
}
