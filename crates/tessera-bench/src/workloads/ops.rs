//! Latency of the synchronisation primitives beside the physical limit of their transport.
//!
//! `ping_rtt` is a raw round trip of a 64-byte framed message over a Unix stream socket between
//! two processes (the transport a client uses to reach its daemon), measured in the same run.
//!
//! The same run also measures what bounds a remote read on this machine, each on one core:
//! `memcpy_mibs`, `mac_mibs` (the keyed BLAKE3 that seals peer frames), and the bulk throughput
//! of 8 MiB frames over a Unix stream and over loopback TCP between two processes
//! (`unix_bulk_mibs`, `tcp_bulk_mibs`). A remote read moves each byte through one TCP hop, one
//! Unix hop, two MAC passes and about two copies.
//! `daemon_rtt` is a request that does nothing, sent by the client library to its own daemon
//! and back on the library's real path (the request ring when the daemon offers one);
//! `daemon_socket_rtt` is the same request kept on the Unix socket, in alternating blocks of
//! the same run. `<way>_daemon_cpu_us` is the daemons' CPU per such request (the ring's
//! includes the daemon's watching), and `idle_daemon_cpu_ms_per_s` what the daemons use while
//! nobody asks anything, for a second after the last request.
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

const BULK: usize = 8 << 20;

/// Round trips of framed messages of `len` bytes to an echo process; microseconds each.
fn echo_round_trips<S: std::io::Read + std::io::Write>(
    cx: &Ctx,
    s: &mut S,
    len: usize,
    samples: u64,
) -> Vec<f64> {
    let msg = vec![7u8; len];
    let mut back = Vec::new();
    let mut out = Vec::with_capacity(samples as usize);
    for i in 0..samples + samples / 10 + 1 {
        let t = Instant::now();
        cx.ok(frame::write_frame(s, &msg));
        cx.ok(frame::read_frame_into(s, 64 << 20, &mut back));
        if i > samples / 10 {
            out.push(t.elapsed().as_secs_f64() * 1e6);
        }
        if back.len() != len {
            cx.fail("echo answered a different length");
        }
    }
    out
}

/// An echo process reached over a Unix socket and over loopback TCP.
struct EchoPeer {
    unix: std::os::unix::net::UnixStream,
    tcp: std::net::TcpStream,
    child: std::process::Child,
    path: std::path::PathBuf,
}

