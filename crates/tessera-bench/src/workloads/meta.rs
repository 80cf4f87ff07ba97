//! mdtest-like metadata rates in three shapes, through Tessera and on the plain local file
//! system of the same device, in the same run:
//!
//! - `shared`: every rank creates, stats, lists and removes empty files of its own in one shared
//!   directory;
//! - `easy` (mdtest-easy): a directory per rank, empty files;
//! - `hard` (mdtest-hard): one shared directory of 3901-byte files, each written by one rank and
//!   stat'ed, read back and removed by the next.
//!
//! Each phase reports `<phase>_per_s` (Tessera) and `direct_<phase>_per_s`, and the CPU it
//! cost per operation: the ranks' (`<phase>_rank_cpu_us`, their client library included) and,
//! for Tessera, the daemons' (`<phase>_daemon_cpu_us`). A readdir lists the rank's own directory
//! (easy) or the whole shared directory (the others); its rate counts entries. Locally, where
//! one pass over the files takes milliseconds, stat, read and readdir make several passes.
//!
//! Durability is part of the result: a Tessera create is acknowledged once the namespace
//! shard appended it to its state log (a `write`, no fsync, with the default
//! `state_durability = "process"`: it survives kill -9 of any daemon, not a power cut), as a
//! direct create is acknowledged by the kernel with no fsync. `direct_create_durable_per_s` is
//! the local create with an fsync of the directory after every batch of creates, the
//! baseline of `state_durability = "machine"`.
//!
//! After the phases, [`super::meta_poll`] measures a writer with stat-polling readers.

use super::verify;
use crate::args::Shape;
use crate::rank::{Ctx, PhaseCost};
use crate::results::Metrics;
use std::io::{Read, Write};
use tessera_cli::demo::fill_pattern;
use tessera_client::{Model, OpenOptions};

/// Bytes of each file of the hard shape (mdtest-hard's, as in IO500).
const HARD_BYTES: usize = 3901;
/// Operations each rank makes in a local stat or read phase (in passes over its files; a
/// listing counts as a tenth of an operation per entry).
const LOCAL_OPS_PER_PHASE: u64 = 40_000;
/// Creates between two fsyncs of the directory in the durable local baseline.
const DURABLE_BATCH: u64 = 64;

/// Where one side of the comparison keeps the workload's files.
struct Tree {
    /// Tessera (a path inside it) or the local file system.
    tessera: bool,
    base: String,
    shape: Shape,
}

impl Tree {
    fn dir_of(&self, owner: usize) -> String {
        match self.shape {
            Shape::Easy => format!("{}/r{owner}", self.base),
            Shape::Shared | Shape::Hard => self.base.clone(),
        }
    }

    fn file(&self, owner: usize, i: u64) -> String {
        match self.shape {
            Shape::Easy => format!("{}/f.{i}", self.dir_of(owner)),
            Shape::Shared | Shape::Hard => format!("{}/f.{owner}.{i}", self.base),
        }
    }
}

