//! Damaged state and logs: acknowledged state is never dropped silently, and damaged bytes
//! are reported (file and offset), never returned.

mod common;

use common::Inst;
use tessera_client::{Errno, FileKind};

const ENTRIES: usize = 24;

/// An instance of one daemon whose state log holds `ENTRIES` directories, one group commit
/// each, then killed before it checkpoints the log into its database.
fn instance_with_logged_state() -> (Inst, std::path::PathBuf) {
    let inst = Inst::start_with(1, &["--set", "state_checkpoint_idle_ms=600000"]);
    let c = inst.client(0);
    for i in 0..ENTRIES {
        c.mkdir(&format!("/tessera/d{i:02}"), 0o755).unwrap();
    }
    drop(c);
    inst.kill9(0);
    let wal = inst.root.join("bb/node-0/meta.wal");
    assert!(
        std::fs::metadata(&wal).unwrap().len() > 200,
        "the log is empty"
    );
    (inst, wal)
}

fn present(inst: &Inst) -> Vec<String> {
    inst.client(0)
        .readdir("/tessera")
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == FileKind::Dir)
        .map(|e| e.name)
        .collect()
}

#[test]
fn a_corrupt_state_log_record_stops_the_daemon_and_salvage_keeps_the_rest() {
    let (inst, wal) = instance_with_logged_state();
    let mut bytes = std::fs::read(&wal).unwrap();
    let at = bytes.len() / 4;
    bytes[at] ^= 0x5a;
    std::fs::write(&wal, &bytes).unwrap();

    let out = inst.tessera(&["start", "--node", "0"]);
    let log = std::fs::read_to_string(inst.layout.log_file(0)).unwrap_or_default();
    let said = format!("{}{log}", String::from_utf8_lossy(&out.stderr));
    assert!(
        !out.status.success(),
        "the daemon started on a state log damaged in the middle: {said}"
    );
    assert!(
        said.contains("meta.wal") && said.contains("tessera salvage"),
        "{said}"
    );
    assert_eq!(
        std::fs::read(&wal).unwrap(),
        bytes,
        "the damaged log was changed"
    );

    let out = inst.tessera(&["salvage", "--node", "0"]);
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "salvage failed: {report}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(report.contains("dropped"), "{report}");
    inst.restart(0);
    let dirs = present(&inst);
    // One group commit (one mkdir) at most is lost; every other one comes back.
    assert!(
        dirs.len() >= ENTRIES - 1,
        "salvage kept only {} of {ENTRIES}: {dirs:?}",
        dirs.len()
    );
    assert!(dirs.contains(&format!("d{:02}", ENTRIES - 1)), "{dirs:?}");
}

#[test]
fn a_torn_state_log_tail_is_dropped_and_reported() {
    let (inst, wal) = instance_with_logged_state();
    let len = std::fs::metadata(&wal).unwrap().len();
    // A crash in the middle of the last append.
    let f = std::fs::OpenOptions::new().write(true).open(&wal).unwrap();
    f.set_len(len - 5).unwrap();
    inst.restart(0);
    let log = std::fs::read_to_string(inst.layout.log_file(0)).unwrap();
    assert!(log.contains("torn"), "{log}");
    let dirs = present(&inst);
    assert_eq!(dirs.len(), ENTRIES - 1, "{dirs:?}");
    assert_eq!(
        inst.client(0)
            .stat(&format!("/tessera/d{:02}", ENTRIES - 1))
            .unwrap_err()
            .errno,
        Errno::NoEnt
    );
}
