//! The demo: an N-1 strided checkpoint through Tessera beside the same data written directly.
//!
//! Starts an instance of several daemons in a temporary directory, runs writer processes that
//! each write their share of one shared file in small strided pieces (47001 bytes by default,
//! the unaligned size of the PLFS paper) and commit, runs reader processes shifted by one rank
//! so every reader fetches another writer's bytes and verifies each one, flushes the file to
//! the PFS directory and compares it with the expected N-1 file, and measures the same
//! writes and reads done directly (N-1 into one file, N-N into one file per rank) on the same
//! disk. Timing starts when every rank is ready (a barrier through the parent) and covers
//! open, the I/O, commit and close.

use crate::instance::{self, CreateOptions, human};
use anyhow::{Context, Result, bail};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;
use tessera_client::{Client, Model, OpenOptions};
use tessera_core::placement::mix64;
use tessera_proto::InstanceLayout;

/// Knobs of the demo.
#[derive(Clone, Debug, clap::Args)]
pub struct DemoArgs {
    /// Directory for the instance, burst buffers, PFS and direct files (default: a new one in /tmp).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Writer (and reader) processes.
    #[arg(long, default_value_t = 4)]
    pub ranks: u32,
    /// Daemons to start.
    #[arg(long, default_value_t = 3)]
    pub daemons: u32,
    /// Bytes per write (units allowed: 47001, 1MiB).
    #[arg(long, default_value = "47001", value_parser = crate::size::parse_size)]
    pub xfer: u64,
    /// Bytes each rank writes, rounded up to whole writes (units allowed: 64MiB, 1g).
    #[arg(long, default_value = "64MiB", value_parser = crate::size::parse_size)]
    pub per_rank: u64,
    /// Keep the directory afterwards.
    #[arg(long)]
    pub keep: bool,
}

/// Which job a demo rank does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RankMode {
    TesseraWrite,
    TesseraRead,
    DirectN1Write,
    DirectN1Read,
    DirectNnWrite,
    DirectNnRead,
}

/// Arguments of one demo rank (run by the demo, not by hand).
#[derive(Clone, Debug, clap::Args)]
pub struct RankArgs {
    #[arg(long, value_enum)]
    pub mode: RankMode,
    #[arg(long)]
    pub rank: u32,
    #[arg(long)]
    pub ranks: u32,
    #[arg(long)]
    pub xfer: u64,
    #[arg(long)]
    pub count: u64,
    /// Tessera path, or direct file (N-1) / file prefix (N-N).
    #[arg(long)]
    pub target: String,
}

/// Byte at logical offset `off` of the demo's checkpoint file.
pub fn pattern_at(off: u64) -> u8 {
    (mix64(off >> 3) >> ((off & 7) * 8)) as u8
}

/// Fills `buf` with the pattern from logical offset `off` (a word at a time).
pub fn fill_pattern(buf: &mut [u8], off: u64) {
    let mut i = 0usize;
    // Unaligned head, byte by byte.
    while i < buf.len() && (off + i as u64) & 7 != 0 {
        buf[i] = pattern_at(off + i as u64);
        i += 1;
    }
    // Whole words: the 8 bytes of word w are mix64(w) in little-endian order.
    while i + 8 <= buf.len() {
        let w = (off + i as u64) >> 3;
        buf[i..i + 8].copy_from_slice(&mix64(w).to_le_bytes());
        i += 8;
    }
    while i < buf.len() {
        buf[i] = pattern_at(off + i as u64);
        i += 1;
    }
}

/// The first offset in `buf` (holding logical bytes from `off`) that differs from the pattern.
pub fn first_mismatch(buf: &[u8], off: u64) -> Option<usize> {
    let mut expected = vec![0u8; buf.len().min(1 << 20)];
    let mut at = 0;
    while at < buf.len() {
        let n = (buf.len() - at).min(expected.len());
        fill_pattern(&mut expected[..n], off + at as u64);
        if buf[at..at + n] != expected[..n] {
            return (at..at + n).find(|k| buf[*k] != expected[*k - at]);
        }
        at += n;
    }
    None
}

/// Logical offset of piece `i` of `rank` in the N-1 strided file.
fn n1_offset(i: u64, rank: u32, ranks: u32, xfer: u64) -> u64 {
    (i * u64::from(ranks) + u64::from(rank)) * xfer
}

fn now_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_nanos()
}

