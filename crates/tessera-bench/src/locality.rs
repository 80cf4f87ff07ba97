//! `tessera bench locality --hosts N` (FusionFS and Swift): FusionFS's experiment on emulated hosts.
//!
//! F files of S bytes are written, each by a task on a random host (its bytes stay in that
//! host's burst buffer), and read back by tasks placed (a) where `tessera where --json` says
//! the bytes are, (b) round robin without it, (c) round robin with migrate-on-open (a fresh
//! copy of the data set each repetition, since migration moves it); beside (d) direct reads
//! of the same bytes from plain files on the readers' own local storage, with the placed
//! layout. Bandwidth is the bytes over the span from the first task's start to the last
//! task's end, timed inside the tasks; the launch (mpirun) is reported apart. The same run
//! measures one TCP stream between two hosts (the link's ceiling) and the cost of `locate`
//! beside a forwarded no-op. Repetitions interleave the phases; every phase starts after a
//! `sync`, so no writeback of earlier phases runs during it.

use crate::locality_task::{Done, MARKER, Mode, Plan, Task};
use crate::results::{Metrics, metric_names, summary};
use anyhow::{Context, Result, bail};
use clap::Args;
use rand::Rng;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;
use tessera_cli::emulated::EmulatedHosts;
use tessera_cli::instance::{self, CreateOptions};
use tessera_client::{InstanceLayout, Model};

#[derive(Clone, Debug, Args)]
pub struct LocalityOpts {
    /// Emulated hosts (as root, after `scripts/hosts.sh up N` and
    /// `eval "$(scripts/hosts.sh env)"`); one daemon per host.
    #[arg(long)]
    pub hosts: u32,
    /// Files in the data set.
    #[arg(long, default_value_t = 48)]
    pub files: usize,
    /// Bytes per file (units allowed).
    #[arg(long, default_value = "64MiB", value_parser = tessera_cli::size::parse_size)]
    pub size: u64,
    /// Reading tasks running at once on each host.
    #[arg(long, default_value_t = 1)]
    pub tasks_per_host: usize,
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// Print one JSON object with the medians as the last line.
    #[arg(long)]
    pub json: bool,
    /// Where the per-repetition records go (the report reads them there).
    #[arg(long, default_value = "results/locality")]
    pub results: PathBuf,
    /// Keep the run directory afterwards.
    #[arg(long)]
    pub keep: bool,
}

/// The metrics the issue names, in the order of the table.
pub const METRICS: [&str; 9] = [
    "placed_read_mibs",
    "blind_read_mibs",
    "migrate_read_mibs",
    "direct_read_mibs",
    "launch_s",
    "locate_p50_us",
    "forward_ping_p50_us",
    "locate_batch_1000_s",
    "locate_single_1000_s",
];

pub fn run(o: LocalityOpts) -> Result<()> {
    if o.hosts == 0 || o.files == 0 || o.size == 0 || o.reps == 0 || o.tasks_per_host == 0 {
        bail!("--hosts, --files, --size, --reps and --tasks-per-host must be positive");
    }
    let root = std::env::temp_dir().join(format!("tessera-locality-{:08x}", rand::random::<u32>()));
    std::fs::create_dir_all(&root)?;
    let hosts = EmulatedHosts::prepare(o.hosts, &root)?;
    let layout = InstanceLayout::new(root.join("inst"));
    instance::create(
        &layout,
        &CreateOptions {
            daemons: o.hosts,
            pfs: root.join("pfs"),
            bb_root: Some(hosts.bb_root.clone()),
            stripe_size: None,
            bb_capacity: 0,
            model: Model::Session,
            state_durability: Default::default(),
            set: vec!["listen_host='auto'".to_string()],
        },
    )?;
    hosts.start_daemons(&layout)?;
    eprintln!(
        "locality: {} files of {} on {} emulated hosts, {} reading tasks per host, {} repetitions in {}",
        o.files,
        o.size,
        o.hosts,
        o.tasks_per_host,
        o.reps,
        root.display()
    );
    let outcome = measure(&o, &hosts, &layout, &root);
    let stopped = instance::stop_all(&layout);
    if !o.keep && outcome.is_ok() {
        hosts.remove_bb();
        let _ = std::fs::remove_dir_all(&root);
    } else {
        eprintln!("run directory kept: {}", root.display());
    }
    let reps = outcome?;
    stopped?;
    report(&o, reps)
}

/// Host names h1..hN (the order of the host file).
fn host_names(hosts: &EmulatedHosts) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(&hosts.hostfile)?;
    Ok(tessera_cli::launch::parse_hostfile(&text))
}

