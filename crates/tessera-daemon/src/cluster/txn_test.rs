//! The two-phase commit of transactions (D2T) on an in-process cluster: a commit and an
//! abort seen by other nodes' clients, and a crash at each point of the protocol (a shard
//! between prepare and decision, a shard between decision and completion, the home before
//! and after its decision record), each followed by the node's restart and the outcome the
//! protocol promises.

use super::Cluster;
use tessera_core::{Errno, FsResult, Owner, Run};
use tessera_proto::{Owners, Query, TxnDecide, TxnJoin, TxnOpen};

/// The file every test writes: its size, and where its writer's bytes go.
const LEN: u64 = 1 << 20;

/// A transaction of one process on node 0 (its home) that attached the whole of `/f`,
/// undecided: (the transaction, the inode, the member's log).
async fn attached(c: &Cluster, client: u64) -> (u64, u64, u64) {
    let ino = c.create(0, client, "/f").await;
    let txn = c
        .ask(0, client, TxnOpen {})
        .await
        .expect("open a transaction");
    let log = c
        .ask(
            0,
            client,
            TxnJoin {
                txn: Some(txn),
                log: None,
            },
        )
        .await
        .expect("join it");
    c.write_log(0, log, true, ino, 0, &vec![7u8; LEN as usize]);
    c.attach(0, client, ino, vec![Run::single(0, LEN)], vec![])
        .await
        .expect("attach under it");
    (txn, ino, log)
}

/// Who owns `/f` as a client of node `n` (not a member) sees it.
async fn seen_from(c: &Cluster, n: u32, ino: u64) -> FsResult<Owners> {
    let reader = c.connect(n).await;
    c.ask(
        n,
        reader,
        Query {
            ino,
            start: 0,
            end: LEN,
        },
    )
    .await
}

/// Whether node `n`'s client sees the transaction's bytes as `/f`'s.
async fn committed_seen(c: &Cluster, n: u32, ino: u64, log: u64) -> bool {
    let owners = seen_from(c, n, ino).await.expect("query /f");
    owners.runs.iter().any(|r| {
        r.owner
            == Owner {
                node: 0,
                client: log,
            }
    })
}

/// Waits until node `n` holds no pending state of `txn` (it completed there).
async fn forgotten(c: &Cluster, n: u32, txn: u64, what: &str) {
    c.eventually(what, || async { !c.node(n).txns.holds(txn) })
        .await;
}

/// Checks that every node's clients see the transaction's bytes (`committed`) or not.
async fn seen_everywhere(c: &Cluster, ino: u64, log: u64, committed: bool, why: &str) {
    for n in 0..3 {
        assert_eq!(
            committed_seen(c, n, ino, log).await,
            committed,
            "node {n}: {why}"
        );
    }
}

/// The home (node 0) crashes at `point` while deciding to commit `txn`: its client sees its
/// connection end; the home then restarts.
async fn home_crashes_at(c: &Cluster, member: u64, txn: u64, point: &str) {
    c.arm(0, point);
    let e = c
        .ask(0, member, decide(txn, true))
        .await
        .expect_err("the home answered after crashing");
    assert_eq!(e.errno, Errno::HostDown, "{e}");
    c.restart(0).await;
}

fn decide(txn: u64, commit: bool) -> TxnDecide {
    TxnDecide {
        txn,
        commit,
        reasons: vec![],
    }
}

#[tokio::test(start_paused = true)]
async fn a_commit_is_seen_on_every_node_and_an_abort_on_none() {
    let c = Cluster::start(3, |_| {}).await;
    let member = c.connect(0).await;
    let (txn, ino, log) = attached(&c, member).await;
    seen_everywhere(&c, ino, log, false, "saw an undecided transaction's bytes").await;
    c.ask(0, member, decide(txn, true)).await.expect("commit");
    seen_everywhere(&c, ino, log, true, "does not see the commit").await;

    let c = Cluster::start(3, |_| {}).await;
    let member = c.connect(0).await;
    let (txn, ino, log) = attached(&c, member).await;
    c.ask(0, member, decide(txn, false)).await.expect("abort");
    seen_everywhere(&c, ino, log, false, "sees an abort").await;
}

#[tokio::test(start_paused = true)]
async fn a_shard_that_crashes_after_preparing_aborts_the_transaction_and_forgets_it() {
    let c = Cluster::start(3, |_| {}).await;
    let member = c.connect(0).await;
    let (txn, ino, log) = attached(&c, member).await;
    c.arm(1, "shard-after-prepare");
    let e = c
        .ask(0, member, decide(txn, true))
        .await
        .expect_err("committed without node 1's vote");
    assert_eq!(e.errno, Errno::Canceled, "{e}");
    assert!(!c.is_up(1), "node 1 did not crash at its prepare");
    c.restart(1).await;
    forgotten(
        &c,
        1,
        txn,
        "node 1 to learn the abort and forget the transaction",
    )
    .await;
    seen_everywhere(&c, ino, log, false, "sees an abort").await;
}

#[tokio::test(start_paused = true)]
async fn a_shard_that_crashes_before_completing_completes_the_commit_after_its_restart() {
    let c = Cluster::start(3, |_| {}).await;
    let member = c.connect(0).await;
    let (txn, ino, log) = attached(&c, member).await;
    c.arm(1, "shard-before-complete");
    let decided = c.ask(0, member, decide(txn, true));
    let back = async {
        c.eventually("node 1 to crash at its completion", || async {
            !c.is_up(1)
        })
        .await;
        c.restart(1).await;
    };
    let (decided, ()) = tokio::join!(decided, back);
    decided.expect("the decision to commit was durable before node 1 crashed");
    forgotten(
        &c,
        1,
        txn,
        "node 1 to complete the commit after its restart",
    )
    .await;
    seen_everywhere(&c, ino, log, true, "lost the commit").await;
}

#[tokio::test(start_paused = true)]
async fn a_home_that_crashes_before_its_decision_record_aborts_after_its_restart() {
    let c = Cluster::start(3, |_| {}).await;
    let member = c.connect(0).await;
    let (txn, ino, log) = attached(&c, member).await;
    home_crashes_at(&c, member, txn, "home-before-decision").await;
    // Every node had prepared; with no decision recorded, the home aborts it.
    for n in 0..3 {
        forgotten(&c, n, txn, "every node to learn the abort").await;
    }
    seen_everywhere(&c, ino, log, false, "sees an undecided commit").await;
}

#[tokio::test(start_paused = true)]
async fn a_home_that_crashes_after_its_decision_record_commits_after_its_restart() {
    let c = Cluster::start(3, |_| {}).await;
    let member = c.connect(0).await;
    let (txn, ino, log) = attached(&c, member).await;
    home_crashes_at(&c, member, txn, "home-after-decision").await;
    for n in 0..3 {
        forgotten(&c, n, txn, "every node to complete the recorded commit").await;
    }
    seen_everywhere(&c, ino, log, true, "lost the recorded commit").await;
}
