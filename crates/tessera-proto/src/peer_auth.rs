//! How daemons prove to each other that they hold the instance's secret, and how every frame
//! between them is authenticated.
//!
//! **Handshake** (mutual, before anything else; frames of at most [`HANDSHAKE_MAX`] bytes):
//!
//! ```text
//! acceptor  -> connector  Challenge { version, node, nonce_a }
//! connector -> acceptor   Hello     { version, from, nonce_c, proof_c }
//! acceptor  -> connector  Welcome   { proof_a }
//! ```
//!
//! Each proof is a keyed BLAKE3 (key derived from the secret) over a role label, both nonces
//! and both node ids. The acceptor checks `proof_c` before it answers (a connection that does
//! not prove itself within the handshake deadline is closed, and only so many may be in their
//! handshake at once); the connector checks `proof_a` before it sends a request, so a program
//! that took a dead daemon's port learns nothing and is left at once. Both nonces are fresh,
//! so a recorded conversation cannot be replayed in either direction.
//!
//! **Sealed frames** (after the handshake):
//!
//! ```text
//! header (28 B)  length u32 BE | sequence u64 LE | tag [u8; 16]   tag over (dir, seq, length)
//! body (length)
//! mac (32 B)     keyed BLAKE3 over (dir, seq, body)
//! ```
//!
//! The receiver checks the header's tag before it reads the body, so a frame's length is
//! trusted only once authenticated: nobody without the secret makes a daemon buffer a large
//! frame. The direction is part of every MAC (a response cannot pose as a request) and the
//! sequence number must be the next expected one (no replay or reordering within a
//! connection). BLAKE3 rather than HMAC-SHA256 because every byte read from another node
//! passes through the MAC twice, and keyed BLAKE3 runs several times faster.

use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use tessera_core::{Errno, FsError};

/// The node id the `tessera` command connects as (for status and stop): it holds the secret,
/// so it is trusted as a daemon is, but it is no node of the instance.
pub const ADMIN_NODE: u32 = u32::MAX;

/// Largest handshake frame: a handshake message is far smaller.
pub const HANDSHAKE_MAX: usize = 512;
/// Bytes of a sealed frame's header.
pub const HEADER_LEN: usize = 4 + 8 + 16;
/// Bytes of a sealed frame's body MAC.
pub const MAC_LEN: usize = 32;

/// First frame of a daemon-to-daemon connection, sent by the accepting side.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Challenge {
    pub version: u32,
    pub node: u32,
    pub nonce: [u8; 32],
}

/// The connecting daemon's answer: who it is, its nonce, and its proof.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub version: u32,
    pub from: u32,
    pub nonce: [u8; 32],
    pub proof: [u8; 32],
}

/// The accepting daemon's proof, sent once it has checked the connector's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Welcome {
    pub proof: [u8; 32],
}

/// Which way a frame travels; part of the MAC so a response cannot pose as a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    ToAcceptor = 0,
    ToConnector = 1,
}

/// Context string for deriving the MAC key from the instance secret.
const KEY_CONTEXT: &str = "tessera 2026 peer authentication v2";

/// The authentication of one connection: the instance key and both nonces.
#[derive(Clone)]
pub struct Authenticator {
    key: [u8; 32],
    nonces: [u8; 64],
    /// (acceptor node, connector node)
    nodes: (u32, u32),
}

impl Authenticator {
    /// For the connection that `challenge` opened and `connector` (with `connector_nonce`)
    /// answered.
    pub fn new(
        secret: &[u8],
        challenge: &Challenge,
        connector: u32,
        connector_nonce: [u8; 32],
    ) -> Self {
        let mut nonces = [0u8; 64];
        nonces[..32].copy_from_slice(&challenge.nonce);
        nonces[32..].copy_from_slice(&connector_nonce);
        Authenticator {
            key: blake3::derive_key(KEY_CONTEXT, secret),
            nonces,
            nodes: (challenge.node, connector),
        }
    }

    fn hasher(&self, label: &[u8]) -> blake3::Hasher {
        let mut h = blake3::Hasher::new_keyed(&self.key);
        h.update(label);
        h.update(&self.nonces);
        h.update(&self.nodes.0.to_le_bytes());
        h.update(&self.nodes.1.to_le_bytes());
        h
    }

    /// The connector's proof (in its [`Hello`]).
    pub fn connector_proof(&self) -> [u8; 32] {
        *self.hasher(b"connector").finalize().as_bytes()
    }

