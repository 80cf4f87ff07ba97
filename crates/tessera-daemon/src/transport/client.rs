//! The client-facing Unix socket of a daemon.
//!
//! The socket sits in the node's directory of the burst buffer (mode 0700) and the daemon also checks
//! every peer's uid with SO_PEERCRED: a process of another user is told why it is refused and
//! disconnected. Each connection starts with a hello that binds a client id (new, or the
//! previous one after a reconnect); after that it is strict request/response.

use crate::Node;
use crate::rpc::Encoded;
use crate::transport::client_ring::{Event, RingWatch, next_event, route_watching, serve_ring};
use crate::transport::peer::too_large;
use crate::transport::peer::{codec, write_frame_parts};
use futures::{SinkExt, StreamExt};
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use tessera_core::{Errno, FsError, FsResult};
use tessera_proto::frame;
use tessera_proto::{Bound, Hello, PROTOCOL_VERSION, RegionAt, Request};
use tokio::net::{UnixListener, UnixStream};
use tokio_util::codec::Framed;

/// Binds the socket, replacing a stale one but never a live daemon's.
pub async fn bind(path: &Path) -> FsResult<UnixListener> {
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(FsError::new(
                Errno::Exist,
                format!(
                    "a daemon is already serving {}; stop it first (`tessera stop`)",
                    path.display()
                ),
            ));
        }
        let _ = std::fs::remove_file(path);
    }
    let l = UnixListener::bind(path)
        .map_err(|e| FsError::io(format!("binding {}", path.display()), &e))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| FsError::io(format!("chmod {}", path.display()), &e))?;
    Ok(l)
}

