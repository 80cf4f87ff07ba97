//! glibc's fortified entry points (`_FORTIFY_SOURCE`): a program built with it calls
//! `__read_chk(fd, buf, n, buflen)` where it wrote `read(fd, buf, n)`, and glibc aborts with
//! "*** buffer overflow detected ***" when `n` exceeds what the compiler knows the buffer
//! holds. The interposer must define these to see the calls at all; each one here makes
//! glibc's own check first (failing through glibc's `__chk_fail`, so the message and the abort
//! are glibc's), then serves a Tessera descriptor or path and hands anything else to glibc's
//! own fortified function.

use crate::state::desc;
use crate::{real, tessera_path};
use libc::{c_char, c_int, c_uint, c_void, off_t, size_t, ssize_t};

/// glibc's `__chk_fail`: prints "*** buffer overflow detected ***: terminated" and aborts.
fn overflow() -> ! {
    // SAFETY: glibc's own function, which takes nothing and does not return.
    unsafe { real::__chk_fail() };
    // glibc's never returns; should a replacement, the process still must not go on.
    std::process::abort()
}

/// # Safety
/// As `read(2)`, with `buflen` the size of `buf`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __read_chk(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    buflen: size_t,
) -> ssize_t {
    if n > buflen {
        overflow();
    }
    if desc(fd).is_some() {
        // SAFETY: `buf` holds at least `n` bytes (checked above, and the call's contract).
        return unsafe { crate::files::read(fd, buf, n) };
    }
    // SAFETY: glibc's own fortified call, with the caller's arguments.
    unsafe { real::__read_chk(fd, buf, n, buflen) }
}

/// # Safety
/// As `pread(2)`, with `buflen` the size of `buf`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __pread_chk(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    off: off_t,
    buflen: size_t,
) -> ssize_t {
    if n > buflen {
        overflow();
    }
    if desc(fd).is_some() {
        // SAFETY: `buf` holds at least `n` bytes (checked above, and the call's contract).
        return unsafe { crate::files::pread(fd, buf, n, off) };
    }
    // SAFETY: glibc's own fortified call, with the caller's arguments.
    unsafe { real::__pread_chk(fd, buf, n, off, buflen) }
}

// `off_t` is 64 bits on 64-bit Linux: glibc's two names are the same function.
alias!(__pread64_chk => __pread_chk(fd: c_int, buf: *mut c_void, n: size_t, off: off_t, buflen: size_t) -> ssize_t);

/// # Safety
/// As `readlink(2)`, with `buflen` the size of `buf`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __readlink_chk(
    path: *const c_char,
    buf: *mut c_char,
    n: size_t,
    buflen: size_t,
) -> ssize_t {
    // SAFETY: `path` is NULL or NUL-terminated and `buf` holds `buflen` bytes, per readlink(2) and
    // the fortify ABI on our caller; `__readlinkat_chk` checks `n <= buflen` itself.
    unsafe { __readlinkat_chk(libc::AT_FDCWD, path, buf, n, buflen) }
}

/// # Safety
/// As `readlinkat(2)`, with `buflen` the size of `buf`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __readlinkat_chk(
    dirfd: c_int,
    path: *const c_char,
    buf: *mut c_char,
    n: size_t,
    buflen: size_t,
) -> ssize_t {
    if n > buflen {
        overflow();
    }
    // SAFETY: NUL-terminated or NULL by the call's contract.
    if unsafe { tessera_path(dirfd, path) }.is_some() {
        // SAFETY: `buf` holds at least `n` bytes (checked above, and the call's contract).
        return unsafe { crate::meta::readlinkat(dirfd, path, buf, n) };
    }
    // SAFETY: the caller's arguments, which glibc checks again; the path rewritten where it
    // named a real place through Tessera.
    let k = unsafe { crate::kernel_at(dirfd, path) };
    // SAFETY: glibc's own fortified call.
    unsafe { real::__readlinkat_chk(dirfd, crate::at(&k, path), buf, n, buflen) }
}

/// # Safety
/// As `getcwd(3)`, with `buflen` the size of `buf`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __getcwd_chk(
    buf: *mut c_char,
    size: size_t,
    buflen: size_t,
) -> *mut c_char {
    if size > buflen {
        overflow();
    }
    // SAFETY: `buf` holds at least `size` bytes (checked above, and the call's contract).
    unsafe { crate::meta::getcwd(buf, size) }
}

/// `getwd(3)`: the working directory into a buffer of `PATH_MAX` bytes (glibc's reaches the
/// kernel's directory through an internal call).
///
/// # Safety
/// `buf` holds `PATH_MAX` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getwd(buf: *mut c_char) -> *mut c_char {
    // SAFETY: `buf` holds PATH_MAX bytes (getwd's contract).
    unsafe { crate::meta::getcwd(buf, libc::PATH_MAX as size_t) }
}

/// # Safety
/// As `getwd(3)`, with `buflen` the size of `buf`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __getwd_chk(buf: *mut c_char, buflen: size_t) -> *mut c_char {
    // SAFETY: `buf` holds `buflen` bytes (the call's contract).
    let r = unsafe { crate::meta::getcwd(buf, buflen) };
    if r.is_null() && tessera_cabi::errno() == libc::ERANGE {
        overflow();
    }
    r
}

/// # Safety
/// As `realpath(3)`, with `resolvedlen` the size of `resolved`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __realpath_chk(
    path: *const c_char,
    resolved: *mut c_char,
    resolvedlen: size_t,
) -> *mut c_char {
    if resolvedlen < libc::PATH_MAX as size_t {
        overflow();
    }
    // SAFETY: `resolved` holds at least PATH_MAX bytes (checked above).
    unsafe { crate::realpath::realpath(path, resolved) }
}

/// Whether fortified `open` flags lack the mode they need: glibc's `__open_2` aborts on them
/// ("invalid open call: O_CREAT or O_TMPFILE without mode").
fn needs_mode(flags: c_int) -> bool {
    flags & libc::O_CREAT != 0 || flags & libc::O_TMPFILE == libc::O_TMPFILE
}

/// Fortified `open` (without a mode).
///
/// # Safety
/// As `open(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __open_2(path: *const c_char, flags: c_int) -> c_int {
    if needs_mode(flags) {
        // SAFETY: glibc's own check, which aborts with its message on these flags.
        return unsafe { real::__open_2(path, flags) };
    }
    // SAFETY: `path` is NULL or NUL-terminated per open(2), all `open_impl` needs; mode 0 is never
    // read, as these flags take none (checked above).
    unsafe { crate::files::open_impl(libc::AT_FDCWD, path, flags, 0 as c_uint) }
}
alias!(__open64_2 => __open_2(path: *const c_char, flags: c_int) -> c_int);

/// Fortified `openat` (without a mode).
///
/// # Safety
/// As `openat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __openat_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    if needs_mode(flags) {
        // SAFETY: glibc's own check, which aborts with its message on these flags.
        return unsafe { real::__openat_2(dirfd, path, flags) };
    }
    // SAFETY: `path` is NULL or NUL-terminated per openat(2), as `open_impl` requires; `dirfd` and
    // `flags` are ints, and mode 0 stands in because these flags take none.
    unsafe { crate::files::open_impl(dirfd, path, flags, 0 as c_uint) }
}
alias!(__openat64_2 => __openat_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int);
