//! The front end of one benchmark run on this machine: start a fresh instance, launch the ranks
//! with `mpirun`, stop the instance, keep the full per-repetition data under `results/`, and
//! print a table (and with `--json`, one JSON object as the last line).

use crate::args::{Params, Workload};
use crate::rank::RESULT_MARKER;
use crate::results::{Machine, Metrics, RunRecord, metric_names, summary};
use anyhow::{Context, Result, bail};
use clap::Args;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use tessera_cli::emulated::EmulatedHosts;
use tessera_cli::instance::{self, CreateOptions};
use tessera_client::{InstanceLayout, Model};

#[derive(Clone, Debug, Args)]
pub struct FrontOpts {
    /// Directory on the disk to measure (instance, burst buffers, PFS and direct files go here).
    #[arg(long, default_value = "/tmp")]
    pub dir: PathBuf,
    /// Where the per-repetition records go.
    #[arg(long, default_value = "results")]
    pub results: PathBuf,
    /// Print one JSON object with the medians as the last line.
    #[arg(long)]
    pub json: bool,
    /// Keep the run directory (instance logs, files) afterwards.
    #[arg(long)]
    pub keep: bool,
    /// Leave the virtual machine's free page reporting as it is. By default a run as root holds
    /// it off and puts it back at the end: memory the guest frees goes back to the host two
    /// seconds later, and page-cache writes that reuse it ran 4-15x slower.
    #[arg(long)]
    pub leave_page_reporting: bool,
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Arguments that reproduce `params` on the command line.
fn param_args(p: &Params) -> Vec<String> {
    let mut a = vec![
        format!("--ranks={}", p.ranks),
        format!("--daemons={}", p.daemons),
        format!("--hosts={}", p.hosts),
        format!("--reps={}", p.reps),
        format!("--xfer={}", p.xfer),
        format!("--per-rank={}", p.per_rank),
        format!("--pattern={}", p.pattern.name()),
        format!("--size={}", p.size),
        format!("--ops={}", p.ops),
        format!("--samples={}", p.samples),
        format!("--epochs={}", p.epochs),
        format!("--particles={}", p.particles),
        format!("--samples-ops={}", p.samples_ops),
        format!("--files={}", p.files),
        format!("--shape={}", p.shape.name()),
        format!("--writers={}", p.writers),
        format!("--writes={}", p.writes),
    ];
    if p.random {
        a.push("--random".into());
    }
    if p.fsync {
        a.push("--fsync".into());
    }
    if p.inject_fault {
        a.push("--inject-fault".into());
    }
    if p.security != crate::args::SecurityArg::Auth {
        a.push(format!("--security={}", p.security.name()));
    }
    a
}

/// A short name for the record's file.
fn record_name(w: Workload, p: &Params, when: u64) -> String {
    match w {
        Workload::Consistency => format!(
            "{}-{}-{}b-{}r-{when}.json",
            w.name(),
            p.pattern.name(),
            p.size,
            p.ranks
        ),
        Workload::Scale => format!(
            "{}-{}w-{}k-{}-{}r-{when}.json",
            w.name(),
            p.writers,
            p.writes,
            if p.random { "random" } else { "strided" },
            p.ranks
        ),
        Workload::Meta => format!("{}-{}-{}r-{when}.json", w.name(), p.shape.name(), p.ranks),
        _ => format!("{}-{}r-{when}.json", w.name(), p.ranks),
    }
}

pub fn run(workload: Workload, params: Params, opts: FrontOpts) -> Result<()> {
    if params.ranks == 0 || params.daemons == 0 || params.reps == 0 {
        bail!("--ranks, --daemons and --reps must be positive");
    }
    std::fs::create_dir_all(&opts.dir)?;
    let page_reporting = (!opts.leave_page_reporting)
        .then(crate::page_reporting::hold_off)
        .flatten();
    if let Some(held) = &page_reporting {
        eprintln!("{}", held.describe());
    }
    if let Some(needs) = crate::fits::needs(workload, &params) {
        let memory = crate::fits::available_memory().unwrap_or(u64::MAX);
        let disk = crate::fits::free_space(&opts.dir).unwrap_or(u64::MAX);
        if let Err(e) = crate::fits::check(&needs, memory, disk, &params) {
            bail!("{} does not fit this machine: {e}", workload.name());
        }
    }
    let root = opts
        .dir
        .join(format!("tessera-bench-{:08x}", rand::random::<u32>()));
    std::fs::create_dir_all(&root)?;
    let hosts = (params.hosts > 0)
        .then(|| EmulatedHosts::prepare(params.hosts, &root))
        .transpose()?;
    let mut params = params;
    if let Some(h) = &hosts {
        params.daemons = h.count;
    }
    let layout = InstanceLayout::new(root.join("inst"));
    instance::create(
        &layout,
        &CreateOptions {
            daemons: params.daemons,
            pfs: root.join("pfs"),
            bb_root: Some(
                hosts
                    .as_ref()
                    .map_or_else(|| root.join("bb"), |h| h.bb_root.clone()),
            ),
            stripe_size: None,
            bb_capacity: 0,
            model: Model::Session,
            state_durability: Default::default(),
            set: match hosts {
                Some(_) => vec!["listen_host='auto'".to_string()],
                None => Vec::new(),
            }
            .into_iter()
            .chain([format!("security='{}'", params.security.name())])
            .collect(),
        },
    )?;
    match &hosts {
        Some(h) => h.start_daemons(&layout)?,
        None => instance::start_all(&layout)?,
    }
    eprintln!(
        "{}: {} ranks, {} daemons{}, {} repetitions in {}",
        workload.name(),
        params.ranks,
        params.daemons,
        match &hosts {
            Some(h) => format!(" on {} emulated hosts", h.count),
            None => String::new(),
        },
        params.reps,
        root.display()
    );
    let outcome = launch(workload, &params, &layout, &root, hosts.as_ref()).and_then(|mut reps| {
        if let Some(h) = &hosts {
            // The network's ceiling, measured in the same run, once per repetition.
            for (i, rep) in reps.iter_mut().enumerate() {
                let mibs = tcp_stream(h, &root.join(format!("tcp-stream-{i}")))?;
                rep.insert("tcp_stream_mibs".to_string(), mibs);
            }
        }
        Ok(reps)
    });
    let stopped = instance::stop_all(&layout);
    if let Some(h) = &hosts
        && !opts.keep
        && outcome.is_ok()
    {
        h.remove_bb();
    }
    if !opts.keep && outcome.is_ok() {
        let _ = std::fs::remove_dir_all(&root);
    } else {
        eprintln!("run directory kept: {}", root.display());
    }
    let reps = outcome?;
    stopped?;

    let when = now_secs();
    let command = format!(
        "tessera bench {} {}",
        workload.name(),
        param_args(&params).join(" ")
    );
    let mut machine = Machine::probe(&opts.dir);
    machine.page_reporting = page_reporting.as_ref().map(|h| h.describe());
    let record = RunRecord {
        workload,
        params: params.clone(),
        machine,
        command,
        when,
        reps,
    };
    std::fs::create_dir_all(&opts.results)?;
    let file = opts.results.join(record_name(workload, &params, when));
    std::fs::write(&file, serde_json::to_string_pretty(&record)?)?;

    println!(
        "{:<32} {:>12} {:>12} {:>12}",
        record.command.split(' ').nth(2).unwrap_or(""),
        "min",
        "median",
        "max"
    );
    let mut medians = serde_json::Map::new();
    for name in metric_names(&record.reps) {
        let (lo, mid, hi) = summary(&record.reps, &name).expect("name comes from the reps");
        println!("{name:<32} {lo:>12.1} {mid:>12.1} {hi:>12.1}");
        medians.insert(name, serde_json::json!(mid));
    }
    for name in unsteady_baselines(&record.reps) {
        let (lo, _, hi) = summary(&record.reps, &name).expect("name comes from the reps");
        eprintln!(
            "note: the baseline {name} moved {:.1}x between repetitions ({lo:.1} to {hi:.1}): find out why before quoting it",
            hi / lo
        );
    }
    println!("full data: {}", file.display());
    if opts.json {
        let out = serde_json::json!({
            "workload": workload.name(),
            "params": params,
            "metrics": medians,
        });
        println!("{out}");
    }
    Ok(())
}

/// Largest max/min of a local baseline across repetitions that is quoted without a note.
const STEADY_SPREAD: f64 = 1.25;

/// The physical limits some workloads measure beside Tessera (ops, `--hosts`): baselines too.
const LIMITS: [&str; 5] = [
    "tcp_stream_mibs",
    "memcpy_mibs",
    "mac_mibs",
    "tcp_bulk_mibs",
    "unix_bulk_mibs",
];

/// Whether a metric is a baseline Tessera is compared with: a rate or bandwidth of the local
/// file system (`direct_`), or a physical limit.
fn is_baseline(name: &str) -> bool {
    (name.starts_with("direct_") && (name.ends_with("_per_s") || name.ends_with("_mibs")))
        || LIMITS.contains(&name)
}

/// The baselines whose spread across repetitions is too wide to quote: on a journal-less
/// ext4, for one, creates right after many removes scan the inodes removed in the last 30
/// seconds and run 10x slower, and a direct read that finds its file in the page cache runs
/// 5x faster than one that does not.
fn unsteady_baselines(reps: &[Metrics]) -> Vec<String> {
    metric_names(reps)
        .into_iter()
        .filter(|n| is_baseline(n))
        .filter(|n| {
            summary(reps, n).is_some_and(|(lo, _, hi)| lo <= 0.0 || hi / lo > STEADY_SPREAD)
        })
        .collect()
}

/// Bytes the TCP stream sends: at least 1 GiB, so the rate is not a burst into buffers.
const TCP_STREAM_BYTES: u64 = 1 << 30;

/// One TCP stream from the first host to the second; returns MiB/s.
pub(crate) fn tcp_stream(hosts: &EmulatedHosts, rendezvous: &std::path::Path) -> Result<f64> {
    if hosts.count < 2 {
        bail!("tcp_stream_mibs needs two hosts; run with --hosts 2 or more");
    }
    let exe = std::env::current_exe().context("locating tessera-bench")?;
    let _ = std::fs::remove_file(rendezvous);
    let out = Command::new("mpirun")
        .arg("--hostfile")
        .arg(&hosts.hostfile)
        .args(["--map-by", "node", "-np", "2"])
        .arg(&exe)
        .arg("tcp-stream")
        .arg("--rendezvous")
        .arg(rendezvous)
        .args(["--bytes", &TCP_STREAM_BYTES.to_string()])
        .output()
        .context("running mpirun for the TCP stream")?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "the TCP stream failed ({}): {text}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    text.lines()
        .find_map(|l| l.strip_prefix(crate::workloads::tcp_stream::MARKER))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| anyhow::anyhow!("the TCP stream printed no rate: {text}"))
}

