//! The working directory across `exec`: a program that `cd`s into Tessera and runs another
//! (`bash -c 'cd /tessera/d && ls'`, `make -C /tessera/proj`, git's subcommands) must run it
//! there, not in the kernel's working directory, which the interposer leaves behind.
//!
//! While the working directory is virtual (inside Tessera), the kernel's is a directory that
//! no longer exists (created, entered and removed), so a relative path that escapes the
//! interposer (a statically linked program, a raw system call) fails with ENOENT instead of
//! touching the caller's real files; and `TESSERA_CWD` names the virtual one in the process's
//! environment (for `system`, `popen` and the exec calls that pass `environ`) and in every
//! environment passed explicitly to `execve`, `execvpe`, `fexecve`, `posix_spawn` and
//! `posix_spawnp`. A new program's interposer takes `TESSERA_CWD` as its working directory
//! when it finds its kernel working directory gone; a stale value beside a real working
//! directory is ignored.
//!
//! A program stored in Tessera (`execve("/tessera/bin/app", ...)`) cannot be executed by the
//! kernel, which does not see the file: its bytes are staged into an anonymous memory file
//! (`memfd_create`) that the kernel executes instead (`fexecve`). A script's interpreter is
//! handed that memory file as `/dev/fd/N`, so it is left open across the exec.

use crate::real;
use crate::state::{self, Busy};
use libc::{c_char, c_int, pid_t};
use std::ffi::{CStr, CString};
use tessera_client::{Errno, FileKind, FsError, FsResult, Model, OpenOptions};

/// The environment variable that carries the virtual working directory across exec.
pub const CWD_VAR: &str = "TESSERA_CWD";

/// Takes the working directory a parent left in `TESSERA_CWD` when the library is loaded.
#[used]
#[unsafe(link_section = ".init_array")]
static INHERIT: extern "C" fn() = inherit;

extern "C" fn inherit() {
    let _b = Busy::enter();
    let Some(dir) = std::env::var_os(CWD_VAR) else {
        return;
    };
    let Some(dir) = dir.to_str().filter(|d| d.starts_with('/')) else {
        return;
    };
    if kernel_cwd_gone() {
        state::set_cwd(Some(dir.to_string()));
    }
}

/// Whether the kernel's working directory has been removed (the mark of a virtual one).
fn kernel_cwd_gone() -> bool {
    let mut buf = [0u8; 4096];
    // SAFETY: the buffer holds its length in bytes.
    let r = unsafe { real::getcwd(buf.as_mut_ptr().cast(), buf.len()) };
    r.is_null() && std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOENT)
}

/// The working directory became `dir`, inside Tessera: the kernel's goes to a removed
/// directory, and the environment names `dir`. Called with the thread busy.
pub fn entered(dir: &str) {
    void_kernel_cwd();
    if let Ok(v) = CString::new(dir) {
        // SAFETY: both strings are NUL-terminated; setenv copies them.
        unsafe { libc::setenv(c"TESSERA_CWD".as_ptr(), v.as_ptr(), 1) };
    }
}

/// The working directory left Tessera (the kernel's is real again).
pub fn left() {
    // SAFETY: a NUL-terminated name.
    unsafe { libc::unsetenv(c"TESSERA_CWD".as_ptr()) };
}

/// Moves the kernel's working directory into a fresh private directory and removes it.
pub(crate) fn void_kernel_cwd() {
    let base = std::env::var("TMPDIR").unwrap_or_else(|_| "/tmp".into());
    for dir in [base.as_str(), "/tmp", "/dev/shm"] {
        let Ok(template) = CString::new(format!("{dir}/tessera-cwd-XXXXXX")) else {
            continue;
        };
        let mut t = template.into_bytes_with_nul();
        // SAFETY: a writable, NUL-terminated template ending in XXXXXX.
        let made = unsafe { libc::mkdtemp(t.as_mut_ptr().cast()) };
        if made.is_null() {
            continue;
        }
        // SAFETY: `made` is the NUL-terminated path mkdtemp wrote into `t`.
        let entered = unsafe { real::chdir(made) } == 0;
        // SAFETY: as above; removed whether or not it was entered.
        unsafe { libc::rmdir(made) };
        if entered {
            return;
        }
    }
}

