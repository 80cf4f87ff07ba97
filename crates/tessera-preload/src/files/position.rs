//! The file position, sync and size: `lseek`, `fsync`, `fdatasync`, `ftruncate`.

use super::*;
use crate::state::{self, DescRef, Object, client, desc};
use crate::{ebadf, real, run};
use libc::{c_int, off_t};
use tessera_client::posix::seek_target;
use tessera_client::{Errno, FsError, FsResult};

pub(crate) fn lseek_desc(fd: c_int, d: &DescRef, off: off_t, whence: c_int) -> FsResult<off_t> {
    let mut g = state::lock_desc(d);
    let pos = g.position(fd);
    let size = match &mut g.obj {
        Object::File(f) if matches!(whence, libc::SEEK_END | libc::SEEK_DATA | libc::SEEK_HOLE) => {
            f.len()?
        }
        _ => 0,
    };
    let new = seek_target(pos, size, off, whence)?;
    let new_off = off_t::try_from(new)
        .map_err(|_| FsError::new(Errno::Inval, format!("offset {new} does not fit off_t")))?;
    g.set_position(fd, new);
    Ok(new_off)
}

/// # Safety
/// As `lseek(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lseek(fd: c_int, off: off_t, whence: c_int) -> off_t {
    match desc(fd) {
        Some(d) => run(|| lseek_desc(fd, &d, off, whence)),
        // SAFETY: the caller's arguments, passed unchanged to the real `lseek64`, whose contract the caller met in calling it.
        None => unsafe { real::lseek64(fd, off, whence) },
    }
}
alias!(lseek64 => lseek(fd: c_int, off: off_t, whence: c_int) -> off_t);

pub(crate) fn fsync_desc(d: &DescRef) -> FsResult<c_int> {
    let mut g = state::lock_desc(d);
    match &mut g.obj {
        Object::File(f) => {
            f.fsync()?;
            f.refresh();
            Ok(0)
        }
        _ => Ok(0),
    }
}

/// `fsync`: commit (the writes become visible to every later open or read), make this
/// process's logs of the file durable, and refresh what the process sees of the file. The
/// refresh makes MPI-IO's sync-barrier-sync construct (`MPI_File_sync` is `fsync` in ROMIO and
/// ompio) show the other ranks' writes under the session model too, at one query at the next
/// read (none if the process does not read the file again).
///
/// # Safety
/// As `fsync(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fsync(fd: c_int) -> c_int {
    match desc(fd) {
        Some(d) => run(|| fsync_desc(&d)),
        // SAFETY: the caller's arguments, passed unchanged to the real `fsync`, whose contract the caller met in calling it.
        None => unsafe { real::fsync(fd) },
    }
}
/// # Safety
/// As `fdatasync(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fdatasync(fd: c_int) -> c_int {
    match desc(fd) {
        Some(d) => run(|| fsync_desc(&d)),
        // SAFETY: the caller's arguments, passed unchanged to the real `fdatasync`, whose contract the caller met in calling it.
        None => unsafe { real::fdatasync(fd) },
    }
}

pub(crate) fn ftruncate_desc(d: &DescRef, len: off_t) -> FsResult<c_int> {
    let len = offset(len)?;
    let g = state::lock_desc(d);
    if let Object::File(_) = g.obj {
        if g.flags & libc::O_ACCMODE == libc::O_RDONLY {
            return Err(FsError::new(
                Errno::Inval,
                format!("ftruncate: {} is open read-only", g.path),
            ));
        }
        client()?.truncate(&g.path, len)?;
        return Ok(0);
    }
    Err(FsError::new(
        Errno::IsDir,
        format!("{} is a directory", g.path),
    ))
}

/// # Safety
/// As `ftruncate(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ftruncate(fd: c_int, len: off_t) -> c_int {
    match desc(fd) {
        Some(d) => run(|| ftruncate_desc(&d, len)),
        // SAFETY: the caller's arguments, passed unchanged to the real `ftruncate64`, whose contract the caller met in calling it.
        None => unsafe { real::ftruncate64(fd, len) },
    }
}
alias!(ftruncate64 => ftruncate(fd: c_int, len: off_t) -> c_int);

/// The description of a Tessera descriptor or EBADF (for calls that need one).
pub fn require(fd: c_int) -> FsResult<DescRef> {
    desc(fd).ok_or_else(|| ebadf(fd))
}
