//! Ending a process: what it wrote to Tessera files it did not close is published, as close
//! would.
//!
//! A program may return from `main`, call `exit` or `_exit`, or have forked children that do,
//! with Tessera files still open. `exit` (and a return from `main`) runs [`at_exit`],
//! registered with `atexit` when the library is loaded, so after every handler the program
//! registers itself; glibc flushes stdio streams only after all handlers, so Tessera's streams
//! are flushed here first. `_exit` and `_Exit` are interposed to publish before they end the
//! process (they flush no stream, as POSIX says). A killed process runs none of this: its
//! daemon publishes what its index logs hold when its connection ends.
//!
//! Nothing here waits for a lock another thread holds (that thread may be blocked for good,
//! in a byte-range lock wait say), and nothing touches state that is not this process's own
//! (a `vfork` child that calls `_exit` shares its parent's memory): what cannot be published
//! now is left to the daemon, which publishes what a process left once it has ended.
//! `_exit` called from a signal handler that interrupted the allocator can still block on the
//! allocator's lock (publishing allocates); the process then ends at the next `SIGKILL`, and
//! the daemon publishes its writes.

use crate::state::{self, Object};
use libc::c_int;
use std::sync::atomic::Ordering;

/// Registers [`at_exit`] when the library is loaded.
#[used]
#[unsafe(link_section = ".init_array")]
static REGISTER: extern "C" fn() = register;

extern "C" fn register() {
    // SAFETY: atexit only records the function pointer.
    unsafe { libc::atexit(at_exit) };
}

/// Run by `exit`: flushes Tessera stdio streams, then publishes every open Tessera file.
extern "C" fn at_exit() {
    // A panic must not unwind into libc's exit.
    let _ = std::panic::catch_unwind(|| {
        flush_streams();
        publish_open_files();
        crate::stats::write_at_exit();
    });
}

/// Flushes the stdio streams of Tessera files (their writes land in Tessera descriptors),
/// unless the client is busy in another thread (a flush would wait for it).
fn flush_streams() {
    if state::FILE_STREAMS.load(Ordering::Relaxed) == 0 {
        return;
    }
    if !state::client().is_ok_and(|c| c.idle_in_this_process()) {
        return;
    }
    let streams: Vec<usize> = match state::try_table() {
        Some(t) => t.streams.keys().copied().collect(),
        None => return,
    };
    for f in streams {
        // SAFETY: a stream this library created and the program did not close (fclose
        // removes it from the table).
        unsafe { libc::fflush(f as *mut libc::FILE) };
    }
}

/// Publishes the unattached writes of every open Tessera file of this process (also before
/// another program replaces it).
pub fn publish_open_files() {
    let descs: Vec<state::DescRef> = match state::try_table() {
        Some(t) => t.fds.values().cloned().collect(),
        None => return,
    };
    let _b = state::Busy::enter();
    for d in descs {
        let Ok(mut desc) = d.try_lock() else {
            continue;
        };
        if let Object::File(f) = &mut desc.obj
            && let Err(e) = f.publish_at_exit()
        {
            crate::report(&e);
        }
    }
}

/// Publishes the unattached writes of every open Tessera file of this process, waiting for
/// each (not at exit: another thread may use them), and fails with the first error.
pub fn publish_open_files_or_fail() -> tessera_client::FsResult<()> {
    let descs: Vec<state::DescRef> = state::table().fds.values().cloned().collect();
    for d in descs {
        let mut desc = state::lock_desc(&d);
        if let Object::File(f) = &mut desc.obj
            && f.is_writable()
        {
            f.attach_file()?;
        }
    }
    Ok(())
}

/// As `_exit(2)`, after publishing this process's open Tessera files.
///
/// # Safety
/// As `_exit(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn _exit(status: c_int) -> ! {
    let _ = std::panic::catch_unwind(publish_open_files);
    // SAFETY: libc's _exit with the caller's status.
    unsafe { crate::real::_exit(status) }
}

/// As `_Exit(3)`, after publishing this process's open Tessera files.
///
/// # Safety
/// As `_Exit(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn _Exit(status: c_int) -> ! {
    // SAFETY: no pointers: only `status`, handed to our `_exit` (publish, then the real `_exit`).
    unsafe { _exit(status) }
}
