//! Locality answers (FusionFS and Swift): where the bytes of a range live, in the shape schedulers
//! consume (HDFS block locations, Swift/T `@location`, Dask `workers=`).
//!
//! From a file's ownership runs and a few facts about its copies, [`locate`] builds the
//! extents of a range in order, each with the node that holds it (if any) and its
//! [`Residence`], and the bytes each node holds, ranked. Strided runs are walked piece by piece
//! in one merge, adjacent pieces of one node and residence joined, and the listing stops at a
//! bound on extents or on pieces walked (`more_from` says where); the per-node totals always
//! cover the whole range, computed from the runs without expanding them.
//!
//! Answers are advisory: a scheduler acting on a stale one only loses speed.

use crate::{OwnedRun, Run};
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

/// Where the bytes of an extent can be read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Residence {
    /// Only in the burst buffer of the extent's node (written since the last flush, or never
    /// flushed).
    BurstBuffer,
    /// Only in the PFS copy (no node holds them).
    Pfs,
    /// In the burst buffer of the extent's node and, unchanged, in the PFS copy.
    Both,
    /// Nowhere: a hole, read as zeros.
    Hole,
}

impl Residence {
    /// The name used in `tessera where --json` and the C API's documentation.
    pub fn name(self) -> &'static str {
        match self {
            Residence::BurstBuffer => "burst_buffer",
            Residence::Pfs => "pfs",
            Residence::Both => "both",
            Residence::Hole => "hole",
        }
    }
}

/// One extent of a located range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlacedExtent {
    pub start: u64,
    pub end: u64,
    /// The node whose burst buffer holds the bytes (`None` for PFS-only bytes and holes).
    pub node: Option<u32>,
    pub residence: Residence,
}

/// What the answer needs to know about a file beside its ownership runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopyFacts {
    pub size: u64,
    /// The size of its PFS copy, if it has one.
    pub pfs_size: Option<u64>,
    /// Whether the burst buffer's bytes are unchanged since the last whole-file flush (then
    /// owned bytes below the PFS copy's size are in both places).
    pub flushed_clean: bool,
}

/// Where the bytes of one range live.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// The range answered: the asked range cut at the file's size.
    pub start: u64,
    pub end: u64,
    /// Ascending, touching, covering `[start, more_from.unwrap_or(end))`.
    pub extents: Vec<PlacedExtent>,
    /// Where the listing stopped, if it was cut at the bound.
    pub more_from: Option<u64>,
    /// Bytes of the range each node's burst buffer holds, most first (ties by node).
    pub bytes_by_node: Vec<(u32, u64)>,
    /// Bytes of the range only the PFS copy holds.
    pub pfs_only_bytes: u64,
}

impl Placement {
    /// The node holding the most bytes of the range, if any node holds some.
    pub fn best_node(&self) -> Option<u32> {
        self.bytes_by_node.first().map(|(n, _)| *n)
    }
}

/// Where `[start, end)` of a file lives, given its (disjoint) ownership runs; at most
/// `max_extents` extents are listed.
pub fn locate(
    runs: &[OwnedRun],
    start: u64,
    end: u64,
    facts: CopyFacts,
    max_extents: usize,
) -> Placement {
    let end = end.min(facts.size);
    let start = start.min(end);
    let mut out = Placement {
        start,
        end,
        ..Placement::default()
    };
    let clipped: Vec<(Run, u32)> = runs
        .iter()
        .flat_map(|r| {
            r.run
                .clip(start, end)
                .into_iter()
                .map(move |c| (c, r.owner.node))
        })
        .collect();
    let mut per_node: BTreeMap<u32, u64> = BTreeMap::new();
    for (run, node) in &clipped {
        *per_node.entry(*node).or_default() += run.bytes();
    }
    out.bytes_by_node = per_node.into_iter().collect();
    out.bytes_by_node.sort_by_key(|&(n, b)| (Reverse(b), n));
    let pfs_end = facts.pfs_size.unwrap_or(0).clamp(start, end);
    // Unowned bytes below the PFS copy's end are the PFS's; the owned part of that span is
    // whatever the runs hold there.
    let owned_below_pfs: u64 = clipped
        .iter()
        .flat_map(|(r, _)| r.clip(start, pfs_end))
        .map(|r| r.bytes())
        .sum();
    // Saturating: runs from the wire are clipped above, but need not be disjoint.
    out.pfs_only_bytes = (pfs_end - start).saturating_sub(owned_below_pfs);

    let mut list = Listing {
        extents: Vec::new(),
        max: max_extents.max(1),
        pfs_end,
        both: facts.flushed_clean,
        at: start,
    };
    // A k-way merge of the runs' pieces by start: pieces are disjoint across runs.
    let mut heap: BinaryHeap<Reverse<(u64, usize, u64)>> = clipped
        .iter()
        .enumerate()
        .map(|(k, (r, _))| Reverse((r.start, k, 0)))
        .collect();
    // Pieces of one node that touch join into one extent without using up the bound: the walk
    // itself is bounded too (a strided checkpoint of many ranks per node).
    let mut budget = (max_extents as u64).saturating_mul(256).max(1 << 16);
    while let Some(Reverse((s, k, i))) = heap.pop() {
        let (run, node) = clipped[k];
        budget = budget.saturating_sub(1);
        if budget == 0 || !list.push_gap(s) || !list.push_owned(s, s + run.len, node) {
            out.more_from = Some(list.at);
            out.extents = list.extents;
            return out;
        }
        if i + 1 < run.count {
            heap.push(Reverse((run.piece_start(i + 1), k, i + 1)));
        }
    }
    if !list.push_gap(end) {
        out.more_from = Some(list.at);
    }
    out.extents = list.extents;
    out
}

