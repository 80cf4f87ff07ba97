//! `tessera bench atomic`: Aarestad et al.'s experiments with every lock strategy of MPI-IO atomic
//! mode. Each (ranks, repetition, strategy) runs the MPI-IO program `c/atomic_bench.c` through
//! the interposer in a fresh instance (so the daemons' peak of lock holders is the run's
//! own), with `TESSERA_ATOMIC_LOCKS` set to the strategy and the lock trace on; the strategies
//! rotate with the repetition so none always runs first. Bandwidth comes from the program, the
//! lock counts and the compatible sets from the trace, the holders granted at once from the
//! daemons.

use crate::lock_trace::{self, Trace};
use crate::results::{Metrics, summary};
use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use std::path::{Path, PathBuf};
use std::process::Command;
use tessera_cli::instance::{self, CreateOptions};
use tessera_client::{Client, InstanceLayout, Model};

/// The programs the runs execute (compiled at the start of a run: `mpicc`, and `h5pcc` for
/// the HDF5 one).
const SOURCE: &str = include_str!("../c/atomic_bench.c");
const FLASH_SOURCE: &str = include_str!("../c/flash_bench.c");

/// The strategies, in the metric names' spelling.
const STRATEGIES: [&str; 4] = ["none", "whole", "extent", "list"];

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AtomicPattern {
    /// ROMIO's coll_perf: a cube of ints in a 3-D block distribution (darray).
    Block3d,
    /// A FLASH-IO-like checkpoint through parallel HDF5: a data set per variable, blocks
    /// dealt round-robin, variables interleaved in memory.
    Flash,
    /// The tile reader: 6 ranks read overlapping 1024x768 tiles of one frame.
    Tile,
}

impl AtomicPattern {
    fn name(self) -> &'static str {
        match self {
            AtomicPattern::Block3d => "block3d",
            AtomicPattern::Flash => "flash",
            AtomicPattern::Tile => "tile",
        }
    }
}

#[derive(Clone, Debug, Args)]
pub struct AtomicOpts {
    #[arg(long, value_enum, default_value = "block3d")]
    pub pattern: AtomicPattern,
    /// Rank counts, comma-separated (default: the paper's, 8,27,64 for block3d, 8,16,32 for
    /// flash, 6 for tile).
    #[arg(long, value_delimiter = ',')]
    pub ranks: Vec<u32>,
    /// block3d: ints along each edge of the cube.
    #[arg(long, default_value_t = 256)]
    pub edge: u32,
    /// flash: blocks of 8x8x8 cells per rank.
    #[arg(long, default_value_t = 20)]
    pub blocks: u32,
    /// Repetitions of every strategy at every rank count.
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// Daemons of each instance.
    #[arg(long, default_value_t = 2)]
    pub daemons: u32,
    /// Open MPI's MPI-IO implementation: ompio or romio321.
    #[arg(long, default_value = "ompio")]
    pub io: String,
    /// Directory on the disk to measure.
    #[arg(long, default_value = "/tmp")]
    pub dir: PathBuf,
    /// Where the per-repetition records go (the report reads them there).
    #[arg(long, default_value = "results/atomic")]
    pub results: PathBuf,
    /// Print one JSON object with the medians as the last line.
    #[arg(long)]
    pub json: bool,
}

/// What one run of the program measured.
struct Outcome {
    bytes: f64,
    write_s: f64,
    read_s: f64,
    trace: Trace,
    peak_holders: u64,
}

pub fn run(o: AtomicOpts) -> Result<()> {
    let ranks = if o.ranks.is_empty() {
        match o.pattern {
            AtomicPattern::Block3d => vec![8, 27, 64],
            AtomicPattern::Flash => vec![8, 16, 32],
            AtomicPattern::Tile => vec![6],
        }
    } else {
        o.ranks.clone()
    };
    if o.reps == 0 || o.daemons == 0 || ranks.contains(&0) {
        bail!("--reps, --daemons and every --ranks value must be positive");
    }
    let preload = std::env::current_exe()?.with_file_name("libtessera_preload.so");
    if !preload.exists() {
        bail!(
            "{} is not built; build it with `cargo build --release -p tessera-preload`",
            preload.display()
        );
    }
    let root = o
        .dir
        .join(format!("tessera-atomic-{:08x}", rand::random::<u32>()));
    std::fs::create_dir_all(&root)?;
    // The scratch directory goes whether the runs succeed or not.
    let measured = measure(&o, &ranks, &root, &preload);
    let _ = std::fs::remove_dir_all(&root);
    let (by_ranks, records) = measured?;
    let when = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    std::fs::create_dir_all(&o.results)?;
    let file = o
        .results
        .join(format!("atomic-{}-{when}.json", o.pattern.name()));
    // The size option of the pattern only: the others do not apply to it.
    let size = match o.pattern {
        AtomicPattern::Block3d => format!(" --edge {}", o.edge),
        AtomicPattern::Flash => format!(" --blocks {}", o.blocks),
        AtomicPattern::Tile => String::new(),
    };
    let command = format!(
        "tessera bench atomic --pattern {} --ranks {}{size} --reps {} --daemons {} --io {}",
        o.pattern.name(),
        ranks
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(","),
        o.reps,
        o.daemons,
        o.io
    );
    let record = serde_json::json!({
        "workload": "atomic",
        "pattern": o.pattern.name(),
        "command": command,
        "machine": crate::results::Machine::probe(&o.dir),
        "when": when,
        "runs": records,
    });
    std::fs::write(&file, serde_json::to_string_pretty(&record)?)?;
    println!("full data: {}", file.display());
    if o.json {
        let first = by_ranks
            .get(&ranks[0].to_string())
            .cloned()
            .unwrap_or_default();
        let out = serde_json::json!({
            "workload": "atomic",
            "pattern": o.pattern.name(),
            "metrics": first,
            "by_ranks": by_ranks,
        });
        println!("{out}");
    }
    Ok(())
}

