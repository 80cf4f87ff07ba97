//! Disjoint interval maps over the byte-offset space of a file.
//!
//! One structure serves three roles:
//!
//! * the **local extent map** of a process (`RangeMap<u64>`): logical range -> position of its
//!   first byte in this process's data log, newest write wins;
//! * the **ownership map** of a (file, stripe) shard (`RangeMap<Owner>`): logical range -> the
//!   log that attached it last;
//! * plain **range sets** (`RangeMap<()>`), e.g. the bytes written but not yet attached.
//!
//! The contract, in the style of a segment tree (newest insert shown below the old):
//!
//! ```text
//! partial overlap splits          full cover removes          contiguous + same value merges
//!   old  |aaaaaaaa|                 old     |aa|                 old  |aaaa|
//!   new       |bbbbbbb|             new   |bbbbbbb|              new       |aaaa|
//!   map  |aaaa|bbbbbbb|             map   |bbbbbbb|              map  |aaaaaaaa|
//! ```
//!
//! "Same value" is decided by [`Slice::advance`]: two neighbours merge when the left value,
//! advanced by the left length, equals the right value. For owners that is plain equality; for
//! log positions it means the bytes are also contiguous in the log. The map is kept in this
//! canonical form at all times, so two maps holding the same bytes compare equal.

use std::collections::BTreeMap;
use std::ops::Bound::{Excluded, Included, Unbounded};

/// A value that describes a run of bytes and can be re-based when the run is split.
pub trait Slice: Clone + PartialEq + std::fmt::Debug {
    /// The value for the bytes that begin `by` bytes into a run valued `self`.
    fn advance(&self, by: u64) -> Self;
}

/// A log position: advancing by `n` bytes moves `n` bytes further into the log.
impl Slice for u64 {
    fn advance(&self, by: u64) -> Self {
        self + by
    }
}

/// Set membership: every byte has the same (empty) value.
impl Slice for () {
    fn advance(&self, _by: u64) -> Self {}
}

/// One extent `[start, end)` with its value, as returned by queries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Extent<V> {
    pub start: u64,
    pub end: u64,
    pub value: V,
}

impl<V> Extent<V> {
    pub fn len(&self) -> u64 {
        self.end - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.start >= self.end
    }
}

/// A map from disjoint byte ranges to values; see the module docs for the contract.
#[derive(Clone, Debug, PartialEq)]
pub struct RangeMap<V> {
    /// start -> (end, value); invariant: disjoint, non-empty, canonical (no mergeable neighbours).
    map: BTreeMap<u64, (u64, V)>,
}

impl<V: Slice> Default for RangeMap<V> {
    fn default() -> Self {
        Self::new()
    }
}

/// A range set: the bytes it holds, no values.
pub type RangeSet = RangeMap<()>;

impl<V: Slice> RangeMap<V> {
    pub fn new() -> Self {
        Self {
            map: BTreeMap::new(),
        }
    }

    /// Number of extents (not bytes).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Total number of bytes covered.
    pub fn bytes(&self) -> u64 {
        self.map.iter().map(|(s, (e, _))| e - s).sum()
    }

    /// End of the last extent, or 0 for an empty map.
    pub fn max_end(&self) -> u64 {
        self.map.last_key_value().map_or(0, |(_, (e, _))| *e)
    }

