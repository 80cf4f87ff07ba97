//! The dup family: `dup`, `dup2`, `dup3`, and `fcntl`'s F_DUPFD: more descriptors of one open
//! file description.

use crate::state::{self, Busy, DescRef, desc};
use crate::{fail, real};
use libc::c_int;
use tessera_client::{Errno, FsError};

/// Makes `new` (a fresh kernel descriptor) another descriptor of `d`.
pub(crate) fn dup_into(new: c_int, d: DescRef) -> c_int {
    if new >= 0 {
        state::install(new, d);
    }
    new
}

/// # Safety
/// As `dup(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dup(fd: c_int) -> c_int {
    crate::guarded(|| {
        if let Some(refused) = crate::library_fds::refuse(fd, "dup") {
            return refused;
        }
        match desc(fd) {
            Some(d) => {
                let _b = Busy::enter();
                // SAFETY: the caller's arguments, passed unchanged to the real `dup`, whose contract the caller met in calling it.
                dup_into(unsafe { real::dup(fd) }, d)
            }
            // SAFETY: the caller's arguments, passed unchanged to the real `dup`, whose contract the caller met in calling it.
            None => unsafe { real::dup(fd) },
        }
    })
}

/// dup2/dup3: if `new` was a Tessera descriptor it is closed first, as the kernel does; if it
/// is one of the library's own, that one moves away first.
pub(crate) unsafe fn dup_to(old: c_int, new: c_int, flags: c_int, dup2: bool) -> c_int {
    if let Some(refused) = crate::library_fds::refuse(old, if dup2 { "dup2" } else { "dup3" }) {
        return refused;
    }
    // The library's descriptor moves only for a call that will succeed: a dup2 from a
    // number that is not open fails without touching `new`.
    if old != new
        && crate::library_fds::named_by_program(new)
        // SAFETY: F_GETFD reads a descriptor's flags and touches no memory.
        && unsafe { real::fcntl(old, libc::F_GETFD, 0) } >= 0
        && let Err(e) = crate::library_fds::make_room(new)
    {
        return fail(&e);
    }
    let (from, to) = (desc(old), desc(new));
    if from.is_none() && to.is_none() {
        // SAFETY: libc's own calls, with the caller's arguments under the same contract.
        return unsafe {
            if dup2 {
                if old == new {
                    // dup2(fd, fd) only checks that fd is open.
                    return if real::fcntl(old, libc::F_GETFD, 0) < 0 {
                        -1
                    } else {
                        new
                    };
                }
                real::dup3(old, new, 0)
            } else {
                real::dup3(old, new, flags)
            }
        };
    }
    if old != new {
        // Before the thread is busy: a stream of ours writes out through the interposer.
        crate::std_streams::before_change(new);
    }
    let _b = Busy::enter();
    if old == new {
        return if dup2 {
            new
        } else {
            fail(&FsError::new(
                Errno::Inval,
                "dup3: old and new descriptors are equal",
            ))
        };
    }
    // SAFETY: plain descriptor numbers.
    let r = unsafe { real::dup3(old, new, flags) };
    if r < 0 {
        return r;
    }
    if let Some(prev) = to.and_then(|_| state::uninstall(new))
        && let Err(e) = state::release(prev)
    {
        fail(&e);
    }
    let tessera = from.is_some();
    let r = match from {
        Some(d) => dup_into(new, d),
        None => new,
    };
    crate::std_streams::after_change(new, tessera);
    r
}

/// # Safety
/// As `dup2(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    // SAFETY: no pointers: `old` and `new` are plain descriptors, and `dup_to` in dup2 mode
    // reads no caller memory, only ints it may hand to the real `fcntl`/`dup3`.
    unsafe { dup_to(old, new, 0, true) }
}
/// # Safety
/// As `dup3(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    // SAFETY: no pointers: `old`, `new` and `flags` are ints; where they reach the real `dup3`,
    // that symbol was resolved with this exact signature.
    unsafe { dup_to(old, new, flags, false) }
}

/// `F_DUPFD` and `F_DUPFD_CLOEXEC` on a Tessera descriptor.
pub fn dupfd(fd: c_int, d: DescRef, cmd: c_int, min: libc::c_ulong) -> c_int {
    // SAFETY: duplicating the placeholder.
    let new = unsafe { real::fcntl(fd, cmd, min) };
    dup_into(new, d)
}