    /// The acceptor's proof (in its [`Welcome`]).
    pub fn acceptor_proof(&self) -> [u8; 32] {
        *self.hasher(b"acceptor").finalize().as_bytes()
    }

    /// Checks a proof in constant time.
    pub fn check_proof(&self, expected: [u8; 32], got: [u8; 32], who: &str) -> Result<(), FsError> {
        if blake3::Hash::from_bytes(expected) == blake3::Hash::from_bytes(got) {
            Ok(())
        } else {
            Err(FsError::new(
                Errno::Access,
                format!("{who} does not hold this instance's secret (its proof is wrong)"),
            ))
        }
    }

    fn header_tag(&self, dir: Direction, seq: u64, len: u32) -> [u8; 16] {
        let mut h = self.hasher(b"header");
        h.update(&[dir as u8]);
        h.update(&seq.to_le_bytes());
        h.update(&len.to_le_bytes());
        let mut tag = [0u8; 16];
        tag.copy_from_slice(&h.finalize().as_bytes()[..16]);
        tag
    }

    /// The header of a frame of `len` body bytes.
    pub fn seal_header(&self, dir: Direction, seq: u64, len: u32) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h[0..4].copy_from_slice(&len.to_be_bytes());
        h[4..12].copy_from_slice(&seq.to_le_bytes());
        h[12..].copy_from_slice(&self.header_tag(dir, seq, len));
        h
    }

    /// Checks a frame header (tag, expected sequence number, size limit); returns the body
    /// length it announces.
    pub fn open_header(
        &self,
        dir: Direction,
        expected_seq: u64,
        header: &[u8; HEADER_LEN],
        max: usize,
    ) -> Result<usize, FsError> {
        let len = u32::from_be_bytes(header[0..4].try_into().expect("4 bytes"));
        let seq = u64::from_le_bytes(header[4..12].try_into().expect("8 bytes"));
        let tag: [u8; 16] = header[12..HEADER_LEN].try_into().expect("16 bytes");
        // Constant-time comparison of the tag.
        let want = self.header_tag(dir, seq, len);
        let diff = want.iter().zip(tag).fold(0u8, |d, (a, b)| d | (a ^ b));
        if diff != 0 {
            return Err(FsError::new(
                Errno::Access,
                "frame authentication failed: the peer does not hold this instance's secret",
            ));
        }
        if seq != expected_seq {
            return Err(FsError::new(
                Errno::Proto,
                format!(
                    "frame out of sequence (got {seq}, expected {expected_seq}): replay or reorder refused"
                ),
            ));
        }
        if len as usize > max {
            return Err(FsError::new(
                Errno::MsgSize,
                format!("frame of {len} bytes exceeds the maximum of {max}"),
            ));
        }
        Ok(len as usize)
    }

    /// The MAC of a frame whose body is the concatenation of `body`.
    pub fn body_mac(&self, dir: Direction, seq: u64, body: &[&[u8]]) -> [u8; MAC_LEN] {
        let mut h = self.hasher(b"body");
        h.update(&[dir as u8]);
        h.update(&seq.to_le_bytes());
        for part in body {
            h.update(part);
        }
        *h.finalize().as_bytes()
    }

    /// Checks a frame body against its MAC (in constant time).
    pub fn check_body(
        &self,
        dir: Direction,
        seq: u64,
        body: &[u8],
        mac: &[u8],
    ) -> Result<(), FsError> {
        let mac: [u8; MAC_LEN] = mac
            .try_into()
            .map_err(|_| FsError::new(Errno::Proto, "sealed frame shorter than its MAC"))?;
        if blake3::Hash::from_bytes(self.body_mac(dir, seq, &[body]))
            == blake3::Hash::from_bytes(mac)
        {
            Ok(())
        } else {
            Err(FsError::new(
                Errno::Access,
                "frame authentication failed: the peer does not hold this instance's secret",
            ))
        }
    }
}

/// The acceptor's check of a connector's [`Hello`] to `challenge`: it speaks this protocol,
/// names a node of the instance (one of `nodes`, or [`ADMIN_NODE`]) and proves it holds
/// `secret`. Returns the authentication of the connection.
pub fn accept_hello(
    secret: &[u8],
    challenge: &Challenge,
    hello: &Hello,
    nodes: u32,
) -> Result<Authenticator, FsError> {
    if hello.version != crate::PROTOCOL_VERSION || (hello.from >= nodes && hello.from != ADMIN_NODE)
    {
        return Err(FsError::new(
            Errno::Proto,
            format!(
                "a peer says it is node {} speaking protocol {} (this instance: nodes 0..{nodes}, protocol {})",
                hello.from,
                hello.version,
                crate::PROTOCOL_VERSION
            ),
        ));
    }
    let auth = Authenticator::new(secret, challenge, hello.from, hello.nonce);
    auth.check_proof(auth.connector_proof(), hello.proof, "a connecting peer")?;
    Ok(auth)
}

