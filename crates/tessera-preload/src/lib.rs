//! `libtessera_preload.so`: run an unmodified program with `LD_PRELOAD` and its POSIX and
//! stdio calls on paths under the mount prefix (default `/tessera`, `TESSERA_PREFIX` to
//! change) go to Tessera; every other call passes straight to libc.
//!
//! Consistency of interposed files follows `TESSERA_MODEL` (session by default: close
//! publishes, open sees what was published before it, fsync commits). Byte-range locks
//! (fcntl F_SETLK/F_SETLKW/F_GETLK, flock) go to the daemons' lock service, and taking or
//! releasing one synchronises like open and close. docs/interposer.md lists every call and
//! what it does.
//!
//! Module map:
//! * [`state`]: the descriptor table and the connection; [`real`]: libc's definitions;
//!   [`stats`]: the client's statistics, for tools that ask where reads were served from;
//! * [`files`]: descriptor calls; [`meta`]: path calls and stat; [`dirs`]: directory streams;
//!   [`xattrs`]: extended attributes; [`refused`]: calls that cannot act on a Tessera path
//!   (mount, inotify, file handles and the rest), refused with a clear errno;
//! * [`stdio`]: FILE streams; [`std_streams`]: `stdin`, `stdout` and `stderr` on Tessera
//!   descriptors;
//! * [`locks`]: fcntl and flock; [`aio`]: POSIX asynchronous I/O;
//! * [`mpiio`]: MPI-IO atomic mode under list locks, with [`mpi_types`] (datatypes and file
//!   views read at run time) and `atomic_scope` (the access a thread runs under a list lock);
//! * [`txn`]: transactions (D2T) for programs under the interposer; [`txn_job`]: a whole MPI
//!   run as one transaction;
//! * [`exit`]: publishing at exit; [`exec`]: the working directory across exec; [`inherit`]:
//!   descriptors across fork and exec; [`vfork`]: `vfork` children that need Tessera;
//! * [`library_fds`]: the program's calls that name the library's own descriptors;
//!   [`dl`]: `dlopen` of libraries stored in Tessera; [`loaded`]: symbols in libraries a
//!   program loaded privately;
//! * [`fortify`]: glibc's `_chk` entry points; and the glibc functions that reach files
//!   through glibc's internal calls: [`realpath`], [`scandir`], [`globbing`], [`walk`] (ftw,
//!   nftw), [`fts`], [`tempfiles`] (mkstemp and its variants) and [`internal_calls`] (remove,
//!   utime, mkdtemp and the rest).
//!
//! Variadic entry points (`open`, `openat`, `fcntl`, `ioctl`) are defined with their optional
//! argument as a fixed parameter: on the x86-64 and AArch64 Linux calling conventions a
//! variadic integer or pointer argument travels exactly where a fixed one would.
//!
//! Soundness at the C edge: every helper that dereferences a caller's pointer is an `unsafe
//! fn` stating what the pointer must be, and every `unsafe` block says why that holds; a NULL
//! buffer with a nonzero length is `EFAULT`, as the kernel answers; Tessera work runs inside
//! [`run`] (or [`caught`]), which catches a panic before it reaches the C caller.

#![deny(clippy::undocumented_unsafe_blocks)]

#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
compile_error!("the interposer supports Linux on x86-64 and AArch64");

/// Defines `name` as a second exported symbol for `target` (the `64` forms, and other names
/// programs bind for the same call).
macro_rules! alias {
    ($name:ident => $target:ident ( $($arg:ident : $ty:ty),* ) -> $ret:ty) => {
        #[doc = concat!("The same as `", stringify!($target), "` (another name programs bind).")]
        ///
        /// # Safety
        /// As the target.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            // SAFETY: the caller's contract is the target's.
            unsafe { $target($($arg),*) }
        }
    };
}

/// Calls the next definition of an MPI function by name (MPI handles as machine words: see
/// [`mpiio`]).
macro_rules! next {
    ($name:ident : fn($($ty:ty),*) -> $ret:ty) => {{
        static SLOT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let p = $crate::real::lookup(&SLOT, concat!(stringify!($name), "\0").as_bytes());
        // SAFETY: the MPI signature, handles as words (see the mpiio module docs).
        let f: unsafe extern "C" fn($($ty),*) -> $ret = unsafe { std::mem::transmute(p) };
        f
    }};
}

