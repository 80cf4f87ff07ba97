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
//! **Sealed frames** (after the handshake), at the instance's [`Security`] level:
//!
//! ```text
//! header (32 B)  length u32 BE | bulk u32 LE | sequence u64 LE | tag [u8; 16]
//!                tag over (dir, seq, length, bulk)
//! body (length)  control (length - bulk bytes), then bulk (file bytes)
//! tail           auth:      crc32c(bulk) u32 LE | mac [u8; 32] over (dir, seq, control, crc)
//!                integrity: mac [u8; 32] over (dir, seq, body)
//!                privacy:   the body is AES-256-GCM ciphertext; tail = its tag [u8; 16]
//!                none:      nothing (only in builds with the `insecure-bench` feature)
//! ```
//!
//! The receiver checks the header's tag before it reads the body, so a frame's length is
//! trusted only once authenticated: nobody without the secret makes a daemon buffer a large
//! frame. The direction is part of every MAC (a response cannot pose as a request) and the
//! sequence number must be the next expected one (no replay or reordering within a
//! connection). BLAKE3 rather than HMAC-SHA256 for the MACs because keyed BLAKE3 runs several
//! times faster. Under `auth` the file bytes of a frame are covered by a CRC32C only (the
//! checksum itself is under the MAC): it catches corruption at 10+ GB/s, where a MAC over every
//! byte, twice per remote read, was the largest cost of a remote byte; it does not stop an
//! attacker already on the path who rewrites bulk bytes and their CRC, which `integrity` does.

use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use tessera_core::{Errno, FsError};

/// The node id the `tessera` command connects as (for status and stop): it holds the secret,
/// so it is trusted as a daemon is, but it is no node of the instance.
pub const ADMIN_NODE: u32 = u32::MAX;

/// Largest handshake frame: a handshake message is far smaller.
pub const HANDSHAKE_MAX: usize = 512;
/// Bytes of a sealed frame's header.
pub const HEADER_LEN: usize = 4 + 4 + 8 + 16;
/// Bytes of a sealed frame's body MAC.
pub const MAC_LEN: usize = 32;
/// Bytes of the AES-GCM tag that ends a frame under `privacy`.
pub const GCM_TAG_LEN: usize = 16;

/// What the peer protocol protects, chosen per instance in `instance.toml` (`security`), as
/// Lustre's shared-secret modes are. Every level authenticates every connection with the
/// instance secret and MACs every frame's header.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Security {
    /// No MAC and no checksum on frame bodies: for measuring what the others cost. Only a
    /// daemon built with the `insecure-bench` feature accepts it.
    None,
    /// The default: a MAC on every control message; file bytes covered by a CRC32C that the
    /// MAC covers, checked before any byte reaches a client.
    #[default]
    Auth,
    /// A MAC over every byte, file bytes included.
    Integrity,
    /// Every byte encrypted and authenticated (AES-256-GCM).
    Privacy,
}

impl Security {
    /// The name used in `instance.toml` and by `tessera status`.
    pub fn name(self) -> &'static str {
        match self {
            Security::None => "none",
            Security::Auth => "auth",
            Security::Integrity => "integrity",
            Security::Privacy => "privacy",
        }
    }

    /// Bytes that follow a sealed frame's body.
    pub fn tail_len(self) -> usize {
        match self {
            Security::None => 0,
            Security::Auth => 4 + MAC_LEN,
            Security::Integrity => MAC_LEN,
            Security::Privacy => GCM_TAG_LEN,
        }
    }
}

