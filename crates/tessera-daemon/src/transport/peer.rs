//! Daemon-to-daemon transport: authenticated request/response over TCP.
//!
//! Every connection starts with the mutual handshake of `tessera_proto::peer_auth`: the
//! accepting daemon closes a connection that has not proved it holds the secret within
//! `peer_handshake_timeout_ms`, and keeps at most `peer_max_handshakes` connections in their
//! handshake (more are closed at once), so unauthenticated connections tie up nothing; the
//! connecting daemon sends no request before the acceptor has proved itself, so a program on
//! a dead daemon's port learns nothing and is left within the handshake deadline. From then on
//! every frame is sealed ([`SealedCodec`]): its header is authenticated before its body is
//! read. A frame that is oversized, malformed, out of sequence or unauthenticated closes the
//! connection and is logged; the daemon carries on.
//!
//! Callers keep a small pool of idle connections per peer (the bulk path keeps a pool of its
//! own, `transport::bulk`); a pooled connection is checked
//! before each use and dropped (with the rest of that peer's pool) if the peer has closed it,
//! so a restarted peer never sees a request on a dead connection. A peer's address is read
//! from the host table when connecting, so a restarted daemon (new port, maybe a new host) is
//! found again.
//!
//! The `tessera` command connects as [`ADMIN_NODE`](tessera_proto::peer_auth::ADMIN_NODE) (it holds the secret but is no daemon)
//! to ask a node for its status or to stop it.

use crate::Node;
use crate::rpc::Encoded;
use crate::transport::frame_codec::FrameCodec;
use bytes::{Buf, Bytes, BytesMut};
use futures::{SinkExt, StreamExt};
use std::io::IoSlice;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tessera_core::{Errno, FsError, FsResult};
use tessera_proto::frame;
use tessera_proto::peer_auth::{
    Authenticator, Challenge, Direction, HANDSHAKE_MAX, HEADER_LEN, Hello, Welcome, accept_hello,
};
use tessera_proto::{
    InstanceLayout, PROTOCOL_VERSION, PeerCall, PeerRequest, ReadLog, check_data, decode_answer,
};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::codec::{Decoder, Framed};

/// Longest a single peer request may take, even from a peer that keeps its connection alive:
/// a backstop against a stuck peer. A silent peer (lost link or host) is found much sooner,
/// after `peer_timeout_ms`, by [`watch_liveness`].
const PEER_TIMEOUT: Duration = Duration::from_secs(300);

/// Makes the kernel fail a peer connection whose other end stays silent for about `timeout`:
/// keepalive probes while waiting for an answer (a third of it idle, then three probes a
/// ninth apart) and TCP_USER_TIMEOUT while sent data waits to be acknowledged. A live peer
/// answers probes from its kernel, so a long request (a large flush) is never cut short.
fn watch_liveness(stream: &TcpStream, timeout: Duration) {
    let sock = socket2::SockRef::from(stream);
    let keepalive = socket2::TcpKeepalive::new()
        .with_time((timeout / 3).max(Duration::from_secs(1)))
        .with_interval((timeout / 9).max(Duration::from_secs(1)))
        .with_retries(3);
    if let Err(e) = sock
        .set_tcp_keepalive(&keepalive)
        .and_then(|()| sock.set_tcp_user_timeout(Some(timeout)))
    {
        tracing::warn!("cannot bound the silence of a peer connection: {e}");
    }
}
/// Idle connections kept per peer.
const POOL_PER_PEER: usize = 16;

/// Writes one frame whose body is the concatenation of `parts`, with vectored writes and no
/// copy of the parts.
pub async fn write_frame_parts<W: AsyncWrite + Unpin>(
    w: &mut W,
    parts: &[&[u8]],
) -> std::io::Result<()> {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    let len = u32::try_from(len).map_err(|_| std::io::Error::other("frame larger than 4 GiB"))?;
    let header = len.to_be_bytes();
    let all: Vec<&[u8]> = std::iter::once(&header[..])
        .chain(parts.iter().copied())
        .collect();
    write_all_parts(w, &all).await
}

