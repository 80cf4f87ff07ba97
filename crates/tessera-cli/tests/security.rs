//! Malformed, oversized and unauthenticated frames are refused without harm to the daemon.

mod common;

use common::Inst;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::Duration;
use tessera_client::Errno;
use tessera_proto::frame;
use tessera_proto::peer_auth::{
    Authenticator, Challenge, Direction, Hello, Welcome, read_sealed, write_sealed,
};
use tessera_proto::{
    Answer, Attach, Bound, Detach, PeerRequest, Ping, Query, Rename, Request, Reserve, Stat,
};

fn alive(inst: &Inst) {
    for n in 0..inst.nodes {
        inst.client(n).status().expect("daemon still serves");
    }
}

/// The next answer on `s`, decoded as an answer of reply type `T` (an error answer decodes
/// as any type's).
fn read_answer<T: serde::de::DeserializeOwned>(s: &mut UnixStream) -> Option<Answer<T>> {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let body = frame::read_frame(s, 1 << 20).ok()?;
    frame::split_message::<Answer<T>>(&body)
        .ok()
        .map(|(a, _)| a)
}

/// The error of the next answer on `s` (`None` if it is no error answer).
fn read_error(s: &mut UnixStream) -> Option<tessera_core::FsError> {
    read_answer::<()>(s)?.err()
}

#[test]
fn malformed_client_frames_are_refused() {
    let inst = Inst::start(2);
    let sock = inst.socket(0);
    // Garbage instead of a hello.
    let mut s = UnixStream::connect(&sock).unwrap();
    frame::write_frame(&mut s, &[0xff, 0xfe, 0xfd, 0x00]).unwrap();
    match read_error(&mut s) {
        Some(e) => assert_eq!(e.errno, Errno::Proto),
        None => panic!("expected EPROTO"),
    }
    // A valid hello, then garbage.
    let mut s = UnixStream::connect(&sock).unwrap();
    let hello = Request::from(tessera_proto::Hello {
        version: tessera_proto::PROTOCOL_VERSION,
        pid: 1,
        resume: None,
        ring: false,
    });
    frame::write_frame(&mut s, &frame::encode(&hello)).unwrap();
    assert!(matches!(read_answer::<Bound>(&mut s), Some(Ok(_))));
    frame::write_frame(&mut s, &[42; 100]).unwrap();
    assert!(read_error(&mut s).is_some());
    // A frame claiming 4 GiB.
    let mut s = UnixStream::connect(&sock).unwrap();
    frame::write_frame(&mut s, &frame::encode(&hello)).unwrap();
    assert!(matches!(read_answer::<Bound>(&mut s), Some(Ok(_))));
    s.write_all(&u32::MAX.to_be_bytes()).unwrap();
    // The daemon may already have answered and hung up: this write can fail.
    let _ = s.write_all(&[0; 64]);
    match read_error(&mut s) {
        Some(e) => assert_eq!(e.errno, Errno::MsgSize, "{e}"),
        None => panic!("expected EMSGSIZE"),
    }
    // Truncated frame, then hang up.
    let mut s = UnixStream::connect(&sock).unwrap();
    s.write_all(&[0, 0, 1, 0, 1, 2, 3]).unwrap();
    drop(s);
    alive(&inst);
}

fn peer_addr(inst: &Inst, node: u32) -> String {
    inst.addr(node)
}

fn challenge(s: &mut TcpStream) -> Challenge {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    frame::decode(&frame::read_frame(s, 1 << 20).unwrap()).unwrap()
}

/// Whether the daemon closed the connection (EOF or reset) instead of answering.
fn closed(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 1];
    matches!(s.read(&mut b), Ok(0) | Err(_))
}

/// The connector's side of the handshake, proving with `secret` as node 0; the daemon's
/// welcome is checked.
fn handshake(addr: &str, secret: &[u8]) -> Option<(TcpStream, Authenticator)> {
    let mut s = TcpStream::connect(addr).unwrap();
    let ch = challenge(&mut s);
    let nonce: [u8; 32] = rand::random();
    let auth = Authenticator::new(secret, &ch, 0, nonce);
    let hello = Hello {
        version: tessera_proto::PROTOCOL_VERSION,
        from: 0,
        nonce,
        proof: auth.connector_proof(),
    };
    frame::write_frame(&mut s, &frame::encode(&hello)).unwrap();
    let welcome: Welcome = frame::decode(&frame::read_frame(&mut s, 1 << 10).ok()?).ok()?;
    auth.check_proof(auth.acceptor_proof(), welcome.proof, "the daemon")
        .expect("a genuine daemon proves itself");
    Some((s, auth))
}

