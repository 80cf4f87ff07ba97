//! The connection from a process to its node's daemon: a blocking Unix socket carrying one
//! request and one response at a time.

use std::io::ErrorKind;
use std::os::unix::net::UnixStream;
use std::path::Path;
use tessera_core::{Errno, FsError, FsResult};
use tessera_logstore::library_fds::Held;
use tessera_proto::frame;
use tessera_proto::{Bound, ClientCall, Hello, PROTOCOL_VERSION, decode_answer};

pub struct Conn {
    stream: Held<UnixStream>,
    max_frame: usize,
    /// The last answer's frame, kept for its data trailer and reused for the next one (large
    /// reads would otherwise map fresh pages for every answer).
    buf: Vec<u8>,
    /// Where the data trailer of the last answer starts in `buf`.
    data_at: usize,
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
        };
        let hello = Hello {
            version: PROTOCOL_VERSION,
            pid: std::process::id(),
            resume,
        };
        let bound = conn.call(hello)?;
        Ok((conn, bound))
    }

    /// Sends a request and waits for its reply. The data that follows a `Data` reply is then
    /// available from [`Conn::data`].
    pub fn call<R: ClientCall>(&mut self, req: R) -> FsResult<R::Reply> {
        self.exchange(&frame::encode(&req.into()))?;
        self.reply::<R>()
    }

    /// Sends an encoded request and reads the frame of its answer.
    pub fn exchange(&mut self, body: &[u8]) -> FsResult<()> {
        let lost = |e: std::io::Error| {
            FsError::new(
                Errno::HostDown,
                format!("lost the connection to the daemon: {e}"),
            )
        };
        // A daemon that refuses us (wrong uid, bad hello) answers and hangs up, possibly before
        // our write lands: read its answer even if the write failed.
        let stream = self.stream.get();
        let wrote = frame::write_frame(&mut &*stream, body);
        if let Err(e) = frame::read_frame_into(&mut &*stream, self.max_frame, &mut self.buf) {
            return Err(lost(wrote.err().unwrap_or(e)));
        }
        Ok(())
    }

    /// Decodes the last answer as the reply of `R`; an error answer becomes `Err`.
    pub fn reply<R: ClientCall>(&mut self) -> FsResult<R::Reply> {
        self.data_at = self.buf.len();
        let (reply, rest) = decode_answer::<R::Reply>(&self.buf)?;
        self.data_at = self.buf.len() - rest.len();
        Ok(reply)
    }

    /// The data trailer of the last answer.
    pub fn data(&self) -> &[u8] {
        &self.buf[self.data_at..]
    }
}