/// Writes `parts` back to back with vectored writes, without copying them.
async fn write_all_parts<W: AsyncWrite + Unpin>(w: &mut W, parts: &[&[u8]]) -> std::io::Result<()> {
    let mut slices: Vec<&[u8]> = parts.iter().copied().filter(|p| !p.is_empty()).collect();
    let mut first = 0usize;
    while first < slices.len() {
        let iov: Vec<IoSlice<'_>> = slices[first..].iter().map(|s| IoSlice::new(s)).collect();
        let mut n = w.write_vectored(&iov).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        while first < slices.len() && n >= slices[first].len() {
            n -= slices[first].len();
            first += 1;
        }
        if n > 0 {
            slices[first] = &slices[first][n..];
        }
    }
    w.flush().await
}

/// The error for an answer that does not fit in a frame.
pub fn too_large(bytes: usize, max_frame: u32) -> FsError {
    FsError::new(
        Errno::MsgSize,
        format!(
            "the answer ({bytes} bytes) exceeds max_frame ({max_frame} bytes); ask for a smaller range, or raise max_frame in instance.toml"
        ),
    )
}

/// Encodes a message as the body of one frame.
pub fn wire<T: serde::Serialize>(msg: &T) -> bytes::Bytes {
    bytes::Bytes::from(frame::encode(msg))
}

/// The plain frame codec (client socket, peer handshake).
pub fn codec(max_frame: u32) -> FrameCodec {
    FrameCodec::new(max_frame)
}

/// Reads sealed frames: the header first, checked; then, only if it is genuine, the body.
/// File bytes damaged in flight (under `auth`) are an `InvalidData` error, any other refusal
/// another kind: either way the connection is not read further.
pub struct SealedCodec {
    auth: Authenticator,
    /// The direction of the frames read.
    dir: Direction,
    /// The sequence number of the next frame read.
    seq: u64,
    max: usize,
    /// A frame whose header was checked: the header, its body length and bulk bytes.
    pending: Option<([u8; HEADER_LEN], usize, usize)>,
}

impl SealedCodec {
    pub fn new(auth: Authenticator, dir: Direction, max: usize) -> Self {
        SealedCodec {
            auth,
            dir,
            seq: 0,
            max,
            pending: None,
        }
    }
}

impl Decoder for SealedCodec {
    type Item = Bytes;
    type Error = std::io::Error;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Bytes>, std::io::Error> {
        let refuse = |e: FsError| {
            let kind = if e.errno == Errno::Io {
                std::io::ErrorKind::InvalidData
            } else {
                std::io::ErrorKind::Other
            };
            std::io::Error::new(kind, e.to_string())
        };
        let (header, len, bulk) = match self.pending {
            Some(p) => p,
            None => {
                if src.len() < HEADER_LEN {
                    src.reserve(HEADER_LEN - src.len());
                    return Ok(None);
                }
                let header: [u8; HEADER_LEN] =
                    src[..HEADER_LEN].try_into().expect("HEADER_LEN bytes");
                let (len, bulk) = self
                    .auth
                    .open_header(self.dir, self.seq, &header, self.max)
                    .map_err(refuse)?;
                src.advance(HEADER_LEN);
                self.pending = Some((header, len, bulk));
                (header, len, bulk)
            }
        };
        let tail_len = self.auth.level().tail_len();
        if src.len() < len + tail_len {
            src.reserve(len + tail_len - src.len());
            return Ok(None);
        }
        let mut body = src.split_to(len);
        let tail = src.split_to(tail_len);
        self.auth
            .open(self.dir, self.seq, &header, bulk, &mut body, &tail)
            .map_err(refuse)?;
        self.seq += 1;
        self.pending = None;
        Ok(Some(body.freeze()))
    }
}

