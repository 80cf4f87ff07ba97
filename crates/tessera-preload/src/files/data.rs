//! Reading and writing at the file position or at an offset: `read`, `write`, `pread`,
//! `pwrite`, and the checks of the caller's buffers.

use crate::state::{self, Desc, DescRef, Object, desc};
use crate::{real, run};
use libc::{c_int, c_void, off_t, size_t, ssize_t};
use tessera_client::{Errno, FsError, FsResult};

/// Runs `f` on the open Tessera file behind descriptor `fd` (of description `d`), with the
/// file position to read and move. A write of `reserve` bytes at the position (not
/// `O_APPEND`) on a position shared with other processes takes its range from the kernel in
/// one step, as the kernel's own writes do, so two processes writing through one
/// description never write over each other.
pub(crate) fn with_file<T>(
    fd: c_int,
    d: &DescRef,
    reserve: Option<u64>,
    f: impl FnOnce(&mut tessera_client::File, &mut u64, c_int) -> FsResult<T>,
) -> FsResult<T> {
    let mut g = state::lock_desc(d);
    let reserved = match reserve {
        Some(len) if g.shared && g.flags & libc::O_APPEND == 0 => reserve_shared(fd, len),
        _ => None,
    };
    let mut pos = reserved.map_or_else(|| g.position(fd), |(start, _)| start);
    let before = pos;
    let Desc {
        obj, flags, path, ..
    } = &mut *g;
    let r = match obj {
        Object::File(file) => f(file, &mut pos, *flags),
        Object::Dir => Err(FsError::new(Errno::IsDir, format!("{path} is a directory"))),
        Object::Path => Err(FsError::new(
            Errno::BadF,
            format!("{path} was opened with O_PATH: it cannot be read or written"),
        )),
    };
    match reserved {
        // What the write did not use goes back (all of it, if it failed).
        Some((_, end)) if pos != end => {
            let back = pos as i64 - end as i64;
            // SAFETY: a plain call on the placeholder.
            unsafe { real::lseek64(fd, back, libc::SEEK_CUR) };
        }
        Some(_) => {}
        None if pos != before => g.set_position(fd, pos),
        None => {}
    }
    r
}

/// Takes `len` bytes from a shared position in one step: (where they start, where they end).
pub(crate) fn reserve_shared(fd: c_int, len: u64) -> Option<(u64, u64)> {
    let step = off_t::try_from(len).ok()?;
    // SAFETY: a plain call on the placeholder, which holds the shared position.
    let end = unsafe { real::lseek64(fd, step, libc::SEEK_CUR) };
    let end = u64::try_from(end).ok()?;
    Some((end - len, end))
}

/// The error for a NULL buffer with a nonzero length, as the kernel answers it.
pub fn efault(what: &str, n: size_t) -> FsError {
    FsError::new(
        Errno::Fault,
        format!("{what} is NULL but {n} bytes were asked for"),
    )
}

/// The caller's read buffer.
///
/// # Safety
/// `buf` is NULL or points to `n` writable bytes that outlive `'a`.
pub(crate) unsafe fn slice_mut<'a>(buf: *mut c_void, n: size_t) -> FsResult<&'a mut [u8]> {
    if n == 0 {
        return Ok(&mut []);
    }
    if buf.is_null() {
        return Err(efault("the buffer", n));
    }
    // SAFETY: non-null, so `n` writable bytes by this function's contract.
    Ok(unsafe { std::slice::from_raw_parts_mut(buf.cast(), n) })
}

/// The caller's write buffer.
///
/// # Safety
/// `buf` is NULL or points to `n` readable bytes that outlive `'a`.
pub(crate) unsafe fn slice<'a>(buf: *const c_void, n: size_t) -> FsResult<&'a [u8]> {
    if n == 0 {
        return Ok(&[]);
    }
    if buf.is_null() {
        return Err(efault("the buffer", n));
    }
    // SAFETY: non-null, so `n` readable bytes by this function's contract.
    Ok(unsafe { std::slice::from_raw_parts(buf.cast(), n) })
}

