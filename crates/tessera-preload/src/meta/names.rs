//! Calls that create, remove or change names: `unlink`, `rmdir`, `mkdir`, `mknod` (and glibc's
//! older `__xmknod`), `rename`, and `truncate` by path.

use crate::state::client;
use crate::{real, run, show, tessera_path};
use libc::{c_char, c_int, c_uint, mode_t, off_t};
use tessera_client::{Errno, FsError};

/// # Safety
/// As `unlink(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unlink(path: *const c_char) -> c_int {
    // SAFETY: `path` is NUL-terminated per unlink(2), which is what `unlinkat` needs of it.
    unsafe { unlinkat(libc::AT_FDCWD, path, 0) }
}
/// # Safety
/// As `rmdir(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmdir(path: *const c_char) -> c_int {
    // SAFETY: `path` is NUL-terminated per rmdir(2), passed to `unlinkat` with AT_REMOVEDIR.
    unsafe { unlinkat(libc::AT_FDCWD, path, libc::AT_REMOVEDIR) }
}
/// # Safety
/// As `unlinkat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unlinkat(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: `path` is NULL or NUL-terminated by unlinkat(2)'s contract; `tessera_path` reads it.
    match unsafe { tessera_path(dirfd, path) } {
        Some(p) => run(|| {
            let p = p?;
            let c = client()?;
            if flags & libc::AT_REMOVEDIR != 0 {
                c.rmdir(&p)?;
            } else {
                c.unlink(&p)?;
            }
            Ok(0)
        }),
        None => {
            // SAFETY: NUL-terminated or NULL by the caller's contract.
            let k = unsafe { crate::kernel_at(dirfd, path) };
            // SAFETY: libc's own call, with the caller's arguments (the path rewritten where
            // it named a real place through Tessera).
            unsafe { real::unlinkat(dirfd, crate::at(&k, path), flags) }
        }
    }
}
/// # Safety
/// As `mkdir(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkdir(path: *const c_char, mode: mode_t) -> c_int {
    // SAFETY: `path` is NUL-terminated per mkdir(2), as `mkdirat` requires; `mode` is an int.
    unsafe { mkdirat(libc::AT_FDCWD, path, mode) }
}
/// # Safety
/// As `mkdirat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkdirat(dirfd: c_int, path: *const c_char, mode: mode_t) -> c_int {
    // SAFETY: `path` is NULL or NUL-terminated per mkdirat(2) on our caller, which is all
    // `tessera_path` needs.
    match unsafe { tessera_path(dirfd, path) } {
        Some(p) => run(|| {
            let p = p?;
            let mode = mode & 0o7777 & !crate::files::umask();
            client()?.mkdir(&p, mode).map(|()| 0)
        }),
        None => {
            // SAFETY: NUL-terminated or NULL by the caller's contract.
            let k = unsafe { crate::kernel_at(dirfd, path) };
            // SAFETY: libc's own call, with the caller's arguments (the path rewritten where
            // it named a real place through Tessera).
            unsafe { real::mkdirat(dirfd, crate::at(&k, path), mode) }
        }
    }
}

/// # Safety
/// As `mknod(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mknod(path: *const c_char, mode: mode_t, dev: libc::dev_t) -> c_int {
    // SAFETY: `path` is NUL-terminated per mknod(2), the same requirement as `mknodat`'s; `mode`
    // and `dev` are ints.
    unsafe { mknodat(libc::AT_FDCWD, path, mode, dev) }
}
/// `mknodat(2)`: a regular file is created empty (tar makes files this way to set their
/// extended attributes before it writes them); FIFOs, sockets and devices are not kept.
///
/// # Safety
/// As `mknodat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mknodat(
    dirfd: c_int,
    path: *const c_char,
    mode: mode_t,
    dev: libc::dev_t,
) -> c_int {
    // SAFETY: `path` is NULL or NUL-terminated by mknodat(2)'s contract; `tessera_path`
    // only reads it.
    match unsafe { tessera_path(dirfd, path) } {
        // A refusal programs expect of some file systems: quiet unless TESSERA_VERBOSE.
        Some(p) => crate::run_quiet_on(&[Errno::Perm], || {
            let p = p?;
            let kind = mode & libc::S_IFMT;
            if kind != 0 && kind != libc::S_IFREG {
                return Err(FsError::new(
                    Errno::Perm,
                    format!(
                        "{p}: Tessera keeps regular files, directories and PFS links, not FIFOs, sockets or device nodes"
                    ),
                ));
            }
            let mut o = tessera_client::OpenOptions::new();
            o.write(true)
                .create(true)
                .exclusive(true)
                .mode(mode & 0o7777 & !crate::files::umask());
            client()?.open(&p, &o)?.close().map(|()| 0)
        }),
        None => {
            // SAFETY: NUL-terminated or NULL by the caller's contract.
            let k = unsafe { crate::kernel_at(dirfd, path) };
            // SAFETY: libc's own call, with the caller's arguments (the path rewritten where
            // it named a real place through Tessera).
            unsafe { real::mknodat(dirfd, crate::at(&k, path), mode, dev) }
        }
    }
}

