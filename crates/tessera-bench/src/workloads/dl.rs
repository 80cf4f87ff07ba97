//! Wang, Mohror and Snir §6.3, the "Preloaded" strategy of distributed deep learning: each rank writes its
//! share of 116 KiB samples into one data set; then, every epoch, the samples are shuffled (the
//! same permutation on every rank) and split evenly, and each rank reads its random subset,
//! mostly written by other ranks. Session consistency queries once per epoch (at open), commit
//! once per sample read; direct reads a plain shared file.

use super::verify;
use crate::rank::{Ctx, mibs, remove_quietly};
use crate::results::Metrics;
use rand::SeedableRng;
use rand::seq::SliceRandom;
use std::os::unix::fs::FileExt;
use tessera_cli::demo::fill_pattern;
use tessera_client::{Model, OpenOptions};

/// Average ImageNet-1K image size, as in the paper.
pub const SAMPLE: u64 = 116 << 10;

pub fn run(cx: &Ctx, rep: usize) -> Metrics {
    let p = &cx.params;
    let (n, r) = (cx.size as u64, cx.rank as u64);
    let spr = p.samples;
    let total = n * spr;
    let mut buf = vec![0u8; SAMPLE as usize];
    let mut got = crate::rank::touched_buffer((spr * SAMPLE) as usize);
    let tpath = cx.tpath(&format!("dl-{rep}"));
    let dpath = cx.dpath(&format!("dl-{rep}"));

    // Preload: rank r writes samples r*spr .. (r+1)*spr, through Tessera and directly.
    cx.timed(|| {
        let mut f = cx.ok(cx.client.open(
            &tpath,
            OpenOptions::new()
                .write(true)
                .create(true)
                .model(Model::Session),
        ));
        let d = cx.ok(std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&dpath));
        for k in r * spr..(r + 1) * spr {
            fill_pattern(&mut buf, k * SAMPLE);
            cx.ok(f.write_at(&buf, k * SAMPLE));
            cx.ok(d.write_all_at(&buf, k * SAMPLE));
        }
        cx.ok(f.close());
    });

    let mut m = Metrics::new();
    let mut ways = [Some(Model::Session), Some(Model::Commit), None];
    ways.rotate_left(rep % 3);
    for way in ways {
        let name = way.map_or("direct", |m| m.name());
        let mut secs = 0.0;
        for epoch in 0..p.epochs {
            let mut order: Vec<u64> = (0..total).collect();
            order.shuffle(&mut rand::rngs::StdRng::seed_from_u64(
                (rep as u64) << 32 | u64::from(epoch),
            ));
            let mine = &order[(r * spr) as usize..((r + 1) * spr) as usize];
            let sz = SAMPLE as usize;
            secs += cx.timed(|| match way {
                Some(model) => {
                    let mut f = cx.ok(cx
                        .client
                        .open(&tpath, OpenOptions::new().read(true).model(model)));
                    for (i, k) in mine.iter().enumerate() {
                        cx.ok(f.read_exact_at(&mut got[i * sz..(i + 1) * sz], k * SAMPLE));
                    }
                    cx.ok(f.close());
                }
                None => {
                    let f = cx.ok(std::fs::File::open(&dpath));
                    for (i, k) in mine.iter().enumerate() {
                        cx.ok(f.read_exact_at(&mut got[i * sz..(i + 1) * sz], k * SAMPLE));
                    }
                }
            });
            for (i, k) in mine.iter().enumerate() {
                verify(cx, &got[i * sz..(i + 1) * sz], k * SAMPLE, name);
            }
            got.fill(0);
        }
        m.insert(
            format!("{name}_read_mibs"),
            mibs(total * SAMPLE * u64::from(p.epochs), secs),
        );
    }
    cx.barrier();
    if cx.rank == 0 {
        cx.ok(cx.client.unlink(&tpath));
        remove_quietly(&dpath);
    }
    m
}
