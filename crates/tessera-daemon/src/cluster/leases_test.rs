//! Lock leases and fences on an in-process cluster: the list lock of a holder whose daemon
//! cannot renew its lease is revoked once the lease has run out (not before), granted to
//! the waiting request, and the holder's writes made under it are refused when it attaches
//! them, on its own daemon and on the shards.

use super::Cluster;
use std::time::Duration;
use tessera_core::lock_list::LockRun;
use tessera_core::locks::LockKind;
use tessera_core::placement::ino_shard;
use tessera_core::{Errno, Run};
use tessera_proto::ListLock;

const LEASE: Duration = Duration::from_secs(2);
const LEN: u64 = 64 << 10;

fn list_lock(ino: u64, seq: u64, wait: bool) -> ListLock {
    ListLock {
        ino,
        seq,
        runs: vec![LockRun {
            run: Run::single(0, LEN),
            kind: LockKind::Exclusive,
        }],
        wait,
        pid: 1,
    }
}

#[tokio::test(start_paused = true)]
async fn a_silent_holders_lock_is_revoked_after_its_lease_and_its_writes_are_fenced() {
    let c = Cluster::start(3, |cfg| cfg.lock_lease_ms = LEASE.as_millis() as u64).await;
    let creator = c.connect(0).await;
    let ino = c.create(0, creator, "/shared").await;
    // The lock table is on the inode's node; the holder and the waiter on the two others.
    let table = ino_shard(ino);
    let mut others = (0..3).filter(|n| *n != table);
    let (holder_node, waiter_node) = (others.next().unwrap(), others.next().unwrap());
    let holder = c.connect(holder_node).await;
    let waiter = c.connect(waiter_node).await;
    let token = c
        .ask(holder_node, holder, list_lock(ino, 1, false))
        .await
        .expect("the first lock is granted");
    let busy = c
        .ask(waiter_node, waiter, list_lock(ino, 1, false))
        .await
        .expect_err("a conflicting lock was granted while the holder's lease runs");
    assert_eq!(busy.errno, Errno::Again, "{busy}");

    // The holder's daemon can no longer renew: its lease runs out on the lock table.
    c.cut(holder_node, table);
    let cut_at = crate::clock::now();
    let granted = c
        .ask(waiter_node, waiter, list_lock(ino, 2, true))
        .await
        .expect("the waiting lock is granted once the lease ran out");
    let waited = crate::clock::since(cut_at);
    assert_ne!(granted, token);
    assert!(
        waited >= LEASE / 2 && waited <= 4 * LEASE,
        "granted after {waited:?}; the lease is {LEASE:?}"
    );

    // What the holder wrote under the revoked lock is refused, by its own daemon (its view
    // of the lease ended) and, once the link is back, by the fences everywhere.
    c.write_log(holder_node, holder, false, ino, 0, &vec![1u8; LEN as usize]);
    let c = &c;
    let refused = |when: &'static str| async move {
        let e = c
            .attach(
                holder_node,
                holder,
                ino,
                vec![Run::single(0, LEN)],
                vec![token],
            )
            .await
            .expect_err(when);
        assert_eq!(e.errno, Errno::Stale, "{e}");
    };
    refused("writes under a revoked lock were attached").await;
    c.mend();
    c.eventually("the holder's daemon to learn the revocation", || async {
        c.node(holder_node).renew_lease(table).await
            && c.node(holder_node).locks.is_fenced(ino, token)
    })
    .await;
    refused("writes under a revoked lock were attached after the renewal").await;
}
