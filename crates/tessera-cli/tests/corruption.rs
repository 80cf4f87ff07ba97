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
    // Killed before the client lets go of its connection: its goodbye would be the log's
    // last record (the daemon forgets the client durably), not the last mkdir.
    inst.kill9(0);
    drop(c);
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

/// One process's logs of one file on node 0, and a reader on node 1 (remote reads) and on
/// node 0 (its own daemon's read of another process's logs happens in the reader itself).
/// Writes the file; returns its data log's path (without extension), its bytes, and the
/// writer, kept connected so that its daemon does not look at the log while the test
/// damages it.
fn written_file(
    inst: &Inst,
    pieces: u64,
    piece: u64,
) -> (std::path::PathBuf, Vec<u8>, tessera_client::Client) {
    let c = inst.client(0);
    let mut f = c.create("/tessera/logged").unwrap();
    let mut all = Vec::new();
    // Scattered (not one run) so the index holds several records.
    for i in 0..pieces {
        let off = (pieces - 1 - i) * piece;
        let data: Vec<u8> = (0..piece).map(|k| ((off + k) % 251) as u8 + 1).collect();
        f.write_at(&data, off).unwrap();
        f.commit().unwrap();
    }
    f.close().unwrap();
    for off in 0..pieces * piece {
        all.push((off % 251) as u8 + 1);
    }
    let dir = inst.root.join("bb/node-0/logs");
    (dir.join(format!("{}", c.identity().1)), all, c)
}

fn read_back(inst: &Inst, node: u32, len: usize) -> Result<Vec<u8>, tessera_client::FsError> {
    let mut r = inst.client(node).open_read("/tessera/logged")?;
    let mut buf = vec![0u8; len];
    r.read_exact_at(&mut buf, 0)?;
    Ok(buf)
}

#[test]
fn a_flipped_data_byte_is_an_error_naming_file_and_offset() {
    let inst = Inst::start(2);
    let (base, all, _writer) = written_file(&inst, 8, 50_000);
    let data = base.with_extension("data");
    common::damage_on_device(&data, 123_456);
    for node in [1, 0] {
        match read_back(&inst, node, all.len()) {
            Ok(got) => {
                let bad = got.iter().zip(&all).position(|(a, b)| a != b);
                panic!("node {node}: read returned without an error (first wrong byte: {bad:?})");
            }
            Err(e) => {
                assert_eq!(e.errno, Errno::Io, "{e}");
                assert!(
                    e.message.contains(".data") && e.message.contains("corrupt"),
                    "{e}"
                );
            }
        }
    }
    // The other pieces, outside the damaged block, still read.
    let mut r = inst.client(1).open_read("/tessera/logged").unwrap();
    let mut piece = vec![0u8; 50_000];
    r.read_exact_at(&mut piece, 0).unwrap();
    assert!(piece[..] == all[..50_000]);
}

#[test]
fn a_corrupt_index_record_loses_only_what_it_described() {
    let inst = Inst::start(2);
    let (base, all, _writer) = written_file(&inst, 8, 50_000);
    let index = base.with_extension("index");
    let mut bytes = std::fs::read(&index).unwrap();
    let records = (bytes.len() - 32) / 56;
    assert!(records >= 8, "{records} records");
    // A record in the middle, and the last one.
    for at in [32 + 56 * (records / 2) + 5, bytes.len() - 56 + 7] {
        bytes[at] ^= 0x10;
    }
    std::fs::write(&index, &bytes).unwrap();
    for node in [1, 0] {
        let got = read_back(&inst, node, all.len())
            .unwrap_or_else(|e| panic!("node {node}: a damaged index record made reads fail: {e}"));
        assert!(got == all, "node {node}: wrong bytes after index damage");
    }
}