/// One rank: prepare, say "ready", wait for "go", do the timed work, report "done t0 t1 bytes".
pub fn rank_main(a: RankArgs) -> Result<()> {
    let ranks = a.ranks;
    let src = match a.mode {
        RankMode::TesseraRead | RankMode::DirectN1Read | RankMode::DirectNnRead => {
            (a.rank + 1) % ranks
        }
        _ => a.rank,
    };
    let piece = a.xfer as usize;
    let total = piece * a.count as usize;
    // Data is prepared before the clock starts.
    let mut data = vec![0u8; total];
    let writing = matches!(
        a.mode,
        RankMode::TesseraWrite | RankMode::DirectN1Write | RankMode::DirectNnWrite
    );
    if writing {
        for i in 0..a.count {
            fill_pattern(
                &mut data[i as usize * piece..(i as usize + 1) * piece],
                n1_offset(i, src, ranks, a.xfer),
            );
        }
    }
    let client = match a.mode {
        RankMode::TesseraWrite | RankMode::TesseraRead => Some(Client::from_env()?),
        _ => None,
    };
    println!("ready");
    std::io::stdout().flush()?;
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    let t0 = now_ns();
    match a.mode {
        RankMode::TesseraWrite => {
            let fs = client.as_ref().expect("tessera mode");
            let mut f = fs.open(
                &a.target,
                OpenOptions::new()
                    .write(true)
                    .create(true)
                    .model(Model::Commit),
            )?;
            for i in 0..a.count {
                f.write_at(
                    &data[i as usize * piece..(i as usize + 1) * piece],
                    n1_offset(i, src, ranks, a.xfer),
                )?;
            }
            f.commit()?;
            f.close()?;
        }
        RankMode::TesseraRead => {
            let fs = client.as_ref().expect("tessera mode");
            let mut f = fs.open(
                &a.target,
                OpenOptions::new().read(true).model(Model::Session),
            )?;
            for i in 0..a.count {
                f.read_exact_at(
                    &mut data[i as usize * piece..(i as usize + 1) * piece],
                    n1_offset(i, src, ranks, a.xfer),
                )?;
            }
            f.close()?;
        }
        RankMode::DirectN1Write => {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(&a.target)?;
            for i in 0..a.count {
                f.write_all_at(
                    &data[i as usize * piece..(i as usize + 1) * piece],
                    n1_offset(i, src, ranks, a.xfer),
                )?;
            }
        }
        RankMode::DirectN1Read => {
            let f = std::fs::File::open(&a.target)?;
            for i in 0..a.count {
                f.read_exact_at(
                    &mut data[i as usize * piece..(i as usize + 1) * piece],
                    n1_offset(i, src, ranks, a.xfer),
                )?;
            }
        }
        RankMode::DirectNnWrite => {
            let mut f = std::fs::File::create(format!("{}.{src}", a.target))?;
            for i in 0..a.count as usize {
                f.write_all(&data[i * piece..(i + 1) * piece])?;
            }
        }
        RankMode::DirectNnRead => {
            let mut f = std::fs::File::open(format!("{}.{src}", a.target))?;
            for i in 0..a.count as usize {
                f.read_exact(&mut data[i * piece..(i + 1) * piece])?;
            }
        }
    }
    let t1 = now_ns();
    if !writing {
        for i in 0..a.count {
            let off = n1_offset(i, src, ranks, a.xfer);
            let got = &data[i as usize * piece..(i as usize + 1) * piece];
            if let Some(k) = first_mismatch(got, off) {
                bail!(
                    "rank {}: verification failed at logical offset {} (piece {i} of rank {src}): got {:#04x}, expected {:#04x}",
                    a.rank,
                    off + k as u64,
                    got[k],
                    pattern_at(off + k as u64)
                );
            }
        }
    }
    println!("done {t0} {t1} {total}");
    Ok(())
}

/// Result of one phase: bytes moved by all ranks, and the time from first start to last end.
pub struct Phase {
    pub bytes: u64,
    pub secs: f64,
}

impl Phase {
    pub fn mibs(&self) -> f64 {
        self.bytes as f64 / (1u64 << 20) as f64 / self.secs
    }
}

