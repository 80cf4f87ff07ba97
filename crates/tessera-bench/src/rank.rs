//! The rank side: MPI setup, phase timing with barriers, reductions, and failure handling.
//!
//! A phase is timed IOR-style: barrier, every rank notes its start, does its work, notes its
//! end; the phase lasts from the earliest start to the latest end. Any rank that fails (a
//! verification error included) prints why and aborts the whole job, so `mpirun` and the front
//! end exit non-zero.

use crate::args::{Params, Place, Workload};
use crate::results::Metrics;
use crate::workloads;
use mpi::collective::SystemOperation;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::path::{Path, PathBuf};
use tessera_client::{Client, InstanceLayout, Stats};

/// Marker of the line rank 0 prints with the results.
pub const RESULT_MARKER: &str = "TESSERA-BENCH-RESULT ";

pub struct Ctx {
    pub world: SimpleCommunicator,
    pub rank: usize,
    pub size: usize,
    pub params: Params,
    pub direct: PathBuf,
    pub client: Client,
    pub layout: InstanceLayout,
}

impl Ctx {
    /// Aborts the job with a message naming this rank.
    pub fn fail(&self, what: impl std::fmt::Display) -> ! {
        eprintln!("tessera-bench rank {}: {what}", self.rank);
        self.world.abort(3)
    }

    /// Unwraps or aborts the job.
    pub fn ok<T, E: std::fmt::Display>(&self, r: Result<T, E>) -> T {
        r.unwrap_or_else(|e| self.fail(e))
    }

