//! The tasks of `tessera bench locality` (FusionFS and Swift), run by mpirun on the emulated hosts: each
//! rank takes the plan's tasks for its own host (every `per_host`-th, by its local rank) and
//! writes or reads their files, timing only its own I/O; or, as one rank, measures the cost of
//! `locate` beside a forwarded no-op.

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Instant;
use tessera_client::{Client, Model, OpenOptions, RangeAsk};

/// The line a task prints its result on.
pub const MARKER: &str = "locality-task ";

/// What a phase does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Write each task's Tessera file and its direct copy.
    Write,
    /// Read each task's Tessera file.
    Read,
    /// Migrate each task's Tessera file here on open, then read it.
    Migrate,
    /// Read each task's direct copy (a plain local file).
    Direct,
    /// Remove each task's Tessera file.
    Remove,
    /// One rank: the cost of locate (see [`locate_cost`]).
    Locate,
}

/// One task: a file, the host it runs on, and its direct copy on that host's local storage.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Task {
    pub host: String,
    pub path: String,
    pub direct: PathBuf,
}

/// A phase's plan, written by the front end and read by every rank.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Plan {
    pub mode: Mode,
    pub per_host: usize,
    pub size: u64,
    pub tasks: Vec<Task>,
}

/// What one rank did.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Done {
    pub bytes: u64,
    pub start_ns: u128,
    pub end_ns: u128,
    pub remote: u64,
    pub local: u64,
    pub migrated: u64,
    /// Only for [`Mode::Locate`]: its metrics.
    pub metrics: Option<crate::results::Metrics>,
}

const CHUNK: usize = 8 << 20;

fn now_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// The byte at `off` of file `path`: depends on both (constant within a 4 KiB page), so a
/// read of the wrong file or page shows.
#[cfg(test)]
fn byte_at(path: &str, off: u64) -> u8 {
    page_byte(path_hash(path), off)
}

fn path_hash(path: &str) -> u64 {
    path.bytes()
        .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)))
}

fn page_byte(hash: u64, off: u64) -> u8 {
    (hash.wrapping_add(off / 4096) % 251) as u8
}

pub fn main(plan: &Path) -> Result<()> {
    let plan: Plan = serde_json::from_slice(&std::fs::read(plan)?).context("reading the plan")?;
    if plan.mode == Mode::Locate {
        let metrics = locate_cost()?;
        let done = Done {
            metrics: Some(metrics),
            ..Done::default()
        };
        println!("{MARKER}{}", serde_json::to_string(&done)?);
        return Ok(());
    }
    let me = tessera_proto::hosts::normalize_host(&tessera_proto::hosts::this_host());
    let local_rank: usize = std::env::var("OMPI_COMM_WORLD_LOCAL_RANK")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mine: Vec<&Task> = plan
        .tasks
        .iter()
        .filter(|t| tessera_proto::hosts::normalize_host(&t.host) == me)
        .enumerate()
        .filter(|(i, _)| i % plan.per_host.max(1) == local_rank)
        .map(|(_, t)| t)
        .collect();
    let c = Client::from_env()?;
    let mut done = Done {
        start_ns: now_ns(),
        ..Done::default()
    };
    let mut buf = vec![0u8; CHUNK];
    for t in &mine {
        done.bytes += match plan.mode {
            Mode::Write => write(&c, t, plan.size, &mut buf)?,
            Mode::Read | Mode::Migrate => read(&c, t, plan.mode == Mode::Migrate, &mut buf)?,
            Mode::Direct => read_direct(t, &mut buf)?,
            Mode::Remove => {
                c.unlink(&t.path)?;
                0
            }
            Mode::Locate => unreachable!("handled above"),
        };
    }
    done.end_ns = now_ns();
    let s = c.stats();
    done.remote = s.read.remote + s.read.read_ahead_fetched;
    done.local = s.read.node_logs + s.read.own_log;
    done.migrated = s.migrated;
    println!("{MARKER}{}", serde_json::to_string(&done)?);
    Ok(())
}

fn write(c: &Client, t: &Task, size: u64, buf: &mut [u8]) -> Result<u64> {
    let mut f = c.open(
        &t.path,
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .model(Model::Commit),
    )?;
    if let Some(dir) = t.direct.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut direct = std::fs::File::create(&t.direct)
        .with_context(|| format!("creating {}", t.direct.display()))?;
    let hash = path_hash(&t.path);
    let mut at = 0;
    while at < size {
        let n = (size - at).min(buf.len() as u64) as usize;
        // `at` stays page-aligned: CHUNK is a multiple of 4 KiB.
        for (k, page) in buf[..n].chunks_mut(4096).enumerate() {
            page.fill(page_byte(hash, at + (k * 4096) as u64));
        }
        f.write_at(&buf[..n], at)?;
        std::io::Write::write_all(&mut direct, &buf[..n])?;
        at += n as u64;
    }
    f.close()?;
    Ok(size)
}