/// `envp` for a new program: `TESSERA_CWD` set to the virtual working directory and
/// `TESSERA_FDS` to the Tessera descriptors it inherits, each removed when there is none.
/// This process's Tessera files get shareable positions and have their writes published
/// first (see [`crate::inherit`]).
///
/// # Safety
/// `envp` is NULL or a NULL-terminated array of NUL-terminated strings.
unsafe fn with_cwd(envp: *const *const c_char) -> Vec<CString> {
    // A panic must not unwind into the caller: the files are then not passed on.
    let inherited = std::panic::catch_unwind(|| {
        crate::inherit::before_exec();
        crate::inherit::fds_entry()
    })
    .ok()
    .flatten();
    let mut out = Vec::new();
    let mut p = envp;
    while !p.is_null() {
        // SAFETY: `p` points into the NULL-terminated array (this function's contract).
        let entry = unsafe { *p };
        if entry.is_null() {
            break;
        }
        // SAFETY: each entry is NUL-terminated (this function's contract).
        let e = unsafe { CStr::from_ptr(entry) };
        let b = e.to_bytes();
        if !b.starts_with(b"TESSERA_CWD=") && !b.starts_with(b"TESSERA_FDS=") {
            out.push(e.to_owned());
        }
        // SAFETY: the array continues until its NULL (checked above).
        p = unsafe { p.add(1) };
    }
    // A child of vfork that chose a directory has its own; else the process's.
    let cwd = crate::vfork::child_cwd().unwrap_or_else(state::cwd);
    if let Some(cwd) = cwd
        && let Ok(v) = CString::new(format!("{CWD_VAR}={cwd}"))
    {
        out.push(v);
    }
    out.extend(inherited);
    out
}

