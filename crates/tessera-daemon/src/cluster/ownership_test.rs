//! The ownership fan-out on an in-process cluster: a file whose runs lie on every node's
//! stripes is listed whole, page after page, each page stopping where the first node's page
//! stopped, so that no run is missed or repeated.

use super::Cluster;
use tessera_core::{Owner, Run};
use tessera_proto::QueryFile;

#[tokio::test(start_paused = true)]
async fn a_file_of_many_runs_is_listed_whole_across_pages() {
    // Small stripes, so that the runs lie on every node's shards, and the smallest frame, so
    // that a page holds 16,384 runs.
    let c = Cluster::start(3, |cfg| {
        cfg.stripe_size = 64 << 10;
        cfg.max_frame = 1 << 20;
    })
    .await;
    let writer = c.connect(0).await;
    let ino = c.create(0, writer, "/many").await;
    // Runs of irregular lengths 64 bytes apart, so that no pattern merges them.
    const RUNS: u64 = 40_000;
    let runs: Vec<Run> = (0..RUNS)
        .map(|i| Run::single(i * 64, 1 + (i * 7919) % 40))
        .collect();
    let end = runs.last().unwrap().start + 64;
    c.write_log(0, writer, false, ino, 0, &vec![3u8; end as usize]);
    c.attach(0, writer, ino, runs.clone(), vec![])
        .await
        .expect("attach");

    let reader = c.connect(1).await;
    let mut listed: Vec<Run> = Vec::new();
    let mut pages = 0;
    let mut from = 0;
    loop {
        let page = c
            .ask(1, reader, QueryFile { ino, from })
            .await
            .expect("a page");
        pages += 1;
        assert!(page.runs.iter().all(|r| r.owner
            == Owner {
                node: 0,
                client: writer
            }));
        listed.extend(page.runs.iter().map(|r| r.run));
        match page.next {
            Some(next) => {
                assert!(next > from, "the listing does not move on");
                from = next;
            }
            None => break,
        }
    }
    assert!(
        pages >= 3,
        "{RUNS} runs fit in {pages} pages: paging not exercised"
    );
    let pieces = |rs: &[Run]| -> Vec<(u64, u64)> { rs.iter().flat_map(|r| r.pieces()).collect() };
    assert_eq!(
        listed.len(),
        runs.len(),
        "runs missed or repeated across pages"
    );
    assert!(
        pieces(&listed) == pieces(&runs),
        "the pages do not list the runs attached"
    );
}
