//! The connection from a process to its node's daemon: a blocking Unix socket carrying one
//! request and one response at a time, and beside it, when the daemon offers one, a request
//! ring in shared memory (tessera-shm's `Ring`) that carries the small ones without a system
//! call while the daemon watches it.
//!
//! A request goes through the ring when it fits and is not a blocking lock (byte-range or
//! list: a lock may wait for long, and the daemon notices a process gone only while it reads
//! the socket). The client watches for the answer for at most 50 µs, then sleeps on the
//! ring's futex in naps, looking at the socket between naps: a daemon that died hung up, and
//! an answer too large for the ring (or a refusal) comes as a frame there.

use std::io::ErrorKind;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;
use tessera_core::{Errno, FsError, FsResult};
use tessera_logstore::library_fds::Held;
use tessera_proto::frame;
use tessera_proto::{Bound, ClientCall, Hello, PROTOCOL_VERSION, RegionAt, decode_answer};
use tessera_shm::{Place, Ring};

/// How long a client sleeps on the ring's futex before it looks at the socket again.
const NAP: Duration = Duration::from_millis(50);

/// Kinds of request told apart when deciding whether to watch for an answer (a request's
/// kind is its tag, the first byte of its encoding; later tags share the last slot).
const KINDS: usize = 64;

pub struct Conn {
    stream: Held<UnixStream>,
    max_frame: usize,
    /// The last answer's frame, kept for its data trailer and reused for the next one (large
    /// reads would otherwise map fresh pages for every answer).
    buf: Vec<u8>,
    /// Where the data trailer of the last answer starts (in `buf`, or in the ring).
    data_at: usize,
    /// Whether the last answer is in the ring's answer area (read there in place) rather
    /// than in `buf`.
    answer_in_ring: bool,
    /// The connection's request ring, if the daemon offered one and it could be mapped.
    ring: Option<Ring>,
    /// Per kind of request, how long its last answer through the ring took (µs): the client
    /// watches for an answer only when the last one of its kind came within the watch, so a
    /// request answered late (by a remote shard on a busy node) sleeps at once instead of
    /// taking a core for nothing.
    answered_in_us: [u32; KINDS],
    /// What this connection reported in its ring (see `tessera_proto::reports`): running
    /// totals that start at zero with each connection, as the daemon counts them.
    reported: [u64; tessera_proto::reports::SLOTS],
}

/// Which way a request may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Way {
    /// The ring when it fits, else the socket.
    Any,
    /// The socket alone (a request that may wait for long, or a measurement of the socket).
    Socket,
}

fn lost(e: std::io::Error) -> FsError {
    FsError::new(
        Errno::HostDown,
        format!("lost the connection to the daemon: {e}"),
    )
}

/// Whether this process asks for a ring: unless `TESSERA_RING=0`.
fn wants_ring() -> bool {
    std::env::var_os("TESSERA_RING").is_none_or(|v| v != "0")
}

/// Maps the ring the daemon made; without it (another PID namespace, say) every request
/// takes the socket.
fn open_ring(at: RegionAt) -> Option<Ring> {
    let path = format!("/proc/{}/fd/{}", at.pid, at.fd);
    Ring::open(std::path::Path::new(&path)).ok()
}

/// Whether an error means the daemon went away (worth a reconnect), not a refused request.
pub fn is_disconnect(e: &FsError) -> bool {
    e.errno == Errno::ConnRefused || (e.errno == Errno::HostDown && e.message.starts_with("lost"))
}

impl Conn {
    /// Connects and says hello; returns the connection and what the daemon bound (the
    /// client id, its node, its invalidation board).
    pub fn connect(
        socket: &Path,
        instance: &Path,
        max_frame: usize,
        resume: Option<u64>,
    ) -> FsResult<(Conn, Bound)> {
        let stream = UnixStream::connect(socket).map_err(|e| {
            let why = match e.kind() {
                ErrorKind::NotFound | ErrorKind::ConnectionRefused => {
                    "no Tessera daemon is listening there"
                }
                ErrorKind::PermissionDenied => {
                    "permission denied (the instance belongs to another user)"
                }
                _ => "cannot connect",
            };
            let errno = if e.kind() == ErrorKind::PermissionDenied {
                Errno::Access
            } else {
                Errno::ConnRefused
            };
            FsError::new(
                errno,
                format!(
                    "{why}: {} ({e}); start the instance with `tessera start --instance {}`",
                    socket.display(),
                    instance.display()
                ),
            )
        })?;
        // The daemon is the user's own: a socket another user made where the daemon's belongs
        // (a burst-buffer root they made first) would be told every name and write.
        let cred = rustix::net::sockopt::socket_peercred(&stream).map_err(|e| {
            FsError::io(
                format!("checking who serves {}", socket.display()),
                &e.into(),
            )
        })?;
        let me = rustix::process::geteuid();
        if cred.uid != me {
            return Err(FsError::new(
                Errno::Access,
                format!(
                    "{} is served by a process of uid {}, not by you (uid {}): it is not your daemon; remove it, or choose a burst-buffer root of your own",
                    socket.display(),
                    cred.uid.as_raw(),
                    me.as_raw()
                ),
            ));
        }
        // Held for the process's life, out of the way of descriptors the program places
        // (`tessera_logstore::library_fds`).
        let stream = Held::new(stream)?;
        let mut conn = Conn {
            stream,
            max_frame,
            buf: Vec::new(),
            data_at: 0,
            answer_in_ring: false,
            ring: None,
            answered_in_us: [0; KINDS],
            reported: [0; tessera_proto::reports::SLOTS],
        };
        let hello = Hello {
            version: PROTOCOL_VERSION,
            pid: std::process::id(),
            resume,
            ring: wants_ring(),
        };
        let bound = conn.call(hello)?;
        conn.ring = bound.ring.and_then(open_ring);
        Ok((conn, bound))
    }

