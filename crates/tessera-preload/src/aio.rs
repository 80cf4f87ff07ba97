//! POSIX asynchronous I/O (`aio_*`, `lio_listio`) on Tessera descriptors.
//!
//! glibc runs an aio request on a helper thread that calls the kernel directly, which would
//! meet the `O_PATH` placeholder instead of the Tessera file. Open MPI's ompio issues its
//! non-blocking MPI-IO (`MPI_File_iwrite_at`, ...) this way. A request on a Tessera descriptor
//! therefore runs at submission, through the same path as `pread`/`pwrite`/`fsync`, and its
//! outcome is kept until `aio_return` collects it: `aio_error` then reports it complete,
//! `aio_suspend` returns at once, `aio_cancel` answers `AIO_ALLDONE`. Requests on other
//! descriptors go to glibc unchanged.
//!
//! Completion notification: `SIGEV_NONE` and `SIGEV_SIGNAL` (the signal is queued at
//! submission); `SIGEV_THREAD` fails with `ENOTSUP` instead of never calling back.

use crate::state::{Busy, desc};
use crate::{fail, files, real};
use libc::{aiocb, c_int, c_void, sigevent, ssize_t, timespec};
use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, MutexGuard};
use tessera_cabi::errno;
use tessera_client::{Errno, FsError};

/// Outcomes of completed Tessera requests, by the address of their control block:
/// (return value, errno).
fn done() -> MutexGuard<'static, HashMap<usize, (ssize_t, c_int)>> {
    static DONE: LazyLock<Mutex<HashMap<usize, (ssize_t, c_int)>>> =
        LazyLock::new(Default::default);
    DONE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Checks the notification a request asks for; queues its signal after it completed.
fn notify(ev: &sigevent, after: bool) -> Result<(), FsError> {
    match ev.sigev_notify {
        libc::SIGEV_NONE => Ok(()),
        libc::SIGEV_SIGNAL => {
            if after {
                // SAFETY: queueing a signal to this process with the caller's value.
                unsafe { libc::sigqueue(libc::getpid(), ev.sigev_signo, ev.sigev_value) };
            }
            Ok(())
        }
        other => Err(FsError::new(
            Errno::NotSup,
            format!(
                "aio on a Tessera descriptor: notification {other} is not supported; use SIGEV_NONE (poll with aio_error) or SIGEV_SIGNAL"
            ),
        )),
    }
}

/// Runs one request on a Tessera descriptor now and records its outcome.
///
/// # Safety
/// `cb` points to a valid control block whose buffer is valid for `aio_nbytes`.
unsafe fn run_now(cb: *mut aiocb, op: c_int) -> c_int {
    // SAFETY: the caller's contract.
    let c = unsafe { &*cb };
    if let Err(e) = notify(&c.aio_sigevent, false) {
        let _b = Busy::enter();
        return fail(&e);
    }
    // SAFETY: the request's own descriptor, buffer and offset, through the interposed calls.
    let ret = unsafe {
        match op {
            libc::LIO_READ => files::pread(c.aio_fildes, c.aio_buf, c.aio_nbytes, c.aio_offset),
            libc::LIO_WRITE => files::pwrite(
                c.aio_fildes,
                c.aio_buf as *const c_void,
                c.aio_nbytes,
                c.aio_offset,
            ),
            _ => files::fsync(c.aio_fildes) as ssize_t,
        }
    };
    let err = if ret < 0 { errno() } else { 0 };
    {
        let _b = Busy::enter();
        done().insert(cb as usize, (ret, err));
    }
    let _ = notify(&c.aio_sigevent, true);
    0
}

/// Forgets a kept outcome of `cb` before the control block goes to glibc: a program may reuse
/// it for another file without having collected the outcome with `aio_return`.
fn forget(cb: *const aiocb) {
    let _b = Busy::enter();
    let mut d = done();
    if !d.is_empty() {
        d.remove(&(cb as usize));
    }
}

/// Whether a control block names a Tessera descriptor.
///
/// # Safety
/// `cb` is null or points to a valid control block.
unsafe fn tessera(cb: *const aiocb) -> bool {
    // SAFETY: the caller's contract.
    !cb.is_null() && desc(unsafe { (*cb).aio_fildes }).is_some()
}

