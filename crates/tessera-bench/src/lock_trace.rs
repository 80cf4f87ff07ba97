//! What the locks of an atomic MPI-IO run were, from the interposer's trace
//! (`TESSERA_ATOMIC_TRACE=1`): per client, each access's lock and the time it waited; and the
//! seed's "maximum concurrent processes", computed from the requests alone under the lock
//! table's own conflict rule, independent of timing.

use std::collections::BTreeMap;
use tessera_core::Run;
use tessera_core::lock_list::{LockList, LockRun};
use tessera_core::locks::LockKind;

/// One traced lock: what it covered and how long it took.
#[derive(Clone, Debug, PartialEq)]
pub struct Traced {
    /// `None` under strategy `none` (no lock).
    pub list: Option<LockList>,
    pub wait_us: u64,
}

/// The locks of a run by client (pid), each in its order.
pub type Trace = BTreeMap<u32, Vec<Traced>>;

/// Parses one run `start+len` or `start+len/stride*count`.
fn parse_run(s: &str) -> Option<Run> {
    let (start, rest) = s.split_once('+')?;
    let start: u64 = start.parse().ok()?;
    Some(match rest.split_once('/') {
        None => Run::single(start, rest.parse().ok()?),
        Some((len, rest)) => {
            let (stride, count) = rest.split_once('*')?;
            Run {
                start,
                len: len.parse().ok()?,
                stride: stride.parse().ok()?,
                count: count.parse().ok()?,
            }
        }
    })
}

/// Reads the trace lines of a run's stderr; `shared_reads`: reads took shared locks (list
/// locks), else every lock was exclusive (record locks, as ROMIO takes them). Other lines
/// are ignored.
pub fn parse(stderr: &str, shared_reads: bool) -> Trace {
    let mut trace = Trace::new();
    for line in stderr.lines() {
        let Some(rest) = line.strip_prefix("tessera atomic ") else {
            continue;
        };
        let Some((head, tail)) = rest.split_once(" | ") else {
            continue;
        };
        let Some((op, runs)) = head.split_once(':') else {
            continue;
        };
        let kind = if op == "read" && shared_reads {
            LockKind::Shared
        } else {
            LockKind::Exclusive
        };
        let field = |name: &str| {
            tail.split_whitespace()
                .find_map(|f| f.strip_prefix(name))
                .and_then(|v| v.parse::<u64>().ok())
        };
        let (Some(pid), Some(wait_us)) = (field("pid="), field("wait_us=")) else {
            continue;
        };
        let runs: Option<Vec<LockRun>> = runs
            .split_whitespace()
            .map(|r| parse_run(r).map(|run| LockRun { run, kind }))
            .collect();
        let Some(runs) = runs else { continue };
        let list = (!runs.is_empty())
            .then(|| LockList::new(runs).ok())
            .flatten();
        trace
            .entry(pid as u32)
            .or_default()
            .push(Traced { list, wait_us });
    }
    trace
}

/// The trace without the locks of single ranges smaller than `bytes` each (a library's
/// metadata writes, made by whichever rank it picks: they would shift that rank's steps).
pub fn without_metadata(trace: &Trace, bytes: u64) -> Trace {
    trace
        .iter()
        .map(|(pid, locks)| {
            let kept = locks
                .iter()
                .filter(|t| {
                    t.list.as_ref().is_none_or(|l| {
                        l.runs()
                            .iter()
                            .any(|r| r.run.count > 1 || r.run.len >= bytes)
                    })
                })
                .cloned()
                .collect();
            (*pid, kept)
        })
        .collect()
}

/// The largest set of clients whose locks of step `k` (each client's k-th lock) are mutually
/// compatible, smallest over the steps: the paper's "maximum concurrent processes". A client
/// without a lock at a step (strategy `none`) is compatible with everyone.
pub fn max_compatible(trace: &Trace) -> usize {
    let steps = trace.values().map(Vec::len).max().unwrap_or(0);
    (0..steps)
        .map(|k| {
            let lists: Vec<Option<&LockList>> = trace
                .values()
                .filter_map(|v| v.get(k))
                .map(|t| t.list.as_ref())
                .collect();
            largest_compatible(&lists)
        })
        .min()
        .unwrap_or(trace.len())
}

