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

impl Run {
    /// The same bytes in canonical shape: one piece has `stride == len`, and pieces that touch
    /// (`stride == len`) are one contiguous piece.
    pub fn normalized(self) -> Run {
        if self.count == 1 || self.stride == self.len {
            Run::single(self.start, self.len * self.count)
        } else {
            self
        }
    }

    /// The first byte after the run's pieces where a next piece of the same pattern would
    /// start (`None` for a single piece, whose stride is not fixed yet).
    fn next_start(&self) -> Option<u64> {
        (self.count > 1).then(|| self.start + self.count * self.stride)
    }

    /// The space between the pieces, as a run (`None` if the pieces touch or there is one).
    pub fn gaps(&self) -> Option<Run> {
        (self.count > 1 && self.stride > self.len).then(|| Run {
            start: self.start + self.len,
            len: self.stride - self.len,
            stride: self.stride,
            count: self.count - 1,
        })
    }

    /// Whether `self` and `other` have a byte in common.
    pub fn overlaps(&self, other: &Run) -> bool {
        self.start < other.end()
            && other.start < self.end()
            && self.minus(other).iter().map(Run::bytes).sum::<u64>() < self.bytes()
    }

    /// The bytes of `self` that are not bytes of `r`, as disjoint runs in ascending order of
    /// start. Runs of one stride (interleaved writers of one pattern) and single ranges cost
    /// O(1) runs; runs of different strides cost O(the pieces of the one with fewer pieces
    /// where they overlap), which is what the difference is made of.
    pub fn minus(&self, r: &Run) -> Vec<Run> {
        if self.end() <= r.start || r.end() <= self.start {
            return vec![*self];
        }
        if self.count > 1 && r.count > 1 && self.stride == r.stride {
            return coalesce(self.minus_same_stride(r));
        }
        let mut out = self.clip(self.start, r.start);
        for part in self.clip(r.start, r.end()) {
            out.extend(part.minus_within(r));
        }
        out.extend(self.clip(r.end(), self.end()));
        coalesce(out)
    }

    /// `self \ r`, for a `self` that lies within `r`'s extent.
    fn minus_within(&self, r: &Run) -> Vec<Run> {
        let Some(gaps) = r.gaps() else {
            return Vec::new(); // r covers its whole extent
        };
        if self.count == 1 {
            return gaps.clip(self.start, self.end());
        }
        if self.stride == r.stride {
            return self.minus_same_stride(r);
        }
        let r_pieces: u64 = r.clip(self.start, self.end()).iter().map(|c| c.count).sum();
        if self.count <= r_pieces {
            self.pieces().flat_map(|(s, e)| gaps.clip(s, e)).collect()
        } else {
            // The parts of self between consecutive pieces of r.
            let mut out = Vec::new();
            let mut lo = self.start;
            for c in r.clip(self.start, self.end()) {
                for (s, e) in c.pieces() {
                    out.extend(self.clip(lo, s));
                    lo = e;
                }
            }
            out.extend(self.clip(lo, self.end()));
            out
        }
    }

    /// `self \ r` for two runs of one stride (interleaved writers of one pattern). A piece of
    /// self meets at most two pieces of r (the one at or before it and the next), and which of
    /// those exist changes only where self passes r's ends. So self's pieces fall into at most
    /// five stretches, every piece of a stretch loses the same bytes, and neighbouring
    /// stretches that lose the same bytes join: the difference is at most seven runs.
    fn minus_same_stride(&self, r: &Run) -> Vec<Run> {
        let stride = i128::from(self.stride);
        // Index in r of the piece at or before self's first piece (negative before r).
        let j0 = (i128::from(self.start) - i128::from(r.start)).div_euclid(stride);
        let r_count = i128::from(r.count);
        let mut cuts = vec![0];
        for j in [-1, 0, r_count - 1, r_count] {
            // Clamped to self's pieces, so the value fits.
            cuts.push((j - j0).clamp(0, i128::from(self.count)) as u64);
        }
        cuts.push(self.count);
        let mut stretches: Vec<Stretch> = Vec::new();
        for w in cuts.windows(2).filter(|w| w[0] < w[1]) {
            let keep = self.piece_keep(w[0], r);
            match stretches.last_mut() {
                Some(last) if last.keep == keep => last.count += w[1] - w[0],
                _ => stretches.push(Stretch {
                    first: w[0],
                    count: w[1] - w[0],
                    keep,
                }),
            }
        }
        stretches
            .iter()
            .flat_map(|s| self.stretch_runs(s))
            .collect()
    }