pub fn run(cx: &Ctx, rep: usize) -> Metrics {
    let p = &cx.params;
    let r = cx.rank;
    let shape = p.shape;
    let files = p.files;
    let per_rank = files as f64;
    let ranks = cx.size as f64;
    let tessera = Tree {
        tessera: true,
        base: cx.tpath(&format!("meta-{rep}")),
        shape,
    };
    let direct = Tree {
        tessera: false,
        base: cx.dpath(&format!("meta-{rep}")).display().to_string(),
        shape,
    };
    if r == 0 {
        cx.ok(cx.client.mkdir(&tessera.base, 0o755));
        cx.ok(std::fs::create_dir_all(&direct.base));
    }
    cx.barrier();
    if shape == Shape::Easy {
        cx.ok(cx.client.mkdir(&tessera.dir_of(r), 0o755));
        cx.ok(std::fs::create_dir(direct.dir_of(r)));
    }
    // The rank whose files this rank stats, reads and removes: the next one in the hard shape
    // (nothing it touches is in its own client's memory), its own otherwise.
    let other = match shape {
        Shape::Hard => (r + 1) % cx.size,
        Shape::Shared | Shape::Easy => r,
    };
    let listed_each = match shape {
        Shape::Easy => files,
        Shape::Shared | Shape::Hard => files * cx.size as u64,
    };
    let mut content = vec![0u8; HARD_BYTES];
    fill_pattern(&mut content, 0);
    let size = if shape == Shape::Hard { HARD_BYTES } else { 0 };

    let mut m = Metrics::new();
    // Shares of the stats of Tessera's phases that the attribute cache answered.
    let mut hit_rates: Vec<(&str, f64)> = Vec::new();
    let mut record = |prefix: &str, phase: &str, ops: f64, cost: PhaseCost, tessera: bool| {
        m.insert(format!("{prefix}{phase}_per_s"), ops / cost.secs);
        m.insert(
            format!("{prefix}{phase}_rank_cpu_us"),
            cost.rank_cpu_secs * 1e6 / ops,
        );
        if tessera {
            m.insert(
                format!("{phase}_daemon_cpu_us"),
                cost.daemon_cpu_secs * 1e6 / ops,
            );
        }
    };
    let mut ways = [&tessera, &direct];
    ways.rotate_left(rep % 2);
    for tree in ways {
        let prefix = if tree.tessera { "" } else { "direct_" };
        cx.sync_disks_keep_cache();
        let cost = cx.timed_cpu(|| {
            for i in 0..files {
                create(cx, tree, &tree.file(r, i), &content[..size]);
            }
        });
        record(prefix, "create", per_rank * ranks, cost, tree.tessera);
        // The phases that change nothing run several passes locally, where one pass takes
        // a few milliseconds (too short to time on a shared machine: single passes spread
        // 1.3x to 1.8x between repetitions).
        let passes = |ops_per_pass: u64| {
            if tree.tessera {
                1
            } else {
                (LOCAL_OPS_PER_PHASE / ops_per_pass.max(1)).clamp(1, 100)
            }
        };
        let n = passes(files);
        let cached = cx.client.stats();
        let cost = cx.timed_cpu(|| {
            for _ in 0..n {
                for i in 0..files {
                    stat(cx, tree, &tree.file(other, i), size as u64);
                }
            }
        });
        record(
            prefix,
            "stat",
            (n * files) as f64 * ranks,
            cost,
            tree.tessera,
        );
        if tree.tessera {
            hit_rates.push(("stat_attr_hit_rate", hit_rate(cx, cached)));
        }
        if shape == Shape::Hard {
            let cost = cx.timed_cpu(|| {
                let mut buf = vec![0u8; HARD_BYTES + 1];
                for _ in 0..n {
                    for i in 0..files {
                        read(cx, tree, &tree.file(other, i), &mut buf);
                    }
                }
            });
            record(
                prefix,
                "read",
                (n * files) as f64 * ranks,
                cost,
                tree.tessera,
            );
        }
        let n = passes(listed_each / 10);
        let cost = cx.timed_cpu(|| {
            for _ in 0..n {
                list(cx, tree, &tree.dir_of(r), listed_each);
            }
        });
        let listed = (n * listed_each) as f64 * ranks;
        record(prefix, "readdir", listed, cost, tree.tessera);
        // `ls -l`: a listing, then a stat of every entry (answered from the attributes the
        // listing brought, where they are cached).
        let cached = cx.client.stats();
        let cost = cx.timed_cpu(|| {
            for _ in 0..n {
                list_long(cx, tree, &tree.dir_of(r), listed_each);
            }
        });
        record(prefix, "lsl", listed, cost, tree.tessera);
        if tree.tessera {
            hit_rates.push(("lsl_attr_hit_rate", hit_rate(cx, cached)));
        }
        let cost = cx.timed_cpu(|| {
            for i in 0..files {
                remove(cx, tree, &tree.file(other, i));
            }
        });
        record(prefix, "remove", per_rank * ranks, cost, tree.tessera);
    }

    for (name, rate) in hit_rates {
        m.insert(name.into(), rate);
    }
    // The local baseline with the durability of a Tessera create: an fsync of the directory
    // after every batch.
    let durable = Tree {
        base: format!("{}-durable", direct.base),
        ..direct
    };
    if r == 0 {
        cx.ok(std::fs::create_dir_all(&durable.base));
    }
    cx.barrier();
    if shape == Shape::Easy {
        cx.ok(std::fs::create_dir(durable.dir_of(r)));
    }
    let dir = cx.ok(std::fs::File::open(durable.dir_of(r)));
    let cost = cx.timed_cpu(|| {
        for i in 0..files {
            create(cx, &durable, &durable.file(r, i), &content[..size]);
            if (i + 1) % DURABLE_BATCH == 0 || i + 1 == files {
                cx.ok(dir.sync_all());
            }
        }
    });
    m.insert(
        "direct_create_durable_per_s".into(),
        per_rank * ranks / cost.secs,
    );
    for i in 0..files {
        cx.ok(std::fs::remove_file(durable.file(r, i)));
    }

    cx.barrier();
    if shape == Shape::Easy {
        cx.ok(cx.client.rmdir(&tessera.dir_of(r)));
        cx.ok(std::fs::remove_dir(direct.dir_of(r)));
        cx.ok(std::fs::remove_dir(durable.dir_of(r)));
    }
    cx.barrier();
    if r == 0 {
        cx.ok(cx.client.rmdir(&tessera.base));
        cx.ok(std::fs::remove_dir(&direct.base));
        cx.ok(std::fs::remove_dir(&durable.base));
    }
    m.extend(super::meta_poll::run(cx, rep));
    m
}

