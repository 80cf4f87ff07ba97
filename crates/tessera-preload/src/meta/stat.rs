//! The stat family: `stat`, `lstat`, `fstat`, `fstatat` with the symbol names Debian 12's glibc
//! binds and the older `__xstat` ones, and `statx`.

use super::*;
use crate::state;
use crate::state::{client, desc, lookup};
use crate::{real, run, tessera_path};
use libc::{c_char, c_int, c_uint};
use tessera_client::{Attr, FileKind, FsResult};

pub(crate) fn mode_of(a: &Attr) -> u32 {
    let kind = match a.kind {
        FileKind::File => libc::S_IFREG,
        FileKind::Dir => libc::S_IFDIR,
        FileKind::Symlink => libc::S_IFLNK,
    };
    kind | (a.mode & 0o7777)
}

/// Writes `a` into the caller's `struct stat`.
///
/// # Safety
/// `st` is NULL or points to writable storage for a `struct stat64`.
pub(crate) unsafe fn fill_stat(a: &Attr, st: *mut libc::stat64) -> FsResult<c_int> {
    if st.is_null() {
        return Err(efault("stat: the struct stat pointer"));
    }
    // SAFETY: non-null, so storage for a struct stat (this function's contract); every field
    // is set from zero.
    unsafe {
        let mut s: libc::stat64 = std::mem::zeroed();
        s.st_dev = TESSERA_DEV;
        s.st_ino = a.ino;
        s.st_nlink = if a.kind == FileKind::Dir {
            2
        } else {
            a.nlink as _
        };
        s.st_mode = mode_of(a);
        s.st_uid = a.uid;
        s.st_gid = a.gid;
        s.st_size = a.size as i64;
        s.st_blksize = BLKSIZE;
        s.st_blocks = a.size.div_ceil(512) as i64;
        s.st_atime = a.atime_ns.div_euclid(1_000_000_000);
        s.st_atime_nsec = a.atime_ns.rem_euclid(1_000_000_000);
        s.st_mtime = a.mtime_ns.div_euclid(1_000_000_000);
        s.st_mtime_nsec = a.mtime_ns.rem_euclid(1_000_000_000);
        s.st_ctime = a.ctime_ns.div_euclid(1_000_000_000);
        s.st_ctime_nsec = a.ctime_ns.rem_euclid(1_000_000_000);
        st.write(s);
    }
    Ok(0)
}

pub(crate) fn ts(ns: i64) -> libc::statx_timestamp {
    // SAFETY: plain data.
    let mut t: libc::statx_timestamp = unsafe { std::mem::zeroed() };
    t.tv_sec = ns.div_euclid(1_000_000_000);
    t.tv_nsec = ns.rem_euclid(1_000_000_000) as u32;
    t
}

/// Writes `a` into the caller's `struct statx`.
///
/// # Safety
/// `st` is NULL or points to writable storage for a `struct statx`.
pub(crate) unsafe fn fill_statx(a: &Attr, st: *mut libc::statx) -> FsResult<c_int> {
    if st.is_null() {
        return Err(efault("statx: the struct statx pointer"));
    }
    // SAFETY: non-null, so storage for a struct statx (this function's contract); every field
    // is set from zero.
    unsafe {
        let mut s: libc::statx = std::mem::zeroed();
        s.stx_mask = libc::STATX_BASIC_STATS;
        s.stx_blksize = BLKSIZE as u32;
        s.stx_nlink = if a.kind == FileKind::Dir { 2 } else { a.nlink };
        s.stx_uid = a.uid;
        s.stx_gid = a.gid;
        s.stx_mode = mode_of(a) as u16;
        s.stx_ino = a.ino;
        s.stx_size = a.size;
        s.stx_blocks = a.size.div_ceil(512);
        s.stx_atime = ts(a.atime_ns);
        s.stx_mtime = ts(a.mtime_ns);
        s.stx_ctime = ts(a.ctime_ns);
        s.stx_dev_major = (TESSERA_DEV >> 8) as u32;
        s.stx_dev_minor = (TESSERA_DEV & 0xff) as u32;
        st.write(s);
    }
    Ok(0)
}

/// Attributes of `p`, following a link at its end unless `flags` has `AT_SYMLINK_NOFOLLOW`.
pub(crate) fn stat_at(p: &str, flags: c_int) -> FsResult<Attr> {
    if flags & libc::AT_SYMLINK_NOFOLLOW != 0 {
        client()?.stat(p)
    } else {
        client()?.stat_follow(p)
    }
}

/// Attributes behind a Tessera descriptor.
pub(crate) fn fd_attr(fd: c_int) -> FsResult<Attr> {
    let d = lookup(fd).ok_or_else(|| crate::ebadf(fd))?;
    let path = state::lock_desc(&d).path.clone();
    client()?.stat(&path)
}

