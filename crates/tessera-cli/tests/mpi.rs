//! Unmodified programs on Tessera under `mpirun`, through the LD_PRELOAD interposer: 4 ranks
//! on 3 daemons. MPI-IO with Open MPI's two implementations (ompio and ROMIO), atomic mode
//! off and on; atomic mode under every lock strategy with Open MPI and with MPICH (ROMIO's
//! atomicity test, a randomized checker, the exact locks of strided views); parallel HDF5;
//! and the POSIX programs of tests/preload.rs (a C N-1 strided writer, coreutils, python3)
//! launched as MPI ranks.
//!
//! The programs (tests/c/mpiio.c, tests/c/h5par.c) check every byte they read. On top of
//! that, each file Tessera holds is compared byte for byte (`cmp`, `h5diff`) with the file the
//! same program wrote to a local directory without the interposer, and a flushed HDF5 file
//! is compared outside Tessera.

mod common;

use common::{Inst, build_c, build_fortran, hosts_env, ok_under, preload_lib, scratch};
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Mutex;

/// One `mpirun` at a time: 4 ranks each already oversubscribe the 2-core machines CI runs on.
static MPIRUN: Mutex<()> = Mutex::new(());

/// Open MPI's MPI-IO implementations.
const IMPLS: [&str; 2] = ["ompio", "romio321"];

/// `mpirun` of 4 ranks (at most two minutes), through the interposer when `inst` is given
/// (rank r then belongs to daemon r mod 3).
fn mpirun_cmd(inst: Option<&Inst>) -> Command {
    let mut c = tessera_testkit::bounded(120, tessera_testkit::mpirun(4));
    c.env_remove("TESSERA_NODE");
    if let Some(inst) = inst {
        if inst.hosts.is_some() {
            // Ranks on the instance's emulated hosts, one host after another.
            c.envs(hosts_env().iter().map(|(k, v)| (k, v)))
                .arg("--hostfile")
                .arg(inst.root.join("hostfile"))
                .args(["--map-by", "node"]);
        }
        c.arg("-x")
            .arg(format!("LD_PRELOAD={}", preload_lib().display()))
            .arg("-x")
            .arg(format!("TESSERA_INSTANCE={}", inst.layout.dir.display()));
    }
    c
}

/// Runs a prepared `mpirun` (one at a time); fails the test with the ranks' output.
fn run_ranks(mut c: Command) -> Output {
    let _one = MPIRUN.lock().unwrap_or_else(|p| p.into_inner());
    tessera_testkit::instance::succeeded(&mut c)
}

/// Runs `exe args` as 4 MPI ranks with MPI-IO implementation `io`.
fn mpirun(inst: Option<&Inst>, io: &str, exe: &Path, args: &[&str]) -> Output {
    let mut c = mpirun_cmd(inst);
    c.args(["--mca", "io", io]).arg(exe).args(args);
    run_ranks(c)
}

