//! Copying hyperslabs of a catalogue variable: which byte runs of a chunk (a hyperslab stored
//! in C order) land where in a reader's buffer (another hyperslab, also in C order). A reader
//! of a region asks every chunk of a version for its runs and reads each straight into place,
//! so a region read costs one read per run and no staging copy. Trailing dimensions that both
//! hyperslabs cover whole merge into one run, so a chunk of whole rows is a single read.
//! Nothing here does I/O.

/// One contiguous copy: `len` bytes at `chunk_at` bytes into the chunk's bytes go to `buf_at`
/// bytes into the reader's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Run {
    pub chunk_at: u64,
    pub buf_at: u64,
    pub len: u64,
}

/// A hyperslab: where it starts and how many elements it spans, per dimension.
#[derive(Clone, Copy, Debug)]
pub struct Slab<'a> {
    pub offsets: &'a [u64],
    pub counts: &'a [u64],
}

impl Slab<'_> {
    /// Its elements (saturating: callers check sizes first).
    pub fn elements(&self) -> u64 {
        self.counts.iter().fold(1u64, |a, n| a.saturating_mul(*n))
    }
}

/// Calls `each` with the runs that copy the intersection of `chunk` and `want` from the chunk's
/// bytes into a buffer holding `want`, in ascending order of both positions; stops at the first
/// error. Returns the elements of the intersection (0: they do not meet, and `each` is not
/// called). Both slabs must have the same number of dimensions, at least one, and sizes that
/// fit in 64 bits, as the catalogue checks of every chunk.
pub fn for_each_run<E>(
    chunk: Slab<'_>,
    want: Slab<'_>,
    elem_size: u64,
    mut each: impl FnMut(Run) -> Result<(), E>,
) -> Result<u64, E> {
    let dims = chunk.offsets.len();
    debug_assert!(
        dims > 0
            && [chunk.counts.len(), want.offsets.len(), want.counts.len()]
                .iter()
                .all(|n| *n == dims)
    );
    let mut lo = vec![0u64; dims];
    let mut hi = vec![0u64; dims];
    for d in 0..dims {
        lo[d] = chunk.offsets[d].max(want.offsets[d]);
        hi[d] = (chunk.offsets[d] + chunk.counts[d]).min(want.offsets[d] + want.counts[d]);
        if lo[d] >= hi[d] {
            return Ok(0);
        }
    }
    // The innermost dimensions that both slabs hold whole (beyond the first of them) join
    // the run: `first` is the outermost dimension inside one run.
    let mut first = dims - 1;
    while first > 0 {
        let whole = |s: &Slab<'_>| {
            lo[first] == s.offsets[first] && hi[first] == s.offsets[first] + s.counts[first]
        };
        if !(whole(&chunk) && whole(&want)) {
            break;
        }
        first -= 1;
    }
    let run_elems: u64 = (first..dims).map(|d| hi[d] - lo[d]).product();
    // Strides in elements of each slab, C order.
    let strides = |counts: &[u64]| -> Vec<u64> {
        let mut s = vec![1u64; dims];
        for d in (0..dims - 1).rev() {
            s[d] = s[d + 1] * counts[d + 1];
        }
        s
    };
    let (cs, ws) = (strides(chunk.counts), strides(want.counts));
    let at = |index: &[u64], s: &Slab<'_>, strides: &[u64]| -> u64 {
        (0..dims)
            .map(|d| (index[d] - s.offsets[d]) * strides[d])
            .sum::<u64>()
    };
    // An odometer over the dimensions outside the run.
    let mut index = lo.clone();
    loop {
        each(Run {
            chunk_at: at(&index, &chunk, &cs) * elem_size,
            buf_at: at(&index, &want, &ws) * elem_size,
            len: run_elems * elem_size,
        })?;
        let mut d = first;
        loop {
            if d == 0 {
                let total = (0..dims).map(|d| hi[d] - lo[d]).product();
                return Ok(total);
            }
            d -= 1;
            index[d] += 1;
            if index[d] < hi[d] {
                break;
            }
            index[d] = lo[d];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::convert::Infallible;

    fn runs(chunk: Slab<'_>, want: Slab<'_>, elem: u64) -> (Vec<Run>, u64) {
        let mut v = Vec::new();
        let n = for_each_run::<Infallible>(chunk, want, elem, |r| {
            v.push(r);
            Ok(())
        })
        .unwrap();
        (v, n)
    }

    /// The model: element by element, the chunk byte each buffer byte comes from.
    fn model(chunk: Slab<'_>, want: Slab<'_>, elem: u64) -> Vec<(u64, u64)> {
        let dims = chunk.offsets.len();
        let mut out = Vec::new();
        let total = want.elements();
        for linear in 0..total {
            let mut rest = linear;
            let mut idx = vec![0u64; dims];
            for d in (0..dims).rev() {
                idx[d] = want.offsets[d] + rest % want.counts[d];
                rest /= want.counts[d];
            }
            let inside = (0..dims)
                .all(|d| idx[d] >= chunk.offsets[d] && idx[d] < chunk.offsets[d] + chunk.counts[d]);
            if !inside {
                continue;
            }
            let c = (0..dims).fold(0u64, |c, d| {
                c * chunk.counts[d] + (idx[d] - chunk.offsets[d])
            });
            for b in 0..elem {
                out.push((c * elem + b, linear * elem + b));
            }
        }
        out
    }

    #[test]
    fn whole_rows_are_one_run() {
        let (r, n) = runs(
            Slab {
                offsets: &[4, 0],
                counts: &[4, 8],
            },
            Slab {
                offsets: &[0, 0],
                counts: &[16, 8],
            },
            8,
        );
        assert_eq!(n, 32);
        assert_eq!(
            r,
            vec![Run {
                chunk_at: 0,
                buf_at: 4 * 8 * 8,
                len: 32 * 8
            }]
        );
    }

    #[test]
    fn a_column_block_is_a_run_per_row() {
        let (r, _) = runs(
            Slab {
                offsets: &[0, 2],
                counts: &[3, 2],
            },
            Slab {
                offsets: &[0, 0],
                counts: &[3, 4],
            },
            1,
        );
        let want = [(0, 2), (2, 6), (4, 10)].map(|(c, b)| Run {
            chunk_at: c,
            buf_at: b,
            len: 2,
        });
        assert_eq!(r, want);
    }

    #[test]
    fn disjoint_slabs_give_nothing() {
        let (r, n) = runs(
            Slab {
                offsets: &[0, 0],
                counts: &[2, 2],
            },
            Slab {
                offsets: &[2, 0],
                counts: &[2, 2],
            },
            4,
        );
        assert!(r.is_empty());
        assert_eq!(n, 0);
    }

    fn slab_pair() -> impl Strategy<Value = (Vec<u64>, Vec<u64>, Vec<u64>, Vec<u64>, u64)> {
        (1usize..=4).prop_flat_map(|dims| {
            (
                proptest::collection::vec(0u64..5, dims),
                proptest::collection::vec(1u64..5, dims),
                proptest::collection::vec(0u64..5, dims),
                proptest::collection::vec(1u64..5, dims),
                1u64..=3,
            )
        })
    }

    proptest! {
        #[test]
        fn runs_copy_exactly_what_the_model_copies((co, cc, wo, wc, elem) in slab_pair()) {
            let chunk = Slab { offsets: &co, counts: &cc };
            let want = Slab { offsets: &wo, counts: &wc };
            let (r, n) = runs(chunk, want, elem);
            let mut got: Vec<(u64, u64)> = r
                .iter()
                .flat_map(|r| (0..r.len).map(move |i| (r.chunk_at + i, r.buf_at + i)))
                .collect();
            let want_pairs = model(chunk, want, elem);
            prop_assert_eq!(n * elem, want_pairs.len() as u64);
            // Ascending in both positions, as promised.
            prop_assert!(r.windows(2).all(|w| w[0].chunk_at < w[1].chunk_at && w[0].buf_at < w[1].buf_at));
            got.sort_unstable();
            let mut model_sorted = want_pairs;
            model_sorted.sort_unstable();
            prop_assert_eq!(got, model_sorted);
        }
    }
}