/// The largest clique of the compatibility graph (Bron–Kerbosch with pivoting, on bit sets:
/// up to 128 clients, which every experiment here stays within).
fn largest_compatible(lists: &[Option<&LockList>]) -> usize {
    let n = lists.len().min(128);
    let compatible = |a: usize, b: usize| match (lists[a], lists[b]) {
        (Some(x), Some(y)) => !x.conflicts(y),
        _ => true,
    };
    let mut adj = vec![0u128; n];
    for a in 0..n {
        for b in a + 1..n {
            if compatible(a, b) {
                adj[a] |= 1 << b;
                adj[b] |= 1 << a;
            }
        }
    }
    fn grow(adj: &[u128], size: usize, mut p: u128, mut x: u128, best: &mut usize) {
        if p == 0 {
            *best = (*best).max(size);
            return;
        }
        if size + p.count_ones() as usize <= *best {
            return;
        }
        let pivot = (p | x).trailing_zeros() as usize;
        let mut todo = p & !adj[pivot];
        while todo != 0 {
            let v = todo.trailing_zeros() as usize;
            todo &= todo - 1;
            grow(adj, size + 1, p & adj[v], x & adj[v], best);
            p &= !(1 << v);
            x |= 1 << v;
        }
    }
    let all = if n == 128 {
        u128::MAX
    } else {
        (1u128 << n) - 1
    };
    let mut best = 0;
    grow(&adj, 0, all, 0, &mut best);
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(pid: u32, op: &str, runs: &str) -> String {
        format!("tessera atomic {op}: {runs} | pid={pid} wait_us=5\n")
    }

    #[test]
    fn interleaved_lists_are_all_compatible_extents_are_not() {
        // Four ranks of a vector view: 256 bytes every 1024, from rank x 256.
        let lists: String = (0..4u32)
            .map(|r| line(100 + r, "write", &format!("{}+256/1024*16", r * 256)))
            .collect();
        let t = parse(&lists, true);
        assert_eq!(t.len(), 4);
        assert_eq!(max_compatible(&t), 4);
        let extents: String = (0..4u32)
            .map(|r| {
                line(
                    100 + r,
                    "write",
                    &format!("{}+{}", r * 256, 15 * 1024 + 256),
                )
            })
            .collect();
        assert_eq!(max_compatible(&parse(&extents, true)), 1);
        // Reads under list locks share; under record locks they do not.
        let reads: String = (0..3u32).map(|r| line(r, "read", "0+100")).collect();
        assert_eq!(max_compatible(&parse(&reads, true)), 3);
        assert_eq!(max_compatible(&parse(&reads, false)), 1);
        // No lock at all (strategy none): everyone.
        let none: String = (0..5u32)
            .map(|r| format!("tessera atomic write: | pid={r} wait_us=0\n"))
            .collect();
        assert_eq!(max_compatible(&parse(&none, true)), 5);
    }

    #[test]
    fn metadata_writes_do_not_shift_the_steps() {
        // Rank 1 writes a 272-byte header first; the data steps still line up.
        let t = [
            line(1, "write", "96+272"),
            line(1, "write", "0+4096/16384*4"),
            line(2, "write", "4096+4096/16384*4"),
        ]
        .concat();
        let all = parse(&t, true);
        assert_eq!(max_compatible(&without_metadata(&all, 4096)), 2);
        assert_eq!(
            max_compatible(&all),
            1,
            "step 0 pairs the header with rank 2's data"
        );
    }

    #[test]
    fn the_largest_set_not_the_first_found() {
        // 0 conflicts with 1 and 2; 1, 2 and 3 are compatible: the answer is 3, not 2.
        let t = [
            line(1, "write", "0+100"),
            line(2, "write", "50+10"),
            line(3, "write", "90+10"),
            line(4, "write", "1000+10"),
        ]
        .concat();
        assert_eq!(max_compatible(&parse(&t, true)), 3);
    }
}
