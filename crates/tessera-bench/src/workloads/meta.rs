//! mdtest-like metadata rates: every rank creates, stats and removes `files` files in one shared
//! directory, through Tessera and on the plain local file system, in the same run.
//!
//! Durability differs and is part of the result: a Tessera create is acknowledged after the
//! namespace shard committed it to its redb database (fsync, group commit); a direct create is
//! acknowledged by the kernel with no fsync.

use crate::rank::Ctx;
use crate::results::Metrics;
use tessera_client::{Model, OpenOptions};

pub fn run(cx: &Ctx, rep: usize) -> Metrics {
    let p = &cx.params;
    let r = cx.rank;
    let total = (p.files * cx.size as u64) as f64;
    let tdir = cx.tpath(&format!("meta-{rep}"));
    let ddir = cx.dpath(&format!("meta-{rep}"));
    if r == 0 {
        cx.ok(cx.client.mkdir(&tdir, 0o755));
        cx.ok(std::fs::create_dir_all(&ddir));
    }
    let tname = |i: u64| format!("{tdir}/f.{r}.{i}");
    let dname = |i: u64| ddir.join(format!("f.{r}.{i}"));
    let mut m = Metrics::new();
    let mut ways = [true, false];
    ways.rotate_left(rep % 2);
    for tessera in ways {
        let prefix = if tessera { "" } else { "direct_" };
        cx.sync_disks();
        let create = cx.timed(|| {
            for i in 0..p.files {
                if tessera {
                    let f = cx.ok(cx.client.open(
                        &tname(i),
                        OpenOptions::new()
                            .write(true)
                            .create(true)
                            .model(Model::Session),
                    ));
                    cx.ok(f.close());
                } else {
                    cx.ok(std::fs::File::create(dname(i)));
                }
            }
        });
        let stat = cx.timed(|| {
            for i in 0..p.files {
                if tessera {
                    let a = cx.ok(cx.client.stat(&tname(i)));
                    if a.size != 0 {
                        cx.fail("a new file is not empty");
                    }
                } else {
                    cx.ok(std::fs::metadata(dname(i)));
                }
            }
        });
        let remove = cx.timed(|| {
            for i in 0..p.files {
                if tessera {
                    cx.ok(cx.client.unlink(&tname(i)));
                } else {
                    cx.ok(std::fs::remove_file(dname(i)));
                }
            }
        });
        m.insert(format!("{prefix}create_per_s"), total / create);
        m.insert(format!("{prefix}stat_per_s"), total / stat);
        m.insert(format!("{prefix}remove_per_s"), total / remove);
    }
    cx.barrier();
    if r == 0 {
        cx.ok(cx.client.rmdir(&tdir));
        cx.ok(std::fs::remove_dir(&ddir));
    }
    m
}
