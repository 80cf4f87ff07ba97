//! The daemon's side of a client's request ring (tessera-shm's `Ring`): when to watch it,
//! and how a request found there is served.
//!
//! After each ring request the connection's task watches the ring for at most
//! [`tessera_shm::SPIN`], yielding to the runtime and to other processes between looks, and
//! also notices frames on the socket. When the watch ends it says so in the ring and sleeps
//! on the socket, where the client's next request rings it (an empty frame). So a client
//! that asks in a tight loop hands requests over without a system call, and an idle
//! connection costs no CPU.
//!
//! The watch adapts, since on a node with more busy threads than cores a watch that finds
//! nothing only takes a core from someone else: a watch that ends empty shortens the next
//! one (to nothing after a few), and a request that comes soon enough for a watch to have
//! caught it (while watching, or rung within [`tessera_shm::SPIN`] of the last answer)
//! restores it.
//!
//! A request is copied out of the region before it is decoded: the client may write
//! anything there at any time. Garbage (an impossible length, bytes that do not decode) gets
//! a refusal on the socket and ends the connection, as a malformed frame does; it touches no
//! other client. Blocking lock requests come on the socket (the client library sends them
//! there); on either way, the task stops waiting for one when anything arrives on the socket
//! (the process went away, or broke the protocol).

use crate::Node;
use crate::rpc::Encoded;
use crate::transport::frame_codec::FrameCodec;
use crate::transport::peer::{too_large, write_frame_parts};
use bytes::BytesMut;
use futures::{FutureExt, SinkExt, StreamExt};
use std::time::{Duration, Instant};
use tessera_core::{Errno, FsError, FsResult};
use tessera_proto::{Request, frame};
use tessera_shm::Ring;
use tokio::net::UnixStream;
use tokio_util::codec::Framed;

pub type ClientFramed = Framed<UnixStream, FrameCodec>;

/// What the connection's task does next.
pub enum Event {
    /// A frame (or a framing error) arrived on the socket.
    Frame(std::io::Result<BytesMut>),
    /// A request waits in the ring.
    Ring,
    /// The client hung up.
    Closed,
}

/// The task's watch of the ring: the last request it served, until when it watches, and
/// how long its next watch lasts.
pub struct RingWatch {
    served: u32,
    until: Option<Instant>,
    budget: Duration,
    last_answer: Option<Instant>,
}

impl Default for RingWatch {
    fn default() -> Self {
        RingWatch {
            served: 0,
            until: None,
            budget: tessera_shm::SPIN,
            last_answer: None,
        }
    }
}

/// How long a watch runs before it also yields to other processes between looks.
const QUICK_HANDOVER: Duration = Duration::from_micros(5);

/// A watch shorter than this is not worth starting.
const SHORTEST_WATCH: Duration = Duration::from_micros(2);

impl RingWatch {
    /// Starts a watch after an answer, as long as the budget allows.
    fn after_answer(&mut self) {
        let now = Instant::now();
        self.last_answer = Some(now);
        self.until = (self.budget >= SHORTEST_WATCH).then(|| now + self.budget);
    }

    /// The client rang: a watch would have caught the request if it came soon after the
    /// last answer.
    pub fn rung(&mut self) {
        if self
            .last_answer
            .is_some_and(|t| t.elapsed() < tessera_shm::SPIN)
        {
            self.budget = tessera_shm::SPIN;
        }
    }

    /// A request arrived while watching.
    fn caught(&mut self) {
        self.budget = tessera_shm::SPIN;
    }

    /// A watch ended with nothing: the next is shorter.
    fn missed(&mut self) {
        self.budget /= 4;
    }
}

