//! Wang, Mohror and Snir §6.2: SCR's partner scheme checkpointing HACC-IO, and restart.
//!
//! Checkpoint: each rank writes its 9 particle arrays (HACC-IO: x, y, z, vx, vy, vz, phi as
//! f32, id as i64, mask as u16: 38 bytes per particle) to its own file through its daemon, and
//! sends the same bytes over MPI to its partner (the rank half the job away, on another node),
//! which writes the copy through *its* daemon. Restart: every rank reads its checkpoint back,
//! except rank 0, which plays the failed node and restarts from the copy its partner holds.
//! Reads go in 256 KiB chunks. Both phases run under session and under commit consistency.

use super::verify;
use crate::rank::{Ctx, mibs};
use crate::results::Metrics;
use mpi::point_to_point as p2p;
use mpi::traits::*;
use tessera_cli::demo::fill_pattern;
use tessera_client::{Model, OpenOptions};

/// Bytes per particle over the 9 HACC-IO arrays.
const PARTICLE: u64 = 7 * 4 + 8 + 2;
/// Sizes of one particle in each of the 9 arrays.
const ARRAYS: [u64; 9] = [4, 4, 4, 4, 4, 4, 4, 8, 2];
const CHUNK: usize = 256 << 10;

pub fn run(cx: &Ctx, rep: usize) -> Metrics {
    let p = &cx.params;
    let (n, r) = (cx.size as u64, cx.rank as u64);
    let bytes = p.particles * PARTICLE;
    // Each rank's checkpoint is a distinct region of one logical pattern space, so the
    // partner's copy is checked against the sender's bytes.
    let base = |rank: u64| rank * bytes;
    let mut mine = vec![0u8; bytes as usize];
    fill_pattern(&mut mine, base(r));
    let partner = (r + n / 2) % n;
    let from = (r + n - n / 2) % n;
    let mut copy = vec![0u8; bytes as usize];
    let mut m = Metrics::new();
    let mut garbage = Vec::new();
    let mut models = [Model::Session, Model::Commit];
    models.rotate_left(rep % 2);
    for model in models {
        let name = model.name();
        let own = |rank: u64| cx.tpath(&format!("scr-{name}-{rep}-ckpt.{rank}"));
        let copy_of = |rank: u64| cx.tpath(&format!("scr-{name}-{rep}-partner.{rank}"));
        cx.sync_disks();
        let wsecs = cx.timed(|| {
            if n > 1 {
                p2p::send_receive_into(
                    &mine[..],
                    &cx.world.process_at_rank(partner as i32),
                    &mut copy[..],
                    &cx.world.process_at_rank(from as i32),
                );
            } else {
                copy.copy_from_slice(&mine);
            }
            for (path, data) in [(own(r), &mine), (copy_of(from), &copy)] {
                let mut f = cx.ok(cx.client.open(
                    &path,
                    OpenOptions::new().write(true).create(true).model(model),
                ));
                let mut at = 0u64;
                for size in ARRAYS {
                    let len = size * p.particles;
                    cx.ok(f.write_at(&data[at as usize..(at + len) as usize], at));
                    at += len;
                }
                if model == Model::Commit {
                    cx.ok(f.commit());
                }
                cx.ok(f.close());
            }
        });
        m.insert(
            format!("{name}_checkpoint_write_mibs"),
            mibs(2 * bytes * n, wsecs),
        );

        let mut back = crate::rank::touched_buffer(bytes as usize);
        let rsecs = cx.timed(|| {
            // Rank 0 lost its node: it restarts from the copy its partner wrote.
            let path = if r == 0 && n > 1 { copy_of(0) } else { own(r) };
            let mut f = cx.ok(cx
                .client
                .open(&path, OpenOptions::new().read(true).model(model)));
            for (i, chunk) in back.chunks_mut(CHUNK).enumerate() {
                cx.ok(f.read_exact_at(chunk, (i * CHUNK) as u64));
            }
            cx.ok(f.close());
        });
        verify(cx, &back, base(r), &format!("{name} restart"));
        m.insert(format!("{name}_restart_read_mibs"), mibs(bytes * n, rsecs));
        garbage.push(own(r));
        garbage.push(copy_of(from));
    }
    // Files go at the end of the repetition, outside the timed phases (see consistency.rs).
    cx.barrier();
    for path in garbage {
        cx.ok(cx.client.unlink(&path));
    }
    cx.barrier();
    m
}
