//! Many writers of one file: what the daemons' ownership state, the whole-file query and a
//! restart cost when W processes write an N-1 strided checkpoint (or random offsets).
//!
//! Every writer is a real client of the library: its own connection, hello, client id, data and
//! index logs. The ranks host the writers in turn (writer w on rank w % ranks), each writer
//! writing its K pieces of B bytes and closing (the close attaches them), so W = 10,000 fits on
//! one machine. Writer w's piece k is at `(k * W + w) * B` (strided), or at a random slot of the
//! same file (`--random`). Then every rank opens the file (the open asks for the whole file's
//! owners), reads a sample of pieces and checks them, and rank 0 kills and restarts one daemon
//! and times it until it answers the whole-file query as before.
//!
//! Metrics: `rss_added_bytes_per_writer` (the daemons' VmRSS after the writers closed and the
//! daemons went quiet, minus before, over W), `shard_entries` (ownership entries over all
//! daemons), `attach_s` (time spent in the writers' closes, summed over writers, divided by
//! the ranks: the wall time a rank spends attaching), `write_s`, `query_bytes_per_writer` (the
//! encoded whole-file answer over W), `open_ms` (median open with its whole-file query),
//! `sample_read_p50_us`, `restart_s` (from spawning a killed daemon to its first correct
//! whole-file answer).

use super::verify;
use crate::rank::{Ctx, percentile};
use crate::results::Metrics;
use rand::{Rng, SeedableRng};
use std::time::{Duration, Instant};
use tessera_cli::demo::fill_pattern;
use tessera_client::{Client, InstanceLayout, Model, OpenOptions};

/// Opens per rank for the `open_ms` median.
const OPENS: usize = 5;

/// How long the daemons are left alone before their memory is measured: longer than the
/// state's idle checkpoint (2 s by default), so that the checkpoint is not half done.
const QUIET: Duration = Duration::from_secs(3);

/// Where writer `w` writes its piece `k`.
fn slot(cx: &Ctx, w: u64, k: u64) -> u64 {
    let p = &cx.params;
    let strided = k * p.writers + w;
    if p.random {
        let mut rng = rand::rngs::StdRng::seed_from_u64(strided);
        rng.random_range(0..p.writers * p.writes)
    } else {
        strided
    }
}

/// Sum of the daemons' resident memory, and of their ownership entries.
fn daemons(layout: &InstanceLayout, nodes: u32) -> anyhow::Result<(u64, u64)> {
    let mut rss = 0;
    let mut entries = 0;
    for n in 0..nodes {
        let s = Client::connect(layout.clone(), Some(n))?.status()?;
        rss += vm_rss(s.pid)?;
        entries += s.ownership_entries;
    }
    Ok((rss, entries))
}

/// Resident memory of a process, from /proc (VmRSS, in bytes).
fn vm_rss(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .ok_or_else(|| anyhow::anyhow!("no VmRSS in /proc/{pid}/status"))?;
    Ok(kib * 1024)
}

/// The encoded size of the whole-file answer, and the answer.
fn whole_file(client: &Client, path: &str) -> anyhow::Result<(u64, tessera_proto::Owners)> {
    let mut f = client.open(path, OpenOptions::new().read(true).model(Model::Session))?;
    let runs = f.query_file()?;
    let owners = tessera_proto::Owners {
        pfs_upto: None,
        size: Some(f.len()?),
        runs,
        next: None,
    };
    f.close()?;
    Ok((tessera_proto::frame::encode(&owners).len() as u64, owners))
}

