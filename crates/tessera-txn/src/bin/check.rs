//! An MPI program that runs the transaction protocol through a scenario and checks, on every
//! rank, what the protocol must give (the integration tests run it under mpirun with several
//! sizes and fan-ins). Exits 1 with the rank and what differed on a mismatch.
//!
//!   tessera-txn-check commit | vote-abort | uncommitted | disagree | mixed | large

use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use tessera_txn::{Decision, Phase, Transactions, TxnError};

fn main() {
    let universe = mpi::initialize().expect("MPI initialises once");
    let world = universe.world();
    let rank = world.rank() as u32;
    let size = world.size() as u32;
    let scenario = std::env::args().nth(1).unwrap_or_default();
    let fail = |what: String| -> ! { fail(&world, what) };
    let txns = Transactions::init(&world).unwrap_or_else(|e| fail(e.to_string()));
    if scenario == "large" {
        large(&world);
        if rank == 0 {
            println!(
                "tessera-txn-check large: ok ({size} processes, {} sub-coordinators)",
                txns.tiers().groups()
            );
        }
        return;
    }
    let mut t = txns
        .create_transaction()
        .unwrap_or_else(|e| fail(e.to_string()));
    // Every process's singleton, then a global one before begin and one after.
    let mine = t
        .create_sub_transaction(&format!("part of rank {rank}"))
        .unwrap_or_else(|e| fail(e.to_string()));
    let before = t.create_sub_transaction_all(if scenario == "disagree" && rank == size - 1 {
        "a different name"
    } else {
        "write variables"
    });
    if scenario == "disagree" {
        // Declared before begin: begin's move finds the names differ, on every process.
        before.unwrap_or_else(|e| fail(e.to_string()));
        match t.begin_transaction() {
            Err(TxnError::Disagree { seen, .. }) if seen.contains("a different name") => {
                if rank == 0 {
                    println!("tessera-txn-check disagree: ok ({size} processes)");
                }
                return;
            }
            other => fail(format!(
                "ranks named the global sub-transaction differently, got {other:?}"
            )),
        }
    }
    let before = before.unwrap_or_else(|e| fail(e.to_string()));
    t.begin_transaction()
        .unwrap_or_else(|e| fail(e.to_string()));
    let after = t
        .create_sub_transaction_all("update variable")
        .unwrap_or_else(|e| fail(e.to_string()));
    let known = t.sub_transactions();
    let singletons = known.iter().filter(|(id, _)| id.owner.is_some()).count();
    if singletons != size as usize {
        fail(format!(
            "knows {singletons} singleton sub-transactions after begin, not {size}: {known:?}"
        ));
    }
    if !(scenario == "uncommitted" && rank == size - 1) {
        t.commit_sub_transaction(mine)
            .unwrap_or_else(|e| fail(e.to_string()));
    }
    for g in [before, after] {
        t.commit_sub_transaction(g)
            .unwrap_or_else(|e| fail(e.to_string()));
    }
    let decision = t
        .vote_transaction(!(scenario == "vote-abort" && rank == size - 1))
        .unwrap_or_else(|e| fail(e.to_string()));
    let last = size - 1;
    match (scenario.as_str(), &decision) {
        ("mixed", Decision::Commit) => {
            // The last rank tries to abort after the others voted to commit with it: the
            // vote's decision stands (it is refused, on that process alone), and all commit.
            if rank == last {
                match t.abort_transaction() {
                    Err(TxnError::Order { call, hint, .. })
                        if call == "abort_transaction" && hint.contains("decided to commit") => {}
                    other => fail(format!("abort after a vote to commit gave {other:?}")),
                }
            }
            t.commit_transaction()
                .unwrap_or_else(|e| fail(e.to_string()));
            if t.finalize() != Phase::Committed {
                fail("not committed after commit_transaction".into());
            }
        }
        ("commit", Decision::Commit) => {
            t.commit_transaction()
                .unwrap_or_else(|e| fail(e.to_string()));
            if t.finalize() != Phase::Committed {
                fail("not committed after commit_transaction".into());
            }
        }
        ("vote-abort", Decision::Abort(reasons))
            if reasons == &vec![format!("rank {last} voted to abort")] =>
        {
            expect_refused_then_abort(&mut t, &world);
        }
        ("uncommitted", Decision::Abort(reasons))
            if reasons
                == &vec![format!(
                    "sub-transaction 'part of rank {last}' of rank {last} was not committed"
                )] =>
        {
            expect_refused_then_abort(&mut t, &world);
        }
        _ => fail(format!("scenario {scenario:?} decided {decision:?}")),
    }
    if rank == 0 {
        let tiers = txns.tiers();
        println!(
            "tessera-txn-check {scenario}: ok ({size} processes, {} sub-coordinators)",
            tiers.groups()
        );
    }
}

/// The tiers' moves with messages too large for their blocks next to ones that fit: odd
/// ranks send up a large item, and the coordinator adds a large one to the union and hands
/// every third process a large item of its own. Every process must get back exactly the
/// union and its own item.
fn large(world: &SimpleCommunicator) {
    let (rank, size) = (world.rank() as u32, world.size() as u32);
    let fan_in = std::env::var("TESSERA_TXN_FAN_IN")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(tessera_core::txn_tiers::FAN_IN);
    let comms = tessera_txn::tiers::TierComms::split(world.duplicate(), fan_in);
    let item = |r: u32| format!("rank {r} {}", "x".repeat(if r % 2 == 1 { 700 } else { 3 }));
    let own = |r: u32| {
        format!(
            "own {r} {}",
            "y".repeat(if r.is_multiple_of(3) { 900 } else { 5 })
        )
    };
    let added = "z".repeat(1000);
    let mut expected: Vec<String> = (0..size).map(item).collect();
    expected.push(added.clone());
    expected.sort();
    let union = comms.unique_with(vec![item(rank)], |all| all.push(added.clone()));
    if union != expected {
        fail(world, format!("unique gave {union:?}, not {expected:?}"));
    }
    let (union, mine) = comms.unique_with_own(vec![item(rank)], |all| {
        all.push(added.clone());
        (0..size).map(|r| (r, own(r))).collect()
    });
    if union != expected || mine != vec![own(rank)] {
        fail(
            world,
            format!("unique_with_own gave {union:?} and {mine:?}, not {expected:?} and its own"),
        );
    }
}

/// Reports `what` with this rank and ends the job.
fn fail(world: &SimpleCommunicator, what: String) -> ! {
    eprintln!("tessera-txn-check rank {}: {what}", world.rank());
    world.abort(1)
}

fn expect_refused_then_abort(t: &mut tessera_txn::Transaction, world: &SimpleCommunicator) {
    match t.commit_transaction() {
        Err(TxnError::Aborted(_)) => {}
        other => fail(
            world,
            format!("commit after a vote to abort gave {other:?}"),
        ),
    }
    t.abort_transaction()
        .unwrap_or_else(|e| fail(world, e.to_string()));
    if *t.phase() != Phase::Aborted {
        fail(world, "not aborted after abort_transaction".into());
    }
}