pub async fn serve(node: Arc<Node>, listener: UnixListener) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let node = node.clone();
                tokio::spawn(async move {
                    node.life.client(true);
                    let mut client = None;
                    if let Err(e) = serve_conn(&node, stream, &mut client).await {
                        tracing::debug!("client connection ended: {e}");
                    }
                    if let Some((c, process)) = client {
                        connection_ended(&node, c, process).await;
                    }
                    node.life.client(false);
                });
            }
            Err(e) => {
                tracing::warn!("accepting a client failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}

/// After a client's connection: if its process has ended, publish what it left (its writes
/// first, then its locks go, so the next holder of a lock sees what was written under it) and
/// forget it; if the process goes on (its connection was dropped), keep its id and watch it.
async fn connection_ended(node: &Node, c: u64, process: Option<(u32, u64)>) {
    // The logs the daemon wrote for it close first: what it left is read from them below.
    node.client_logs.client_gone(c);
    // What it reported in its ring stays in the metrics' totals.
    node.metrics.client_gone(c);
    let ended = node.clients.take_goodbye(c)
        || process.is_none_or(|(pid, start)| crate::state::clients::process_ended(pid, start));
    // A member of a transaction leaves it; what it did not publish before its vote is not
    // part of it, and not published outside it either: its space is given back.
    let undecided_log = node.txn_client_gone(c).await;
    if ended {
        match undecided_log {
            None => node.publish_leftovers(c).await,
            Some(log) => crate::blocking::blocking(|| node.release_unpublished(c, log)),
        }
    }
    node.client_gone(c).await;
    node.logs.client_gone(c);
    if ended {
        let _ = node
            .store
            .submit(vec![crate::store::DbOp::DelClient(c)])
            .durable()
            .await;
    } else if let Some((pid, start)) = process {
        node.clients.expect_back(&[(c, pid, start)]);
    }
    node.clients.unbind(c);
    if ended {
        // Its log goes if every file in it was removed while it ran.
        let deleted = crate::blocking::blocking(|| {
            node.logs
                .delete_if_done(c, &|log, txn| node.log_in_use(log, txn))
        });
        if let Err(e) = deleted {
            tracing::warn!(client = c, "keeping the log of a process that ended: {e}");
        }
    }
}

/// The client id bound to a connection, and its process (pid, start time) when known.
type Binding = Option<(u64, Option<(u32, u64)>)>;

async fn serve_conn(node: &Node, stream: UnixStream, bound: &mut Binding) -> FsResult<()> {
    let cred = stream
        .peer_cred()
        .map_err(|e| FsError::io("reading the peer's credentials", &e))?;
    let mut framed = Framed::new(stream, codec(node.cfg.max_frame));
    let io = |e: std::io::Error| FsError::new(Errno::Proto, e.to_string());
    if cred.uid() != node.uid {
        let e = FsError::new(
            Errno::Access,
            format!(
                "permission denied: this Tessera instance belongs to uid {}; uid {} must start its own instance (`tessera start`)",
                node.uid,
                cred.uid()
            ),
        );
        tracing::warn!("refused a client of uid {}", cred.uid());
        framed.send(refusal(&e)).await.map_err(io)?;
        return Err(e);
    }
    let (client, wants_ring) = match framed.next().await {
        Some(Ok(f)) => match frame::decode::<Request>(&f) {
            Ok(Request::Hello(Hello {
                version,
                resume,
                pid,
                ring,
            })) if version == PROTOCOL_VERSION => {
                let id = match resume {
                    Some(id) if node.issued_client_id(id) => id,
                    _ => node.new_client_id().await?,
                };
                if let Err(e) = node.clients.bind(id, pid) {
                    tracing::warn!("refused a hello: {e}");
                    framed.send(refusal(&e)).await.map_err(io)?;
                    return Err(e);
                }
                let process = cred
                    .pid()
                    .and_then(|p| u32::try_from(p).ok())
                    .and_then(|pid| Some((pid, crate::state::clients::process_start(pid)?)));
                // Bound before anything can fail, so the end of the connection frees it.
                *bound = Some((id, process));
                // Remembered across a restart of this daemon: if the process ends while the
                // daemon is away, the daemon still publishes what it left.
                if let Some((pid, start)) = process {
                    node.store
                        .submit(vec![crate::store::DbOp::PutClient { id, pid, start }])
                        .durable()
                        .await?;
                }
                (id, ring)
            }
            Ok(Request::Hello(Hello { version, .. })) => {
                let e = FsError::new(
                    Errno::Proto,
                    format!(
                        "client speaks protocol {version}, this daemon {PROTOCOL_VERSION}: rebuild the client"
                    ),
                );
                framed.send(refusal(&e)).await.map_err(io)?;
                return Err(e);
            }
            Ok(_) | Err(_) => {
                let e = FsError::new(
                    Errno::Proto,
                    "the first message on a connection must be a hello",
                );
                framed.send(refusal(&e)).await.map_err(io)?;
                return Err(e);
            }
        },
        _ => return Ok(()),
    };
    // A ring only for a client that asked for one, and only while the instance allows it.
    let mut ring = match wants_ring {
        true if node.cfg.client_ring => match tessera_shm::Ring::create_with(
            tessera_shm::REQUEST_CAPACITY,
            node.cfg.ring_answer_bytes,
        ) {
            Ok(r) => Some(r),
            Err(e) => {
                tracing::warn!("no request ring for client {client}: {e}");
                None
            }
        },
        _ => None,
    };
    let bound = Bound {
        client,
        node: node.id,
        nodes: node.cfg.nodes,
        board: node.attrs.board_at(),
        ring: ring.as_ref().and_then(ring_at),
    };
    framed
        .send(bytes::Bytes::from(Encoded::answer(Ok(bound)).msg))
        .await
        .map_err(io)?;
    let mut watch = RingWatch::default();
    let mut request = Vec::new();
    loop {
        let f = match next_event(&mut framed, ring.as_ref(), &mut watch).await {
            Event::Closed => return Ok(()),
            Event::Ring => {
                let ring = ring.as_mut().expect("a ring event comes from a ring");
                serve_ring(node, client, ring, &mut watch, &mut request, &mut framed).await?;
                continue;
            }
            Event::Frame(f) => f,
        };
        let f = match f {
            Ok(f) => f,
            Err(e) => {
                // Oversized frame: say so, then drop the connection (its stream is out of sync).
                let err = FsError::new(
                    Errno::MsgSize,
                    format!("request refused: {e} (max_frame = {})", node.cfg.max_frame),
                );
                let _ = framed.send(refusal(&err)).await;
                return Err(err);
            }
        };
        if f.is_empty() && ring.is_some() {
            // The client rang: a request waits in the ring (the next look finds it).
            watch.rung();
            continue;
        }
        let mut answer = match frame::decode::<Request>(&f) {
            // A blocking lock may wait for long: if the process goes away meanwhile (the
            // stream ends), stop waiting; its locks are released when the connection ends.
            Ok(req) => match route_watching(node, client, req, &mut framed).await {
                Some(answer) => answer,
                None => return Ok(()),
            },
            Err(e) => {
                framed.send(refusal(&e)).await.map_err(io)?;
                return Err(e);
            }
        };
        if answer.frame_len() > node.cfg.max_frame as usize {
            answer = Encoded::error(too_large(answer.frame_len(), node.cfg.max_frame));
        }
        // Answer and data in one frame, written without copying the data.
        let parts = answer.parts();
        write_frame_parts(framed.get_mut(), &parts)
            .await
            .map_err(io)?;
    }
}

/// Where a client opens its ring.
fn ring_at(ring: &tessera_shm::Ring) -> Option<RegionAt> {
    Some(RegionAt {
        pid: std::process::id(),
        fd: ring.fd()?.as_raw_fd(),
    })
}

/// The frame telling a client why it is refused (the connection ends after it).
fn refusal(e: &FsError) -> bytes::Bytes {
    Encoded::error(e.clone()).msg.into()
}
