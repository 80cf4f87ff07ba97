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

mod pattern;
mod phase;
mod rank;

pub use pattern::{fill_pattern, first_mismatch, pattern_at};
pub use phase::{Phase, Placement, run_phase};
pub use rank::{RankArgs, RankMode, rank_main};

use crate::emulated::EmulatedHosts;
use crate::instance::{self, CreateOptions, human};
use anyhow::{Context, Result, bail};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tessera_client::{Client, Model};
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
    /// Run daemons and ranks on this many emulated hosts, launched by mpirun (one daemon
    /// per host; needs `scripts/hosts.sh up N` and its environment: `scripts/demo.sh
    /// --hosts N` does both).
    #[arg(long)]
    pub hosts: Option<u32>,
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
    if a.ranks == 0 || a.daemons == 0 || a.xfer == 0 || a.hosts == Some(0) {
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
        "Tessera demo: {} ranks write an N-1 strided checkpoint of {} ({} writes of {} bytes each), {}, in {}",
        a.ranks,
        human(total),
        count,
        a.xfer,
        match a.hosts {
            Some(h) => format!("{h} emulated hosts"),
            None => format!("{} daemons", a.daemons),
        },
        dir.display()
    );
    let layout = InstanceLayout::new(dir.join("instance"));
    let pfs = dir.join("pfs");
    let direct = dir.join("direct");
    std::fs::create_dir_all(&direct)?;
    let hosts = a
        .hosts
        .map(|h| EmulatedHosts::prepare(h, &dir))
        .transpose()?;
    let daemons = hosts.as_ref().map_or(a.daemons, |h| h.count);
    let mut set = Vec::new();
    if hosts.is_some() {
        set.push("listen_host='auto'".to_string());
    }
    instance::create(
        &layout,
        &CreateOptions {
            daemons,
            pfs: pfs.clone(),
            bb_root: Some(
                hosts
                    .as_ref()
                    .map_or_else(|| dir.join("bb"), |h| h.bb_root.clone()),
            ),
            stripe_size: None,
            bb_capacity: 0,
            model: Model::Session,
            state_durability: Default::default(),
            set,
        },
    )?;
    match &hosts {
        Some(h) => {
            h.start_daemons(&layout)?;
            println!("started {daemons} daemons through mpirun, one per host:");
            for e in layout.load_hosts()?.nodes {
                println!("  node {}: host {}, address {}", e.node, e.host, e.addr);
            }
        }
        None => {
            instance::start_all(&layout)?;
            println!("started {daemons} daemons");
        }
    }
    let barrier = dir.join("barrier");
    let placement = match &hosts {
        Some(h) => Placement::Mpirun {
            layout: &layout,
            hostfile: &h.hostfile,
            barrier: &barrier,
        },
        None => Placement::Local {
            layout: &layout,
            daemons,
        },
    };
    let result = (|| -> Result<()> {
        let started = Instant::now();
        let tw = run_phase(
            RankMode::TesseraWrite,
            a.ranks,
            a.xfer,
            count,
            "/tessera/ckpt",
            placement,
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
            placement,
        )?;
        println!(
            "tessera: {} readers (rank-shifted) read and verified every byte in {:.2} s",
            a.ranks, tr.secs
        );
        let t = Instant::now();
        let flushed = match &hosts {
            Some(h) => {
                h.flush(&layout, "/tessera/ckpt")?;
                std::fs::metadata(pfs.join("ckpt"))?.len()
            }
            None => Client::connect(layout.clone(), Some(0))?.flush_path("/tessera/ckpt")?,
        };
        println!(
            "tessera: flushed {} to {} in {:.2} s",
            human(flushed),
            pfs.join("ckpt").display(),
            t.elapsed().as_secs_f64()
        );
        verify_flushed(&pfs.join("ckpt"), total)?;
        println!("tessera: the flushed file equals the expected N-1 file byte for byte");
        let idx = match &hosts {
            Some(h) => h.index_bytes()?,
            None => index_bytes(&dir.join("bb")),
        };
        let writes = count * u64::from(a.ranks);

        let n1 = direct.join("n1").display().to_string();
        let nn = direct.join("nn").display().to_string();
        let dw1 = run_phase(
            RankMode::DirectN1Write,
            a.ranks,
            a.xfer,
            count,
            &n1,
            Placement::Direct,
        )?;
        let dr1 = run_phase(
            RankMode::DirectN1Read,
            a.ranks,
            a.xfer,
            count,
            &n1,
            Placement::Direct,
        )?;
        let dwn = run_phase(
            RankMode::DirectNnWrite,
            a.ranks,
            a.xfer,
            count,
            &nn,
            Placement::Direct,
        )?;
        let drn = run_phase(
            RankMode::DirectNnRead,
            a.ranks,
            a.xfer,
            count,
            &nn,
            Placement::Direct,
        )?;
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
    if let Some(h) = &hosts
        && result.is_ok()
        && !a.keep
    {
        h.remove_bb();
    }
    if result.is_ok() && stopped.is_ok() && !a.keep && a.dir.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    } else if a.keep || result.is_err() {
        println!("files kept in {}", dir.display());
    }
    result?;
    stopped?;
    Ok(())
}