pub mod aio;
mod atomic_scope;
pub mod dirs;
pub mod dl;
pub mod exec;
pub mod exit;
pub mod files;
pub mod fortify;
pub mod fts;
pub mod globbing;
pub mod inherit;
pub mod internal_calls;
pub mod library_fds;
pub mod loaded;
pub mod locks;
pub mod meta;
pub mod mpi_types;
pub mod mpiio;
pub mod real;
pub mod realpath;
pub mod refused;
pub mod scandir;
pub mod state;
pub mod stats;
mod std_streams;
pub mod stdio;
pub mod tempfiles;
pub mod txn;
pub mod txn_job;
pub mod vfork;
pub mod walk;
pub mod xattrs;

use libc::{c_char, c_int};
use state::{Busy, busy, prefix};
use std::ffi::CStr;
use tessera_client::posix::{join_user, lexical_normalize, under_prefix};
use tessera_client::{Errno, FsError, FsResult};

/// Sets errno and reports the error (see [`report`]); returns -1 for the caller to return.
pub fn fail(e: &FsError) -> c_int {
    report(e);
    tessera_cabi::set_errno(e.code());
    -1
}

/// Writes the explanation of an error to stderr when a program would otherwise only see a
/// bare errno: always for failures a program does not expect (I/O, protocol, daemon
/// unreachable, unsupported), for every error with `TESSERA_VERBOSE=1`. Errors the kernel
/// would give the same program on a local file system (ENOENT, EBADF for a write lock on a
/// read-only descriptor, which ROMIO's atomic mode asks for and ignores, ...) stay quiet.
pub fn report(e: &FsError) {
    report_unless(e, &[]);
}

/// [`report`], with `also_routine` quiet too: the answers a probe expects (an `ls -l` asking
/// for ACLs gets `ENOTSUP`, as from a local file system that keeps none).
pub fn report_unless(e: &FsError, also_routine: &[Errno]) {
    let routine = also_routine.contains(&e.errno)
        || matches!(
            e.errno,
            Errno::NoEnt
                | Errno::Exist
                | Errno::NotDir
                | Errno::IsDir
                | Errno::NotEmpty
                | Errno::Again
                | Errno::NoData
                | Errno::Nxio
                | Errno::NoTty
                | Errno::XDev
                | Errno::Inval
                | Errno::BadF
        );
    static VERBOSE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let verbose = *VERBOSE.get_or_init(|| {
        let _b = Busy::enter();
        std::env::var_os("TESSERA_VERBOSE").is_some_and(|v| v != "0")
    });
    if !routine || verbose {
        let _b = Busy::enter();
        eprintln!("tessera: {} ({})", e.message, e.errno.name());
    }
}

/// Runs a Tessera operation with the thread marked busy; maps errors to -1 and errno. A panic
/// is caught here, before it could unwind into the C caller, and becomes `EIO` with a message.
pub fn run<T: From<i8>>(f: impl FnOnce() -> FsResult<T>) -> T {
    run_quiet_on(&[], f)
}

/// [`run`] for a call whose `quiet` errors are answers its callers expect, not failures to
/// explain on stderr (see [`report_unless`]).
pub fn run_quiet_on<T: From<i8>>(quiet: &[Errno], f: impl FnOnce() -> FsResult<T>) -> T {
    let _b = Busy::enter();
    match caught(f) {
        Ok(v) => v,
        Err(e) => {
            report_unless(&e, quiet);
            tessera_cabi::set_errno(e.code());
            T::from(-1)
        }
    }
}

/// `flags` for a stat-like call on `path`, where a path that ends in `/` (or `/.`) names a
/// directory, so a symbolic link at its end is followed whatever `AT_SYMLINK_NOFOLLOW` says
/// (`ls -ld link/` shows the directory, as the kernel does).
///
/// # Safety
/// `path` is NULL or NUL-terminated.
pub unsafe fn follow_if_dir_named(path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: NULL or NUL-terminated by the caller's contract.
    let Some(b) = (unsafe { tessera_cabi::c_bytes(path) }) else {
        return flags;
    };
    if b.ends_with(b"/") || b.ends_with(b"/.") {
        flags & !libc::AT_SYMLINK_NOFOLLOW
    } else {
        flags
    }
}

/// Runs `f`, turning a panic into an `EIO` error that names it.
pub fn caught<T>(f: impl FnOnce() -> FsResult<T>) -> FsResult<T> {
    tessera_cabi::catch_fs_panic("the Tessera interposer", f)
}

/// What an entry point returns when it fails: -1, a null pointer, or nothing.
pub trait Failed {
    fn failed() -> Self;
}

macro_rules! failed_is_minus_one {
    ($($t:ty),*) => { $(impl Failed for $t { fn failed() -> Self { -1 } })* };
}
failed_is_minus_one!(i32, i64, isize);

