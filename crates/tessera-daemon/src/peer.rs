//! Daemon-to-daemon transport: authenticated request/response over TCP.
//!
//! The accepting daemon opens each connection with a [`Challenge`] carrying a fresh nonce;
//! from then on every frame is sealed: its MAC covers the nonce, direction and sequence number
//! (see `tessera_proto::frame`). A frame that is oversized, malformed, out of
//! sequence or unauthenticated closes the connection and is logged; the daemon carries on.
//!
//! Callers keep a small pool of idle connections per peer. A peer's address is read from its
//! `run/node-K.addr` file when connecting, so a restarted daemon (new port) is found again.

use crate::Node;
use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use std::io::IoSlice;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tessera_core::{Errno, FsError, FsResult};
use tessera_proto::frame::{self, Authenticator, Challenge, Direction, SEAL_LEN};
use tessera_proto::{InstanceLayout, PROTOCOL_VERSION, PeerRequest, PeerResponse};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::codec::{Framed, LengthDelimitedCodec};

/// Longest a single peer request may take before the peer is considered unreachable.
const PEER_TIMEOUT: Duration = Duration::from_secs(300);
/// Idle connections kept per peer.
const POOL_PER_PEER: usize = 16;

/// An answer from a shard: the message and the raw data that follows it in the frame (empty
/// unless the message is `Data`).
pub struct PeerReply {
    pub resp: PeerResponse,
    pub data: Bytes,
}

impl PeerReply {
    pub fn msg(resp: PeerResponse) -> Self {
        PeerReply {
            resp,
            data: Bytes::new(),
        }
    }

    pub fn data(data: Bytes) -> Self {
        PeerReply {
            resp: PeerResponse::Data {
                len: data.len() as u64,
            },
            data,
        }
    }
}