    /// What piece `i` keeps once the pieces of `r` are taken, as offsets from its start.
    fn piece_keep(&self, i: u64, r: &Run) -> Vec<(u64, u64)> {
        let (s, e) = (self.piece_start(i), self.piece_start(i) + self.len);
        let mut keep = Vec::new();
        let mut lo = s;
        for c in r.clip(s, e) {
            for (a, b) in c.pieces() {
                if lo < a {
                    keep.push((lo - s, a - s));
                }
                lo = b;
            }
        }
        if lo < e {
            keep.push((lo - s, e - s));
        }
        keep
    }

    /// The runs a stretch of self's pieces leaves.
    fn stretch_runs<'a>(&'a self, stretch: &'a Stretch) -> impl Iterator<Item = Run> + 'a {
        stretch.keep.iter().map(move |&(u0, u1)| {
            Run {
                start: self.piece_start(stretch.first) + u0,
                len: u1 - u0,
                stride: self.stride,
                count: stretch.count,
            }
            .normalized()
        })
    }

    /// One run holding the bytes of `self` and of `next` (which starts after `self` ends), if
    /// they continue one pattern: touching single pieces, or a run and a piece or run that
    /// continues its stride.
    pub fn merged(&self, next: &Run) -> Option<Run> {
        if next.start < self.end() {
            return None;
        }
        let (a, b) = (*self, *next);
        if a.count == 1 && b.count == 1 && a.end() == b.start {
            return Some(Run::single(a.start, a.len + b.len));
        }
        if a.len != b.len {
            return None;
        }
        // Two separate single pieces are not joined into a run of two: a pattern arrives as
        // a run, and pairs of random writes would each make a stride of their own.
        let merged = match (a.next_start(), b.count) {
            (None, n) if n > 1 && b.start - a.start == b.stride => Run {
                count: b.count + 1,
                ..b
            }
            .with_start(a.start),
            (Some(next), n) if next == b.start && (n == 1 || b.stride == a.stride) => Run {
                count: a.count + n,
                ..a
            },
            _ => return None,
        };
        Some(merged.normalized())
    }

    fn with_start(self, start: u64) -> Run {
        Run { start, ..self }
    }
}

/// Consecutive pieces of a run that keep the same bytes in a difference (see
/// [`Run::minus`]): `count` pieces from piece `first`, each keeping the `[from, to)` offsets.
struct Stretch {
    first: u64,
    count: u64,
    keep: Vec<(u64, u64)>,
}

/// Sorts runs by start and joins neighbours that continue one pattern (see [`Run::merged`]).
pub fn coalesce(mut runs: Vec<Run>) -> Vec<Run> {
    runs.sort_unstable_by_key(|r| r.start);
    let mut out: Vec<Run> = Vec::with_capacity(runs.len());
    for r in runs {
        match out.last().and_then(|last| last.merged(&r)) {
            Some(m) => *out.last_mut().expect("checked") = m,
            None => out.push(r),
        }
    }
    out
}