/// # Safety
/// As `rename(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rename(old: *const c_char, new: *const c_char) -> c_int {
    // SAFETY: `old` and `new` are NUL-terminated per rename(2), as `renameat2` needs of both.
    unsafe { renameat2(libc::AT_FDCWD, old, libc::AT_FDCWD, new, 0) }
}
/// # Safety
/// As `renameat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn renameat(
    od: c_int,
    old: *const c_char,
    nd: c_int,
    new: *const c_char,
) -> c_int {
    // SAFETY: `old` and `new` are NUL-terminated per renameat(2); `renameat2` asks the same, and
    // `od`/`nd` and flags 0 are ints.
    unsafe { renameat2(od, old, nd, new, 0) }
}
/// Renames inside Tessera; a rename between Tessera and another file system fails with
/// EXDEV (programs such as `mv` then copy). RENAME_NOREPLACE is honoured (checked, then
/// renamed: not atomic against a concurrent creator); RENAME_EXCHANGE is refused.
///
/// # Safety
/// As `renameat2(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn renameat2(
    od: c_int,
    old: *const c_char,
    nd: c_int,
    new: *const c_char,
    flags: c_uint,
) -> c_int {
    // SAFETY: `old` and `new` are NULL or NUL-terminated per renameat2(2); `tessera_path` reads
    // each against its own `od`/`nd`.
    let (from, to) = unsafe { (tessera_path(od, old), tessera_path(nd, new)) };
    match (from, to) {
        // SAFETY: the caller's arguments, passed unchanged to the real `renameat2`, whose contract the caller met in calling it.
        (None, None) => unsafe { real::renameat2(od, old, nd, new, flags) },
        (Some(Err(e)), _) | (_, Some(Err(e))) => run(|| Err::<c_int, _>(e)),
        (Some(a), Some(b)) => run(|| {
            let (a, b) = (a?, b?);
            let c = client()?;
            if flags & libc::RENAME_EXCHANGE != 0 {
                return Err(FsError::new(
                    Errno::Inval,
                    "rename: RENAME_EXCHANGE is not supported on Tessera",
                ));
            }
            if flags & libc::RENAME_NOREPLACE != 0 && c.stat(&b).is_ok() {
                return Err(FsError::new(Errno::Exist, format!("{b} exists")));
            }
            c.rename(&a, &b).map(|()| 0)
        }),
        _ => run(|| {
            Err(FsError::new(
                Errno::XDev,
                format!(
                    "rename {} -> {}: only one side is on Tessera (copy, then remove)",
                    // SAFETY: `old` is NULL or NUL-terminated per renameat2(2); `show` reads it.
                    unsafe { show(old) },
                    // SAFETY: `new` is NUL-terminated or NULL per renameat2(2); `show` copies it.
                    unsafe { show(new) }
                ),
            ))
        }),
    }
}

/// # Safety
/// As `truncate(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn truncate(path: *const c_char, len: off_t) -> c_int {
    // SAFETY: `path` is NULL or NUL-terminated per truncate(2), which is all `tessera_path` reads.
    match unsafe { tessera_path(libc::AT_FDCWD, path) } {
        Some(p) => run(|| {
            let p = p?;
            let len = u64::try_from(len)
                .map_err(|_| FsError::new(Errno::Inval, format!("truncate to {len}")))?;
            client()?.truncate(&p, len).map(|()| 0)
        }),
        None => {
            // SAFETY: NUL-terminated or NULL by the caller's contract.
            let k = unsafe { crate::kernel_at(libc::AT_FDCWD, path) };
            // SAFETY: libc's own call, with the caller's arguments (the path rewritten where
            // it named a real place through Tessera).
            unsafe { real::truncate64(crate::at(&k, path), len) }
        }
    }
}
alias!(truncate64 => truncate(path: *const c_char, len: off_t) -> c_int);

/// The glibc < 2.33 name of `mknod`, with its version argument.
///
/// # Safety
/// As `mknod(2)`; `dev` points to a `dev_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __xmknod(
    _ver: c_int,
    path: *const c_char,
    mode: mode_t,
    dev: *const libc::dev_t,
) -> c_int {
    // SAFETY: `path` is NUL-terminated and `dev` points to a `dev_t`, both by this fn's stated
    // contract, which `__xmknodat` shares; `_ver` is an int.
    unsafe { __xmknodat(_ver, libc::AT_FDCWD, path, mode, dev) }
}

/// The glibc < 2.33 name of `mknodat`, with its version argument.
///
/// # Safety
/// As `mknodat(2)`; `dev` points to a `dev_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __xmknodat(
    _ver: c_int,
    dirfd: c_int,
    path: *const c_char,
    mode: mode_t,
    dev: *const libc::dev_t,
) -> c_int {
    let dev = if dev.is_null() {
        0
    } else {
        // SAFETY: non-NULL, so a dev_t (the call's contract).
        unsafe { *dev }
    };
    // SAFETY: `path` is NUL-terminated per mknodat(2) on our caller; `dev` was already read into
    // a value, so `path` is the only pointer here.
    unsafe { mknodat(dirfd, path, mode, dev) }
}
