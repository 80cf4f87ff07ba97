//! glibc functions that reach the file system through glibc's internal entry points, which
//! the interposer never sees: `remove` calls an internal `unlinkat`, `utime` an internal
//! `utimensat`, `mkdtemp` an internal `mkdir`, and so on, so on a Tessera path the kernel
//! would answer (`ENOENT`). Each is defined again here over the interposer's own entry points,
//! with glibc's meaning; on other paths and descriptors those entry points hand the call to
//! the kernel as before.

use crate::state::{self, desc};
use crate::{real, run, tessera_path};
use libc::{c_char, c_int, c_long, mode_t, off_t, size_t, timespec, timeval};

/// Sets errno and returns -1.
fn fail_with(errno: c_int) -> c_int {
    tessera_cabi::set_errno(errno);
    -1
}

/// # Safety
/// As `remove(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn remove(path: *const c_char) -> c_int {
    // glibc's order: unlink first, and a directory (EISDIR) is removed as one.
    // SAFETY: the interposer's unlinkat, under this function's contract.
    let r = unsafe { crate::meta::unlinkat(libc::AT_FDCWD, path, 0) };
    if r != 0 && tessera_cabi::errno() == libc::EISDIR {
        // SAFETY: as above.
        return unsafe { crate::meta::unlinkat(libc::AT_FDCWD, path, libc::AT_REMOVEDIR) };
    }
    r
}

/// Two timespecs from two timevals (`None`: now).
///
/// # Safety
/// `tv` is NULL or points to two timevals.
unsafe fn from_timevals(tv: *const timeval) -> Option<Result<[timespec; 2], c_int>> {
    if tv.is_null() {
        return None;
    }
    // SAFETY: two timevals (this function's contract).
    let t = unsafe { std::slice::from_raw_parts(tv, 2) };
    if t.iter().any(|t| !(0..1_000_000).contains(&t.tv_usec)) {
        return Some(Err(libc::EINVAL));
    }
    let ts = |t: &timeval| timespec {
        tv_sec: t.tv_sec,
        tv_nsec: t.tv_usec * 1000,
    };
    Some(Ok([ts(&t[0]), ts(&t[1])]))
}

/// `utimensat` with times given as two timevals (NULL: now).
///
/// # Safety
/// As `utimes(2)` for `tv`, `utimensat(2)` for the rest.
unsafe fn utimes_at(dirfd: c_int, path: *const c_char, tv: *const timeval, flags: c_int) -> c_int {
    // SAFETY: `tv` is NULL or points to two timevals (utimes(2), as our contract states), which
    // is `from_timevals`'s requirement.
    let times = match unsafe { from_timevals(tv) } {
        Some(Err(e)) => return fail_with(e),
        Some(Ok(t)) => Some(t),
        None => None,
    };
    let ptr = times.as_ref().map_or(std::ptr::null(), |t| t.as_ptr());
    if path.is_null() {
        // futimesat with a NULL path: the descriptor itself.
        // SAFETY: the interposer's futimens, with two timespecs or NULL.
        return unsafe { crate::meta::futimens(dirfd, ptr) };
    }
    // SAFETY: the interposer's utimensat, with two timespecs or NULL.
    unsafe { crate::meta::utimensat(dirfd, path, ptr, flags) }
}

/// # Safety
/// As `utime(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn utime(path: *const c_char, times: *const libc::utimbuf) -> c_int {
    let ts = (!times.is_null()).then(|| {
        // SAFETY: non-NULL, so a utimbuf (utime's contract).
        let t = unsafe { &*times };
        [
            timespec {
                tv_sec: t.actime,
                tv_nsec: 0,
            },
            timespec {
                tv_sec: t.modtime,
                tv_nsec: 0,
            },
        ]
    });
    let ptr = ts.as_ref().map_or(std::ptr::null(), |t| t.as_ptr());
    // SAFETY: the interposer's utimensat, with two timespecs or NULL.
    unsafe { crate::meta::utimensat(libc::AT_FDCWD, path, ptr, 0) }
}

/// # Safety
/// As `utimes(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn utimes(path: *const c_char, tv: *const timeval) -> c_int {
    // SAFETY: `path` is NUL-terminated and `tv` NULL or two timevals, as utimes(2) asks of our
    // caller and `utimes_at` requires.
    unsafe { utimes_at(libc::AT_FDCWD, path, tv, 0) }
}

/// # Safety
/// As `lutimes(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lutimes(path: *const c_char, tv: *const timeval) -> c_int {
    // SAFETY: lutimes(3) gives a NUL-terminated `path` and `tv` NULL or two timevals; `utimes_at`
    // needs just that.
    unsafe { utimes_at(libc::AT_FDCWD, path, tv, libc::AT_SYMLINK_NOFOLLOW) }
}

