//! Path calls and attributes: the stat family (with the symbol names Debian 12's glibc binds
//! and the older `__xstat` ones), statx, access, unlink, mkdir, rmdir, rename, truncate,
//! statfs, and the calls Tessera answers without storing anything (modes, owners, times,
//! links). Extended attributes are in [`crate::xattrs`].

use crate::state;
use crate::state::{Object, client, desc, lookup};
use crate::{fail, real, run, show, tessera_path};
use libc::{c_char, c_int, c_uint, mode_t, off_t, size_t, ssize_t};
use tessera_client::{Attr, AttrChange, Errno, FileKind, FsError, FsResult};

/// `st_dev` of Tessera files ("TS").
pub const TESSERA_DEV: u64 = 0x5453;
/// `f_type` reported by statfs ("TESSERA" in leetspeak); MPI-IO libraries that do not know it
/// use their generic POSIX driver.
pub const TESSERA_MAGIC: i64 = 0x07E5_5E7A;
/// Preferred I/O size (`st_blksize`): large transfers are what the logs like.
pub const BLKSIZE: i64 = 4 << 20;

fn mode_of(a: &Attr) -> u32 {
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
unsafe fn fill_stat(a: &Attr, st: *mut libc::stat64) -> FsResult<c_int> {
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

fn ts(ns: i64) -> libc::statx_timestamp {
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
unsafe fn fill_statx(a: &Attr, st: *mut libc::statx) -> FsResult<c_int> {
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
fn stat_at(p: &str, flags: c_int) -> FsResult<Attr> {
    if flags & libc::AT_SYMLINK_NOFOLLOW != 0 {
        client()?.stat(p)
    } else {
        client()?.stat_follow(p)
    }
}

/// Attributes behind a Tessera descriptor.
fn fd_attr(fd: c_int) -> FsResult<Attr> {
    let d = lookup(fd).ok_or_else(|| crate::ebadf(fd))?;
    let path = state::lock_desc(&d).path.clone();
    client()?.stat(&path)
}

/// # Safety
/// As `stat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stat(path: *const c_char, buf: *mut libc::stat) -> c_int {
    // SAFETY: forwarded under this function's own contract.
    unsafe { fstatat(libc::AT_FDCWD, path, buf, 0) }
}
/// # Safety
/// As `stat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stat64(path: *const c_char, buf: *mut libc::stat64) -> c_int {
    // SAFETY: forwarded under this function's own contract.
    unsafe { fstatat64(libc::AT_FDCWD, path, buf, 0) }
}
/// # Safety
/// As `lstat(2)`: a symbolic link found in the PFS directory is shown as a link.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lstat(path: *const c_char, buf: *mut libc::stat) -> c_int {
    // SAFETY: forwarded under this function's own contract.
    unsafe { fstatat(libc::AT_FDCWD, path, buf, libc::AT_SYMLINK_NOFOLLOW) }
}
/// # Safety
/// As `lstat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lstat64(path: *const c_char, buf: *mut libc::stat64) -> c_int {
    // SAFETY: forwarded under this function's own contract.
    unsafe { fstatat64(libc::AT_FDCWD, path, buf, libc::AT_SYMLINK_NOFOLLOW) }
}
/// # Safety
/// As `fstat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fstat(fd: c_int, buf: *mut libc::stat) -> c_int {
    // SAFETY: forwarded under this function's own contract.
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
    // SAFETY: libc's own call, with the caller's arguments under the same contract.
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
    // SAFETY: forwarded under this function's own contract.
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
        // SAFETY: forwarded under this function's own contract.
        return unsafe { fstat64(dirfd, buf) };
    }
    // SAFETY: forwarded under this function's own contract.
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
    // SAFETY: forwarded under this function's own contract.
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
    // SAFETY: forwarded under this function's own contract.
    unsafe { stat64(path, buf) }
}
/// # Safety
/// As `lstat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __lxstat(_ver: c_int, path: *const c_char, buf: *mut libc::stat) -> c_int {
    // SAFETY: forwarded under this function's own contract.
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
    // SAFETY: forwarded under this function's own contract.
    unsafe { lstat64(path, buf) }
}
/// # Safety
/// As `fstat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __fxstat(_ver: c_int, fd: c_int, buf: *mut libc::stat) -> c_int {
    // SAFETY: forwarded under this function's own contract.
    unsafe { fstat(fd, buf) }
}
/// # Safety
/// As `fstat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __fxstat64(_ver: c_int, fd: c_int, buf: *mut libc::stat64) -> c_int {
    // SAFETY: forwarded under this function's own contract.
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
    // SAFETY: forwarded under this function's own contract.
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
    // SAFETY: forwarded under this function's own contract.
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
    // SAFETY: forwarded under this function's own contract.
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