fn launch(
    workload: Workload,
    params: &Params,
    layout: &InstanceLayout,
    root: &std::path::Path,
    hosts: Option<&EmulatedHosts>,
) -> Result<Vec<Metrics>> {
    let exe = std::env::current_exe().context("locating tessera-bench")?;
    let mut cmd = Command::new("mpirun");
    if let Some(h) = hosts {
        // Ranks host after host; MPI's own traffic crosses the emulated network too.
        cmd.arg("--hostfile")
            .arg(&h.hostfile)
            .args(["--map-by", "node"])
            .env_remove("TESSERA_NODE");
    }
    mpirun_args(&mut cmd, params.ranks)
        .arg(&exe)
        .arg("rank")
        .arg(workload.name())
        .args(param_args(params))
        .arg("--instance")
        .arg(&layout.dir)
        .arg("--direct")
        .arg(root.join("direct"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = cmd
        .spawn()
        .context("starting mpirun (install Open MPI: apt-get install openmpi-bin)")?;
    let mut reps = None;
    for line in BufReader::new(child.stdout.take().expect("piped")).lines() {
        let line = line?;
        match line.strip_prefix(RESULT_MARKER) {
            Some(json) => reps = Some(serde_json::from_str::<Vec<Metrics>>(json)?),
            None => println!("{line}"),
        }
    }
    let status = child.wait()?;
    if !status.success() {
        bail!("the ranks failed ({status}); their messages are above");
    }
    reps.ok_or_else(|| anyhow::anyhow!("the ranks finished without results"))
}

/// `mpirun`'s options for `ranks` ranks of the benchmark on this machine: oversubscribed, not
/// bound to cores, shared memory without cross-process memory attach (refused in many
/// containers), allowed as root.
pub fn mpirun_args(cmd: &mut Command, ranks: u32) -> &mut Command {
    cmd.args(["--oversubscribe", "--bind-to", "none", "-np"])
        .arg(ranks.to_string())
        .args(["--mca", "btl_vader_single_copy_mechanism", "none"])
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reps(values: &[(&str, f64)]) -> Vec<Metrics> {
        values
            .iter()
            .map(|(n, v)| Metrics::from([(n.to_string(), *v)]))
            .collect()
    }

    #[test]
    fn a_baseline_that_moves_is_named() {
        let moving = reps(&[
            ("direct_create_per_s", 3900.0),
            ("direct_create_per_s", 42600.0),
        ]);
        assert_eq!(unsteady_baselines(&moving), ["direct_create_per_s"]);
        let steady = reps(&[
            ("direct_create_per_s", 100.0),
            ("direct_create_per_s", 120.0),
        ]);
        assert!(unsteady_baselines(&steady).is_empty());
        // Tessera's own rates and CPU figures are not baselines.
        let ours = reps(&[("create_per_s", 1.0), ("create_per_s", 10.0)]);
        assert!(unsteady_baselines(&ours).is_empty());
        let cpu = reps(&[
            ("direct_create_rank_cpu_us", 1.0),
            ("direct_create_rank_cpu_us", 10.0),
        ]);
        assert!(unsteady_baselines(&cpu).is_empty());
        // Bandwidths and physical limits are.
        let read = reps(&[
            ("direct_nn_read_mibs", 1074.0),
            ("direct_nn_read_mibs", 11469.0),
            ("tcp_stream_mibs", 1948.0),
            ("tcp_stream_mibs", 2060.0),
        ]);
        assert_eq!(unsteady_baselines(&read), ["direct_nn_read_mibs"]);
    }
}
