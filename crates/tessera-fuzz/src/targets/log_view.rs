//! The log view: how a daemon or a client reads another process's logs, which may have been
//! damaged on the burst buffer.
//!
//! A writer appends overlapping writes (each byte's value names the write that made it, so
//! stale bytes show) and syncs; the data log, its checksums and its index log are damaged;
//! then the view is opened and read. Undamaged logs read back exactly. Damaged ones may fail
//! (with EIO) or read as missing where the index lost a record, but a byte the view returns
//! is always the byte last written there: never stale, never garbage.
//!
//! The index log is damaged in place (bytes flipped, overwritten or zeroed); its length is
//! kept because a shorter index log reads as a writer that has not synced its last records
//! yet (the view then serves the older bytes, by design), and whole pairs removed cleanly
//! from its middle leave no trace in the pair format.

use super::damage::{Damage, apply_all, overwrite_all};
use arbitrary::{Arbitrary, Unstructured};
use std::path::Path;
use tessera_core::index::IndexHeader;
use tessera_core::{Errno, FsResult};
use tessera_logstore::{LogView, LogWriter, sums_path};

/// Logical bytes the writes fall in (small, so that they overlap).
const SPAN: u64 = 8192;

#[derive(Arbitrary, Debug)]
enum Step {
    Write { at: u16, len: u8 },
    Sync,
}

#[derive(Arbitrary, Debug)]
struct Input {
    steps: Vec<Step>,
    data: Vec<Damage>,
    sums: Vec<Damage>,
    index: Vec<Damage>,
    reads: Vec<(u16, u16)>,
}

/// The byte that write number `w` stores at logical offset `pos`.
fn byte(w: usize, pos: u64) -> u8 {
    (w as u8).wrapping_mul(97) ^ (pos as u8)
}

/// Damages a file (keeping its length if `in_place`); whether it changed.
fn damage_file(path: &Path, damage: &[Damage], in_place: bool) -> bool {
    let before = std::fs::read(path).expect("reading a log");
    let mut after = before.clone();
    if in_place {
        overwrite_all(&mut after, damage);
    } else {
        apply_all(&mut after, damage);
    }
    std::fs::write(path, &after).expect("writing a log");
    after != before
}

/// A failure is allowed only when the logs were damaged, and only as EIO.
fn may_fail<T>(damaged: bool, what: &str, r: &FsResult<T>) {
    if let Err(e) = r {
        assert!(damaged, "{what} of undamaged logs failed: {e}");
        assert_eq!(e.errno, Errno::Io, "{what}: {e}");
    }
}

/// The structured input `data` stands for.
pub fn describe(data: &[u8]) -> String {
    format!("{:#?}", Input::arbitrary_take_rest(Unstructured::new(data)))
}

pub fn run(data: &[u8]) {
    let Ok(input) = Input::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    let dir = tempfile::tempdir().expect("a temporary directory");
    let logs = dir.path().join("logs");
    let (data_path, index_path) = (logs.join("7.data"), logs.join("7.index"));
    let header = IndexHeader {
        log: 7,
        node: 0,
        epoch: 0,
        txn: false,
    };
    // The file written; the view must show no other.
    let ino = 1;
    let mut model: Vec<Option<u8>> = vec![None; (SPAN + 256) as usize];
    {
        let mut w = LogWriter::open(&data_path, &index_path, header).expect("opening the logs");
        for (n, step) in input.steps.iter().take(200).enumerate() {
            match *step {
                Step::Write { at, len } => {
                    let at = at as u64 % SPAN;
                    let bytes: Vec<u8> = (0..len as u64 + 1).map(|i| byte(n, at + i)).collect();
                    w.append(ino, at, &bytes).expect("appending");
                    for (i, b) in bytes.iter().enumerate() {
                        model[at as usize + i] = Some(*b);
                    }
                }
                Step::Sync => w.sync_index(ino).expect("syncing"),
            }
        }
        w.sync_index(ino).expect("syncing");
    }

    let damaged = damage_file(&data_path, &input.data, false)
        | damage_file(&sums_path(&data_path), &input.sums, false)
        | damage_file(&index_path, &input.index, true);

    let view = LogView::open(&data_path, &index_path);
    may_fail(damaged, "opening", &view);
    let Ok(view) = view else {
        return;
    };
    let lost = view.damage_note().is_some();
    let reads = std::iter::once((0, SPAN + 256)).chain(
        input
            .reads
            .iter()
            .map(|(s, l)| (*s as u64 % SPAN, *l as u64 % 1024)),
    );
    for (start, len) in reads {
        let mut out = vec![0u8; len as usize];
        let got = view.read(ino, start, &mut out);
        may_fail(damaged, "reading", &got);
        let Ok(gaps) = got else {
            continue;
        };
        let missing = |pos: u64| gaps.iter().any(|(s, e)| (*s..*e).contains(&pos));
        for (i, b) in out.iter().enumerate() {
            let pos = start + i as u64;
            let want = model.get(pos as usize).copied().flatten();
            if missing(pos) {
                assert!(
                    want.is_none() || lost,
                    "byte {pos} reads as missing though written and no record was lost"
                );
            } else {
                assert_eq!(Some(*b), want, "byte {pos}");
            }
        }
    }
}
