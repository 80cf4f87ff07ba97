//! Where things live: which daemon holds a path's namespace entry, a file's inode, or a
//! (file, stripe) ownership shard.
//!
//! All placement is a pure function of names and the daemon count, so every client and daemon
//! computes the same answer without asking anyone. A file's logical space is cut into stripes
//! (default 64 MiB) and each stripe is placed independently, so one shared checkpoint spreads its
//! ownership traffic over all daemons instead of piling onto one server (the bottleneck of the
//! single global server in BaseFS).

use crate::error::{Errno, FsError, FsResult};
use crate::run::Run;
use std::collections::BTreeMap;

/// Default stripe size: large enough that a typical per-process block stays in one stripe,
/// small enough that a multi-GiB shared file spreads over every daemon.
pub const DEFAULT_STRIPE_SIZE: u64 = 64 << 20;

/// Inode numbers carry the node that created them in the top 16 bits, so the inode shard is
/// known from the number alone (and stays put when the file is renamed).
pub const INO_NODE_SHIFT: u32 = 48;

/// Maps a 64-bit hash uniformly onto `0..n` (multiply-shift, no modulo bias for small `n`).
fn bucket(hash: u64, n: u32) -> u32 {
    ((u128::from(hash) * u128::from(n)) >> 64) as u32
}

/// A well-mixing 64-bit finaliser (SplitMix64), so nearby stripe numbers land far apart.
pub fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Daemon holding the namespace entry (directory entry) of `path`.
pub fn path_shard(path: &str, nodes: u32) -> u32 {
    let h = u64::from(crc32c::crc32c(path.as_bytes()));
    bucket(mix64(h), nodes)
}

/// Daemon holding the catalogue entries of the variable `name`. Salted, so a variable and a
/// path of the same spelling need not share a daemon.
pub fn variable_shard(name: &str, nodes: u32) -> u32 {
    let h = u64::from(crc32c::crc32c(name.as_bytes()));
    bucket(mix64(h ^ 0x7661_7269_6162_6c65), nodes)
}

/// Daemon holding the ownership map of stripe `stripe` of file `ino`.
pub fn stripe_shard(ino: u64, stripe: u64, nodes: u32) -> u32 {
    bucket(mix64(ino ^ mix64(stripe)), nodes)
}

/// Builds an inode number from the creating node and its local counter.
pub fn make_ino(node: u32, counter: u64) -> u64 {
    (u64::from(node) << INO_NODE_SHIFT) | (counter & ((1 << INO_NODE_SHIFT) - 1))
}

/// Daemon holding the attributes (size, times, mode) of inode `ino`.
pub fn ino_shard(ino: u64) -> u32 {
    (ino >> INO_NODE_SHIFT) as u32
}

/// Most pieces one attach request may describe (the client library splits larger ones).
pub const MAX_PIECES_PER_ATTACH: u64 = 1 << 20;
/// Most stripes one attach request may touch (the client library splits larger ones).
pub const MAX_STRIPES_PER_ATTACH: usize = 1 << 16;

