//! An MPI program that writes one data set as a transaction, under the interposer: every
//! rank writes its block of FILE (every byte VERSION) through plain POSIX calls, then the
//! ranks vote and commit. Modes: `commit`; `abort` (the last rank votes abort); `die` (the
//! last rank dies before the vote, and mpirun ends the others); `abort-then-commit` (as
//! `abort`, then every rank writes VERSION + 1 in a second transaction, which commits);
//! `cancel-then-commit` (every rank calls abort before voting, then the same second
//! transaction). Every rank keeps the file open, its write unpublished, until the vote or
//! abort. Rank 0 prints the outcome.
//!
//!   tessera-txn-data FILE VERSION BLOCK-BYTES commit|abort|die|abort-then-commit|cancel-then-commit

use mpi::traits::*;
use std::os::unix::fs::FileExt;
use tessera_txn::{Decision, Transactions};

fn main() {
    let universe = mpi::initialize().expect("MPI initialises once");
    let world = universe.world();
    let (rank, size) = (world.rank() as u64, world.size() as u64);
    let args: Vec<String> = std::env::args().collect();
    let fail = |what: String| -> ! {
        eprintln!("tessera-txn-data: rank {rank}: {what}");
        world.abort(1)
    };
    let [_, path, version, block, mode] = &args[..] else {
        fail(
            "usage: tessera-txn-data FILE VERSION BLOCK commit|abort|die|abort-then-commit|cancel-then-commit"
                .into(),
        )
    };
    let version: u8 = version
        .parse()
        .unwrap_or_else(|e| fail(format!("VERSION: {e}")));
    let block: u64 = block
        .parse()
        .unwrap_or_else(|e| fail(format!("BLOCK (bytes): {e}")));
    let txns = Transactions::init(&world).unwrap_or_else(|e| fail(e.to_string()));
    if !txns.has_file_system() {
        fail("Tessera is not beneath: run it with LD_PRELOAD=libtessera_preload.so".into());
    }
    let last = rank == size - 1;
    // One transaction writing `version`, in which this process votes `ok` (or, with `cancel`,
    // every process aborts before the vote); the outcome.
    let step = |version: u8, ok: bool, cancel: bool| -> &'static str {
        let mut t = txns
            .create_transaction()
            .unwrap_or_else(|e| fail(e.to_string()));
        t.begin_transaction()
            .unwrap_or_else(|e| fail(e.to_string()));
        // Kept open over the vote: the vote publishes what the process wrote.
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .unwrap_or_else(|e| fail(format!("{path}: {e}")));
        f.write_all_at(&vec![version; block as usize], rank * block)
            .unwrap_or_else(|e| fail(format!("writing {path}: {e}")));
        if mode == "die" && last {
            std::process::abort();
        }
        if cancel {
            t.abort_transaction()
                .unwrap_or_else(|e| fail(e.to_string()));
            drop(f);
            return "aborted";
        }
        let decision = t
            .vote_transaction(ok)
            .unwrap_or_else(|e| fail(e.to_string()));
        let outcome = match decision {
            Decision::Commit => t.commit_transaction().map(|()| "committed"),
            Decision::Abort(_) => t.abort_transaction().map(|()| "aborted"),
        }
        .unwrap_or_else(|e| fail(e.to_string()));
        drop(f);
        outcome
    };
    let voting_abort = matches!(mode.as_str(), "abort" | "abort-then-commit");
    let cancel = mode == "cancel-then-commit";
    let mut outcome = step(version, !(voting_abort && last), cancel).to_string();
    if mode.ends_with("-then-commit") {
        // Every process goes on to the next transaction, the one that voted abort included.
        outcome = format!("{outcome}, then {}", step(version + 1, true, false));
    }
    if rank == 0 {
        println!("tessera-txn-data {mode}: {outcome} ({size} processes)");
    }
}