/// Compresses sorted, disjoint, non-adjacent ranges into strided runs (greedy, left to right).
/// Two pieces stay two single ranges: a run of two is no smaller, and random writes paired
/// into runs would each bring a stride of their own to the ownership maps.
pub fn compress(ranges: impl IntoIterator<Item = (u64, u64)>) -> Vec<Run> {
    let mut out: Vec<Run> = Vec::new();
    let push = |out: &mut Vec<Run>, r: Run| {
        if r.count == 2 {
            out.push(Run::single(r.start, r.len));
            out.push(Run::single(r.start + r.stride, r.len));
        } else {
            out.push(r);
        }
    };
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
                push(&mut out, r);
                Run::single(s, len)
            }
        });
    }
    if let Some(r) = cur {
        push(&mut out, r);
    }
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
    fn interleaved_writers_subtract_in_constant_runs() {
        // Writer 1 of a 4-writer N-1 pattern, then writer 1 rewrites half of each piece.
        let w1 = Run {
            start: 16,
            len: 16,
            stride: 64,
            count: 1000,
        };
        let half = Run {
            start: 24,
            len: 8,
            stride: 64,
            count: 1000,
        };
        assert_eq!(
            w1.minus(&half),
            vec![Run {
                start: 16,
                len: 8,
                stride: 64,
                count: 1000
            }]
        );
        let w2 = Run { start: 32, ..w1 };
        assert_eq!(w1.minus(&w2), vec![w1]);
        assert!(!w1.overlaps(&w2));
        // A single range in the middle cuts the run in two.
        assert_eq!(w1.minus(&Run::single(640, 6400)).len(), 2);
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

    /// Two runs, half of the time of one stride (the interleaved-writers case).
    fn arb_pair() -> impl Strategy<Value = (Run, Run)> {
        (arb_run(), arb_run(), any::<bool>()).prop_map(|(a, mut b, same)| {
            if same && a.count > 1 && b.len <= a.stride {
                b.stride = a.stride;
            }
            (a, b)
        })
    }

    fn disjoint_bytes(runs: &[Run]) -> bool {
        let b = bytes_of(runs);
        b.windows(2).all(|w| w[0] < w[1])
    }

    proptest! {
        #[test]
        fn minus_equals_bytewise_difference((e, r) in arb_pair()) {
            let left = e.minus(&r);
            for x in &left { prop_assert!(x.is_valid(), "{:?}", x); }
            prop_assert!(disjoint_bytes(&left));
            prop_assert!(left.windows(2).all(|w| w[0].start < w[1].start));
            let taken = bytes_of(&[r]);
            let want: Vec<u64> = bytes_of(&[e]).into_iter().filter(|b| !taken.contains(b)).collect();
            prop_assert_eq!(bytes_of(&left), want.clone());
            prop_assert_eq!(e.overlaps(&r), want.len() as u64 != e.bytes());
            if e.stride == r.stride || e.count == 1 || r.count == 1 {
                prop_assert!(left.len() <= 7, "{} runs for {:?} - {:?}", left.len(), e, r);
            }
        }

        #[test]
        fn merged_holds_both((a, b) in arb_pair()) {
            if let Some(m) = a.merged(&b) {
                prop_assert!(m.is_valid());
                prop_assert_eq!(m, m.normalized());
                let mut want = bytes_of(&[a, b]);
                want.sort_unstable();
                prop_assert_eq!(bytes_of(&[m]), want);
            }
        }

        #[test]
        fn coalesce_keeps_bytes(starts in proptest::collection::btree_set(0u64..300, 0..30), len in 1u64..4, stride in 4u64..9) {
            // Pieces of one pattern with holes, given as single pieces and short runs.
            let runs: Vec<Run> = starts.iter().map(|s| Run { start: s * stride, len, stride, count: 1 + s % 3 }.normalized()).collect();
            let mut runs: Vec<Run> = runs.into_iter().fold(Vec::<Run>::new(), |mut acc, r| {
                if acc.last().is_none_or(|l| l.end() <= r.start) { acc.push(r); }
                acc
            });
            runs.reverse();
            let before = bytes_of(&runs);
            let joined = coalesce(runs.clone());
            prop_assert_eq!(bytes_of(&joined), before);
            prop_assert!(joined.len() <= runs.len());
        }

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
            prop_assert!(runs.iter().all(|r| r.count != 2));
        }
    }
}