/// Groups attach runs by the stripe they fall in, each run clipped to its stripe.
///
/// The work is bounded by the pieces and stripes actually touched, never by the span of a run:
/// a run whose stride jumps over many stripes is walked piece by piece, a dense run stripe by
/// stripe. Requests beyond [`MAX_PIECES_PER_ATTACH`] or [`MAX_STRIPES_PER_ATTACH`] are refused.
pub fn runs_by_stripe(runs: &[Run], stripe_size: u64) -> FsResult<BTreeMap<u64, Vec<Run>>> {
    let too_big = |what: String| Err(FsError::new(Errno::FBig, what));
    let pieces: u64 = runs.iter().map(|r| r.count).fold(0u64, u64::saturating_add);
    if pieces > MAX_PIECES_PER_ATTACH {
        return too_big(format!(
            "attach of {pieces} pieces exceeds the limit of {MAX_PIECES_PER_ATTACH} per request"
        ));
    }
    let mut out: BTreeMap<u64, Vec<Run>> = BTreeMap::new();
    for r in runs {
        if !r.is_valid() {
            return Err(FsError::new(
                Errno::Inval,
                format!("attach of malformed run {r:?}"),
            ));
        }
        let spanned = (r.end() - 1) / stripe_size - r.start / stripe_size + 1;
        if spanned <= 2 * r.count + 2 {
            if out.len() as u64 + spanned > MAX_STRIPES_PER_ATTACH as u64 {
                return too_big(format!(
                    "attach touches more than {MAX_STRIPES_PER_ATTACH} stripes"
                ));
            }
            for stripe in r.start / stripe_size..=(r.end() - 1) / stripe_size {
                let part = r.clip(
                    stripe * stripe_size,
                    (stripe + 1).saturating_mul(stripe_size),
                );
                if !part.is_empty() {
                    out.entry(stripe).or_default().extend(part);
                }
            }
        } else {
            for (s, e) in r.pieces() {
                for (stripe, a, b) in split_by_stripe(s, e, stripe_size) {
                    out.entry(stripe).or_default().push(Run::single(a, b - a));
                    if out.len() > MAX_STRIPES_PER_ATTACH {
                        return too_big(format!(
                            "attach touches more than {MAX_STRIPES_PER_ATTACH} stripes"
                        ));
                    }
                }
            }
        }
    }
    Ok(out)
}

/// Upper bound of the stripes [`runs_by_stripe`] touches for one run.
fn stripe_estimate(r: &Run, stripe_size: u64) -> u64 {
    let spanned = (r.end() - 1) / stripe_size - r.start / stripe_size + 1;
    if spanned <= 2 * r.count + 2 {
        spanned
    } else {
        r.count.saturating_mul(r.len / stripe_size + 2)
    }
}

/// Splits runs into attach requests that each stay within the daemon's limits (pieces,
/// stripes) and within `max_runs` runs (the frame budget). Bytes are preserved; large runs
/// are cut into smaller ones.
pub fn attach_batches(runs: Vec<Run>, stripe_size: u64, max_runs: usize) -> Vec<Vec<Run>> {
    let piece_cap = MAX_PIECES_PER_ATTACH / 2;
    let stripe_cap = (MAX_STRIPES_PER_ATTACH / 2) as u64;
    // First make every run small enough to fit a request on its own: halve runs with too
    // many pieces or stripes, cut a single oversized piece by bytes.
    let mut small = Vec::with_capacity(runs.len());
    let mut todo = runs;
    while let Some(r) = todo.pop() {
        if r.count <= piece_cap && stripe_estimate(&r, stripe_size) <= stripe_cap {
            small.push(r);
        } else if r.count > 1 {
            let half = r.count / 2;
            todo.push(Run { count: half, ..r });
            todo.push(Run {
                start: r.start + half * r.stride,
                count: r.count - half,
                ..r
            });
        } else {
            let chunk = (stripe_cap / 2).max(1) * stripe_size;
            let mut at = r.start;
            while at < r.end() {
                let len = chunk.min(r.end() - at);
                small.push(Run::single(at, len));
                at += len;
            }
        }
    }
    let mut out: Vec<Vec<Run>> = Vec::new();
    let (mut pieces, mut stripes) = (0u64, 0u64);
    for r in small {
        let est = stripe_estimate(&r, stripe_size);
        let full = out.last().is_none_or(|b| {
            b.len() >= max_runs.max(1)
                || pieces + r.count > piece_cap * 2
                || stripes + est > stripe_cap * 2
        });
        if full {
            out.push(Vec::new());
            (pieces, stripes) = (0, 0);
        }
        pieces += r.count;
        stripes += est;
        out.last_mut().expect("pushed above").push(r);
    }
    out
}

