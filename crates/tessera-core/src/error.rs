//! Errors with errno-style codes, shared by daemon, client and every interface above them.
//!
//! Each error carries the code a POSIX program would see and a message that names what was
//! wrong and how to fix it. They cross the wire unchanged, so a failure deep in a remote
//! daemon reaches the user with its original explanation.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The errno-style code of an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Errno {
    /// No such file or directory.
    NoEnt,
    /// File exists.
    Exist,
    /// A path component is not a directory.
    NotDir,
    /// Is a directory.
    IsDir,
    /// Directory not empty.
    NotEmpty,
    /// Permission denied.
    Access,
    /// No space left on the burst buffer.
    NoSpace,
    /// Invalid argument.
    Inval,
    /// Input/output error (a log or the PFS copy could not be read or written).
    Io,
    /// Bad file handle.
    BadF,
    /// The daemon is not running or refused the connection.
    ConnRefused,
    /// The path is not inside the Tessera file system.
    XDev,
    /// No data at the requested place (read past end of file).
    NoData,
    /// A path or a name is too long.
    NameTooLong,
    /// Another daemon of the instance cannot be reached.
    HostDown,
    /// A peer broke the protocol (malformed or unauthenticated frame).
    Proto,
    /// A message exceeds the maximum frame size.
    MsgSize,
    /// The operation is not supported (yet).
    NotSup,
    /// A file offset or request is larger than Tessera accepts.
    FBig,
    /// Try again: a byte-range lock is held by another process.
    Again,
    /// No such device or address (lseek SEEK_DATA/SEEK_HOLE past the end).
    Nxio,
    /// Not a terminal / inappropriate ioctl for the file.
    NoTty,
    /// Operation not permitted.
    Perm,
    /// The file does not support the operation on this device (mmap of a Tessera file).
    NoDev,
    /// A result does not fit the caller's buffer.
    Range,
    /// The resource is in use (a client id bound to a live connection).
    Busy,
    /// A symbolic link where Tessera does not follow one (a change through a PFS link).
    Loop,
    /// A name is not a valid character sequence (not UTF-8).
    IlSeq,
    /// No address of this host matches the network a daemon was told to listen on.
    AddrNotAvail,
    /// A NULL (or otherwise unusable) pointer was passed for a buffer or a string.
    Fault,
    /// A lock (or a write made under it) whose lease ran out: it was revoked.
    Stale,
    /// A transaction that was asked to commit was aborted.
    Canceled,
    /// A wait (for a catalogue version) ran out of time.
    TimedOut,
    /// An argument too large (an extended attribute's value).
    TooBig,
    /// Too many names for one file (hard links).
    MLink,
    /// Too many open descriptors in the process.
    MFile,
}

impl Errno {
    /// The Linux errno value.
    pub fn code(self) -> i32 {
        match self {
            Errno::NoEnt => libc::ENOENT,
            Errno::Exist => libc::EEXIST,
            Errno::NotDir => libc::ENOTDIR,
            Errno::IsDir => libc::EISDIR,
            Errno::NotEmpty => libc::ENOTEMPTY,
            Errno::Access => libc::EACCES,
            Errno::NoSpace => libc::ENOSPC,
            Errno::Inval => libc::EINVAL,
            Errno::Io => libc::EIO,
            Errno::BadF => libc::EBADF,
            Errno::ConnRefused => libc::ECONNREFUSED,
            Errno::XDev => libc::EXDEV,
            Errno::NoData => libc::ENODATA,
            Errno::NameTooLong => libc::ENAMETOOLONG,
            Errno::HostDown => libc::EHOSTDOWN,
            Errno::Proto => libc::EPROTO,
            Errno::MsgSize => libc::EMSGSIZE,
            Errno::NotSup => libc::ENOTSUP,
            Errno::FBig => libc::EFBIG,
            Errno::Again => libc::EAGAIN,
            Errno::Nxio => libc::ENXIO,
            Errno::NoTty => libc::ENOTTY,
            Errno::Perm => libc::EPERM,
            Errno::NoDev => libc::ENODEV,
            Errno::Range => libc::ERANGE,
            Errno::Busy => libc::EBUSY,
            Errno::Loop => libc::ELOOP,
            Errno::IlSeq => libc::EILSEQ,
            Errno::AddrNotAvail => libc::EADDRNOTAVAIL,
            Errno::Fault => libc::EFAULT,
            Errno::Stale => libc::ESTALE,
            Errno::Canceled => libc::ECANCELED,
            Errno::TimedOut => libc::ETIMEDOUT,
            Errno::TooBig => libc::E2BIG,
            Errno::MLink => libc::EMLINK,
            Errno::MFile => libc::EMFILE,
        }
    }