fn measure(
    o: &LocalityOpts,
    hosts: &EmulatedHosts,
    layout: &InstanceLayout,
    root: &Path,
) -> Result<Vec<Metrics>> {
    let names = host_names(hosts)?;
    let n = names.len();
    let mut rng = rand::rng();
    let writer: Vec<usize> = (0..o.files).map(|_| rng.random_range(0..n)).collect();
    let direct = |i: usize, tag: &str| hosts.bb_root.join("direct").join(format!("{tag}-{i}"));
    let set = |tag: &str| -> Vec<Task> {
        (0..o.files)
            .map(|i| Task {
                host: names[writer[i]].clone(),
                path: format!("/tessera/{tag}-{i}"),
                direct: direct(i, tag),
            })
            .collect()
    };
    let phase = |mode: Mode, per_host: usize, tasks: Vec<Task>, name: &str| {
        let plan = Plan {
            mode,
            per_host,
            size: o.size,
            tasks,
        };
        run_phase(hosts, layout, root, &plan, name)
    };
    // The data set and its copies (about 4 x F x S) must stay in the page cache, as a burst
    // buffer's recent writes would: cached files of earlier work are dropped first, so that
    // reclaiming them does not run during (and evict data under) the measurements.
    rustix::fs::sync();
    if let Err(e) = std::fs::write("/proc/sys/vm/drop_caches", "1") {
        eprintln!(
            "could not drop the page cache ({e}): earlier cached files may be reclaimed during the run"
        );
    }
    eprintln!("writing the data set");
    phase(Mode::Write, 1, set("data"), "write")?;
    let mut reps = Vec::new();
    for rep in 0..o.reps {
        let mut m = Metrics::new();
        // (a) Placed by the locality query.
        let located = where_json(hosts, layout, &set("data"))?;
        let placed: Vec<Task> = set("data")
            .into_iter()
            .zip(located)
            .map(|(t, host)| Task { host, ..t })
            .collect();
        let (mibs, launch, done) = phase(Mode::Read, o.tasks_per_host, placed.clone(), "placed")?;
        m.insert("placed_read_mibs".into(), mibs);
        m.insert("launch_s".into(), launch);
        m.insert(
            "placed_remote_bytes".into(),
            sum(&done, |d| d.remote) as f64,
        );
        // (b) Round robin, blind to where the bytes are.
        let blind = |tasks: Vec<Task>| -> Vec<Task> {
            tasks
                .into_iter()
                .enumerate()
                .map(|(i, t)| Task {
                    host: names[i % n].clone(),
                    ..t
                })
                .collect()
        };
        let (mibs, _, done) = phase(Mode::Read, o.tasks_per_host, blind(set("data")), "blind")?;
        m.insert("blind_read_mibs".into(), mibs);
        m.insert("blind_remote_bytes".into(), sum(&done, |d| d.remote) as f64);
        // (d) Direct reads of the same bytes from plain local files, placed as in (a).
        let (mibs, _, _) = phase(Mode::Direct, o.tasks_per_host, placed, "direct")?;
        m.insert("direct_read_mibs".into(), mibs);
        // (c) Round robin with migrate-on-open, on a fresh copy of the data set.
        let tag = format!("mig{rep}");
        phase(Mode::Write, 1, set(&tag), "write a copy to migrate")?;
        let (mibs, _, done) = phase(Mode::Migrate, o.tasks_per_host, blind(set(&tag)), "migrate")?;
        m.insert("migrate_read_mibs".into(), mibs);
        m.insert("migrated_bytes".into(), sum(&done, |d| d.migrated) as f64);
        phase(Mode::Remove, 1, set(&tag), "remove the copy")?;
        // The link's ceiling, and the cost of locate.
        if n >= 2 {
            let mibs = crate::front::tcp_stream(hosts, &root.join(format!("tcp-{rep}")))?;
            m.insert("link_mibs".into(), mibs);
        }
        let plan = Plan {
            mode: Mode::Locate,
            per_host: 1,
            size: 0,
            tasks: Vec::new(),
        };
        let (_, _, done) = run_phase_on(hosts, layout, root, &plan, "locate", 1)?;
        let costs = done
            .into_iter()
            .find_map(|d| d.metrics)
            .context("the locate task printed no metrics")?;
        m.extend(costs);
        for (name, a, b) in [
            ("placed_over_direct", "placed_read_mibs", "direct_read_mibs"),
            ("placed_over_blind", "placed_read_mibs", "blind_read_mibs"),
            ("locate_over_ping", "locate_p50_us", "forward_ping_p50_us"),
            (
                "batch_over_single",
                "locate_batch_1000_s",
                "locate_single_1000_s",
            ),
        ] {
            if let Some(r) = m.get(a).zip(m.get(b)).map(|(a, b)| a / b) {
                m.insert(name.into(), r);
            }
        }
        eprintln!(
            "repetition {}: placed {:.0} MiB/s, blind {:.0}, migrate {:.0}, direct {:.0}",
            rep + 1,
            m["placed_read_mibs"],
            m["blind_read_mibs"],
            m["migrate_read_mibs"],
            m["direct_read_mibs"]
        );
        reps.push(m);
    }
    Ok(reps)
}

fn sum(done: &[Done], f: impl Fn(&Done) -> u64) -> u64 {
    done.iter().map(f).sum()
}