    /// Adds `bytes` to the figure the daemon's metrics read in `slot` of the ring (see
    /// `tessera_proto::reports`); without a ring, the daemon does not learn of them.
    pub fn report(&mut self, slot: usize, bytes: u64) {
        if let Some(ring) = &self.ring {
            self.reported[slot] = self.reported[slot].wrapping_add(bytes);
            ring.report(slot, self.reported[slot]);
        }
    }

    /// Whether small requests go through a ring.
    pub fn has_ring(&self) -> bool {
        self.ring.is_some()
    }

    /// Sends a request and waits for its reply. The data that follows a `Data` reply is then
    /// available from [`Conn::data`].
    pub fn call<R: ClientCall>(&mut self, req: R) -> FsResult<R::Reply> {
        self.exchange(&frame::encode(&req.into()), Way::Any)?;
        self.reply::<R>()
    }

    /// Sends an encoded request (through the ring when `way` allows and it fits) and reads
    /// the frame of its answer.
    pub fn exchange(&mut self, body: &[u8], way: Way) -> FsResult<()> {
        self.answer_in_ring = false;
        if way == Way::Any
            && let Some(ring) = &mut self.ring
            && let Some(posted) = ring.post(body)
        {
            let kind = body.first().map_or(0, |&t| usize::from(t).min(KINDS - 1));
            let start = std::time::Instant::now();
            let answered = self.exchange_in_ring(posted, kind);
            // Only a request the daemon was watching for, answered in the ring, says how
            // fast its kind is answered (a rung daemon's wake-up says nothing of it).
            match answered {
                Ok(Place::Ring) if !posted.wake => {
                    let took = start.elapsed().as_micros().min(u128::from(u32::MAX)) as u32;
                    self.answered_in_us[kind] = took;
                }
                // Its answers are large: watching the ring for the next one is no use.
                Ok(Place::Socket) => self.answered_in_us[kind] = u32::MAX,
                _ => {}
            }
            return answered.map(drop);
        }
        // A daemon that refuses us (wrong uid, bad hello) answers and hangs up, possibly before
        // our write lands: read its answer even if the write failed.
        let stream = self.stream.get();
        let wrote = frame::write_frame(&mut &*stream, body);
        if let Err(e) = frame::read_frame_into(&mut &*stream, self.max_frame, &mut self.buf) {
            return Err(lost(wrote.err().unwrap_or(e)));
        }
        Ok(())
    }

    /// Waits for the answer to a request placed in the ring; says where it came.
    fn exchange_in_ring(&mut self, posted: tessera_shm::Posted, kind: usize) -> FsResult<Place> {
        let ring = self.ring.as_ref().expect("posted in the ring");
        let stream = self.stream.get();
        if posted.wake {
            // An empty frame: the daemon sleeps on the socket, and this rings it.
            frame::write_frame(&mut &*stream, &[]).map_err(lost)?;
        }
        let mut spin = if u128::from(self.answered_in_us[kind]) <= tessera_shm::SPIN.as_micros() {
            tessera_shm::SPIN
        } else {
            Duration::ZERO
        };
        loop {
            match ring.wait(posted.seq, spin, NAP) {
                Some(Place::Ring) => {
                    // Read in place (see `answer`): a read's bytes are copied once, into
                    // the caller's buffer.
                    self.answer_in_ring = true;
                    return Ok(Place::Ring);
                }
                Some(Place::Socket) => break,
                None => {
                    spin = Duration::ZERO;
                    // Nothing yet: a daemon that died hung up; a refusal waits as a frame.
                    let mut peek = [0u8; 1];
                    match rustix::net::recv(
                        &*stream,
                        &mut peek,
                        rustix::net::RecvFlags::PEEK | rustix::net::RecvFlags::DONTWAIT,
                    ) {
                        // An answer published just before the daemon hung up is still one.
                        Ok((0, _))
                            if ring
                                .wait(posted.seq, Duration::ZERO, Duration::ZERO)
                                .is_some() => {}
                        Ok((0, _)) => {
                            return Err(lost(std::io::ErrorKind::UnexpectedEof.into()));
                        }
                        Ok(_) => break,
                        Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => {}
                        Err(e) => return Err(lost(e.into())),
                    }
                }
            }
        }
        frame::read_frame_into(&mut &*stream, self.max_frame, &mut self.buf).map_err(lost)?;
        Ok(Place::Socket)
    }

    /// The last answer's bytes: in the ring's answer area, or in `buf`.
    fn answer(&self) -> FsResult<&[u8]> {
        match &self.ring {
            Some(ring) if self.answer_in_ring => ring
                .answer_in_place()
                .map_err(|e| FsError::new(Errno::Proto, format!("request ring: {e}"))),
            _ => Ok(&self.buf),
        }
    }

    /// Decodes the last answer as the reply of `R`; an error answer becomes `Err`.
    pub fn reply<R: ClientCall>(&mut self) -> FsResult<R::Reply> {
        // No data unless this answer decodes.
        self.data_at = usize::MAX;
        let answer = self.answer()?;
        let (reply, rest) = decode_answer::<R::Reply>(answer)?;
        self.data_at = answer.len() - rest.len();
        Ok(reply)
    }

    /// The data trailer of the last answer.
    pub fn data(&self) -> &[u8] {
        self.answer()
            .map_or(&[], |a| &a[self.data_at.min(a.len())..])
    }
}
