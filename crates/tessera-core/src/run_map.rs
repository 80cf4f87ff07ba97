//! A map from strided runs of bytes to values, newest wins: the ownership map of a (file,
//! stripe) shard, whose size grows with the write patterns, not with the writes.
//!
//! Each entry is a [`Run`] (`count` pieces of `len` bytes, `stride` apart) and its value. No
//! byte belongs to two entries: inserting a run takes its bytes out of the entries it overlaps,
//! which keep what is left as runs (O(1) runs when the strides are equal or one side is a
//! single range). The writers of an N-1 strided checkpoint interleave without overlapping, so W
//! writers cost W entries however many pieces each wrote:
//!
//! ```text
//! writer 0  |aa......aa......aa......|   one entry: start 0, len 2, stride 8, count 3
//! writer 1  |..bb......bb......bb....|   one entry: start 2, len 2, stride 8, count 3
//! writer 0 rewrites [4, 12)
//!           |aabbaaaaaa......aa......|   b: start 2, count 1 and start 18, count 1 ...
//! ```
//!
//! A run that continues an entry of the same value (the next chunk of a writer's pattern, or
//! the next contiguous range) joins it; the entry it continues is found by phase too. Finding the entries a run may overlap does not look at
//! every entry: entries of one stride are indexed by their phase (`start % stride`), so a piece
//! finds the interleaved runs around it in O(log n), and single ranges (disjoint) by start.
//!
//! Each change reports the rows (keyed by run start) that a persisted copy must write or
//! delete, so a table kept by applying them equals the map.

use crate::run::{MAX_FILE_SIZE, Run};

/// Strides with a group of their own, at most; a run of another stride arriving past this is
/// kept as single pieces. Every lookup visits every group, so runs of ever new strides (pairs
/// of random writes, or a hostile client) must not make groups without bound.
const MAX_STRIDES: usize = 64;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// A change to a persisted copy of the map, whose rows are keyed by the start of their run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunChange<V> {
    /// Write this row (new, or replacing the row with the same start).
    Put(Run, V),
    /// Delete the row starting here.
    Del(u64),
}

/// The strided entries (`count > 1`) of one stride.
#[derive(Clone, Debug, Default)]
struct StrideGroup {
    /// (start % stride, start) of each entry.
    phases: BTreeSet<(u64, u64)>,
    /// No entry of the group is longer (it may be stale high: only a bound).
    max_len: u64,
}

#[derive(Clone, Debug)]
pub struct RunMap<V> {
    /// Every entry by its start (unique: no byte belongs to two entries).
    entries: BTreeMap<u64, (Run, V)>,
    /// Ends of the single-piece entries by start; being disjoint ranges, they sort by end too.
    singles: BTreeMap<u64, u64>,
    strided: HashMap<u64, StrideGroup>,
    /// Rows touched by the change in progress, as they were before it.
    touched: BTreeMap<u64, Option<(Run, V)>>,
}

impl<V: Copy + Eq> Default for RunMap<V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V: Copy + Eq> RunMap<V> {
    pub fn new() -> Self {
        RunMap {
            entries: BTreeMap::new(),
            singles: BTreeMap::new(),
            strided: HashMap::new(),
            touched: BTreeMap::new(),
        }
    }

    /// Number of entries (runs), not bytes.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Total number of bytes held.
    pub fn bytes(&self) -> u64 {
        self.entries.values().map(|(r, _)| r.bytes()).sum()
    }

