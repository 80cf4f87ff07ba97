//! D2T's workload (section V), run by every rank of `tessera bench txn` against
//! a Tessera instance: a create step (ten 3-D variables of doubles, each process writing and
//! registering a 32 x 32 x 32 chunk of each) and an update step (one variable marked, its
//! chunks looked up and read, an updated variable written, the old one deleted and the new
//! one created in its place). With transactions, each step is one transaction of every
//! process and its writes and catalogue entries appear at its commit; without, the same
//! files and catalogue calls are published per process as they are made; protocol-only, the
//! steps make the transaction calls but publish as made (the protocol's share of the cost).

use anyhow::{Result, bail};
use mpi::traits::*;
use std::cell::RefCell;
use tessera_client::{Chunk, Client, Model, OpenOptions, Variable};
use tessera_txn::{Transaction, Transactions};

/// Where the workload's files go (a directory per run under it).
pub const ROOT: &str = "/tessera/txn-workload";

/// Variables the create step makes.
pub const VARIABLES: usize = 10;
/// Each process's chunk of a variable: 32 x 32 x 32 doubles.
const EDGE: u64 = 32;
const CHUNK_BYTES: u64 = EDGE * EDGE * EDGE * 8;

/// The parts of a step timed apart, as metric names (`<with|without>_txn_<part>_s`): with
/// transactions, opening (create, the global sub-transaction, begin), the step's own calls,
/// the vote and the commit; without, the step's own calls and the barrier that ends it.
pub const PARTS: [&str; 5] = ["open", "body", "vote", "commit", "barrier"];

/// How the workload's steps are run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Each step one transaction of every process, in Tessera too.
    Txn,
    /// No transaction: published as made, a barrier ends each step.
    Plain,
    /// The transaction protocol's calls, but transactions that do not reach Tessera (what the
    /// processes publish is published as made): what the protocol alone costs.
    ProtocolOnly,
}

impl Mode {
    /// The prefix of its metrics (`<prefix>_s`, `<prefix>_<part>_s`).
    pub fn metric(self) -> &'static str {
        match self {
            Mode::Txn => "with_txn",
            Mode::Plain => "without_txn",
            Mode::ProtocolOnly => "protocol_only",
        }
    }
}

/// What one rank runs the workload with.
pub struct Workload<'a> {
    pub world: &'a mpi::topology::SimpleCommunicator,
    pub client: &'a Client,
    /// Transactions whose file system is `client`.
    pub txns: &'a Transactions,
    /// Transactions without a file system (the protocol-only mode).
    pub protocol_only: &'a Transactions,
    /// This rank's time in each of [`PARTS`] during the current run.
    pub parts: RefCell<[f64; PARTS.len()]>,
    /// This rank's CPU seconds in each of [`PARTS`] during the current run.
    pub parts_cpu: RefCell<[f64; PARTS.len()]>,
    /// The process ids of the instance's daemons on this host (read by rank 0 only), whose
    /// CPU time a run reports: on 2 cores with 16 ranks every cycle a daemon spends is one
    /// a rank waits for.
    pub daemons: Vec<u32>,
}

/// What a run of the workload measured: the slowest rank's time in all and in each of
/// [`PARTS`] (each the slowest rank's, so they need not add up to the total).
pub struct Timed {
    pub total: f64,
    pub parts: [f64; PARTS.len()],
    /// CPU seconds the daemons spent during the run.
    pub daemon_cpu: f64,
    /// CPU seconds the ranks spent during the run, all of them together.
    pub rank_cpu: f64,
    /// CPU seconds the ranks spent in each of [`PARTS`], all of them together: where the
    /// transactions' extra CPU goes.
    pub parts_cpu: [f64; PARTS.len()],
}

