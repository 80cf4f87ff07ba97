//! One log per process and node for every file it writes: many small files cost no local files
//! of their own, their space comes back when they are removed and their writer is gone, and a
//! reader holding positions into a log that went gets an error, never another file's bytes.

mod common;

use common::Inst;
use tessera_client::{Client, OpenOptions};

/// Every file below `dir` (directories not counted).
fn files_below(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                files_below(&e.path())
            } else {
                1
            }
        })
        .sum()
}

fn write(c: &Client, path: &str, bytes: &[u8]) {
    let mut f = c
        .open(path, OpenOptions::new().write(true).create(true))
        .unwrap();
    f.write_at(bytes, 0).unwrap();
    f.close().unwrap();
}

fn content(i: usize) -> Vec<u8> {
    (0..3901).map(|k| ((i * 7 + k) % 251) as u8).collect()
}

/// The count of the issue: files of 3,901 bytes, written by one process, leave a number of
/// files in the node's burst-buffer directory that does not grow with their count; removed,
/// and their writer gone, the burst buffer's usage is back where it was.
#[test]
fn small_files_cost_no_local_files_and_their_space_comes_back() {
    let count = if std::env::var_os("TESSERA_FULL").is_some() {
        10_000
    } else {
        2_000
    };
    let inst = Inst::start(2);
    let node_dir = inst.root.join("bb/node-0");
    let before = inst.bb_used();
    let c = inst.client(0);
    c.mkdir("/tessera/small", 0o755).unwrap();
    let mut local_files = Vec::new();
    for i in 0..count {
        write(&c, &format!("/tessera/small/f{i}"), &content(i));
        if i + 1 == 100 || i + 1 == count {
            local_files.push(files_below(&node_dir));
        }
    }
    assert_eq!(
        local_files[0], local_files[1],
        "local files after 100 files and after {count}"
    );
    assert!(inst.bb_used() >= before + count as u64 * 3901);
    // Every file reads back, from the writer's node and from the other one.
    let other = inst.client(1);
    for i in (0..count).step_by(97) {
        for r in [&c, &other] {
            let mut f = r.open_read(&format!("/tessera/small/f{i}")).unwrap();
            let mut buf = vec![0u8; 3901];
            f.read_exact_at(&mut buf, 0).unwrap();
            assert!(buf == content(i), "file {i}");
        }
    }
    for i in 0..count {
        c.unlink(&format!("/tessera/small/f{i}")).unwrap();
    }
    c.rmdir("/tessera/small").unwrap();
    drop(c);
    inst.wait_none_left("removed files not released", |s| s.files_to_drop);
    inst.wait_bb_used_at_most(before, "the removed files' log");
    assert_eq!(
        std::fs::read_dir(node_dir.join("logs")).unwrap().count(),
        0,
        "the log of a writer that went, whose files all went, is deleted"
    );
}

/// A reader that learned where a file's bytes are, on another node, before the file was
/// removed and its writer's log deleted, is refused when it reads them; a file written
/// meanwhile by another process is never what it reads.
#[test]
fn a_reader_of_a_removed_files_log_gets_an_error_not_another_files_bytes() {
    let inst = Inst::start(2);
    let old = vec![1u8; 20_000];
    write(&inst.client(0), "/tessera/old", &old);
    let reader = inst.client(1);
    let mut r = reader.open_read("/tessera/old").unwrap();
    let mut buf = vec![0u8; old.len()];
    r.read_exact_at(&mut buf, 0).unwrap();
    assert!(buf == old);
    inst.client(0).unlink("/tessera/old").unwrap();
    inst.wait_none_left("removed files not released", |s| s.files_to_drop);
    let logs = inst.root.join("bb/node-0/logs");
    tessera_testkit::eventually(
        std::time::Duration::from_secs(20),
        "the removed file's log deleted",
        || std::fs::read_dir(&logs).unwrap().count() == 0,
    );
    let new = vec![2u8; 20_000];
    write(&inst.client(0), "/tessera/new", &new);
    let mut again = vec![0u8; old.len()];
    match r.read_exact_at(&mut again, 0) {
        Err(e) => assert!(
            matches!(
                e.errno,
                tessera_client::Errno::Io
                    | tessera_client::Errno::Stale
                    | tessera_client::Errno::NoEnt
            ),
            "{e}"
        ),
        Ok(()) => assert!(
            again == old,
            "a read of the removed file returned other bytes"
        ),
    }
    assert!(
        again != new,
        "a read of the removed file returned the new file's bytes"
    );
}