/// # Safety
/// As `futimes(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn futimes(fd: c_int, tv: *const timeval) -> c_int {
    // SAFETY: the path is NULL (`utimes_at` then works on descriptor `fd`); `tv` is NULL or two
    // timevals per futimes(3).
    unsafe { utimes_at(fd, std::ptr::null(), tv, 0) }
}

/// # Safety
/// As `futimesat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn futimesat(dirfd: c_int, path: *const c_char, tv: *const timeval) -> c_int {
    // SAFETY: `path` is NULL or NUL-terminated and `tv` NULL or two timevals per futimesat(2);
    // `dirfd` passes through.
    unsafe { utimes_at(dirfd, path, tv, 0) }
}

/// # Safety
/// As `mkdtemp(3)`: `template` is writable and NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkdtemp(template: *mut c_char) -> *mut c_char {
    crate::guarded(|| {
        // SAFETY: NUL-terminated by the caller's contract.
        if unsafe { tessera_path(libc::AT_FDCWD, template) }.is_none() {
            // SAFETY: the caller's arguments, passed unchanged to the real `mkdtemp`, whose contract the caller met in calling it.
            return unsafe { real::mkdtemp(template) };
        }
        let mode = 0o700 & !crate::files::umask();
        // SAFETY: a writable NUL-terminated template naming a Tessera path.
        let r = unsafe {
            crate::tempfiles::with_random_names(template, 0, |path| {
                state::client()?.mkdir(path, mode).map(|()| 0)
            })
        };
        if r < 0 {
            std::ptr::null_mut()
        } else {
            template
        }
    })
}

/// # Safety
/// As `mkfifo(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkfifo(path: *const c_char, mode: mode_t) -> c_int {
    // SAFETY: the interposer's mknodat (which refuses a FIFO in Tessera with the reason).
    unsafe { crate::meta::mknodat(libc::AT_FDCWD, path, mode | libc::S_IFIFO, 0) }
}

/// # Safety
/// As `mkfifoat(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkfifoat(dirfd: c_int, path: *const c_char, mode: mode_t) -> c_int {
    // SAFETY: as `mkfifo`.
    unsafe { crate::meta::mknodat(dirfd, path, mode | libc::S_IFIFO, 0) }
}

/// # Safety
/// As `get_current_dir_name(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn get_current_dir_name() -> *mut c_char {
    if state::cwd().is_none() {
        // SAFETY: glibc's own call.
        return unsafe { real::get_current_dir_name() };
    }
    // SAFETY: the interposer's getcwd, allocating as large as needed.
    unsafe { crate::meta::getcwd(std::ptr::null_mut(), 0) }
}

/// # Safety
/// As `lchmod(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lchmod(path: *const c_char, mode: mode_t) -> c_int {
    // SAFETY: the interposer's fchmodat, under this function's contract.
    unsafe { crate::meta::fchmodat(libc::AT_FDCWD, path, mode, libc::AT_SYMLINK_NOFOLLOW) }
}

/// # Safety
/// As `lockf(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lockf(fd: c_int, cmd: c_int, len: off_t) -> c_int {
    if desc(fd).is_none() {
        // SAFETY: the caller's arguments, passed unchanged to the real `lockf64`, whose contract the caller met in calling it.
        return unsafe { real::lockf64(fd, cmd, len) };
    }
    // glibc's lockf, over the interposer's fcntl locks: from the position, `len` bytes.
    // SAFETY: plain data.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_whence = libc::SEEK_CUR as i16;
    fl.l_len = len;
    let fcntl = |cmd: c_int, fl: &mut libc::flock| {
        // SAFETY: the interposer's fcntl with a struct flock that lives through the call.
        unsafe { crate::locks::fcntl(fd, cmd, fl as *mut libc::flock as libc::c_ulong) }
    };
    match cmd {
        libc::F_TEST => {
            fl.l_type = libc::F_RDLCK as i16;
            if fcntl(libc::F_GETLK, &mut fl) < 0 {
                return -1;
            }
            // SAFETY: getpid cannot fail.
            if fl.l_type == libc::F_UNLCK as i16 || fl.l_pid == unsafe { libc::getpid() } {
                0
            } else {
                fail_with(libc::EACCES)
            }
        }
        libc::F_ULOCK => {
            fl.l_type = libc::F_UNLCK as i16;
            fcntl(libc::F_SETLK, &mut fl)
        }
        libc::F_LOCK => {
            fl.l_type = libc::F_WRLCK as i16;
            fcntl(libc::F_SETLKW, &mut fl)
        }
        libc::F_TLOCK => {
            fl.l_type = libc::F_WRLCK as i16;
            fcntl(libc::F_SETLK, &mut fl)
        }
        _ => fail_with(libc::EINVAL),
    }
}
alias!(lockf64 => lockf(fd: c_int, cmd: c_int, len: off_t) -> c_int);