fn echo_peer(cx: &Ctx) -> EchoPeer {
    let path = cx.direct.join(format!("ping-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let listener = cx.ok(UnixListener::bind(&path));
    let tcp = cx.ok(std::net::TcpListener::bind("127.0.0.1:0"));
    let addr = cx.ok(tcp.local_addr());
    let exe = cx.ok(std::env::current_exe());
    let child = cx.ok(Command::new(exe)
        .arg("echo")
        .arg(&path)
        .arg(addr.to_string())
        .stdin(Stdio::null())
        .spawn());
    let (unix, _) = cx.ok(listener.accept());
    let (tcp, _) = cx.ok(tcp.accept());
    cx.ok(tcp.set_nodelay(true));
    EchoPeer {
        unix,
        tcp,
        child,
        path,
    }
}

/// The echo side of the transport measurements (a separate process, like a daemon).
pub fn echo(path: &std::path::Path, tcp: &str) -> anyhow::Result<()> {
    fn serve(mut s: impl std::io::Read + std::io::Write) {
        let mut m = Vec::new();
        while frame::read_frame_into(&mut s, 64 << 20, &mut m).is_ok() {
            if frame::write_frame(&mut s, &m).is_err() {
                break;
            }
        }
    }
    let unix = std::os::unix::net::UnixStream::connect(path)?;
    let tcp = std::net::TcpStream::connect(tcp)?;
    tcp.set_nodelay(true)?;
    let t = std::thread::spawn(move || serve(tcp));
    serve(unix);
    let _ = t.join();
    Ok(())
}

/// MiB/s of one core doing `f` over `bytes`, best of a few runs.
fn rate(bytes: usize, mut f: impl FnMut()) -> f64 {
    (0..5)
        .map(|_| {
            let t = Instant::now();
            f();
            bytes as f64 / (1u64 << 20) as f64 / t.elapsed().as_secs_f64()
        })
        .fold(0.0, f64::max)
}

/// Round trips of a request that does nothing, through the library's way and through the
/// socket alone, in alternating blocks; the daemons' CPU per request of each; the daemons'
/// CPU while idle.
fn daemon_round_trips(cx: &Ctx, samples: u64, m: &mut Metrics) {
    const BLOCK: u64 = 100;
    let (mut ring, mut socket) = (Vec::new(), Vec::new());
    let (mut ring_cpu, mut socket_cpu) = (0.0, 0.0);
    for _ in 0..3 {
        cx.ok(cx.client.nop(false));
        cx.ok(cx.client.nop(true));
    }
    while (ring.len() as u64) < samples {
        for (socket_only, out, cpu) in [
            (false, &mut ring, &mut ring_cpu),
            (true, &mut socket, &mut socket_cpu),
        ] {
            let before = cx.daemon_cpu_secs_fine();
            for _ in 0..BLOCK {
                let t = Instant::now();
                cx.ok(cx.client.nop(socket_only));
                out.push(t.elapsed().as_secs_f64() * 1e6);
            }
            *cpu += cx.daemon_cpu_secs_fine() - before;
        }
    }
    let n = ring.len() as f64;
    m.insert("daemon_rtt_p50_us".into(), percentile(&mut ring, 0.5));
    m.insert(
        "daemon_socket_rtt_p50_us".into(),
        percentile(&mut socket, 0.5),
    );
    m.insert("ring_daemon_cpu_us".into(), ring_cpu * 1e6 / n);
    m.insert("socket_daemon_cpu_us".into(), socket_cpu * 1e6 / n);
    m.insert(
        "daemon_ring".into(),
        if cx.client.has_ring() { 1.0 } else { 0.0 },
    );
    let before = cx.daemon_cpu_secs_fine();
    let t = Instant::now();
    std::thread::sleep(std::time::Duration::from_secs(1));
    let idle = cx.daemon_cpu_secs_fine() - before;
    m.insert(
        "idle_daemon_cpu_ms_per_s".into(),
        idle * 1e3 / t.elapsed().as_secs_f64(),
    );
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
        let EchoPeer {
            mut unix,
            mut tcp,
            mut child,
            path: sock,
        } = echo_peer(cx);
        let mut ping = echo_round_trips(cx, &mut unix, PING_BYTES, samples);
        m.insert("ping_rtt_p50_us".into(), percentile(&mut ping, 0.5));
        // Bulk: an 8 MiB frame there and back moves 16 MiB.
        let mibs_of = |mut rtts: Vec<f64>| {
            2.0 * BULK as f64 / (1u64 << 20) as f64 / (percentile(&mut rtts, 0.5) / 1e6)
        };
        m.insert(
            "unix_bulk_mibs".into(),
            mibs_of(echo_round_trips(cx, &mut unix, BULK, 20)),
        );
        m.insert(
            "tcp_bulk_mibs".into(),
            mibs_of(echo_round_trips(cx, &mut tcp, BULK, 20)),
        );
        drop((unix, tcp));
        let _ = child.wait();
        let _ = std::fs::remove_file(&sock);
        let src = vec![3u8; 64 << 20];
        let mut dst = vec![0u8; 64 << 20];
        m.insert(
            "memcpy_mibs".into(),
            rate(src.len(), || {
                std::hint::black_box(&mut dst).copy_from_slice(std::hint::black_box(&src));
                std::hint::black_box(&dst);
            }),
        );
        use tessera_proto::peer_auth::{Authenticator, Challenge, Direction, Security};
        let at = |security| {
            let challenge = Challenge {
                version: 0,
                node: 0,
                nonce: [1; 32],
                security,
            };
            Authenticator::new(b"bench", &challenge, 1, [2; 32])
        };
        let auth = at(Security::Integrity);
        m.insert(
            "mac_mibs".into(),
            rate(src.len(), || {
                std::hint::black_box(auth.mac_of(&src));
            }),
        );
        // What each peer security level costs a byte: the CRC32C of `auth`, the cipher of
        // `privacy` (which also copies the body, as its sender does).
        m.insert(
            "crc32c_mibs".into(),
            rate(src.len(), || {
                std::hint::black_box(crc32c::crc32c(&src));
            }),
        );
        let private = at(Security::Privacy);
        m.insert(
            "aes_gcm_mibs".into(),
            rate(src.len(), || {
                std::hint::black_box(private.seal(Direction::ToConnector, 0, &[], &[&src]));
            }),
        );
        daemon_round_trips(cx, samples, &mut m);
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