/// Writes one sealed frame (blocking; the daemons use their own vectored writer).
pub fn write_sealed(
    w: &mut impl Write,
    auth: &Authenticator,
    dir: Direction,
    seq: u64,
    body: &[u8],
) -> std::io::Result<()> {
    let len =
        u32::try_from(body.len()).map_err(|_| std::io::Error::other("frame larger than 4 GiB"))?;
    let mut out = Vec::with_capacity(HEADER_LEN + body.len() + MAC_LEN);
    out.extend_from_slice(&auth.seal_header(dir, seq, len));
    out.extend_from_slice(body);
    out.extend_from_slice(&auth.body_mac(dir, seq, &[body]));
    w.write_all(&out)
}

/// Reads and checks one sealed frame (blocking); the body is read only after its header is
/// authenticated.
pub fn read_sealed(
    r: &mut impl Read,
    auth: &Authenticator,
    dir: Direction,
    seq: u64,
    max: usize,
) -> Result<Vec<u8>, FsError> {
    let io = |e: std::io::Error| FsError::new(Errno::Proto, format!("reading a frame: {e}"));
    let mut header = [0u8; HEADER_LEN];
    r.read_exact(&mut header).map_err(io)?;
    let len = auth.open_header(dir, seq, &header, max)?;
    let mut body = vec![0u8; len + MAC_LEN];
    r.read_exact(&mut body).map_err(io)?;
    let mac = body.split_off(len);
    auth.check_body(dir, seq, &body, &mac)?;
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (Authenticator, Challenge) {
        let ch = Challenge {
            version: 3,
            node: 1,
            nonce: [7; 32],
        };
        (Authenticator::new(b"secret", &ch, 0, [9; 32]), ch)
    }

    #[test]
    fn proofs_bind_the_secret_the_nonces_and_the_roles() {
        let (a, ch) = pair();
        assert_ne!(a.connector_proof(), a.acceptor_proof());
        let other = Authenticator::new(b"other", &ch, 0, [9; 32]);
        assert!(
            a.check_proof(a.connector_proof(), other.connector_proof(), "peer")
                .is_err()
        );
        let replayed = Authenticator::new(b"secret", &ch, 0, [8; 32]);
        assert_ne!(a.connector_proof(), replayed.connector_proof());
        let other_node = Authenticator::new(b"secret", &ch, 2, [9; 32]);
        assert_ne!(a.connector_proof(), other_node.connector_proof());
    }

    #[test]
    fn sealed_frames_detect_tamper_replay_wrong_key_and_direction() {
        let (a, ch) = pair();
        let mut wire = Vec::new();
        write_sealed(&mut wire, &a, Direction::ToAcceptor, 3, b"body").unwrap();
        assert_eq!(
            read_sealed(&mut &wire[..], &a, Direction::ToAcceptor, 3, 1 << 20).unwrap(),
            b"body"
        );
        let e = |w: &[u8], a: &Authenticator, dir, seq| {
            read_sealed(&mut &w[..], a, dir, seq, 1 << 20)
                .unwrap_err()
                .errno
        };
        assert_eq!(e(&wire, &a, Direction::ToAcceptor, 4), Errno::Proto);
        assert_eq!(e(&wire, &a, Direction::ToConnector, 3), Errno::Access);
        let mut t = wire.clone();
        t[HEADER_LEN + 1] ^= 1;
        assert_eq!(e(&t, &a, Direction::ToAcceptor, 3), Errno::Access);
        let mut big = wire.clone();
        big[0] = 0x7f; // a larger length: the header's tag no longer matches
        assert_eq!(e(&big, &a, Direction::ToAcceptor, 3), Errno::Access);
        let other = Authenticator::new(b"other", &ch, 0, [9; 32]);
        assert_eq!(e(&wire, &other, Direction::ToAcceptor, 3), Errno::Access);
        assert_eq!(
            read_sealed(&mut &wire[..], &a, Direction::ToAcceptor, 3, 2)
                .unwrap_err()
                .errno,
            Errno::MsgSize
        );
    }
}