/// A NULL-terminated array of pointers into `env`.
fn pointers(env: &[CString]) -> Vec<*const c_char> {
    env.iter()
        .map(|e| e.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// The program at `p` (in Tessera) copied into a memory file the kernel can execute: its
/// descriptor. Refused like the kernel refuses: `EACCES` unless it is a file with an execute
/// bit.
fn staged(p: &str) -> FsResult<c_int> {
    staged_as(p, true)
}

/// The file at `p` (in Tessera) copied into a memory file the kernel can map or execute; with
/// `program`, refused (`EACCES`) unless it has an execute bit.
pub(crate) fn staged_as(p: &str, program: bool) -> FsResult<c_int> {
    let c = state::client()?;
    let attr = c.stat_follow(p)?;
    if attr.kind != FileKind::File || (program && attr.mode & 0o111 == 0) {
        return Err(FsError::new(
            Errno::Access,
            format!(
                "{p} is not an executable file (mode {:o})",
                attr.mode & 0o7777
            ),
        ));
    }
    let mut f = c.open(p, OpenOptions::new().read(true).model(Model::Posix))?;
    // SAFETY: a NUL-terminated name; no flags (the descriptor must survive the exec).
    let fd = unsafe { libc::memfd_create(c"tessera-exec".as_ptr(), 0) };
    if fd < 0 {
        return Err(FsError::io(
            format!("staging {p} for exec (memfd_create)"),
            &std::io::Error::last_os_error(),
        ));
    }
    let copied = (|| {
        let mut buf = vec![0u8; 1 << 20];
        let mut off = 0u64;
        loop {
            let n = f.read_at(&mut buf, off)?;
            if n == 0 {
                return Ok(());
            }
            let mut done = 0;
            while done < n {
                // SAFETY: `buf[done..n]` is initialised and readable.
                let w = unsafe { libc::write(fd, buf[done..n].as_ptr().cast(), n - done) };
                if w < 0 {
                    return Err(FsError::io(
                        format!("staging {p} for exec"),
                        &std::io::Error::last_os_error(),
                    ));
                }
                done += w as usize;
            }
            off += n as u64;
        }
    })();
    if let Err(e) = copied {
        // SAFETY: our own descriptor.
        unsafe { libc::close(fd) };
        return Err(e);
    }
    Ok(fd)
}

/// # Safety
/// As `execve(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execve(
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    // SAFETY: `envp` is execve's environment array (execve's contract).
    let env = unsafe { with_cwd(envp) };
    // SAFETY: NUL-terminated or NULL (execve's contract).
    if let Some(p) = unsafe { crate::tessera_path(libc::AT_FDCWD, path) } {
        // A link in Tessera that leads out of it (a venv's `bin/python3`): the kernel runs
        // where it leads, with the caller's argv[0].
        let outside = {
            let _b = Busy::enter();
            let p = p.clone();
            match crate::caught(|| crate::realpath::resolve(&p?)) {
                Ok(crate::realpath::Resolved::Kernel(k)) => CString::new(k).ok(),
                _ => None,
            }
        };
        if let Some(k) = outside {
            // SAFETY: libc's own call on a real path; the new environment outlives it.
            return unsafe { real::execve(k.as_ptr(), argv, pointers(&env).as_ptr()) };
        }
        let fd = crate::run(|| p.and_then(|p| staged(&p)));
        if fd < 0 {
            return -1;
        }
        // SAFETY: libc's own call on the staged program; the new environment outlives it.
        let r = unsafe { real::fexecve(fd, argv, pointers(&env).as_ptr()) };
        // Still here: the exec failed; its errno stands.
        let errno = std::io::Error::last_os_error().raw_os_error();
        // SAFETY: our own descriptor.
        unsafe { libc::close(fd) };
        if let Some(e) = errno {
            tessera_cabi::set_errno(e);
        }
        return r;
    }
    // SAFETY: libc's own call; the new environment outlives it.
    unsafe { real::execve(path, argv, pointers(&env).as_ptr()) }
}

/// # Safety
/// As `execvpe(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execvpe(
    file: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    // SAFETY: NUL-terminated by execvpe's contract.
    if !file.is_null() && unsafe { CStr::from_ptr(file) }.to_bytes().contains(&b'/') {
        // A path, not searched for: a program in Tessera is staged as `execve` does.
        // SAFETY: `file` is non-NULL and NUL-terminated (read just above); `argv`/`envp` are
        // the caller's NULL-terminated arrays per execvpe(3), as our `execve` requires.
        return unsafe { execve(file, argv, envp) };
    }
    // SAFETY: `envp` is the caller's environment array (execvpe's contract).
    let env = unsafe { with_cwd(envp) };
    // SAFETY: libc's own call; the new environment outlives it.
    unsafe { real::execvpe(file, argv, pointers(&env).as_ptr()) }
}

/// # Safety
/// As `fexecve(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fexecve(
    fd: c_int,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    if let Some(d) = state::desc(fd) {
        // A Tessera descriptor: the program at its path, staged as `execve` does.
        let path = CString::new(state::lock_desc(&d).path.clone());
        return match path {
            // SAFETY: `p` is a CString we own, alive across the call; `argv`/`envp` are the
            // caller's NULL-terminated arrays per fexecve(3), passed to our `execve` as-is.
            Ok(p) => unsafe { execve(p.as_ptr(), argv, envp) },
            Err(_) => crate::fail(&FsError::new(Errno::Inval, "a path holds a NUL byte")),
        };
    }
    // SAFETY: `envp` is the caller's environment array (fexecve's contract).
    let env = unsafe { with_cwd(envp) };
    // SAFETY: libc's own call; the new environment outlives it.
    unsafe { real::fexecve(fd, argv, pointers(&env).as_ptr()) }
}