fn read(c: &Client, t: &Task, migrate: bool, buf: &mut [u8]) -> Result<u64> {
    let mut f = c.open(&t.path, OpenOptions::new().read(true).model(Model::Session))?;
    if migrate {
        f.migrate_here()?;
    }
    let mut at = 0u64;
    loop {
        let n = f.read_at(buf, at)?;
        if n == 0 {
            break;
        }
        check(&t.path, at, &buf[..n])?;
        at += n as u64;
    }
    Ok(at)
}

fn read_direct(t: &Task, buf: &mut [u8]) -> Result<u64> {
    use std::io::Read;
    let mut f = std::fs::File::open(&t.direct)
        .with_context(|| format!("opening {}", t.direct.display()))?;
    let mut at = 0u64;
    loop {
        let n = f.read(buf)?;
        if n == 0 {
            break;
        }
        check(&t.path, at, &buf[..n])?;
        at += n as u64;
    }
    Ok(at)
}

/// One byte per 4 KiB page checked: cheap, and a wrong page shows.
fn check(path: &str, at: u64, data: &[u8]) -> Result<()> {
    let hash = path_hash(path);
    for k in (0..data.len()).step_by(4096) {
        let off = at + k as u64;
        let want = page_byte(hash, off);
        if data[k] != want {
            bail!("{path}: byte {off} is {}, expected {want}", data[k]);
        }
    }
    Ok(())
}

/// Files made for the batch of 1,000 paths.
const LOCATE_FILES: usize = 1000;

/// The cost of `locate` with no client-side cache: the p50 of single calls on one file, 1,000
/// single calls on 1,000 paths in a row, one batch of the same 1,000 paths; beside the p50 of
/// a no-op forwarded to the daemon holding the file's name (client, its daemon, that daemon).
fn locate_cost() -> Result<crate::results::Metrics> {
    let c = Client::from_env()?;
    let (me, _) = c.identity();
    let nodes = c.config().nodes;
    let paths: Vec<String> = (0..LOCATE_FILES)
        .map(|i| format!("/tessera/locate-cost/f{i}"))
        .collect();
    if c.stat("/tessera/locate-cost").is_err() {
        c.mkdir("/tessera/locate-cost", 0o755)?;
        for p in &paths {
            let mut f = c.create(p)?;
            f.write_at(b"x", 0)?;
            f.close()?;
        }
    }
    // A file whose name lives on another daemon: the answer is forwarded there.
    // Names are placed by their path under the mount.
    let mount = c.config().mount;
    let shard = |p: &str| -> Result<u32> {
        Ok(tessera_core::placement::path_shard(
            &tessera_core::path::resolve(p, &mount)?,
            nodes,
        ))
    };
    let mut probe = &paths[0];
    for p in &paths {
        if nodes == 1 || shard(p)? != me {
            probe = p;
            break;
        }
    }
    let remote = shard(probe)?;
    const SAMPLES: usize = 1000;
    let mut locate_us = Vec::with_capacity(SAMPLES);
    let mut ping_us = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let t = Instant::now();
        c.locate(probe, 0, None)?;
        locate_us.push(t.elapsed().as_secs_f64() * 1e6);
        let t = Instant::now();
        c.forward_ping(remote)?;
        ping_us.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let t = Instant::now();
    for p in &paths {
        c.locate(p, 0, None)?;
    }
    let single = t.elapsed().as_secs_f64();
    let asks: Vec<RangeAsk> = paths.iter().map(RangeAsk::file).collect();
    let t = Instant::now();
    let answers = c.locate_many(&asks, 16)?;
    let batch = t.elapsed().as_secs_f64();
    if let Some(e) = answers.iter().find_map(|a| a.as_ref().err()) {
        bail!("a batch locate failed: {}", e.message);
    }
    let mut m = crate::results::Metrics::new();
    m.insert("locate_p50_us".into(), median(&mut locate_us));
    m.insert("forward_ping_p50_us".into(), median(&mut ping_us));
    m.insert("locate_single_1000_s".into(), single);
    m.insert("locate_batch_1000_s".into(), batch);
    Ok(m)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[cfg(test)]
mod tests {
    #[test]
    fn bytes_depend_on_the_file_and_the_page() {
        use super::byte_at;
        assert_ne!(byte_at("/tessera/a", 0), byte_at("/tessera/b", 0));
        assert_ne!(byte_at("/tessera/a", 0), byte_at("/tessera/a", 4096));
        assert_eq!(byte_at("/tessera/a", 1), byte_at("/tessera/a", 4095));
    }
}