fn access_check(p: &str, mode: c_int) -> FsResult<c_int> {
    let a = client()?.stat_follow(p)?;
    // The instance belongs to one user, who owns every file: check the owner bits.
    let bits = (a.mode >> 6) & 7;
    let want = [(libc::R_OK, 4), (libc::W_OK, 2), (libc::X_OK, 1)];
    for (flag, bit) in want {
        if mode & flag != 0 && bits & bit == 0 && !(flag == libc::X_OK && a.kind == FileKind::Dir) {
            return Err(FsError::new(
                Errno::Access,
                format!("{p}: mode {:o} does not allow this access", a.mode & 0o777),
            ));
        }
    }
    Ok(0)
}

/// # Safety
/// As `access(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn access(path: *const c_char, mode: c_int) -> c_int {
    // SAFETY: forwarded under this function's own contract.
    unsafe { faccessat(libc::AT_FDCWD, path, mode, 0) }
}
/// # Safety
/// As `faccessat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn faccessat(
    dirfd: c_int,
    path: *const c_char,
    mode: c_int,
    flags: c_int,
) -> c_int {
    // SAFETY: forwarded under this function's own contract.
    match unsafe { tessera_path(dirfd, path) } {
        Some(p) => run(|| {
            let p = p?;
            access_check(&p, mode)
        }),
        None => {
            // SAFETY: NUL-terminated or NULL by the caller's contract.
            let k = unsafe { crate::kernel_at(dirfd, path) };
            // SAFETY: libc's own call, with the caller's arguments (the path rewritten where
            // it named a real place through Tessera).
            unsafe { real::faccessat(dirfd, crate::at(&k, path), mode, flags) }
        }
    }
}
/// # Safety
/// As `euidaccess(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn euidaccess(path: *const c_char, mode: c_int) -> c_int {
    // SAFETY: forwarded under this function's own contract.
    unsafe { faccessat(libc::AT_FDCWD, path, mode, libc::AT_EACCESS) }
}
alias!(eaccess => euidaccess(path: *const c_char, mode: c_int) -> c_int);

