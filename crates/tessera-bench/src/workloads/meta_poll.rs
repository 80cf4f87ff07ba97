//! A writer with stat-polling readers: what polling costs the writer's bandwidth, and what
//! the pollers see.
//!
//! Rank 0 writes a file in 1 MiB pieces under the posix model (each write visible, its size
//! included, when it returns), once alone and once while rank 1 (on another node when there
//! are several) stats the file in a loop until it reports the whole size; the same on the
//! local file system. Reported: `poll_write_alone_mibs` and `poll_write_mibs` (the writer's
//! bandwidth without and with the poller), `poll_stat_per_s` (the poller's stats per second
//! of the write), and their `direct_` forms. The poller checks that the sizes it sees never
//! go back. One poller: on 2 cores every further one spinning takes a core's share from the
//! writer and the daemons, which measures the machine, not the file system.

use crate::rank::{Ctx, mibs};
use crate::results::Metrics;
use tessera_cli::demo::fill_pattern;
use tessera_client::{Model, OpenOptions};

/// Bytes of each write, and of the file.
const PIECE: usize = 1 << 20;
const FILE_BYTES: usize = 16 << 20;

pub fn run(cx: &Ctx, rep: usize) -> Metrics {
    let mut m = Metrics::new();
    let mut piece = vec![0u8; PIECE];
    fill_pattern(&mut piece, 0);
    let tessera_base = cx.tpath(&format!("poll-{rep}"));
    let direct_base = cx.dpath(&format!("poll-{rep}"));
    if cx.rank == 0 {
        cx.ok(cx.client.mkdir(&tessera_base, 0o755));
        cx.ok(std::fs::create_dir_all(&direct_base));
    }
    cx.barrier();
    for tessera in [true, false] {
        let prefix = if tessera { "" } else { "direct_" };
        for polled in [false, true] {
            let path = if tessera {
                format!("{tessera_base}/f.{polled}")
            } else {
                direct_base
                    .join(format!("f.{polled}"))
                    .display()
                    .to_string()
            };
            let mut stats = 0u64;
            let secs = cx.timed(|| {
                if cx.rank == 0 {
                    write(cx, tessera, &path, &piece);
                } else if polled && cx.rank == 1 {
                    stats = poll(cx, tessera, &path);
                }
            });
            let name = if polled {
                "poll_write"
            } else {
                "poll_write_alone"
            };
            m.insert(
                format!("{prefix}{name}_mibs"),
                mibs(FILE_BYTES as u64, secs),
            );
            let stats = cx.sum_u64(stats);
            if polled {
                m.insert(format!("{prefix}poll_stat_per_s"), stats as f64 / secs);
            }
            cx.barrier();
            if cx.rank == 0 {
                if tessera {
                    cx.ok(cx.client.unlink(&path));
                } else {
                    cx.ok(std::fs::remove_file(&path));
                }
            }
        }
    }
    cx.barrier();
    if cx.rank == 0 {
        cx.ok(cx.client.rmdir(&tessera_base));
        cx.ok(std::fs::remove_dir(&direct_base));
    }
    m
}

fn write(cx: &Ctx, tessera: bool, path: &str, piece: &[u8]) {
    if tessera {
        let mut f = cx.ok(cx.client.open(
            path,
            OpenOptions::new()
                .write(true)
                .create(true)
                .model(Model::Posix),
        ));
        for i in 0..FILE_BYTES / PIECE {
            cx.ok(f.write_at(piece, (i * PIECE) as u64));
        }
        cx.ok(f.close());
    } else {
        use std::os::unix::fs::FileExt;
        let f = cx.ok(std::fs::File::create(path));
        for i in 0..FILE_BYTES / PIECE {
            cx.ok(f.write_all_at(piece, (i * PIECE) as u64));
        }
    }
}

/// Stats `path` until it has its whole size (a name not there yet counts as size 0); the
/// number of stats.
fn poll(cx: &Ctx, tessera: bool, path: &str) -> u64 {
    let mut seen = 0u64;
    let mut stats = 0u64;
    while seen < FILE_BYTES as u64 {
        let size = if tessera {
            cx.client.stat(path).map(|a| a.size).ok()
        } else {
            std::fs::metadata(path).map(|m| m.len()).ok()
        };
        stats += 1;
        let size = size.unwrap_or(0);
        if size < seen {
            cx.fail(format!(
                "stat of {path}: size went back from {seen} to {size}"
            ));
        }
        seen = size;
    }
    stats
}
