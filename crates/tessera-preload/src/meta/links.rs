//! Links: `symlink` and `link` (and their `at` forms), following links inside Tessera, and
//! `readlink` of links found in the PFS directory.

use super::*;
use crate::state;
use crate::state::{client, desc};
use crate::{real, run, tessera_path};
use libc::{c_char, c_int, size_t, ssize_t};
use tessera_client::{Errno, FileKind, FsError, FsResult};

/// # Safety
/// As `symlink(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn symlink(target: *const c_char, path: *const c_char) -> c_int {
    // SAFETY: `target` and `path` are NUL-terminated per symlink(2) on our caller, the same
    // requirement `symlinkat` has.
    unsafe { symlinkat(target, libc::AT_FDCWD, path) }
}
/// `symlinkat(2)`: a link inside Tessera is made (as a link in the PFS directory, with its
/// target kept as given).
///
/// # Safety
/// As `symlinkat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn symlinkat(
    target: *const c_char,
    dirfd: c_int,
    path: *const c_char,
) -> c_int {
    // SAFETY: `path` is NULL or NUL-terminated per symlinkat(2); `tessera_path` reads only it
    // (`target` is checked and read below).
    match unsafe { tessera_path(dirfd, path) } {
        Some(p) => run(|| {
            let p = p?;
            if target.is_null() {
                return Err(efault("symlink: the target"));
            }
            // SAFETY: NUL-terminated by the caller's contract.
            let t = unsafe { std::ffi::CStr::from_ptr(target) }
                .to_str()
                .map_err(|_| {
                    FsError::new(Errno::Inval, format!("{p}: the link target is not UTF-8"))
                })?;
            client()?.symlink(t, &p).map(|()| 0)
        }),
        None => {
            // SAFETY: NUL-terminated or NULL by the caller's contract.
            let k = unsafe { crate::kernel_at(dirfd, path) };
            // SAFETY: libc's own call, with the caller's arguments (the link's path rewritten
            // where it named a real place through Tessera).
            unsafe { real::symlinkat(target, dirfd, crate::at(&k, path)) }
        }
    }
}

/// # Safety
/// As `link(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn link(old: *const c_char, new: *const c_char) -> c_int {
    // SAFETY: `old` and `new` are NUL-terminated per link(2), as `linkat` requires; both are
    // taken against AT_FDCWD with no flags.
    unsafe { linkat(libc::AT_FDCWD, old, libc::AT_FDCWD, new, 0) }
}
/// `linkat(2)`: a hard link inside Tessera gives the file another name; one between Tessera
/// and another file system fails with `EXDEV`, as between two file systems.
/// `AT_SYMLINK_FOLLOW` links what a symbolic link leads to; `AT_EMPTY_PATH` links the file
/// of descriptor `olddirfd`.
///
/// # Safety
/// As `linkat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn linkat(
    olddirfd: c_int,
    old: *const c_char,
    newdirfd: c_int,
    new: *const c_char,
    flags: c_int,
) -> c_int {
    // SAFETY: NUL-terminated or NULL by the caller's contract.
    let empty = flags & libc::AT_EMPTY_PATH != 0 && !old.is_null() && unsafe { *old } == 0;
    let from = match desc(olddirfd).filter(|_| empty) {
        Some(d) => Some(Ok(state::lock_desc(&d).path.clone())),
        // SAFETY: `old` is NULL or NUL-terminated per linkat(2) on our caller; `tessera_path` only
        // reads it.
        None => unsafe { tessera_path(olddirfd, old) },
    };
    // SAFETY: `new` is NULL or NUL-terminated by linkat(2)'s contract, all `tessera_path` needs.
    let to = unsafe { tessera_path(newdirfd, new) };
    match (from, to) {
        (Some(from), Some(to)) => {
            return run(|| {
                let (from, to) = (from?, to?);
                let known = libc::AT_SYMLINK_FOLLOW | libc::AT_EMPTY_PATH;
                if flags & !known != 0 {
                    return Err(FsError::new(
                        Errno::Inval,
                        format!("linkat: unknown flags {:#x}", flags & !known),
                    ));
                }
                let c = client()?;
                let from = if flags & libc::AT_SYMLINK_FOLLOW != 0 {
                    followed(&c, &from)?
                } else {
                    from
                };
                c.link(&from, &to).map(|()| 0)
            });
        }
        (Some(p), None) | (None, Some(p)) => {
            return run(|| {
                let p = p?;
                Err(FsError::new(
                    Errno::XDev,
                    format!(
                        "{p}: a hard link cannot join Tessera and another file system; copy the file"
                    ),
                ))
            });
        }
        (None, None) => {}
    }
    // SAFETY: NUL-terminated or NULL by the caller's contract.
    let (ko, kn) = unsafe {
        (
            crate::kernel_at(olddirfd, old),
            crate::kernel_at(newdirfd, new),
        )
    };
    // SAFETY: libc's own call, with the caller's arguments (paths rewritten where they named
    // real places through Tessera).
    unsafe {
        real::linkat(
            olddirfd,
            crate::at(&ko, old),
            newdirfd,
            crate::at(&kn, new),
            flags,
        )
    }
}

