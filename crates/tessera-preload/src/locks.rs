//! fcntl and flock on Tessera descriptors. Record locks (F_SETLK, F_SETLKW, F_GETLK and the
//! open-file-description forms) go to the daemons' lock service: shared and exclusive,
//! blocking and not, across processes and nodes, released when the process closes any
//! descriptor of the file or dies. `flock` takes a whole-file lock of the same kind.

use crate::files::{STATUS_FLAGS, dupfd};
use crate::state::{self, Busy, DescRef, Object, desc};
use crate::{fail, real, run};
use libc::{c_int, c_ulong, c_void};
use tessera_client::{Errno, FsError, FsResult, LockKind};

/// Converts a `struct flock` range into (offset, len) from the start of the file
/// (len 0 = to end of file).
fn flock_range(fd: c_int, d: &DescRef, fl: &libc::flock) -> FsResult<(u64, u64)> {
    let mut g = state::lock_desc(d);
    let base: i64 = match fl.l_whence as c_int {
        libc::SEEK_SET => 0,
        libc::SEEK_CUR => g.position(fd) as i64,
        libc::SEEK_END => match &mut g.obj {
            Object::File(f) => f.len()? as i64,
            _ => 0,
        },
        w => {
            return Err(FsError::new(
                Errno::Inval,
                format!("struct flock: l_whence {w} is not SEEK_SET, SEEK_CUR or SEEK_END"),
            ));
        }
    };
    let mut start = base.checked_add(fl.l_start).unwrap_or(-1);
    let mut len = fl.l_len;
    if len < 0 {
        // A negative length locks the bytes before l_start.
        start += len;
        len = -len;
    }
    if start < 0 {
        return Err(FsError::new(
            Errno::Inval,
            format!("struct flock: the range starts before the file ({start})"),
        ));
    }
    Ok((start as u64, len as u64))
}

/// fcntl's record locks (F_SETLK, F_SETLKW, F_GETLK and their OFD forms).
///
/// # Safety
/// `fl` is NULL or points to a `struct flock` the caller lets us read and write.
unsafe fn record_lock(fd: c_int, d: &DescRef, cmd: c_int, fl: *mut libc::flock) -> FsResult<c_int> {
    if fl.is_null() {
        return Err(FsError::new(
            Errno::Fault,
            "fcntl: the struct flock pointer is NULL",
        ));
    }
    // SAFETY: non-null, so a struct flock (this function's contract).
    let fl = unsafe { &mut *fl };
    if crate::atomic_scope::record_locks_elided()
        && !matches!(cmd, libc::F_GETLK | libc::F_OFD_GETLK)
    {
        // A list lock of the running MPI-IO access covers the bytes (see `mpiio`).
        return Ok(0);
    }
    let (off, len) = flock_range(fd, d, fl)?;
    let mut g = state::lock_desc(d);
    let Object::File(f) = &mut g.obj else {
        return Err(FsError::new(
            Errno::BadF,
            format!("fcntl lock on descriptor {fd}: it is a directory"),
        ));
    };
    let kind = match fl.l_type as c_int {
        libc::F_RDLCK => Some(LockKind::Shared),
        libc::F_WRLCK => Some(LockKind::Exclusive),
        libc::F_UNLCK => None,
        t => {
            return Err(FsError::new(
                Errno::Inval,
                format!("struct flock: l_type {t} is not F_RDLCK, F_WRLCK or F_UNLCK"),
            ));
        }
    };
    match cmd {
        libc::F_GETLK | libc::F_OFD_GETLK => {
            let Some(k) = kind else {
                return Err(FsError::new(
                    Errno::Inval,
                    "F_GETLK needs F_RDLCK or F_WRLCK",
                ));
            };
            match f.get_lock(off, len, k)? {
                None => fl.l_type = libc::F_UNLCK as i16,
                Some(h) => {
                    fl.l_type = if h.kind == LockKind::Shared {
                        libc::F_RDLCK
                    } else {
                        libc::F_WRLCK
                    } as i16;
                    fl.l_whence = libc::SEEK_SET as i16;
                    fl.l_start = h.start as i64;
                    fl.l_len = if h.end == u64::MAX {
                        0
                    } else {
                        (h.end - h.start) as i64
                    };
                    fl.l_pid = if cmd == libc::F_OFD_GETLK {
                        -1
                    } else {
                        h.owner.pid as i32
                    };
                }
            }
        }
        _ => {
            let wait = matches!(cmd, libc::F_SETLKW | libc::F_OFD_SETLKW);
            // Locks need read access for shared and write access for exclusive (POSIX).
            let acc = g.flags & libc::O_ACCMODE;
            let need_ok = match kind {
                Some(LockKind::Shared) => acc != libc::O_WRONLY,
                Some(LockKind::Exclusive) => acc != libc::O_RDONLY,
                None => true,
            };
            if !need_ok {
                return Err(FsError::new(
                    Errno::BadF,
                    format!(
                        "fcntl lock on descriptor {fd}: a {} lock needs the file open for {}",
                        if kind == Some(LockKind::Shared) {
                            "read"
                        } else {
                            "write"
                        },
                        if kind == Some(LockKind::Shared) {
                            "reading"
                        } else {
                            "writing"
                        }
                    ),
                ));
            }
            let Object::File(f) = &mut g.obj else {
                unreachable!()
            };
            match kind {
                Some(k) => {
                    f.lock(off, len, k, wait)?;
                    state::table().locked.insert(f.ino());
                }
                None => f.unlock(off, len)?,
            }
        }
    }
    Ok(0)
}

