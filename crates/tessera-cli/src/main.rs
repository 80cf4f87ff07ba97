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

use anyhow::{Result, bail};
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use tessera_cli::{demo, doctor, find, inspect, instance, repair, run_tasks, script, start, vars};
use tessera_client::Client;
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
    Start(start::StartArgs),
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
    Find(find::FindArgs),
    /// Stop every daemon of the instance.
    Stop,
    /// Show the daemons of the instance, and where each serves its metrics.
    Status {
        /// Show each node's metrics as rates, refreshing (Ctrl-C ends it).
        #[arg(long)]
        watch: bool,
        /// Time between refreshes of --watch (`2s`, `500ms`).
        #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
        interval: std::time::Duration,
        /// With --watch: stop after this many refreshes.
        #[arg(long)]
        count: Option<u64>,
    },
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
    Run(run_tasks::RunArgs),
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
    /// Mount the instance with FUSE, for programs the interposer does not reach
    /// (statically linked and Go programs, containers, file browsers).
    Mount(tessera_cli::mount::MountArgs),
    /// Copy files or trees into Tessera in parallel over every node (each node's worker
    /// writes its share into its burst buffer); a rerun copies only what is not staged yet.
    /// A source in the instance's PFS directory (or a Tessera path) is staged in place: the
    /// bytes only its PFS copy holds come into the burst buffers.
    StageIn(tessera_cli::stage::StageArgs),
    /// Copy Tessera files or trees out: into the instance's PFS directory (a flush), or
    /// into a directory outside it; in parallel over every node, resumable like stage-in.
    StageOut(tessera_cli::stage::StageArgs),
    /// One node's share of a staging run (internal: launched by stage-in and stage-out).
    #[command(hide = true)]
    StageWorker {
        #[arg(long)]
        plan: std::path::PathBuf,
        #[arg(long)]
        share: usize,
        #[arg(long)]
        node: u32,
    },
    /// Unmount a FUSE mount of the instance; refused (EBUSY, naming the processes) while
    /// it is in use, unless --lazy.
    Umount {
        mountpoint: std::path::PathBuf,
        /// Detach it now; the kernel lets it go once its last user is done.
        #[arg(long)]
        lazy: bool,
    },
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
        /// Work through plain file calls on this FUSE mount of the instance instead.
        #[arg(long)]
        posix_root: Option<std::path::PathBuf>,
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

/// Runs the command: each arm hands its options to the function that carries it out.
fn run(cli: Cli) -> Result<()> {
    let layout = layout(&cli);
    let client = |node| Client::connect(layout.clone(), node);
    match cli.cmd {
        Cmd::Serve { node, log } => instance::serve(layout, node, log)?,
        Cmd::Start(args) => start::run(&layout, args)?,
        Cmd::Salvage { node } => repair::salvage(&layout, node)?,
        Cmd::CheckNames => repair::check_names(&layout)?,
        Cmd::Find(args) => find::main(&layout, &args)?,
        Cmd::Stop => {
            let n = instance::stop_all(&layout)?;
            println!("stopped {n} daemon(s) of {}", layout.dir.display());
        }
        Cmd::Status {
            watch: true,
            interval,
            count,
        } => tessera_cli::watch::run(&layout, interval, count)?,
        Cmd::Status { .. } => {
            if !instance::print_status(&layout)? {
                std::process::exit(3);
            }
        }
        Cmd::Ls { path, long } => inspect::ls(&client(None)?, &path, long)?,
        Cmd::Stat { path } => inspect::stat(&client(None)?, &path)?,
        Cmd::Doctor { program } => doctor::run(&program)?,
        Cmd::Run(args) => {
            if !run_tasks::main(&layout, args)? {
                std::process::exit(1);
            }
        }
        Cmd::Vars(VarsCmd::List { json }) => vars::list(&client(None)?, json)?,
        Cmd::Vars(VarsCmd::Show {
            name,
            version,
            json,
        }) => vars::show(&client(None)?, &name, version, json)?,
        Cmd::Vars(VarsCmd::Wait {
            name,
            version,
            timeout,
        }) => {
            if !vars::wait(&client(None)?, &name, version, timeout)? {
                std::process::exit(vars::TIMED_OUT);
            }
        }
        Cmd::Migrate { to: None, paths } => inspect::migrate(&client(None)?, &paths)?,
        Cmd::Migrate {
            to: Some(host),
            paths,
        } => inspect::migrate_to(&layout, &host, &paths)?,
        Cmd::Where {
            json,
            offset,
            length,
            paths,
        } => inspect::where_(&client(None)?, &paths, (offset, length), json)?,
        Cmd::Flush { path } => inspect::flush(&client(None)?, &path)?,
        Cmd::Mount(args) => tessera_cli::mount::mount(&layout, &args)?,
        Cmd::StageIn(args) => stage(&layout, &args, tessera_cli::stage::Direction::In)?,
        Cmd::StageOut(args) => stage(&layout, &args, tessera_cli::stage::Direction::Out)?,
        Cmd::StageWorker { plan, share, node } => {
            tessera_cli::stage::worker::main(&layout, &plan, share, node)?
        }
        Cmd::Umount { mountpoint, lazy } => tessera_cli::mount::umount(&mountpoint, lazy)?,
        Cmd::Demo(a) => demo::run(a)?,
        Cmd::Bench { args } => bench(args)?,
        Cmd::DemoRank(a) => demo::rank_main(a)?,
        Cmd::Script {
            posix_root: Some(root),
            ..
        } => tessera_cli::script_posix::main(&root, &layout.load_config()?.mount)?,
        Cmd::Script { node, .. } => script::main(client(node)?)?,
    }
    Ok(())
}

/// A staging run; exit status 1 if a file could not be copied (the summary names it).
fn stage(
    layout: &InstanceLayout,
    args: &tessera_cli::stage::StageArgs,
    direction: tessera_cli::stage::Direction,
) -> anyhow::Result<()> {
    let outcome = tessera_cli::stage::run(layout, args, direction)?;
    if !tessera_cli::stage::succeeded(&outcome) {
        std::process::exit(1);
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
