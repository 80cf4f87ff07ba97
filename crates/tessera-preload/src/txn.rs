//! Transactions for programs under the interposer (D2T): the calls `libtessera_txn`
//! (the `tessera-txn` crate) looks up in the process at run time, so that what this process
//! publishes through the interposer's connection is part of the transaction its MPI
//! processes run. Each returns 0 or `-errno`; [`tessera_preload_txn_error`] gives the last
//! failure's message.

use crate::state;
use std::cell::RefCell;
use std::ffi::{CStr, c_char, c_int};
use tessera_client::{Errno, FsError, FsResult};

thread_local! {
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Runs `f` as an entry point: a panic never unwinds into the caller, a failure is kept for
/// [`tessera_preload_txn_error`].
fn entry(f: impl FnOnce() -> FsResult<()>) -> c_int {
    let _b = state::Busy::enter();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|_| {
        Err(FsError::new(
            Errno::Io,
            "the interposer failed inside a transaction call",
        ))
    });
    match r {
        Ok(()) => 0,
        Err(e) => {
            let code = -e.errno.code();
            LAST_ERROR.with(|l| *l.borrow_mut() = e.to_string());
            code
        }
    }
}

/// Opens a transaction at this process's daemon (its home) and stores its id in `*txn`.
///
/// # Safety
/// `txn` points to writable memory for one `u64`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_preload_txn_open(txn: *mut u64) -> c_int {
    entry(|| {
        let id = state::client()?.txn_open()?;
        // SAFETY: writable by the caller's contract.
        unsafe { txn.write(id) };
        Ok(())
    })
}

/// Reserves `count` consecutive transaction ids at this process's daemon and stores the
/// first in `*first`.
///
/// # Safety
/// `first` points to writable memory for one `u64`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_preload_txn_reserve(count: u32, first: *mut u64) -> c_int {
    entry(|| {
        let id = state::client()?.txn_reserve(count)?;
        // SAFETY: writable by the caller's contract.
        unsafe { first.write(id) };
        Ok(())
    })
}

/// Publishes what this process wrote to every Tessera file it has open (what a vote to
/// commit needs first).
#[unsafe(no_mangle)]
pub extern "C" fn tessera_preload_txn_publish() -> c_int {
    entry(|| {
        crate::exit::publish_open_files_or_fail()?;
        Ok(())
    })
}

/// Publishes this process's open files, then stores what the transaction's coordinator
/// enrolls it as: its node in `*node`, its client id in `*client`.
///
/// # Safety
/// `node` and `client` point to writable memory for one `u32` and one `u64`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_preload_txn_identity(node: *mut u32, client: *mut u64) -> c_int {
    entry(|| {
        crate::exit::publish_open_files_or_fail()?;
        let (n, c) = state::client()?.txn_identity()?;
        // SAFETY: writable by the caller's contract.
        unsafe {
            node.write(n);
            client.write(c);
        }
        Ok(())
    })
}

/// At the coordinator: makes the `count` processes (`nodes[i]`, `clients[i]`) members of
/// `txn` at once (opening it if it was reserved) and stores each one's log id in `logs[i]`.
///
/// # Safety
/// `nodes` and `clients` point to `count` readable values each, `logs` to `count` writable
/// ones (all may be null when `count` is 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_preload_txn_enroll(
    txn: u64,
    nodes: *const u32,
    clients: *const u64,
    count: usize,
    logs: *mut u64,
) -> c_int {
    entry(|| {
        let members: Vec<(u32, u64)> = if count == 0 {
            Vec::new()
        } else {
            // SAFETY: `count` readable values each, by the caller's contract.
            let (n, c) = unsafe {
                (
                    std::slice::from_raw_parts(nodes, count),
                    std::slice::from_raw_parts(clients, count),
                )
            };
            n.iter().copied().zip(c.iter().copied()).collect()
        };
        let got = state::client()?.txn_enroll(txn, members)?;
        if got.len() != count {
            return Err(FsError::new(
                Errno::Io,
                format!(
                    "the daemon answered {} log ids for {count} members",
                    got.len()
                ),
            ));
        }
        if count > 0 {
            // SAFETY: `count` writable values, by the caller's contract.
            unsafe { std::slice::from_raw_parts_mut(logs, count) }.copy_from_slice(&got);
        }
        Ok(())
    })
}

/// Takes up membership of `txn` under `log`, as the coordinator enrolled this process.
#[unsafe(no_mangle)]
pub extern "C" fn tessera_preload_txn_enter(txn: u64, log: u64) -> c_int {
    entry(|| state::client()?.txn_enter(txn, log))
}

/// Publishes this process's open files, then leaves its transaction (its daemon is told
/// with its next request), which `committed` (!= 0) or not.
#[unsafe(no_mangle)]
pub extern "C" fn tessera_preload_txn_leave(committed: c_int) -> c_int {
    entry(|| {
        crate::exit::publish_open_files_or_fail()?;
        state::client()?.txn_leave(committed != 0)
    })
}

/// Asks `txn`'s home to commit (`commit` != 0) or abort it, with `reasons` (NUL-terminated,
/// or null) for the members' errors.
///
/// # Safety
/// `reasons` is null or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_preload_txn_decide(
    txn: u64,
    commit: c_int,
    reasons: *const c_char,
) -> c_int {
    entry(|| {
        let reasons = if reasons.is_null() {
            Vec::new()
        } else {
            // SAFETY: NUL-terminated by the caller's contract.
            let r = unsafe { CStr::from_ptr(reasons) }.to_string_lossy();
            r.split('\n')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        };
        state::client()?.txn_decide(txn, commit != 0, reasons)
    })
}

/// Copies the message of this thread's last failed transaction call into `buf` (at most
/// `len` bytes, NUL-terminated); returns its full length.
///
/// # Safety
/// `buf` is null (with `len` 0) or points to `len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_preload_txn_error(buf: *mut c_char, len: usize) -> usize {
    LAST_ERROR.with(|l| {
        let msg = l.borrow();
        if !buf.is_null() && len > 0 {
            let n = msg.len().min(len - 1);
            // SAFETY: `n + 1 <= len` bytes of the caller's buffer.
            unsafe {
                std::ptr::copy_nonoverlapping(msg.as_ptr().cast(), buf, n);
                buf.add(n).write(0);
            }
        }
        msg.len()
    })
}
