//! Migration (FusionFS's migrate-on-open) and the release of the logs it moved bytes away
//! from, on an in-process cluster: the bytes a writer on one node left move to a reader's
//! node where unchanged, and the writer's log is removed once the grace period is over (not
//! before), its writer gone and no byte owned by it.

use super::Cluster;
use std::time::Duration;
use tessera_core::{Owner, Run};
use tessera_proto::{AttachIf, MigratePlan, Query};

const GRACE: Duration = Duration::from_secs(3);
const LEN: u64 = 256 << 10;

#[tokio::test(start_paused = true)]
async fn migrated_bytes_move_and_the_old_log_goes_after_the_grace_period() {
    let c = Cluster::start(3, |cfg| cfg.migrate_grace_ms = GRACE.as_millis() as u64).await;
    let writer = c.connect(1).await;
    let ino = c.create(1, writer, "/m").await;
    let bytes: Vec<u8> = (0..LEN).map(|i| (i % 253) as u8).collect();
    c.write_log(1, writer, false, ino, 0, &bytes);
    c.attach(1, writer, ino, vec![Run::single(0, LEN)], vec![])
        .await
        .expect("attach");
    // The writer ends: its log may go once nothing points at it.
    c.node(1).clients.unbind(writer);

    let reader = c.connect(2).await;
    let plan = c.ask(2, reader, MigratePlan { ino }).await.expect("plan");
    assert!(!plan.is_empty(), "no stripe to migrate");
    // The reader's copy in its own log on node 2, as the library makes it.
    c.write_log(2, reader, false, ino, 0, &bytes);
    let moved = c
        .ask(
            2,
            reader,
            AttachIf {
                ino,
                stripes: plan
                    .iter()
                    .map(|s| (s.stripe, s.version, s.runs.iter().map(|r| r.run).collect()))
                    .collect(),
                upto: None,
                from: vec![Owner {
                    node: 1,
                    client: writer,
                }],
            },
        )
        .await
        .expect("conditional attach");
    assert_eq!(moved, LEN, "every unchanged byte moves");
    let moved_at = crate::clock::now();
    let owners = c
        .ask(
            0,
            c.connect(0).await,
            Query {
                ino,
                start: 0,
                end: LEN,
            },
        )
        .await
        .expect("query");
    assert!(
        owners.runs.iter().all(|r| r.owner
            == Owner {
                node: 2,
                client: reader
            }),
        "{:?}",
        owners.runs
    );

    let (old_log, _) = c.cfg.log_paths(1, writer);
    assert!(
        old_log.exists(),
        "the log went before its grace period began"
    );
    c.eventually("the migrated-away log to be released", || async {
        !old_log.exists()
    })
    .await;
    let after = crate::clock::since(moved_at);
    assert!(
        after >= GRACE && after <= 3 * GRACE,
        "released {after:?} after the move; the grace period is {GRACE:?}"
    );
}
