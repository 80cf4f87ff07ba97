//! The ways a program reaches Tessera, side by side: an N-1 strided checkpoint written, then
//! read back on shifted ranks, by plain POSIX processes (`c/n1_posix.c`) through the
//! interposer, through the FUSE mount, and with direct I/O on the local disk (the baseline:
//! what the same processes get from the device without Tessera, as IOR's `-B` measures).
//! Repetitions rotate the order of the three, so drift of the machine spreads over all.

use crate::results::{Metrics, summary};
use anyhow::{Context, Result, bail};
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;
use tessera_cli::instance::{self, CreateOptions};
use tessera_client::{InstanceLayout, Model};

const SOURCE: &str = include_str!("../c/n1_posix.c");

const WAYS: [&str; 3] = ["direct", "interposer", "fuse"];

#[derive(Clone, Debug, Args)]
pub struct InterfacesOpts {
    /// Writing (and reading) processes.
    #[arg(long, default_value_t = 4)]
    pub procs: u32,
    /// Bytes of each write and read (units allowed: 1MiB, 64k).
    #[arg(long, default_value = "1MiB", value_parser = tessera_cli::size::parse_size)]
    pub block: u64,
    /// Blocks per process.
    #[arg(long, default_value_t = 64)]
    pub blocks: u64,
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// Consistency model of the mount (and of the interposed processes).
    #[arg(long, default_value = "session")]
    pub model: Model,
    /// Where the instance, its mount and the direct files go (the local disk).
    #[arg(long, default_value = "/tmp")]
    pub dir: PathBuf,
    #[arg(long, default_value = "results")]
    pub results: PathBuf,
}

/// Programs beside this one: the interposer and the `tessera` command.
fn sibling(name: &str, package: &str) -> Result<PathBuf> {
    let p = std::env::current_exe()?.with_file_name(name);
    if !p.exists() {
        bail!(
            "{} is not built; build it with `cargo build --release -p {package}`",
            p.display()
        );
    }
    Ok(p)
}

pub fn run(o: InterfacesOpts) -> Result<()> {
    if o.procs == 0 || o.blocks == 0 || o.block == 0 || o.reps == 0 {
        bail!("--procs, --blocks, --block and --reps must be positive");
    }
    if !o.block.is_multiple_of(4096) {
        bail!(
            "--block {} must be a multiple of 4096 (the direct-I/O baseline's alignment)",
            o.block
        );
    }
    let preload = sibling("libtessera_preload.so", "tessera-preload")?;
    let tessera = sibling("tessera", "tessera-cli")?;
    let root = o
        .dir
        .join(format!("tessera-interfaces-{:08x}", rand::random::<u32>()));
    std::fs::create_dir_all(&root)?;
    let measured = measure(&o, &root, &preload, &tessera);
    let _ = Command::new(&tessera)
        .args(["umount", "--lazy"])
        .arg(root.join("mnt"))
        .output();
    let _ = instance::stop_all(&InstanceLayout::new(root.join("inst")));
    let _ = std::fs::remove_dir_all(&root);
    let reps = measured?;
    print_table(&o, &reps);
    let when = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    std::fs::create_dir_all(&o.results)?;
    let file = o.results.join(format!("interfaces-{when}.json"));
    let record = serde_json::json!({
        "workload": "interfaces",
        "command": format!(
            "tessera-bench interfaces --procs {} --block {} --blocks {} --reps {} --model {}",
            o.procs, o.block, o.blocks, o.reps, o.model
        ),
        "machine": crate::results::Machine::probe(&o.dir),
        "when": when,
        "reps": reps,
    });
    std::fs::write(&file, serde_json::to_string_pretty(&record)?)?;
    println!("full data: {}", file.display());
    Ok(())
}

