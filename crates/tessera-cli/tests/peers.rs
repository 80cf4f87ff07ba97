//! The peer port faces the network: connections must prove they hold the instance's secret
//! before anything is buffered or sent, and pooled connections to a restarted peer are found
//! dead before a request that must not be sent twice goes out on one.

mod common;

use common::Inst;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};
use tessera_core::placement::path_shard;

/// Short handshake deadlines and a small handshake limit, so the tests see them act.
const PEER_SETTINGS: [&str; 4] = [
    "--set",
    "peer_handshake_timeout_ms=500",
    "--set",
    "peer_max_handshakes=4",
];

fn peer_addr(inst: &Inst, node: u32) -> String {
    inst.addr(node)
}

/// Whether the daemon closes the connection within `within` (reads until EOF or reset,
/// discarding what it sent, such as its challenge).
fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within)).unwrap();
    let end = Instant::now() + within;
    let mut b = [0u8; 256];
    loop {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) if Instant::now() < end => continue,
            Ok(_) => return false,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => return false,
            Err(_) => return true,
        }
    }
}

/// A name whose directory entry lives on `node`.
fn name_on(node: u32, nodes: u32, tag: &str) -> String {
    (0..)
        .map(|i| format!("/{tag}-{i}"))
        .find(|p| path_shard(p, nodes) == node)
        .unwrap()
}

#[test]
fn unauthenticated_connections_are_closed_and_limited() {
    let inst = Inst::start_with(2, &PEER_SETTINGS);
    let addr = peer_addr(&inst, 1);
    // Idle after connecting: closed at the handshake deadline.
    let mut idle = TcpStream::connect(&addr).unwrap();
    assert!(
        closed_within(&mut idle, Duration::from_secs(10)),
        "an idle unauthenticated connection was kept"
    );
    // A frame header announcing 16 MiB before any proof: closed at once, nothing buffered.
    let mut big = TcpStream::connect(&addr).unwrap();
    big.write_all(&(16u32 << 20).to_be_bytes()).unwrap();
    let _ = big.write_all(&[0u8; 1024]);
    assert!(
        closed_within(&mut big, Duration::from_secs(3)),
        "a connection announcing a 16 MiB frame before authenticating was kept"
    );
    // Beyond the limit of connections still in their handshake, new ones are closed at once.
    let mut held: Vec<TcpStream> = (0..12)
        .map(|_| TcpStream::connect(&addr).unwrap())
        .collect();
    let refused = held
        .iter_mut()
        .map(|s| closed_within(s, Duration::from_millis(200)))
        .filter(|closed| *closed)
        .count();
    assert!(
        refused >= 8,
        "only {refused} of 12 pending handshakes were refused"
    );
    // Meanwhile the daemons still talk to each other.
    let c = inst.client(0);
    for i in 0..4 {
        c.mkdir(
            &format!("/tessera{}", name_on(1, 2, &format!("m{i}"))),
            0o755,
        )
        .unwrap();
    }
}

#[test]
fn a_restarted_peer_gets_requests_that_must_not_be_sent_twice() {
    let inst = Inst::start_with(2, &PEER_SETTINGS);
    let c = inst.client(0);
    // Warm node 0's pool of connections to node 1.
    for i in 0..4 {
        c.mkdir(
            &format!("/tessera{}", name_on(1, 2, &format!("warm{i}"))),
            0o755,
        )
        .unwrap();
    }
    inst.kill9(1);
    inst.restart(1);
    // Creating a directory whose entry is on node 1 cannot be resent blindly; the pooled
    // connections are dead: they must be noticed before it is sent.
    for i in 0..4 {
        let p = format!("/tessera{}", name_on(1, 2, &format!("after{i}")));
        c.mkdir(&p, 0o755)
            .unwrap_or_else(|e| panic!("mkdir {p} after node 1 restarted: {e}"));
    }
}

#[test]
fn a_squatter_on_a_dead_peers_port_learns_nothing() {
    let inst = Inst::start_with(2, &PEER_SETTINGS);
    let c = inst.client(0);
    let secret_name = name_on(1, 2, "squatted-secret-name");
    c.mkdir("/tessera/warm", 0o755).unwrap();
    let addr = peer_addr(&inst, 1);
    inst.kill9(1);
    // Node 0 notices (its pooled connections close, freeing the port of their ends).
    let e = c
        .mkdir(&format!("/tessera{}", name_on(1, 2, "down")), 0o755)
        .unwrap_err();
    assert!(
        matches!(
            e.errno,
            tessera_core::Errno::HostDown | tessera_core::Errno::ConnRefused
        ),
        "a mkdir on the dead daemon's shard: {e}"
    );
    // Another program takes the dead daemon's port and says what a daemon says first.
    let squatter = tessera_testkit::eventually_ok(
        Duration::from_secs(20),
        &format!("the dead daemon's port {addr} free"),
        || TcpListener::bind(&addr),
    );
    let heard = std::thread::spawn(move || {
        let mut all = Vec::new();
        squatter.set_nonblocking(false).unwrap();
        if let Ok((mut s, _)) = squatter.accept() {
            let ch = tessera_proto::peer_auth::Challenge {
                version: tessera_proto::PROTOCOL_VERSION,
                node: 1,
                nonce: [7; 32],
                security: Default::default(),
            };
            let _ = tessera_proto::frame::write_frame(&mut s, &tessera_proto::frame::encode(&ch));
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut b = [0u8; 4096];
            while let Ok(n) = s.read(&mut b) {
                if n == 0 {
                    break;
                }
                all.extend_from_slice(&b[..n]);
            }
        }
        all
    });
    let started = Instant::now();
    let e = c
        .mkdir(&format!("/tessera{secret_name}"), 0o755)
        .expect_err("a request answered by a squatter");
    let took = started.elapsed();
    let heard = heard.join().unwrap();
    assert!(
        !heard
            .windows(secret_name.len())
            .any(|w| w == secret_name.as_bytes()),
        "the squatter received the request ({} bytes)",
        heard.len()
    );
    assert!(
        took < Duration::from_secs(30),
        "the request waited {took:?}"
    );
    assert!(e.message.contains("node 1"), "{e}");
}