/// Writes one sealed frame whose body is `parts`: the first the control message, the rest
/// file bytes.
async fn write_sealed<W: AsyncWrite + Unpin>(
    w: &mut W,
    auth: &Authenticator,
    dir: Direction,
    seq: u64,
    parts: &[&[u8]],
) -> std::io::Result<()> {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    if u32::try_from(len).is_err() {
        return Err(std::io::Error::other("frame larger than 4 GiB"));
    }
    const EMPTY: &[u8] = &[];
    let (control, bulk) = parts.split_first().unwrap_or((&EMPTY, &[]));
    let sealed = auth.seal(dir, seq, control, bulk);
    let mut all: Vec<&[u8]> = Vec::with_capacity(parts.len() + 2);
    all.push(&sealed.header);
    match &sealed.body {
        Some(body) => all.push(body),
        None => all.extend_from_slice(parts),
    }
    all.push(&sealed.tail);
    write_all_parts(w, &all).await
}

struct PeerConn {
    framed: Framed<TcpStream, SealedCodec>,
    auth: Authenticator,
    seq: u64,
}

impl PeerConn {
    /// Whether the peer still holds the connection open and has sent nothing unasked (a
    /// restarted peer's old connections read as closed).
    fn alive(&self) -> bool {
        if !self.framed.read_buffer().is_empty() {
            return false;
        }
        let mut b = [0u8; 1];
        matches!(
            self.framed.get_ref().try_read(&mut b),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
        )
    }
}

/// Outgoing connections to the other daemons.
pub struct Peers {
    layout: InstanceLayout,
    secret: Vec<u8>,
    /// This daemon's node.
    me: u32,
    max_frame: u32,
    handshake: Duration,
    /// How long a peer may stay silent before its requests fail.
    silence: Duration,
    security: tessera_proto::peer_auth::Security,
    idle: Vec<Mutex<Vec<PeerConn>>>,
}

impl Peers {
    pub fn new(
        layout: InstanceLayout,
        secret: Vec<u8>,
        me: u32,
        cfg: &tessera_proto::InstanceConfig,
    ) -> Self {
        Peers {
            layout,
            secret,
            me,
            max_frame: cfg.max_frame,
            handshake: Duration::from_millis(cfg.peer_handshake_timeout_ms),
            silence: Duration::from_millis(cfg.peer_timeout_ms),
            security: cfg.security,
            idle: (0..cfg.nodes).map(|_| Mutex::new(Vec::new())).collect(),
        }
    }

    /// " on host H" for `node`, or nothing when the host table does not say.
    fn host_of(&self, node: u32) -> String {
        self.layout
            .load_hosts()
            .ok()
            .and_then(|t| t.get(node).map(|e| format!(" on host {}", e.host)))
            .unwrap_or_default()
    }

    fn unreachable(&self, node: u32, what: impl std::fmt::Display) -> FsError {
        let host = self.host_of(node);
        FsError::new(
            Errno::HostDown,
            format!(
                "daemon of node {node}{host} is unreachable ({what}); check it with `tessera status --instance {}`",
                self.layout.dir.display()
            ),
        )
    }

    async fn connect(&self, node: u32) -> FsResult<PeerConn> {
        let table = self.layout.load_hosts()?;
        let addr = table
            .get(node)
            .ok_or_else(|| {
                self.unreachable(
                    node,
                    format!("not registered in {}", self.layout.hosts_path().display()),
                )
            })?
            .addr
            .clone();
        // A peer with too many connections in their handshake closes new ones before its
        // challenge (see `serve`): a burst of connections (many processes reading, locking
        // and waiting at once on a busy machine) then backs off and tries again within the
        // handshake timeout rather than failing a request of a live peer.
        let attempts = async {
            let mut pause = std::time::Duration::from_millis(10);
            loop {
                match self.handshake(node, &addr).await {
                    Err(e) if e.errno == Errno::Busy => {
                        tokio::time::sleep(pause).await;
                        pause = (pause * 2).min(std::time::Duration::from_millis(500));
                    }
                    other => return other,
                }
            }
        };
        match tokio::time::timeout(self.handshake, attempts).await {
            Ok(r) => r,
            Err(_) => Err(self.unreachable(
                node,
                format!(
                    "{addr} did not complete the handshake within {:?} (is another program on that port?)",
                    self.handshake
                ),
            )),
        }
    }

