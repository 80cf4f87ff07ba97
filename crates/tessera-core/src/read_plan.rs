//! Cutting a multi-owner read into fetch jobs.
//!
//! A client's `Read` names, for each owner, the logical ranges to fetch from that owner's log.
//! The daemon fetches every owner in parallel; a remote owner's ranges are further cut into
//! pieces of at most `piece` bytes, each fetched over its own connection, so both daemons
//! work on several at once (one large exchange is a serial chain: read, MAC, send, receive,
//! MAC). A local owner's ranges are read in one job (no transfer to overlap).
//!
//! The ranges come from the wire, so the planner is total: it makes progress on every input
//! (each step consumes at least one byte of a range or moves to the next range) and skips
//! empty or inverted ranges, which the daemon refuses before planning anyway.

use crate::Owner;

/// One fetch: ranges of one owner's log, in request order.
pub type Job = (Owner, Vec<(u64, u64)>);

/// Cuts `parts` into jobs: one per local owner (`owner.node == local_node`), and pieces of at
/// most `piece` bytes (`piece >= 1`) for remote owners. The jobs' ranges, concatenated in
/// order, are exactly the non-empty input ranges in input order.
pub fn split_read(parts: Vec<Job>, local_node: u32, piece: u64) -> Vec<Job> {
    let piece = piece.max(1);
    let mut jobs = Vec::new();
    for (owner, ranges) in parts {
        let ranges = ranges.into_iter().filter(|(s, e)| s < e);
        if owner.node == local_node {
            let all: Vec<(u64, u64)> = ranges.collect();
            if !all.is_empty() {
                jobs.push((owner, all));
            }
            continue;
        }
        let mut cur: Vec<(u64, u64)> = Vec::new();
        // Bytes in `cur`; always below `piece` at the top of the loop, so `room >= 1`.
        let mut bytes = 0u64;
        for (s, e) in ranges {
            let mut a = s;
            while a < e {
                let room = piece - bytes;
                let b = e.min(a.saturating_add(room));
                cur.push((a, b));
                bytes += b - a;
                a = b;
                if bytes == piece {
                    jobs.push((owner, std::mem::take(&mut cur)));
                    bytes = 0;
                }
            }
        }
        if !cur.is_empty() {
            jobs.push((owner, cur));
        }
    }
    jobs
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const LOCAL: Owner = Owner { node: 0, client: 7 };
    const REMOTE: Owner = Owner { node: 1, client: 3 };

    #[test]
    fn local_reads_stay_whole_and_remote_ones_are_cut() {
        let jobs = split_read(vec![(LOCAL, vec![(0, 5 << 20)])], 0, 2 << 20);
        assert_eq!(jobs, vec![(LOCAL, vec![(0, 5 << 20)])]);
        let jobs = split_read(vec![(REMOTE, vec![(0, 5), (10, 13)])], 0, 4);
        assert_eq!(
            jobs,
            vec![(REMOTE, vec![(0, 4)]), (REMOTE, vec![(4, 5), (10, 13)]),]
        );
    }

    #[test]
    fn hostile_ranges_terminate() {
        let jobs = split_read(
            vec![
                (LOCAL, vec![(5, 1), (0, u64::MAX), (3, 3)]),
                (REMOTE, vec![(u64::MAX - 3, u64::MAX), (9, 2)]),
            ],
            0,
            1,
        );
        assert_eq!(jobs[0], (LOCAL, vec![(0, u64::MAX)]));
        assert_eq!(jobs.len(), 4, "three one-byte remote pieces: {jobs:?}");
    }

    fn flatten(jobs: &[Job], who: Owner) -> Vec<(u64, u64)> {
        // Concatenate and merge touching neighbours, to compare with the input.
        let mut out: Vec<(u64, u64)> = Vec::new();
        for (_, rs) in jobs.iter().filter(|(o, _)| *o == who) {
            for &(s, e) in rs {
                match out.last_mut() {
                    Some(last) if last.1 == s => last.1 = e,
                    _ => out.push((s, e)),
                }
            }
        }
        out
    }

    proptest! {
        /// Every byte asked for is fetched once, in order; remote jobs respect the piece size.
        #[test]
        fn plan_covers_the_request_in_order(
            local in proptest::collection::vec((0u64..1000, 0u64..1000), 0..8),
            remote in proptest::collection::vec((0u64..1000, 0u64..1000), 0..8),
            piece in 1u64..300,
        ) {
            let jobs = split_read(vec![(LOCAL, local.clone()), (REMOTE, remote.clone())], 0, piece);
            for (owner, rs) in &jobs {
                prop_assert!(!rs.is_empty());
                prop_assert!(rs.iter().all(|(s, e)| s < e));
                if *owner == REMOTE {
                    prop_assert!(rs.iter().map(|(s, e)| e - s).sum::<u64>() <= piece);
                }
            }
            for (who, input) in [(LOCAL, local), (REMOTE, remote)] {
                let mut want: Vec<(u64, u64)> = Vec::new();
                for (s, e) in input.into_iter().filter(|(s, e)| s < e) {
                    match want.last_mut() {
                        Some(last) if last.1 == s => last.1 = e,
                        _ => want.push((s, e)),
                    }
                }
                prop_assert_eq!(flatten(&jobs, who), want);
            }
        }
    }
}