/// # Safety
/// As `unlink(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unlink(path: *const c_char) -> c_int {
    // SAFETY: forwarded under this function's own contract.
    unsafe { unlinkat(libc::AT_FDCWD, path, 0) }
}
/// # Safety
/// As `rmdir(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmdir(path: *const c_char) -> c_int {
    // SAFETY: forwarded under this function's own contract.
    unsafe { unlinkat(libc::AT_FDCWD, path, libc::AT_REMOVEDIR) }
}
/// # Safety
/// As `unlinkat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unlinkat(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: forwarded under this function's own contract.
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
    // SAFETY: forwarded under this function's own contract.
    unsafe { mkdirat(libc::AT_FDCWD, path, mode) }
}
/// # Safety
/// As `mkdirat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkdirat(dirfd: c_int, path: *const c_char, mode: mode_t) -> c_int {
    // SAFETY: forwarded under this function's own contract.
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
/// As `symlink(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn symlink(target: *const c_char, path: *const c_char) -> c_int {
    // SAFETY: forwarded under this function's own contract.
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
    // SAFETY: forwarded under this function's own contract.
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
    // SAFETY: forwarded under this function's own contract.
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
        // SAFETY: forwarded under this function's own contract.
        None => unsafe { tessera_path(olddirfd, old) },
    };
    // SAFETY: forwarded under this function's own contract.
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
fn followed(c: &tessera_client::Client, p: &str) -> FsResult<String> {
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

/// # Safety
/// As `mknod(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mknod(path: *const c_char, mode: mode_t, dev: libc::dev_t) -> c_int {
    // SAFETY: forwarded under this function's own contract.
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
    // SAFETY: forwarded under this function's own contract.
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
    // SAFETY: forwarded under this function's own contract.
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
    // SAFETY: forwarded under this function's own contract.
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
    // SAFETY: forwarded under this function's own contract.
    let (from, to) = unsafe { (tessera_path(od, old), tessera_path(nd, new)) };
    match (from, to) {
        // SAFETY: libc's own call, with the caller's arguments under the same contract.
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
                    // SAFETY: forwarded under this function's own contract.
                    unsafe { show(old) },
                    // SAFETY: forwarded under this function's own contract.
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
    // SAFETY: forwarded under this function's own contract.
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

/// Sizes reported by statfs, in 4 KiB blocks: the burst buffer of this process's node, its
/// configured capacity (or its device's size), less what the logs hold and what is reserved.
fn fs_numbers() -> FsResult<(u64, u64)> {
    let s = client()?.status()?;
    let bsize = 4096u64;
    let (total, free) = if s.bb_capacity > 0 {
        let taken = s.bb_used + s.bb_reserved;
        (s.bb_capacity, s.bb_capacity.saturating_sub(taken))
    } else {
        (
            s.bb_device_total,
            s.bb_device_free.saturating_sub(s.bb_reserved),
        )
    };
    Ok((total / bsize, free / bsize))
}

/// Fills the caller's `struct statfs`.
///
/// # Safety
/// `buf` is NULL or points to writable storage for a `struct statfs64`.
unsafe fn fill_statfs(buf: *mut libc::statfs64) -> FsResult<c_int> {
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
unsafe fn fill_statvfs(buf: *mut libc::statvfs64) -> FsResult<c_int> {
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
    // SAFETY: forwarded under this function's own contract.
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
    // SAFETY: libc's own call, with the caller's arguments under the same contract.
    unsafe { real::fstatfs64(fd, buf) }
}
alias!(fstatfs64 => fstatfs(fd: c_int, buf: *mut libc::statfs64) -> c_int);
/// # Safety
/// As `statvfs(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn statvfs(path: *const c_char, buf: *mut libc::statvfs64) -> c_int {
    // SAFETY: forwarded under this function's own contract.
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
    // SAFETY: libc's own call, with the caller's arguments under the same contract.
    unsafe { real::fstatvfs64(fd, buf) }
}
alias!(fstatvfs64 => fstatvfs(fd: c_int, buf: *mut libc::statvfs64) -> c_int);

// ----- attributes Tessera does not store -----

/// An owner change is accepted when it changes nothing (tar run as root restores the owner a
/// file already has: an instance belongs to one user) and refused with EPERM otherwise.
fn same_or_refuse(a: &Attr, owner: (u32, u32), what: &str) -> FsResult<c_int> {
    let (u, g) = owner;
    if (u == u32::MAX || u == a.uid) && (g == u32::MAX || g == a.gid) {
        Ok(0)
    } else {
        Err(FsError::new(
            Errno::Perm,
            format!(
                "{what}: every file of a Tessera instance belongs to the instance's user; owners cannot change"
            ),
        ))
    }
}

/// The entry a change of `p` acts on: `p` itself with `AT_SYMLINK_NOFOLLOW`, else where the
/// links at its end lead.
fn at_end(p: String, flags: c_int) -> FsResult<String> {
    if flags & libc::AT_SYMLINK_NOFOLLOW != 0 {
        Ok(p)
    } else {
        Ok(client()?.follow(&p)?.0)
    }
}

fn chmod_path(p: &str, mode: mode_t) -> FsResult<c_int> {
    let change = AttrChange {
        mode: Some(mode & 0o7777),
        ..Default::default()
    };
    client()?.set_attr(p, change).map(|_| 0)
}

pub(crate) fn fd_path(fd: c_int) -> FsResult<String> {
    let d = lookup(fd).ok_or_else(|| crate::ebadf(fd))?;
    Ok(state::lock_desc(&d).path.clone())
}

/// # Safety
/// As `chmod(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn chmod(path: *const c_char, mode: mode_t) -> c_int {
    // SAFETY: forwarded under this function's own contract.
    unsafe { fchmodat(libc::AT_FDCWD, path, mode, 0) }
}
/// # Safety
/// As `fchmodat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fchmodat(
    dirfd: c_int,
    path: *const c_char,
    mode: mode_t,
    flags: c_int,
) -> c_int {
    // A link's own mode is refused as Linux refuses it (lchmod expects that): quietly.
    let expected: &[Errno] = if flags & libc::AT_SYMLINK_NOFOLLOW != 0 {
        &[Errno::NotSup]
    } else {
        &[]
    };
    // SAFETY: forwarded under this function's own contract.
    match unsafe { tessera_path(dirfd, path) } {
        Some(p) => crate::run_quiet_on(expected, || {
            let p = at_end(p?, flags)?;
            chmod_path(&p, mode)
        }),
        None => {
            // SAFETY: NUL-terminated or NULL by the caller's contract.
            let k = unsafe { crate::kernel_at(dirfd, path) };
            // SAFETY: libc's own call, with the caller's arguments (the path rewritten where
            // it named a real place through Tessera).
            unsafe { real::fchmodat(dirfd, crate::at(&k, path), mode, flags) }
        }
    }
}
/// # Safety
/// As `fchmod(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fchmod(fd: c_int, mode: mode_t) -> c_int {
    if desc(fd).is_some() {
        return run(|| chmod_path(&fd_path(fd)?, mode));
    }
    // SAFETY: libc's own call, with the caller's arguments under the same contract.
    unsafe { real::fchmod(fd, mode) }
}
/// # Safety
/// As `chown(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn chown(path: *const c_char, uid: libc::uid_t, gid: libc::gid_t) -> c_int {
    // SAFETY: forwarded under this function's own contract.
    unsafe { fchownat(libc::AT_FDCWD, path, uid, gid, 0) }
}
/// # Safety
/// As `lchown(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lchown(path: *const c_char, uid: libc::uid_t, gid: libc::gid_t) -> c_int {
    // SAFETY: forwarded under this function's own contract.
    unsafe { fchownat(libc::AT_FDCWD, path, uid, gid, libc::AT_SYMLINK_NOFOLLOW) }
}
/// # Safety
/// As `fchownat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fchownat(
    dirfd: c_int,
    path: *const c_char,
    uid: libc::uid_t,
    gid: libc::gid_t,
    flags: c_int,
) -> c_int {
    // SAFETY: forwarded under this function's own contract.
    match unsafe { tessera_path(dirfd, path) } {
        Some(p) => run(|| {
            let p = p?;
            same_or_refuse(&client()?.stat(&p)?, (uid, gid), &format!("chown {p}"))
        }),
        None => {
            // SAFETY: NUL-terminated or NULL by the caller's contract.
            let k = unsafe { crate::kernel_at(dirfd, path) };
            // SAFETY: libc's own call, with the caller's arguments (the path rewritten where
            // it named a real place through Tessera).
            unsafe { real::fchownat(dirfd, crate::at(&k, path), uid, gid, flags) }
        }
    }
}
/// # Safety
/// As `fchown(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fchown(fd: c_int, uid: libc::uid_t, gid: libc::gid_t) -> c_int {
    if desc(fd).is_some() {
        return run(|| same_or_refuse(&fd_attr(fd)?, (uid, gid), "fchown"));
    }
    // SAFETY: libc's own call, with the caller's arguments under the same contract.
    unsafe { real::fchown(fd, uid, gid) }
}