    async fn handshake_frame(
        &self,
        node: u32,
        addr: &str,
        framed: &mut Framed<TcpStream, FrameCodec>,
    ) -> FsResult<BytesMut> {
        framed
            .next()
            .await
            .ok_or_else(|| self.unreachable(node, format!("{addr} closed the handshake")))?
            .map_err(|e| self.unreachable(node, format!("{addr}: {e}")))
    }

    /// Connects to `addr` and runs the connector's side of the handshake: nothing but the
    /// handshake is sent before the peer has proved it holds the secret.
    async fn handshake(&self, node: u32, addr: &str) -> FsResult<PeerConn> {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|e| self.unreachable(node, format!("connecting to {addr}: {e}")))?;
        let _ = stream.set_nodelay(true);
        watch_liveness(&stream, self.silence);
        let mut framed = Framed::new(stream, codec(HANDSHAKE_MAX as u32));
        // Closed before the challenge: the peer has too many handshakes in flight (busy).
        let first = match framed.next().await {
            Some(f) => f.map_err(|e| self.unreachable(node, format!("{addr}: {e}")))?,
            None => {
                return Err(FsError::new(
                    Errno::Busy,
                    format!("{addr} closed the connection before its challenge (busy)"),
                ));
            }
        };
        let ch: Challenge = frame::decode(&first)?;
        if ch.security != self.security {
            return Err(FsError::new(
                Errno::Proto,
                format!(
                    "{addr} (node {node}) uses security level '{}', this side '{}': every daemon of an instance must use the same `security` of instance.toml; stop the instance and start it again",
                    ch.security, self.security
                ),
            ));
        }
        if ch.version != PROTOCOL_VERSION || ch.node != node {
            return Err(FsError::new(
                Errno::Proto,
                format!(
                    "{addr} answered as node {} protocol {} (expected node {node} protocol {PROTOCOL_VERSION})",
                    ch.node, ch.version
                ),
            ));
        }
        let nonce: [u8; 32] = rand::random();
        let auth = Authenticator::new(&self.secret, &ch, self.me, nonce);
        let hello = Hello {
            version: PROTOCOL_VERSION,
            from: self.me,
            nonce,
            proof: auth.connector_proof(),
        };
        framed
            .send(wire(&hello))
            .await
            .map_err(|e| self.unreachable(node, format!("{addr}: {e}")))?;
        let welcome: Welcome =
            frame::decode(&self.handshake_frame(node, addr, &mut framed).await?)?;
        auth.check_proof(
            auth.acceptor_proof(),
            welcome.proof,
            &format!("{addr} (node {node})"),
        )
        .map_err(|e| self.unreachable(node, e.message))?;
        let stream = framed.into_inner();
        Ok(PeerConn {
            framed: Framed::new(
                stream,
                SealedCodec::new(
                    auth.clone(),
                    Direction::ToConnector,
                    self.max_frame as usize,
                ),
            ),
            auth,
            seq: 0,
        })
    }

    async fn exchange(&self, node: u32, conn: &mut PeerConn, body: &[u8]) -> FsResult<Bytes> {
        write_sealed(
            conn.framed.get_mut(),
            &conn.auth,
            Direction::ToAcceptor,
            conn.seq,
            &[body],
        )
        .await
        .map_err(|e| self.unreachable(node, format!("sending: {e}")))?;
        let reply = conn
            .framed
            .next()
            .await
            .ok_or_else(|| self.unreachable(node, "connection closed"))?
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::InvalidData {
                    FsError::new(
                        Errno::Io,
                        format!("the answer of node {node}{} failed its check: {e}; the read was refused, retry it", self.host_of(node)),
                    )
                } else {
                    self.unreachable(node, format!("receiving: {e}"))
                }
            })?;
        conn.seq += 1;
        Ok(reply)
    }

    /// Sends `req` to `node` and waits for its reply.
    pub async fn call<R: PeerCall>(&self, node: u32, req: R) -> FsResult<R::Reply> {
        let frame = self.exchange_frame(node, &req.into()).await?;
        reply_of::<R>(node, &frame)
    }

    /// Reads from a log on `node`: the bytes that follow its `Data` reply, not copied.
    pub async fn call_data(&self, node: u32, req: ReadLog) -> FsResult<Bytes> {
        let frame = self.exchange_frame(node, &req.into()).await?;
        let (data, trailer) = decode_answer(&frame)?;
        check_data(&data, trailer)?;
        Ok(frame.slice_ref(trailer))
    }

    /// Sends a request to `node` and returns the frame of its answer. A pooled connection
    /// found dead (the peer restarted) is replaced once.
    pub(crate) async fn exchange_frame(&self, node: u32, req: &PeerRequest) -> FsResult<Bytes> {
        let body = frame::encode(req);
        let slot = self.idle.get(node as usize).ok_or_else(|| {
            FsError::new(Errno::Inval, format!("no node {node} in this instance"))
        })?;
        for _ in 0..2 {
            let pooled = slot.lock().expect("pool lock").pop();
            // A pooled connection the peer has closed (it restarted) is found before a
            // request goes out on it; the others of that peer went with it.
            let pooled = match pooled {
                Some(c) if !c.alive() => {
                    slot.lock().expect("pool lock").clear();
                    None
                }
                other => other,
            };
            let was_pooled = pooled.is_some();
            let mut conn = match pooled {
                Some(c) => c,
                None => self.connect(node).await?,
            };
            match tokio::time::timeout(PEER_TIMEOUT, self.exchange(node, &mut conn, &body)).await {
                Ok(Ok(resp)) => {
                    let mut idle = slot.lock().expect("pool lock");
                    if idle.len() < POOL_PER_PEER {
                        idle.push(conn);
                    }
                    return Ok(resp);
                }
                // A pooled connection found dead (the peer restarted): try a fresh one, unless
                // the request may already have taken effect and a second copy would differ.
                Ok(Err(e)) if was_pooled && e.errno == Errno::HostDown && req.is_idempotent() => {
                    continue;
                }
                Ok(Err(e)) => return Err(e),
                Err(_) => {
                    return Err(
                        self.unreachable(node, format!("no answer within {PEER_TIMEOUT:?}"))
                    );
                }
            }
        }
        Err(self.unreachable(node, "connection lost twice"))
    }
}