    /// The entries in ascending order of start.
    pub fn iter(&self) -> impl Iterator<Item = (Run, V)> + '_ {
        self.entries.values().copied()
    }

    /// The entries that start at or after `start`, in ascending order of start.
    pub fn iter_from(&self, start: u64) -> impl Iterator<Item = (Run, V)> + '_ {
        self.entries.range(start..).map(|(_, e)| *e)
    }

    /// Adds a row read back from a persisted copy, as it is (rows written from this map's
    /// changes are disjoint already; kept whole, so that memory and rows have the same keys).
    pub fn restore(&mut self, run: Run, value: V) {
        self.add(run, value);
        self.touched.clear();
    }

    /// Makes `value` the value of every byte of `run`.
    pub fn insert(&mut self, run: Run, value: V) -> Vec<RunChange<V>> {
        debug_assert!(run.is_valid(), "{run:?}");
        let mut run = run.normalized();
        self.cut_out(&run, |_| true);
        if let Some(before) = self.continued_by(&run, value) {
            let (prev, _) = self.take(before);
            run = prev.merged(&run).expect("checked by continued_by");
        }
        if let Some(after) = self.continuing(&run, value) {
            let (next, _) = self.take(after);
            run = run.merged(&next).expect("checked by continuing");
        }
        self.place(run, value);
        self.finish()
    }

    /// Takes the bytes of `[start, end)` whose value passes `which` out of the map; returns
    /// how many bytes were taken.
    pub fn remove_where(
        &mut self,
        start: u64,
        end: u64,
        which: impl Fn(&V) -> bool,
    ) -> (u64, Vec<RunChange<V>>) {
        if start >= end {
            return (0, Vec::new());
        }
        let removed = self.cut_out(&Run::single(start, end - start), which);
        (removed, self.finish())
    }

    /// Drops every byte at or beyond `size`.
    pub fn truncate(&mut self, size: u64) -> Vec<RunChange<V>> {
        let size = size.min(MAX_FILE_SIZE);
        self.remove_where(size, MAX_FILE_SIZE, |_| true).1
    }

    /// Drops every byte of `value`.
    pub fn remove_value(&mut self, value: V) -> Vec<RunChange<V>> {
        let starts: Vec<u64> = self
            .entries
            .iter()
            .filter(|(_, (_, v))| *v == value)
            .map(|(s, _)| *s)
            .collect();
        for s in starts {
            self.take(s);
        }
        self.finish()
    }

    /// The entries' parts within `[start, end)`, in ascending order of start.
    pub fn overlapping(&self, start: u64, end: u64) -> Vec<(Run, V)> {
        if start >= end {
            return Vec::new();
        }
        let mut out: Vec<(Run, V)> = self
            .candidates(&Run::single(start, end - start))
            .into_iter()
            .flat_map(|s| {
                let (run, v) = self.entries[&s];
                run.clip(start, end).into_iter().map(move |r| (r, v))
            })
            .collect();
        out.sort_unstable_by_key(|(r, _)| r.start);
        out
    }

    /// Takes the bytes of `cut` out of the entries whose value passes `which`; returns how
    /// many bytes it took.
    fn cut_out(&mut self, cut: &Run, which: impl Fn(&V) -> bool) -> u64 {
        let mut removed = 0;
        for s in self.candidates(cut) {
            let (run, v) = self.entries[&s];
            if !which(&v) {
                continue;
            }
            let left = run.minus(cut);
            if left == [run] {
                continue;
            }
            removed += run.bytes() - left.iter().map(Run::bytes).sum::<u64>();
            self.take(s);
            for part in left {
                self.place(part, v);
            }
        }
        removed
    }

    /// The entry of `value` that `run` continues, if any: a strided run whose next piece
    /// would start where `run` starts (the nearest entry before it of the same phase: any
    /// other entry of that phase and stride between them would share their bytes), a single
    /// piece one stride before a strided `run`, or a single range that `run` touches.
    fn continued_by(&self, run: &Run, value: V) -> Option<u64> {
        let joins = |s: u64| {
            self.entries
                .get(&s)
                .is_some_and(|(prev, v)| *v == value && prev.merged(run).is_some())
        };
        for (&stride, group) in &self.strided {
            let phase = run.start % stride;
            let before = group
                .phases
                .range((phase, 0)..(phase, run.start))
                .next_back();
            if let Some(&(_, s)) = before
                && joins(s)
            {
                return Some(s);
            }
        }
        if run.count > 1
            && let Some(s) = run.start.checked_sub(run.stride)
            && self.singles.contains_key(&s)
            && joins(s)
        {
            return Some(s);
        }
        let (&s, &e) = self.singles.range(..run.start).next_back()?;
        (e == run.start && joins(s)).then_some(s)
    }

    /// The entry of `value` that continues `run`, if any.
    fn continuing(&self, run: &Run, value: V) -> Option<u64> {
        let next = if run.count == 1 {
            run.end()
        } else {
            run.start + run.count * run.stride
        };
        self.entries
            .get(&next)
            .is_some_and(|(n, v)| *v == value && run.merged(n).is_some())
            .then_some(next)
    }

    /// Starts of the entries that may have bytes in common with `r`: every one that does, and
    /// some that do not.
    fn candidates(&self, r: &Run) -> Vec<u64> {
        let (lo, hi) = (r.start, r.end());
        let mut out = Vec::new();
        for (&s, &e) in self.singles.range(..hi).rev() {
            if e <= lo {
                break;
            }
            out.push(s);
        }
        let within = |s: &u64| {
            let (run, _) = &self.entries[s];
            run.start < hi && run.end() > lo
        };
        for (&stride, group) in &self.strided {
            // A piece at x of an entry (len <= max_len) meets a piece at y of r only if
            // x lies in [y - max_len + 1, y + r.len - 1]; for r single or of this stride every
            // y has one phase, so the entries to look at are a window of phases.
            let width = (group.max_len - 1).saturating_add(r.len);
            if (r.count == 1 || r.stride == stride) && width < stride {
                let from = (r.start % stride + stride - (group.max_len - 1)) % stride;
                let to = from + width;
                let mut take = |a: u64, b: u64| {
                    let range = group.phases.range((a, 0)..(b, 0));
                    out.extend(range.map(|(_, s)| *s).filter(within));
                };
                take(from, to.min(stride));
                if to > stride {
                    take(0, to - stride);
                }
            } else {
                out.extend(group.phases.iter().map(|(_, s)| *s).filter(within));
            }
        }
        out
    }

    /// Records the row at `start` as it was before the change in progress.
    fn touch(&mut self, start: u64) {
        if !self.touched.contains_key(&start) {
            let before = self.entries.get(&start).copied();
            self.touched.insert(start, before);
        }
    }

    /// Adds a run, as single pieces if it is a pair (no smaller as a run) or its stride would
    /// be one group too many.
    fn place(&mut self, run: Run, value: V) {
        let grouped = self.strided.contains_key(&run.stride);
        let split =
            run.count > 1 && !grouped && (run.count == 2 || self.strided.len() >= MAX_STRIDES);
        if split {
            let pieces: Vec<(u64, u64)> = run.pieces().collect();
            for (s, e) in pieces {
                self.add(Run::single(s, e - s), value);
            }
        } else {
            self.add(run, value);
        }
    }

    fn add(&mut self, run: Run, value: V) {
        self.touch(run.start);
        self.entries.insert(run.start, (run, value));
        if run.count == 1 {
            self.singles.insert(run.start, run.end());
        } else {
            let group = self.strided.entry(run.stride).or_default();
            group.phases.insert((run.start % run.stride, run.start));
            group.max_len = group.max_len.max(run.len);
        }
    }

    fn take(&mut self, start: u64) -> (Run, V) {
        self.touch(start);
        let (run, value) = self.entries.remove(&start).expect("entry to take exists");
        if run.count == 1 {
            self.singles.remove(&start);
        } else if let Some(group) = self.strided.get_mut(&run.stride) {
            group.phases.remove(&(start % run.stride, start));
            if group.phases.is_empty() {
                self.strided.remove(&run.stride);
            }
        }
        (run, value)
    }

    /// The rows the change in progress wrote or deleted.
    fn finish(&mut self) -> Vec<RunChange<V>> {
        std::mem::take(&mut self.touched)
            .into_iter()
            .filter_map(|(start, before)| {
                let now = self.entries.get(&start).copied();
                match now {
                    _ if now == before => None,
                    Some((run, v)) => Some(RunChange::Put(run, v)),
                    None => Some(RunChange::Del(start)),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Above the end of any generated run.
    const SPAN: u64 = 256;

    /// The value of each byte below SPAN, as the map says.
    fn bytes_of(map: &RunMap<u8>) -> Vec<Option<u8>> {
        let mut out = vec![None; SPAN as usize];
        for (run, v) in map.iter() {
            for (s, e) in run.pieces() {
                for b in s..e {
                    assert!(out[b as usize].is_none(), "byte {b} in two entries");
                    out[b as usize] = Some(v);
                }
            }
        }
        out
    }

    fn table_of(map: &RunMap<u8>) -> BTreeMap<u64, (Run, u8)> {
        map.iter().map(|(r, v)| (r.start, (r, v))).collect()
    }

    fn apply(table: &mut BTreeMap<u64, (Run, u8)>, changes: Vec<RunChange<u8>>) {
        for c in changes {
            match c {
                RunChange::Put(r, v) => {
                    table.insert(r.start, (r, v));
                }
                RunChange::Del(s) => {
                    table.remove(&s);
                }
            }
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        Insert(Run, u8),
        Remove(u64, u64, u8),
        Truncate(u64),
        RemoveValue(u8),
    }

    fn arb_run() -> impl Strategy<Value = Run> {
        // Few strides, so that runs of one stride meet often.
        (
            0u64..120,
            1u64..6,
            prop_oneof![Just(6u64), Just(8), 1u64..12],
            1u64..10,
        )
            .prop_map(|(start, len, stride, count)| Run {
                start,
                len,
                stride: stride.max(len),
                count,
            })
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (arb_run(), 0u8..3).prop_map(|(r, v)| Op::Insert(r, v)),
            1 => (0u64..SPAN, 0u64..40, 0u8..3).prop_map(|(s, l, v)| Op::Remove(s, s + l, v)),
            1 => (0u64..SPAN).prop_map(Op::Truncate),
            1 => (0u8..3).prop_map(Op::RemoveValue),
        ]
    }

    proptest! {
        /// Against a byte model: every byte has the value of the newest insert that covered it
        /// and was not removed since; range queries agree; the changes keep a table equal.
        #[test]
        fn matches_the_byte_model(ops in proptest::collection::vec(op(), 1..40), q in (0u64..SPAN, 0u64..SPAN)) {
            let mut map = RunMap::new();
            let mut model: Vec<Option<u8>> = vec![None; SPAN as usize];
            let mut table = BTreeMap::new();
            for op in ops {
                let changes = match op {
                    Op::Insert(r, v) => {
                        for (s, e) in r.pieces() {
                            for b in s..e { model[b as usize] = Some(v); }
                        }
                        map.insert(r, v)
                    }
                    Op::Remove(s, e, v) => {
                        let mut want = 0;
                        for b in s..e.min(SPAN) {
                            if model[b as usize] == Some(v) { model[b as usize] = None; want += 1; }
                        }
                        let (removed, changes) = map.remove_where(s, e, |x| *x == v);
                        prop_assert_eq!(removed, want);
                        changes
                    }
                    Op::Truncate(s) => {
                        for b in s..SPAN { model[b as usize] = None; }
                        map.truncate(s)
                    }
                    Op::RemoveValue(v) => {
                        for b in model.iter_mut() { if *b == Some(v) { *b = None; } }
                        map.remove_value(v)
                    }
                };
                apply(&mut table, changes);
                prop_assert_eq!(&bytes_of(&map), &model);
                prop_assert_eq!(&table, &table_of(&map));
                for (r, _) in map.iter() { prop_assert!(r.is_valid() && r == r.normalized()); }
            }
            let (lo, hi) = (q.0.min(q.1), q.0.max(q.1));
            let mut seen = vec![None; SPAN as usize];
            for (r, v) in map.overlapping(lo, hi) {
                for (s, e) in r.pieces() {
                    for b in s..e {
                        prop_assert!((lo..hi).contains(&b));
                        seen[b as usize] = Some(v);
                    }
                }
            }
            let want: Vec<Option<u8>> = (0..SPAN).map(|b| if (lo..hi).contains(&b) { model[b as usize] } else { None }).collect();
            prop_assert_eq!(seen, want);
        }
    }

    /// W writers of an N-1 strided pattern, each attaching its pieces in chunks, in any order.
    fn checkpoint(writers: u64, pieces: u64, chunks: u64) -> RunMap<u64> {
        let mut map = RunMap::new();
        let per_chunk = pieces / chunks;
        for c in 0..chunks {
            for w in 0..writers {
                let w = (w * 7919 + c) % writers; // not in order of offset
                map.insert(
                    Run {
                        start: (c * per_chunk * writers + w) * 16,
                        len: 16,
                        stride: writers * 16,
                        count: per_chunk,
                    },
                    w,
                );
            }
        }
        map
    }

    #[test]
    fn new_strides_past_the_limit_are_kept_as_pieces() {
        let mut map = RunMap::new();
        // Runs of three pieces, each of a stride of its own, far apart.
        for i in 0..200u64 {
            let run = Run {
                start: i * 10_000,
                len: 4,
                stride: 10 + i,
                count: 3,
            };
            map.insert(run, i);
        }
        assert_eq!(map.strided.len(), MAX_STRIDES);
        assert_eq!(map.len(), MAX_STRIDES + (200 - MAX_STRIDES) * 3);
        assert_eq!(map.bytes(), 200 * 12);
        // A pair is two pieces.
        let mut map = RunMap::new();
        map.insert(
            Run {
                start: 0,
                len: 4,
                stride: 100,
                count: 2,
            },
            1,
        );
        assert_eq!((map.len(), map.strided.len()), (2, 0));
    }

    #[test]
    fn interleaved_writers_cost_one_entry_each() {
        for writers in [1, 10, 1000] {
            let map = checkpoint(writers, 100, 10);
            assert_eq!(map.len() as u64, writers);
            assert_eq!(map.bytes(), writers * 100 * 16);
            // A read of three pieces finds exactly their writers.
            let got = map.overlapping(16 * writers * 5 + 8, 16 * writers * 5 + 40);
            let owners: Vec<u64> = got.iter().map(|(_, v)| *v).collect();
            assert_eq!(
                owners,
                [0, 1, 2].map(|w| w % writers)[..owners.len()].to_vec()
            );
        }
        // One writer overwriting a range in the middle of everyone's pieces splits each
        // writer's run in two, no more.
        let mut map = checkpoint(100, 100, 1);
        let start = 16 * 100 * 40;
        map.insert(Run::single(start, 16 * 100 * 10), 0);
        assert!(map.len() <= 2 * 100 + 1, "{} entries", map.len());
    }
}