/// The host `tessera where --json` names for each task's file (run on the first host, as a
/// workflow's front end would).
fn where_json(
    hosts: &EmulatedHosts,
    layout: &InstanceLayout,
    tasks: &[Task],
) -> Result<Vec<String>> {
    let tessera = std::env::current_exe()?.with_file_name("tessera");
    let tessera = tessera.display().to_string();
    let inst = layout.dir.display().to_string();
    let mut argv = vec![tessera.as_str(), "--instance", &inst, "where", "--json"];
    argv.extend(tasks.iter().map(|t| t.path.as_str()));
    let out = hosts.mpirun(false, &argv)?;
    let v: serde_json::Value = serde_json::from_str(&out).context("reading where --json")?;
    let files = v["files"].as_array().context("where --json has no files")?;
    files
        .iter()
        .map(|f| {
            f["bytes_by_host"][0]["host"]
                .as_str()
                .map(str::to_string)
                .with_context(|| format!("no host holds {}", f["path"]))
        })
        .collect()
}

/// Runs a phase with `per_host` ranks on every host; (MiB/s over the tasks' span, launch
/// seconds outside it, what each rank reported).
fn run_phase(
    hosts: &EmulatedHosts,
    layout: &InstanceLayout,
    root: &Path,
    plan: &Plan,
    name: &str,
) -> Result<(f64, f64, Vec<Done>)> {
    run_phase_on(
        hosts,
        layout,
        root,
        plan,
        name,
        hosts.count as usize * plan.per_host,
    )
}

fn run_phase_on(
    hosts: &EmulatedHosts,
    layout: &InstanceLayout,
    root: &Path,
    plan: &Plan,
    name: &str,
    ranks: usize,
) -> Result<(f64, f64, Vec<Done>)> {
    let file = root.join(format!("plan-{}.json", name.replace(' ', "-")));
    std::fs::write(&file, serde_json::to_vec(plan)?)?;
    // Written data reaches the disk first: on 2 cores, the kernel's writeback of the gigabytes
    // just written would otherwise share the CPU with whichever read phase comes next (reads
    // of both Tessera's logs and the direct files are from the page cache either way).
    rustix::fs::sync();
    let exe = std::env::current_exe().context("locating tessera-bench")?;
    let started = Instant::now();
    let out = Command::new("mpirun")
        .arg("--hostfile")
        .arg(&hosts.hostfile)
        .args(["--map-by", &format!("ppr:{}:node", plan.per_host)])
        // More tasks per host than a host has cores is the point of the tasks-per-host sweep.
        .arg("--oversubscribe")
        .args(["-np", &ranks.to_string()])
        .args(["-x", "TESSERA_INSTANCE"])
        .arg(&exe)
        .arg("locality-task")
        .arg("--plan")
        .arg(&file)
        .env("TESSERA_INSTANCE", &layout.dir)
        .env_remove("TESSERA_NODE")
        .output()
        .context("running mpirun")?;
    let wall = started.elapsed().as_secs_f64();
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "the {name} phase failed ({}):\n{text}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let done: Vec<Done> = text
        .lines()
        .filter_map(|l| l.strip_prefix(MARKER))
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()
        .context("reading the tasks' results")?;
    let bytes = sum(&done, |d| d.bytes);
    let busy: Vec<&Done> = done.iter().filter(|d| d.bytes > 0).collect();
    let span = match (
        busy.iter().map(|d| d.start_ns).min(),
        busy.iter().map(|d| d.end_ns).max(),
    ) {
        (Some(a), Some(b)) if b > a => (b - a) as f64 / 1e9,
        _ => 0.0,
    };
    let mibs = if span > 0.0 {
        bytes as f64 / (1u64 << 20) as f64 / span
    } else {
        0.0
    };
    Ok((mibs, (wall - span).max(0.0), done))
}

fn report(o: &LocalityOpts, reps: Vec<Metrics>) -> Result<()> {
    println!(
        "locality, {} hosts, {} tasks per host{:>14}{:>13}{:>13}",
        o.hosts, o.tasks_per_host, "min", "median", "max"
    );
    let mut medians = serde_json::Map::new();
    for name in metric_names(&reps) {
        let (lo, mid, hi) = summary(&reps, &name).expect("name comes from the reps");
        println!("{name:<40}{lo:>13.3}{mid:>13.3}{hi:>13.3}");
        medians.insert(name, serde_json::json!(mid));
    }
    let when = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let command = format!(
        "tessera bench locality --hosts {} --files {} --size {} --tasks-per-host {} --reps {}",
        o.hosts, o.files, o.size, o.tasks_per_host, o.reps
    );
    let record = serde_json::json!({
        "command": command,
        "when": when,
        "hosts": o.hosts,
        "tasks_per_host": o.tasks_per_host,
        "files": o.files,
        "size": o.size,
        "reps": reps,
    });
    std::fs::create_dir_all(&o.results)?;
    let file = o.results.join(format!(
        "locality-{}h-{}t-{when}.json",
        o.hosts, o.tasks_per_host
    ));
    std::fs::write(&file, serde_json::to_string_pretty(&record)?)?;
    println!("full data: {}", file.display());
    if o.json {
        println!(
            "{}",
            serde_json::json!({ "workload": "locality", "hosts": o.hosts, "tasks_per_host": o.tasks_per_host, "metrics": medians })
        );
    }
    Ok(())
}