    /// A barrier that sleeps while it waits. Open MPI's blocking barrier spins (with
    /// sched_yield when oversubscribed), and ranks waiting for others would take the CPU the
    /// working ranks and the daemons need: on 2 cores that distorted every phase in which only
    /// some ranks work (the read phases of CS-R/CC-R, the restart of SCR).
    pub fn barrier(&self) {
        let mut req = self.world.immediate_barrier();
        loop {
            match req.test() {
                Ok(_) => return,
                Err(pending) => req = pending,
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }

    /// Runs `work` on every rank between barriers; returns the phase time in seconds, from the
    /// earliest start to the latest end.
    /// With `TESSERA_BENCH_MARKS` set, rank 0 prints `mark <what> <CLOCK_MONOTONIC seconds>`
    /// to stderr: the bounds of a phase, for `perf record -k CLOCK_MONOTONIC` and
    /// `perf report --time <start>,<end>` to profile that phase alone.
    pub fn mark(&self, what: &str) {
        if self.rank == 0 && std::env::var_os("TESSERA_BENCH_MARKS").is_some() {
            let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
            eprintln!("mark {what} {}.{:09}", t.tv_sec, t.tv_nsec);
        }
    }

    pub fn timed(&self, work: impl FnOnce()) -> f64 {
        self.barrier();
        let t0 = mpi::time();
        work();
        let t1 = mpi::time();
        self.barrier();
        let (mut first, mut last) = (0.0f64, 0.0f64);
        self.world
            .all_reduce_into(&t0, &mut first, SystemOperation::min());
        self.world
            .all_reduce_into(&t1, &mut last, SystemOperation::max());
        (last - first).max(1e-9)
    }

    /// Like [`Ctx::timed`], and also what the phase cost in CPU: the ranks' own (their
    /// processes, the client library's threads included, summed over ranks) and the daemons'
    /// (read by rank 0 from /proc between the barriers that bound the phase).
    pub fn timed_cpu(&self, work: impl FnOnce()) -> PhaseCost {
        self.barrier();
        let daemons_before = if self.rank == 0 {
            self.daemon_cpu_secs()
        } else {
            0.0
        };
        let own_before = own_cpu_secs();
        let t0 = mpi::time();
        work();
        let t1 = mpi::time();
        let own = own_cpu_secs() - own_before;
        self.barrier();
        let daemons = if self.rank == 0 {
            self.daemon_cpu_secs() - daemons_before
        } else {
            0.0
        };
        let (mut first, mut last) = (0.0f64, 0.0f64);
        self.world
            .all_reduce_into(&t0, &mut first, SystemOperation::min());
        self.world
            .all_reduce_into(&t1, &mut last, SystemOperation::max());
        PhaseCost {
            secs: (last - first).max(1e-9),
            rank_cpu_secs: self.sum_f64(own),
            daemon_cpu_secs: self.sum_f64(daemons),
        }
    }

    /// CPU seconds the instance's daemons have used so far. Their pids are in the host table;
    /// emulated hosts share this machine's process table. A daemon that is gone counts 0.
    pub fn daemon_cpu_secs(&self) -> f64 {
        let Ok(table) = self.layout.load_hosts() else {
            return 0.0;
        };
        table.nodes.iter().map(|n| process_cpu_secs(n.pid)).sum()
    }

    /// Like [`Ctx::daemon_cpu_secs`], to the nanosecond: the time on CPU of the daemons'
    /// live threads (`/proc/<pid>/task/*/schedstat`), for phases too short for clock ticks.
    /// Threads that ended are not counted.
    pub fn daemon_cpu_secs_fine(&self) -> f64 {
        let Ok(table) = self.layout.load_hosts() else {
            return 0.0;
        };
        table.nodes.iter().map(|n| threads_cpu_secs(n.pid)).sum()
    }

    /// Gives every write phase the same start: dirty pages written back (so a phase does not
    /// pay for an earlier one's writeback) and, when running as root, clean page cache dropped
    /// (on the machine these numbers come from, writes into the page cache ran at 1 or at 5
    /// GB/s depending on the allocator's state left by earlier phases, whatever was writing).
    pub fn sync_disks(&self) {
        if self.rank == 0 {
            // SAFETY: sync(2) has no preconditions.
            unsafe { libc::sync() };
            let _ = std::fs::write("/proc/sys/vm/drop_caches", "1");
        }
        self.barrier();
    }

    /// Gives every metadata phase the same start: dirty pages written back, the page cache
    /// kept (dropping it would make a local create read its inode table back from the disk,
    /// which mdtest's runs do not).
    pub fn sync_disks_keep_cache(&self) {
        if self.rank == 0 {
            // SAFETY: sync(2) has no preconditions.
            unsafe { libc::sync() };
        }
        self.barrier();
    }

    pub fn sum_f64(&self, v: f64) -> f64 {
        let mut out = 0f64;
        self.world
            .all_reduce_into(&v, &mut out, SystemOperation::sum());
        out
    }

    /// Every rank's `v` (of one length on every rank), rank after rank.
    pub fn gather_f64(&self, v: &[f64]) -> Vec<f64> {
        let mut out = vec![0f64; v.len() * self.size];
        self.world.all_gather_into(v, &mut out[..]);
        out
    }

    pub fn sum_u64(&self, v: u64) -> u64 {
        let mut out = 0u64;
        self.world
            .all_reduce_into(&v, &mut out, SystemOperation::sum());
        out
    }

    /// Requests this rank's client sent since `before`, summed over all ranks.
    pub fn stats_since(&self, before: Stats) -> (u64, u64) {
        let now = self.client.stats();
        (
            self.sum_u64(now.queries - before.queries),
            self.sum_u64(now.attaches - before.attaches),
        )
    }

    /// A Tessera path for this workload and repetition.
    pub fn tpath(&self, name: &str) -> String {
        format!("/tessera/bench/{name}")
    }

    pub fn dpath(&self, name: &str) -> PathBuf {
        self.direct.join(name)
    }
}

/// The time and CPU a phase took, over all ranks.
#[derive(Clone, Copy, Debug)]
pub struct PhaseCost {
    pub secs: f64,
    pub rank_cpu_secs: f64,
    pub daemon_cpu_secs: f64,
}

/// CPU seconds (user and system) this process has used.
fn own_cpu_secs() -> f64 {
    // SAFETY: getrusage fills the struct it is given; a zeroed rusage is a valid value.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return 0.0;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    secs(u.ru_utime) + secs(u.ru_stime)
}

/// CPU seconds (user and system) process `pid` has used, from `/proc/<pid>/stat`; 0 if it is
/// gone.
fn process_cpu_secs(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the command name (which may hold spaces), closed by the last ')'.
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line; `rest` starts at field 3.
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    (ticks(11) + ticks(12)) as f64 / hz
}

/// Seconds on CPU of the live threads of process `pid` (the first field of each thread's
/// `/proc/PID/task/TID/schedstat`, in nanoseconds; `/proc/PID/stat` counts in 10 ms ticks,
/// too coarse for short phases); 0 if it is gone.
pub fn threads_cpu_secs(pid: u32) -> f64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0.0;
    };
    let ns: u64 = tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    ns as f64 * 1e-9
}