/// `aio_read`: on a Tessera descriptor, reads now.
///
/// # Safety
/// As `aio_read(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aio_read(cb: *mut aiocb) -> c_int {
    // SAFETY: `cb` is NULL or a valid `struct aiocb` per aio_read(3); `tessera` only reads its
    // `aio_fildes`.
    if unsafe { tessera(cb) } {
        // SAFETY: `cb` is non-NULL (just checked) and a valid control block whose buffer holds
        // `aio_nbytes` bytes per aio_read(3), as `run_now` requires.
        return unsafe { run_now(cb, libc::LIO_READ) };
    }
    forget(cb);
    // SAFETY: the caller's arguments, passed unchanged to the real `aio_read`, whose contract the caller met in calling it.
    unsafe { real::aio_read(cb) }
}
alias!(aio_read64 => aio_read(cb: *mut aiocb) -> c_int);

/// `aio_write`: on a Tessera descriptor, writes now.
///
/// # Safety
/// As `aio_write(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aio_write(cb: *mut aiocb) -> c_int {
    // SAFETY: aio_write(3) makes `cb` a valid control block (or NULL, which `tessera` rejects).
    if unsafe { tessera(cb) } {
        // SAFETY: `cb` is non-NULL and, per aio_write(3), its buffer holds `aio_nbytes` readable
        // bytes, which `run_now` needs.
        return unsafe { run_now(cb, libc::LIO_WRITE) };
    }
    forget(cb);
    // SAFETY: the caller's arguments, passed unchanged to the real `aio_write`, whose contract the caller met in calling it.
    unsafe { real::aio_write(cb) }
}
alias!(aio_write64 => aio_write(cb: *mut aiocb) -> c_int);

/// `aio_fsync`: on a Tessera descriptor, fsyncs now (commit and durable logs).
///
/// # Safety
/// As `aio_fsync(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aio_fsync(op: c_int, cb: *mut aiocb) -> c_int {
    // SAFETY: `cb` points to a valid control block by aio_fsync(3)'s contract; `tessera` also
    // accepts NULL.
    if unsafe { tessera(cb) } {
        // SAFETY: `cb` is a non-NULL, valid control block per aio_fsync(3); with LIO_NOP `run_now`
        // only fsyncs, touching no buffer.
        return unsafe { run_now(cb, libc::LIO_NOP) };
    }
    forget(cb);
    // SAFETY: the caller's arguments, passed unchanged to the real `aio_fsync`, whose contract the caller met in calling it.
    unsafe { real::aio_fsync(op, cb) }
}
alias!(aio_fsync64 => aio_fsync(op: c_int, cb: *mut aiocb) -> c_int);

/// The outcome of a completed Tessera request, if `cb` is one.
fn outcome(cb: *const aiocb, take: bool) -> Option<(ssize_t, c_int)> {
    let _b = Busy::enter();
    let mut d = done();
    if d.is_empty() {
        return None;
    }
    if take {
        d.remove(&(cb as usize))
    } else {
        d.get(&(cb as usize)).copied()
    }
}

/// `aio_error`: a Tessera request is complete; its errno (0 on success).
///
/// # Safety
/// As `aio_error(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aio_error(cb: *const aiocb) -> c_int {
    crate::guarded(|| {
        match outcome(cb, false) {
            Some((_, err)) => err,
            // SAFETY: the caller's arguments, passed unchanged to the real `aio_error`, whose contract the caller met in calling it.
            None => unsafe { real::aio_error(cb) },
        }
    })
}
alias!(aio_error64 => aio_error(cb: *const aiocb) -> c_int);

/// `aio_return`: the result of a Tessera request (once, as POSIX says).
///
/// # Safety
/// As `aio_return(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aio_return(cb: *mut aiocb) -> ssize_t {
    crate::guarded(|| {
        match outcome(cb, true) {
            Some((ret, err)) => {
                if ret < 0 {
                    tessera_cabi::set_errno(err);
                }
                ret
            }
            // SAFETY: the caller's arguments, passed unchanged to the real `aio_return`, whose contract the caller met in calling it.
            None => unsafe { real::aio_return(cb) },
        }
    })
}
alias!(aio_return64 => aio_return(cb: *mut aiocb) -> ssize_t);

