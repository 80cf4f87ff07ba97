//! Latency of the synchronisation primitives beside the physical limit of their transport.
//!
//! `ping_rtt` is a raw round trip of a 64-byte framed message over a Unix stream socket between
//! two processes (the transport a client uses to reach its daemon), measured in the same run.
//! `attach_rtt` and `query_rtt` are measured from rank 0 alone, so they show latency, not
//! queueing; `query_ops_per_s` has every rank query at once.

use crate::rank::{Ctx, percentile};
use crate::results::Metrics;
use std::os::unix::net::UnixListener;
use std::process::{Command, Stdio};
use std::time::Instant;
use tessera_client::{Model, OpenOptions};
use tessera_proto::frame;

const PING_BYTES: usize = 64;

/// Round trips of a framed message to an echo process, in microseconds.
fn ping(cx: &Ctx, samples: u64) -> Vec<f64> {
    let path = cx.direct.join(format!("ping-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let listener = cx.ok(UnixListener::bind(&path));
    let exe = cx.ok(std::env::current_exe());
    let mut child = cx.ok(Command::new(exe)
        .arg("echo")
        .arg(&path)
        .stdin(Stdio::null())
        .spawn());
    let (mut s, _) = cx.ok(listener.accept());
    let msg = vec![7u8; PING_BYTES];
    let mut out = Vec::with_capacity(samples as usize);
    for i in 0..samples + 100 {
        let t = Instant::now();
        cx.ok(frame::write_frame(&mut s, &msg));
        let back = cx.ok(frame::read_frame(&mut s, 1 << 20));
        if i >= 100 {
            out.push(t.elapsed().as_secs_f64() * 1e6);
        }
        assert_eq!(back.len(), PING_BYTES);
    }
    drop(s);
    let _ = child.wait();
    let _ = std::fs::remove_file(&path);
    out
}

/// The echo side of [`ping`] (a separate process, like a daemon).
pub fn echo(path: &std::path::Path) -> anyhow::Result<()> {
    let mut s = std::os::unix::net::UnixStream::connect(path)?;
    while let Ok(m) = frame::read_frame(&mut s, 1 << 20) {
        frame::write_frame(&mut s, &m)?;
    }
    Ok(())
}

pub fn run(cx: &Ctx, rep: usize) -> Metrics {
    let p = &cx.params;
    let samples = p.samples_ops;
    let path = cx.tpath(&format!("ops-{rep}"));
    let mut m = Metrics::new();
    // Every rank owns some bytes of the file, so queries have real answers.
    let mut f = cx.ok(cx.client.open(
        &path,
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .model(Model::Commit),
    ));
    let slot = |i: u64| (i * cx.size as u64 + cx.rank as u64) * 16;
    cx.ok(f.write_at(&[1u8; 8], slot(0)));
    cx.ok(f.commit());
    cx.barrier();
    if cx.rank == 0 {
        let mut ping = ping(cx, samples);
        m.insert("ping_rtt_p50_us".into(), percentile(&mut ping, 0.5));
        let mut attach = Vec::with_capacity(samples as usize);
        for i in 1..=samples {
            cx.ok(f.write_at(&[2u8; 8], slot(i)));
            let t = Instant::now();
            cx.ok(f.attach(slot(i), 8));
            attach.push(t.elapsed().as_secs_f64() * 1e6);
        }
        m.insert("attach_rtt_p50_us".into(), percentile(&mut attach, 0.5));
        let mut query = Vec::with_capacity(samples as usize);
        for i in 0..samples {
            let t = Instant::now();
            let owners = cx.ok(f.query(slot(i % 64), 8));
            query.push(t.elapsed().as_secs_f64() * 1e6);
            if owners.is_empty() {
                cx.fail("query found no owner of bytes this rank attached");
            }
        }
        m.insert(
            "query_rtt_p50_us".into(),
            percentile(&mut query.clone(), 0.5),
        );
        m.insert("query_p99_us".into(), percentile(&mut query, 0.99));
    }
    // Throughput: all ranks at once.
    let per_rank = samples;
    let secs = cx.timed(|| {
        for i in 0..per_rank {
            cx.ok(f.query(slot(i % 64), 8));
        }
    });
    m.insert(
        "query_ops_per_s".into(),
        (per_rank * cx.size as u64) as f64 / secs,
    );
    cx.ok(f.close());
    cx.barrier();
    if cx.rank == 0 {
        cx.ok(cx.client.unlink(&path));
    }
    m
}
