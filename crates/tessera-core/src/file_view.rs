//! MPI-IO file views, flattened: which file bytes an access touches, as strided runs.
//!
//! A view is a displacement, an elementary type (etype) and a filetype tiled from the
//! displacement on; the data of an access at view offset `o` (in etypes) fills the filetype's
//! blocks in order, tile after tile. MPI requires a filetype's blocks to have non-negative,
//! non-decreasing displacements, so the blocks' order is the data's order. The bytes an access
//! touches are the lock an atomic access needs (the list locks of Aarestad et al.): a head of part of one
//! tile, each block across the whole tiles in between as one strided run, and a tail. So a
//! vector filetype accessed over a million tiles is a handful of runs, not a million ranges.

use crate::run::{Run, coalesce, compress};
use crate::{Errno, FsError, FsResult};

/// A flattened view: `blocks` are `(offset, len)` within one filetype, ascending and not
/// overlapping; the filetype repeats every `extent` bytes from `disp`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileView {
    disp: u64,
    etype: u64,
    blocks: Vec<(u64, u64)>,
    extent: u64,
    /// Data bytes per filetype (the sum of the blocks).
    size: u64,
}

impl FileView {
    /// Checks and normalises a view (touching blocks are joined, empty ones dropped).
    pub fn new(disp: u64, etype: u64, blocks: Vec<(u64, u64)>, extent: u64) -> FsResult<Self> {
        let bad = |m: String| Err(FsError::new(Errno::Inval, m));
        if etype == 0 {
            return bad("file view: the etype has size 0".into());
        }
        let mut joined: Vec<(u64, u64)> = Vec::with_capacity(blocks.len());
        for (off, len) in blocks.into_iter().filter(|b| b.1 > 0) {
            match joined.last_mut() {
                Some(last) if off < last.0 + last.1 => {
                    return bad(format!(
                        "file view: filetype block at {off} starts before the previous one ends ({}); MPI requires non-decreasing, non-overlapping displacements",
                        last.0 + last.1
                    ));
                }
                Some(last) if off == last.0 + last.1 => last.1 += len,
                _ => joined.push((off, len)),
            }
        }
        let size: u64 = joined.iter().map(|b| b.1).sum();
        if size == 0 {
            return bad("file view: the filetype holds no data".into());
        }
        let end = joined.last().map_or(0, |b| b.0 + b.1);
        if extent < end {
            return bad(format!(
                "file view: filetype extent {extent} is smaller than the end of its data ({end})"
            ));
        }
        Ok(FileView {
            disp,
            etype,
            blocks: joined,
            extent,
            size,
        })
    }

    /// The plain view (no `MPI_File_set_view`): bytes from offset 0.
    pub fn bytes() -> Self {
        FileView::new(0, 1, vec![(0, 1)], 1).expect("valid")
    }

    pub fn etype(&self) -> u64 {
        self.etype
    }

