//! Burst-buffer accounting: what the logs really hold, whatever the clients say or fail to
//! say. Reservations of processes that ended come back, a crafted release changes nothing,
//! and status and statfs report the true usage.

mod common;

use common::{Inst, RawClient, ok_under};
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use tessera_client::Errno;
use tessera_proto::{Release, Reserve};

const MIB: u64 = 1 << 20;

#[test]
fn reservations_of_processes_that_ended_come_back() {
    let inst = Inst::start_with(1, &["--bb-capacity", &(100 * MIB).to_string()]);
    // Interposed processes reserve burst-buffer space in large grants, write a little and end
    // without closing: one with _exit, one killed. Each waits, once it has written, until the
    // test has seen its grant (the premise: a reservation larger than what was written).
    for end in ["os._exit(0)", "os.kill(os.getpid(), 9)"] {
        let script = format!(
            "import os, sys\nfd = os.open('/tessera/small-{}', os.O_CREAT | os.O_WRONLY, 0o644)\nos.write(fd, b'x' * {MIB})\nprint('written', flush=True)\nsys.stdin.read()\n{end}\n",
            end.len()
        );
        let mut p = common::under(&inst, 0, "python3", &["-c", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(p.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "written");
        let reserved = inst.client(0).status().unwrap().bb_reserved;
        assert!(
            reserved >= 16 * MIB,
            "the writer holds a grant of {reserved} bytes, not the large grant the test relies on"
        );
        drop(p.stdin.take());
        let _ = p.wait().unwrap();
    }
    // Their grants came back once the daemon saw them end.
    inst.wait_clients(0, 0);
    assert_eq!(inst.client(0).status().unwrap().bb_reserved, 0);
    // The logs hold about 2 MiB of 100: a 40 MiB write fits, now and twice more.
    let c = inst.client(0);
    for i in 0..2 {
        let mut f = c.create(&format!("/tessera/big-{i}")).unwrap();
        f.write_at(&vec![1u8; (40 * MIB) as usize], 0)
            .unwrap_or_else(|e| {
                panic!("40 MiB write {i} with ~{} MiB in the logs: {e}", 2 + 40 * i)
            });
        f.close().unwrap();
    }
}

#[test]
fn a_crafted_release_changes_nothing() {
    let inst = Inst::start_with(1, &["--bb-capacity", &(16 * MIB).to_string()]);
    let mut raw = RawClient::hello(&inst, 0, None).unwrap();
    let (r, _) = raw.call(Reserve { bytes: 8 * MIB }).unwrap();
    assert_eq!(r, Ok(8 * MIB));
    let (r, _) = raw.call(Release { bytes: u64::MAX }).unwrap();
    match r {
        Err(e) => assert_eq!(e.errno, Errno::Inval, "{e}"),
        Ok(()) => panic!("a release of u64::MAX bytes was accepted"),
    }
    // The 8 MiB are still reserved: 12 MiB more do not fit in 16.
    let c = inst.client(0);
    let mut f = c.create("/tessera/f").unwrap();
    let e = f
        .write_at(&vec![2u8; (12 * MIB) as usize], 0)
        .expect_err("12 MiB more than a 16 MiB burst buffer with 8 MiB reserved");
    assert_eq!(e.errno, Errno::NoSpace, "{e}");
    // Once the raw client is gone, its reservation comes back.
    drop(raw);
    tessera_testkit::eventually_ok(
        std::time::Duration::from_secs(20),
        "the 12 MiB written once the reserving client ended",
        || match f.write_at(&vec![2u8; (12 * MIB) as usize], 0) {
            Ok(_) => Ok(()),
            Err(e) if e.errno == Errno::NoSpace => Err(e),
            Err(e) => panic!("after the reserving client ended: {e}"),
        },
    );
}

#[test]
fn status_and_statfs_report_what_the_logs_hold() {
    let inst = Inst::start(1);
    let c = inst.client(0);
    let mut f = c.create("/tessera/twenty").unwrap();
    f.write_at(&vec![3u8; (20 * MIB) as usize], 0).unwrap();
    f.close().unwrap();
    let used = c.status().unwrap().bb_used;
    assert!(used >= 20 * MIB, "status says {used} bytes used");
    let out = inst.tessera(&["status"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("20.0 MiB"), "{text}");
    let script = "import os\ns = os.statvfs('/tessera')\nprint(s.f_blocks * s.f_frsize, (s.f_blocks - s.f_bfree) * s.f_frsize)\n";
    let out = ok_under(&inst, 0, "python3", &["-c", script]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let v: Vec<u64> = text
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    assert!(v[0] > 0, "statvfs reports a file system of size 0: {text}");
    assert!(
        v[1] >= 20 * MIB,
        "statvfs reports {} bytes used: {text}",
        v[1]
    );
}
