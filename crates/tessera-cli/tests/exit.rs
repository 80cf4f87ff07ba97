//! A process that ends without closing its files loses nothing it wrote: returning from main,
//! `exit` and `_exit` publish as close would (the interposer), stdio streams are flushed
//! first, forked children publish their own writes, and when a process is killed its daemon
//! publishes what its index log holds (every write that returned) once its connection ends.

mod common;

use common::{Inst, Rank, build_c, ok_under, under, wait_gone};
use std::time::Duration;
use tessera_cli::script::{Cmd, pattern_byte};
use tessera_client::Model;

fn lines(n: usize) -> Vec<u8> {
    (0..n)
        .flat_map(|i| format!("line {i:04}\n").into_bytes())
        .collect()
}

/// Reads the whole file through the interposer on another node, until it has `want` or the
/// deadline passes (a killed writer is published when its daemon sees the connection end).
fn wait_for(inst: &Inst, path: &str, want: &[u8], deadline: Duration) -> Vec<u8> {
    let mut got = Vec::new();
    // The caller compares what was read last with what it wants, and says what differs.
    tessera_testkit::holds_within(deadline, || {
        got = ok_under(inst, 1, "cat", &[path]).stdout;
        got == want
    });
    got
}

/// Opens `path` for writing under the session model.
fn open_to_write(r: &mut Rank, path: &str, create: bool) {
    r.ok(&Cmd::Open {
        path: path.into(),
        model: Model::Session,
        read: false,
        write: true,
        create,
    });
}

/// Writes block `block` (4 KiB) of `path`, open in `w`, with pattern `id`.
fn write_block(w: &mut Rank, block: u64, id: u32) {
    w.ok(&Cmd::Write {
        off: block * 4096,
        len: 4096,
        id,
    });
}

/// Waits until a killed writer's blocks of `path` are published, then checks that block `k`
/// holds pattern `ids[k]`.
fn assert_published_blocks(c: &tessera_client::Client, path: &str, ids: &[u32]) {
    let len = ids.len() * 4096;
    wait_for_size(c, path, len as u64, "the writes were not published");
    let mut buf = vec![0u8; len];
    c.open_read(path)
        .unwrap()
        .read_exact_at(&mut buf, 0)
        .unwrap();
    for (k, b) in buf.iter().enumerate() {
        assert_eq!(*b, pattern_byte(ids[k / 4096], k as u64), "byte {k}");
    }
}

/// Waits until `path` is at least `size` bytes long as `c` sees it; a killed writer is
/// published when its daemon sees the connection end, so this fails only after 20 s.
fn wait_for_size(c: &tessera_client::Client, path: &str, size: u64, what: &str) {
    tessera_testkit::eventually(Duration::from_secs(20), what, || {
        c.stat(path).unwrap().size >= size
    });
}

#[test]
fn interposed_programs_that_end_without_close_publish() {
    let inst = Inst::start(2);
    let exe = build_c("cc", "exit");
    let exe = exe.display().to_string();
    for mode in ["return", "exit", "_exit", "stdio", "fork", "kill"] {
        for model in ["session", "commit", "mpiio"] {
            let path = format!("/tessera/{mode}-{model}");
            let status = under(&inst, 0, &exe, &[&path, mode])
                .env("TESSERA_MODEL", model)
                .status()
                .unwrap();
            if mode == "kill" {
                assert_eq!(
                    std::os::unix::process::ExitStatusExt::signal(&status),
                    Some(9)
                );
            } else {
                assert!(status.success(), "{mode} {model}: {status}");
            }
            let want = lines(if mode == "fork" { 200 } else { 100 });
            // Published before the process was gone, except a killed one: its daemon does it.
            let wait = if mode == "kill" { 20 } else { 0 };
            let got = wait_for(&inst, &path, &want, Duration::from_secs(wait));
            assert!(
                got == want,
                "{mode} under {model}: {} of {} bytes visible ({} lines)",
                got.len(),
                want.len(),
                got.split(|b| *b == b'\n')
                    .filter(|l| l.starts_with(b"line"))
                    .count()
            );
        }
    }
}

/// A killed process loses none of its writes that returned, though it never synchronised
/// and sat idle before it was killed: every write reaches its index log at once (the open run
/// rewritten in place), and its daemon publishes what the index log holds.
#[test]
fn a_killed_process_loses_no_write_that_returned() {
    let inst = Inst::start(2);
    let mut w = Rank::spawn(&inst.layout, 0);
    open_to_write(&mut w, "/tessera/run", true);
    // A strided pattern, then a scattered write, never synchronised.
    const PIECE: u64 = 4096;
    const PIECES: u64 = 50;
    for i in 0..PIECES {
        w.ok(&Cmd::Write {
            off: i * 2 * PIECE,
            len: PIECE,
            id: (i + 1) as u32,
        });
    }
    let last = PIECES * 2 * PIECE + 12345;
    w.ok(&Cmd::Write {
        off: last,
        len: 100,
        id: 999,
    });
    w.kill9();
    let c = inst.client(1);
    wait_for_size(
        &c,
        "/tessera/run",
        last + 100,
        "the killed writer's writes were not published",
    );
    let mut r = c.open_read("/tessera/run").unwrap();
    for i in 0..PIECES {
        let mut buf = vec![0u8; PIECE as usize];
        r.read_exact_at(&mut buf, i * 2 * PIECE).unwrap();
        let want: Vec<u8> = (0..PIECE)
            .map(|k| pattern_byte((i + 1) as u32, i * 2 * PIECE + k))
            .collect();
        assert!(buf == want, "piece {i}");
    }
    let mut buf = vec![0u8; 100];
    r.read_exact_at(&mut buf, last).unwrap();
    assert!(
        buf.iter()
            .enumerate()
            .all(|(k, b)| *b == pattern_byte(999, last + k as u64))
    );
}

