//! The connection from a process to its node's daemon: a blocking Unix socket carrying one
//! request and one response at a time.

use std::io::ErrorKind;
use std::os::unix::net::UnixStream;
use std::path::Path;
use tessera_core::{Errno, FsError, FsResult};
use tessera_proto::frame::{self, encode};
use tessera_proto::{PROTOCOL_VERSION, Request, Response};

pub struct Conn {
    stream: UnixStream,
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
    /// Connects and says hello; returns the connection and the client id the daemon bound.
    pub fn connect(
        socket: &Path,
        instance: &Path,
        max_frame: usize,
        resume: Option<u64>,
    ) -> FsResult<(Conn, u64, u32)> {
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
        let mut conn = Conn {
            stream,
            max_frame,
            buf: Vec::new(),
            data_at: 0,
        };
        let hello = Request::Hello {
            version: PROTOCOL_VERSION,
            pid: std::process::id(),
            resume,
        };
        match conn.call(&hello)? {
            Response::Hello { client, node, .. } => Ok((conn, client, node)),
            other => Err(FsError::new(
                Errno::Proto,
                format!("daemon answered hello with {other:?}"),
            )),
        }
    }

    /// Sends a request and waits for its response; `Response::Err` becomes `Err`. The data that
    /// follows a `Data` answer is then available from [`Conn::data`].
    pub fn call(&mut self, req: &Request) -> FsResult<Response> {
        let lost = |e: std::io::Error| {
            FsError::new(
                Errno::HostDown,
                format!("lost the connection to the daemon: {e}"),
            )
        };
        // A daemon that refuses us (wrong uid, bad hello) answers and hangs up, possibly before
        // our write lands: read its answer even if the write failed.
        let wrote = frame::write_frame(&mut self.stream, &encode(req));
        if let Err(e) = frame::read_frame_into(&mut self.stream, self.max_frame, &mut self.buf) {
            return Err(lost(wrote.err().unwrap_or(e)));
        }
        let (resp, rest): (Response, &[u8]) = frame::split_message(&self.buf)?;
        self.data_at = self.buf.len() - rest.len();
        match resp {
            Response::Err(e) => Err(e),
            Response::Data { len } if len != rest.len() as u64 => Err(FsError::new(
                Errno::Proto,
                format!(
                    "data answer announces {len} bytes but carries {}",
                    rest.len()
                ),
            )),
            r => Ok(r),
        }
    }

    /// The data trailer of the last answer.
    pub fn data(&self) -> &[u8] {
        &self.buf[self.data_at..]
    }
}
