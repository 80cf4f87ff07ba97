//! Strided runs: `count` pieces of `len` bytes, `stride` bytes apart.
//!
//! An N-1 strided checkpoint writes, from each process, pieces of one size at a constant
//! stride. Describing the whole pattern as one run `(start, len, stride, count)` is what makes
//! its index and its attach message O(1) in size instead of O(writes).
//!
//! ```text
//! start=0 len=3 stride=8 count=3:   |xxx.....xxx.....xxx|
//! ```

use serde::{Deserialize, Serialize};

/// Largest file offset Tessera accepts (64 PiB): keeps every offset computation far from
/// overflow and bounds what one request can describe.
pub const MAX_FILE_SIZE: u64 = 1 << 56;

/// The end of `len` bytes at `offset`, or `EFBIG` if they would pass [`MAX_FILE_SIZE`] (as the
/// kernel refuses a write past its largest file size). `what` names the operation.
pub fn end_within_limit(offset: u64, len: u64, what: &str) -> crate::FsResult<u64> {
    match offset.checked_add(len) {
        Some(end) if end <= MAX_FILE_SIZE => Ok(end),
        _ => Err(crate::FsError::new(
            crate::Errno::FBig,
            format!(
                "{what} of {len} bytes at offset {offset} would pass the largest file size Tessera supports ({MAX_FILE_SIZE} bytes, 64 PiB)"
            ),
        )),
    }
}

/// A strided run of logical byte ranges. Pieces are disjoint and ascending: `stride >= len`
/// whenever `count > 1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Run {
    pub start: u64,
    pub len: u64,
    pub stride: u64,
    pub count: u64,
}

impl Run {
    /// A single contiguous range `[start, start + len)`.
    pub fn single(start: u64, len: u64) -> Self {
        Run {
            start,
            len,
            stride: len,
            count: 1,
        }
    }

    /// Whether the run is well formed: non-empty, disjoint pieces, ending within
    /// [`MAX_FILE_SIZE`].
    pub fn is_valid(&self) -> bool {
        self.len > 0
            && self.count > 0
            && (self.count == 1 || self.stride >= self.len)
            && self
                .stride
                .checked_mul(self.count - 1)
                .and_then(|x| x.checked_add(self.start))
                .and_then(|x| x.checked_add(self.len))
                .is_some_and(|end| end <= MAX_FILE_SIZE)
    }

    /// Start of piece `i`.
    pub fn piece_start(&self, i: u64) -> u64 {
        self.start + i * self.stride
    }

    /// End of the last piece.
    pub fn end(&self) -> u64 {
        self.piece_start(self.count - 1) + self.len
    }

    /// Total bytes in the run.
    pub fn bytes(&self) -> u64 {
        self.len * self.count
    }

    /// The pieces as `[start, end)` ranges, ascending.
    pub fn pieces(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        (0..self.count).map(move |i| {
            let s = self.piece_start(i);
            (s, s + self.len)
        })
    }

    /// The part of the run inside `[lo, hi)`, as at most three runs: a clipped first piece,
    /// the whole pieces in between, and a clipped last piece.
    pub fn clip(&self, lo: u64, hi: u64) -> Vec<Run> {
        if lo >= hi || hi <= self.start || lo >= self.end() {
            return Vec::new();
        }
        // First piece whose end is beyond `lo`; last piece whose start is before `hi`.
        let first = if lo < self.start + self.len || self.count == 1 {
            0
        } else {
            (lo - self.start - self.len) / self.stride + 1
        };
        let last = if self.count == 1 {
            0
        } else {
            ((hi - self.start).div_ceil(self.stride) - 1).min(self.count - 1)
        };
        if first > last {
            return Vec::new();
        }
        let mut out = Vec::new();
        let clipped = |i: u64| {
            let s = self.piece_start(i).max(lo);
            let e = (self.piece_start(i) + self.len).min(hi);
            (s < e).then(|| Run::single(s, e - s))
        };
        let whole = |i: u64| self.piece_start(i) >= lo && self.piece_start(i) + self.len <= hi;
        let mut mid_first = first;
        let mut mid_last = last;
        let mut head = None;
        let mut tail = None;
        if !whole(first) {
            head = clipped(first);
            mid_first += 1;
        }
        if last >= mid_first && !whole(last) {
            tail = clipped(last);
            mid_last -= 1;
        }
        out.extend(head);
        if mid_first <= mid_last && mid_last != u64::MAX {
            let count = mid_last - mid_first + 1;
            out.push(Run {
                start: self.piece_start(mid_first),
                len: self.len,
                stride: if count == 1 { self.len } else { self.stride },
                count,
            });
        }
        out.extend(tail);
        out
    }
}