impl<T> Failed for *mut T {
    fn failed() -> Self {
        std::ptr::null_mut()
    }
}

impl Failed for () {
    fn failed() -> Self {}
}

/// Runs the body of an entry point that does Tessera work outside [`run`] (streams,
/// directories, aio, callbacks): a panic is caught before it could unwind into the C caller
/// and becomes `EIO` with a message and the call's failure value.
pub fn guarded<T: Failed>(f: impl FnOnce() -> T) -> T {
    guarded_or(T::failed(), f)
}

/// As [`guarded`], with the failure value given (`MAP_FAILED` for mmap).
pub fn guarded_or<T>(on_panic: T, f: impl FnOnce() -> T) -> T {
    match caught(|| Ok(f())) {
        Ok(v) => v,
        Err(e) => {
            fail(&e);
            on_panic
        }
    }
}

/// The Tessera path named by `(dirfd, path)`, normalised, or `None` when the call belongs to
/// libc: the path lies outside the prefix, or the thread is inside the interposer. Relative
/// paths resolve against a Tessera directory descriptor or the virtual working directory
/// (after `chdir` into Tessera). A name that would be Tessera's but is not UTF-8 is an error
/// (`EILSEQ`), never handed to the kernel: it would land in the process's real directory.
///
/// # Safety
/// `path` is null or a NUL-terminated string.
pub unsafe fn tessera_path(dirfd: c_int, path: *const c_char) -> Option<FsResult<String>> {
    // SAFETY: `path` is NULL or NUL-terminated (our contract), all that `tessera_path_of` requires;
    // `dirfd` is a plain int.
    let found = unsafe { tessera_path_of(dirfd, path) }?;
    if state::in_vfork_child() {
        // Its parent's memory: the interposer's state is the parent's, not its own.
        let p = found.unwrap_or_else(|e| e.message);
        return Some(Err(FsError::new(
            Errno::NotSup,
            format!(
                "{p}: a child sharing its parent's memory (clone with CLONE_VM, as posix_spawn makes) cannot reach Tessera before its program starts; give the program the path (`cd DIR && cmd`)"
            ),
        )));
    }
    Some(found)
}

/// [`tessera_path`], as the calling process's own memory sees it.
///
/// # Safety
/// `path` is null or a NUL-terminated string.
pub(crate) unsafe fn tessera_path_of(
    dirfd: c_int,
    path: *const c_char,
) -> Option<FsResult<String>> {
    if path.is_null() {
        return None;
    }
    // The common case, an absolute path elsewhere, is decided by two SIMD string scans of
    // glibc, before any thread-local access, lock or copy.
    // SAFETY: NUL-terminated by the caller's contract.
    if unsafe { *path } == b'/' as c_char {
        let pre = state::prefix_for_check()?;
        // SAFETY: both scans stop at the path's NUL; strncmp reads at most `pre.len()` bytes
        // of the prefix.
        let maybe = unsafe {
            libc::strncmp(path, pre.as_ptr().cast(), pre.len()) == 0
                || !libc::strstr(path, c"/..".as_ptr()).is_null()
        };
        if !maybe || busy() {
            return None;
        }
        // SAFETY: as above.
        let bytes = unsafe { CStr::from_ptr(path) }.to_bytes();
        return match std::str::from_utf8(bytes) {
            Ok(s) => {
                let n = lexical_normalize(s);
                under_prefix(&n, prefix()).then_some(Ok(n))
            }
            Err(_) => {
                // Under the prefix by its bytes: Tessera's, and refused.
                let lossy = String::from_utf8_lossy(bytes);
                under_prefix(&lexical_normalize(&lossy), prefix()).then(|| Err(not_utf8(&lossy)))
            }
        };
    }
    // SAFETY: as above.
    if unsafe { *path } == 0 {
        return None;
    }
    // Relative: Tessera's only against the virtual cwd or a Tessera directory descriptor.
    let base = if dirfd == libc::AT_FDCWD {
        let cwd = state::cwd()?;
        if busy() {
            return None;
        }
        cwd
    } else {
        // The flag first: the interposer's own *at calls must not wait for a description
        // its thread may hold.
        if busy() {
            return None;
        }
        match state::lookup(dirfd) {
            Some(d) => state::lock_desc(&d).path.clone(),
            // A kernel directory from which the path may lead into the prefix (rsync opens
            // "/" and stats "tessera" relative to it).
            // SAFETY: NUL-terminated by the caller's contract.
            None => unsafe { kernel_dir_into_prefix(dirfd, path) }?,
        }
    };
    // SAFETY: NUL-terminated by the caller's contract.
    let bytes = unsafe { CStr::from_ptr(path) }.to_bytes();
    let (s, utf8) = match std::str::from_utf8(bytes) {
        Ok(s) => (std::borrow::Cow::Borrowed(s), true),
        Err(_) => (String::from_utf8_lossy(bytes), false),
    };
    let n = lexical_normalize(&join_user(&base, &s));
    // Tessera's when it lands under the prefix: ".." may leave a virtual working directory or
    // a Tessera directory descriptor (then `kernel_at` gives the kernel the real place), and
    // a kernel directory's path may enter the prefix.
    under_prefix(&n, prefix()).then(|| if utf8 { Ok(n) } else { Err(not_utf8(&n)) })
}