/// # Safety
/// As `stat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stat(path: *const c_char, buf: *mut libc::stat) -> c_int {
    // SAFETY: `path` is NUL-terminated and `buf` points to a writable `struct stat` per stat(2);
    // both reach `fstatat` unchanged.
    unsafe { fstatat(libc::AT_FDCWD, path, buf, 0) }
}
/// # Safety
/// As `stat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stat64(path: *const c_char, buf: *mut libc::stat64) -> c_int {
    // SAFETY: `buf` is a writable `struct stat64` and `path` NUL-terminated, as stat64 asks of our
    // caller; `fstatat64` needs exactly that.
    unsafe { fstatat64(libc::AT_FDCWD, path, buf, 0) }
}
/// # Safety
/// As `lstat(2)`: a symbolic link found in the PFS directory is shown as a link.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lstat(path: *const c_char, buf: *mut libc::stat) -> c_int {
    // SAFETY: `path` is NUL-terminated and `buf` a writable `struct stat` by lstat(2)'s contract;
    // `fstatat` gets them with AT_SYMLINK_NOFOLLOW.
    unsafe { fstatat(libc::AT_FDCWD, path, buf, libc::AT_SYMLINK_NOFOLLOW) }
}
/// # Safety
/// As `lstat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lstat64(path: *const c_char, buf: *mut libc::stat64) -> c_int {
    // SAFETY: per lstat(2) on our caller, `path` is NUL-terminated and `buf` a writable
    // `struct stat64`, which `fstatat64` requires.
    unsafe { fstatat64(libc::AT_FDCWD, path, buf, libc::AT_SYMLINK_NOFOLLOW) }
}
/// # Safety
/// As `fstat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fstat(fd: c_int, buf: *mut libc::stat) -> c_int {
    // SAFETY: `buf` points to a writable `struct stat`, which on our only targets (x86-64, AArch64
    // Linux) has `struct stat64`'s layout, so the cast gives `fstat64` what it needs.
    unsafe { fstat64(fd, buf.cast()) }
}
/// # Safety
/// As `fstat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fstat64(fd: c_int, buf: *mut libc::stat64) -> c_int {
    if desc(fd).is_some() {
        return run(|| {
            let a = fd_attr(fd)?;
            // SAFETY: `buf` is the caller's struct stat (fstat's contract).
            unsafe { fill_stat(&a, buf) }
        });
    }
    // SAFETY: the caller's arguments, passed unchanged to the real `fstat64`, whose contract the caller met in calling it.
    unsafe { real::fstat64(fd, buf) }
}
/// # Safety
/// As `fstatat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fstatat(
    dirfd: c_int,
    path: *const c_char,
    buf: *mut libc::stat,
    flags: c_int,
) -> c_int {
    // SAFETY: `path` is NULL or NUL-terminated per fstatat(2); `buf` is a writable `struct stat`,
    // the same layout as `stat64` on our only targets (x86-64, AArch64).
    unsafe { fstatat64(dirfd, path, buf.cast(), flags) }
}
/// # Safety
/// As `fstatat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fstatat64(
    dirfd: c_int,
    path: *const c_char,
    buf: *mut libc::stat64,
    flags: c_int,
) -> c_int {
    // SAFETY: non-null, and NUL-terminated by the call's contract.
    if flags & libc::AT_EMPTY_PATH != 0 && !path.is_null() && unsafe { *path } == 0 {
        // SAFETY: `buf` points to a writable `struct stat64` by fstatat(2)'s contract,
        // which fstat64 also asks of it; `dirfd` stands in for the empty path.
        return unsafe { fstat64(dirfd, buf) };
    }
    // SAFETY: `path` is NULL or NUL-terminated per fstatat(2); `tessera_path` reads only `path`
    // and `dirfd`.
    match unsafe { tessera_path(dirfd, path) } {
        Some(p) => run(|| {
            let p = p?;
            // SAFETY: NUL-terminated (tessera_path saw it).
            let a = stat_at(&p, unsafe { crate::follow_if_dir_named(path, flags) })?;
            // SAFETY: `buf` is the caller's struct stat (fstatat's contract).
            unsafe { fill_stat(&a, buf) }
        }),
        None => {
            // SAFETY: NUL-terminated or NULL by the caller's contract.
            let k = unsafe { crate::kernel_at(dirfd, path) };
            // SAFETY: libc's own call, with the caller's arguments (the path rewritten where
            // it named a real place through Tessera).
            unsafe { real::fstatat64(dirfd, crate::at(&k, path), buf, flags) }
        }
    }
}
// The glibc < 2.33 names, still bound by older binaries.
/// # Safety
/// As `stat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __xstat(_ver: c_int, path: *const c_char, buf: *mut libc::stat) -> c_int {
    // SAFETY: `path` is NUL-terminated and `buf` a writable `struct stat`, as `stat` requires;
    // `_ver` is ignored.
    unsafe { stat(path, buf) }
}
/// # Safety
/// As `stat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __xstat64(
    _ver: c_int,
    path: *const c_char,
    buf: *mut libc::stat64,
) -> c_int {
    // SAFETY: `path` and `buf` (a writable `struct stat64`) come from our caller under stat(2)'s
    // contract, which `stat64` shares.
    unsafe { stat64(path, buf) }
}
/// # Safety
/// As `lstat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __lxstat(_ver: c_int, path: *const c_char, buf: *mut libc::stat) -> c_int {
    // SAFETY: `path` is NUL-terminated and `buf` a writable `struct stat` per lstat(2), exactly
    // what our `lstat` needs.
    unsafe { lstat(path, buf) }
}
/// # Safety
/// As `lstat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __lxstat64(
    _ver: c_int,
    path: *const c_char,
    buf: *mut libc::stat64,
) -> c_int {
    // SAFETY: lstat(2)'s contract on our caller gives a NUL-terminated `path` and a writable
    // `struct stat64` at `buf`, as `lstat64` requires.
    unsafe { lstat64(path, buf) }
}
/// # Safety
/// As `fstat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __fxstat(_ver: c_int, fd: c_int, buf: *mut libc::stat) -> c_int {
    // SAFETY: `buf` points to a writable `struct stat` per fstat(2), as `fstat` needs; `fd` is
    // an int and `_ver` is dropped.
    unsafe { fstat(fd, buf) }
}
/// # Safety
/// As `fstat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __fxstat64(_ver: c_int, fd: c_int, buf: *mut libc::stat64) -> c_int {
    // SAFETY: `buf` is a writable `struct stat64` per fstat(2) on our caller, all `fstat64` needs.
    unsafe { fstat64(fd, buf) }
}
/// # Safety
/// As `fstatat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __fxstatat(
    _ver: c_int,
    dirfd: c_int,
    path: *const c_char,
    buf: *mut libc::stat,
    flags: c_int,
) -> c_int {
    // SAFETY: `path` is NULL or NUL-terminated and `buf` a writable `struct stat` per fstatat(2);
    // `dirfd` and `flags` pass through unchanged.
    unsafe { fstatat(dirfd, path, buf, flags) }
}
/// # Safety
/// As `fstatat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __fxstatat64(
    _ver: c_int,
    dirfd: c_int,
    path: *const c_char,
    buf: *mut libc::stat64,
    flags: c_int,
) -> c_int {
    // SAFETY: `buf` points to a writable `struct stat64` and `path` is NUL-terminated by
    // fstatat(2)'s contract on our caller; `fstatat64` asks the same.
    unsafe { fstatat64(dirfd, path, buf, flags) }
}

