//! The options of a benchmark run, shared by the front end and the ranks.

use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    /// PLFS N-1 strided checkpoint and rank-shifted read-back (PLFS).
    Checkpoint,
    /// Wang, Mohror and Snir Table VII/VIII patterns under each consistency model.
    Consistency,
    /// Wang, Mohror and Snir §6.3: random sample reads of a preloaded data set.
    DlRead,
    /// Wang, Mohror and Snir §6.2: HACC-IO checkpoint with SCR partner copies, and restart.
    Scr,
    /// Latency of the synchronisation primitives beside a raw socket round trip.
    Ops,
    /// mdtest-like create, stat and remove in a shared directory.
    Meta,
    /// Many writers of one file: ownership state, whole-file query and restart costs.
    Scale,
}

impl Workload {
    pub fn name(self) -> &'static str {
        match self {
            Workload::Checkpoint => "checkpoint",
            Workload::Consistency => "consistency",
            Workload::DlRead => "dl-read",
            Workload::Scr => "scr",
            Workload::Ops => "ops",
            Workload::Meta => "meta",
            Workload::Scale => "scale",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
pub enum Pattern {
    /// Contiguous N-1 writes.
    #[value(name = "CN-W")]
    #[serde(rename = "CN-W")]
    CnW,
    /// Strided N-1 writes.
    #[value(name = "SN-W")]
    #[serde(rename = "SN-W")]
    SnW,
    /// Contiguous writes by half the ranks, contiguous reads by the other half.
    #[value(name = "CC-R")]
    #[serde(rename = "CC-R")]
    CcR,
    /// Contiguous writes by half the ranks, strided reads by the other half.
    #[value(name = "CS-R")]
    #[serde(rename = "CS-R")]
    CsR,
}

impl Pattern {
    pub fn name(self) -> &'static str {
        match self {
            Pattern::CnW => "CN-W",
            Pattern::SnW => "SN-W",
            Pattern::CcR => "CC-R",
            Pattern::CsR => "CS-R",
        }
    }
    pub fn reads(self) -> bool {
        matches!(self, Pattern::CcR | Pattern::CsR)
    }
}

/// The shape of the metadata workload (mdtest's and IO500's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Shape {
    /// Every rank creates, stats, lists and removes empty files of its own in one shared
    /// directory.
    #[default]
    Shared,
    /// mdtest-easy: a directory per rank, empty files.
    Easy,
    /// mdtest-hard: one shared directory of 3901-byte files, written by one rank and stat'ed,
    /// read and removed by the next.
    Hard,
}

impl Shape {
    pub fn name(self) -> &'static str {
        match self {
            Shape::Shared => "shared",
            Shape::Easy => "easy",
            Shape::Hard => "hard",
        }
    }
}

/// Parameters of the workloads (each workload reads the ones it needs).
#[derive(Clone, Debug, Args, Serialize, Deserialize)]
pub struct Params {
    /// MPI ranks.
    #[arg(long, default_value_t = 4)]
    pub ranks: u32,
    /// Daemons of the instance (ranks are spread over them cyclically: rank r uses node r % daemons).
    #[arg(long, default_value_t = 3)]
    pub daemons: u32,
    /// Run on this many emulated hosts (as root, after `scripts/hosts.sh up N` and
    /// `eval "$(scripts/hosts.sh env)"`): one daemon per host, ranks spread over the hosts by
    /// mpirun, each on its host's daemon; adds `tcp_stream_mibs`. 0: everything here.
    #[arg(long, default_value_t = 0)]
    #[serde(default)]
    pub hosts: u32,
    /// Repetitions; every metric is reported as the median over them.
    #[arg(long, default_value_t = 3)]
    pub reps: u32,
    /// checkpoint: bytes per write (units allowed: 47001, 1MiB).
    #[arg(long, default_value = "47001", value_parser = tessera_cli::size::parse_size)]
    pub xfer: u64,
    /// checkpoint: bytes per rank, rounded up to whole writes; consistency without --ops:
    /// bytes each writing rank writes (units allowed: 64MiB).
    #[arg(long, default_value = "64MiB", value_parser = tessera_cli::size::parse_size)]
    pub per_rank: u64,
    /// checkpoint: fsync (direct) / fsync = commit + durable logs (Tessera) before close.
    #[arg(long)]
    pub fsync: bool,
    /// consistency: access pattern.
    #[arg(long, value_enum, default_value = "CS-R")]
    pub pattern: Pattern,
    /// consistency: bytes per access (the paper: 8k and 8m).
    #[arg(long, default_value = "8k", value_parser = tessera_cli::size::parse_size)]
    pub size: u64,
    /// consistency: writes per writing rank (the paper: 10). 0, the default: as many of
    /// --size as fit in --per-rank, at least 10 and at most 2000 (2000 for 8 KiB accesses,
    /// 10 for 8 MiB).
    #[arg(long, default_value_t = 0)]
    pub ops: u64,
    /// dl-read: samples each rank preloads.
    #[arg(long, default_value_t = 256)]
    pub samples: u64,
    /// dl-read: epochs.
    #[arg(long, default_value_t = 3)]
    pub epochs: u32,
    /// scr: particles per rank (38 bytes each over 9 arrays, as HACC-IO).
    #[arg(long, default_value_t = 500_000)]
    pub particles: u64,
    /// ops: operations timed per primitive.
    #[arg(long, default_value_t = 2000)]
    pub samples_ops: u64,
    /// meta: files per rank.
    #[arg(long, default_value_t = 1000)]
    pub files: u64,
    /// meta: the shape of the directories and files.
    #[arg(long, value_enum, default_value = "shared")]
    #[serde(default)]
    pub shape: Shape,
    /// scale: writers (each a client of its own; the ranks host them in turn).
    #[arg(long, default_value_t = 1000)]
    #[serde(default)]
    pub writers: u64,
    /// scale: pieces each writer writes (of --xfer bytes).
    #[arg(long, default_value_t = 1000)]
    #[serde(default)]
    pub writes: u64,
    /// scale: random offsets instead of the N-1 strided pattern.
    #[arg(long)]
    #[serde(default)]
    pub random: bool,
    /// Self-test: rank 0 treats the first byte it verifies as corrupt, to prove that a
    /// verification failure fails the run.
    #[arg(long, hide = true)]
    #[serde(default)]
    pub inject_fault: bool,
    /// The instance's peer security level: auth (the default), integrity or privacy; none
    /// only in a build with `--features insecure-bench`.
    #[arg(long, value_enum, default_value = "auth")]
    #[serde(default)]
    pub security: SecurityArg,
}

/// `--security` (tessera_proto's `Security`, for the command line).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SecurityArg {
    None,
    #[default]
    Auth,
    Integrity,
    Privacy,
}

impl SecurityArg {
    pub fn name(self) -> &'static str {
        match self {
            SecurityArg::None => "none",
            SecurityArg::Auth => "auth",
            SecurityArg::Integrity => "integrity",
            SecurityArg::Privacy => "privacy",
        }
    }
}

impl Params {
    /// consistency: the accesses each writing rank makes (`--ops`, or sized by `--per-rank`).
    pub fn accesses(&self) -> u64 {
        match self.ops {
            0 => (self.per_rank / self.size.max(1)).clamp(10, 2000),
            n => n,
        }
    }
}

/// Where a rank finds the instance and the direct-I/O directory.
#[derive(Clone, Debug, Args)]
pub struct Place {
    /// Instance directory (started by the front end).
    #[arg(long)]
    pub instance: PathBuf,
    /// Directory on the same disk for direct I/O.
    #[arg(long)]
    pub direct: PathBuf,
}
