//! `glob` and `glob64` on Tessera patterns. glibc's glob reads directories through internal
//! calls the interposer never sees, but it also offers `GLOB_ALTDIRFUNC`: the caller names the
//! opendir, readdir, closedir, lstat and stat it is to use. For a pattern under the prefix (or
//! relative to a Tessera working directory) the interposer names its own, so matching,
//! sorting, flags and errors stay glibc's. Other patterns, and callers that chose their own
//! functions, go to glibc unchanged.

use crate::{real, tessera_path};
use libc::{c_char, c_int, c_void, dirent64, size_t};

/// The `errfunc` argument: told of each directory that cannot be read.
pub type ErrFunc = Option<unsafe extern "C" fn(*const c_char, c_int) -> c_int>;

/// glibc's `glob_t` with its `GLOB_ALTDIRFUNC` members named (`<glob.h>`).
#[repr(C)]
pub struct Glob {
    pub gl_pathc: size_t,
    pub gl_pathv: *mut *mut c_char,
    pub gl_offs: size_t,
    pub gl_flags: c_int,
    pub gl_closedir: Option<unsafe extern "C" fn(*mut c_void)>,
    pub gl_readdir: Option<unsafe extern "C" fn(*mut c_void) -> *mut dirent64>,
    pub gl_opendir: Option<unsafe extern "C" fn(*const c_char) -> *mut c_void>,
    pub gl_lstat: Option<unsafe extern "C" fn(*const c_char, *mut libc::stat64) -> c_int>,
    pub gl_stat: Option<unsafe extern "C" fn(*const c_char, *mut libc::stat64) -> c_int>,
}

/// `GLOB_ALTDIRFUNC` of `<glob.h>`.
const GLOB_ALTDIRFUNC: c_int = 1 << 9;

/// # Safety
/// `path` is NUL-terminated (glob's contract with its `gl_opendir`).
unsafe extern "C" fn glob_opendir(path: *const c_char) -> *mut c_void {
    // SAFETY: forwarded to the interposer's opendir under the same contract.
    unsafe { crate::dirs::opendir(path) }.cast()
}

/// # Safety
/// `d` is a stream `glob_opendir` returned.
unsafe extern "C" fn glob_readdir(d: *mut c_void) -> *mut dirent64 {
    // SAFETY: forwarded to the interposer's readdir under the same contract.
    unsafe { crate::dirs::readdir64(d.cast()) }
}

/// # Safety
/// `d` is a stream `glob_opendir` returned, closed once.
unsafe extern "C" fn glob_closedir(d: *mut c_void) {
    // SAFETY: forwarded to the interposer's closedir under the same contract.
    unsafe { crate::dirs::closedir(d.cast()) };
}

/// # Safety
/// `path` is NUL-terminated and `st` writable.
unsafe extern "C" fn glob_lstat(path: *const c_char, st: *mut libc::stat64) -> c_int {
    // SAFETY: forwarded to the interposer's lstat under the same contract.
    unsafe { crate::meta::lstat64(path, st) }
}

/// # Safety
/// `path` is NUL-terminated and `st` writable.
unsafe extern "C" fn glob_stat(path: *const c_char, st: *mut libc::stat64) -> c_int {
    // SAFETY: forwarded to the interposer's stat under the same contract.
    unsafe { crate::meta::stat64(path, st) }
}

/// # Safety
/// As `glob(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn glob64(
    pattern: *const c_char,
    flags: c_int,
    errfunc: ErrFunc,
    pglob: *mut Glob,
) -> c_int {
    crate::guarded(|| {
        // SAFETY: NUL-terminated or NULL by the caller's contract.
        let ours = flags & GLOB_ALTDIRFUNC == 0
            && !pglob.is_null()
            && unsafe { tessera_path(libc::AT_FDCWD, pattern) }.is_some();
        if ours {
            // SAFETY: `pglob` is the caller's glob_t (glob's contract), non-NULL.
            unsafe {
                (*pglob).gl_opendir = Some(glob_opendir);
                (*pglob).gl_readdir = Some(glob_readdir);
                (*pglob).gl_closedir = Some(glob_closedir);
                (*pglob).gl_lstat = Some(glob_lstat);
                (*pglob).gl_stat = Some(glob_stat);
            }
            // SAFETY: glibc's own glob, reading through the functions just named.
            return unsafe { real::glob64(pattern, flags | GLOB_ALTDIRFUNC, errfunc, pglob) };
        }
        // SAFETY: the caller's arguments, passed unchanged to the real `glob64`, whose contract the caller met in calling it.
        unsafe { real::glob64(pattern, flags, errfunc, pglob) }
    })
}
alias!(glob => glob64(pattern: *const c_char, flags: c_int, errfunc: ErrFunc, pglob: *mut Glob) -> c_int);