/// Every (ranks, repetition, strategy) run in `root`: the medians per rank count, and the
/// records of every repetition.
fn measure(
    o: &AtomicOpts,
    ranks: &[u32],
    root: &Path,
    preload: &Path,
) -> Result<(
    serde_json::Map<String, serde_json::Value>,
    Vec<serde_json::Value>,
)> {
    let exe = compile(root, o.pattern)?;
    let mut by_ranks = serde_json::Map::new();
    let mut records = Vec::new();
    for &p in ranks {
        let mut reps: Vec<Metrics> = Vec::new();
        for rep in 0..o.reps {
            let mut order = STRATEGIES;
            order.rotate_left(rep % STRATEGIES.len());
            let mut m = Metrics::new();
            for strategy in order {
                eprintln!(
                    "atomic {}: {p} ranks, repetition {}, strategy {strategy}",
                    o.pattern.name(),
                    rep + 1
                );
                let run_dir = root.join(format!("{p}-{rep}-{strategy}"));
                let out = run_once(o, p, strategy, &exe, preload, &run_dir)?;
                let _ = std::fs::remove_dir_all(&run_dir);
                add_metrics(&mut m, strategy, p, &out);
            }
            reps.push(m);
        }
        print_table(o.pattern, p, &reps);
        let mut medians = serde_json::Map::new();
        for name in crate::results::metric_names(&reps) {
            let (_, mid, _) = summary(&reps, &name).expect("name comes from the reps");
            medians.insert(name, serde_json::json!(mid));
        }
        by_ranks.insert(p.to_string(), serde_json::Value::Object(medians));
        records.push(serde_json::json!({ "ranks": p, "reps": reps }));
    }
    Ok((by_ranks, records))
}

/// Compiles the pattern's program into `dir`.
fn compile(dir: &Path, pattern: AtomicPattern) -> Result<PathBuf> {
    let (name, source, cc, package) = match pattern {
        AtomicPattern::Flash => ("flash_bench", FLASH_SOURCE, "h5pcc", "libhdf5-openmpi-dev"),
        _ => ("atomic_bench", SOURCE, "mpicc", "libopenmpi-dev"),
    };
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source)?;
    let exe = dir.join(name);
    // In `dir`: h5pcc leaves object files in its working directory.
    let out = Command::new(cc)
        .current_dir(dir)
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .with_context(|| format!("running {cc} (install it: apt-get install {package})"))?;
    if !out.status.success() {
        bail!("{cc} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(exe)
}

/// One run of the program in a fresh instance under `strategy`.
fn run_once(
    o: &AtomicOpts,
    ranks: u32,
    strategy: &str,
    exe: &Path,
    preload: &Path,
    dir: &Path,
) -> Result<Outcome> {
    let layout = InstanceLayout::new(dir.join("inst"));
    instance::create(
        &layout,
        &CreateOptions {
            daemons: o.daemons,
            pfs: dir.join("pfs"),
            bb_root: Some(dir.join("bb")),
            stripe_size: None,
            bb_capacity: 0,
            model: Model::Session,
            state_durability: Default::default(),
            set: Vec::new(),
        },
    )?;
    instance::start_all(&layout)?;
    // One trace file per process: lines of many ranks through mpirun's output would interleave.
    let traces = dir.join("traces");
    std::fs::create_dir_all(&traces)?;
    let result = (|| {
        let file = format!("/tessera/{}", o.pattern.name());
        let mut cmd = Command::new("mpirun");
        crate::front::mpirun_args(&mut cmd, ranks)
            .args(["--mca", "io", &o.io])
            .arg("-x")
            .arg(format!("LD_PRELOAD={}", preload.display()))
            .arg("-x")
            .arg(format!("TESSERA_INSTANCE={}", layout.dir.display()))
            .arg("-x")
            .arg(format!("TESSERA_ATOMIC_LOCKS={strategy}"))
            .arg("-x")
            .arg(format!("TESSERA_ATOMIC_TRACE={}", traces.display()))
            .env_remove("TESSERA_NODE")
            .arg(exe);
        // atomic_bench takes the pattern first; flash_bench is a program of its own.
        match o.pattern {
            AtomicPattern::Block3d => cmd.args(["block3d", &file, &o.edge.to_string()]),
            AtomicPattern::Flash => cmd.args([&file, &o.blocks.to_string()]),
            AtomicPattern::Tile => cmd.args(["tile", &file]),
        };
        let out = cmd.output().context("starting mpirun")?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            bail!("the ranks failed ({}):\n{stdout}{stderr}", out.status);
        }
        let line = stdout
            .lines()
            .find(|l| l.starts_with("atomic_bench "))
            .ok_or_else(|| anyhow::anyhow!("the program printed no result:\n{stdout}"))?;
        let field = |name: &str| -> Result<f64> {
            line.split_whitespace()
                .find_map(|f| f.strip_prefix(name))
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| anyhow::anyhow!("no {name} in {line:?}"))
        };
        let peak_holders = (0..o.daemons)
            .map(|n| Client::connect(layout.clone(), Some(n))?.status())
            .collect::<Result<Vec<_>, _>>()?
            .iter()
            .map(|s| s.lock_peak_holders)
            .max()
            .unwrap_or(0);
        Ok(Outcome {
            bytes: field("bytes=")?,
            write_s: field("write_s=")?,
            read_s: field("read_s=")?,
            trace: lock_trace::parse(&read_traces(&traces)?, strategy == "list"),
            peak_holders,
        })
    })();
    let stopped = instance::stop_all(&layout);
    let out = result?;
    stopped?;
    Ok(out)
}