/// Waits for the next frame or ring request: watching the ring while the watch lasts, then
/// asleep on the socket.
pub async fn next_event(
    framed: &mut ClientFramed,
    ring: Option<&Ring>,
    watch: &mut RingWatch,
) -> Event {
    if let Some(ring) = ring {
        if let Some(until) = watch.until.take() {
            ring.awake();
            let started = Instant::now();
            loop {
                if ring.pending(watch.served) {
                    watch.caught();
                    return Event::Ring;
                }
                if let Some(f) = framed.next().now_or_never() {
                    return frame_event(f);
                }
                if Instant::now() >= until {
                    watch.missed();
                    break;
                }
                tokio::task::yield_now().await;
                // And to other processes once the watch is not a quick hand-over: on a busy
                // node the client may need this core. (Yielding from the first look made a
                // hand-over take 8 µs instead of 1.)
                if started.elapsed() > QUICK_HANDOVER {
                    std::thread::yield_now();
                }
            }
        }
        if ring.sleep(watch.served) {
            return Event::Ring;
        }
    }
    frame_event(framed.next().await)
}

fn frame_event(f: Option<std::io::Result<BytesMut>>) -> Event {
    match f {
        Some(f) => Event::Frame(f),
        None => Event::Closed,
    }
}

/// Serves the request waiting in the ring and answers it there (or on the socket when the
/// answer does not fit); then watches the ring again.
pub async fn serve_ring(
    node: &Node,
    client: u64,
    ring: &mut Ring,
    watch: &mut RingWatch,
    request: &mut Vec<u8>,
    framed: &mut ClientFramed,
) -> FsResult<()> {
    let io = |e: std::io::Error| FsError::new(Errno::Proto, e.to_string());
    let Some((seq, taken)) = ring.take_request(watch.served, request) else {
        return Ok(());
    };
    watch.served = seq;
    // The client mapped the ring (it wrote this request there): the descriptor it opened
    // it through is no longer needed, and what it reports there is counted from now on.
    if ring.close_fd() {
        node.metrics.client_reports(client, ring.reports());
    }
    let decoded = taken
        .map_err(|e| FsError::new(Errno::Proto, format!("request ring: {e}")))
        .and_then(|()| frame::decode::<Request>(request));
    let mut answer = match decoded {
        Ok(req) => match route_watching(node, client, req, framed).await {
            Some(answer) => answer,
            // The client went away (or broke the protocol) while its request waited.
            None => return Ok(()),
        },
        Err(e) => {
            tracing::warn!("client {client}: {e}; ending its connection");
            // Told first, so a client asleep on the futex reads the socket at once.
            ring.answered_on_socket(seq);
            framed
                .send(Encoded::error(e.clone()).msg.into())
                .await
                .map_err(io)?;
            return Err(e);
        }
    };
    if answer.frame_len() > node.cfg.max_frame as usize {
        answer = Encoded::error(too_large(answer.frame_len(), node.cfg.max_frame));
    }
    let parts = answer.parts();
    if !ring.answer(seq, &parts) {
        // Told before the frame is written: a frame larger than the socket's buffer is
        // written only as the client reads it.
        ring.answered_on_socket(seq);
        write_frame_parts(framed.get_mut(), &parts)
            .await
            .map_err(io)?;
    }
    watch.after_answer();
    // A client that keeps posting requests answered at once would otherwise keep this task
    // (and a runtime worker) from ever yielding.
    tokio::task::coop::consume_budget().await;
    Ok(())
}

/// Whether a request may wait for long (a lock held by someone else): the client library
/// sends these on the socket, where the daemon notices a process that goes away meanwhile.
pub fn waits_long(req: &Request) -> bool {
    match req {
        Request::Lock(l) => l.wait,
        Request::ListLock(l) => l.wait,
        _ => false,
    }
}

/// Answers a request; one that may wait for long stops waiting if anything arrives on the
/// socket meanwhile (the process went away, or broke the protocol): then `None`, and the
/// connection should end (its locks are released when it does).
pub async fn route_watching(
    node: &Node,
    client: u64,
    req: Request,
    framed: &mut ClientFramed,
) -> Option<Encoded> {
    if !waits_long(&req) {
        return Some(node.route_client(client, req).await);
    }
    tokio::select! {
        r = node.route_client(client, req) => Some(r),
        _ = framed.next() => None,
    }
}