/// `aio_suspend`: returns at once if any listed request is a completed Tessera one.
///
/// # Safety
/// As `aio_suspend(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aio_suspend(
    list: *const *const aiocb,
    n: c_int,
    timeout: *const timespec,
) -> c_int {
    crate::guarded(|| {
        if !list.is_null() && n > 0 {
            // SAFETY: `n` entries, by the caller's contract.
            let cbs = unsafe { std::slice::from_raw_parts(list, n as usize) };
            if cbs.iter().any(|&cb| outcome(cb, false).is_some()) {
                return 0;
            }
        }
        // SAFETY: the caller's arguments, passed unchanged to the real `aio_suspend`, whose contract the caller met in calling it.
        unsafe { real::aio_suspend(list, n, timeout) }
    })
}
alias!(aio_suspend64 => aio_suspend(list: *const *const aiocb, n: c_int, timeout: *const timespec) -> c_int);

/// `aio_cancel`: Tessera requests are already done.
///
/// # Safety
/// As `aio_cancel(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aio_cancel(fd: c_int, cb: *mut aiocb) -> c_int {
    crate::guarded(|| {
        if desc(fd).is_some() {
            return libc::AIO_ALLDONE;
        }
        // SAFETY: the caller's arguments, passed unchanged to the real `aio_cancel`, whose contract the caller met in calling it.
        unsafe { real::aio_cancel(fd, cb) }
    })
}
alias!(aio_cancel64 => aio_cancel(fd: c_int, cb: *mut aiocb) -> c_int);

/// `lio_listio`: Tessera requests run now; the others go to glibc as one list.
///
/// # Safety
/// As `lio_listio(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lio_listio(
    mode: c_int,
    list: *const *mut aiocb,
    n: c_int,
    ev: *mut sigevent,
) -> c_int {
    if list.is_null() || n <= 0 {
        // SAFETY: the caller's arguments, passed unchanged to the real `lio_listio`, whose contract the caller met in calling it.
        return unsafe { real::lio_listio(mode, list, n, ev) };
    }
    // SAFETY: `n` entries, by the caller's contract.
    let cbs = unsafe { std::slice::from_raw_parts(list, n as usize) };
    // SAFETY: each entry is a control block of the caller's list (lio_listio's contract).
    if !cbs.iter().any(|&cb| unsafe { tessera(cb) }) {
        // SAFETY: the caller's arguments, passed unchanged to the real `lio_listio`, whose contract the caller met in calling it.
        return unsafe { real::lio_listio(mode, list, n, ev) };
    }
    // The list's own notification is checked before anything runs.
    if !ev.is_null() && mode == libc::LIO_NOWAIT {
        // SAFETY: the caller's notification.
        if let Err(e) = notify(unsafe { &*ev }, false) {
            let _b = Busy::enter();
            return fail(&e);
        }
    }
    let mut rest: Vec<*mut aiocb> = Vec::new();
    let mut failed = false;
    for &cb in cbs {
        // SAFETY: `cb` is an entry of the caller's `list` of `n` pointers (NULL or valid control
        // blocks per lio_listio(3)), which `tessera` accepts.
        if unsafe { tessera(cb) } {
            // SAFETY: a listed control block.
            let op = unsafe { (*cb).aio_lio_opcode };
            if op == libc::LIO_NOP {
                continue;
            }
            // A request fails by its outcome (aio_error tells which) or by its notification.
            // SAFETY: `cb` is a non-NULL listed control block whose buffer holds `aio_nbytes`
            // bytes per lio_listio(3), as `run_now` requires.
            if unsafe { run_now(cb, op) } != 0 || outcome(cb, false).is_some_and(|(_, e)| e != 0) {
                failed = true;
            }
        } else if !cb.is_null() {
            forget(cb);
            rest.push(cb);
        }
    }
    let rc = if rest.is_empty() {
        if !ev.is_null() && mode == libc::LIO_NOWAIT {
            // SAFETY: the caller's notification, checked above.
            let _ = notify(unsafe { &*ev }, true);
        }
        0
    } else {
        // SAFETY: `rest` holds the caller's non-Tessera requests, each a non-NULL aiocb of its
        // list (lio_listio's contract), and lives across the call; `ev` is the caller's own.
        unsafe { real::lio_listio(mode, rest.as_ptr(), rest.len() as c_int, ev) }
    };
    if failed && mode == libc::LIO_WAIT {
        // As glibc: the list failed; each request's own error is in aio_error.
        tessera_cabi::set_errno(libc::EIO);
        return -1;
    }
    rc
}
alias!(lio_listio64 => lio_listio(mode: c_int, list: *const *mut aiocb, n: c_int, ev: *mut sigevent) -> c_int);
