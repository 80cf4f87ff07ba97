//! The statfs family: `statfs`, `fstatfs`, `statvfs` and `fstatvfs`, from the burst buffer of the
//! process's node.

use super::*;
use crate::state::{client, desc};
use crate::{real, run, tessera_path};
use libc::{c_char, c_int};
use tessera_client::FsResult;

/// Sizes reported by statfs, in 4 KiB blocks: the burst buffer of this process's node, its
/// configured capacity (or its device's size), less what the logs hold and what is reserved.
pub(crate) fn fs_numbers() -> FsResult<(u64, u64)> {
    let space = client()?.space()?;
    let bsize = 4096u64;
    Ok((space.total / bsize, space.free / bsize))
}

/// Fills the caller's `struct statfs`.
///
/// # Safety
/// `buf` is NULL or points to writable storage for a `struct statfs64`.
pub(crate) unsafe fn fill_statfs(buf: *mut libc::statfs64) -> FsResult<c_int> {
    if buf.is_null() {
        return Err(efault("statfs: the struct statfs pointer"));
    }
    let (total, free) = fs_numbers()?;
    // SAFETY: non-null, so storage for a struct statfs (this function's contract).
    unsafe {
        let mut s: libc::statfs64 = std::mem::zeroed();
        s.f_type = TESSERA_MAGIC;
        s.f_bsize = 4096;
        s.f_frsize = 4096;
        s.f_blocks = total;
        s.f_bfree = free;
        s.f_bavail = free;
        s.f_files = 1 << 32;
        s.f_ffree = 1 << 32;
        s.f_namelen = 255;
        buf.write(s);
    }
    Ok(0)
}

/// Fills the caller's `struct statvfs`.
///
/// # Safety
/// `buf` is NULL or points to writable storage for a `struct statvfs64`.
pub(crate) unsafe fn fill_statvfs(buf: *mut libc::statvfs64) -> FsResult<c_int> {
    if buf.is_null() {
        return Err(efault("statvfs: the struct statvfs pointer"));
    }
    let (total, free) = fs_numbers()?;
    // SAFETY: non-null, so storage for a struct statvfs (this function's contract).
    unsafe {
        let mut s: libc::statvfs64 = std::mem::zeroed();
        s.f_bsize = 4096;
        s.f_frsize = 4096;
        s.f_blocks = total;
        s.f_bfree = free;
        s.f_bavail = free;
        s.f_files = 1 << 32;
        s.f_ffree = 1 << 32;
        s.f_favail = 1 << 32;
        s.f_fsid = TESSERA_DEV;
        s.f_namemax = 255;
        buf.write(s);
    }
    Ok(0)
}

/// # Safety
/// As `statfs(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn statfs(path: *const c_char, buf: *mut libc::statfs64) -> c_int {
    // SAFETY: `path` is NUL-terminated or NULL per statfs(2); only it reaches `tessera_path`
    // (`buf` is filled below, under its own comment).
    match unsafe { tessera_path(libc::AT_FDCWD, path) } {
        Some(p) => run(|| {
            let p = p?;
            client()?.stat(&p)?;
            // SAFETY: `buf` is the caller's struct statfs (statfs's contract).
            unsafe { fill_statfs(buf) }
        }),
        None => {
            // SAFETY: NUL-terminated or NULL by the caller's contract.
            let k = unsafe { crate::kernel_at(libc::AT_FDCWD, path) };
            // SAFETY: libc's own call, with the caller's arguments (the path rewritten where
            // it named a real place through Tessera).
            unsafe { real::statfs64(crate::at(&k, path), buf) }
        }
    }
}
alias!(statfs64 => statfs(path: *const c_char, buf: *mut libc::statfs64) -> c_int);
/// # Safety
/// As `fstatfs(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fstatfs(fd: c_int, buf: *mut libc::statfs64) -> c_int {
    if desc(fd).is_some() {
        // SAFETY: `buf` is the caller's struct statfs (fstatfs's contract).
        return run(|| unsafe { fill_statfs(buf) });
    }
    // SAFETY: the caller's arguments, passed unchanged to the real `fstatfs64`, whose contract the caller met in calling it.
    unsafe { real::fstatfs64(fd, buf) }
}
alias!(fstatfs64 => fstatfs(fd: c_int, buf: *mut libc::statfs64) -> c_int);
/// # Safety
/// As `statvfs(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn statvfs(path: *const c_char, buf: *mut libc::statvfs64) -> c_int {
    // SAFETY: `path` is NULL or NUL-terminated per statvfs(3) on our caller; `tessera_path` reads
    // only that, `buf` is not passed.
    match unsafe { tessera_path(libc::AT_FDCWD, path) } {
        Some(p) => run(|| {
            let p = p?;
            client()?.stat(&p)?;
            // SAFETY: `buf` is the caller's struct statvfs (statvfs's contract).
            unsafe { fill_statvfs(buf) }
        }),
        None => {
            // SAFETY: NUL-terminated or NULL by the caller's contract.
            let k = unsafe { crate::kernel_at(libc::AT_FDCWD, path) };
            // SAFETY: libc's own call, with the caller's arguments (the path rewritten where
            // it named a real place through Tessera).
            unsafe { real::statvfs64(crate::at(&k, path), buf) }
        }
    }
}
alias!(statvfs64 => statvfs(path: *const c_char, buf: *mut libc::statvfs64) -> c_int);
/// # Safety
/// As `fstatvfs(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fstatvfs(fd: c_int, buf: *mut libc::statvfs64) -> c_int {
    if desc(fd).is_some() {
        // SAFETY: `buf` is the caller's struct statvfs (fstatvfs's contract).
        return run(|| unsafe { fill_statvfs(buf) });
    }
    // SAFETY: the caller's arguments, passed unchanged to the real `fstatvfs64`, whose contract the caller met in calling it.
    unsafe { real::fstatvfs64(fd, buf) }
}
alias!(fstatvfs64 => fstatvfs(fd: c_int, buf: *mut libc::statvfs64) -> c_int);
