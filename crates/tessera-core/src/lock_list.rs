//! A list lock request: exactly the bytes of one file an access touches, each range shared or
//! exclusive, encoded as strided runs (the list locks of Aarestad et al.).
//!
//! A 3-D block of a cube or a vector filetype is a handful of runs, not thousands of
//! (offset, length) pairs, so a request costs O(runs) on the wire and in the lock table, and
//! two requests conflict only where their bytes really overlap: the holes of a strided access
//! stay free for the ranks whose bytes interleave with it.

use crate::locks::LockKind;
use crate::run::{Run, compress};
use crate::{Errno, FsError, FsResult};
use serde::{Deserialize, Serialize};

/// Most runs one request may carry: a bound on what one request costs the lock table.
pub const MAX_LOCK_RUNS: usize = 1 << 16;

/// One strided run of a request and the kind of lock wanted on its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockRun {
    pub run: Run,
    pub kind: LockKind,
}

/// A checked request: at least one run, each well formed, sorted by start. Runs of one
/// request may overlap (a shared and an exclusive run over the same bytes ask for the
/// stronger of the two there); a request never conflicts with itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockList {
    runs: Vec<LockRun>,
    /// `[lo, hi)` covering every run: most pairs of requests are told apart by it alone.
    lo: u64,
    hi: u64,
}

impl LockList {
    /// Checks and sorts the runs of a request; the error names the first bad run.
    pub fn new(mut runs: Vec<LockRun>) -> FsResult<LockList> {
        if runs.is_empty() {
            return Err(FsError::new(
                Errno::Inval,
                "a list lock needs at least one byte range",
            ));
        }
        if runs.len() > MAX_LOCK_RUNS {
            return Err(FsError::new(
                Errno::Inval,
                format!(
                    "a list lock of {} runs is more than the {MAX_LOCK_RUNS} one request may carry; lock the access in parts",
                    runs.len()
                ),
            ));
        }
        if let Some(bad) = runs.iter().find(|r| !r.run.is_valid()) {
            let r = bad.run;
            return Err(FsError::new(
                Errno::Inval,
                format!(
                    "list lock run (start {}, len {}, stride {}, count {}) is empty, has overlapping pieces (stride < len) or ends past the largest file size",
                    r.start, r.len, r.stride, r.count
                ),
            ));
        }
        runs.iter_mut().for_each(|r| r.run = r.run.normalized());
        runs.sort_by_key(|r| (r.run.start, r.run.end()));
        let lo = runs[0].run.start;
        let hi = runs.iter().map(|r| r.run.end()).max().expect("non-empty");
        Ok(LockList { runs, lo, hi })
    }