#[test]
fn unauthenticated_peer_frames_are_refused() {
    let inst = Inst::start(2);
    let addr = peer_addr(&inst, 1);
    let ping = frame::encode(&PeerRequest::from(Ping));
    let secret = inst.layout.load_secret().unwrap();

    // Wrong secret: no welcome, the connection is closed.
    assert!(
        handshake(&addr, b"not the instance secret").is_none(),
        "a connector with a forged proof was welcomed"
    );

    // Right secret: a genuine answer.
    let (mut s, auth) = handshake(&addr, &secret).expect("welcomed");
    let mut recorded = Vec::new();
    write_sealed(&mut recorded, &auth, Direction::ToAcceptor, 0, &ping).unwrap();
    s.write_all(&recorded).unwrap();
    let body =
        read_sealed(&mut s, &auth, Direction::ToConnector, 0, 1 << 20).expect("a genuine answer");
    assert_eq!(frame::decode::<Answer<u32>>(&body).unwrap(), Ok(1));
    // The same frame again on this connection is out of sequence.
    s.write_all(&recorded).unwrap();
    assert!(closed(&mut s), "a replayed frame was answered");
    // Replayed on another authenticated connection (other nonces): refused.
    let (mut s2, _) = handshake(&addr, &secret).expect("welcomed");
    s2.write_all(&recorded).unwrap();
    assert!(
        closed(&mut s2),
        "a frame replayed on another connection was answered"
    );

    // Garbage instead of a hello, and an oversized length.
    let mut s = TcpStream::connect(&addr).unwrap();
    let _ = challenge(&mut s);
    frame::write_frame(&mut s, b"definitely not postcard").unwrap();
    assert!(closed(&mut s));
    let mut s = TcpStream::connect(&addr).unwrap();
    let _ = challenge(&mut s);
    s.write_all(&u32::MAX.to_be_bytes()).unwrap();
    assert!(closed(&mut s));
    alive(&inst);
}

/// Hostile but well-formed requests are refused with an error, and the daemon keeps serving.
fn lock_run(start: u64, len: u64, stride: u64, count: u64) -> tessera_core::lock_list::LockRun {
    tessera_core::lock_list::LockRun {
        run: tessera_core::Run {
            start,
            len,
            stride,
            count,
        },
        kind: tessera_core::locks::LockKind::Exclusive,
    }
}

#[test]
fn hostile_requests_get_errors_not_crashes() {
    use tessera_core::Run;
    let inst = Inst::start(2);
    let sock = inst.socket(0);
    let mut s = UnixStream::connect(&sock).unwrap();
    let hello = Request::from(tessera_proto::Hello {
        version: tessera_proto::PROTOCOL_VERSION,
        pid: 1,
        resume: None,
        ring: false,
    });
    frame::write_frame(&mut s, &frame::encode(&hello)).unwrap();
    assert!(matches!(read_answer::<Bound>(&mut s), Some(Ok(_))));
    let c = inst.client(0);
    let mut f = c.create("/tessera/victim").unwrap();
    f.write_at(b"data", 0).unwrap();
    f.close().unwrap();
    let ino = c.stat("/tessera/victim").unwrap().ino;
    let owner = tessera_core::Owner {
        node: 0,
        client: c.identity().1,
    };
    let hostile = vec![
        Request::from(Attach {
            ino,
            runs: vec![Run {
                start: 0,
                len: 1,
                stride: 1 << 40,
                count: 1 << 23,
            }],
            upto: None,
            fences: vec![],
        }),
        Request::from(Attach {
            ino,
            runs: vec![Run::single(0, 1 << 55)],
            upto: None,
            fences: vec![],
        }),
        Request::from(Attach {
            ino,
            runs: vec![Run {
                start: 0,
                len: 1,
                stride: 2,
                count: 1 << 25,
            }],
            upto: None,
            fences: vec![],
        }),
        Request::from(Attach {
            ino: u64::MAX,
            runs: vec![Run::single(0, 1)],
            upto: None,
            fences: vec![],
        }),
        Request::from(tessera_proto::Read {
            ino,
            parts: vec![(owner, vec![(0, u64::MAX), (0, 2)])],
        }),
        Request::from(tessera_proto::Read {
            ino,
            parts: vec![(owner, vec![(5, 1)])],
        }),
        Request::from(Reserve { bytes: u64::MAX }),
        Request::from(Query {
            ino,
            start: 0,
            end: u64::MAX,
        }),
        Request::from(Stat {
            path: format!("/{}", "€".repeat(100)),
        }),
        Request::from(Rename {
            from: "/victim".into(),
            to: "/".into(),
        }),
        // A forged fencing token: no such lock, so the attach is refused.
        Request::from(Attach {
            ino,
            runs: vec![Run::single(0, 4)],
            upto: None,
            fences: vec![12345],
        }),
        // List locks: overlapping pieces, pieces past the largest file, no runs, too many
        // runs, and the unlock of a token never granted.
        Request::from(tessera_proto::ListLock {
            ino,
            seq: 1,
            runs: vec![lock_run(0, 10, 5, 3)],
            wait: true,
            pid: 1,
        }),
        Request::from(tessera_proto::ListLock {
            ino,
            seq: 2,
            runs: vec![lock_run(0, 1, 1 << 40, 1 << 23)],
            wait: true,
            pid: 1,
        }),
        Request::from(tessera_proto::ListLock {
            ino,
            seq: 3,
            runs: vec![],
            wait: true,
            pid: 1,
        }),
        Request::from(tessera_proto::ListLock {
            ino,
            seq: 4,
            runs: vec![lock_run(0, 1, 2, 1); tessera_core::lock_list::MAX_LOCK_RUNS + 1],
            wait: true,
            pid: 1,
        }),
        Request::from(tessera_proto::ListUnlock { ino, token: 7 }),
    ];
    for req in hostile {
        frame::write_frame(&mut s, &frame::encode(&req)).unwrap();
        // An error, or (the query of everything) the file's owners.
        match read_answer::<tessera_proto::Owners>(&mut s) {
            Some(Err(_)) => {}
            Some(Ok(_)) if req.name() == "query" => {}
            other => panic!("{req:?} answered {other:?}"),
        }
    }
    alive(&inst);
    // The victim's log is still readable (no lock was poisoned).
    let mut r = inst.client(1).open_read("/tessera/victim").unwrap();
    let mut buf = [0u8; 4];
    r.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"data");
}

