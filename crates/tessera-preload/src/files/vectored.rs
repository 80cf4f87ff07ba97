//! The vectored forms: `readv`, `writev`, `preadv`, `pwritev` and their `2` forms.

use super::*;
use crate::state::{DescRef, desc};
use crate::{real, run};
use libc::{c_int, iovec, off_t, ssize_t};
use tessera_client::{Errno, FsError, FsResult};

/// The caller's iovec array.
///
/// # Safety
/// `iov` is NULL or points to `n` iovecs that outlive `'a`.
pub(crate) unsafe fn iovecs<'a>(iov: *const iovec, n: c_int) -> FsResult<&'a [iovec]> {
    if !(0..=libc::UIO_MAXIOV).contains(&n) {
        return Err(FsError::new(
            Errno::Inval,
            format!("iovec count {n} is outside 0..={}", libc::UIO_MAXIOV),
        ));
    }
    if n == 0 {
        return Ok(&[]);
    }
    if iov.is_null() {
        return Err(FsError::new(
            Errno::Fault,
            format!("the iovec array is NULL but its count is {n}"),
        ));
    }
    // SAFETY: non-null, so `n` iovecs by this function's contract.
    Ok(unsafe { std::slice::from_raw_parts(iov, n as usize) })
}

/// Gathers the buffers into one write (one log append, one index record).
///
/// # Safety
/// `iov` is NULL or points to `n` iovecs, each NULL or pointing to `iov_len` readable bytes.
pub(crate) unsafe fn writev_desc(
    fd: c_int,
    d: &DescRef,
    iov: *const iovec,
    n: c_int,
    at: Option<u64>,
) -> FsResult<ssize_t> {
    // SAFETY: this function's contract.
    let v = unsafe { iovecs(iov, n) }?;
    let total: usize = v.iter().map(|i| i.iov_len).sum();
    let mut buf = Vec::with_capacity(total);
    for i in v {
        // SAFETY: each iovec is NULL or holds `iov_len` bytes (this function's contract).
        buf.extend_from_slice(unsafe { slice(i.iov_base, i.iov_len) }?);
    }
    write_desc(fd, d, &buf, at)
}

/// Reads into the buffers in order.
///
/// # Safety
/// `iov` is NULL or points to `n` iovecs, each NULL or pointing to `iov_len` writable bytes.
pub(crate) unsafe fn readv_desc(
    fd: c_int,
    d: &DescRef,
    iov: *const iovec,
    n: c_int,
    at: Option<u64>,
) -> FsResult<ssize_t> {
    // SAFETY: this function's contract.
    let v = unsafe { iovecs(iov, n) }?;
    if let Some(i) = v.iter().find(|i| i.iov_base.is_null() && i.iov_len > 0) {
        return Err(efault("an iovec's base", i.iov_len));
    }
    let total: usize = v.iter().map(|i| i.iov_len).sum();
    let mut buf = vec![0u8; total];
    let got = read_desc(fd, d, &mut buf, at)? as usize;
    let mut done = 0;
    for i in v {
        if done >= got {
            break;
        }
        let k = i.iov_len.min(got - done);
        // SAFETY: non-null (checked above), so `iov_len >= k` writable bytes (the contract).
        unsafe { slice_mut(i.iov_base, k) }?.copy_from_slice(&buf[done..done + k]);
        done += k;
    }
    Ok(got as ssize_t)
}

/// # Safety
/// As `writev(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t {
    match desc(fd) {
        // SAFETY: `iov` holds `n` iovecs of valid buffers (the call's contract).
        Some(d) => run(|| unsafe { writev_desc(fd, &d, iov, n, None) }),
        // SAFETY: the caller's arguments, passed unchanged to the real `writev`, whose contract the caller met in calling it.
        None => unsafe { real::writev(fd, iov, n) },
    }
}
/// # Safety
/// As `readv(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t {
    match desc(fd) {
        // SAFETY: `iov` holds `n` iovecs of valid buffers (the call's contract).
        Some(d) => run(|| unsafe { readv_desc(fd, &d, iov, n, None) }),
        // SAFETY: the caller's arguments, passed unchanged to the real `readv`, whose contract the caller met in calling it.
        None => unsafe { real::readv(fd, iov, n) },
    }
}
/// # Safety
/// As `pwritev(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pwritev(fd: c_int, iov: *const iovec, n: c_int, off: off_t) -> ssize_t {
    match desc(fd) {
        // SAFETY: `iov` holds `n` iovecs of valid buffers (the call's contract).
        Some(d) => run(|| unsafe { writev_desc(fd, &d, iov, n, Some(offset(off)?)) }),
        // SAFETY: the caller's arguments, passed unchanged to the real `pwritev64`, whose contract the caller met in calling it.
        None => unsafe { real::pwritev64(fd, iov, n, off) },
    }
}
alias!(pwritev64 => pwritev(fd: c_int, iov: *const iovec, n: c_int, off: off_t) -> ssize_t);
/// # Safety
/// As `preadv(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preadv(fd: c_int, iov: *const iovec, n: c_int, off: off_t) -> ssize_t {
    match desc(fd) {
        // SAFETY: `iov` holds `n` iovecs of valid buffers (the call's contract).
        Some(d) => run(|| unsafe { readv_desc(fd, &d, iov, n, Some(offset(off)?)) }),
        // SAFETY: the caller's arguments, passed unchanged to the real `preadv64`, whose contract the caller met in calling it.
        None => unsafe { real::preadv64(fd, iov, n, off) },
    }
}
alias!(preadv64 => preadv(fd: c_int, iov: *const iovec, n: c_int, off: off_t) -> ssize_t);
/// `pwritev2`: offset -1 means the current position; the flags (RWF_*) are hints.
///
/// # Safety
/// As `pwritev2(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pwritev2(
    fd: c_int,
    iov: *const iovec,
    n: c_int,
    off: off_t,
    flags: c_int,
) -> ssize_t {
    match desc(fd) {
        // SAFETY: `iov` holds `n` iovecs of valid buffers (the call's contract).
        Some(d) => run(|| unsafe {
            writev_desc(
                fd,
                &d,
                iov,
                n,
                (off != -1).then(|| offset(off)).transpose()?,
            )
        }),
        // SAFETY: the caller's arguments, passed unchanged to the real `pwritev64v2`, whose contract the caller met in calling it.
        None => unsafe { real::pwritev64v2(fd, iov, n, off, flags) },
    }
}
alias!(pwritev64v2 => pwritev2(fd: c_int, iov: *const iovec, n: c_int, off: off_t, flags: c_int) -> ssize_t);
/// # Safety
/// As `preadv2(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preadv2(
    fd: c_int,
    iov: *const iovec,
    n: c_int,
    off: off_t,
    flags: c_int,
) -> ssize_t {
    match desc(fd) {
        // SAFETY: `iov` holds `n` iovecs of valid buffers (the call's contract).
        Some(d) => {
            // SAFETY: `iov` is NULL or `n` iovecs of writable buffers per preadv2(2) on our caller,
            // which is `readv_desc`'s contract; `fd` and `d` name the same descriptor.
            run(|| unsafe {
                readv_desc(
                    fd,
                    &d,
                    iov,
                    n,
                    (off != -1).then(|| offset(off)).transpose()?,
                )
            })
        }
        // SAFETY: the caller's arguments, passed unchanged to the real `preadv64v2`, whose contract the caller met in calling it.
        None => unsafe { real::preadv64v2(fd, iov, n, off, flags) },
    }
}
alias!(preadv64v2 => preadv2(fd: c_int, iov: *const iovec, n: c_int, off: off_t, flags: c_int) -> ssize_t);
