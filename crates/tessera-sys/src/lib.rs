//! System calls Tessera makes that neither libc's nor rustix's safe wrappers cover, each
//! behind a safe function: the crates above them (the log store among them) forbid unsafe
//! code, so their FFI edge is here.
//!
//! `cachestat` (Linux 6.5) counts the pages of a file range the page cache holds without
//! touching them; rustix does not wrap it yet.

use std::os::fd::{AsRawFd, BorrowedFd};

/// `struct cachestat_range` of the kernel's ABI.
#[repr(C)]
struct Range {
    off: u64,
    len: u64,
}

/// `struct cachestat` of the kernel's ABI.
#[repr(C)]
#[derive(Default)]
struct Counts {
    nr_cache: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    nr_evicted: u64,
    nr_recently_evicted: u64,
}

/// The `cachestat` system call's number: the same on every architecture (it came after the
/// tables were unified).
const SYS_CACHESTAT: libc::c_long = 451;

/// Pages of `[off, off + len)` of `fd` the page cache holds, or `None` where the kernel
/// cannot say (before Linux 6.5, or a descriptor it does not take).
pub fn cached_pages(fd: BorrowedFd<'_>, off: u64, len: u64) -> Option<u64> {
    let range = Range { off, len };
    let mut counts = Counts::default();
    // SAFETY: `cachestat(fd, range, counts, flags)` reads one `cachestat_range` and writes
    // one `cachestat`, both `repr(C)` with the kernel's layout and live for the call; `fd` is
    // an open descriptor borrowed for the call. It has no other effect.
    let rc = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            fd.as_raw_fd(),
            &range as *const Range,
            &mut counts as *mut Counts,
            0u32,
        )
    };
    (rc == 0).then_some(counts.nr_cache)
}