/// Compresses sorted, disjoint, non-adjacent ranges into strided runs (greedy, left to right).
pub fn compress(ranges: impl IntoIterator<Item = (u64, u64)>) -> Vec<Run> {
    let mut out: Vec<Run> = Vec::new();
    let mut cur: Option<Run> = None;
    for (s, e) in ranges {
        let len = e - s;
        cur = Some(match cur {
            None => Run::single(s, len),
            Some(mut r) if r.len == len && r.count == 1 && s >= r.start + r.len => {
                r.stride = s - r.start;
                r.count = 2;
                r
            }
            Some(mut r) if r.len == len && r.count > 1 && s == r.start + r.count * r.stride => {
                r.count += 1;
                r
            }
            Some(r) => {
                out.push(r);
                Run::single(s, len)
            }
        });
    }
    out.extend(cur);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bytes_of(runs: &[Run]) -> Vec<u64> {
        let mut v: Vec<u64> = runs
            .iter()
            .flat_map(|r| r.pieces())
            .flat_map(|(s, e)| s..e)
            .collect();
        v.sort_unstable();
        v
    }

    #[test]
    fn strided_pattern_is_one_run() {
        let ranges: Vec<(u64, u64)> = (0..1000)
            .map(|i| (i * 188_004, i * 188_004 + 47_001))
            .collect();
        let runs = compress(ranges.iter().copied());
        assert_eq!(
            runs,
            vec![Run {
                start: 0,
                len: 47_001,
                stride: 188_004,
                count: 1000
            }]
        );
    }

    #[test]
    fn clip_keeps_stride_and_cuts_edges() {
        let r = Run {
            start: 0,
            len: 3,
            stride: 8,
            count: 4,
        }; // xxx.....xxx.....xxx.....xxx
        assert_eq!(
            r.clip(1, 26),
            vec![
                Run::single(1, 2),
                Run {
                    start: 8,
                    len: 3,
                    stride: 8,
                    count: 2
                },
                Run::single(24, 2)
            ]
        );
        assert_eq!(r.clip(3, 8), vec![]);
    }

    fn arb_run() -> impl Strategy<Value = Run> {
        (0u64..50, 1u64..6, 0u64..6, 1u64..6).prop_map(|(start, len, extra, count)| Run {
            start,
            len,
            stride: len + extra,
            count,
        })
    }

    proptest! {
        #[test]
        fn clip_equals_bytewise_filter(r in arb_run(), lo in 0u64..100, span in 0u64..100) {
            let hi = lo + span;
            let clipped = r.clip(lo, hi);
            for c in &clipped { prop_assert!(c.is_valid()); }
            let want: Vec<u64> = bytes_of(&[r]).into_iter().filter(|b| *b >= lo && *b < hi).collect();
            prop_assert_eq!(bytes_of(&clipped), want);
        }

        #[test]
        fn compress_preserves_bytes(starts in proptest::collection::btree_set(0u64..200, 0..40), len in 1u64..4) {
            // Build disjoint, non-adjacent ranges from a set of candidate starts.
            let mut ranges = Vec::new();
            let mut next_free = 0;
            for s in starts {
                if s >= next_free {
                    ranges.push((s, s + len));
                    next_free = s + len + 1;
                }
            }
            let runs = compress(ranges.iter().copied());
            for r in &runs { prop_assert!(r.is_valid()); }
            let want: Vec<u64> = ranges.iter().flat_map(|(s, e)| *s..*e).collect();
            prop_assert_eq!(bytes_of(&runs), want);
            prop_assert!(runs.len() <= ranges.len());
        }
    }
}