fn measure(
    o: &InterfacesOpts,
    root: &Path,
    preload: &Path,
    tessera: &Path,
) -> Result<Vec<Metrics>> {
    let exe = compile(root)?;
    let layout = InstanceLayout::new(root.join("inst"));
    instance::create(
        &layout,
        &CreateOptions {
            daemons: 1,
            pfs: root.join("pfs"),
            bb_root: Some(root.join("bb")),
            stripe_size: None,
            bb_capacity: 0,
            model: o.model,
            state_durability: Default::default(),
            set: Vec::new(),
        },
    )?;
    instance::start_all(&layout)?;
    let mnt = root.join("mnt");
    std::fs::create_dir_all(&mnt)?;
    std::fs::create_dir_all(root.join("direct"))?;
    let out = Command::new(tessera)
        .arg("--instance")
        .arg(&layout.dir)
        .arg("mount")
        .arg(&mnt)
        .args(["--model", o.model.name()])
        .output()
        .context("running tessera mount")?;
    if !out.status.success() {
        bail!("tessera mount: {}", String::from_utf8_lossy(&out.stderr));
    }
    let mut reps = Vec::new();
    for rep in 0..o.reps {
        let mut order = WAYS;
        order.rotate_left(rep % WAYS.len());
        let mut m = Metrics::new();
        for way in order {
            eprintln!("interfaces: repetition {}, {way}", rep + 1);
            let (path, direct) = match way {
                "direct" => (root.join(format!("direct/ckpt-{rep}")), true),
                "interposer" => (
                    PathBuf::from(format!("/tessera/ckpt-interposer-{rep}")),
                    false,
                ),
                _ => (mnt.join(format!("ckpt-fuse-{rep}")), false),
            };
            let env = (way == "interposer").then_some((preload, &layout.dir));
            for phase in ["write", "read"] {
                let secs = phase_time(o, &exe, phase, &path, direct, env)?;
                let bytes = (o.procs as u64 * o.blocks * o.block) as f64;
                m.insert(
                    format!("{way}_{phase}_mibs"),
                    bytes / secs / f64::from(1 << 20),
                );
            }
        }
        reps.push(m);
    }
    Ok(reps)
}

fn compile(dir: &Path) -> Result<PathBuf> {
    let src = dir.join("n1_posix.c");
    std::fs::write(&src, SOURCE)?;
    let exe = dir.join("n1_posix");
    let out = Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .context("running cc (install it: apt-get install gcc)")?;
    if !out.status.success() {
        bail!("cc failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(exe)
}

/// Seconds from starting every process of a phase to the last one's end.
fn phase_time(
    o: &InterfacesOpts,
    exe: &Path,
    phase: &str,
    path: &Path,
    direct: bool,
    interposed: Option<(&Path, &PathBuf)>,
) -> Result<f64> {
    let started = Instant::now();
    let children: Vec<_> = (0..o.procs)
        .map(|rank| {
            let mut c = Command::new(exe);
            c.arg(phase)
                .arg(path)
                .args([
                    rank.to_string(),
                    o.procs.to_string(),
                    o.block.to_string(),
                    o.blocks.to_string(),
                ])
                .env_remove("LD_PRELOAD")
                .env_remove("TESSERA_NODE");
            if direct {
                c.arg("direct");
            }
            if let Some((preload, inst)) = interposed {
                c.env("LD_PRELOAD", preload)
                    .env("TESSERA_INSTANCE", inst)
                    .env("TESSERA_MODEL", o.model.name());
            }
            c.spawn().context("starting n1_posix")
        })
        .collect::<Result<_>>()?;
    for mut child in children {
        let status = child.wait()?;
        if !status.success() {
            bail!("n1_posix {phase} {} failed ({status})", path.display());
        }
    }
    Ok(started.elapsed().as_secs_f64())
}

fn print_table(o: &InterfacesOpts, reps: &[Metrics]) {
    println!(
        "N-1 strided, {} processes x {} blocks of {} bytes, model {} (min / median / max of {})",
        o.procs,
        o.blocks,
        o.block,
        o.model,
        reps.len()
    );
    println!("{:<12} {:>26} {:>26}", "way", "write MiB/s", "read MiB/s");
    for way in WAYS {
        let cell = |phase: &str| {
            summary(reps, &format!("{way}_{phase}_mibs"))
                .map_or("-".to_string(), |(lo, mid, hi)| {
                    format!("{lo:.0} / {mid:.0} / {hi:.0}")
                })
        };
        println!("{way:<12} {:>26} {:>26}", cell("write"), cell("read"));
    }
}