/// A process that wrote before and after its daemon restarted, then was killed: the restarted
/// daemon learned again which files it writes (at its reconnect), and publishes all of it.
#[test]
fn a_killed_process_whose_daemon_restarted_is_published() {
    let inst = Inst::start(2);
    let mut w = Rank::spawn(&inst.layout, 0);
    open_to_write(&mut w, "/tessera/restarted", true);
    write_block(&mut w, 0, 1);
    inst.kill9(0);
    inst.restart(0);
    write_block(&mut w, 1, 2);
    w.kill9();
    assert_published_blocks(&inst.client(1), "/tessera/restarted", &[1, 2]);
}

/// A child of `vfork` that fails to exec and calls `_exit` (what Python's subprocess does)
/// shares its parent's memory: ending it must not touch the parent's Tessera state, whose
/// writes are then published by its own close.
#[test]
fn a_vfork_child_ending_leaves_its_parent_alone() {
    let inst = Inst::start(2);
    let script = r#"
import os, subprocess
fd = os.open("/tessera/vf", os.O_CREAT | os.O_WRONLY, 0o644)
os.write(fd, b"x" * 1000)
for _ in range(3):
    try:
        subprocess.run(["/nonexistent/program"])
    except FileNotFoundError:
        pass
os.write(fd, b"y" * 1000)
os.close(fd)
"#;
    ok_under(&inst, 0, "python3", &["-c", script]);
    let got = ok_under(&inst, 1, "cat", &["/tessera/vf"]).stdout;
    let mut want = vec![b'x'; 1000];
    want.extend_from_slice(&[b'y'; 1000]);
    assert!(
        got == want,
        "{} bytes, first 8: {:?}",
        got.len(),
        &got[..got.len().min(8)]
    );
}

/// Writes a process published before its daemon restarted are not published again when it
/// ends afterwards: another process's newer bytes stay.
#[test]
fn published_writes_are_not_published_again_after_a_daemon_restart() {
    let inst = Inst::start(2);
    let mut a = Rank::spawn(&inst.layout, 0);
    open_to_write(&mut a, "/tessera/f", true);
    a.ok(&Cmd::Write {
        off: 0,
        len: 4096,
        id: 1,
    });
    a.ok(&Cmd::Close);
    // Another process writes newer bytes over them.
    let mut b = Rank::spawn(&inst.layout, 1);
    open_to_write(&mut b, "/tessera/f", false);
    b.ok(&Cmd::Write {
        off: 0,
        len: 4096,
        id: 2,
    });
    b.ok(&Cmd::Close);
    // A writes something it never publishes elsewhere (a sign that its end was handled).
    open_to_write(&mut a, "/tessera/g", true);
    a.ok(&Cmd::Write {
        off: 0,
        len: 100,
        id: 3,
    });
    inst.kill9(0);
    inst.restart(0);
    a.kill9();
    let c = inst.client(1);
    wait_for_size(
        &c,
        "/tessera/g",
        100,
        "the killed process's last write was not published",
    );
    let mut r = c.open_read("/tessera/f").unwrap();
    let mut buf = vec![0u8; 4096];
    r.read_exact_at(&mut buf, 0).unwrap();
    assert!(
        buf.iter()
            .enumerate()
            .all(|(k, b)| *b == pattern_byte(2, k as u64)),
        "the newer bytes were overwritten by a second publication of older ones"
    );
}

/// A daemon told to stop while it publishes what a killed process left stops cleanly: the
/// publication ends with the daemon (no panic of a background task meeting the runtime's
/// end), and the daemon's successor publishes all of it.
#[test]
fn a_daemon_stopped_while_it_publishes_a_killed_process_s_writes_stops_cleanly() {
    let inst = Inst::start(1);
    let mut w = Rank::spawn(&inst.layout, 0);
    open_to_write(&mut w, "/tessera/held", true);
    write_block(&mut w, 0, 1);
    // Restarted, the daemon watches the writer as a process that was connected before; the
    // failpoint holds the publication once the writer has ended, until the daemon stops.
    inst.kill9(0);
    inst.restart_with(0, &[("TESSERA_FAILPOINT", "leftovers-hold")]);
    let pid = inst.pid(0);
    w.kill9();
    // The daemon starts publishing the killed writer's bytes.
    inst.log_once(0, "failpoint leftovers-hold");
    let out = inst.tessera(&["stop"]);
    assert!(
        out.status.success(),
        "stop: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_gone(
        pid,
        Duration::from_secs(20),
        "(the stopped daemon) is still running",
    );
    let log = std::fs::read_to_string(inst.layout.log_file(0)).unwrap();
    assert!(
        !log.contains("panicked"),
        "the daemon panicked while stopping:\n{log}"
    );
    inst.restart(0);
    assert_published_blocks(&inst.client(0), "/tessera/held", &[1]);
}
