//! The peer authenticator: the handshake's proofs and the sealed frames between daemons.
//!
//! A genuine connector's `Hello` is encoded, damaged and checked by the acceptor's
//! `accept_hello`: it is accepted exactly when it decodes to the genuine message and names a
//! node of the instance; one made without the secret never is. A stream of genuine sealed
//! frames is damaged and read by the blocking reader and by the daemon's codec (fed in
//! chunks): every frame before the first damaged byte reads back exactly, and nothing at or
//! after it is accepted, at every secure level (`auth`, where file bytes are covered by a CRC
//! under the MAC; `integrity`; `privacy`), whatever part of a frame is file bytes. A reader
//! with another key, direction, nonce, node or level accepts nothing.

use super::damage::{Damage, Limit, common_prefix, damaged};
use super::feed::feed;
use arbitrary::{Arbitrary, Unstructured};
use tessera_daemon::peer::SealedCodec;
use tessera_proto::peer_auth::{
    ADMIN_NODE, Authenticator, Challenge, Direction, Hello, Security, accept_hello, read_sealed,
    write_sealed_bulk,
};
use tessera_proto::{PROTOCOL_VERSION, frame};

/// Who reads the stream without being its intended reader.
#[derive(Arbitrary, Debug)]
enum Stranger {
    Secret(Vec<u8>),
    OtherDirection,
    ConnectorNonce([u8; 32]),
    ConnectorNode(u32),
    Level(Level),
}

/// The secure levels (`none` checks nothing, by design).
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Level {
    Auth,
    Integrity,
    Privacy,
}

impl Level {
    fn security(self) -> Security {
        match self {
            Level::Auth => Security::Auth,
            Level::Integrity => Security::Integrity,
            Level::Privacy => Security::Privacy,
        }
    }
}

/// What an attacker on the wire does with whole genuine frames.
#[derive(Arbitrary, Debug)]
enum Replay {
    None,
    /// Sends frame `i` again right after itself.
    Repeat(u8),
    /// Leaves frame `i` out.
    Drop(u8),
    /// Sends frames `i` and `i + 1` in the other order.
    Swap(u8),
}

#[derive(Arbitrary, Debug)]
struct Input {
    secret: Vec<u8>,
    nodes: u32,
    acceptor: u32,
    connector: u32,
    acceptor_nonce: [u8; 32],
    connector_nonce: [u8; 32],
    hello_damage: Vec<Damage>,
    to_acceptor: bool,
    max: Limit,
    level: Level,
    /// Each frame's control part and its file bytes.
    bodies: Vec<(Vec<u8>, Vec<u8>)>,
    replay: Replay,
    damage: Vec<Damage>,
    chunks: Vec<u8>,
    stranger: Stranger,
}

/// The structured input `data` stands for.
pub fn describe(data: &[u8]) -> String {
    format!("{:#?}", Input::arbitrary_take_rest(Unstructured::new(data)))
}

pub fn run(data: &[u8]) {
    let Ok(input) = Input::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    let challenge = Challenge {
        version: PROTOCOL_VERSION,
        node: input.acceptor,
        nonce: input.acceptor_nonce,
        security: input.level.security(),
    };
    let auth = Authenticator::new(
        &input.secret,
        &challenge,
        input.connector,
        input.connector_nonce,
    );
    handshake(&input, &challenge, &auth);
    frames(&input, &challenge, &auth);
}

fn handshake(input: &Input, challenge: &Challenge, auth: &Authenticator) {
    let genuine = Hello {
        version: PROTOCOL_VERSION,
        from: input.connector,
        nonce: input.connector_nonce,
        proof: auth.connector_proof(),
    };
    let wire = damaged(&frame::encode(&genuine), &input.hello_damage);
    let member = input.connector < input.nodes || input.connector == ADMIN_NODE;
    if let Ok(hello) = frame::decode::<Hello>(&wire) {
        let accepted = accept_hello(&input.secret, challenge, &hello, input.nodes);
        if hello == genuine {
            assert_eq!(accepted.is_ok(), member, "{:?}", accepted.err());
        } else {
            assert!(accepted.is_err(), "a changed Hello was accepted: {hello:?}");
        }
    }
    // The acceptor's proof convinces only the connector it was made for.
    assert!(
        auth.check_proof(auth.acceptor_proof(), auth.acceptor_proof(), "peer")
            .is_ok()
    );
    assert!(
        auth.check_proof(auth.acceptor_proof(), auth.connector_proof(), "peer")
            .is_err()
    );
    if let Stranger::Secret(other) = &input.stranger
        && *other != input.secret
    {
        let forged = Authenticator::new(other, challenge, input.connector, input.connector_nonce);
        let hello = Hello {
            proof: forged.connector_proof(),
            ..genuine
        };
        assert!(accept_hello(&input.secret, challenge, &hello, input.nodes).is_err());
    }
}

