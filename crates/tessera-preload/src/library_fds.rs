//! The program's descriptor calls that name one of the library's own descriptors (its
//! connection, its logs: `tessera_logstore::library_fds`), which the program never opened.
//!
//! * `dup2`/`dup3` onto one: the library's descriptor moves to another number first (under
//!   its lock, so no library call is using it), then the program's call proceeds, and its
//!   file lands where it said. In a child of `fork` the descriptor is the parent library's
//!   copy: it is given up to the program instead (the child's library never closes it).
//! * `close`, `fcntl`, `dup` and `dup2` from one: `EBADF`, as for a number the program never
//!   opened; the library keeps its descriptor. (Moving it first and then closing the number
//!   it left would end the same way for the program.)
//! * `close_range` and `closefrom`: the range is closed around the library's descriptors;
//!   Tessera's own descriptors in it are closed as `close` closes them (their files
//!   published).
//!
//! Calls the library makes itself (its thread is [`busy`]) and calls in a `vfork` child
//! (whose descriptor table is its own, but whose memory is its parent's) pass through.

use crate::state::{self, busy};
use libc::{c_int, c_uint};
use tessera_client::library_fds;
use tessera_client::{Errno, FsError, FsResult};

/// Whether `fd` is one of the library's descriptors, named by the program.
pub fn named_by_program(fd: c_int) -> bool {
    library_fds::is_library(fd) && !busy() && !state::in_vfork_child()
}

/// The error for a program's call on a descriptor of the library's.
pub fn not_the_programs(fd: c_int, call: &str) -> FsError {
    FsError::new(
        Errno::BadF,
        format!(
            "{call}: descriptor {fd} is not open in the program (Tessera's interposer holds it for its own files)"
        ),
    )
}

/// Before the program's `dup2`/`dup3` onto `new`: the library's descriptor there moves away
/// (or, inherited across `fork`, is given up). `EMFILE` if no other number is free.
pub fn make_room(new: c_int) -> FsResult<()> {
    if !named_by_program(new) {
        return Ok(());
    }
    if !library_fds::held_here(new) {
        library_fds::disown(new);
        return Ok(());
    }
    match library_fds::relocate(new) {
        None | Some(Ok(_)) => Ok(()),
        Some(Err(e)) => Err(FsError::new(
            Errno::MFile,
            format!(
                "dup2 onto descriptor {new}: Tessera holds it and cannot move it ({})",
                e.message
            ),
        )),
    }
}

/// `close_range(first, last, flags)` for the program: Tessera descriptors in the range are
/// closed as `close` closes them (unless `flags` only marks them close-on-exec), and the
/// library's descriptors are left out of the kernel's ranges.
fn close_range_for_program(first: c_uint, last: c_uint, flags: c_int) -> c_int {
    if busy() || state::in_vfork_child() || first > last {
        return raw_close_range(first, last, flags);
    }
    let cloexec_only = flags & libc::CLOSE_RANGE_CLOEXEC as c_int != 0;
    if !cloexec_only {
        // The kernel's close_range does not fail for one file's close: a file's own error
        // is reported, and the range closes on.
        for (fd, d) in state::tessera_fds_in(first, last) {
            crate::run(|| crate::files::close_tessera(fd, d).map(|()| 0i8));
        }
    }
    let ours: Vec<c_uint> = library_fds::held()
        .into_iter()
        .filter_map(|fd| c_uint::try_from(fd).ok())
        .filter(|fd| (first..=last).contains(fd))
        .collect();
    if ours.is_empty() || cloexec_only {
        // The library's descriptors are close-on-exec already.
        return raw_close_range(first, last, flags);
    }
    let mut from = first;
    let mut flags_now = flags;
    for fd in ours
        .into_iter()
        .chain(std::iter::once(last.saturating_add(1)))
    {
        if fd > from {
            let r = raw_close_range(from, fd - 1, flags_now);
            if r < 0 {
                return r;
            }
            // CLOSE_RANGE_UNSHARE unshares the table once; the rest close in it.
            flags_now &= !(libc::CLOSE_RANGE_UNSHARE as c_int);
        }
        if fd == c_uint::MAX {
            break;
        }
        from = fd + 1;
    }
    0
}

fn raw_close_range(first: c_uint, last: c_uint, flags: c_int) -> c_int {
    // SAFETY: the close_range system call takes three integers and touches no memory.
    let r = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first as libc::c_long,
            last as libc::c_long,
            flags as libc::c_long,
        )
    };
    r as c_int
}

/// # Safety
/// As `close_range(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn close_range(first: c_uint, last: c_uint, flags: c_int) -> c_int {
    crate::guarded(|| close_range_for_program(first, last, flags))
}

/// # Safety
/// As `closefrom(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn closefrom(lowfd: c_int) {
    let first = c_uint::try_from(lowfd).unwrap_or(0);
    crate::guarded(|| close_range_for_program(first, c_uint::MAX, 0));
}

/// `close` of a number the program does not hold, answered without touching the library's
/// descriptor there; `None` if the call is the program's to make.
pub fn refuse(fd: c_int, call: &str) -> Option<c_int> {
    named_by_program(fd).then(|| crate::fail(&not_the_programs(fd, call)))
}