    /// The symbolic name, e.g. `ENOENT`.
    pub fn name(self) -> &'static str {
        match self {
            Errno::NoEnt => "ENOENT",
            Errno::Exist => "EEXIST",
            Errno::NotDir => "ENOTDIR",
            Errno::IsDir => "EISDIR",
            Errno::NotEmpty => "ENOTEMPTY",
            Errno::Access => "EACCES",
            Errno::NoSpace => "ENOSPC",
            Errno::Inval => "EINVAL",
            Errno::Io => "EIO",
            Errno::BadF => "EBADF",
            Errno::ConnRefused => "ECONNREFUSED",
            Errno::XDev => "EXDEV",
            Errno::NoData => "ENODATA",
            Errno::NameTooLong => "ENAMETOOLONG",
            Errno::HostDown => "EHOSTDOWN",
            Errno::Proto => "EPROTO",
            Errno::MsgSize => "EMSGSIZE",
            Errno::NotSup => "ENOTSUP",
            Errno::FBig => "EFBIG",
            Errno::Again => "EAGAIN",
            Errno::Nxio => "ENXIO",
            Errno::NoTty => "ENOTTY",
            Errno::Perm => "EPERM",
            Errno::NoDev => "ENODEV",
            Errno::Range => "ERANGE",
            Errno::Busy => "EBUSY",
            Errno::Loop => "ELOOP",
            Errno::IlSeq => "EILSEQ",
            Errno::AddrNotAvail => "EADDRNOTAVAIL",
            Errno::Fault => "EFAULT",
            Errno::Stale => "ESTALE",
            Errno::Canceled => "ECANCELED",
            Errno::TimedOut => "ETIMEDOUT",
            Errno::TooBig => "E2BIG",
            Errno::MLink => "EMLINK",
            Errno::MFile => "EMFILE",
        }
    }

    /// The code for an operating-system error, falling back to `EIO`.
    pub fn from_io(e: &std::io::Error) -> Errno {
        match e.raw_os_error() {
            Some(libc::ENOENT) => Errno::NoEnt,
            Some(libc::EEXIST) => Errno::Exist,
            Some(libc::ENOTDIR) => Errno::NotDir,
            Some(libc::EISDIR) => Errno::IsDir,
            Some(libc::ENOTEMPTY) => Errno::NotEmpty,
            Some(libc::EACCES) | Some(libc::EPERM) => Errno::Access,
            Some(libc::ENOSPC) | Some(libc::EDQUOT) => Errno::NoSpace,
            Some(libc::EINVAL) => Errno::Inval,
            Some(libc::ECONNREFUSED) => Errno::ConnRefused,
            Some(libc::ENAMETOOLONG) => Errno::NameTooLong,
            Some(libc::ELOOP) => Errno::Loop,
            Some(libc::EXDEV) => Errno::XDev,
            Some(libc::EFBIG) => Errno::FBig,
            Some(libc::EMFILE) | Some(libc::ENFILE) => Errno::MFile,
            _ => Errno::Io,
        }
    }
}

/// An error as the user sees it: a code and an explanation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsError {
    pub errno: Errno,
    pub message: String,
}

impl FsError {
    pub fn new(errno: Errno, message: impl Into<String>) -> Self {
        FsError {
            errno,
            message: message.into(),
        }
    }

    /// Wraps an OS error with what was being done when it happened.
    pub fn io(context: impl fmt::Display, e: &std::io::Error) -> Self {
        FsError::new(Errno::from_io(e), format!("{context}: {e}"))
    }

    /// The Linux errno value.
    pub fn code(&self) -> i32 {
        self.errno.code()
    }
}

impl fmt::Display for FsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.errno.name(), self.message)
    }
}

impl std::error::Error for FsError {}

impl From<FsError> for std::io::Error {
    fn from(e: FsError) -> Self {
        std::io::Error::new(
            std::io::Error::from_raw_os_error(e.code()).kind(),
            e.to_string(),
        )
    }
}

pub type FsResult<T> = Result<T, FsError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_code_and_reason() {
        let e = FsError::new(Errno::NoSpace, "burst buffer full");
        assert_eq!(e.to_string(), "ENOSPC: burst buffer full");
        assert_eq!(e.code(), libc::ENOSPC);
    }

    #[test]
    fn os_errors_keep_their_code() {
        let e = std::io::Error::from_raw_os_error(libc::ENOSPC);
        assert_eq!(FsError::io("writing log", &e).errno, Errno::NoSpace);
    }
}