/// Cuts `[start, end)` at stripe boundaries: yields (stripe, sub_start, sub_end).
pub fn split_by_stripe(
    start: u64,
    end: u64,
    stripe_size: u64,
) -> impl Iterator<Item = (u64, u64, u64)> {
    let mut at = start;
    std::iter::from_fn(move || {
        if at >= end {
            return None;
        }
        let stripe = at / stripe_size;
        let stripe_end = (stripe + 1).saturating_mul(stripe_size).min(end);
        let item = (stripe, at, stripe_end);
        at = stripe_end;
        Some(item)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stripes_cut_at_boundaries() {
        let v: Vec<_> = split_by_stripe(5, 25, 10).collect();
        assert_eq!(v, vec![(0, 5, 10), (1, 10, 20), (2, 20, 25)]);
        assert_eq!(split_by_stripe(7, 7, 10).count(), 0);
    }

    #[test]
    fn stripes_of_one_file_spread_over_all_daemons() {
        let mut hits = [0u32; 3];
        for stripe in 0..300 {
            hits[stripe_shard(42, stripe, 3) as usize] += 1;
        }
        assert!(hits.iter().all(|h| *h > 60), "uneven spread {hits:?}");
    }

    #[test]
    fn paths_spread_and_are_stable() {
        let mut hits = [0u32; 4];
        for i in 0..400 {
            hits[path_shard(&format!("/dir/file{i}"), 4) as usize] += 1;
        }
        assert!(hits.iter().all(|h| *h > 60), "uneven spread {hits:?}");
        assert_eq!(path_shard("/a", 4), path_shard("/a", 4));
    }

    #[test]
    fn sparse_and_huge_runs_cost_what_they_touch() {
        // Pieces far apart: walked piece by piece.
        let sparse = Run {
            start: 0,
            len: 1,
            stride: 1 << 40,
            count: 3,
        };
        let m = runs_by_stripe(&[sparse], 1 << 26).unwrap();
        assert_eq!(m.len(), 3);
        // A single piece over too many stripes, or too many pieces: refused, quickly.
        assert_eq!(
            runs_by_stripe(&[Run::single(0, 1 << 55)], 1 << 26)
                .unwrap_err()
                .errno,
            Errno::FBig
        );
        let dense = Run {
            start: 0,
            len: 1,
            stride: 2,
            count: 1 << 25,
        };
        assert_eq!(
            runs_by_stripe(&[dense], 1 << 26).unwrap_err().errno,
            Errno::FBig
        );
        let bad = Run {
            start: 0,
            len: 0,
            stride: 0,
            count: 1,
        };
        assert_eq!(
            runs_by_stripe(&[bad], 1 << 26).unwrap_err().errno,
            Errno::Inval
        );
    }

    #[test]
    fn attach_batches_fit_the_daemon_limits() {
        let ss = 1 << 26;
        let runs = vec![
            Run {
                start: 0,
                len: 8,
                stride: 16,
                count: 3 << 20,
            },
            Run::single(1 << 50, 1 << 44),
            Run {
                start: 1 << 52,
                len: 1,
                stride: 1 << 30,
                count: 70_000,
            },
        ];
        let want: u64 = runs.iter().map(Run::bytes).sum();
        let batches = attach_batches(runs, ss, 1000);
        let mut got = 0;
        for b in &batches {
            assert!(b.len() <= 1000);
            let m = runs_by_stripe(b, ss).expect("every batch is accepted");
            got += m.values().flatten().map(Run::bytes).sum::<u64>();
        }
        assert_eq!(got, want);
    }

    proptest::proptest! {
        #[test]
        fn stripe_split_keeps_every_byte_inside_its_stripe(start in 0u64..200, len in 1u64..20, gap in 0u64..40, count in 1u64..20, ss in 1u64..64) {
            let r = Run { start, len, stride: len + gap, count };
            let m = runs_by_stripe(&[r], ss).unwrap();
            let mut got: Vec<u64> = Vec::new();
            for (stripe, runs) in &m {
                for x in runs {
                    for (a, b) in x.pieces() {
                        proptest::prop_assert!(a >= stripe * ss && b <= (stripe + 1) * ss);
                        got.extend(a..b);
                    }
                }
            }
            got.sort_unstable();
            let want: Vec<u64> = r.pieces().flat_map(|(a, b)| a..b).collect();
            proptest::prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn ino_remembers_its_node() {
        let ino = make_ino(5, 1234);
        assert_eq!(ino_shard(ino), 5);
        assert_eq!(ino & 0xffff, 1234);
    }
}