/// # Safety
/// As `statx(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn statx(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mask: c_uint,
    buf: *mut libc::statx,
) -> c_int {
    // SAFETY: non-null, and NUL-terminated by the call's contract.
    let empty = !path.is_null() && unsafe { *path } == 0;
    if empty && flags & libc::AT_EMPTY_PATH != 0 && desc(dirfd).is_some() {
        return run(|| {
            let a = fd_attr(dirfd)?;
            // SAFETY: `buf` is the caller's struct statx (statx's contract).
            unsafe { fill_statx(&a, buf) }
        });
    }
    // SAFETY: `path` is NULL or NUL-terminated by statx(2)'s contract; `tessera_path` reads it,
    // not `buf`.
    match unsafe { tessera_path(dirfd, path) } {
        Some(p) => run(|| {
            let p = p?;
            // SAFETY: NUL-terminated (tessera_path saw it).
            let a = stat_at(&p, unsafe { crate::follow_if_dir_named(path, flags) })?;
            // SAFETY: `buf` is the caller's struct statx (statx's contract).
            unsafe { fill_statx(&a, buf) }
        }),
        None => {
            // SAFETY: NUL-terminated or NULL by the caller's contract.
            let k = unsafe { crate::kernel_at(dirfd, path) };
            // SAFETY: libc's own call, with the caller's arguments (the path rewritten where
            // it named a real place through Tessera).
            unsafe { real::statx(dirfd, crate::at(&k, path), flags, mask, buf) }
        }
    }
}

alias!(__fstat64 => fstat64(fd: c_int, buf: *mut libc::stat64) -> c_int);
