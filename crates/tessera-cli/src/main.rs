//! `tessera`: run and inspect a Tessera instance.
//!
//! ```text
//! tessera start --daemons 3 --pfs /scratch/me/pfs     start an instance on this machine
//! tessera status | stop                               look at it, stop it
//! tessera ls|stat|where|flush /tessera/PATH           inspect files, publish them to the PFS
//! tessera vars list|show|wait                         the catalogue of variables (D2T)
//! tessera demo                                        the N-1 checkpoint demo
//! tessera serve --node K                              one daemon in the foreground
//! ```
//!
//! The instance directory comes from `--instance` or `TESSERA_INSTANCE` (default
//! `$XDG_RUNTIME_DIR/tessera`, else `~/.tessera`); it and its files must be the user's own.

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use tessera_cli::{demo, doctor, inspect, instance, launch, script};
use tessera_client::{Client, Model};
use tessera_proto::InstanceLayout;

#[derive(Parser)]
#[command(
    name = "tessera",
    version,
    about = "Tessera: a burst-buffer file system for HPC jobs"
)]
struct Cli {
    /// Instance directory (holds instance.toml, the secret, sockets and daemon logs).
    #[arg(long, global = true, env = "TESSERA_INSTANCE")]
    instance: Option<PathBuf>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run one daemon in the foreground.
    Serve {
        /// Which node of the instance this daemon is (default: the launcher's task rank).
        #[arg(long)]
        node: Option<u32>,
        /// Log to INSTANCE/logs/node-K.log instead of stderr.
        #[arg(long)]
        log: bool,
    },
    /// Create an instance (if needed) and start its daemons in the background.
    Start {
        /// Number of daemons of a new instance on this machine (a launcher starts one per
        /// node of the allocation or host file).
        #[arg(long)]
        daemons: Option<u32>,
        /// How to start the daemons: srun inside a Slurm allocation, mpirun with --hostfile,
        /// else local (all on this machine).
        #[arg(long, value_enum, default_value = "auto")]
        launcher: launch::LauncherKind,
        /// Hosts to start one daemon each on, through mpirun (Open MPI host file; node K is
        /// the K-th host).
        #[arg(long)]
        hostfile: Option<PathBuf>,
        /// Where daemons listen for each other (new instance): a network in CIDR notation,
        /// an interface name, an address, or `auto` (first non-loopback address; the default
        /// with a launcher). Without a launcher daemons use 127.0.0.1.
        #[arg(long)]
        net: Option<String>,
        /// Seconds to wait for every node to register before giving up.
        #[arg(long, default_value_t = 60)]
        timeout: u64,
        /// PFS directory that flush writes to (new instance; default INSTANCE/pfs).
        #[arg(long)]
        pfs: Option<PathBuf>,
        /// Root of the node-local burst buffers (new instance; default INSTANCE/bb).
        #[arg(long)]
        bb_root: Option<PathBuf>,
        /// Stripe size for ownership placement, e.g. 64MiB (new instance).
        #[arg(long, value_parser = tessera_cli::size::parse_size)]
        stripe_size: Option<u64>,
        /// Burst-buffer space per node, e.g. 100GiB; 0 = until the device is full (new
        /// instance).
        #[arg(long, default_value = "0", value_parser = tessera_cli::size::parse_size)]
        bb_capacity: u64,
        /// Default consistency model: posix, commit, session or mpiio (new instance).
        #[arg(long, default_value = "session")]
        model: Model,
        /// What daemon state survives: process (a daemon crash) or machine (also a power cut;
        /// a device flush per group of changes) (new instance).
        #[arg(long, value_enum, default_value = "process")]
        state_durability: StateDurabilityArg,
        /// Start only this node (e.g. to restart a daemon that died).
        #[arg(long)]
        node: Option<u32>,
        /// Set any field of instance.toml for a new instance, e.g.
        /// `--set state_checkpoint_idle_ms=10000` (repeatable).
        #[arg(long = "set", value_name = "NAME=VALUE")]
        set: Vec<String>,
    },
    /// Repair a node's damaged state log: keep every intact record, drop the damaged bytes
    /// (reported), save a copy of the damaged log. The node's daemon must be stopped.
    Salvage {
        /// The node whose state log to salvage.
        #[arg(long)]
        node: u32,
    },
    /// Count every file's names against its link count and raise a count below its names
    /// (what a crash in a rename of a build from before rename intents could leave), on
    /// every node; reports each file it changed. Daemons do this by themselves once, on the
    /// first start on state from before intents.
    CheckNames,
    /// Find files as GNU find does, with every daemon searching its own shard at once:
    /// `tessera find PATH [-name GLOB] [-size [+-]N[cwbkMG]] [-newer FILE] [-type f|d|l]`.
    /// Matches are printed as they are found, in no particular order.
    Find {
        /// Print only IO500's last line, `MATCHED found/total` (IO500's `external-script`
        /// is the tessera binary, its `external-extra-args` are `find --io500`).
        #[arg(long)]
        io500: bool,
        /// One JSON object per match (path, type, and size and mtime_ns when a predicate
        /// asked for them), and one with the counts at the end.
        #[arg(long, conflicts_with = "io500")]
        json: bool,
        /// Entries each daemon looks at per answer (more: fewer round trips, longer pauses
        /// of its namespace for other requests).
        #[arg(long, default_value_t = 8192)]
        page_entries: u32,
        /// The path to search, then the predicates.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        expr: Vec<String>,
    },
    /// Stop every daemon of the instance.
    Stop,
    /// Show the daemons of the instance.
    Status,
    /// List a directory.
    Ls {
        path: String,
        /// Show kind, size and mode.
        #[arg(short, long)]
        long: bool,
    },
    /// Show a file's attributes.
    Stat { path: String },
    /// Say whether the interposer can serve PROGRAM (dynamically linked against glibc, not
    /// setuid, not Go), and what to use if not.
    Doctor { program: String },
    /// Show where the bytes of files live: each range's node, host and address, whether it is
    /// in the burst buffer, the PFS copy or both, and the bytes per host, ranked (FusionFS and Swift).
    Where {
        /// Machine-readable output for schedulers.
        #[arg(long)]
        json: bool,
        /// Locate only the bytes from here (a size: 0, 64MiB, ...).
        #[arg(long, value_parser = tessera_cli::size::parse_size, default_value = "0")]
        offset: u64,
        /// Locate only this many bytes (default: to the end of each file).
        #[arg(long, value_parser = tessera_cli::size::parse_size)]
        length: Option<u64>,
        #[arg(required = true)]
        paths: Vec<String>,
    },
    /// Run tasks on the hosts holding their input bytes (FusionFS and Swift): `tessera run 'CMD {}'
    /// INPUT...` runs one task per input, `--tasks FILE` one per line `INPUT... :: COMMAND`.
    /// Each runs through the allocation's launcher (srun, mpirun; a process here for this
    /// machine) with TESSERA_NODE and the interposer set.
    Run {
        /// Only on that host (wait for a free slot there); by default a task whose host is
        /// full runs on another host with a free slot.
        #[arg(long)]
        hard: bool,
        /// Tasks running at once on one host.
        #[arg(long, default_value_t = 1)]
        per_host: usize,
        #[arg(long, value_enum, default_value = "auto")]
        launcher: tessera_cli::run_tasks::TaskLauncher,
        /// A file of tasks: `INPUT... :: COMMAND` per line, `{}` standing for the inputs.
        #[arg(long)]
        tasks: Option<PathBuf>,
        /// Write a JSON report of every task (host, node, placement, exit code, time).
        #[arg(long)]
        report: Option<PathBuf>,
        /// Do not preload the interposer into the tasks.
        #[arg(long)]
        no_preload: bool,
        /// COMMAND (with `{}` for the input), then the inputs.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Copy the bytes of files held on other nodes to this node's burst buffer (or to HOST's,
    /// with --to) and make it their holder, so reads there are local (FusionFS and Swift). A range
    /// changed meanwhile stays where it is.
    Migrate {
        /// The host to move the bytes to (as `tessera where` names it); default: this one.
        #[arg(long)]
        to: Option<String>,
        #[arg(required = true)]
        paths: Vec<String>,
    },
    /// Write a file to the PFS directory (atomically).
    Flush { path: String },
    /// The catalogue of variables and chunks that transactions publish (D2T): list the
    /// variables, show a version's chunks, wait for a version to commit.
    #[command(subcommand)]
    Vars(VarsCmd),
    /// Run a benchmark workload in a fresh instance (see `tessera bench --help`; needs
    /// tessera-bench, built with Open MPI).
    #[command(disable_help_flag = true)]
    Bench {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Run the N-1 strided checkpoint demo in a fresh instance.
    Demo(demo::DemoArgs),
    /// One rank of the demo (internal).
    #[command(hide = true)]
    DemoRank(demo::RankArgs),
    /// A rank that runs file operations read as JSON lines from stdin (internal, for tests).
    #[command(hide = true)]
    Script {
        #[arg(long)]
        node: Option<u32>,
    },
}

#[derive(Subcommand)]
enum VarsCmd {
    /// Every variable with its newest committed version.
    List {
        #[arg(long)]
        json: bool,
    },
    /// One version of a variable (the newest committed by default): its element type,
    /// dimensions and chunks, each a hyperslab and where its bytes are.
    Show {
        name: String,
        /// This version instead of the newest (a snapshot: exactly its chunks).
        #[arg(long)]
        version: Option<u64>,
        #[arg(long)]
        json: bool,
    },
    /// Wait until NAME has a committed version of at least --version, then print
    /// `NAME VERSION` (the newest). Exit status 124 if the time runs out (as timeout(1)), 1 on any other error.
    Wait {
        name: String,
        /// The version to wait for (1: the variable's first).
        #[arg(long, default_value_t = 1)]
        version: u64,
        /// How long to wait at most: 30s, 500ms, 2m, 1h (a bare number is seconds);
        /// default: as long as it takes.
        #[arg(long, value_parser = tessera_cli::vars::parse_duration)]
        timeout: Option<std::time::Duration>,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum StateDurabilityArg {
    Process,
    Machine,
}

impl From<StateDurabilityArg> for tessera_proto::config::StateDurability {
    fn from(a: StateDurabilityArg) -> Self {
        match a {
            StateDurabilityArg::Process => Self::Process,
            StateDurabilityArg::Machine => Self::Machine,
        }
    }
}

fn layout(cli: &Cli) -> InstanceLayout {
    match &cli.instance {
        Some(d) => InstanceLayout::new(d.clone()),
        None => InstanceLayout::from_env(),
    }
}

fn main() {
    let cli = Cli::parse();
    if !matches!(cli.cmd, Cmd::Serve { .. }) {
        // A command whose output goes into a pipe that closes early (`tessera status | head`)
        // ends quietly, as other command-line tools do, instead of panicking on EPIPE. The
        // daemon keeps SIGPIPE ignored: its peers' sockets may close under it.
        // SAFETY: setting a signal's disposition to its default has no preconditions.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    if let Err(e) = run(cli) {
        eprintln!("tessera: {e:#}");
        std::process::exit(1);
    }
}

fn run(cli: Cli) -> Result<()> {
    let layout = layout(&cli);
    match cli.cmd {
        Cmd::Serve { node, log } => instance::serve(layout, node, log)?,
        Cmd::Start {
            daemons,
            launcher,
            hostfile,
            net,
            timeout,
            pfs,
            bb_root,
            stripe_size,
            bb_capacity,
            model,
            state_durability,
            node,
            set,
        } => {
            let hostfile = match &hostfile {
                Some(p) => {
                    let text = std::fs::read_to_string(p)
                        .with_context(|| format!("reading host file {}", p.display()))?;
                    Some((p.as_path(), launch::parse_hostfile(&text)))
                }
                None => None,
            };
            let env: std::collections::HashMap<String, String> = std::env::vars().collect();
            // Restarting one node always happens here, on the node's own host.
            let how = match node {
                Some(_) => None,
                None => launch::choose(launcher, &env, hostfile)?,
            };
            if !layout.config_path().exists() {
                if node.is_some() {
                    bail!("no instance at {} to start a node of", layout.dir.display());
                }
                let daemons = match (&how, daemons) {
                    (Some(h), Some(d)) if d != h.nodes() => bail!(
                        "--daemons {d} disagrees with the {} nodes {} starts one daemon on; leave --daemons out",
                        h.nodes(),
                        h.name()
                    ),
                    (Some(h), _) => h.nodes(),
                    (None, d) => d.unwrap_or(3),
                };
                let mut set = set;
                match (&net, &how) {
                    (Some(n), _) => set.insert(0, format!("listen_host='{n}'")),
                    (None, Some(_)) => set.insert(0, "listen_host='auto'".to_string()),
                    (None, None) => {}
                }
                let pfs = pfs.unwrap_or_else(|| layout.dir.join("pfs"));
                instance::create(
                    &layout,
                    &instance::CreateOptions {
                        daemons,
                        pfs,
                        bb_root,
                        stripe_size,
                        bb_capacity,
                        model,
                        state_durability: state_durability.into(),
                        set,
                    },
                )?;
            }
            match (node, &how) {
                (Some(n), _) => instance::start_node(&layout, n)?,
                (None, Some(h)) => {
                    instance::start_launched(&layout, h, std::time::Duration::from_secs(timeout))?
                }
                (None, None) => instance::start_all(&layout)?,
            }
            instance::print_status(&layout)?;
        }
        Cmd::Salvage { node } => {
            let cfg = layout.load_config()?;
            if node >= cfg.nodes {
                bail!(
                    "node {node} does not exist: the instance has nodes 0..{}",
                    cfg.nodes
                );
            }
            if instance::is_up(&layout, node) {
                bail!("the daemon of node {node} is running; stop it first (`tessera stop`)");
            }
            let report = tessera_daemon::store::state_log::salvage(&cfg.bb_dir(node))?;
            println!("{report}");
        }
        Cmd::CheckNames => {
            layout.check_trusted()?;
            let cfg = layout.load_config()?;
            let admin = tessera_cli::admin::Admin::new(&layout)?;
            let mut raised = 0;
            for n in 0..cfg.nodes {
                let report = admin.check_names(n)?;
                for (ino, count, names) in &report.raised {
                    println!(
                        "node {n}: inode {ino:#x} had a count of {count} for {} names, raised: {}",
                        names.len(),
                        names.join(" ")
                    );
                }
                raised += report.raised.len();
                println!("node {n}: {} files checked", report.files);
            }
            println!("{raised} counts raised; remove the names you did not mean to keep");
        }
        Cmd::Find {
            io500,
            json,
            page_entries,
            expr,
        } => {
            layout.check_trusted()?;
            let started = std::time::Instant::now();
            let query = tessera_cli::find::parse(&expr)?;
            let output = match (io500, json) {
                (true, _) => tessera_cli::find::Output::Io500,
                (_, true) => tessera_cli::find::Output::Json,
                _ => tessera_cli::find::Output::Paths,
            };
            let counts = tessera_cli::find::run(&layout, &query, output, page_entries)?;
            tessera_cli::find::print_summary(output, &counts, started);
        }
        Cmd::Stop => {
            let n = instance::stop_all(&layout)?;
            println!("stopped {n} daemon(s) of {}", layout.dir.display());
        }
        Cmd::Status => {
            if !instance::print_status(&layout)? {
                std::process::exit(3);
            }
        }
        Cmd::Ls { path, long } => inspect::ls(&Client::connect(layout, None)?, &path, long)?,
        Cmd::Stat { path } => inspect::stat(&Client::connect(layout, None)?, &path)?,
        Cmd::Doctor { program } => doctor::run(&program)?,
        Cmd::Run {
            hard,
            per_host,
            launcher,
            tasks,
            report,
            no_preload,
            args,
        } => {
            use tessera_cli::run_tasks as rt;
            let tasks = match (&tasks, args.split_first()) {
                (Some(file), None) => rt::parse_task_file(
                    &std::fs::read_to_string(file)
                        .with_context(|| format!("reading the task file {}", file.display()))?,
                )?,
                (None, Some((cmd, inputs))) => rt::tasks_from_template(cmd, inputs),
                (Some(_), Some(_)) => {
                    anyhow::bail!("give either --tasks FILE or a command and its inputs, not both")
                }
                (None, None) => anyhow::bail!(
                    "nothing to run: give a command with {{}} and its inputs (tessera run 'wc -c {{}}' /tessera/a /tessera/b), or --tasks FILE"
                ),
            };
            let preload = if no_preload {
                None
            } else {
                let found = rt::find_preload();
                if found.is_none() {
                    eprintln!(
                        "tessera run: libtessera_preload.so not found next to this program; tasks run without the interposer (set LD_PRELOAD yourself, or --no-preload to silence this)"
                    );
                }
                found
            };
            let opts = rt::RunOptions {
                rule: if hard {
                    tessera_cli::task_queue::Rule::Hard
                } else {
                    tessera_cli::task_queue::Rule::Soft
                },
                per_host,
                launcher,
                preload,
                report,
            };
            let dir = layout.dir.clone();
            let r = rt::run(&Client::connect(layout, None)?, &dir, tasks, &opts)?;
            rt::print_summary(&r);
            if r.failed > 0 {
                std::process::exit(1);
            }
        }
        Cmd::Vars(cmd) => {
            use tessera_cli::vars;
            let c = Client::connect(layout, None)?;
            match cmd {
                VarsCmd::List { json } => vars::list(&c, json)?,
                VarsCmd::Show {
                    name,
                    version,
                    json,
                } => vars::show(&c, &name, version, json)?,
                VarsCmd::Wait {
                    name,
                    version,
                    timeout,
                } => {
                    if !vars::wait(&c, &name, version, timeout)? {
                        std::process::exit(vars::TIMED_OUT);
                    }
                }
            }
        }
        Cmd::Migrate { to: None, paths } => {
            inspect::migrate(&Client::connect(layout, None)?, &paths)?
        }
        Cmd::Migrate {
            to: Some(host),
            paths,
        } => {
            let table = layout.load_hosts()?;
            let wanted = tessera_proto::hosts::normalize_host(&host);
            let Some(e) = table
                .nodes
                .iter()
                .find(|e| tessera_proto::hosts::normalize_host(&e.host) == wanted)
            else {
                let known: Vec<&str> = table.nodes.iter().map(|e| e.host.as_str()).collect();
                bail!(
                    "--to {host}: no daemon runs there (daemons run on {})",
                    known.join(", ")
                );
            };
            let exe = std::env::current_exe()?;
            let mut line = format!(
                "{} --instance {} migrate",
                tessera_cli::run_tasks::shell_quote(&exe.display().to_string()),
                tessera_cli::run_tasks::shell_quote(&layout.dir.display().to_string())
            );
            for p in &paths {
                line.push(' ');
                line.push_str(&tessera_cli::run_tasks::shell_quote(p));
            }
            let status =
                tessera_cli::run_tasks::command_on_host(&e.host, e.node, &line, &layout.dir)
                    .stdin(std::process::Stdio::null())
                    .status()
                    .with_context(|| format!("launching the migration on {}", e.host))?;
            if !status.success() {
                bail!("the migration on {} failed ({status})", e.host);
            }
        }
        Cmd::Where {
            json,
            offset,
            length,
            paths,
        } => inspect::where_(
            &Client::connect(layout, None)?,
            &paths,
            (offset, length),
            json,
        )?,
        Cmd::Flush { path } => inspect::flush(&Client::connect(layout, None)?, &path)?,
        Cmd::Demo(a) => demo::run(a)?,
        Cmd::Bench { args } => bench(args)?,
        Cmd::DemoRank(a) => demo::rank_main(a)?,
        Cmd::Script { node } => script::main(Client::connect(layout, node)?)?,
    }
    Ok(())
}

/// `tessera bench ...` runs `tessera-bench run ...` from the same directory (the benchmark
/// ranks link MPI, which the file system itself does not need).
fn bench(args: Vec<String>) -> Result<()> {
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe()?.with_file_name("tessera-bench");
    if !exe.exists() {
        bail!(
            "{} is not built; build it with `cargo build --release -p tessera-bench` (needs Open MPI and libclang: apt-get install openmpi-bin libopenmpi-dev libclang-dev)",
            exe.display()
        );
    }
    let sub = match args.first().map(String::as_str) {
        None | Some("--help") | Some("-h") | Some("help") => {
            vec!["run".to_string(), "--help".to_string()]
        }
        Some("report") | Some("model") | Some("atomic") | Some("txn") | Some("locality") => args,
        Some(_) => std::iter::once("run".to_string()).chain(args).collect(),
    };
    Err(std::process::Command::new(&exe).args(sub).exec().into())
}