    /// All extents in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = Extent<V>> + '_ {
        self.map.iter().map(|(s, (e, v))| Extent {
            start: *s,
            end: *e,
            value: v.clone(),
        })
    }

    /// Maps `[start, end)` to `value`, replacing whatever was there (newest wins).
    pub fn insert(&mut self, start: u64, end: u64, value: V) {
        if start >= end {
            return;
        }
        self.cut(start);
        self.cut(end);
        self.drain_keys(start, end);
        self.map.insert(start, (end, value));
        self.merge_at(start);
        self.merge_at(end);
    }

    /// Removes every byte of `[start, end)` from the map.
    pub fn remove(&mut self, start: u64, end: u64) {
        self.remove_where(start, end, |_| true);
    }

    /// Removes the bytes of `[start, end)` whose value satisfies `pred`; returns how many bytes
    /// were removed. Bytes with other values stay (a detach never removes another's ownership).
    pub fn remove_where(&mut self, start: u64, end: u64, pred: impl Fn(&V) -> bool) -> u64 {
        if start >= end {
            return 0;
        }
        self.cut(start);
        self.cut(end);
        let doomed: Vec<u64> = self
            .map
            .range(start..end)
            .filter(|(_, (_, v))| pred(v))
            .map(|(s, _)| *s)
            .collect();
        let mut removed = 0;
        for s in doomed {
            let (e, _) = self.map.remove(&s).expect("key collected above");
            removed += e - s;
        }
        self.merge_at(start);
        self.merge_at(end);
        removed
    }

    /// Drops everything at or beyond `size`.
    pub fn truncate(&mut self, size: u64) {
        self.remove(size, u64::MAX);
    }

    /// The extents overlapping `[start, end)`, clipped to it, ascending.
    pub fn overlapping(&self, start: u64, end: u64) -> Vec<Extent<V>> {
        self.raw_overlapping(start, end)
            .map(|(s, e, v)| {
                let cs = s.max(start);
                let ce = e.min(end);
                Extent {
                    start: cs,
                    end: ce,
                    value: v.advance(cs - s),
                }
            })
            .collect()
    }

    /// The extents overlapping `[start, end)` as stored (not clipped), ascending.
    pub fn overlapping_whole(&self, start: u64, end: u64) -> Vec<Extent<V>> {
        self.raw_overlapping(start, end)
            .map(|(s, e, v)| Extent {
                start: s,
                end: e,
                value: v.clone(),
            })
            .collect()
    }

    fn raw_overlapping(&self, start: u64, end: u64) -> impl Iterator<Item = (u64, u64, &V)> + '_ {
        // The extent starting before `start` may reach into the range.
        let lower = self
            .map
            .range((Unbounded, Included(start)))
            .next_back()
            .filter(|(_, (e, _))| *e > start)
            .map_or(start, |(s, _)| *s);
        let upper = end.max(lower);
        self.map
            .range((Included(lower), Excluded(upper)))
            .filter(move |(s, (e, _))| start < end && **s < end && *e > start)
            .map(|(s, (e, v))| (*s, *e, v))
    }

    /// The sub-ranges of `[start, end)` that the map does not cover, ascending.
    pub fn gaps(&self, start: u64, end: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut at = start;
        for ext in self.overlapping(start, end) {
            if ext.start > at {
                out.push((at, ext.start));
            }
            at = ext.end;
        }
        if at < end {
            out.push((at, end));
        }
        out
    }

    /// Whether every byte of `[start, end)` is in the map.
    pub fn covers(&self, start: u64, end: u64) -> bool {
        start >= end || self.gaps(start, end).is_empty()
    }

    /// Splits the extent that strictly contains `at` into two at `at`.
    fn cut(&mut self, at: u64) {
        let Some((&s, (e, v))) = self.map.range((Unbounded, Excluded(at))).next_back() else {
            return;
        };
        if *e <= at {
            return;
        }
        let (e, v) = (*e, v.clone());
        self.map.insert(s, (at, v.clone()));
        self.map.insert(at, (e, v.advance(at - s)));
    }

    /// Removes all extents whose start lies in `[start, end)`.
    fn drain_keys(&mut self, start: u64, end: u64) {
        let keys: Vec<u64> = self.map.range(start..end).map(|(s, _)| *s).collect();
        for k in keys {
            self.map.remove(&k);
        }
    }

    /// Merges the extent ending at `at` with the one starting at `at`, if their values continue.
    fn merge_at(&mut self, at: u64) {
        let Some((&ls, (le, lv))) = self.map.range((Unbounded, Excluded(at))).next_back() else {
            return;
        };
        if *le != at {
            return;
        }
        let Some((re, rv)) = self.map.get(&at) else {
            return;
        };
        if lv.advance(at - ls) != *rv {
            return;
        }
        let re = *re;
        self.map.remove(&at);
        self.map.get_mut(&ls).expect("left extent exists").0 = re;
    }

    /// Checks the structural invariant; used by tests and debug assertions.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut prev: Option<(u64, u64, &V)> = None;
        for (s, (e, v)) in &self.map {
            if s >= e {
                return Err(format!("empty extent [{s},{e})"));
            }
            if let Some((ps, pe, pv)) = prev {
                if pe > *s {
                    return Err(format!("overlap [{ps},{pe}) and [{s},{e})"));
                }
                if pe == *s && pv.advance(pe - ps) == *v {
                    return Err(format!("unmerged neighbours [{ps},{pe}) and [{s},{e})"));
                }
            }
            prev = Some((*s, *e, v));
        }
        Ok(())
    }
}

impl RangeSet {
    /// Adds `[start, end)` to the set.
    pub fn add(&mut self, start: u64, end: u64) {
        self.insert(start, end, ());
    }

    /// The ranges of the set in ascending order.
    pub fn ranges(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.map.iter().map(|(s, (e, _))| (*s, *e))
    }

