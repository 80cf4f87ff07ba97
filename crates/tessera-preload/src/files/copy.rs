//! Copies between descriptors and advice: `copy_file_range`, `sendfile`, `posix_fadvise`.

use crate::state::{Busy, desc};
use crate::{fail, real};
use libc::{c_int, c_uint, off_t, size_t, ssize_t};
use tessera_client::{Errno, FsError};

pub(crate) fn no_copy(fd: c_int) -> FsError {
    FsError::new(
        Errno::XDev,
        format!(
            "descriptor {fd} is a Tessera file: in-kernel copies do not reach it (programs fall back to read and write)"
        ),
    )
}

/// # Safety
/// As `copy_file_range(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn copy_file_range(
    fi: c_int,
    oi: *mut i64,
    fo: c_int,
    oo: *mut i64,
    n: size_t,
    flags: c_uint,
) -> ssize_t {
    crate::guarded(|| {
        for fd in [fi, fo] {
            if desc(fd).is_some() {
                let _b = Busy::enter();
                // EXDEV is the answer a program expects between file systems.
                return fail(&no_copy(fd)) as ssize_t;
            }
        }
        // SAFETY: the caller's arguments, passed unchanged to the real `copy_file_range`, whose contract the caller met in calling it.
        unsafe { real::copy_file_range(fi, oi, fo, oo, n, flags) }
    })
}

/// # Safety
/// As `sendfile(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sendfile(out: c_int, inp: c_int, off: *mut i64, n: size_t) -> ssize_t {
    crate::guarded(|| {
        for fd in [out, inp] {
            if desc(fd).is_some() {
                let _b = Busy::enter();
                let e = FsError::new(
                    Errno::Inval,
                    format!("sendfile: descriptor {fd} is a Tessera file; use read and write"),
                );
                return fail(&e) as ssize_t;
            }
        }
        // SAFETY: the caller's arguments, passed unchanged to the real `sendfile64`, whose contract the caller met in calling it.
        unsafe { real::sendfile64(out, inp, off, n) }
    })
}
alias!(sendfile64 => sendfile(out: c_int, inp: c_int, off: *mut i64, n: size_t) -> ssize_t);

/// Advice is accepted and ignored on Tessera files (returns 0, as for any file system that
/// has no use for it).
///
/// # Safety
/// As `posix_fadvise(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn posix_fadvise(fd: c_int, off: off_t, len: off_t, advice: c_int) -> c_int {
    crate::guarded(|| {
        if desc(fd).is_some() {
            return 0;
        }
        // SAFETY: the caller's arguments, passed unchanged to the real `posix_fadvise64`, whose contract the caller met in calling it.
        unsafe { real::posix_fadvise64(fd, off, len, advice) }
    })
}
alias!(posix_fadvise64 => posix_fadvise(fd: c_int, off: off_t, len: off_t, advice: c_int) -> c_int);