fn create(cx: &Ctx, tree: &Tree, path: &str, content: &[u8]) {
    if tree.tessera {
        let mut f = cx.ok(cx.client.open(
            path,
            OpenOptions::new()
                .write(true)
                .create(true)
                .model(Model::Session),
        ));
        if !content.is_empty() {
            cx.ok(f.write_at(content, 0));
        }
        cx.ok(f.close());
    } else {
        let mut f = cx.ok(std::fs::File::create(path));
        if !content.is_empty() {
            cx.ok(f.write_all(content));
        }
    }
}

fn stat(cx: &Ctx, tree: &Tree, path: &str, size: u64) {
    let got = if tree.tessera {
        cx.ok(cx.client.stat(path)).size
    } else {
        cx.ok(std::fs::metadata(path)).len()
    };
    if got != size {
        cx.fail(format!("stat of {path}: size {got}, expected {size}"));
    }
}

fn read(cx: &Ctx, tree: &Tree, path: &str, buf: &mut [u8]) {
    let n = if tree.tessera {
        let mut f = cx.ok(cx.client.open_read(path));
        let n = fill(cx, buf, |b| f.read(b));
        cx.ok(f.close());
        n
    } else {
        let mut f = cx.ok(std::fs::File::open(path));
        fill(cx, buf, |b| f.read(b))
    };
    if n != HARD_BYTES {
        cx.fail(format!("read of {path}: {n} bytes, expected {HARD_BYTES}"));
    }
    verify(cx, &buf[..n], 0, path);
}

/// Reads into `buf` until it is full or the file ends; the bytes read.
fn fill<E: std::fmt::Display>(
    cx: &Ctx,
    buf: &mut [u8],
    mut read: impl FnMut(&mut [u8]) -> Result<usize, E>,
) -> usize {
    let mut n = 0;
    while n < buf.len() {
        match cx.ok(read(&mut buf[n..])) {
            0 => break,
            k => n += k,
        }
    }
    n
}

fn list(cx: &Ctx, tree: &Tree, dir: &str, expected: u64) {
    let n = if tree.tessera {
        cx.ok(cx.client.readdir(dir)).len() as u64
    } else {
        let mut n = 0;
        for e in cx.ok(std::fs::read_dir(dir)) {
            cx.ok(e);
            n += 1;
        }
        n
    };
    if n != expected {
        cx.fail(format!(
            "readdir of {dir}: {n} entries, expected {expected}"
        ));
    }
}

/// Lists `dir` and stats every entry, as `ls -l` does.
fn list_long(cx: &Ctx, tree: &Tree, dir: &str, expected: u64) {
    let n = if tree.tessera {
        let entries = cx.ok(cx.client.readdir_plus(dir));
        for (e, _) in &entries {
            cx.ok(cx.client.stat(&format!("{dir}/{}", e.name)));
        }
        entries.len() as u64
    } else {
        let mut n = 0;
        for e in cx.ok(std::fs::read_dir(dir)) {
            cx.ok(std::fs::symlink_metadata(cx.ok(e).path()));
            n += 1;
        }
        n
    };
    if n != expected {
        cx.fail(format!("ls -l of {dir}: {n} entries, expected {expected}"));
    }
}

/// The share of this process's stats since `before` that its attribute cache answered.
fn hit_rate(cx: &Ctx, before: tessera_client::Stats) -> f64 {
    let now = cx.client.stats();
    let hits = (now.attr_hits - before.attr_hits) as f64;
    let misses = (now.attr_misses - before.attr_misses) as f64;
    if hits + misses == 0.0 {
        0.0
    } else {
        hits / (hits + misses)
    }
}

fn remove(cx: &Ctx, tree: &Tree, path: &str) {
    if tree.tessera {
        cx.ok(cx.client.unlink(path));
    } else {
        cx.ok(std::fs::remove_file(path));
    }
}