/// What `pathconf` answers for a Tessera file: Linux's values for a local file system, with
/// Tessera's limits (names of 255 bytes, 64-bit sizes); -1 with errno untouched for "no
/// limit", `EINVAL` for a name it does not know.
fn tessera_conf(name: c_int) -> c_long {
    match name {
        libc::_PC_LINK_MAX => 65_000,
        libc::_PC_MAX_CANON | libc::_PC_MAX_INPUT | libc::_PC_NAME_MAX => 255,
        libc::_PC_PATH_MAX => libc::PATH_MAX as c_long,
        libc::_PC_PIPE_BUF => libc::PIPE_BUF as c_long,
        libc::_PC_CHOWN_RESTRICTED | libc::_PC_NO_TRUNC | libc::_PC_2_SYMLINKS => 1,
        libc::_PC_VDISABLE => 0,
        libc::_PC_FILESIZEBITS => 64,
        libc::_PC_ALLOC_SIZE_MIN | libc::_PC_REC_XFER_ALIGN | libc::_PC_REC_MIN_XFER_SIZE => 4096,
        libc::_PC_REC_INCR_XFER_SIZE => 4096,
        libc::_PC_REC_MAX_XFER_SIZE | libc::_PC_SYMLINK_MAX => -1,
        libc::_PC_SYNC_IO | libc::_PC_ASYNC_IO | libc::_PC_PRIO_IO => -1,
        _ => fail_with(libc::EINVAL) as c_long,
    }
}

/// # Safety
/// As `pathconf(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pathconf(path: *const c_char, name: c_int) -> c_long {
    // SAFETY: NUL-terminated or NULL by the caller's contract.
    match unsafe { tessera_path(libc::AT_FDCWD, path) } {
        Some(p) => {
            // The file must exist, as for glibc's (which asks statfs).
            let found: c_long = run(|| {
                let p = p?;
                state::client()?.stat_follow(&p).map(|_| 0)
            });
            if found < 0 { -1 } else { tessera_conf(name) }
        }
        None => {
            // SAFETY: NUL-terminated or NULL by the caller's contract.
            let k = unsafe { crate::kernel_at(libc::AT_FDCWD, path) };
            // SAFETY: glibc's own call, the path rewritten where it named a real place
            // through Tessera.
            unsafe { real::pathconf(crate::at(&k, path), name) }
        }
    }
}

/// # Safety
/// As `fpathconf(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fpathconf(fd: c_int, name: c_int) -> c_long {
    if desc(fd).is_some() {
        return tessera_conf(name);
    }
    // SAFETY: the caller's arguments, passed unchanged to the real `fpathconf`, whose contract the caller met in calling it.
    unsafe { real::fpathconf(fd, name) }
}

/// `syncfs` on a Tessera descriptor makes every Tessera file the process holds durable and
/// published (`fsync` of each), as a sync of the whole file system would.
///
/// # Safety
/// As `syncfs(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn syncfs(fd: c_int) -> c_int {
    if desc(fd).is_none() {
        // SAFETY: the caller's arguments, passed unchanged to the real `syncfs`, whose contract the caller met in calling it.
        return unsafe { real::syncfs(fd) };
    }
    let fds: Vec<c_int> = state::tessera_fds_in(0, u32::MAX)
        .into_iter()
        .map(|(fd, _)| fd)
        .collect();
    let mut r = 0;
    for fd in fds {
        // SAFETY: the interposer's fsync on a Tessera descriptor of the process.
        if unsafe { crate::files::fsync(fd) } != 0 && r == 0 {
            r = -1;
        }
    }
    r
}

/// `sync_file_range` on a Tessera descriptor makes the whole file durable and published
/// (`fdatasync`): a range is no cheaper to commit than the file.
///
/// # Safety
/// As `sync_file_range(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sync_file_range(fd: c_int, off: off_t, n: off_t, flags: u32) -> c_int {
    if desc(fd).is_none() {
        // SAFETY: the caller's arguments, passed unchanged to the real `sync_file_range`, whose contract the caller met in calling it.
        return unsafe { real::sync_file_range(fd, off, n, flags) };
    }
    if off < 0 || n < 0 {
        return fail_with(libc::EINVAL);
    }
    // SAFETY: the interposer's fdatasync on a Tessera descriptor.
    unsafe { crate::files::fdatasync(fd) }
}