/// `execveat(2)`: a Tessera descriptor (`AT_EMPTY_PATH`) or a path in Tessera runs as
/// `fexecve` or `execve` run it; anything else goes to the kernel.
///
/// # Safety
/// As `execveat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execveat(
    dirfd: c_int,
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
    flags: c_int,
) -> c_int {
    // SAFETY: non-NULL, and NUL-terminated by the call's contract.
    let empty = !path.is_null() && unsafe { *path } == 0;
    if empty && flags & libc::AT_EMPTY_PATH != 0 && state::desc(dirfd).is_some() {
        // SAFETY: no path is passed: `dirfd` is a Tessera descriptor (checked); `argv`/`envp`
        // are the caller's NULL-terminated arrays per execveat(2), as fexecve(3) asks too.
        return unsafe { fexecve(dirfd, argv, envp) };
    }
    // SAFETY: NUL-terminated or NULL by the call's contract.
    match unsafe { crate::tessera_path(dirfd, path) } {
        Some(Ok(p)) => match CString::new(p) {
            // SAFETY: `p` is a CString we own holding the resolved Tessera path; `argv`/`envp`
            // are the caller's NULL-terminated arrays per execveat(2), given to our `execve`.
            Ok(p) => unsafe { execve(p.as_ptr(), argv, envp) },
            Err(_) => crate::fail(&FsError::new(Errno::Inval, "a path holds a NUL byte")),
        },
        Some(Err(e)) => crate::fail(&e),
        None => {
            // SAFETY: `envp` is the caller's environment array (execveat's contract).
            let env = unsafe { with_cwd(envp) };
            // SAFETY: libc's own call; the new environment outlives it.
            unsafe { real::execveat(dirfd, path, argv, pointers(&env).as_ptr(), flags) }
        }
    }
}

/// # Safety
/// As `posix_spawn(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn posix_spawn(
    pid: *mut pid_t,
    path: *const c_char,
    actions: *const libc::posix_spawn_file_actions_t,
    attr: *const libc::posix_spawnattr_t,
    argv: *const *mut c_char,
    envp: *const *mut c_char,
) -> c_int {
    // SAFETY: `envp` is the caller's environment array (posix_spawn's contract).
    let env = unsafe { with_cwd(envp.cast()) };
    let ptrs = pointers(&env);
    // SAFETY: libc's own call; the new environment outlives it.
    unsafe { real::posix_spawn(pid, path, actions, attr, argv, ptrs.as_ptr().cast()) }
}

/// # Safety
/// As `posix_spawnp(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn posix_spawnp(
    pid: *mut pid_t,
    file: *const c_char,
    actions: *const libc::posix_spawn_file_actions_t,
    attr: *const libc::posix_spawnattr_t,
    argv: *const *mut c_char,
    envp: *const *mut c_char,
) -> c_int {
    // SAFETY: `envp` is the caller's environment array (posix_spawnp's contract).
    let env = unsafe { with_cwd(envp.cast()) };
    let ptrs = pointers(&env);
    // SAFETY: libc's own call; the new environment outlives it.
    unsafe { real::posix_spawnp(pid, file, actions, attr, argv, ptrs.as_ptr().cast()) }
}

unsafe extern "C" {
    static environ: *const *const c_char;
}

/// # Safety
/// As `execv(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execv(path: *const c_char, argv: *const *const c_char) -> c_int {
    // SAFETY: `path` and `argv` are NUL- and NULL-terminated per execv(3); `environ` is libc's own
    // NULL-terminated environment array, read here as execv itself would.
    unsafe { execve(path, argv, environ) }
}

/// # Safety
/// As `execvp(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execvp(file: *const c_char, argv: *const *const c_char) -> c_int {
    // SAFETY: `file` and `argv` meet execvp(3)'s contract on our caller; `environ` is libc's
    // process environment (a NULL-terminated array), passed on as execvpe's `envp`.
    unsafe { execvpe(file, argv, environ) }
}

/// # Safety
/// As `system(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn system(command: *const c_char) -> c_int {
    // The shell it starts inherits the process's environment.
    // SAFETY: libc's own call, with the caller's argument.
    crate::inherit::with_environment(|| unsafe { real::system(command) })
}

/// # Safety
/// As `popen(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn popen(command: *const c_char, mode: *const c_char) -> *mut libc::FILE {
    // SAFETY: the caller's arguments, passed unchanged to the real `popen`, whose contract the caller met in calling it.
    crate::inherit::with_environment(|| unsafe { real::popen(command, mode) })
}