/// Runs `ranks` demo ranks of one mode concurrently, with a start barrier.
pub fn run_phase(
    mode: RankMode,
    ranks: u32,
    xfer: u64,
    count: u64,
    target: &str,
    instance: Option<(&InstanceLayout, u32)>,
) -> Result<Phase> {
    let exe = std::env::current_exe()?;
    // Start every phase with no dirty pages pending, so no phase pays for another's writeback.
    // SAFETY: sync(2) has no preconditions.
    unsafe { libc::sync() };
    let mut children = Vec::new();
    for r in 0..ranks {
        let mut cmd = Command::new(&exe);
        cmd.arg("demo-rank")
            .arg("--mode")
            .arg(
                clap::ValueEnum::to_possible_value(&mode)
                    .expect("named")
                    .get_name(),
            )
            .args(["--rank", &r.to_string(), "--ranks", &ranks.to_string()])
            .args(["--xfer", &xfer.to_string(), "--count", &count.to_string()])
            .args(["--target", target])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if let Some((layout, daemons)) = instance {
            cmd.env("TESSERA_INSTANCE", &layout.dir)
                .env("TESSERA_NODE", (r % daemons).to_string());
        }
        children.push(cmd.spawn().context("spawning a demo rank")?);
    }
    let mut readers: Vec<BufReader<std::process::ChildStdout>> = children
        .iter_mut()
        .map(|c| BufReader::new(c.stdout.take().expect("piped")))
        .collect();
    let mut line = String::new();
    for (r, rd) in readers.iter_mut().enumerate() {
        line.clear();
        rd.read_line(&mut line)?;
        if line.trim() != "ready" {
            bail!("rank {r} failed to get ready ({mode:?})");
        }
    }
    for c in children.iter_mut() {
        c.stdin.as_mut().expect("piped").write_all(b"go\n")?;
    }
    let (mut first, mut last, mut bytes) = (u128::MAX, 0u128, 0u64);
    for (r, rd) in readers.iter_mut().enumerate() {
        line.clear();
        rd.read_line(&mut line)?;
        let parts: Vec<&str> = line.split_whitespace().collect();
        if parts.len() != 4 || parts[0] != "done" {
            bail!("rank {r} of {mode:?} failed (see its message above)");
        }
        first = first.min(parts[1].parse()?);
        last = last.max(parts[2].parse()?);
        bytes += parts[3].parse::<u64>()?;
    }
    for (r, mut c) in children.into_iter().enumerate() {
        let st = c.wait()?;
        if !st.success() {
            bail!("rank {r} of {mode:?} exited with {st}");
        }
    }
    Ok(Phase {
        bytes,
        secs: (last - first) as f64 / 1e9,
    })
}

/// Compares a flushed file with the expected N-1 checkpoint, byte for byte.
pub fn verify_flushed(path: &Path, size: u64) -> Result<()> {
    let f = std::fs::File::open(path)
        .with_context(|| format!("opening flushed file {}", path.display()))?;
    let len = f.metadata()?.len();
    if len != size {
        bail!(
            "flushed file {} has {len} bytes, expected {size}",
            path.display()
        );
    }
    let mut buf = vec![0u8; 8 << 20];
    let mut off = 0u64;
    while off < size {
        let n = (size - off).min(buf.len() as u64) as usize;
        f.read_exact_at(&mut buf[..n], off)?;
        if let Some(k) = first_mismatch(&buf[..n], off) {
            bail!(
                "flushed file differs from the expected N-1 file at byte {}",
                off + k as u64
            );
        }
        off += n as u64;
    }
    Ok(())
}

/// Sum of index-log bytes under a burst-buffer root.
fn index_bytes(dir: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.flatten()
        .map(|e| {
            let p = e.path();
            if p.is_dir() {
                index_bytes(&p)
            } else if p.extension().is_some_and(|x| x == "index") {
                e.metadata().map(|m| m.len()).unwrap_or(0)
            } else {
                0
            }
        })
        .sum()
}