/// `splice` between a pipe and a Tessera descriptor copies through a buffer (the kernel cannot
/// move pages of a file it does not hold); other pairs go to the kernel. From Tessera, only
/// what the pipe took is consumed; into Tessera, what was taken from the pipe is written
/// whole (a write that fails after a part leaves the rest lost, as the bytes are no longer in
/// the pipe: the call answers how much was written).
///
/// # Safety
/// As `splice(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn splice(
    fd_in: c_int,
    off_in: *mut i64,
    fd_out: c_int,
    off_out: *mut i64,
    len: size_t,
    flags: libc::c_uint,
) -> libc::ssize_t {
    let (tin, tout) = (desc(fd_in).is_some(), desc(fd_out).is_some());
    if !tin && !tout {
        // SAFETY: the caller's arguments, passed unchanged to the real `splice`, whose contract the caller met in calling it.
        return unsafe { real::splice(fd_in, off_in, fd_out, off_out, len, flags) };
    }
    if tin && tout {
        // One end must be a pipe, as the kernel says.
        return fail_with(libc::EINVAL) as libc::ssize_t;
    }
    let mut buf = vec![0u8; len.min(1 << 20)];
    // A Tessera input is read at its position and moved on by what the pipe took, so a short
    // write loses nothing; bytes taken from a pipe are written whole or reported lost.
    // SAFETY: reads into `buf` and writes from it, through the interposer (the Tessera end) or
    // the kernel (the pipe), at the caller's offsets when given.
    unsafe {
        let from = if tin {
            let at = if off_in.is_null() {
                crate::files::lseek(fd_in, 0, libc::SEEK_CUR)
            } else {
                *off_in
            };
            if at < 0 {
                return -1;
            }
            Some(at)
        } else {
            None
        };
        let got = match from {
            Some(at) => crate::files::pread(fd_in, buf.as_mut_ptr().cast(), buf.len(), at),
            None => crate::files::read(fd_in, buf.as_mut_ptr().cast(), buf.len()),
        };
        if got <= 0 {
            return got;
        }
        let mut put = 0usize;
        while put < got as usize {
            let w = if off_out.is_null() {
                crate::files::write(fd_out, buf[put..].as_ptr().cast(), got as usize - put)
            } else {
                crate::files::pwrite(
                    fd_out,
                    buf[put..].as_ptr().cast(),
                    got as usize - put,
                    *off_out + put as i64,
                )
            };
            if w <= 0 {
                if put == 0 {
                    return w;
                }
                break;
            }
            put += w as usize;
            if tin {
                // A pipe may take part of it; what it did not take stays in the file.
                break;
            }
        }
        if let Some(at) = from {
            if off_in.is_null() {
                crate::files::lseek(fd_in, at + put as i64, libc::SEEK_SET);
            } else {
                *off_in = at + put as i64;
            }
        }
        if !off_out.is_null() {
            *off_out += put as i64;
        }
        put as libc::ssize_t
    }
}

/// # Safety
/// As `mktemp(3)`: `template` is writable and NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mktemp(template: *mut c_char) -> *mut c_char {
    crate::guarded(|| {
        // SAFETY: NUL-terminated by the caller's contract.
        if unsafe { tessera_path(libc::AT_FDCWD, template) }.is_none() {
            // SAFETY: the caller's arguments, passed unchanged to the real `mktemp`, whose contract the caller met in calling it.
            return unsafe { real::mktemp(template) };
        }
        // A name nothing has yet (glibc's looks with lstat).
        // SAFETY: a writable NUL-terminated template naming a Tessera path.
        let r = unsafe {
            crate::tempfiles::with_random_names(template, 0, |path| {
                match state::client()?.stat(path) {
                    Ok(_) => Err(tessera_client::FsError::new(
                        tessera_client::Errno::Exist,
                        format!("{path} exists"),
                    )),
                    Err(e) if e.errno == tessera_client::Errno::NoEnt => Ok(0),
                    Err(e) => Err(e),
                }
            })
        };
        if r < 0 && !template.is_null() {
            // glibc's answer to a failure: an empty string.
            // SAFETY: writable and at least one byte (NUL-terminated).
            unsafe { *template = 0 };
        }
        template
    })
}

/// # Safety
/// As `ftok(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ftok(path: *const c_char, id: c_int) -> libc::key_t {
    // SAFETY: NUL-terminated or NULL by the caller's contract.
    match unsafe { tessera_path(libc::AT_FDCWD, path) } {
        // glibc's key, from the file's inode and device as Tessera's stat gives them.
        Some(p) => run(|| {
            let a = state::client()?.stat_follow(&p?)?;
            let dev = crate::meta::TESSERA_DEV;
            Ok(
                ((a.ino & 0xffff) | ((dev & 0xff) << 16) | ((id as u64 & 0xff) << 24))
                    as libc::key_t,
            )
        }),
        // SAFETY: the caller's arguments, passed unchanged to the real `ftok`, whose contract the caller met in calling it.
        None => unsafe { real::ftok(path, id) },
    }
}