pub(crate) fn offset(off: off_t) -> FsResult<u64> {
    u64::try_from(off).map_err(|_| FsError::new(Errno::Inval, format!("negative offset {off}")))
}

pub(crate) fn write_desc(fd: c_int, d: &DescRef, buf: &[u8], at: Option<u64>) -> FsResult<ssize_t> {
    let reserve = at.is_none().then_some(buf.len() as u64);
    with_file(fd, d, reserve, |f, pos, flags| {
        let off = match at {
            Some(o) => o,
            None if flags & libc::O_APPEND != 0 => f.append_offset(buf.len() as u64)?,
            None => *pos,
        };
        let n = match crate::atomic_scope::clip_write(off, buf.len() as u64) {
            None => f.write_at(buf, off)?,
            // Inside an atomic MPI-IO access: only its own bytes (see `atomic_scope`).
            Some(parts) => {
                for (s, e) in parts {
                    let at = (s - off) as usize;
                    f.write_at(&buf[at..at + (e - s) as usize], s)?;
                }
                buf.len()
            }
        };
        if at.is_none() {
            *pos = off + n as u64;
        }
        Ok(n as ssize_t)
    })
}

pub(crate) fn read_desc(
    fd: c_int,
    d: &DescRef,
    buf: &mut [u8],
    at: Option<u64>,
) -> FsResult<ssize_t> {
    with_file(fd, d, None, |f, pos, _| {
        let off = at.unwrap_or(*pos);
        let n = f.read_at(buf, off)?;
        if at.is_none() {
            *pos = off + n as u64;
        }
        Ok(n as ssize_t)
    })
}

/// # Safety
/// As `read(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t {
    match desc(fd) {
        // SAFETY: `buf` holds `n` bytes (read(2)'s contract).
        Some(d) => run(|| read_desc(fd, &d, unsafe { slice_mut(buf, n) }?, None)),
        // SAFETY: the caller's arguments, passed unchanged to the real `read`, whose contract the caller met in calling it.
        None => unsafe { real::read(fd, buf, n) },
    }
}
/// # Safety
/// As `write(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t {
    match desc(fd) {
        // SAFETY: `buf` holds `n` bytes (write(2)'s contract).
        Some(d) => run(|| write_desc(fd, &d, unsafe { slice(buf, n) }?, None)),
        // SAFETY: the caller's arguments, passed unchanged to the real `write`, whose contract the caller met in calling it.
        None => unsafe { real::write(fd, buf, n) },
    }
}
/// # Safety
/// As `pread(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pread(fd: c_int, buf: *mut c_void, n: size_t, off: off_t) -> ssize_t {
    match desc(fd) {
        // SAFETY: `buf` holds `n` bytes (pread(2)'s contract).
        Some(d) => run(|| read_desc(fd, &d, unsafe { slice_mut(buf, n) }?, Some(offset(off)?))),
        // SAFETY: the caller's arguments, passed unchanged to the real `pread64`, whose contract the caller met in calling it.
        None => unsafe { real::pread64(fd, buf, n, off) },
    }
}
alias!(pread64 => pread(fd: c_int, buf: *mut c_void, n: size_t, off: off_t) -> ssize_t);
/// # Safety
/// As `pwrite(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pwrite(fd: c_int, buf: *const c_void, n: size_t, off: off_t) -> ssize_t {
    match desc(fd) {
        // SAFETY: `buf` holds `n` bytes (pwrite(2)'s contract).
        Some(d) => run(|| write_desc(fd, &d, unsafe { slice(buf, n) }?, Some(offset(off)?))),
        // SAFETY: the caller's arguments, passed unchanged to the real `pwrite64`, whose contract the caller met in calling it.
        None => unsafe { real::pwrite64(fd, buf, n, off) },
    }
}
alias!(pwrite64 => pwrite(fd: c_int, buf: *const c_void, n: size_t, off: off_t) -> ssize_t);
