//! The request ring between a client and its daemon (shared memory beside the socket): the
//! library's requests go through it; a forked child never answers through its parent's; a
//! client that writes garbage into its ring, or goes away mid-request, harms neither the
//! daemon nor other clients; the file bytes of remote reads come through it, and a client
//! killed in the middle of one harms nobody; the ring can be turned off; an idle daemon uses
//! no CPU.

mod common;

use common::*;
use std::io::Read;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};
use tessera_proto::{Answer, Bound, Hello, Nop, PROTOCOL_VERSION, Request, Stat, frame};
use tessera_shm::{Place, Ring};

/// A connection made by hand whose hello asks for a ring, and what the daemon bound.
fn hello_asking_for_a_ring(inst: &Inst, node: u32) -> (UnixStream, Bound) {
    let mut s = UnixStream::connect(inst.socket(node)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let hello = Request::from(Hello {
        version: PROTOCOL_VERSION,
        pid: std::process::id(),
        resume: None,
        ring: true,
    });
    frame::write_frame(&mut s, &frame::encode(&hello)).unwrap();
    let body = frame::read_frame(&mut s, 1 << 20).unwrap();
    let bound: Answer<Bound> = frame::decode(&body).unwrap();
    (s, bound.unwrap())
}

/// A connection made by hand that asked for a ring, and the ring mapped as a client would.
fn raw_ring(inst: &Inst, node: u32) -> (UnixStream, Ring) {
    let (s, bound) = hello_asking_for_a_ring(inst, node);
    let at = bound.ring.expect("the daemon offers a ring");
    let path = format!("/proc/{}/fd/{}", at.pid, at.fd);
    let ring = Ring::open(std::path::Path::new(&path)).expect("map the ring");
    (s, ring)
}

/// Rings the daemon (an empty frame) if it is not watching.
fn ring_bell(s: &mut UnixStream, wake: bool) {
    if wake {
        frame::write_frame(s, &[]).unwrap();
    }
}

/// Waits (at most 20 s) for the answer to `seq` and says where it is.
fn wait_answer(ring: &Ring, seq: u32) -> Place {
    tessera_testkit::eventually_some(
        Duration::from_secs(20),
        &format!("the answer to request {seq}"),
        || ring.wait(seq, tessera_shm::SPIN, Duration::from_millis(50)),
    )
}

/// Expects a refusal naming `what` on the socket, then the end of the connection.
fn refused_then_hung_up(s: &mut UnixStream, what: &str) {
    let body = frame::read_frame(s, 1 << 20).expect("a refusal frame");
    let answer: Answer<()> = frame::decode(&body).unwrap();
    let e = answer.expect_err("garbage was answered as a request");
    assert!(e.to_string().contains(what), "{e}");
    let mut rest = Vec::new();
    match s.read_to_end(&mut rest) {
        Ok(_) => {}
        // The daemon closed with a bell of ours unread (it found the request before the
        // bell came): a hang-up too.
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("the daemon did not hang up: {e}"),
    }
    assert!(rest.is_empty(), "bytes after the refusal: {rest:?}");
}

#[test]
fn garbage_in_a_ring_ends_only_its_own_connection() {
    let inst = Inst::start(1);
    let good = inst.client(0);
    assert!(good.has_ring(), "the library did not get a ring");
    let mut f = good.create("/tessera/kept").unwrap();
    f.write_at(&[5u8; 3901], 0).unwrap();
    f.close().unwrap();
    let size_seen = || good.stat("/tessera/kept").map(|a| a.size);

    // A well-formed request through a ring made by hand is answered in the ring.
    let (mut s, mut ring) = raw_ring(&inst, 0);
    let posted = ring.post(&frame::encode(&Request::from(Nop))).unwrap();
    ring_bell(&mut s, posted.wake);
    assert_eq!(wait_answer(&ring, posted.seq), Place::Ring);
    let mut answer = Vec::new();
    ring.take_answer(&mut answer).unwrap();
    assert_eq!(frame::decode::<Answer<()>>(&answer).unwrap(), Ok(()));

    // Bytes that are no request: refused on the socket, and the connection ends.
    let posted = ring.post(&[0xff; 100]).unwrap();
    ring_bell(&mut s, posted.wake);
    assert_eq!(wait_answer(&ring, posted.seq), Place::Socket);
    refused_then_hung_up(&mut s, "malformed");
    assert_eq!(size_seen(), Ok(3901));

    // A length beyond the area.
    let (mut s, mut ring) = raw_ring(&inst, 0);
    let posted = ring.post(b"x").unwrap();
    let mut word = posted.seq.to_le_bytes().to_vec();
    word.extend_from_slice(&u32::MAX.to_le_bytes());
    ring.overwrite(Ring::REQUEST_SEQ_AT, &word);
    ring_bell(&mut s, true);
    refused_then_hung_up(&mut s, "garbage");
    assert_eq!(size_seen(), Ok(3901));

    // A client scribbling over its whole ring, sequences included, while ringing.
    let (mut s, ring) = raw_ring(&inst, 0);
    let len = tessera_shm::RING_HEADER_BYTES + ring.request_capacity() + ring.answer_capacity();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut junk = vec![0u8; 4096];
    let until = Instant::now() + Duration::from_millis(300);
    let mut scribbles = 0u64;
    while Instant::now() < until {
        for b in junk.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
        ring.overwrite((x as usize) % len, &junk);
        if frame::write_frame(&mut s, &[]).is_err() {
            break; // refused and hung up: what garbage earns
        }
        scribbles += 1;
        // The good client is served all along.
        assert_eq!(size_seen(), Ok(3901), "after {scribbles} scribbles");
    }
    drop((s, ring));

    // A client that goes away in the middle of a request.
    let (mut s, mut ring) = raw_ring(&inst, 0);
    let stat = Request::from(Stat {
        path: "/kept".into(),
    });
    let posted = ring.post(&frame::encode(&stat)).unwrap();
    ring_bell(&mut s, posted.wake);
    drop((s, ring));

    assert_eq!(size_seen(), Ok(3901));
    inst.wait_clients(0, 1);
    let out = inst.tessera(&["status"]);
    assert!(out.status.success(), "{out:?}");
}

/// An answer too large for the ring and for the socket's buffer is announced in the ring
/// before it is written: a client asleep on the futex learns to read the socket, instead of
/// the daemon waiting for a reader that waits for it.
#[test]
fn a_large_answer_is_announced_before_it_is_written() {
    // An area smaller than the answer (the default holds the largest read).
    let inst = Inst::start_with(1, &["--set", "ring_answer_bytes=196608"]);
    let c = inst.client(0);
    c.mkdir("/tessera/wide", 0o755).unwrap();
    let long = "n".repeat(120);
    for i in 0..4000 {
        c.create(&format!("/tessera/wide/{long}{i}"))
            .unwrap()
            .close()
            .unwrap();
    }
    let (mut s, mut ring) = raw_ring(&inst, 0);
    let list = Request::from(tessera_proto::Readdir {
        path: "/wide".into(),
        after: None,
        limit: 16_384,
    });
    let posted = ring.post(&frame::encode(&list)).unwrap();
    ring_bell(&mut s, posted.wake);
    // Nothing is read from the socket until the ring says the answer is there.
    assert_eq!(wait_answer(&ring, posted.seq), Place::Socket);
    let body = frame::read_frame(&mut s, 64 << 20).unwrap();
    let (page, _) = frame::split_message::<Answer<tessera_core::dir_page::DirPage>>(&body).unwrap();
    let page = page.unwrap();
    assert_eq!(page.entries.len(), 4000);
    assert!(
        body.len() > 2 * tessera_shm::ANSWER_CAPACITY as usize,
        "the answer ({} bytes) should not fit the ring nor a socket buffer",
        body.len()
    );
}

#[test]
fn without_a_ring_every_request_takes_the_socket() {
    let inst = Inst::start_with(1, &["--set", "client_ring=false"]);
    let c = inst.client(0);
    assert!(!c.has_ring(), "client_ring = false still made a ring");
    c.nop(false).unwrap();
    let (mut s, _) = hello_asking_for_a_ring(&inst, 0);
    let body = {
        frame::write_frame(&mut s, &frame::encode(&Request::from(Nop))).unwrap();
        frame::read_frame(&mut s, 1 << 20).unwrap()
    };
    assert_eq!(frame::decode::<Answer<()>>(&body).unwrap(), Ok(()));
    // An empty frame is no request when there is no ring: refused like any garbage.
    frame::write_frame(&mut s, &[]).unwrap();
    refused_then_hung_up(&mut s, "malformed");

    let inst = Inst::start(1);
    let mut cmd = under(
        &inst,
        0,
        "sh",
        &["-c", "echo hi > /tessera/f && cat /tessera/f"],
    );
    cmd.env("TESSERA_RING", "0");
    assert_eq!(stdout(&succeeded(&mut cmd)), "hi\n");
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Parent and child of `fork` both work on Tessera at once, each checking every answer: had
/// the child used its parent's ring, answers would cross. Then `posix_spawn`, a
/// `subprocess` (glibc's vfork-based spawn) and a shell pipeline on Tessera, mid-workload.
#[test]
fn a_forked_child_never_answers_through_its_parents_ring() {
    let inst = Inst::start(2);
    let script = r#"
import os, subprocess, sys
def work(who, rounds):
    for n in range(rounds):
        p = f'/tessera/{who}-{n}'
        with open(p, 'wb') as f:
            f.write(b'x' * (n + 1 + (7 if who == 'child' else 0)))
        st = os.stat(p)
        want = n + 1 + (7 if who == 'child' else 0)
        assert st.st_size == want, (who, n, st.st_size, want)
        os.unlink(p)
        try:
            os.stat(p)
            raise SystemExit(f'{who}: {p} still there')
        except FileNotFoundError:
            pass
work('parent', 20)
pid = os.fork()
who = 'child' if pid == 0 else 'parent'
work(who, 300)
if pid == 0:
    os._exit(0)
_, status = os.waitpid(pid, 0)
assert status == 0, status
with open('/tessera/seen', 'wb') as f:
    f.write(b'y' * 2001)
spawned = os.posix_spawn('/bin/sh', ['sh', '-c', 'cat /tessera/seen | wc -c > /tessera/count'], os.environ)
_, status = os.waitpid(spawned, 0)
assert status == 0, status
assert open('/tessera/count').read().strip() == '2001'
r = subprocess.run(['cat', '/tessera/seen'], capture_output=True, check=True)
assert len(r.stdout) == 2001
work('parent', 20)
print('ok')
"#;
    let out = ok_under(&inst, 1, "python3", &["-c", script]);
    assert_eq!(stdout(&out).trim(), "ok");
}

/// Seconds on CPU of the live threads of `pid`.
fn cpu_secs(pid: i32) -> f64 {
    let ns: u64 = std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("the daemon's threads")
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    ns as f64 * 1e-9
}

#[test]
fn a_daemon_stops_watching_when_nobody_asks() {
    let inst = Inst::start(1);
    let c = inst.client(0);
    assert!(c.has_ring());
    for _ in 0..2000 {
        c.nop(false).unwrap();
    }
    // Right after a burst the daemon watched the ring; within its watch (50 µs) it sleeps.
    // Over the next second it may run its timers, but a daemon that kept watching would use
    // the whole second.
    let before = cpu_secs(inst.pid(0));
    let t = Instant::now();
    std::thread::sleep(Duration::from_secs(1));
    let used = cpu_secs(inst.pid(0)) - before;
    let share = used / t.elapsed().as_secs_f64();
    assert!(
        share < 0.1,
        "the idle daemon used {:.1}% of a core",
        share * 100.0
    );
}

/// Reads of another node's bytes come through the ring's answer area (16 MiB by default); a
/// client killed while one is on its way leaves the daemon and the other clients unharmed.
#[test]
fn a_client_killed_in_the_middle_of_a_remote_read_harms_nobody() {
    let inst = Inst::start(2);
    let len = 12u64 << 20;
    let want: Vec<u8> = (0..len).map(|i| (i * 7 % 253) as u8).collect();
    let w = inst.client(1);
    let mut f = w.create("/tessera/big").unwrap();
    f.write_at(&want, 0).unwrap();
    f.close().unwrap();

    let reader = inst.client(0);
    assert!(reader.has_ring());
    let read_all = || {
        let mut got = vec![0u8; len as usize];
        reader
            .open_read("/tessera/big")
            .unwrap()
            .read_exact_at(&mut got, 0)
            .unwrap();
        got
    };
    assert!(
        read_all() == want,
        "a remote read through the ring returned other bytes"
    );

    for round in 0..6u32 {
        let mut r = inst.rank(0);
        r.open("/tessera/big", tessera_client::Model::Session, false);
        r.send(&tessera_cli::script::Cmd::Read { off: 0, len });
        // Killed at different points of the read: at once, or after a few yields.
        for _ in 0..round * 200 {
            std::thread::yield_now();
        }
        r.kill9();
        assert!(
            read_all() == want,
            "after client {round} was killed mid-read"
        );
    }
    inst.wait_clients(0, 1);
    let out = inst.tessera(&["status"]);
    assert!(out.status.success(), "{out:?}");
}