/// fcntl on a Tessera descriptor.
fn fcntl_tessera(fd: c_int, d: DescRef, cmd: c_int, arg: c_ulong) -> FsResult<c_int> {
    match cmd {
        libc::F_GETFL => Ok(state::lock_desc(&d).flags),
        libc::F_SETFL => {
            let mut g = state::lock_desc(&d);
            let changeable = libc::O_APPEND | libc::O_NONBLOCK;
            g.flags = (g.flags & !changeable) | (arg as c_int & changeable & STATUS_FLAGS);
            Ok(0)
        }
        // The close-on-exec flag lives on the kernel placeholder.
        // SAFETY: the caller's arguments, passed unchanged to the real `fcntl`, whose contract the caller met in calling it.
        libc::F_GETFD | libc::F_SETFD => Ok(unsafe { real::fcntl(fd, cmd, arg) }),
        libc::F_DUPFD | libc::F_DUPFD_CLOEXEC => Ok(dupfd(fd, d, cmd, arg)),
        libc::F_GETLK
        | libc::F_SETLK
        | libc::F_SETLKW
        | libc::F_OFD_GETLK
        | libc::F_OFD_SETLK
        // SAFETY: for these commands the argument is the caller's struct flock (fcntl's
        // contract).
        | libc::F_OFD_SETLKW => unsafe {
            record_lock(fd, &d, cmd, arg as usize as *mut libc::flock)
        },
        _ => Err(FsError::new(
            Errno::Inval,
            format!("fcntl command {cmd} is not supported on Tessera descriptor {fd}"),
        )),
    }
}

/// # Safety
/// As `fcntl(2)` (the optional argument read as a word, see the crate docs).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    if let Some(refused) = crate::library_fds::refuse(fd, "fcntl") {
        return refused;
    }
    match desc(fd) {
        Some(d) => run(|| fcntl_tessera(fd, d, cmd, arg)),
        // SAFETY: the caller's arguments, passed unchanged to the real `fcntl`, whose contract the caller met in calling it.
        None => unsafe { real::fcntl(fd, cmd, arg) },
    }
}
alias!(fcntl64 => fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int);

/// # Safety
/// As `flock(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn flock(fd: c_int, op: c_int) -> c_int {
    let Some(d) = desc(fd) else {
        // SAFETY: the caller's arguments, passed unchanged to the real `flock`, whose contract the caller met in calling it.
        return unsafe { real::flock(fd, op) };
    };
    run(|| {
        let wait = op & libc::LOCK_NB == 0;
        let mut g = state::lock_desc(&d);
        let Object::File(f) = &mut g.obj else {
            return Ok(0);
        };
        match op & !libc::LOCK_NB {
            libc::LOCK_SH => f.lock(0, 0, LockKind::Shared, wait)?,
            libc::LOCK_EX => f.lock(0, 0, LockKind::Exclusive, wait)?,
            libc::LOCK_UN => f.unlock(0, 0)?,
            other => {
                return Err(FsError::new(
                    Errno::Inval,
                    format!("flock operation {other} is not LOCK_SH, LOCK_EX or LOCK_UN"),
                ));
            }
        }
        if op & libc::LOCK_UN == 0 {
            state::table().locked.insert(f.ino());
        }
        Ok(0)
    })
}

/// ioctl on a Tessera descriptor fails with ENOTTY (no device controls; cp's clone attempt
/// then falls back to copying).
///
/// # Safety
/// As `ioctl(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ioctl(fd: c_int, req: c_ulong, arg: *mut c_void) -> c_int {
    crate::guarded(|| {
        if desc(fd).is_some() {
            let _b = Busy::enter();
            // The close-on-exec flag lives on the placeholder (python sets it this way; an
            // `O_PATH` placeholder takes it through fcntl only).
            if let Some(on) = match req {
                libc::FIOCLEX => Some(libc::FD_CLOEXEC),
                libc::FIONCLEX => Some(0),
                _ => None,
            } {
                // SAFETY: a plain call on the placeholder.
                return unsafe { real::fcntl(fd, libc::F_SETFD, on as c_ulong) };
            }
            return fail(&FsError::new(
                Errno::NoTty,
                format!("ioctl {req:#x} on Tessera descriptor {fd}: not supported"),
            ));
        }
        // SAFETY: the caller's arguments, passed unchanged to the real `ioctl`, whose contract the caller met in calling it.
        unsafe { real::ioctl(fd, req, arg) }
    })
}
