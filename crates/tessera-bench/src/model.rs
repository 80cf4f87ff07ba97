//! The cost model to 64k processes: shard entries, whole-file query bytes and messages per open,
//! computed with the real placement (stripes and their shards) and the real encoding of the
//! query answer, for patterns too large to run on one machine.
//!
//! Patterns (P processes, each `writes` pieces of `xfer` bytes):
//! * N-1 strided: piece k of process p at `(k * P + p) * xfer` of one file;
//! * N-N: process p writes its pieces contiguously into a file of its own;
//! * random: each piece of one shared file at a random slot (upper bound: touching pieces of
//!   one owner, which would join, are counted apart).
//!
//! Entries are what the ownership shards hold (one per run of one owner per stripe); the
//! query bytes are the encoded `Owners` answer of a whole-file query (one file, for N-N the
//! file of one process); messages per open count the requests an open with a whole-file query
//! sends: one `OwnQueryFile` to every node and one `InodeGet`.

use rand::{Rng, SeedableRng};
use tessera_core::placement::{runs_by_stripe, stripe_shard};
use tessera_core::{OwnedRun, Owner, Run};

const STRIPE: u64 = 64 << 20;

#[derive(Clone, Copy, Debug)]
pub enum Pattern {
    Strided,
    PerProcess,
    Random,
}

impl Pattern {
    fn name(self) -> &'static str {
        match self {
            Pattern::Strided => "N-1 strided",
            Pattern::PerProcess => "N-N",
            Pattern::Random => "random",
        }
    }
}

/// What one pattern costs on one machine size.
#[derive(Debug, Default, PartialEq)]
pub struct Cost {
    /// Ownership entries over all shards, and on the fullest node.
    pub entries: u64,
    pub max_node_entries: u64,
    /// Encoded whole-file answer of one file.
    pub query_bytes: u64,
    pub messages_per_open: u64,
}

/// Bytes of one run and owner in a query's answer (postcard, as on the wire).
fn encoded(run: Run, owner: Owner) -> u64 {
    let mut buf = [0u8; 64];
    postcard::to_slice(&OwnedRun { run, owner }, &mut buf)
        .expect("an owned run encodes in 64 bytes")
        .len() as u64
}

/// Counts the runs of one file: entries per node, and the answer's bytes.
struct Tally {
    per_node: Vec<u64>,
    bytes: u64,
}

impl Tally {
    fn new(nodes: u32) -> Self {
        Tally {
            per_node: vec![0; nodes as usize],
            // The answer's size field and the length of its list (at most 5 bytes each).
            bytes: 10,
        }
    }

    fn add(&mut self, ino: u64, runs: &[Run], owner: Owner) {
        let nodes = self.per_node.len() as u32;
        let per_stripe = runs_by_stripe(runs, STRIPE).expect("model runs are valid");
        for (stripe, clipped) in per_stripe {
            let node = stripe_shard(ino, stripe, nodes) as usize;
            self.per_node[node] += clipped.len() as u64;
            self.bytes += clipped.iter().map(|r| encoded(*r, owner)).sum::<u64>();
        }
    }
}

pub fn cost(pattern: Pattern, procs: u64, nodes: u32, writes: u64, xfer: u64) -> Cost {
    let owner = |p: u64| Owner {
        node: (p % u64::from(nodes)) as u32,
        client: 2 + p / u64::from(nodes),
    };
    let ino = 1 << 48 | 2;
    let messages_per_open = u64::from(nodes) + 1;
    match pattern {
        Pattern::Strided => {
            let mut t = Tally::new(nodes);
            for p in 0..procs {
                let run = Run {
                    start: p * xfer,
                    len: xfer,
                    stride: procs * xfer,
                    count: writes,
                }
                .normalized();
                t.add(ino, &[run], owner(p));
            }
            Cost {
                entries: t.per_node.iter().sum(),
                max_node_entries: t.per_node.iter().copied().max().unwrap_or(0),
                query_bytes: t.bytes,
                messages_per_open,
            }
        }
        Pattern::PerProcess => {
            // Every process's file costs the same but lands on its own shards.
            let mut per_node = vec![0u64; nodes as usize];
            let mut one = Tally::new(nodes);
            for p in 0..procs {
                let mut t = Tally::new(nodes);
                t.add(ino + p, &[Run::single(0, writes * xfer)], owner(p));
                for (n, e) in t.per_node.iter().enumerate() {
                    per_node[n] += e;
                }
                if p == 0 {
                    one = t;
                }
            }
            Cost {
                entries: per_node.iter().sum(),
                max_node_entries: per_node.iter().copied().max().unwrap_or(0),
                query_bytes: one.bytes,
                messages_per_open,
            }
        }
        Pattern::Random => {
            let slots = procs * writes;
            // Last writer of each slot (u32::MAX: none).
            let mut last = vec![u32::MAX; slots as usize];
            let mut rng = rand::rngs::StdRng::seed_from_u64(procs ^ u64::from(nodes) << 32);
            for p in 0..procs {
                for _ in 0..writes {
                    last[rng.random_range(0..slots) as usize] = p as u32;
                }
            }
            let mut t = Tally::new(nodes);
            for (slot, p) in last.iter().enumerate() {
                if *p != u32::MAX {
                    let run = Run::single(slot as u64 * xfer, xfer);
                    t.add(ino, &[run], owner(u64::from(*p)));
                }
            }
            Cost {
                entries: t.per_node.iter().sum(),
                max_node_entries: t.per_node.iter().copied().max().unwrap_or(0),
                query_bytes: t.bytes,
                messages_per_open,
            }
        }
    }
}

/// The table, in markdown.
pub fn table(writes: u64, xfer: u64) -> String {
    let mut out = format!(
        "Model: {writes} pieces of {xfer} bytes per process, 64 MiB stripes.\n\n| pattern | processes | nodes | shard entries | on the fullest node | entries per process | whole-file query bytes | per process | messages per open |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    );
    for pattern in [Pattern::Strided, Pattern::PerProcess, Pattern::Random] {
        for procs in [1_000u64, 4_000, 16_000, 64_000] {
            for nodes in [16u32, 64, 256, 1024] {
                let c = cost(pattern, procs, nodes, writes, xfer);
                out += &format!(
                    "| {} | {procs} | {nodes} | {} | {} | {:.1} | {} | {:.1} | {} |\n",
                    pattern.name(),
                    c.entries,
                    c.max_node_entries,
                    c.entries as f64 / procs as f64,
                    c.query_bytes,
                    c.query_bytes as f64 / procs as f64,
                    c.messages_per_open
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strided_writers_cost_one_entry_per_stripe_they_span() {
        // 100 writers x 1,000 pieces of 16 bytes: 1.6 MB, one stripe, one run each.
        let c = cost(Pattern::Strided, 100, 3, 1000, 16);
        assert_eq!(c.entries, 100);
        assert!(c.query_bytes < 100 * 16, "{c:?}");
        assert_eq!(c.messages_per_open, 4);
        // Pieces wider apart than a stripe cannot share a run within one.
        let c = cost(Pattern::Strided, 2000, 16, 10, 47001);
        assert!((20_000..=40_000).contains(&c.entries), "{c:?}");
        // N-N: one entry per process and stripe of its file.
        let c = cost(Pattern::PerProcess, 10, 4, 1000, 1 << 20);
        assert_eq!(c.entries, 10 * (1000u64 << 20).div_ceil(STRIPE));
        // Random: at most one entry per piece.
        let c = cost(Pattern::Random, 50, 4, 100, 16);
        assert!(c.entries <= 5000 && c.entries > 2500, "{c:?}");
    }
}