/// A read naming the daemon's own node as owner for more than one remote piece (2 MiB) is
/// answered with the bytes, not spun on forever.
#[test]
fn large_local_reads_are_answered() {
    let inst = Inst::start(2);
    let c = inst.client(0);
    let len: u64 = 5 << 20;
    let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    let mut f = c.create("/tessera/big").unwrap();
    f.write_at(&data, 0).unwrap();
    f.commit().unwrap();
    let ino = c.stat("/tessera/big").unwrap().ino;
    let owner = tessera_core::Owner {
        node: 0,
        client: c.identity().1,
    };
    let mut raw = common::RawClient::hello(&inst, 0, None).unwrap();
    // One range larger than a piece, then several ranges that together exceed one.
    for ranges in [
        vec![(0, len)],
        vec![(0, 1 << 20), (1 << 20, 3 << 20), (3 << 20, len)],
    ] {
        let (resp, bytes) = raw
            .call(tessera_proto::Read {
                ino,
                parts: vec![(owner, ranges.clone())],
            })
            .unwrap_or_else(|e| panic!("read of {ranges:?} from the daemon's own node: {e}"));
        assert_eq!(resp, Ok(tessera_proto::Data { len }), "{ranges:?}");
        assert!(bytes == data, "{ranges:?}: wrong bytes");
    }
    alive(&inst);
}

/// Requests a well-behaved client never sends, crafted by a program of the same user, are
/// refused with a clear error and break nothing for others.
#[test]
fn crafted_requests_are_refused() {
    let inst = Inst::start(2);
    let c = inst.client(0);
    let mut f = c.create("/tessera/shared").unwrap();
    f.write_at(b"0123456789", 0).unwrap();
    f.commit().unwrap();
    let ino = c.stat("/tessera/shared").unwrap().ino;
    let live = c.identity().1;

    // Resuming the id of a client that is still connected.
    match common::RawClient::hello(&inst, 0, Some(live)) {
        Ok(r) => panic!(
            "hello resuming live client {live} was accepted as {}",
            r.client
        ),
        Err(e) => assert!(e.contains("in use"), "{e}"),
    }

    let mut raw = common::RawClient::hello(&inst, 0, None).unwrap();
    fn refused<T: std::fmt::Debug>(resp: &Answer<T>, errno: Errno, what: &str) {
        match resp {
            Err(e) => assert_eq!(e.errno, errno, "{what}: {e}"),
            Ok(r) => panic!("{what} answered {r:?}"),
        }
    }
    // Attaching bytes this client never wrote would send others' reads to a log without them.
    let (resp, _) = raw
        .call(Attach {
            ino,
            runs: vec![tessera_core::Run::single(0, 8)],
            upto: None,
            fences: vec![],
        })
        .unwrap();
    refused(&resp, Errno::Inval, "attach of never-written bytes");
    // Inverted ranges.
    let (resp, _) = raw
        .call(Detach {
            ino,
            start: 9,
            end: 3,
        })
        .unwrap();
    refused(&resp, Errno::Inval, "inverted detach");
    let (resp, _) = raw
        .call(Query {
            ino,
            start: 9,
            end: 3,
        })
        .unwrap();
    refused(&resp, Errno::Inval, "inverted query");

    // Others still read the file and flush it.
    let other = inst.client(1);
    let mut r = other.open_read("/tessera/shared").unwrap();
    let mut buf = [0u8; 10];
    r.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"0123456789");
    assert_eq!(other.flush_path("/tessera/shared").unwrap(), 10);
    alive(&inst);
}