    /// The file bytes of an access of `nbytes` data bytes at view offset `offset` (etypes), as
    /// runs sorted by start.
    pub fn access_runs(&self, offset: u64, nbytes: u64) -> FsResult<Vec<Run>> {
        let overflow = || {
            FsError::new(
                Errno::FBig,
                format!(
                    "an access of {nbytes} bytes at view offset {offset} passes the largest file offset"
                ),
            )
        };
        let mut out = Vec::new();
        if nbytes == 0 {
            return Ok(out);
        }
        let pos = offset.checked_mul(self.etype).ok_or_else(overflow)?;
        let end = pos.checked_add(nbytes).ok_or_else(overflow)?;
        let tile_at = |t: u64| -> FsResult<u64> {
            t.checked_mul(self.extent)
                .and_then(|x| x.checked_add(self.disp))
                .ok_or_else(overflow)
        };
        let (first, last) = (pos / self.size, (end - 1) / self.size);
        // Data bytes [lo, hi) of tile `t`, which lies at `base`.
        let mut partial = |t: u64, lo: u64, hi: u64| -> FsResult<()> {
            let base = tile_at(t)?;
            let mut data = 0;
            for &(off, len) in &self.blocks {
                let (s, e) = (data.max(lo), (data + len).min(hi));
                if s < e {
                    out.push(Run::single(base + off + (s - data), e - s));
                }
                data += len;
            }
            Ok(())
        };
        let head_lo = pos - first * self.size;
        if first == last {
            partial(first, head_lo, end - first * self.size)?;
        } else {
            partial(first, head_lo, self.size)?;
            partial(last, 0, end - last * self.size)?;
            // Whole tiles in between: each block is one strided run across them.
            if last > first + 1 {
                let count = last - first - 1;
                let base = tile_at(first + 1)?;
                tile_at(last)?;
                for &(off, len) in &self.blocks {
                    out.push(Run {
                        start: base + off,
                        len,
                        stride: self.extent,
                        count,
                    });
                }
            }
        }
        // The pieces of partial tiles, joined where they touch and compressed into strided
        // runs (the blocks of one tile are often one pattern: rows of a subarray, a vector).
        let (mut singles, mut runs): (Vec<Run>, Vec<Run>) =
            out.into_iter().partition(|r| r.count == 1);
        singles.sort_unstable_by_key(|r| r.start);
        let mut ranges: Vec<(u64, u64)> = Vec::with_capacity(singles.len());
        for r in singles {
            match ranges.last_mut() {
                Some(last) if last.1 == r.start => last.1 = r.end(),
                _ => ranges.push((r.start, r.end())),
            }
        }
        runs.extend(compress(ranges));
        let runs: Vec<Run> = runs.into_iter().map(Run::normalized).collect();
        if runs.iter().any(|r| !r.is_valid()) {
            return Err(overflow());
        }
        Ok(coalesce(runs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[test]
    fn a_vector_view_over_many_tiles_is_a_few_runs() {
        // Rank 1 of 4: 100-byte blocks of a 400-byte tile, after a 64-byte header.
        let v = FileView::new(64, 4, vec![(100, 100)], 400).unwrap();
        let runs = v.access_runs(0, 100 * 1_000_000).unwrap();
        assert_eq!(
            runs,
            vec![Run {
                start: 164,
                len: 100,
                stride: 400,
                count: 1_000_000
            }]
        );
        // One tile of a vector filetype: its blocks are one run.
        let v16 =
            FileView::new(0, 4, (0..16).map(|i| (i * 1024, 256)).collect(), 16 * 1024).unwrap();
        assert_eq!(
            v16.access_runs(0, 16 * 256).unwrap(),
            vec![Run {
                start: 0,
                len: 256,
                stride: 1024,
                count: 16
            }]
        );
        // Starting mid-block (etype 4: view offset 10 is data byte 40).
        let runs = v.access_runs(10, 100).unwrap();
        assert_eq!(runs, vec![Run::single(204, 60), Run::single(564, 40)]);
        assert!(FileView::new(0, 1, vec![(10, 5), (12, 5)], 20).is_err());
        assert!(FileView::new(0, 1, vec![(0, 30)], 20).is_err());
        assert!(v.access_runs(u64::MAX / 2, 10).is_err());
    }

    fn view() -> impl Strategy<Value = FileView> {
        (
            0u64..50,
            1u64..5,
            proptest::collection::vec((0u64..6, 1u64..6), 1..5),
            0u64..10,
        )
            .prop_map(|(disp, etype, gaps, tail)| {
                let mut at = 0;
                let blocks: Vec<(u64, u64)> = gaps
                    .into_iter()
                    .map(|(gap, len)| {
                        let b = (at + gap, len);
                        at += gap + len;
                        b
                    })
                    .collect();
                FileView::new(disp, etype, blocks, at + tail).unwrap()
            })
    }

    proptest! {
        /// The runs hold exactly the file bytes the data bytes map to, one by one.
        #[test]
        fn runs_match_the_bytes_one_by_one(v in view(), offset in 0u64..40, n in 0u64..200) {
            let mut expect = BTreeSet::new();
            let file_byte = |d: u64| {
                let (t, mut q) = (d / v.size, d % v.size);
                for &(off, len) in &v.blocks {
                    if q < len {
                        return v.disp + t * v.extent + off + q;
                    }
                    q -= len;
                }
                unreachable!()
            };
            for d in offset * v.etype..offset * v.etype + n {
                expect.insert(file_byte(d));
            }
            let runs = v.access_runs(offset, n).unwrap();
            let mut got = BTreeSet::new();
            for r in &runs {
                prop_assert!(r.is_valid());
                for (s, e) in r.pieces() {
                    for b in s..e {
                        prop_assert!(got.insert(b), "byte {} twice", b);
                    }
                }
            }
            prop_assert_eq!(got, expect);
            // O(blocks) runs, whatever the number of tiles.
            prop_assert!(runs.len() <= 3 * v.blocks.len() + 1);
        }
    }
}