/// Where the symbolic links from `p` lead, in Tessera (`EXDEV` if they lead out of it,
/// `ELOOP` after 40).
pub(crate) fn followed(c: &tessera_client::Client, p: &str) -> FsResult<String> {
    use tessera_client::posix::{join_user, lexical_normalize, under_prefix};
    let mut p = p.to_string();
    for _ in 0..40 {
        if c.stat(&p)?.kind != FileKind::Symlink {
            return Ok(p);
        }
        let target = c.readlink(&p)?;
        let dir = p
            .rsplit_once('/')
            .map_or("/", |(d, _)| if d.is_empty() { "/" } else { d });
        p = lexical_normalize(&join_user(dir, &target));
        if !under_prefix(&p, state::prefix()) {
            return Err(FsError::new(
                Errno::XDev,
                format!(
                    "{p}: the link leads out of Tessera; a hard link cannot join two file systems"
                ),
            ));
        }
    }
    Err(FsError::new(
        Errno::Loop,
        format!("{p}: too many levels of symbolic links"),
    ))
}

/// The target of a symbolic link found in the PFS directory (Tessera creates none); EINVAL
/// for any other file, as the kernel says.
///
/// # Safety
/// As `readlink(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn readlink(path: *const c_char, buf: *mut c_char, n: size_t) -> ssize_t {
    // SAFETY: `path` is NUL-terminated and `buf` holds `n` bytes, as readlink(2) asks of our
    // caller; both reach our `readlinkat` unchanged.
    unsafe { readlinkat(libc::AT_FDCWD, path, buf, n) }
}
/// # Safety
/// As `readlinkat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn readlinkat(
    dirfd: c_int,
    path: *const c_char,
    buf: *mut c_char,
    n: size_t,
) -> ssize_t {
    // SAFETY: `path` is NULL or NUL-terminated per readlinkat(2); `tessera_path` reads only
    // `path` (`buf` is written below).
    match unsafe { tessera_path(dirfd, path) } {
        Some(p) => run(|| {
            let p = p?;
            let target = client()?.readlink(&p)?;
            let len = target.len().min(n);
            if len > 0 && buf.is_null() {
                return Err(FsError::new(Errno::Inval, "readlink into a NULL buffer"));
            }
            // SAFETY: the caller's buffer holds `n` bytes; we copy at most that many, and
            // readlink does not add a NUL.
            unsafe { std::ptr::copy_nonoverlapping(target.as_ptr(), buf.cast::<u8>(), len) };
            Ok(len as ssize_t)
        }),
        None => {
            // SAFETY: NUL-terminated or NULL by the caller's contract.
            let k = unsafe { crate::kernel_at(dirfd, path) };
            // SAFETY: libc's own call, with the caller's arguments (the path rewritten where
            // it named a real place through Tessera).
            unsafe { real::readlinkat(dirfd, crate::at(&k, path), buf, n) }
        }
    }
}