/// A file of `len` patterned bytes written on node 1 and published; returns its bytes.
fn written_on_node_1(inst: &Inst, path: &str, len: usize) -> Vec<u8> {
    let bytes: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
    let c = inst.client(1);
    let mut f = c.create(path).unwrap();
    f.write_at(&bytes, 0).unwrap();
    f.close().unwrap();
    bytes
}

/// The first `len` bytes of `path`, read by `c`.
fn read_whole(c: &tessera_client::Client, path: &str, len: usize) -> Vec<u8> {
    let mut got = vec![0u8; len];
    c.open_read(path)
        .unwrap()
        .read_exact_at(&mut got, 0)
        .unwrap();
    got
}

#[test]
fn every_security_level_carries_remote_reads_and_status_names_it() {
    for level in ["auth", "integrity", "privacy"] {
        let inst = Inst::start_with(2, &["--set", &format!("security={level}")]);
        let want = written_on_node_1(&inst, "/tessera/levels", 3 << 20);
        let got = read_whole(&inst.client(0), "/tessera/levels", want.len());
        assert!(
            got == want,
            "a remote read under {level} returned other bytes"
        );
        let out = inst.tessera(&["status"]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains(&format!("peer security: {level}")),
            "status does not name the level {level}:\n{text}"
        );
    }
}

#[test]
fn security_none_is_refused_by_a_build_without_insecure_bench() {
    let why = |out: &std::process::Output| {
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(!out.status.success(), "security = none was accepted");
        assert!(
            err.contains("insecure-bench") && err.contains("\"auth\""),
            "the refusal does not say why and what to use: {err}"
        );
    };
    // Asked for at start.
    let root = tessera_cli::instance::temp_dir("tessera-test").unwrap();
    let start = tessera_testkit::instance::StartLine::new(env!("CARGO_BIN_EXE_tessera"), &root)
        .daemons(1)
        .args(["--set", "security=none"])
        .command()
        .output()
        .unwrap();
    why(&start);
    // Written into instance.toml by hand: the daemon refuses it.
    let layout = common::fresh_instance(&root.join("edited"));
    let mut cfg = layout.load_config().unwrap();
    cfg.security = tessera_proto::peer_auth::Security::None;
    std::fs::remove_file(layout.config_path()).unwrap();
    layout.save_config(&cfg).unwrap();
    why(&common::tessera_in(&layout, &["serve", "--node", "0"]));
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn file_bytes_damaged_in_flight_fail_the_read_with_eio_naming_the_node() {
    let inst = Inst::start(2);
    let want = written_on_node_1(&inst, "/tessera/damaged", 1 << 20);
    inst.kill9(1);
    inst.restart_with(1, &[("TESSERA_FAILPOINT", "peer-corrupt-bulk")]);
    let c = inst.client(0);
    let mut got = vec![0u8; want.len()];
    let e = c
        .open_read("/tessera/damaged")
        .unwrap()
        .read_exact_at(&mut got, 0)
        .unwrap_err();
    assert_eq!(e.errno, Errno::Io, "{e}");
    assert!(
        e.message.contains("node 1") && e.message.contains("damaged in transit"),
        "the error does not name the node and the damage: {e}"
    );
    // The daemons carry on; without the failpoint the same read returns the bytes.
    alive(&inst);
    inst.kill9(1);
    inst.restart(1);
    let got = read_whole(&c, "/tessera/damaged", want.len());
    assert!(
        got == want,
        "the read after the damage returned other bytes"
    );
}