/// `len` zero bytes whose pages are already mapped. A fresh `vec![0; len]` is mapped page by
/// page when first written, inside whichever timed phase reads into it first: in the
/// consistency workload the first way read in each repetition ran 3x slower than the same way
/// read later, whatever the way.
pub fn touched_buffer(len: usize) -> Vec<u8> {
    let mut buf = vec![0xa5u8; len];
    buf.fill(0);
    buf
}

/// MiB/s of `bytes` moved in `secs`.
pub fn mibs(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64 / secs
}

/// Percentile of a sample (sorted in place).
pub fn percentile(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let i = ((v.len() - 1) as f64 * p).round() as usize;
    v[i]
}

fn ensure_dir(c: &Ctx, client: &Client, p: &str) {
    match client.mkdir(p, 0o755) {
        Ok(()) => {}
        Err(e) if e.errno == tessera_client::Errno::Exist => {}
        Err(e) => c.fail(e),
    }
}

/// Entry of a rank under mpirun.
pub fn main(workload: Workload, params: Params, place: Place) -> anyhow::Result<()> {
    let universe =
        mpi::initialize().ok_or_else(|| anyhow::anyhow!("MPI is already initialised"))?;
    let world = universe.world();
    let rank = world.rank() as usize;
    let size = world.size() as usize;
    let layout = InstanceLayout::new(place.instance.clone());
    // On emulated hosts each rank uses its host's daemon (found in the host table).
    let node = (params.hosts == 0).then_some((rank as u32) % params.daemons);
    let client = match Client::connect(layout.clone(), node) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("tessera-bench rank {rank}: {e}");
            world.abort(3)
        }
    };
    let cx = Ctx {
        world,
        rank,
        size,
        params,
        direct: place.direct.clone(),
        client,
        layout,
    };
    if cx.rank == 0 {
        ensure_dir(&cx, &cx.client, "/tessera/bench");
        cx.ok(std::fs::create_dir_all(&cx.direct));
    }
    cx.barrier();
    let mut reps: Vec<Metrics> = Vec::new();
    for rep in 0..cx.params.reps as usize {
        let m = match workload {
            Workload::Checkpoint => workloads::checkpoint::run(&cx, rep),
            Workload::Consistency => workloads::consistency::run(&cx, rep),
            Workload::DlRead => workloads::dl::run(&cx, rep),
            Workload::Scr => workloads::scr::run(&cx, rep),
            Workload::Ops => workloads::ops::run(&cx, rep),
            Workload::Meta => workloads::meta::run(&cx, rep),
            Workload::Scale => workloads::scale::run(&cx, rep),
        };
        if cx.rank == 0 {
            eprintln!(
                "rep {}/{}: {}",
                rep + 1,
                cx.params.reps,
                serde_json::to_string(&m)?
            );
        }
        reps.push(m);
        cx.barrier();
    }
    if cx.rank == 0 {
        println!("{RESULT_MARKER}{}", serde_json::to_string(&reps)?);
    }
    Ok(())
}

/// Removes a direct-I/O file, ignoring a missing one.
pub fn remove_quietly(p: &Path) {
    let _ = std::fs::remove_file(p);
}