fn frames(input: &Input, challenge: &Challenge, auth: &Authenticator) {
    let dir = if input.to_acceptor {
        Direction::ToAcceptor
    } else {
        Direction::ToConnector
    };
    let bodies: Vec<Vec<u8>> = input
        .bodies
        .iter()
        .map(|(c, b)| [&c[..], &b[..]].concat())
        .collect();
    let max = input.max.bytes(&bodies);
    let mut sealed: Vec<Vec<u8>> = Vec::new();
    for (seq, (control, bulk)) in input.bodies.iter().enumerate() {
        let mut f = Vec::new();
        write_sealed_bulk(&mut f, auth, dir, seq as u64, control, bulk).expect("writing to memory");
        sealed.push(f);
    }
    let stream = sealed.concat();
    let ends: Vec<usize> = sealed
        .iter()
        .scan(0, |end, f| {
            *end += f.len();
            Some(*end)
        })
        .collect();
    let mut sent = sealed.clone();
    let n = sent.len();
    match input.replay {
        Replay::Repeat(i) if n > 0 => {
            let i = i as usize % n;
            sent.insert(i + 1, sealed[i].clone());
        }
        Replay::Drop(i) if n > 0 => {
            sent.remove(i as usize % n);
        }
        Replay::Swap(i) if n > 1 => sent.swap(i as usize % (n - 1), i as usize % (n - 1) + 1),
        _ => {}
    }
    let now = damaged(&sent.concat(), &input.damage);
    let intact = common_prefix(&stream, &now);
    // What a reader must accept: the frames before the first damaged byte, up to the first
    // one above the maximum.
    let want: Vec<Vec<u8>> = bodies
        .iter()
        .zip(&ends)
        .take_while(|(b, end)| **end <= intact && b.len() <= max)
        .map(|(b, _)| b.clone())
        .collect();

    let mut r = &now[..];
    for (seq, w) in want.iter().enumerate() {
        let got = read_sealed(&mut r, auth, dir, seq as u64, max)
            .unwrap_or_else(|e| panic!("intact frame {seq} refused: {e}"));
        assert_eq!(&got, w, "frame {seq}");
    }
    if let Ok(got) = read_sealed(&mut r, auth, dir, want.len() as u64, max) {
        panic!(
            "frame {} accepted after damage or above the maximum: {} bytes",
            want.len(),
            got.len()
        );
    }

    let mut codec = SealedCodec::new(auth.clone(), dir, max);
    let fed = feed(&mut codec, &now, &input.chunks);
    assert_eq!(fed.frames, want, "the daemon's sealed codec");

    // A stranger accepts nothing, not even the undamaged stream.
    let (stranger, stranger_dir) = match &input.stranger {
        Stranger::Secret(s) if *s != input.secret => (
            Authenticator::new(s, challenge, input.connector, input.connector_nonce),
            dir,
        ),
        Stranger::OtherDirection => (
            auth.clone(),
            match dir {
                Direction::ToAcceptor => Direction::ToConnector,
                Direction::ToConnector => Direction::ToAcceptor,
            },
        ),
        Stranger::ConnectorNonce(n) if *n != input.connector_nonce => (
            Authenticator::new(&input.secret, challenge, input.connector, *n),
            dir,
        ),
        Stranger::ConnectorNode(c) if *c != input.connector => (
            Authenticator::new(&input.secret, challenge, *c, input.connector_nonce),
            dir,
        ),
        Stranger::Level(l) if l.security() != input.level.security() => {
            let other = Challenge {
                security: l.security(),
                ..challenge.clone()
            };
            (
                Authenticator::new(
                    &input.secret,
                    &other,
                    input.connector,
                    input.connector_nonce,
                ),
                dir,
            )
        }
        _ => return,
    };
    if !input.bodies.is_empty() {
        let got = read_sealed(&mut &stream[..], &stranger, stranger_dir, 0, usize::MAX);
        assert!(got.is_err(), "a stranger read a sealed frame");
        let mut codec = SealedCodec::new(stranger, stranger_dir, usize::MAX);
        let fed = feed(&mut codec, &stream, &input.chunks);
        assert!(fed.frames.is_empty() && fed.refused);
    }
}
