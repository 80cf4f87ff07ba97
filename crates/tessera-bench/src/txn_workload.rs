//! The seed's workload (seed 000, section V), run by every rank of `tessera bench txn` against
//! a Tessera instance: a create step (ten 3-D variables of doubles, each process writing and
//! registering a 32 x 32 x 32 chunk of each) and an update step (one variable marked, its
//! chunks looked up and read, an updated variable written, the old one deleted and the new
//! one created in its place). With transactions, each step is one transaction of every
//! process and its writes and catalogue entries appear at its commit; without, the same
//! files and catalogue calls are published per process as they are made.

use anyhow::{Result, bail};
use mpi::traits::*;
use tessera_client::{Chunk, Client, Model, OpenOptions, Variable};
use tessera_txn::{Transaction, Transactions};

/// Where the workload's files go (a directory per run under it).
pub const ROOT: &str = "/tessera/txn-workload";

/// Variables the create step makes.
pub const VARIABLES: usize = 10;
/// Each process's chunk of a variable: 32 x 32 x 32 doubles.
const EDGE: u64 = 32;
const CHUNK_BYTES: u64 = EDGE * EDGE * EDGE * 8;

/// What one rank runs the workload with.
pub struct Workload<'a> {
    pub world: &'a mpi::topology::SimpleCommunicator,
    pub client: &'a Client,
    /// Transactions whose file system is `client`.
    pub txns: &'a Transactions,
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

    /// Runs `step` in a transaction of every process (`with_txn`) or without one; the
    /// barriers stand where the transaction's collective phases order the calls.
    fn step(&self, with_txn: bool, step: &dyn Fn() -> Result<()>) -> Result<()> {
        if !with_txn {
            step()?;
            self.world.barrier();
            return Ok(());
        }
        let mut t: Transaction = self.txns.create_transaction()?;
        let sub = t.create_sub_transaction_all("step")?;
        t.begin_transaction()?;
        step()?;
        t.commit_sub_transaction(sub)?;
        t.vote_transaction(true)?;
        t.commit_transaction()?;
        t.finalize();
        Ok(())
    }

    /// The whole workload under names starting `tag` (unique per run); returns the slowest
    /// rank's time.
    pub fn run(&self, tag: &str, with_txn: bool) -> Result<f64> {
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
        let t0 = mpi::time();
        // Create step: every variable's chunk written, registered once the variable exists.
        self.step(with_txn, &|| {
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
        self.step(with_txn, &|| {
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
        // The update is visible whole to everyone now.
        let updated = self.read_own_chunk(&name(0))?;
        if updated != 1.0 {
            bail!(
                "rank {} read {updated} from the updated variable, not 1",
                self.rank()
            );
        }
        let mut slowest = 0f64;
        self.world
            .all_reduce_into(&mine, &mut slowest, mpi::collective::SystemOperation::max());
        Ok(slowest)
    }
}
