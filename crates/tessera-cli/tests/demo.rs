//! The demo runs end to end (small size): writes, verified reads, flush, comparison table.

mod common;

use std::process::Command;

#[test]
fn demo_runs_and_verifies_its_data() {
    let out = Command::new(common::TESSERA)
        .args([
            "demo",
            "--per-rank",
            "1048576",
            "--ranks",
            "4",
            "--daemons",
            "3",
        ])
        .output()
        .expect("run demo");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "demo failed:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for line in [
        "readers (rank-shifted) read and verified every byte",
        "the flushed file equals the expected N-1 file byte for byte",
        "direct N-1 (pwrite, one file)",
        "direct N-N (one file per rank)",
        "tessera N-1 (commit / session)",
    ] {
        assert!(text.contains(line), "missing '{line}' in:\n{text}");
    }
    // Each writer's strided pattern is one index record, written twice: header (32 B) + one
    // pair (2 x 56 B).
    let index_bytes: u64 = text
        .lines()
        .find_map(|l| {
            l.strip_prefix("tessera index: ")?
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
        .expect("index line");
    assert_eq!(index_bytes, 4 * (32 + 112), "{text}");
}