fn printed(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Fails the test, with what the ranks printed, unless they printed `what`.
fn assert_printed(o: &Output, what: &str) {
    assert!(printed(o).contains(what), "{}", printed(o));
}

#[test]
fn mpiio_ompio_and_romio_with_atomic_mode_off_and_on() {
    let exe = build_c("mpicc", "mpiio");
    // The reference: the same program on a local directory, without Tessera.
    let local = scratch("mpiio-local");
    let local_dir = local.display().to_string();
    mpirun(None, "ompio", &exe, &[&local_dir, "write"]);

    let inst = Inst::start(3);
    for io in IMPLS {
        for atomic in [false, true] {
            let dir = format!("/tessera/{io}-{}", if atomic { "atomic" } else { "plain" });
            ok_under(&inst, 0, "mkdir", &[&dir]);
            let mode: &[&str] = if atomic { &["atomic"] } else { &[] };
            let args = |what: &'static str| [&[dir.as_str(), what][..], mode].concat();
            let w = mpirun(Some(&inst), io, &exe, &args("write"));
            assert!(printed(&w).contains("write"), "{}", printed(&w));
            // A second run (a new job: other processes, ranks shifted) reads it all back.
            let r = mpirun(Some(&inst), io, &exe, &args("read"));
            assert!(printed(&r).contains("read"), "{}", printed(&r));
            for name in ["independent", "collective", "view", "sieve", "nonblocking"] {
                let tessera = format!("{dir}/{name}");
                let reference = local.join(name).display().to_string();
                ok_under(&inst, 2, "cmp", &[&reference, &tessera]);
            }
        }
        // Atomic mode's own promises: a barrier alone orders a write before another rank's
        // read, and overlapping strided writes never interleave.
        let dir = format!("/tessera/{io}-promises");
        ok_under(&inst, 0, "mkdir", &[&dir]);
        let a = mpirun(Some(&inst), io, &exe, &[&dir, "atomic"]);
        assert!(printed(&a).contains("mpiio atomic: ok"), "{}", printed(&a));
    }
    let _ = std::fs::remove_dir_all(&local);
}

/// Runs `exe args` as 4 ranks with MPI-IO implementation `io` and the atomic-mode lock
/// strategy `strategy`, under consistency model `model`.
fn mpirun_atomic(
    inst: &Inst,
    io: &str,
    strategy: &str,
    model: &str,
    exe: &Path,
    args: &[&str],
) -> Output {
    let mut c = mpirun_cmd(Some(inst));
    c.args(["--mca", "io", io])
        .arg("-x")
        .arg(format!("TESSERA_ATOMIC_LOCKS={strategy}"))
        .arg("-x")
        .arg(format!("TESSERA_MODEL={model}"))
        .arg(exe)
        .args(args);
    run_ranks(c)
}

/// List locks granted by every daemon of the instance so far.
fn list_locks_granted(inst: &Inst) -> u64 {
    (0..3)
        .map(|n| inst.client(n).status().unwrap().list_locks_granted)
        .sum()
}

#[test]
fn atomic_mode_under_every_lock_strategy() {
    let exe = build_c("mpicc", "atomicity");
    let inst = Inst::start(3);
    for io in IMPLS {
        for strategy in ["list", "extent", "whole"] {
            let before = list_locks_granted(&inst);
            // ROMIO's atomicity test: one writer, every other rank reading, whole or nothing.
            for variant in ["contig", "vector", "sieve"] {
                let file = format!("/tessera/{io}-{strategy}-{variant}");
                let o = mpirun_atomic(
                    &inst,
                    io,
                    strategy,
                    "session",
                    &exe,
                    &[&file, "romio", variant],
                );
                assert!(
                    printed(&o).contains(&format!("atomicity romio {variant}: ok")),
                    "{}",
                    printed(&o)
                );
            }
            // Random strided shapes, overlapping writers and readers, and collective rounds;
            // under the POSIX model too, where every piece a rank writes is published at once
            // (ROMIO writes a strided access piece by piece), so a lock that misses bytes
            // shows as a mixed read.
            for model in ["session", "posix"] {
                let file = format!("/tessera/{io}-{strategy}-{model}-random");
                let args = [file.as_str(), "random", "24", "13"];
                let o = mpirun_atomic(&inst, io, strategy, model, &exe, &args);
                assert!(
                    printed(&o).contains("atomicity random: ok"),
                    "{}",
                    printed(&o)
                );
            }
            let granted = list_locks_granted(&inst) - before;
            if strategy == "list" {
                // 3 x (1 + 20 x 4) accesses of the ROMIO test, and more for the random one.
                assert!(granted > 3 * 81, "{io}: only {granted} list locks taken");
            } else {
                assert_eq!(granted, 0, "{io} {strategy}: list locks taken");
            }
        }
        // The checker catches a mix: without locks, with writes published piece by piece.
        let file = format!("/tessera/{io}-none-random");
        let o = mpirun_atomic(
            &inst,
            io,
            "none",
            "posix",
            &exe,
            &[&file, "random", "24", "13", "expect-mix"],
        );
        assert!(
            printed(&o).contains("atomicity random: mixed read after"),
            "{}",
            printed(&o)
        );
    }
}

/// `mpirun.mpich` of 4 ranks with the interposer and `env`, running `exe args`.
fn mpirun_mpich(inst: &Inst, env: &[(&str, &str)], exe: &Path, args: &[&str]) -> Output {
    run_ranks(mpirun_mpich_cmd(inst, env, exe, args))
}

/// `mpirun.mpich` of 4 ranks of `exe args` through the interposer, with `env` set for them.
fn mpirun_mpich_cmd(inst: &Inst, env: &[(&str, &str)], exe: &Path, args: &[&str]) -> Command {
    let mut c = tessera_testkit::bounded(120, tessera_testkit::mpirun_mpich(4));
    c.env_remove("TESSERA_NODE")
        .args(["-genv", "LD_PRELOAD"])
        .arg(preload_lib())
        .args(["-genv", "TESSERA_INSTANCE"])
        .arg(&inst.layout.dir);
    for (k, v) in env {
        c.args(["-genv", k, v]);
    }
    c.arg(exe).args(args);
    c
}

/// The list locks an atomic run printed (`TESSERA_ATOMIC_TRACE=1`), sorted.
fn traced_locks(o: &Output) -> Vec<String> {
    let mut v: Vec<String> = String::from_utf8_lossy(&o.stderr)
        .lines()
        .filter(|l| l.starts_with("tessera atomic "))
        .map(|l| l.split(" | ").next().unwrap_or(l).to_string())
        .collect();
    v.sort();
    v
}

#[test]
fn atomic_accesses_lock_exactly_the_bytes_of_their_view_under_both_mpis() {
    let ompi = build_c("mpicc", "atomicity");
    let mpich = build_c("mpicc.mpich", "atomicity");
    let inst = Inst::start(3);
    // Rank r: a vector (64 ints every 256, from r x 64) is one run; its 4x4x8 block of an
    // 8x8x8 cube is 4 rows of 128 bytes, 256 apart.
    let mut expect: Vec<String> = (0..4u64)
        .flat_map(|r| {
            let cube = 1_048_576 + (r / 2) * 1024 + (r % 2) * 128;
            [
                format!("tessera atomic write: {}+256/1024*16", r * 256),
                format!("tessera atomic write: {cube}+128/256*4"),
            ]
        })
        .collect();
    expect.sort();
    for io in IMPLS {
        let file = format!("/tessera/views-{io}");
        let mut c = mpirun_cmd(Some(&inst));
        c.args(["--mca", "io", io, "-x", "TESSERA_ATOMIC_TRACE=1"])
            .arg(&ompi)
            .args([file.as_str(), "views"]);
        let o = run_ranks(c);
        assert_eq!(traced_locks(&o), expect, "Open MPI {io}");
    }
    let o = mpirun_mpich(
        &inst,
        &[("TESSERA_ATOMIC_TRACE", "1")],
        &mpich,
        &["/tessera/views-mpich", "views"],
    );
    assert_eq!(traced_locks(&o), expect, "MPICH");
    // MPICH's ROMIO under every strategy: its atomicity test and the randomized checker.
    for strategy in ["list", "extent", "whole"] {
        for variant in ["contig", "vector", "sieve"] {
            let file = format!("/tessera/mpich-{strategy}-{variant}");
            let o = mpirun_mpich(
                &inst,
                &[("TESSERA_ATOMIC_LOCKS", strategy)],
                &mpich,
                &[&file, "romio", variant],
            );
            assert!(printed(&o).contains("ok"), "{}", printed(&o));
        }
        let file = format!("/tessera/mpich-{strategy}-random");
        let env = [
            ("TESSERA_ATOMIC_LOCKS", strategy),
            ("TESSERA_MODEL", "posix"),
        ];
        let o = mpirun_mpich(&inst, &env, &mpich, &[&file, "random", "24", "13"]);
        assert!(
            printed(&o).contains("atomicity random: ok"),
            "{}",
            printed(&o)
        );
    }
    let env = [("TESSERA_ATOMIC_LOCKS", "none"), ("TESSERA_MODEL", "posix")];
    let args = ["/tessera/mpich-none", "random", "24", "13", "expect-mix"];
    let o = mpirun_mpich(&inst, &env, &mpich, &args);
    assert!(printed(&o).contains("mixed read after"), "{}", printed(&o));
}

/// A job script per rank: the POSIX programs, launched by mpirun, find their rank in
/// `OMPI_COMM_WORLD_RANK` (and Tessera its daemon).
fn ranks_run(inst: &Inst, script: &str) -> Output {
    let mut c = mpirun_cmd(Some(inst));
    c.args(["sh", "-c", script]);
    run_ranks(c)
}

#[test]
fn posix_programs_as_mpi_ranks() {
    let strided = build_c("cc", "strided");
    let local = scratch("ranks-local");
    for r in 0..4u64 {
        let data: Vec<u8> = (0..300_000u64)
            .map(|i| ((i * 7 + r * 13) % 256) as u8)
            .collect();
        std::fs::write(local.join(format!("in.{r}")), data).unwrap();
    }
    let inst = Inst::start(3);
    ok_under(&inst, 0, "mkdir", &["/tessera/job"]);
    let (exe, dir) = (strided.display(), local.display());
    // Each rank: its blocks of an N-1 strided checkpoint (C, pwrite), a copy of its input
    // (cp), a line of text (python3).
    ranks_run(
        &inst,
        &format!(
            "r=$OMPI_COMM_WORLD_RANK; {exe} write /tessera/job/n1 $r 4 47001 40 && \
             mkdir -p /tessera/job/r$r && cp {dir}/in.$r /tessera/job/r$r/in && \
             python3 -c \"open('/tessera/job/r$r/py.txt', 'w').write('rank $r\\n')\""
        ),
    );
    // A second job, ranks shifted: each rank checks the whole checkpoint and another rank's
    // files, byte for byte, and prints the listing in one write (mpirun interleaves writes).
    let out = ranks_run(
        &inst,
        &format!(
            "r=$OMPI_COMM_WORLD_RANK; o=$(( (r + 1) % 4 )); \
             {exe} verify /tessera/job/n1 4 47001 40 && \
             cmp {dir}/in.$o /tessera/job/r$o/in && \
             test \"$(cat /tessera/job/r$o/py.txt)\" = \"rank $o\" && \
             echo \"$(ls /tessera/job | tr '\\n' ' ')\""
        ),
    );
    let listing = printed(&out);
    assert_eq!(
        listing.lines().count(),
        4,
        "every rank lists the directory: {listing}"
    );
    assert!(
        listing.lines().all(|l| l.trim() == "n1 r0 r1 r2 r3"),
        "{listing}"
    );
    let _ = std::fs::remove_dir_all(&local);
}

#[test]
fn parallel_hdf5_chunked_and_contiguous_datasets() {
    let exe = build_c("h5pcc", "h5par");
    let local = scratch("h5-local");
    let reference = local.join("ref.h5").display().to_string();
    mpirun(None, "ompio", &exe, &[&reference, "write"]);

    let inst = Inst::start(3);
    ok_under(&inst, 0, "mkdir", &["/tessera/h5"]);
    for io in IMPLS {
        let file = format!("/tessera/h5/{io}.h5");
        mpirun(Some(&inst), io, &exe, &[&file, "write"]);
        // Read back in another run, then compare every object and value with the reference.
        let r = mpirun(Some(&inst), io, &exe, &[&file, "read"]);
        assert!(printed(&r).contains("h5par read: ok"), "{}", printed(&r));
        // h5diff exits 0 only when every object and value matches.
        ok_under(&inst, 1, "h5diff", &["-r", &reference, &file]);
    }
    // Flushed to the PFS directory, the file is a valid HDF5 file outside Tessera too.
    let flush = inst.tessera(&["flush", "/tessera/h5/ompio.h5"]);
    assert!(
        flush.status.success(),
        "{}",
        String::from_utf8_lossy(&flush.stderr)
    );
    let flushed = inst.pfs().join("h5/ompio.h5");
    let out = Command::new("h5diff")
        .arg("-r")
        .arg(&reference)
        .arg(&flushed)
        .output()
        .expect("h5diff");
    assert!(
        out.status.success(),
        "{}{}",
        printed(&out),
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&local);
}

/// `tessera-txn-data`, built beside the `tessera` binary (`scripts/test.sh` builds it).
fn txn_data_exe() -> std::path::PathBuf {
    let p = preload_lib().with_file_name("tessera-txn-data");
    assert!(
        p.exists(),
        "{} is missing: build it with `cargo build -p tessera-txn --bins`",
        p.display()
    );
    p
}

/// Waits until none of the 3 daemons holds a transaction (`what` for the message).
fn wait_no_transactions(inst: &Inst, what: &str) {
    tessera_testkit::eventually(
        std::time::Duration::from_secs(30),
        &format!("{what} gone from every daemon"),
        || {
            (0..3).all(|n| {
                let s = inst.client(n).status().unwrap();
                s.txns_pending + s.txns_at_home == 0
            })
        },
    );
}

/// The bytes of a Tessera file as an outsider on daemon 0 reads them.
fn tessera_bytes(inst: &Inst, path: &str) -> Vec<u8> {
    let c = inst.client(0);
    let mut f = c
        .open(
            path,
            tessera_client::OpenOptions::new()
                .read(true)
                .model(tessera_client::Model::Posix),
        )
        .unwrap();
    let mut out = vec![0u8; 1 << 20];
    let n = f.read_at(&mut out, 0).unwrap();
    out.truncate(n);
    out
}

#[test]
fn an_mpi_job_writes_a_data_set_as_one_transaction() {
    const BLOCK: usize = 10_000;
    let exe = txn_data_exe();
    let inst = Inst::start_with(
        3,
        &["--set", "stripe_size=4096", "--set", "txn_timeout_ms=500"],
    );
    let path = "/tessera/dataset";
    let block = BLOCK.to_string();
    let run = |version: &str, mode: &str| {
        let mut c = mpirun_cmd(Some(&inst));
        c.arg(&exe).args([path, version, block.as_str(), mode]);
        c
    };
    let out = run_ranks(run("1", "commit"));
    assert_printed(&out, "commit: committed (4 processes)");
    assert_eq!(tessera_bytes(&inst, path), vec![1u8; 4 * BLOCK]);
    // A rank votes abort: nothing of version 2 appears.
    let out = run_ranks(run("2", "abort"));
    assert_printed(&out, "abort: aborted");
    assert_eq!(tessera_bytes(&inst, path), vec![1u8; 4 * BLOCK]);
    // A rank dies before the vote and mpirun ends the job: nothing of version 3 appears,
    // and the daemons drop what the job published once its processes are gone.
    let out = {
        let _one = MPIRUN.lock().unwrap_or_else(|p| p.into_inner());
        run("3", "die").output().expect("mpirun")
    };
    assert!(!out.status.success(), "the job with a dead rank succeeded");
    assert_eq!(tessera_bytes(&inst, path), vec![1u8; 4 * BLOCK]);
    wait_no_transactions(&inst, "the dead job's transaction");
    // The next job commits version 4 whole.
    run_ranks(run("4", "commit"));
    assert_eq!(tessera_bytes(&inst, path), vec![4u8; 4 * BLOCK]);
    // The rank that voted abort (its write not published) goes on with the others to the
    // next transaction, which commits whole.
    let out = run_ranks(run("5", "abort-then-commit"));
    assert_printed(&out, "abort-then-commit: aborted, then committed");
    assert_eq!(tessera_bytes(&inst, path), vec![6u8; 4 * BLOCK]);
    // Likewise after every rank aborted before the vote, its write unpublished.
    let out = run_ranks(run("7", "cancel-then-commit"));
    assert_printed(&out, "cancel-then-commit: aborted, then committed");
    assert_eq!(tessera_bytes(&inst, path), vec![8u8; 4 * BLOCK]);
}

#[test]
fn an_unmodified_mpi_program_runs_as_one_transaction_with_txn_job() {
    const BLOCK: usize = 10_000;
    let exe = build_c("mpicc", "txn_job");
    let inst = Inst::start_with(
        3,
        &[
            "--set",
            "stripe_size=4096",
            "--set",
            "txn_timeout_ms=500",
            "--set",
            "migrate_grace_ms=100",
        ],
    );
    let block = BLOCK.to_string();
    let run_on = |path: &str, version: &str, extra: &[&str]| {
        let mut c = mpirun_cmd(Some(&inst));
        c.args(["-x", "TESSERA_TXN=job"])
            .arg(&exe)
            .args([path, version, block.as_str()])
            .args(extra);
        c
    };
    // Killed before MPI_Finalize, a run that created its file leaves no file at all.
    let out = {
        let _one = MPIRUN.lock().unwrap_or_else(|p| p.into_inner());
        run_on("/tessera/job-new", "1", &["crash"])
            .output()
            .expect("mpirun")
    };
    assert!(!out.status.success(), "the crashed job succeeded");
    let e = inst.client(0).stat("/tessera/job-new").unwrap_err();
    assert_eq!(e.errno, tessera_client::Errno::NoEnt, "{e}");
    wait_no_transactions(&inst, "the crashed job's transaction");
    let path = "/tessera/job";
    let run = |version: &str, extra: &[&str]| run_on(path, version, extra);
    let out = run_ranks(run("1", &[]));
    assert_printed(&out, "txn_job: finalized");
    assert_eq!(tessera_bytes(&inst, path), vec![1u8; 4 * BLOCK]);
    let committed = inst.bb_used();
    // Killed before MPI_Finalize: nothing of the run is visible, and its pending state goes,
    // with the space its writes took.
    let out = {
        let _one = MPIRUN.lock().unwrap_or_else(|p| p.into_inner());
        run("2", &["crash"]).output().expect("mpirun")
    };
    assert!(!out.status.success(), "the crashed job succeeded");
    assert_eq!(tessera_bytes(&inst, path), vec![1u8; 4 * BLOCK]);
    wait_no_transactions(&inst, "the crashed job's transaction");
    inst.wait_bb_used_at_most(committed, "the crashed job's writes");
    run_ranks(run("3", &[]));
    assert_eq!(tessera_bytes(&inst, path), vec![3u8; 4 * BLOCK]);
    // Killed after emptying the file (as HDF5 does for H5F_ACC_TRUNC) and writing it anew:
    // the file keeps every byte it had.
    let out = {
        let _one = MPIRUN.lock().unwrap_or_else(|p| p.into_inner());
        run("5", &["trunc,crash"]).output().expect("mpirun")
    };
    assert!(!out.status.success(), "the crashed job succeeded");
    assert_eq!(tessera_bytes(&inst, path), vec![3u8; 4 * BLOCK]);
    wait_no_transactions(&inst, "the crashed job's transaction");
    // The checkpoint idiom (write aside, rename over): killed, the old checkpoint stays and
    // no temporary is left; finished, the new one is in place.
    let tmp = format!("{path}.tmp");
    let out = {
        let _one = MPIRUN.lock().unwrap_or_else(|p| p.into_inner());
        run("6", &["ckpt,crash"]).output().expect("mpirun")
    };
    assert!(!out.status.success(), "the crashed job succeeded");
    assert_eq!(tessera_bytes(&inst, path), vec![3u8; 4 * BLOCK]);
    let e = inst.client(0).stat(&tmp).unwrap_err();
    assert_eq!(
        e.errno,
        tessera_client::Errno::NoEnt,
        "the temporary is visible: {e}"
    );
    wait_no_transactions(&inst, "the crashed job's transaction");
    run_ranks(run("7", &["ckpt,trunc"]));
    assert_eq!(tessera_bytes(&inst, path), vec![7u8; 4 * BLOCK]);
    let e = inst.client(0).stat(&tmp).unwrap_err();
    assert_eq!(
        e.errno,
        tessera_client::Errno::NoEnt,
        "the temporary stayed: {e}"
    );
    // Killed between its write and the close that would publish it: the space of what no
    // one published comes back too.
    inst.wait_no_logs_to_release();
    let before = inst.bb_used();
    let out = {
        let _one = MPIRUN.lock().unwrap_or_else(|p| p.into_inner());
        run("8", &["dirty"]).output().expect("mpirun")
    };
    assert!(!out.status.success(), "the crashed job succeeded");
    assert_eq!(tessera_bytes(&inst, path), vec![7u8; 4 * BLOCK]);
    wait_no_transactions(&inst, "the crashed job's transaction");
    inst.wait_bb_used_at_most(before, "the crashed job's unpublished writes");
    // The same program built for MPICH: its handles are constants, not addresses.
    let mpich = build_c("mpicc.mpich", "txn_job");
    let env = [("TESSERA_TXN", "job")];
    let out = mpirun_mpich(&inst, &env, &mpich, &[path, "4", block.as_str()]);
    assert_printed(&out, "txn_job: finalized");
    assert_eq!(tessera_bytes(&inst, path), vec![4u8; 4 * BLOCK]);
}

#[test]
fn an_unmodified_fortran_program_runs_as_one_transaction_with_txn_job() {
    const BLOCK: usize = 10_000;
    let inst = Inst::start_with(
        3,
        &["--set", "stripe_size=4096", "--set", "txn_timeout_ms=500"],
    );
    let block = BLOCK.to_string();
    let (ompi, mpich) = (
        build_fortran("mpifort", "txn_job"),
        build_fortran("mpifort.mpich", "txn_job"),
    );
    // Without TESSERA_TXN a crashed run leaves what it wrote: the check below can fail.
    let mut c = mpirun_cmd(Some(&inst));
    c.arg(&ompi)
        .args(["/tessera/f-plain", "1", block.as_str(), "crash"]);
    let out = {
        let _one = MPIRUN.lock().unwrap_or_else(|p| p.into_inner());
        c.output().expect("mpirun")
    };
    assert!(!out.status.success(), "the crashed job succeeded");
    assert_eq!(
        tessera_bytes(&inst, "/tessera/f-plain"),
        vec![1u8; 4 * BLOCK]
    );
    // Fortran reaches MPI through PMPI_Init and PMPI_Finalize: the run is one transaction.
    let path = "/tessera/f-job";
    let run = |version: &str, extra: &[&str]| {
        let mut c = mpirun_cmd(Some(&inst));
        c.args(["-x", "TESSERA_TXN=job"])
            .arg(&ompi)
            .args([path, version, block.as_str()])
            .args(extra);
        c
    };
    let out = {
        let _one = MPIRUN.lock().unwrap_or_else(|p| p.into_inner());
        run("2", &["crash"]).output().expect("mpirun")
    };
    assert!(!out.status.success(), "the crashed job succeeded");
    let e = inst.client(0).stat(path).unwrap_err();
    assert_eq!(e.errno, tessera_client::Errno::NoEnt, "{e}");
    wait_no_transactions(&inst, "the crashed job's transaction");
    let out = run_ranks(run("3", &[]));
    assert_printed(&out, "txn_job_f: finalized");
    assert_eq!(tessera_bytes(&inst, path), vec![3u8; 4 * BLOCK]);
    // Built for MPICH, whose Fortran library reaches MPI its own way.
    let env = [("TESSERA_TXN", "job")];
    let out = {
        let _one = MPIRUN.lock().unwrap_or_else(|p| p.into_inner());
        mpirun_mpich_cmd(&inst, &env, &mpich, &[path, "4", block.as_str(), "crash"])
            .output()
            .expect("mpirun.mpich")
    };
    assert!(!out.status.success(), "the crashed job succeeded");
    assert_eq!(tessera_bytes(&inst, path), vec![3u8; 4 * BLOCK]);
    wait_no_transactions(&inst, "the crashed job's transaction");
    let out = mpirun_mpich(&inst, &env, &mpich, &[path, "5", block.as_str()]);
    assert_printed(&out, "txn_job_f: finalized");
    assert_eq!(tessera_bytes(&inst, path), vec![5u8; 4 * BLOCK]);
}

#[test]
fn an_mpi4py_program_runs_under_the_interposer_and_as_one_transaction() {
    const BLOCK: usize = 10_000;
    // Debian's mpi4py, for Debian's python3: Python loads libmpi privately (RTLD_LOCAL), where
    // the interposer's MPI wrappers used to find nothing to forward to and aborted the run.
    let python = "/usr/bin/python3";
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/mpi_job.py");
    let inst = Inst::start_with(
        3,
        &["--set", "stripe_size=4096", "--set", "txn_timeout_ms=500"],
    );
    let block = BLOCK.to_string();
    let run = |path: &str, version: &str, extra: &[&str], job: bool| {
        let mut c = mpirun_cmd(Some(&inst));
        if job {
            c.args(["-x", "TESSERA_TXN=job"]);
        }
        c.args([python, script, path, version, block.as_str()])
            .args(extra);
        c
    };
    let out = run_ranks(run("/tessera/py-plain", "1", &[], false));
    assert_printed(&out, "mpi_job.py: done");
    assert_eq!(
        tessera_bytes(&inst, "/tessera/py-plain"),
        vec![1u8; 4 * BLOCK]
    );
    let path = "/tessera/py-job";
    let out = {
        let _one = MPIRUN.lock().unwrap_or_else(|p| p.into_inner());
        run(path, "2", &["crash"], true).output().expect("mpirun")
    };
    assert!(!out.status.success(), "the crashed job succeeded");
    let e = inst.client(0).stat(path).unwrap_err();
    assert_eq!(e.errno, tessera_client::Errno::NoEnt, "{e}");
    wait_no_transactions(&inst, "the crashed job's transaction");
    run_ranks(run(path, "3", &[], true));
    assert_eq!(tessera_bytes(&inst, path), vec![3u8; 4 * BLOCK]);
}

#[test]
fn shared_file_pointers_and_ordered_calls_work_under_the_default_model() {
    let exe = build_c("mpicc", "shared_fp");
    // The reference: the same program on a local directory, without Tessera.
    let local = scratch("shared-fp-local");
    let reference = local.join("f").display().to_string();
    let ok = |o: &Output| assert!(printed(o).contains("shared_fp: ok"), "{}", printed(o));
    ok(&mpirun(None, "ompio", &exe, &[&reference]));
    let inst = Inst::start(3);
    for io in IMPLS {
        ok(&mpirun(
            Some(&inst),
            io,
            &exe,
            &[&format!("/tessera/shared-{io}")],
        ));
    }
    let mpich = build_c("mpicc.mpich", "shared_fp");
    ok(&mpirun_mpich(
        &inst,
        &[],
        &mpich,
        &["/tessera/shared-mpich"],
    ));
    let _ = std::fs::remove_dir_all(&local);
}

#[test]
fn parallel_hdf5_runs_as_one_transaction_with_txn_job() {
    let exe = build_c("h5pcc", "h5par");
    let local = scratch("h5-txn-local");
    let reference = local.join("ref.h5").display().to_string();
    mpirun(None, "ompio", &exe, &[&reference, "write"]);
    let inst = Inst::start(3);
    let file = "/tessera/job.h5";
    let mut c = mpirun_cmd(Some(&inst));
    c.args(["-x", "TESSERA_TXN=job", "--mca", "io", "ompio"])
        .arg(&exe)
        .args([file, "write"]);
    run_ranks(c);
    let r = mpirun(Some(&inst), "ompio", &exe, &[file, "read"]);
    assert!(printed(&r).contains("h5par read: ok"), "{}", printed(&r));
    ok_under(&inst, 1, "h5diff", &["-r", &reference, file]);
    let _ = std::fs::remove_dir_all(&local);
}
