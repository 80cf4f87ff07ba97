//! `tcp_stream_mibs`: the ceiling that remote reads are judged against. One TCP connection
//! between two hosts; the sender `send()`s 1 MiB user buffers until `bytes` have gone, the
//! receiver reads them all and answers one byte; the rate is bytes over the time from the
//! first send to that answer. Run as two ranks of mpirun (rank 0 sends, rank 1 receives),
//! which meet through a rendezvous file on the shared file system.

use anyhow::{Context, Result, bail};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

/// Bytes per `send()`.
const BUFFER: usize = 1 << 20;

/// The line the sender prints; the front end reads it.
pub const MARKER: &str = "tcp_stream_mibs ";

pub fn main(rendezvous: &Path, bytes: u64) -> Result<()> {
    let env: std::collections::HashMap<String, String> = std::env::vars().collect();
    match tessera_cli::launch::rank_from_env(&env) {
        Some(0) => send(rendezvous, bytes),
        Some(1) => receive(rendezvous),
        other => bail!("tcp-stream runs as ranks 0 (sender) and 1 (receiver), not {other:?}"),
    }
}

fn receive(rendezvous: &Path) -> Result<()> {
    let ip = tessera_daemon::listen::resolve("auto")?;
    let listener = TcpListener::bind((ip, 0))?;
    let addr = listener.local_addr()?;
    tessera_proto::config::write_atomic(rendezvous, addr.to_string().as_bytes())?;
    let (mut s, _) = listener.accept()?;
    let mut buf = vec![0u8; BUFFER];
    loop {
        match s.read(&mut buf)? {
            0 => break,
            _ => continue,
        }
    }
    s.write_all(b"k")?;
    Ok(())
}

fn send(rendezvous: &Path, bytes: u64) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let addr = loop {
        if let Ok(a) = std::fs::read_to_string(rendezvous) {
            break a;
        }
        if Instant::now() > deadline {
            bail!(
                "the receiver did not publish its address in {}",
                rendezvous.display()
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let mut s = TcpStream::connect(addr.trim()).with_context(|| format!("connecting to {addr}"))?;
    let buf = vec![0x5au8; BUFFER];
    let t = Instant::now();
    let mut sent = 0u64;
    while sent < bytes {
        let n = (bytes - sent).min(BUFFER as u64) as usize;
        s.write_all(&buf[..n])?;
        sent += n as u64;
    }
    s.shutdown(Shutdown::Write)?;
    let mut ack = [0u8; 1];
    s.read_exact(&mut ack)?;
    let secs = t.elapsed().as_secs_f64();
    println!("{MARKER}{}", bytes as f64 / f64::from(1u32 << 20) / secs);
    Ok(())
}