/// Sets access and modification times (NULL: both now; UTIME_NOW, UTIME_OMIT honoured).
///
/// # Safety
/// `times` is NULL or points to two `timespec`s.
unsafe fn set_times(p: &str, times: *const libc::timespec) -> FsResult<c_int> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64);
    let pick = |t: Option<&libc::timespec>| match t {
        None => Ok(Some(now)),
        Some(t) if t.tv_nsec == libc::UTIME_NOW => Ok(Some(now)),
        Some(t) if t.tv_nsec == libc::UTIME_OMIT => Ok(None),
        Some(t) if !(0..1_000_000_000).contains(&t.tv_nsec) => Err(FsError::new(
            Errno::Inval,
            format!("utimensat {p}: tv_nsec {} is out of range", t.tv_nsec),
        )),
        Some(t) => Ok(Some(t.tv_sec * 1_000_000_000 + t.tv_nsec)),
    };
    let (a, m) = if times.is_null() {
        (None, None)
    } else {
        // SAFETY: non-null, so two timespecs (this function's contract).
        let t = unsafe { std::slice::from_raw_parts(times, 2) };
        (Some(&t[0]), Some(&t[1]))
    };
    let change = AttrChange {
        mode: None,
        atime_ns: pick(a)?,
        mtime_ns: pick(m)?,
    };
    publish_writes_of(p)?;
    client()?.set_attr(p, change).map(|_| 0)
}