pub fn run(cx: &Ctx, rep: usize) -> Metrics {
    let p = &cx.params;
    let (n, r) = (cx.size as u64, cx.rank as u64);
    let path = cx.tpath(&format!("scale-{rep}"));
    let layout = cx.layout.clone();
    let nodes = p.daemons;
    let before = if r == 0 {
        cx.ok(daemons(&layout, nodes)).0
    } else {
        0
    };
    cx.barrier();

    // Writers, one after another on each rank, each a client of its own.
    let mut buf = vec![0u8; p.xfer as usize];
    let mut attach = 0.0;
    let write_s = cx.timed(|| {
        for w in (r..p.writers).step_by(n as usize) {
            let node = (w % u64::from(nodes)) as u32;
            let client = cx.ok(Client::connect(layout.clone(), Some(node)));
            let mut f = cx.ok(client.open(
                &path,
                OpenOptions::new()
                    .write(true)
                    .create(true)
                    .model(Model::Session),
            ));
            for k in 0..p.writes {
                let off = slot(cx, w, k) * p.xfer;
                fill_pattern(&mut buf, off);
                cx.ok(f.write_at(&buf, off));
            }
            let t = Instant::now();
            cx.ok(f.close());
            attach += t.elapsed().as_secs_f64();
        }
    });
    let attach_s = cx.sum_f64(attach) / n as f64;

    let mut m = Metrics::new();
    if r == 0 {
        std::thread::sleep(QUIET);
        let (after, entries) = cx.ok(daemons(&layout, nodes));
        m.insert(
            "rss_added_bytes_per_writer".into(),
            after.saturating_sub(before) as f64 / p.writers as f64,
        );
        m.insert("shard_entries".into(), entries as f64);
        let (bytes, _) = cx.ok(whole_file(&cx.client, &path));
        m.insert(
            "query_bytes_per_writer".into(),
            bytes as f64 / p.writers as f64,
        );
    }
    m.insert("attach_s".into(), attach_s);
    m.insert("write_s".into(), write_s);
    cx.barrier();

    // Readers: opens with their whole-file query, then sampled pieces of random writers.
    let mut opens = Vec::with_capacity(OPENS);
    let mut f = None;
    for _ in 0..OPENS {
        let t = Instant::now();
        let h = cx.ok(cx
            .client
            .open(&path, OpenOptions::new().read(true).model(Model::Session)));
        opens.push(t.elapsed().as_secs_f64() * 1e3);
        f = Some(h);
    }
    let mut f = f.expect("opened at least once");
    let mut rng = rand::rngs::StdRng::seed_from_u64(r << 32 | rep as u64);
    let mut reads = Vec::with_capacity(p.samples as usize);
    for _ in 0..p.samples {
        let (w, k) = (
            rng.random_range(0..p.writers),
            rng.random_range(0..p.writes),
        );
        let off = slot(cx, w, k) * p.xfer;
        let t = Instant::now();
        cx.ok(f.read_at(&mut buf, off));
        reads.push(t.elapsed().as_secs_f64() * 1e6);
        verify(cx, &buf, off, "scale: sampled read");
    }
    cx.ok(f.close());
    let open_ms = cx.gather_f64(&opens);
    let reads = cx.gather_f64(&reads);
    cx.barrier();

    if r == 0 {
        m.insert("open_ms".into(), percentile(&mut open_ms.clone(), 0.5));
        m.insert(
            "sample_read_p50_us".into(),
            percentile(&mut reads.clone(), 0.5),
        );
        m.insert("restart_s".into(), cx.ok(restart(cx, &path)));
        cx.ok(cx.client.unlink(&path));
    }
    cx.barrier();
    m
}

/// Kills the daemon of the last node and starts it again; seconds from the spawn to its first
/// whole-file answer equal to the one before.
fn restart(cx: &Ctx, path: &str) -> anyhow::Result<f64> {
    let node = cx.params.daemons - 1;
    let (_, want) = whole_file(&cx.client, path)?;
    let pid = Client::connect(cx.layout.clone(), Some(node))?
        .status()?
        .pid;
    // SAFETY: kill(2) with a pid read from the daemon's status; no memory is involved.
    if unsafe { libc::kill(pid as i32, libc::SIGKILL) } != 0 {
        anyhow::bail!(
            "killing daemon {node} (pid {pid}): {}",
            std::io::Error::last_os_error()
        );
    }
    while tessera_cli::instance::process_alive(pid as i32) {
        std::thread::yield_now();
    }
    let t = Instant::now();
    tessera_cli::instance::start_node(&cx.layout, node)?;
    loop {
        match whole_file(&cx.client, path) {
            Ok((_, got)) if got == want => return Ok(t.elapsed().as_secs_f64()),
            Ok(_) | Err(_) if t.elapsed() < Duration::from_secs(60) => {}
            Ok(_) => anyhow::bail!("the restarted daemon answers differently"),
            Err(e) => return Err(e),
        }
    }
}