/// The reply to an `R` in the answer frame `node` sent, which carries no data after it.
pub fn reply_of<R: PeerCall>(node: u32, frame: &[u8]) -> FsResult<R::Reply> {
    let (reply, trailer) = decode_answer::<R::Reply>(frame)?;
    if !trailer.is_empty() {
        return Err(FsError::new(
            Errno::Proto,
            format!(
                "node {node} sent {} bytes of data after its answer to {}",
                trailer.len(),
                R::NAME
            ),
        ));
    }
    Ok(reply)
}

/// Accepts peer connections until the listener fails. At most `peer_max_handshakes` may be
/// in their handshake at once; more are closed at once.
pub async fn serve(node: Arc<Node>, listener: TcpListener) {
    let handshakes = Arc::new(tokio::sync::Semaphore::new(
        node.cfg.peer_max_handshakes as usize,
    ));
    loop {
        match listener.accept().await {
            Ok((stream, addr)) => {
                let Ok(permit) = handshakes.clone().try_acquire_owned() else {
                    tracing::debug!(%addr, "peer connection refused: too many handshakes in progress");
                    drop(stream);
                    continue;
                };
                let node = node.clone();
                tokio::spawn(async move {
                    if let Err(e) = serve_conn(node, stream, permit).await {
                        tracing::warn!(%addr, "peer connection closed: {e}");
                    }
                });
            }
            Err(e) => {
                tracing::warn!("accepting a peer connection failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// The acceptor's side of the handshake: challenge, check the connector's proof, prove.
async fn accept_handshake(
    node: &Node,
    stream: TcpStream,
) -> FsResult<(TcpStream, Authenticator, u32)> {
    let _ = stream.set_nodelay(true);
    watch_liveness(&stream, Duration::from_millis(node.cfg.peer_timeout_ms));
    let mut framed = Framed::new(stream, codec(HANDSHAKE_MAX as u32));
    let io = |e: std::io::Error| FsError::new(Errno::Proto, e.to_string());
    let ch = Challenge {
        version: PROTOCOL_VERSION,
        node: node.id,
        nonce: rand::random(),
        security: node.cfg.security,
    };
    framed.send(wire(&ch)).await.map_err(io)?;
    let f = framed
        .next()
        .await
        .ok_or_else(|| FsError::new(Errno::Proto, "closed during the handshake"))?
        .map_err(io)?;
    let hello: Hello = frame::decode(&f)?;
    let auth = accept_hello(&node.secret, &ch, &hello, node.cfg.nodes)?;
    framed
        .send(wire(&Welcome {
            proof: auth.acceptor_proof(),
        }))
        .await
        .map_err(io)?;
    if !framed.read_buffer().is_empty() {
        return Err(FsError::new(
            Errno::Proto,
            "a peer sent before the handshake was over",
        ));
    }
    Ok((framed.into_inner(), auth, hello.from))
}

async fn serve_conn(
    node: Arc<Node>,
    stream: TcpStream,
    permit: tokio::sync::OwnedSemaphorePermit,
) -> FsResult<()> {
    let deadline = Duration::from_millis(node.cfg.peer_handshake_timeout_ms);
    let (stream, auth, from) =
        match tokio::time::timeout(deadline, accept_handshake(&node, stream)).await {
            Ok(r) => r?,
            Err(_) => {
                return Err(FsError::new(
                    Errno::Access,
                    format!("no proof of the secret within {deadline:?}"),
                ));
            }
        };
    drop(permit);
    tracing::debug!(peer = from, "peer connection authenticated");
    let max = node.cfg.max_frame as usize;
    let mut framed = Framed::new(
        stream,
        SealedCodec::new(auth.clone(), Direction::ToAcceptor, max),
    );
    let io = |e: std::io::Error| FsError::new(Errno::Proto, e.to_string());
    let corrupt_bulk = node.failpoints.is_set("peer-corrupt-bulk");
    let mut seq = 0u64;
    while let Some(f) = framed.next().await {
        let body = f.map_err(io)?;
        let req: PeerRequest = frame::decode(&body)?;
        let mut answer = node.route_peer(req).await;
        if answer.frame_len() > max {
            answer = Encoded::error(too_large(answer.frame_len(), node.cfg.max_frame));
        }
        let sealed_parts = answer.parts();
        if corrupt_bulk {
            // A failpoint: one byte of file data flipped in flight, after sealing.
            let damaged = damage_one_bulk_byte(&auth, seq, &sealed_parts);
            framed.get_mut().write_all(&damaged).await.map_err(io)?;
        } else {
            write_sealed(
                framed.get_mut(),
                &auth,
                Direction::ToConnector,
                seq,
                &sealed_parts,
            )
            .await
            .map_err(io)?;
        }
        seq += 1;
    }
    Ok(())
}

/// A sealed answer with one byte of its file data flipped after sealing, as a faulty link
/// or NIC would leave it (the `peer-corrupt-bulk` failpoint); an answer without file data
/// is left whole.
fn damage_one_bulk_byte(auth: &Authenticator, seq: u64, parts: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    const EMPTY: &[u8] = &[];
    let (control, bulk) = parts.split_first().unwrap_or((&EMPTY, &[]));
    tessera_proto::peer_auth::write_sealed_bulk(
        &mut out,
        auth,
        Direction::ToConnector,
        seq,
        control,
        &bulk.concat(),
    )
    .expect("writing to memory");
    if bulk.iter().any(|b| !b.is_empty()) {
        let at = HEADER_LEN + control.len();
        out[at] ^= 0x01;
    }
    out
}