/// Publishes this process's unpublished writes to the file at `p`: times set explicitly must
/// win over the modification time that publishing them sets, and tar and `cp -p` set the
/// times before they close the file.
fn publish_writes_of(p: &str) -> FsResult<()> {
    // Cloned out first: a description is never locked while the table is.
    let descs: Vec<state::DescRef> = state::table().fds.values().cloned().collect();
    for d in descs {
        let mut g = state::lock_desc(&d);
        if g.path != p || g.flags & libc::O_ACCMODE == libc::O_RDONLY {
            continue;
        }
        if let Object::File(f) = &mut g.obj {
            f.commit()?;
        }
    }
    Ok(())
}

/// # Safety
/// As `utimensat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn utimensat(
    dirfd: c_int,
    path: *const c_char,
    times: *const libc::timespec,
    flags: c_int,
) -> c_int {
    if path.is_null() && desc(dirfd).is_some() {
        // SAFETY: forwarded under this function's own contract.
        return unsafe { futimens(dirfd, times) };
    }
    // SAFETY: forwarded under this function's own contract.
    match unsafe { tessera_path(dirfd, path) } {
        Some(p) => run(|| {
            let p = at_end(p?, flags)?;
            // SAFETY: `times` is NULL or two timespecs (utimensat's contract).
            unsafe { set_times(&p, times) }
        }),
        None => {
            // SAFETY: NUL-terminated or NULL by the caller's contract.
            let k = unsafe { crate::kernel_at(dirfd, path) };
            // SAFETY: libc's own call, with the caller's arguments (the path rewritten where
            // it named a real place through Tessera).
            unsafe { real::utimensat(dirfd, crate::at(&k, path), times, flags) }
        }
    }
}
/// # Safety
/// As `futimens(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn futimens(fd: c_int, times: *const libc::timespec) -> c_int {
    if desc(fd).is_some() {
        // SAFETY: `times` is NULL or two timespecs (futimens's contract).
        return run(|| unsafe { set_times(&fd_path(fd)?, times) });
    }
    // SAFETY: libc's own call, with the caller's arguments under the same contract.
    unsafe { real::futimens(fd, times) }
}

/// The target of a symbolic link found in the PFS directory (Tessera creates none); EINVAL
/// for any other file, as the kernel says.
///
/// # Safety
/// As `readlink(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn readlink(path: *const c_char, buf: *mut c_char, n: size_t) -> ssize_t {
    // SAFETY: forwarded under this function's own contract.
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
    // SAFETY: forwarded under this function's own contract.
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

/// Enters a Tessera directory: the working directory becomes virtual (the kernel's stays).
fn enter_dir(p: &str) -> FsResult<c_int> {
    let a = client()?.stat_follow(p)?;
    if a.kind != FileKind::Dir {
        return Err(FsError::new(
            Errno::NotDir,
            format!("{p} is not a directory"),
        ));
    }
    state::set_cwd(Some(p.to_string()));
    crate::exec::entered(p);
    Ok(0)
}