/// The directory of kernel descriptor `dirfd`, when `path` (relative to it) may lead into the
/// prefix: it names the prefix's first component or climbs with "..". Most relative paths of
/// *at calls do neither and cost one substring scan.
///
/// # Safety
/// `path` is NUL-terminated.
unsafe fn kernel_dir_into_prefix(dirfd: c_int, path: *const c_char) -> Option<String> {
    let first = prefix().trim_start_matches('/').split('/').next()?;
    let first = std::ffi::CString::new(first).ok()?;
    // SAFETY: both strings are NUL-terminated.
    let may = unsafe {
        !libc::strstr(path, first.as_ptr()).is_null()
            || !libc::strstr(path, c"..".as_ptr()).is_null()
    };
    if !may {
        return None;
    }
    std::fs::read_link(format!("/proc/self/fd/{dirfd}"))
        .ok()?
        .to_str()
        .filter(|d| d.starts_with('/'))
        .map(str::to_string)
}

/// The path the kernel must get for a call [`tessera_path`] left to it, when the caller's
/// names a real place through Tessera's virtual directories: an absolute path that passes
/// through the prefix (`/tessera/..`), or a relative one against a virtual working directory
/// or a Tessera directory descriptor that leaves the prefix (`cd /tessera; ls ..`). `None`:
/// the caller's own path.
///
/// # Safety
/// `path` is NULL or NUL-terminated.
pub unsafe fn kernel_at(dirfd: c_int, path: *const c_char) -> Option<std::ffi::CString> {
    if path.is_null() {
        return None;
    }
    // The cheap tests first (no thread-local access, no copy): this runs for every path call
    // that is not Tessera's.
    // SAFETY: NUL-terminated by the caller's contract.
    let base = if unsafe { *path } == b'/' as c_char {
        let pre = state::prefix_for_check()?;
        // SAFETY: both NUL-terminated; strncmp reads at most `pre.len()` bytes of the prefix.
        if unsafe { libc::strncmp(path, pre.as_ptr().cast(), pre.len()) } != 0 {
            return None;
        }
        String::new()
    } else if dirfd == libc::AT_FDCWD {
        state::cwd()?
    } else {
        let d = state::lookup(dirfd)?;
        state::lock_desc(&d).path.clone()
    };
    if busy() {
        return None;
    }
    // SAFETY: NUL-terminated by the caller's contract.
    let text = unsafe { CStr::from_ptr(path) }.to_str().ok()?;
    if base.is_empty() && !text.contains("/..") {
        return None;
    }
    let n = lexical_normalize(&join_user(&base, text));
    std::ffi::CString::new(n).ok()
}

/// The path to hand the kernel: the rewritten one if there is one, else the caller's.
pub fn at(rewritten: &Option<std::ffi::CString>, caller: *const c_char) -> *const c_char {
    rewritten.as_ref().map_or(caller, |c| c.as_ptr())
}

/// The error for a Tessera name that is not UTF-8 (shown with replacement characters).
fn not_utf8(shown: &str) -> FsError {
    FsError::new(
        Errno::IlSeq,
        format!("{shown}: the name is not UTF-8, and Tessera names are; use a UTF-8 name"),
    )
}

/// A path argument as text, for messages.
///
/// # Safety
/// `path` is null or NUL-terminated.
pub unsafe fn show(path: *const c_char) -> String {
    // SAFETY: NULL or NUL-terminated by the caller's contract.
    match unsafe { tessera_cabi::c_bytes(path) } {
        Some(b) => String::from_utf8_lossy(b).into_owned(),
        None => "(null)".into(),
    }
}

/// The error for a descriptor that is not open.
pub fn ebadf(fd: c_int) -> FsError {
    FsError::new(Errno::BadF, format!("descriptor {fd} is not open"))
}
