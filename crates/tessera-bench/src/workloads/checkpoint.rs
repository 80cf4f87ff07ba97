//! PLFS's N-1 strided checkpoint: every rank writes `xfer`-byte pieces at a stride of
//! `ranks * xfer` into one shared file, then reads back the pieces of the next rank. Three ways
//! with the same data on the same disk: direct N-1 (pwrite into one file), direct N-N (one file
//! per rank, sequential), Tessera N-1 (commit model; reads with session). The order of the
//! three rotates with the repetition so none always runs first. Every phase starts from the
//! same page-cache state: dirty pages written back and, as root, the cache dropped, so the
//! reads are cold reads of the device; each way then reads the same bytes again, warm
//! (`<way>_read_warm_mibs`).

use super::verify;
use crate::rank::{Ctx, mibs, remove_quietly};
use crate::results::Metrics;
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use tessera_cli::demo::fill_pattern;
use tessera_client::{Model, OpenOptions};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    DirectN1,
    DirectNn,
    Tessera,
}

impl Way {
    fn name(self) -> &'static str {
        match self {
            Way::DirectN1 => "direct_n1",
            Way::DirectNn => "direct_nn",
            Way::Tessera => "tessera",
        }
    }
}

pub fn run(cx: &Ctx, rep: usize) -> Metrics {
    let p = &cx.params;
    let (n, r) = (cx.size as u64, cx.rank as u64);
    let xfer = p.xfer as usize;
    let count = p.per_rank.div_ceil(p.xfer);
    let off = |i: u64, rank: u64| (i * n + rank) * p.xfer;
    let mut data = vec![0u8; xfer * count as usize];
    for i in 0..count {
        fill_pattern(
            &mut data[i as usize * xfer..(i as usize + 1) * xfer],
            off(i, r),
        );
    }
    let total = p.xfer * count * n;
    let mut ways = [Way::DirectN1, Way::DirectNn, Way::Tessera];
    ways.rotate_left(rep % 3);
    let tpath = cx.tpath(&format!("ckpt-{rep}"));
    let n1 = cx.dpath(&format!("ckpt-n1-{rep}"));
    let nn = |rank: u64| cx.dpath(&format!("ckpt-nn-{rep}.{rank}"));
    let mut m = Metrics::new();
    let mut index_bytes = 0;

    for way in ways {
        cx.sync_disks();
        cx.mark(&format!("write-{}-start", way.name()));
        let secs = cx.timed(|| match way {
            Way::DirectN1 => {
                let f = cx.ok(std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(&n1));
                for i in 0..count {
                    cx.ok(f.write_all_at(
                        &data[i as usize * xfer..(i as usize + 1) * xfer],
                        off(i, r),
                    ));
                }
                if p.fsync {
                    cx.ok(f.sync_all());
                }
            }
            Way::DirectNn => {
                let mut f = cx.ok(std::fs::File::create(nn(r)));
                for i in 0..count as usize {
                    cx.ok(f.write_all(&data[i * xfer..(i + 1) * xfer]));
                }
                if p.fsync {
                    cx.ok(f.sync_all());
                }
            }
            Way::Tessera => {
                let mut f = cx.ok(cx.client.open(
                    &tpath,
                    OpenOptions::new()
                        .write(true)
                        .create(true)
                        .model(Model::Commit),
                ));
                for i in 0..count {
                    cx.ok(f.write_at(&data[i as usize * xfer..(i as usize + 1) * xfer], off(i, r)));
                }
                if p.fsync {
                    cx.ok(f.fsync());
                } else {
                    cx.ok(f.commit());
                }
                index_bytes = f.log_bytes().1;
                cx.ok(f.close());
            }
        });
        cx.mark(&format!("write-{}-end", way.name()));
        m.insert(format!("{}_write_mibs", way.name()), mibs(total, secs));
    }

    // Read back the next rank's pieces.
    let src = (r + 1) % n;
    let mut buf = crate::rank::touched_buffer(xfer * count as usize);
    let read_back = |way: Way, buf: &mut [u8]| match way {
        Way::DirectN1 => {
            let f = cx.ok(std::fs::File::open(&n1));
            for i in 0..count {
                cx.ok(f.read_exact_at(
                    &mut buf[i as usize * xfer..(i as usize + 1) * xfer],
                    off(i, src),
                ));
            }
        }
        Way::DirectNn => {
            let mut f = cx.ok(std::fs::File::open(nn(src)));
            cx.ok(f.read_exact(buf));
        }
        Way::Tessera => {
            let mut f = cx.ok(cx
                .client
                .open(&tpath, OpenOptions::new().read(true).model(Model::Session)));
            for i in 0..count {
                cx.ok(f.read_exact_at(
                    &mut buf[i as usize * xfer..(i as usize + 1) * xfer],
                    off(i, src),
                ));
            }
            cx.ok(f.close());
        }
    };
    // Each way is read twice: cold (the cache dropped first) and warm (right after, the same
    // bytes again), and reported as `<way>_read_mibs` and `<way>_read_warm_mibs`.
    for way in ways {
        for warm in [false, true] {
            buf.fill(0);
            let phase = format!("read{}-{}", if warm { "-warm" } else { "" }, way.name());
            if !warm {
                // Every cold read starts cold: without this the way written last found its
                // file in the page cache and the others did not, and the rotation of ways
                // made each read 2-5x faster in one repetition of three.
                cx.sync_disks();
            }
            cx.mark(&format!("{phase}-start"));
            let secs = cx.timed(|| read_back(way, &mut buf));
            cx.mark(&format!("{phase}-end"));
            for i in 0..count as usize {
                verify(
                    cx,
                    &buf[i * xfer..(i + 1) * xfer],
                    off(i as u64, src),
                    way.name(),
                );
            }
            let metric = if warm { "read_warm_mibs" } else { "read_mibs" };
            m.insert(format!("{}_{metric}", way.name()), mibs(total, secs));
        }
    }
    let index_total = cx.sum_u64(index_bytes);
    m.insert(
        "index_bytes_per_write".into(),
        index_total as f64 / (count * n) as f64,
    );

    cx.barrier();
    remove_quietly(&nn(r));
    if cx.rank == 0 {
        remove_quietly(&n1);
        cx.ok(cx.client.unlink(&tpath));
    }
    m
}
