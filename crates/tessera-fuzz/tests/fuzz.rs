//! Every fuzz target over its committed corpus, then over fresh random inputs
//! (`TESSERA_FUZZ_CASES`, default 10,000 per target).

use tessera_fuzz::harness::{cases, fresh, replay, target};

fn fuzz(name: &str) {
    let t = target(name);
    let replayed = replay(t);
    assert!(replayed > 0, "the corpus of {name} is empty");
    fresh(t, cases());
}

#[test]
fn frame() {
    fuzz("frame");
}

#[test]
fn peer_auth() {
    fuzz("peer_auth");
}

#[test]
fn wal() {
    fuzz("wal");
}

#[test]
fn index_records() {
    fuzz("index_records");
}

#[test]
fn ring() {
    fuzz("ring");
}

#[test]
fn log_view() {
    fuzz("log_view");
}

#[test]
fn every_target_is_tested_here() {
    let names: Vec<&str> = tessera_fuzz::TARGETS.iter().map(|t| t.name).collect();
    assert_eq!(
        names,
        [
            "frame",
            "peer_auth",
            "wal",
            "index_records",
            "ring",
            "log_view"
        ]
    );
}