/// The extents listed so far, and where the next one starts.
struct Listing {
    extents: Vec<PlacedExtent>,
    max: usize,
    pfs_end: u64,
    both: bool,
    at: u64,
}

impl Listing {
    /// Adds an extent, joined to the last one if it touches it with the same node and
    /// residence; false (nothing added) once the bound is reached.
    fn push(&mut self, start: u64, end: u64, node: Option<u32>, residence: Residence) -> bool {
        if start >= end {
            return true;
        }
        if let Some(last) = self.extents.last_mut()
            && last.end == start
            && last.node == node
            && last.residence == residence
        {
            last.end = end;
            self.at = end;
            return true;
        }
        if self.extents.len() >= self.max {
            return false;
        }
        self.extents.push(PlacedExtent {
            start,
            end,
            node,
            residence,
        });
        self.at = end;
        true
    }

    /// The unowned bytes from where the listing is up to `upto`: the PFS copy's, then holes.
    fn push_gap(&mut self, upto: u64) -> bool {
        let mid = self.pfs_end.clamp(self.at, upto.max(self.at));
        self.push(self.at, mid, None, Residence::Pfs)
            && self.push(self.at, upto, None, Residence::Hole)
    }

    /// Owned bytes of `node`: in both places below the PFS copy's end if the file is clean.
    fn push_owned(&mut self, start: u64, end: u64, node: u32) -> bool {
        let mid = if self.both {
            self.pfs_end.clamp(start, end)
        } else {
            start
        };
        self.push(start, mid, Some(node), Residence::Both)
            && self.push(mid, end, Some(node), Residence::BurstBuffer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Owner;
    use proptest::prelude::*;

    fn owned(run: Run, node: u32) -> OwnedRun {
        OwnedRun {
            run,
            owner: Owner { node, client: 1 },
        }
    }

    fn facts(size: u64, pfs_size: Option<u64>, flushed_clean: bool) -> CopyFacts {
        CopyFacts {
            size,
            pfs_size,
            flushed_clean,
        }
    }

    #[test]
    fn a_strided_checkpoint_alternates_nodes_and_ranks_them_by_bytes() {
        // Two writers, 4 KiB pieces interleaved, the second with one piece fewer.
        let runs = [
            owned(
                Run {
                    start: 0,
                    len: 4096,
                    stride: 8192,
                    count: 4,
                },
                0,
            ),
            owned(
                Run {
                    start: 4096,
                    len: 4096,
                    stride: 8192,
                    count: 3,
                },
                1,
            ),
        ];
        let p = locate(&runs, 0, u64::MAX, facts(32768, None, false), 100);
        assert_eq!((p.start, p.end), (0, 32768));
        assert_eq!(p.extents.len(), 8);
        assert_eq!(p.extents[1].node, Some(1));
        assert_eq!(p.extents[7].residence, Residence::Hole);
        assert_eq!(p.bytes_by_node, vec![(0, 16384), (1, 12288)]);
        assert_eq!(p.best_node(), Some(0));
        let cut = locate(&runs, 0, u64::MAX, facts(32768, None, false), 3);
        assert_eq!(cut.extents.len(), 3);
        assert_eq!(cut.more_from, Some(12288));
        assert_eq!(cut.bytes_by_node, p.bytes_by_node, "totals cover the range");
    }

    #[test]
    fn flushed_bytes_are_in_both_places_only_while_clean() {
        let runs = [owned(Run::single(0, 100), 2)];
        let clean = locate(&runs, 0, 200, facts(150, Some(80), true), 10);
        let got: Vec<_> = clean
            .extents
            .iter()
            .map(|e| (e.start, e.end, e.node, e.residence))
            .collect();
        assert_eq!(
            got,
            vec![
                (0, 80, Some(2), Residence::Both),
                (80, 100, Some(2), Residence::BurstBuffer),
                (100, 150, None, Residence::Hole),
            ]
        );
        let dirty = locate(&runs, 0, 200, facts(150, Some(120), false), 10);
        assert_eq!(dirty.extents[0].residence, Residence::BurstBuffer);
        assert_eq!(dirty.extents[1].residence, Residence::Pfs);
        assert_eq!(dirty.pfs_only_bytes, 20);
    }

    /// The model: one owner or none per byte.
    fn model(
        runs: &[OwnedRun],
        f: CopyFacts,
        start: u64,
        end: u64,
    ) -> Vec<(Option<u32>, Residence)> {
        let end = end.min(f.size);
        let start = start.min(end);
        let pfs = f.pfs_size.unwrap_or(0);
        (start..end)
            .map(|b| {
                let node = runs
                    .iter()
                    .find(|r| r.run.pieces().any(|(s, e)| s <= b && b < e))
                    .map(|r| r.owner.node);
                let res = match node {
                    Some(_) if f.flushed_clean && b < pfs => Residence::Both,
                    Some(_) => Residence::BurstBuffer,
                    None if b < pfs => Residence::Pfs,
                    None => Residence::Hole,
                };
                (node, res)
            })
            .collect()
    }

    /// Disjoint runs: each candidate byte goes to the first run that claims it, as a run of
    /// single pieces (the model does not care how pieces are grouped).
    fn disjoint(cands: Vec<(u64, u64, u64, u64, u32)>) -> Vec<OwnedRun> {
        let mut taken = [false; 256];
        let mut out = Vec::new();
        for (start, len, gap, count, node) in cands {
            let run = Run {
                start,
                len,
                stride: len + gap,
                count,
            };
            if run.end() > 256 || run.pieces().any(|(s, e)| (s..e).any(|b| taken[b as usize])) {
                continue;
            }
            for (s, e) in run.pieces() {
                (s..e).for_each(|b| taken[b as usize] = true);
            }
            out.push(owned(run, node));
        }
        out
    }

    proptest! {
        #[test]
        fn matches_a_byte_model(
            cands in proptest::collection::vec((0u64..200, 1u64..16, 0u64..16, 1u64..6, 0u32..3), 0..8),
            size in 0u64..260,
            pfs in proptest::option::of(0u64..260),
            clean in any::<bool>(),
            start in 0u64..260,
            len in 0u64..300,
            max in 1usize..40,
        ) {
            let runs = disjoint(cands);
            let f = facts(size, pfs, clean);
            let p = locate(&runs, start, start + len, f, max);
            let want = model(&runs, f, start, start + len);
            prop_assert_eq!(p.end - p.start, want.len() as u64);
            // Listed extents: ascending, touching, maximal, matching the model byte by byte.
            let mut at = p.start;
            for (i, e) in p.extents.iter().enumerate() {
                prop_assert_eq!(e.start, at);
                prop_assert!(e.start < e.end);
                if i > 0 {
                    let prev = p.extents[i - 1];
                    prop_assert!(prev.node != e.node || prev.residence != e.residence);
                }
                for b in e.start..e.end {
                    prop_assert_eq!((e.node, e.residence), want[(b - p.start) as usize]);
                }
                at = e.end;
            }
            prop_assert!(p.extents.len() <= max);
            match p.more_from {
                None => prop_assert_eq!(at, p.end),
                Some(m) => { prop_assert_eq!(m, at); prop_assert!(m < p.end); }
            }
            // Totals over the whole range, ranked.
            let mut counts: BTreeMap<u32, u64> = BTreeMap::new();
            for (n, _) in &want {
                if let Some(n) = n { *counts.entry(*n).or_default() += 1; }
            }
            let mut ranked: Vec<(u32, u64)> = counts.into_iter().collect();
            ranked.sort_by_key(|&(n, b)| (Reverse(b), n));
            prop_assert_eq!(&p.bytes_by_node, &ranked);
            let pfs_only = want.iter().filter(|(_, r)| *r == Residence::Pfs).count() as u64;
            prop_assert_eq!(p.pfs_only_bytes, pfs_only);
        }
    }
}