impl std::fmt::Display for Security {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A frame sealed for sending: its header, its body when sealing replaced it (encrypted
/// under `privacy`; otherwise the caller sends its own parts), and its tail.
pub struct Sealed {
    pub header: [u8; HEADER_LEN],
    pub body: Option<Vec<u8>>,
    pub tail: Vec<u8>,
}

/// First frame of a daemon-to-daemon connection, sent by the accepting side.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Challenge {
    pub version: u32,
    pub node: u32,
    pub nonce: [u8; 32],
    /// The acceptor's security level: both ends must use the same.
    pub security: Security,
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
const KEY_CONTEXT: &str = "tessera 2026 peer authentication v3";

/// The authentication of one connection: the instance key, both nonces, and the level.
#[derive(Clone)]
pub struct Authenticator {
    key: [u8; 32],
    nonces: [u8; 64],
    /// (acceptor node, connector node)
    nodes: (u32, u32),
    level: Security,
    /// The connection's cipher under `privacy`: its key is derived from the instance key,
    /// both nonces and both nodes, so no two connections share one.
    cipher: Option<aes_gcm::Aes256Gcm>,
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
        let mut auth = Authenticator {
            key: blake3::derive_key(KEY_CONTEXT, secret),
            nonces,
            nodes: (challenge.node, connector),
            level: challenge.security,
            cipher: None,
        };
        if auth.level == Security::Privacy {
            use aes_gcm::KeyInit;
            let key = auth.hasher(b"privacy key").finalize();
            auth.cipher = Some(aes_gcm::Aes256Gcm::new(key.as_bytes().into()));
        }
        auth
    }

    /// The connection's security level.
    pub fn level(&self) -> Security {
        self.level
    }

    fn hasher(&self, label: &[u8]) -> blake3::Hasher {
        let mut h = blake3::Hasher::new_keyed(&self.key);
        h.update(label);
        h.update(&self.nonces);
        h.update(&self.nodes.0.to_le_bytes());
        h.update(&self.nodes.1.to_le_bytes());
        h.update(&[self.level as u8]);
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

    fn header_tag(&self, dir: Direction, seq: u64, len: u32, bulk: u32) -> [u8; 16] {
        let mut h = self.hasher(b"header");
        h.update(&[dir as u8]);
        h.update(&seq.to_le_bytes());
        h.update(&len.to_le_bytes());
        h.update(&bulk.to_le_bytes());
        let mut tag = [0u8; 16];
        tag.copy_from_slice(&h.finalize().as_bytes()[..16]);
        tag
    }

    /// The header of a frame of `len` body bytes, the last `bulk` of them file bytes.
    pub fn seal_header(&self, dir: Direction, seq: u64, len: u32, bulk: u32) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h[0..4].copy_from_slice(&len.to_be_bytes());
        h[4..8].copy_from_slice(&bulk.to_le_bytes());
        h[8..16].copy_from_slice(&seq.to_le_bytes());
        h[16..].copy_from_slice(&self.header_tag(dir, seq, len, bulk));
        h
    }

    /// Checks a frame header (tag, expected sequence number, size limit); returns the body
    /// length it announces and how many of those bytes are bulk.
    pub fn open_header(
        &self,
        dir: Direction,
        expected_seq: u64,
        header: &[u8; HEADER_LEN],
        max: usize,
    ) -> Result<(usize, usize), FsError> {
        let len = u32::from_be_bytes(header[0..4].try_into().expect("4 bytes"));
        let bulk = u32::from_le_bytes(header[4..8].try_into().expect("4 bytes"));
        let seq = u64::from_le_bytes(header[8..16].try_into().expect("8 bytes"));
        let tag: [u8; 16] = header[16..HEADER_LEN].try_into().expect("16 bytes");
        // Constant-time comparison of the tag.
        let want = self.header_tag(dir, seq, len, bulk);
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
        if bulk > len {
            return Err(FsError::new(
                Errno::Proto,
                format!("frame of {len} bytes announces {bulk} bytes of bulk"),
            ));
        }
        Ok((len as usize, bulk as usize))
    }

    /// The MAC of a frame's control bytes and what follows them in the MAC (the bulk bytes
    /// themselves under `integrity`, their CRC under `auth`).
    fn body_mac(&self, dir: Direction, seq: u64, parts: &[&[u8]]) -> [u8; MAC_LEN] {
        let mut h = self.hasher(b"body");
        h.update(&[dir as u8]);
        h.update(&seq.to_le_bytes());
        for part in parts {
            h.update(part);
        }
        *h.finalize().as_bytes()
    }

    /// The GCM nonce of frame `seq` in direction `dir`: unique per connection key.
    fn gcm_nonce(dir: Direction, seq: u64) -> aes_gcm::Nonce<aes_gcm::aead::consts::U12> {
        let mut n = [0u8; 12];
        n[0] = dir as u8;
        n[4..].copy_from_slice(&seq.to_le_bytes());
        n.into()
    }

    /// Seals a frame whose body is `control` followed by the concatenation of `bulk`.
    pub fn seal(&self, dir: Direction, seq: u64, control: &[u8], bulk: &[&[u8]]) -> Sealed {
        let bulk_len: usize = bulk.iter().map(|p| p.len()).sum();
        let len = control.len() + bulk_len;
        // Frames are bounded by max_frame (a u32) long before this.
        let header = self.seal_header(dir, seq, len as u32, bulk_len as u32);
        let mut sealed = Sealed {
            header,
            body: None,
            tail: Vec::new(),
        };
        match self.level {
            Security::None => {}
            Security::Auth => {
                let crc = bulk
                    .iter()
                    .fold(0u32, |c, p| crc32c::crc32c_append(c, p))
                    .to_le_bytes();
                sealed.tail.extend_from_slice(&crc);
                sealed
                    .tail
                    .extend_from_slice(&self.body_mac(dir, seq, &[control, &crc]));
            }
            Security::Integrity => {
                let parts: Vec<&[u8]> = std::iter::once(control)
                    .chain(bulk.iter().copied())
                    .collect();
                sealed
                    .tail
                    .extend_from_slice(&self.body_mac(dir, seq, &parts));
            }
            Security::Privacy => {
                use aes_gcm::AeadInPlace;
                let mut body = Vec::with_capacity(len);
                body.extend_from_slice(control);
                for p in bulk {
                    body.extend_from_slice(p);
                }
                let tag = self
                    .cipher
                    .as_ref()
                    .expect("a privacy connection has a cipher")
                    .encrypt_in_place_detached(&Self::gcm_nonce(dir, seq), &header, &mut body)
                    .expect("a frame is far below GCM's length limit");
                sealed.body = Some(body);
                sealed.tail.extend_from_slice(&tag);
            }
        }
        sealed
    }

    /// Checks (and under `privacy` decrypts in place) a frame's body of which the last
    /// `bulk` bytes are file bytes, against its tail. A forged or damaged control part is
    /// `EACCES`; file bytes damaged in flight under `auth` (their CRC fails while the MAC
    /// over control and CRC holds) are `EIO`.
    pub fn open(
        &self,
        dir: Direction,
        seq: u64,
        header: &[u8; HEADER_LEN],
        bulk: usize,
        body: &mut [u8],
        tail: &[u8],
    ) -> Result<(), FsError> {
        let forged = || {
            FsError::new(
                Errno::Access,
                "frame authentication failed: the peer does not hold this instance's secret",
            )
        };
        if tail.len() != self.level.tail_len() || bulk > body.len() {
            return Err(FsError::new(
                Errno::Proto,
                "sealed frame shorter than its tail",
            ));
        }
        let same = |a: [u8; MAC_LEN], b: &[u8]| {
            <[u8; MAC_LEN]>::try_from(b)
                .is_ok_and(|b| blake3::Hash::from_bytes(a) == blake3::Hash::from_bytes(b))
        };
        match self.level {
            Security::None => Ok(()),
            Security::Auth => {
                let (control, bulk_bytes) = body.split_at(body.len() - bulk);
                let (crc, mac) = tail.split_at(4);
                if !same(self.body_mac(dir, seq, &[control, crc]), mac) {
                    return Err(forged());
                }
                let want = u32::from_le_bytes(crc.try_into().expect("4 bytes"));
                let got = crc32c::crc32c(bulk_bytes);
                if want != got {
                    return Err(FsError::new(
                        Errno::Io,
                        format!(
                            "{bulk} bytes of file data were damaged in transit (CRC32C {got:08x}, sent as {want:08x})"
                        ),
                    ));
                }
                Ok(())
            }
            Security::Integrity => {
                if same(self.body_mac(dir, seq, &[body]), tail) {
                    Ok(())
                } else {
                    Err(forged())
                }
            }
            Security::Privacy => {
                use aes_gcm::AeadInPlace;
                let tag: [u8; GCM_TAG_LEN] = tail.try_into().map_err(|_| forged())?;
                self.cipher
                    .as_ref()
                    .expect("a privacy connection has a cipher")
                    .decrypt_in_place_detached(
                        &Self::gcm_nonce(dir, seq),
                        header,
                        body,
                        &tag.into(),
                    )
                    .map_err(|_| forged())
            }
        }
    }

    /// What a MAC over `bytes` costs (for the benchmark's measure of the limits).
    pub fn mac_of(&self, bytes: &[u8]) -> [u8; MAC_LEN] {
        self.body_mac(Direction::ToAcceptor, 0, &[bytes])
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
    auth.check_proof(
        auth.connector_proof(),
        hello.proof,
        &format!(
            "a connecting peer (or it uses another security level than this daemon's '{}')",
            challenge.security
        ),
    )?;
    Ok(auth)
}

/// Writes one sealed frame without bulk (blocking; the daemons use their own vectored
/// writer).
pub fn write_sealed(
    w: &mut impl Write,
    auth: &Authenticator,
    dir: Direction,
    seq: u64,
    body: &[u8],
) -> std::io::Result<()> {
    write_sealed_bulk(w, auth, dir, seq, body, &[])
}

/// Writes one sealed frame of `control` and `bulk` bytes (blocking).
pub fn write_sealed_bulk(
    w: &mut impl Write,
    auth: &Authenticator,
    dir: Direction,
    seq: u64,
    control: &[u8],
    bulk: &[u8],
) -> std::io::Result<()> {
    if u32::try_from(control.len() + bulk.len()).is_err() {
        return Err(std::io::Error::other("frame larger than 4 GiB"));
    }
    let sealed = auth.seal(dir, seq, control, &[bulk]);
    let mut out = Vec::with_capacity(HEADER_LEN + control.len() + bulk.len() + sealed.tail.len());
    out.extend_from_slice(&sealed.header);
    match &sealed.body {
        Some(b) => out.extend_from_slice(b),
        None => {
            out.extend_from_slice(control);
            out.extend_from_slice(bulk);
        }
    }
    out.extend_from_slice(&sealed.tail);
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
    let (len, bulk) = auth.open_header(dir, seq, &header, max)?;
    let mut body = vec![0u8; len + auth.level().tail_len()];
    r.read_exact(&mut body).map_err(io)?;
    let tail = body.split_off(len);
    auth.open(dir, seq, &header, bulk, &mut body, &tail)?;
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (Authenticator, Challenge) {
        pair_at(Security::Integrity)
    }

    fn pair_at(security: Security) -> (Authenticator, Challenge) {
        let ch = Challenge {
            version: 3,
            node: 1,
            nonce: [7; 32],
            security,
        };
        (Authenticator::new(b"secret", &ch, 0, [9; 32]), ch)
    }

    /// A sealed frame of control `c` and bulk `b`, one byte flipped at `flip` (from the
    /// body's start), read back.
    fn flipped(
        level: Security,
        c: &[u8],
        b: &[u8],
        flip: Option<usize>,
    ) -> Result<Vec<u8>, FsError> {
        let (a, _) = pair_at(level);
        let mut wire = Vec::new();
        write_sealed_bulk(&mut wire, &a, Direction::ToConnector, 0, c, b).unwrap();
        if let Some(at) = flip {
            wire[HEADER_LEN + at] ^= 0x10;
        }
        read_sealed(&mut &wire[..], &a, Direction::ToConnector, 0, 1 << 20)
    }

    #[test]
    fn each_level_guards_what_it_promises() {
        let (c, b) = (b"control".as_slice(), vec![0xabu8; 5000]);
        let whole: Vec<u8> = [c, &b[..]].concat();
        for level in [
            Security::None,
            Security::Auth,
            Security::Integrity,
            Security::Privacy,
        ] {
            assert_eq!(flipped(level, c, &b, None).unwrap(), whole, "{level}");
        }
        // Damaged file bytes: EIO under auth (the CRC), refused under integrity and privacy.
        assert_eq!(
            flipped(Security::Auth, c, &b, Some(c.len() + 17))
                .unwrap_err()
                .errno,
            Errno::Io
        );
        assert_eq!(
            flipped(Security::Integrity, c, &b, Some(c.len() + 17))
                .unwrap_err()
                .errno,
            Errno::Access
        );
        assert_eq!(
            flipped(Security::Privacy, c, &b, Some(c.len() + 17))
                .unwrap_err()
                .errno,
            Errno::Access
        );
        // A damaged control part is a forgery at every secure level.
        for level in [Security::Auth, Security::Integrity, Security::Privacy] {
            assert_eq!(
                flipped(level, c, &b, Some(2)).unwrap_err().errno,
                Errno::Access,
                "{level}"
            );
        }
        // None checks nothing: that is what it is for.
        assert_ne!(flipped(Security::None, c, &b, Some(2)).unwrap(), whole);
        // Privacy: the bytes on the wire are not the plaintext.
        let (a, _) = pair_at(Security::Privacy);
        let mut wire = Vec::new();
        write_sealed_bulk(&mut wire, &a, Direction::ToConnector, 0, c, &b).unwrap();
        assert!(
            !wire.windows(64).any(|w| w == &b[..64]),
            "file bytes sent in clear"
        );
    }

    #[test]
    fn levels_do_not_interoperate() {
        let (a, _) = pair_at(Security::Auth);
        let (i, _) = pair_at(Security::Integrity);
        assert_ne!(a.connector_proof(), i.connector_proof());
        let mut wire = Vec::new();
        write_sealed(&mut wire, &a, Direction::ToAcceptor, 0, b"x").unwrap();
        assert!(read_sealed(&mut &wire[..], &i, Direction::ToAcceptor, 0, 1 << 20).is_err());
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
        let mut bulk = wire.clone();
        bulk[4] = 1; // one byte of bulk announced: the header's tag no longer matches
        assert_eq!(e(&bulk, &a, Direction::ToAcceptor, 3), Errno::Access);
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