/// Every trace file of a run, concatenated (each process's lines stay in order).
fn read_traces(dir: &Path) -> Result<String> {
    let mut all = String::new();
    for e in std::fs::read_dir(dir)? {
        all += &std::fs::read_to_string(e?.path())?;
    }
    Ok(all)
}

/// Locks smaller than this, of single ranges, are a library's metadata (HDF5 writes its
/// object headers and heaps from whichever rank it picks), not the program's steps: they are
/// left out when the ranks' steps are lined up.
const METADATA_BYTES: u64 = 4096;

const MIB: f64 = (1u64 << 20) as f64;

/// The metrics of one strategy's run, named as the scripts read them.
fn add_metrics(m: &mut Metrics, s: &str, ranks: u32, out: &Outcome) {
    let secs = if out.write_s > 0.0 {
        out.write_s
    } else {
        out.read_s
    };
    m.insert(format!("{s}_mibs"), out.bytes / MIB / secs);
    if out.write_s > 0.0 {
        m.insert(format!("{s}_read_mibs"), out.bytes / MIB / out.read_s);
    }
    let clients = out.trace.len().max(1) as f64;
    let locks: Vec<&lock_trace::Traced> = out.trace.values().flatten().collect();
    let requests = locks.iter().filter(|t| t.list.is_some()).count() as f64;
    let ranges: u64 = locks
        .iter()
        .filter_map(|t| t.list.as_ref())
        .map(|l| l.runs().iter().map(|r| r.run.count).sum::<u64>())
        .sum();
    let max_compatible = if s == "none" {
        ranks as usize
    } else {
        lock_trace::max_compatible(&lock_trace::without_metadata(&out.trace, METADATA_BYTES))
    };
    m.insert(format!("{s}_max_compatible"), max_compatible as f64);
    m.insert(format!("{s}_max_granted"), out.peak_holders as f64);
    // The paper's "locks per client": byte ranges one access locks.
    m.insert(
        format!("{s}_locks_per_client"),
        if requests > 0.0 {
            ranges as f64 / requests
        } else {
            0.0
        },
    );
    m.insert(format!("{s}_lock_requests_per_client"), requests / clients);
    let wait: u64 = locks.iter().map(|t| t.wait_us).sum();
    m.insert(format!("{s}_lock_wait_s"), wait as f64 / 1e6 / clients);
    if s == "list" {
        let lists: Vec<&tessera_core::lock_list::LockList> =
            locks.iter().filter_map(|t| t.list.as_ref()).collect();
        let runs: usize = lists.iter().map(|l| l.runs().len()).sum();
        let bytes: usize = lists.iter().map(|l| request_bytes(l)).sum();
        if runs > 0 {
            m.insert(
                "list_request_bytes_per_run".into(),
                bytes as f64 / runs as f64,
            );
            m.insert(
                "list_runs_per_client".into(),
                runs as f64 / lists.len() as f64,
            );
        }
    }
}

/// Bytes of the `ListLock` request that carries `list` (its frame body).
fn request_bytes(list: &tessera_core::lock_list::LockList) -> usize {
    let req = tessera_proto::Request::from(tessera_proto::ListLock {
        ino: 1 << 48,
        seq: 1,
        runs: list.runs().to_vec(),
        wait: true,
        pid: 1 << 20,
    });
    tessera_proto::frame::encode(&req).len()
}

fn print_table(pattern: AtomicPattern, ranks: u32, reps: &[Metrics]) {
    println!(
        "{:<36} {:>12} {:>12} {:>12}",
        format!("atomic {} {ranks} ranks", pattern.name()),
        "min",
        "median",
        "max"
    );
    for name in crate::results::metric_names(reps) {
        let (lo, mid, hi) = summary(reps, &name).expect("name comes from the reps");
        println!("{name:<36} {lo:>12.2} {mid:>12.2} {hi:>12.2}");
    }
}