    /// The request for `(start, end)` ranges of one kind: sorted and merged, then compressed
    /// into strided runs.
    pub fn from_ranges(
        ranges: impl IntoIterator<Item = (u64, u64)>,
        kind: LockKind,
    ) -> FsResult<LockList> {
        let mut v: Vec<(u64, u64)> = ranges.into_iter().filter(|(s, e)| s < e).collect();
        v.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(v.len());
        for (s, e) in v {
            match merged.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        let runs = compress(merged)
            .into_iter()
            .map(|run| LockRun { run, kind })
            .collect();
        LockList::new(runs)
    }

    pub fn runs(&self) -> &[LockRun] {
        &self.runs
    }

    /// `[lo, hi)` covering every byte of the request.
    pub fn extent(&self) -> (u64, u64) {
        (self.lo, self.hi)
    }

    /// Bytes the request covers (bytes of overlapping runs counted once per run).
    pub fn bytes(&self) -> u64 {
        self.runs.iter().map(|r| r.run.bytes()).sum()
    }

    /// Whether some byte is in both requests under kinds that cannot share it.
    pub fn conflicts(&self, other: &LockList) -> bool {
        if self.hi <= other.lo || other.hi <= self.lo {
            return false;
        }
        self.runs.iter().any(|a| {
            other
                .runs
                .iter()
                // Sorted by start: the runs of `other` starting at or past `a`'s end cannot
                // overlap it.
                .take_while(|b| b.run.start < a.run.end())
                .any(|b| !a.kind.compatible(b.kind) && a.run.overlaps(&b.run))
        })
    }

    /// Whether some byte of `[start, end)` is in the request under a kind that cannot share
    /// it with `kind` (`end` may be `u64::MAX`: to end of file).
    pub fn conflicts_range(&self, start: u64, end: u64, kind: LockKind) -> bool {
        if end <= self.lo || self.hi <= start {
            return false;
        }
        // Nothing of a request lies past its extent, so clipping keeps the range a valid run.
        let r = Run::single(start, end.min(self.hi) - start);
        self.runs
            .iter()
            .take_while(|a| a.run.start < r.end())
            .any(|a| !a.kind.compatible(kind) && a.run.overlaps(&r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn x(start: u64, len: u64, stride: u64, count: u64) -> LockRun {
        LockRun {
            run: Run {
                start,
                len,
                stride,
                count,
            },
            kind: LockKind::Exclusive,
        }
    }

    #[test]
    fn interleaved_strided_requests_do_not_conflict() {
        // Two ranks of a vector filetype: 100-byte blocks, every 200 bytes, offset by 100.
        let a = LockList::new(vec![x(0, 100, 200, 1000)]).unwrap();
        let b = LockList::new(vec![x(100, 100, 200, 1000)]).unwrap();
        assert!(!a.conflicts(&b));
        let c = LockList::new(vec![x(150, 100, 200, 3)]).unwrap();
        assert!(a.conflicts(&c) && b.conflicts(&c));
        assert!(!a.conflicts_range(100, 200, LockKind::Exclusive));
        assert!(a.conflicts_range(199_000, u64::MAX, LockKind::Shared));
        assert!(!a.conflicts_range(200_000, u64::MAX, LockKind::Exclusive));
    }

    #[test]
    fn shared_runs_share_and_bad_runs_are_named() {
        let mut s = x(0, 10, 10, 1);
        s.kind = LockKind::Shared;
        let a = LockList::new(vec![s]).unwrap();
        assert!(!a.conflicts(&a.clone()));
        assert!(a.conflicts(&LockList::new(vec![x(5, 1, 1, 1)]).unwrap()));
        let e = LockList::new(vec![x(0, 10, 5, 3)]).unwrap_err();
        assert!(e.message.contains("stride 5"), "{e}");
        assert!(LockList::new(vec![]).is_err());
        assert!(LockList::new(vec![x(0, 0, 0, 1)]).is_err());
    }

    #[test]
    fn ranges_compress_into_runs() {
        let l = LockList::from_ranges(
            (0..1000).map(|i| (i * 400, i * 400 + 100)),
            LockKind::Shared,
        )
        .unwrap();
        assert_eq!(l.runs().len(), 1);
        assert_eq!(l.bytes(), 100_000);
        assert_eq!(l.extent(), (0, 999 * 400 + 100));
    }

    fn lock_run() -> impl Strategy<Value = LockRun> {
        (0u64..200, 1u64..12, 0u64..20, 1u64..8, any::<bool>()).prop_map(
            |(start, len, extra, count, excl)| LockRun {
                run: Run {
                    start,
                    len,
                    stride: len + extra,
                    count,
                },
                kind: if excl {
                    LockKind::Exclusive
                } else {
                    LockKind::Shared
                },
            },
        )
    }

    /// The strongest kind each byte is asked for.
    fn bytes(l: &LockList) -> std::collections::BTreeMap<u64, LockKind> {
        let mut m = std::collections::BTreeMap::new();
        for r in l.runs() {
            for (s, e) in r.run.pieces() {
                for b in s..e {
                    let k = m.entry(b).or_insert(r.kind);
                    if r.kind == LockKind::Exclusive {
                        *k = LockKind::Exclusive;
                    }
                }
            }
        }
        m
    }

    proptest! {
        /// Conflict between two requests is exactly "a byte both ask for, not both shared".
        #[test]
        fn conflict_matches_bytes(
            a in proptest::collection::vec(lock_run(), 1..6),
            b in proptest::collection::vec(lock_run(), 1..6),
            (s, l) in (0u64..300, 1u64..40),
        ) {
            let a = LockList::new(a).unwrap();
            let b = LockList::new(b).unwrap();
            let (ba, bb) = (bytes(&a), bytes(&b));
            let expect = ba.iter().any(|(o, k)| bb.get(o).is_some_and(|k2| !k.compatible(*k2)));
            prop_assert_eq!(a.conflicts(&b), expect);
            prop_assert_eq!(b.conflicts(&a), expect);
            for kind in [LockKind::Shared, LockKind::Exclusive] {
                let expect = (s..s + l).any(|o| ba.get(&o).is_some_and(|k| !k.compatible(kind)));
                prop_assert_eq!(a.conflicts_range(s, s + l, kind), expect);
            }
        }
    }
}