    /// Adds every range of `other`, in one linear merge (adding many ranges one at a time
    /// costs a tree update each).
    pub fn union_with(&mut self, other: RangeSet) {
        if other.is_empty() {
            return;
        }
        if self.is_empty() {
            *self = other;
            return;
        }
        let mut all: Vec<(u64, u64)> = self.ranges().chain(other.ranges()).collect();
        all.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(all.len());
        for (s, e) in all {
            match merged.last_mut() {
                Some((_, le)) if s <= *le => *le = (*le).max(e),
                _ => merged.push((s, e)),
            }
        }
        self.map = merged.into_iter().map(|(s, e)| (s, (e, ()))).collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Renders a map as a string, e.g. `[0,4)=a [4,9)=b`, so tests read as the contract.
    fn show<V: Slice>(m: &RangeMap<V>) -> String {
        m.iter()
            .map(|e| format!("[{},{})={:?}", e.start, e.end, e.value))
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[derive(Clone, Copy, PartialEq, Debug)]
    struct Who(char);
    impl Slice for Who {
        fn advance(&self, _: u64) -> Self {
            *self
        }
    }

    #[test]
    fn partial_overlap_splits_full_cover_removes() {
        let mut m = RangeMap::new();
        m.insert(0, 8, Who('a'));
        m.insert(4, 11, Who('b'));
        assert_eq!(show(&m), "[0,4)=Who('a') [4,11)=Who('b')");
        m.insert(2, 3, Who('c'));
        assert_eq!(
            show(&m),
            "[0,2)=Who('a') [2,3)=Who('c') [3,4)=Who('a') [4,11)=Who('b')"
        );
        m.insert(1, 12, Who('d'));
        assert_eq!(show(&m), "[0,1)=Who('a') [1,12)=Who('d')");
    }

    #[test]
    fn contiguous_same_owner_merges() {
        let mut m = RangeMap::new();
        m.insert(0, 4, Who('a'));
        m.insert(8, 12, Who('a'));
        m.insert(4, 8, Who('a'));
        assert_eq!(show(&m), "[0,12)=Who('a')");
    }

    #[test]
    fn log_positions_merge_only_when_contiguous_in_the_log() {
        let mut m: RangeMap<u64> = RangeMap::new();
        m.insert(0, 4, 100);
        m.insert(4, 8, 104); // continues in the log: merges
        m.insert(8, 12, 500); // jumps in the log: stays apart
        assert_eq!(show(&m), "[0,8)=100 [8,12)=500");
        // A split rebases the position of the right part.
        m.insert(2, 3, 900);
        assert_eq!(show(&m), "[0,2)=100 [2,3)=900 [3,8)=103 [8,12)=500");
    }

    #[test]
    fn remove_where_keeps_other_owners_and_remerges() {
        let mut m = RangeMap::new();
        m.insert(0, 10, Who('a'));
        m.insert(3, 5, Who('b'));
        assert_eq!(m.remove_where(0, 10, |w| *w == Who('b')), 2);
        assert_eq!(show(&m), "[0,3)=Who('a') [5,10)=Who('a')");
        // Removing nothing at a cut point leaves the map canonical.
        assert_eq!(m.remove_where(4, 7, |w| *w == Who('z')), 0);
        assert_eq!(show(&m), "[0,3)=Who('a') [5,10)=Who('a')");
        m.check_invariants().unwrap();
    }

    #[test]
    fn union_merges_overlapping_and_adjacent_ranges() {
        let mut a = RangeSet::new();
        a.add(0, 4);
        a.add(10, 12);
        let mut b = RangeSet::new();
        b.add(4, 6);
        b.add(11, 20);
        b.add(30, 31);
        a.union_with(b);
        assert_eq!(
            a.ranges().collect::<Vec<_>>(),
            vec![(0, 6), (10, 20), (30, 31)]
        );
        a.check_invariants().unwrap();
    }

    #[test]
    fn overlapping_and_gaps_clip_to_the_query() {
        let mut m: RangeMap<u64> = RangeMap::new();
        m.insert(10, 20, 0);
        m.insert(30, 40, 10);
        let o = m.overlapping(15, 35);
        assert_eq!(
            o,
            vec![
                Extent {
                    start: 15,
                    end: 20,
                    value: 5
                },
                Extent {
                    start: 30,
                    end: 35,
                    value: 10
                }
            ]
        );
        assert_eq!(m.gaps(0, 50), vec![(0, 10), (20, 30), (40, 50)]);
        assert!(m.covers(12, 18));
        assert!(!m.covers(12, 31));
        assert_eq!(m.max_end(), 40);
    }
}