/// CPU seconds this process has used (every thread).
fn own_cpu() -> f64 {
    // SAFETY: getrusage writes into the struct it is given, which lives for the call.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

impl Workload<'_> {
    fn rank(&self) -> u64 {
        self.world.rank() as u64
    }

    /// Variable `name`: the processes' chunks side by side along the first dimension.
    fn variable(&self, name: &str) -> Variable {
        Variable {
            name: name.to_string(),
            elem_type: "f64".into(),
            elem_size: 8,
            dims: vec![EDGE * self.world.size() as u64, EDGE, EDGE],
        }
    }

    /// This process's chunk of a variable whose bytes are in `path`.
    fn chunk(&self, path: &str) -> Chunk {
        Chunk {
            offsets: vec![EDGE * self.rank(), 0, 0],
            counts: vec![EDGE, EDGE, EDGE],
            path: path.to_string(),
            offset: self.rank() * CHUNK_BYTES,
            len: CHUNK_BYTES,
        }
    }

    /// Writes this process's chunk of `path` (filled with `fill`) and publishes it.
    fn write_chunk(&self, path: &str, fill: f64) -> Result<()> {
        let bytes: Vec<u8> = std::iter::repeat_n(fill.to_le_bytes(), (CHUNK_BYTES / 8) as usize)
            .flatten()
            .collect();
        let mut f = self.client.open(
            path,
            OpenOptions::new()
                .write(true)
                .create(true)
                .model(Model::Commit),
        )?;
        f.write_at(&bytes, self.rank() * CHUNK_BYTES)?;
        f.close()?;
        Ok(())
    }

    /// Every chunk of `name` as the catalogue lists it; reads this process's.
    fn read_own_chunk(&self, name: &str) -> Result<f64> {
        let v = self.client.cat_lookup(name, None)?;
        if v.chunks.len() != self.world.size() as usize {
            bail!(
                "{name} has {} chunks, not {}",
                v.chunks.len(),
                self.world.size()
            );
        }
        let mine = &v.chunks[v
            .chunks
            .iter()
            .position(|c| c.offsets[0] == EDGE * self.rank())
            .ok_or_else(|| anyhow::anyhow!("{name} has no chunk of rank {}", self.rank()))?];
        let mut f = self.client.open(
            &mine.path,
            OpenOptions::new().read(true).model(Model::Commit),
        )?;
        let mut buf = vec![0u8; mine.len as usize];
        let n = f.read_at(&mut buf, mine.offset)?;
        if n as u64 != mine.len {
            bail!("{}: read {n} bytes of {}", mine.path, mine.len);
        }
        Ok(f64::from_le_bytes(buf[..8].try_into().expect("8 bytes")))
    }

    /// Runs `step` in a transaction of every process (`mode`) or without one; the barriers
    /// stand where the transaction's collective phases order the calls.
    fn step(&self, mode: Mode, step: &dyn Fn() -> Result<()>) -> Result<()> {
        let (mut at, mut cpu_at) = (mpi::time(), own_cpu());
        let mut lap = |part: usize| {
            let (now, cpu) = (mpi::time(), own_cpu());
            self.parts.borrow_mut()[part] += now - at;
            self.parts_cpu.borrow_mut()[part] += cpu - cpu_at;
            (at, cpu_at) = (now, cpu);
        };
        let txns = match mode {
            Mode::Txn => self.txns,
            Mode::ProtocolOnly => self.protocol_only,
            Mode::Plain => {
                step()?;
                lap(1);
                self.world.barrier();
                lap(4);
                return Ok(());
            }
        };
        let mut t: Transaction = txns.create_transaction()?;
        let sub = t.create_sub_transaction_all("step")?;
        t.begin_transaction()?;
        lap(0);
        step()?;
        lap(1);
        t.commit_sub_transaction(sub)?;
        t.vote_transaction(true)?;
        lap(2);
        t.commit_transaction()?;
        t.finalize();
        lap(3);
        Ok(())
    }

    /// The whole workload under names starting `tag` (unique per run); returns the slowest
    /// rank's time, in all and by part.
    pub fn run(&self, tag: &str, mode: Mode) -> Result<Timed> {
        *self.parts.borrow_mut() = [0.0; PARTS.len()];
        *self.parts_cpu.borrow_mut() = [0.0; PARTS.len()];
        let dir = format!("{ROOT}/{tag}");
        let name = |v: usize| format!("{tag}.var{v}");
        let file = |v: usize, version: u32| format!("{dir}/var{v}.v{version}");
        if self.rank() == 0 {
            self.client.mkdir(&dir, 0o755)?;
            // The previous run's bytes reach the disk now, not during this run.
            // SAFETY: sync takes no arguments and cannot fail.
            unsafe { libc::sync() };
        }
        self.world.barrier();
        let daemons_cpu = || {
            self.daemons
                .iter()
                .map(|p| crate::rank::threads_cpu_secs(*p))
                .sum::<f64>()
        };
        let (daemons0, own0) = (daemons_cpu(), own_cpu());
        let t0 = mpi::time();
        // Create step: every variable's chunk written, registered once the variable exists.
        self.step(mode, &|| {
            if self.rank() == 0 {
                for v in 0..VARIABLES {
                    self.client.cat_create(self.variable(&name(v)))?;
                }
            }
            for v in 0..VARIABLES {
                self.write_chunk(&file(v, 1), v as f64)?;
            }
            self.world.barrier();
            for v in 0..VARIABLES {
                self.client
                    .cat_add_chunk(&name(v), self.chunk(&file(v, 1)))?;
            }
            Ok(())
        })?;
        // Update step on variable 0.
        self.step(mode, &|| {
            let old = self.read_own_chunk(&name(0))?;
            self.write_chunk(&file(0, 2), old + 1.0)?;
            self.world.barrier();
            if self.rank() == 0 {
                self.client.cat_delete(&name(0))?;
                self.client.cat_create(self.variable(&name(0)))?;
            }
            self.world.barrier();
            self.client
                .cat_add_chunk(&name(0), self.chunk(&file(0, 2)))?;
            Ok(())
        })?;
        let mine = mpi::time() - t0;
        let (daemon_cpu, own) = (daemons_cpu() - daemons0, own_cpu() - own0);
        let mut rank_cpu = 0f64;
        self.world
            .all_reduce_into(&own, &mut rank_cpu, mpi::collective::SystemOperation::sum());
        // The update is visible whole to everyone now.
        let updated = self.read_own_chunk(&name(0))?;
        if updated != 1.0 {
            bail!(
                "rank {} read {updated} from the updated variable, not 1",
                self.rank()
            );
        }
        let mut times = [0f64; PARTS.len() + 1];
        times[0] = mine;
        times[1..].copy_from_slice(&self.parts.borrow()[..]);
        let mut slowest = [0f64; PARTS.len() + 1];
        self.world.all_reduce_into(
            &times[..],
            &mut slowest[..],
            mpi::collective::SystemOperation::max(),
        );
        let mut parts_cpu = [0f64; PARTS.len()];
        self.world.all_reduce_into(
            &self.parts_cpu.borrow()[..],
            &mut parts_cpu[..],
            mpi::collective::SystemOperation::sum(),
        );
        Ok(Timed {
            parts_cpu,
            total: slowest[0],
            parts: slowest[1..].try_into().expect("one per part"),
            daemon_cpu,
            rank_cpu,
        })
    }
}