/// Writes one frame whose body is the concatenation of `parts`, with vectored writes and no
/// copy of the parts.
pub async fn write_frame_parts<W: AsyncWrite + Unpin>(
    w: &mut W,
    parts: &[&[u8]],
) -> std::io::Result<()> {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    let len = u32::try_from(len).map_err(|_| std::io::Error::other("frame larger than 4 GiB"))?;
    let header = len.to_be_bytes();
    let mut slices: Vec<&[u8]> = std::iter::once(&header[..])
        .chain(parts.iter().copied())
        .filter(|p| !p.is_empty())
        .collect();
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

/// Splits a frame body into the message and its data trailer (checked against `Data { len }`).
fn reply_of(frame: &Bytes, body: &[u8]) -> FsResult<PeerReply> {
    let (resp, rest): (PeerResponse, &[u8]) = frame::split_message(body)?;
    let data = match resp {
        PeerResponse::Data { len } if rest.len() as u64 == len => frame.slice_ref(rest),
        PeerResponse::Data { len } => {
            return Err(FsError::new(
                Errno::Proto,
                format!(
                    "data answer announces {len} bytes but carries {}",
                    rest.len()
                ),
            ));
        }
        _ => Bytes::new(),
    };
    Ok(PeerReply { resp, data })
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

pub fn codec(max_frame: u32) -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .max_frame_length(max_frame as usize)
        .new_codec()
}

struct PeerConn {
    framed: Framed<TcpStream, LengthDelimitedCodec>,
    auth: Authenticator,
    seq: u64,
}

/// Outgoing connections to the other daemons.
pub struct Peers {
    layout: InstanceLayout,
    secret: Vec<u8>,
    max_frame: u32,
    idle: Vec<Mutex<Vec<PeerConn>>>,
}

impl Peers {
    pub fn new(layout: InstanceLayout, secret: Vec<u8>, max_frame: u32, nodes: u32) -> Self {
        Peers {
            layout,
            secret,
            max_frame,
            idle: (0..nodes).map(|_| Mutex::new(Vec::new())).collect(),
        }
    }

    fn unreachable(&self, node: u32, what: impl std::fmt::Display) -> FsError {
        FsError::new(
            Errno::HostDown,
            format!(
                "daemon of node {node} is unreachable ({what}); check it with `tessera status --instance {}`",
                self.layout.dir.display()
            ),
        )
    }

    async fn connect(&self, node: u32) -> FsResult<PeerConn> {
        let addr_file = self.layout.addr_file(node);
        let addr = std::fs::read_to_string(&addr_file).map_err(|e| {
            self.unreachable(node, format!("no address in {}: {e}", addr_file.display()))
        })?;
        let addr = addr.trim();
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|e| self.unreachable(node, format!("connecting to {addr}: {e}")))?;
        let _ = stream.set_nodelay(true);
        let mut framed = Framed::new(stream, codec(self.max_frame));
        let first = framed
            .next()
            .await
            .ok_or_else(|| self.unreachable(node, "closed before its challenge"))?
            .map_err(|e| self.unreachable(node, e))?;
        let ch: Challenge = frame::decode(&first)?;
        if ch.version != PROTOCOL_VERSION || ch.node != node {
            return Err(FsError::new(
                Errno::Proto,
                format!(
                    "{addr} answered as node {} protocol {} (expected node {node} protocol {PROTOCOL_VERSION})",
                    ch.node, ch.version
                ),
            ));
        }
        Ok(PeerConn {
            framed,
            auth: Authenticator::new(&self.secret, ch.nonce),
            seq: 0,
        })
    }

    async fn exchange(
        &self,
        node: u32,
        conn: &mut PeerConn,
        req: &PeerRequest,
    ) -> FsResult<PeerReply> {
        let body = frame::encode(req);
        let seal = conn.auth.seal(Direction::ToAcceptor, conn.seq, &[&body]);
        write_frame_parts(conn.framed.get_mut(), &[&seal, &body])
            .await
            .map_err(|e| self.unreachable(node, format!("sending: {e}")))?;
        let reply = conn
            .framed
            .next()
            .await
            .ok_or_else(|| self.unreachable(node, "connection closed"))?
            .map_err(|e| self.unreachable(node, format!("receiving: {e}")))?
            .freeze();
        let body = conn.auth.open(Direction::ToConnector, conn.seq, &reply)?;
        conn.seq += 1;
        reply_of(&reply, body)
    }

    /// Sends `req` to `node` and waits for its response. A pooled connection found dead (the
    /// peer restarted) is replaced once.
    pub async fn call(&self, node: u32, req: &PeerRequest) -> FsResult<PeerReply> {
        let slot = self.idle.get(node as usize).ok_or_else(|| {
            FsError::new(Errno::Inval, format!("no node {node} in this instance"))
        })?;
        for _ in 0..2 {
            let pooled = slot.lock().expect("pool lock").pop();
            let was_pooled = pooled.is_some();
            let mut conn = match pooled {
                Some(c) => c,
                None => self.connect(node).await?,
            };
            match tokio::time::timeout(PEER_TIMEOUT, self.exchange(node, &mut conn, req)).await {
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

/// Accepts peer connections until the listener fails.
pub async fn serve(node: Arc<Node>, listener: TcpListener) {
    loop {
        match listener.accept().await {
            Ok((stream, addr)) => {
                let node = node.clone();
                tokio::spawn(async move {
                    if let Err(e) = serve_conn(node, stream).await {
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

async fn serve_conn(node: Arc<Node>, stream: TcpStream) -> FsResult<()> {
    let _ = stream.set_nodelay(true);
    let max = node.cfg.max_frame as usize;
    let mut framed = Framed::new(stream, codec(node.cfg.max_frame));
    let nonce: [u8; 32] = rand::random();
    let ch = Challenge {
        version: PROTOCOL_VERSION,
        node: node.id,
        nonce,
    };
    let io = |e: std::io::Error| FsError::new(Errno::Proto, e.to_string());
    framed.send(wire(&ch)).await.map_err(io)?;
    let auth = Authenticator::new(&node.secret, nonce);
    let mut seq = 0u64;
    while let Some(f) = framed.next().await {
        let f = f.map_err(io)?;
        let body = auth.open(Direction::ToAcceptor, seq, &f)?;
        let req: PeerRequest = frame::decode(body)?;
        let mut reply = node
            .handle_peer(req)
            .await
            .unwrap_or_else(|e| PeerReply::msg(PeerResponse::Err(e)));
        let mut msg = frame::encode(&reply.resp);
        if SEAL_LEN + msg.len() + reply.data.len() > max {
            let size = msg.len() + reply.data.len();
            reply = PeerReply::msg(PeerResponse::Err(too_large(size, node.cfg.max_frame)));
            msg = frame::encode(&reply.resp);
        }
        let seal = auth.seal(Direction::ToConnector, seq, &[&msg, &reply.data]);
        seq += 1;
        write_frame_parts(framed.get_mut(), &[&seal, &msg, &reply.data])
            .await
            .map_err(io)?;
    }
    Ok(())
}
