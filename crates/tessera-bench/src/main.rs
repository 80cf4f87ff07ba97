//! `tessera-bench`: the benchmark suite of Tessera (see `tessera bench --help`).
//!
//! ```text
//! tessera-bench run WORKLOAD [options]   front end: fresh instance, mpirun, table (+ --json)
//! tessera-bench rank WORKLOAD ...        one MPI rank (launched by the front end)
//! tessera-bench report                   regenerate docs/benchmarks.md and its plots
//! tessera-bench model                    the cost model to 64k processes
//! tessera-bench atomic [options]         Aarestad et al. (list locks): MPI-IO atomic mode under each lock strategy
//! tessera-bench txn [options]            D2T: the transaction protocol's calls timed, or
//!                                        (--model) its messages to 65,536 processes
//! tessera-bench locality --hosts N       FusionFS and Swift: reads placed by the locality query, blind,
//!                                        migrated and direct, on emulated hosts
//! tessera-bench interfaces [options]     an N-1 checkpoint of POSIX processes through the interposer,
//!                                        the FUSE mount, and direct I/O
//! tessera-bench read-blocks PATH [options] one process reading a file in blocks through the
//!                                        Rust client (the reference for the Python package)
//! ```

mod args;
mod atomic;
mod atomic_report;
mod fits;
mod front;
mod interfaces;
mod locality;
mod locality_report;
mod locality_task;
mod lock_trace;
mod model;
mod page_reporting;
mod rank;
mod read_blocks;
mod report;
mod results;
mod scale_report;
mod txn;
mod txn_model;
mod txn_report;
mod txn_workload;
mod workloads;

use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "tessera-bench",
    version,
    about = "Tessera benchmarks: the workloads of the papers Tessera builds on beside direct I/O"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a workload in a fresh instance and print its table.
    Run {
        #[arg(value_enum)]
        workload: args::Workload,
        #[command(flatten)]
        params: args::Params,
        #[command(flatten)]
        opts: front::FrontOpts,
    },
    /// One rank of a workload (under mpirun).
    #[command(hide = true)]
    Rank {
        #[arg(value_enum)]
        workload: args::Workload,
        #[command(flatten)]
        params: args::Params,
        #[command(flatten)]
        place: args::Place,
    },
    /// Regenerate the report (markdown and plots) from the records in `results/`.
    Report {
        #[arg(long, default_value = "results")]
        results: PathBuf,
        /// Markdown file to write; plots go to a `bench/` directory beside it.
        #[arg(long, default_value = "docs/benchmarks.md")]
        out: PathBuf,
        /// Hand-written analysis appended to the report.
        #[arg(long, default_value = "docs/benchmark-analysis.md")]
        analysis: PathBuf,
    },
    /// Print the cost model to 64k processes (shard entries, query bytes, messages per open),
    /// computed with the real placement and encoding.
    Model {
        /// Pieces per process.
        #[arg(long, default_value_t = 1000)]
        writes: u64,
        /// Bytes per piece (units allowed).
        #[arg(long, default_value = "47001", value_parser = tessera_cli::size::parse_size)]
        xfer: u64,
    },
    /// Aarestad et al.'s experiments: MPI-IO atomic mode under every lock strategy (none, whole,
    /// extent, list), through the interposer.
    Atomic {
        #[command(flatten)]
        opts: atomic::AtomicOpts,
    },
    /// D2T's transaction protocol: each call of D2T's sequence timed under mpirun
    /// beside an 8-byte allreduce, or (`--model`) its messages beside a flat two-phase commit.
    Txn {
        #[command(flatten)]
        opts: txn::TxnOpts,
    },
    /// The FusionFS and Swift experiment on emulated hosts: reads placed with the locality query, placed
    /// round robin without it, with migrate-on-open, and direct reads of the same bytes.
    Locality {
        #[command(flatten)]
        opts: locality::LocalityOpts,
    },
    /// An N-1 strided checkpoint written and read by plain POSIX processes through the
    /// interposer, through the FUSE mount, and with direct I/O on the local disk.
    Interfaces {
        #[command(flatten)]
        opts: interfaces::InterfacesOpts,
    },
    /// One process reading a Tessera file in blocks through the Rust client, a rate (MiB/s)
    /// per pass: the reference for other layers' reads of the same file.
    ReadBlocks {
        #[command(flatten)]
        opts: read_blocks::ReadBlocksOpts,
    },
    /// One task of `locality` (under mpirun).
    #[command(hide = true)]
    LocalityTask {
        #[arg(long)]
        plan: PathBuf,
    },
    /// One rank of `txn` (under mpirun).
    #[command(hide = true)]
    TxnRank {
        #[arg(long)]
        reps: usize,
    },
    /// A daemon (the front end starts its instance with this executable).
    #[command(hide = true)]
    Serve {
        #[arg(long)]
        instance: PathBuf,
        /// Default: the launcher's task rank.
        #[arg(long)]
        node: Option<u32>,
        /// Log to INSTANCE/logs/node-K.log.
        #[arg(long)]
        log: bool,
    },
    /// Echo framed messages on a Unix socket and a TCP address (the far end of the transport
    /// measurements).
    #[command(hide = true)]
    Echo { path: PathBuf, tcp: String },
    /// One TCP stream between two hosts (two ranks of mpirun): the ceiling of remote reads.
    #[command(hide = true)]
    TcpStream {
        #[arg(long)]
        rendezvous: PathBuf,
        #[arg(long, value_parser = tessera_cli::size::parse_size)]
        bytes: u64,
    },
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Run {
            workload,
            params,
            opts,
        } => front::run(workload, params, opts),
        Cmd::Rank {
            workload,
            params,
            place,
        } => rank::main(workload, params, place),
        Cmd::Report {
            results,
            out,
            analysis,
        } => report::run(&results, &out, &analysis),
        Cmd::Atomic { opts } => atomic::run(opts),
        Cmd::Txn { opts } => txn::run(opts),
        Cmd::TxnRank { reps } => txn::rank(reps),
        Cmd::Locality { opts } => locality::run(opts),
        Cmd::Interfaces { opts } => interfaces::run(opts),
        Cmd::ReadBlocks { opts } => read_blocks::run(opts),
        Cmd::LocalityTask { plan } => locality_task::main(&plan),
        Cmd::Model { writes, xfer } => {
            print!("{}", model::table(writes, xfer));
            Ok(())
        }
        Cmd::Serve {
            instance,
            node,
            log,
        } => tessera_cli::instance::serve(tessera_client::InstanceLayout::new(instance), node, log),
        Cmd::Echo { path, tcp } => workloads::ops::echo(&path, &tcp),
        Cmd::TcpStream { rendezvous, bytes } => workloads::tcp_stream::main(&rendezvous, bytes),
    };
    if let Err(e) = result {
        eprintln!("tessera-bench: {e:#}");
        std::process::exit(1);
    }
}