pub fn run(a: DemoArgs) -> Result<()> {
    if a.ranks == 0 || a.daemons == 0 || a.xfer == 0 {
        bail!("--ranks, --daemons and --xfer must be positive");
    }
    let dir = match &a.dir {
        Some(d) => {
            std::fs::create_dir_all(d)?;
            d.clone()
        }
        None => instance::temp_dir("tessera-demo")?,
    };
    let count = a.per_rank.div_ceil(a.xfer);
    let total = count * a.xfer * u64::from(a.ranks);
    println!(
        "Tessera demo: {} ranks write an N-1 strided checkpoint of {} ({} writes of {} bytes each), {} daemons, in {}",
        a.ranks,
        human(total),
        count,
        a.xfer,
        a.daemons,
        dir.display()
    );
    let layout = InstanceLayout::new(dir.join("instance"));
    let pfs = dir.join("pfs");
    let direct = dir.join("direct");
    std::fs::create_dir_all(&direct)?;
    instance::create(
        &layout,
        &CreateOptions {
            daemons: a.daemons,
            pfs: pfs.clone(),
            bb_root: Some(dir.join("bb")),
            stripe_size: None,
            bb_capacity: 0,
            model: Model::Session,
            state_durability: Default::default(),
            set: Vec::new(),
        },
    )?;
    instance::start_all(&layout)?;
    println!("started {} daemons", a.daemons);
    let result = (|| -> Result<()> {
        let inst = Some((&layout, a.daemons));
        let started = Instant::now();
        let tw = run_phase(
            RankMode::TesseraWrite,
            a.ranks,
            a.xfer,
            count,
            "/tessera/ckpt",
            inst,
        )?;
        println!(
            "tessera: {} writers wrote and committed {} in {:.2} s",
            a.ranks,
            human(tw.bytes),
            tw.secs
        );
        let tr = run_phase(
            RankMode::TesseraRead,
            a.ranks,
            a.xfer,
            count,
            "/tessera/ckpt",
            inst,
        )?;
        println!(
            "tessera: {} readers (rank-shifted) read and verified every byte in {:.2} s",
            a.ranks, tr.secs
        );
        let client = Client::connect(layout.clone(), Some(0))?;
        let t = Instant::now();
        let flushed = client.flush_path("/tessera/ckpt")?;
        println!(
            "tessera: flushed {} to {} in {:.2} s",
            human(flushed),
            pfs.join("ckpt").display(),
            t.elapsed().as_secs_f64()
        );
        verify_flushed(&pfs.join("ckpt"), total)?;
        println!("tessera: the flushed file equals the expected N-1 file byte for byte");
        let idx = index_bytes(&dir.join("bb"));
        let writes = count * u64::from(a.ranks);

        let n1 = direct.join("n1").display().to_string();
        let nn = direct.join("nn").display().to_string();
        let dw1 = run_phase(RankMode::DirectN1Write, a.ranks, a.xfer, count, &n1, None)?;
        let dr1 = run_phase(RankMode::DirectN1Read, a.ranks, a.xfer, count, &n1, None)?;
        let dwn = run_phase(RankMode::DirectNnWrite, a.ranks, a.xfer, count, &nn, None)?;
        let drn = run_phase(RankMode::DirectNnRead, a.ranks, a.xfer, count, &nn, None)?;
        println!();
        println!(
            "{:<34} {:>12} {:>12}",
            "same data, same disk", "write MiB/s", "read MiB/s"
        );
        println!(
            "{:<34} {:>12.0} {:>12.0}",
            "direct N-1 (pwrite, one file)",
            dw1.mibs(),
            dr1.mibs()
        );
        println!(
            "{:<34} {:>12.0} {:>12.0}",
            "direct N-N (one file per rank)",
            dwn.mibs(),
            drn.mibs()
        );
        println!(
            "{:<34} {:>12.0} {:>12.0}",
            "tessera N-1 (commit / session)",
            tw.mibs(),
            tr.mibs()
        );
        println!(
            "tessera index: {idx} bytes for {writes} writes = {:.3} bytes per write (PLFS: 48)",
            idx as f64 / writes as f64
        );
        println!("demo finished in {:.1} s", started.elapsed().as_secs_f64());
        Ok(())
    })();
    let stopped = instance::stop_all(&layout);
    if result.is_ok() && stopped.is_ok() && !a.keep && a.dir.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    } else if a.keep || result.is_err() {
        println!("files kept in {}", dir.display());
    }
    result?;
    stopped?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_fill_equals_bytewise_pattern() {
        for off in [0u64, 1, 7, 8, 13, 1000] {
            let mut buf = vec![0u8; 77];
            fill_pattern(&mut buf, off);
            let want: Vec<u8> = (0..77).map(|i| pattern_at(off + i)).collect();
            assert_eq!(buf, want, "offset {off}");
            assert_eq!(first_mismatch(&buf, off), None);
            buf[40] ^= 1;
            assert_eq!(first_mismatch(&buf, off), Some(40));
        }
    }
}
