//! Leased copies of ownership stripes on an in-process cluster: a node that read a stripe
//! answers later queries from its copy; a change of the stripe is acknowledged only once the
//! copy's holder dropped it, or, if the holder cannot be told, once the copy's lease has run
//! out, so that no query is ever answered from a copy older than an acknowledged change.

use super::Cluster;
use crate::state::cache::LEASE;
use tessera_core::placement::{ino_shard, stripe_shard};
use tessera_core::{Errno, Owner, Run};
use tessera_proto::{Owners, Query};

const LEN: u64 = 64 << 10;

async fn attach_all(c: &Cluster, node: u32, client: u64, ino: u64) {
    c.write_log(node, client, false, ino, 0, &vec![5u8; LEN as usize]);
    c.attach(node, client, ino, vec![Run::single(0, LEN)], vec![])
        .await
        .expect("attach");
}

fn owners_of(o: &Owners) -> Vec<Owner> {
    o.runs.iter().map(|r| r.owner).collect()
}

#[tokio::test(start_paused = true)]
async fn a_change_waits_out_the_lease_of_a_copy_whose_holder_cannot_be_told() {
    let c = Cluster::start(4, |_| {}).await;
    let creator = c.connect(0).await;
    let ino = c.create(0, creator, "/leased").await;
    // The stripe's shard writes; a node that holds neither the stripe nor the inode reads
    // and keeps a copy.
    let shard = stripe_shard(ino, 0, 4);
    let holder = (0..4)
        .find(|n| *n != shard && *n != ino_shard(ino))
        .expect("a fourth node");
    let first = c.connect(shard).await;
    attach_all(&c, shard, first, ino).await;
    let reader = c.connect(holder).await;
    let query = || Query {
        ino,
        start: 0,
        end: LEN,
    };
    let seen = c.ask(holder, reader, query()).await.expect("first query");
    assert_eq!(
        owners_of(&seen),
        [Owner {
            node: shard,
            client: first
        }]
    );
    let (hits, _) = c.node(holder).stripe_cache.counts();
    c.ask(holder, reader, query()).await.expect("second query");
    assert_eq!(
        c.node(holder).stripe_cache.counts().0,
        hits + 1,
        "the second query was not answered from the copy"
    );

    // The holder cannot be told: the change is acknowledged once the copy's lease ran out.
    c.cut(shard, holder);
    let second = c.connect(shard).await;
    let started = crate::clock::now();
    attach_all(&c, shard, second, ino).await;
    let waited = crate::clock::since(started);
    assert!(
        waited >= LEASE / 2 && waited <= 2 * LEASE,
        "the change was acknowledged after {waited:?}; a copy's lease is {LEASE:?}"
    );
    // The holder's copy has lapsed: it asks the shard, which it cannot reach, rather than
    // answer from the stale copy.
    let e = c
        .ask(holder, reader, query())
        .await
        .expect_err("answered from a copy older than an acknowledged change");
    assert_eq!(e.errno, Errno::HostDown, "{e}");
    c.mend();
    let seen = c
        .ask(holder, reader, query())
        .await
        .expect("after the mend");
    assert_eq!(
        owners_of(&seen),
        [Owner {
            node: shard,
            client: second
        }]
    );
}