/// `chdir` to a path outside Tessera. From a virtual working directory a relative path is
/// taken against it (`cd ..` from `/tessera` goes to `/`), not against the kernel's.
///
/// # Safety
/// `path` is NUL-terminated.
unsafe fn leave_to(path: *const c_char) -> c_int {
    let absolute = state::cwd().and_then(|cwd| {
        // SAFETY: NUL-terminated (this function's contract).
        let rel = unsafe { std::ffi::CStr::from_ptr(path) }.to_str().ok()?;
        (!rel.starts_with('/')).then(|| {
            let joined = tessera_client::posix::join_user(&cwd, rel);
            std::ffi::CString::new(tessera_client::posix::lexical_normalize(&joined)).ok()
        })?
    });
    let target = absolute.as_ref().map_or(path, |c| c.as_ptr());
    // SAFETY: libc's own call, with a NUL-terminated path.
    let r = unsafe { real::chdir(target) };
    if r == 0 {
        state::set_cwd(None);
        crate::exec::left();
    }
    r
}

/// `chdir` into Tessera keeps a virtual working directory, against which relative paths
/// are resolved; `chdir` elsewhere goes to the kernel and leaves it.
///
/// # Safety
/// As `chdir(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn chdir(path: *const c_char) -> c_int {
    if state::in_vfork_child() {
        // SAFETY: forwarded under this function's own contract.
        return crate::guarded(|| unsafe { crate::vfork::chdir_in_child(path) });
    }
    // SAFETY: forwarded under this function's own contract.
    match unsafe { tessera_path(libc::AT_FDCWD, path) } {
        Some(p) => run(|| {
            let p = p?;
            enter_dir(&p)
        }),
        // SAFETY: NUL-terminated by chdir's contract (tessera_path saw a path).
        None => crate::guarded(|| unsafe { leave_to(path) }),
    }
}
/// # Safety
/// As `fchdir(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fchdir(fd: c_int) -> c_int {
    if let Some(d) = desc(fd) {
        let p = state::lock_desc(&d).path.clone();
        return run(|| enter_dir(&p));
    }
    // SAFETY: libc's own call, with the caller's arguments under the same contract.
    let r = unsafe { real::fchdir(fd) };
    if r == 0 {
        state::set_cwd(None);
        crate::exec::left();
    }
    r
}
/// # Safety
/// As `getcwd(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getcwd(buf: *mut c_char, size: size_t) -> *mut c_char {
    crate::guarded(|| {
        let Some(cwd) = state::cwd() else {
            // SAFETY: libc's own call, with the caller's arguments under the same contract.
            return unsafe { real::getcwd(buf, size) };
        };
        let _b = crate::state::Busy::enter();
        let bytes = cwd.as_bytes();
        if buf.is_null() {
            // glibc's extension: allocate (size 0: as large as needed).
            if size != 0 && size < bytes.len() + 1 {
                fail(&FsError::new(Errno::Range, "getcwd: buffer too small"));
                return std::ptr::null_mut();
            }
            // SAFETY: malloc'd for the caller to free, as glibc does.
            let p = unsafe { libc::malloc(bytes.len() + 1) } as *mut c_char;
            if p.is_null() {
                return p;
            }
            // SAFETY: `p` holds `bytes.len() + 1` bytes, just allocated.
            unsafe {
                std::ptr::copy_nonoverlapping(bytes.as_ptr().cast(), p, bytes.len());
                *p.add(bytes.len()) = 0;
            }
            return p;
        }
        if size < bytes.len() + 1 {
            fail(&FsError::new(Errno::Range, "getcwd: buffer too small"));
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's buffer holds `size` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr().cast(), buf, bytes.len());
            *buf.add(bytes.len()) = 0;
        }
        buf
    })
}

/// Whether the descriptor refers to a Tessera directory (for `fdopendir`).
pub fn is_dir_fd(fd: c_int) -> Option<String> {
    let d = lookup(fd)?;
    let g = state::lock_desc(&d);
    matches!(g.obj, Object::Dir).then(|| g.path.clone())
}

/// The error for a NULL result pointer, as the kernel answers it.
fn efault(what: &str) -> FsError {
    FsError::new(Errno::Fault, format!("{what} is NULL"))
}

alias!(__fstat64 => fstat64(fd: c_int, buf: *mut libc::stat64) -> c_int);

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
    // SAFETY: forwarded under this function's own contract (`dev` readable).
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
    // SAFETY: forwarded under this function's own contract.
    unsafe { mknodat(dirfd, path, mode, dev) }
}
