//! Wang, Mohror and Snir's synthetic workloads (Table VII/VIII) under posix, commit and session consistency,
//! and the same accesses on a plain shared file.
//!
//! * CN-W / SN-W: every rank writes `ops` accesses of `size` bytes, contiguous blocks / strided.
//! * CC-R / CS-R: the first half of the ranks write contiguous blocks and close; then the second
//!   half reads everything back, contiguous (reader j reads writer j's block) or strided (reader j
//!   reads every `readers`-th access of the whole file).
//!
//! Reported per model: write and read bandwidth, and the query and attach requests the clients
//! actually sent (summed over ranks).

use super::verify;
use crate::args::Pattern;
use crate::rank::{Ctx, mibs, remove_quietly};
use crate::results::Metrics;
use std::os::unix::fs::FileExt;
use tessera_cli::demo::fill_pattern;
use tessera_client::{Model, OpenOptions};

/// Who writes and reads which offsets.
struct Plan {
    writes: Vec<u64>,
    reads: Vec<u64>,
    writers: u64,
}

fn plan(pattern: Pattern, n: u64, r: u64, ops: u64, size: u64) -> Plan {
    let writers = if pattern.reads() { (n / 2).max(1) } else { n };
    let readers = n - writers;
    let is_writer = r < writers;
    let mut writes = Vec::new();
    let mut reads = Vec::new();
    if is_writer {
        for i in 0..ops {
            writes.push(match pattern {
                Pattern::SnW => (i * writers + r) * size,
                _ => (r * ops + i) * size,
            });
        }
    } else if readers > 0 {
        let j = r - writers;
        match pattern {
            Pattern::CcR => {
                // Reader j reads writer (j mod writers)'s block.
                let w = j % writers;
                reads.extend((0..ops).map(|i| (w * ops + i) * size));
            }
            Pattern::CsR => {
                let accesses = writers * ops;
                reads.extend(
                    (0..)
                        .map(|i| i * readers + j)
                        .take_while(|k| *k < accesses)
                        .map(|k| k * size),
                );
            }
            _ => {}
        }
    }
    Plan {
        writes,
        reads,
        writers,
    }
}

pub fn run(cx: &Ctx, rep: usize) -> Metrics {
    let p = &cx.params;
    let (n, r) = (cx.size as u64, cx.rank as u64);
    let size = p.size;
    let ops = p.accesses();
    let plan = plan(p.pattern, n, r, ops, size);
    // Data is made before, and checked after, the timed phases (the same for every way).
    let sz = size as usize;
    let mut wdata = vec![0u8; plan.writes.len() * sz];
    for (i, off) in plan.writes.iter().enumerate() {
        fill_pattern(&mut wdata[i * sz..(i + 1) * sz], *off);
    }
    let mut rdata = crate::rank::touched_buffer(plan.reads.len() * sz);
    let mut m = Metrics::new();
    let write_bytes = plan.writers * ops * size;
    let read_bytes = cx.sum_u64(plan.reads.len() as u64 * size);

    let mut garbage = Vec::new();
    let mut models = [
        Some(Model::Posix),
        Some(Model::Commit),
        Some(Model::Session),
        None,
    ];
    models.rotate_left(rep % 4);
    for model in models {
        let name = model.map_or("direct", |m| m.name());
        let tpath = cx.tpath(&format!("cons-{name}-{rep}"));
        let dpath = cx.dpath(&format!("cons-{rep}"));
        let before = cx.client.stats();
        cx.sync_disks();
        let wsecs = cx.timed(|| {
            if plan.writes.is_empty() {
                return;
            }
            match model {
                Some(model) => {
                    let mut f = cx.ok(cx.client.open(
                        &tpath,
                        OpenOptions::new().write(true).create(true).model(model),
                    ));
                    for (i, off) in plan.writes.iter().enumerate() {
                        cx.ok(f.write_at(&wdata[i * sz..(i + 1) * sz], *off));
                    }
                    if model == Model::Commit {
                        cx.ok(f.commit());
                    }
                    cx.ok(f.close());
                }
                None => {
                    let f = cx.ok(std::fs::OpenOptions::new()
                        .write(true)
                        .create(true)
                        .truncate(false)
                        .open(&dpath));
                    for (i, off) in plan.writes.iter().enumerate() {
                        cx.ok(f.write_all_at(&wdata[i * sz..(i + 1) * sz], *off));
                    }
                }
            }
        });
        m.insert(format!("{name}_write_mibs"), mibs(write_bytes, wsecs));
        if p.pattern.reads() {
            let rsecs = cx.timed(|| {
                if plan.reads.is_empty() {
                    return;
                }
                match model {
                    Some(model) => {
                        let mut f = cx.ok(cx
                            .client
                            .open(&tpath, OpenOptions::new().read(true).model(model)));
                        for (i, off) in plan.reads.iter().enumerate() {
                            cx.ok(f.read_exact_at(&mut rdata[i * sz..(i + 1) * sz], *off));
                        }
                        cx.ok(f.close());
                    }
                    None => {
                        let f = cx.ok(std::fs::File::open(&dpath));
                        for (i, off) in plan.reads.iter().enumerate() {
                            cx.ok(f.read_exact_at(&mut rdata[i * sz..(i + 1) * sz], *off));
                        }
                    }
                }
            });
            for (i, off) in plan.reads.iter().enumerate() {
                verify(cx, &rdata[i * sz..(i + 1) * sz], *off, name);
            }
            rdata.fill(0);
            m.insert(format!("{name}_read_mibs"), mibs(read_bytes, rsecs));
        }
        let (queries, attaches) = cx.stats_since(before);
        if model.is_some() {
            m.insert(format!("{name}_queries"), queries as f64);
            m.insert(format!("{name}_attaches"), attaches as f64);
        }
        garbage.push((model.is_some(), tpath, dpath));
    }
    // Files go at the end of the repetition: on a disk mounted with online discard, deleting
    // hundreds of MiB right before the next timed phase slowed whichever way came next.
    cx.barrier();
    if cx.rank == 0 {
        for (tessera, tpath, dpath) in garbage {
            if tessera {
                cx.ok(cx.client.unlink(&tpath));
            } else {
                remove_quietly(&dpath);
            }
        }
    }
    cx.barrier();
    // What the query counts are compared with: one query per read (commit), one per open
    // (session, where each reading rank opens once).
    m.insert("reads".into(), cx.sum_u64(plan.reads.len() as u64) as f64);
    m.insert(
        "read_opens".into(),
        cx.sum_u64(u64::from(!plan.reads.is_empty())) as f64,
    );
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_cover_every_written_byte_once() {
        for pattern in [Pattern::CcR, Pattern::CsR] {
            let (n, ops, size) = (8u64, 10u64, 4u64);
            let mut written: Vec<u64> = (0..n)
                .flat_map(|r| plan(pattern, n, r, ops, size).writes)
                .collect();
            let mut read: Vec<u64> = (0..n)
                .flat_map(|r| plan(pattern, n, r, ops, size).reads)
                .collect();
            written.sort_unstable();
            read.sort_unstable();
            assert_eq!(written, read, "{pattern:?}");
        }
        let sn: Vec<u64> = plan(Pattern::SnW, 4, 1, 3, 8).writes;
        assert_eq!(sn, vec![8, 40, 72]);
    }
}
