//! The working directory: `chdir`, `fchdir` and `getcwd` with a Tessera directory as the
//! working directory (virtual; the kernel's stays where it was).

use crate::state;
use crate::state::{Object, client, desc, lookup};
use crate::{fail, real, run, tessera_path};
use libc::{c_char, c_int, size_t};
use tessera_client::{Errno, FileKind, FsError, FsResult};

/// Enters a Tessera directory: the working directory becomes virtual (the kernel's stays).
pub(crate) fn enter_dir(p: &str) -> FsResult<c_int> {
    let a = client()?.stat_follow(p)?;
    if a.kind != FileKind::Dir {
        return Err(FsError::new(
            Errno::NotDir,
            format!("{p} is not a directory"),
        ));
    }
    state::set_cwd(Some(p.to_string()));
    crate::exec::entered(p);
    Ok(0)
}

/// `chdir` to a path outside Tessera. From a virtual working directory a relative path is
/// taken against it (`cd ..` from `/tessera` goes to `/`), not against the kernel's.
///
/// # Safety
/// `path` is NUL-terminated.
pub(crate) unsafe fn leave_to(path: *const c_char) -> c_int {
    let absolute = state::cwd().and_then(|cwd| {
        // SAFETY: NUL-terminated (this function's contract).
        let rel = unsafe { std::ffi::CStr::from_ptr(path) }.to_str().ok()?;
        (!rel.starts_with('/')).then(|| {
            let joined = tessera_client::posix::join_user(&cwd, rel);
            std::ffi::CString::new(tessera_client::posix::lexical_normalize(&joined)).ok()
        })?
    });
    let target = absolute.as_ref().map_or(path, |c| c.as_ptr());
    // SAFETY: libc's own call, with a NUL-terminated path.
    let r = unsafe { real::chdir(target) };
    if r == 0 {
        state::set_cwd(None);
        crate::exec::left();
    }
    r
}

/// `chdir` into Tessera keeps a virtual working directory, against which relative paths
/// are resolved; `chdir` elsewhere goes to the kernel and leaves it.
///
/// # Safety
/// As `chdir(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn chdir(path: *const c_char) -> c_int {
    if state::in_vfork_child() {
        // SAFETY: `path` is NULL or NUL-terminated per chdir(2) on our caller, as `chdir_in_child`
        // requires.
        return crate::guarded(|| unsafe { crate::vfork::chdir_in_child(path) });
    }
    // SAFETY: `path` is NUL-terminated by chdir(2)'s contract (NULL tolerated), which is all
    // `tessera_path` needs.
    match unsafe { tessera_path(libc::AT_FDCWD, path) } {
        Some(p) => run(|| {
            let p = p?;
            enter_dir(&p)
        }),
        // SAFETY: NUL-terminated by chdir's contract (tessera_path saw a path).
        None => crate::guarded(|| unsafe { leave_to(path) }),
    }
}
/// # Safety
/// As `fchdir(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fchdir(fd: c_int) -> c_int {
    if let Some(d) = desc(fd) {
        let p = state::lock_desc(&d).path.clone();
        return run(|| enter_dir(&p));
    }
    // SAFETY: the caller's arguments, passed unchanged to the real `fchdir`, whose contract the caller met in calling it.
    let r = unsafe { real::fchdir(fd) };
    if r == 0 {
        state::set_cwd(None);
        crate::exec::left();
    }
    r
}
/// # Safety
/// As `getcwd(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getcwd(buf: *mut c_char, size: size_t) -> *mut c_char {
    crate::guarded(|| {
        let Some(cwd) = state::cwd() else {
            // SAFETY: the caller's arguments, passed unchanged to the real `getcwd`, whose contract the caller met in calling it.
            return unsafe { real::getcwd(buf, size) };
        };
        let _b = crate::state::Busy::enter();
        let bytes = cwd.as_bytes();
        if buf.is_null() {
            // glibc's extension: allocate (size 0: as large as needed).
            if size != 0 && size < bytes.len() + 1 {
                fail(&FsError::new(Errno::Range, "getcwd: buffer too small"));
                return std::ptr::null_mut();
            }
            // SAFETY: malloc'd for the caller to free, as glibc does.
            let p = unsafe { libc::malloc(bytes.len() + 1) } as *mut c_char;
            if p.is_null() {
                return p;
            }
            // SAFETY: `p` holds `bytes.len() + 1` bytes, just allocated.
            unsafe {
                std::ptr::copy_nonoverlapping(bytes.as_ptr().cast(), p, bytes.len());
                *p.add(bytes.len()) = 0;
            }
            return p;
        }
        if size < bytes.len() + 1 {
            fail(&FsError::new(Errno::Range, "getcwd: buffer too small"));
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's buffer holds `size` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr().cast(), buf, bytes.len());
            *buf.add(bytes.len()) = 0;
        }
        buf
    })
}

/// Whether the descriptor refers to a Tessera directory (for `fdopendir`).
pub fn is_dir_fd(fd: c_int) -> Option<String> {
    let d = lookup(fd)?;
    let g = state::lock_desc(&d);
    matches!(g.obj, Object::Dir).then(|| g.path.clone())
}

/// The error for a NULL result pointer, as the kernel answers it.
pub(crate) fn efault(what: &str) -> FsError {
    FsError::new(Errno::Fault, format!("{what} is NULL"))
}
