//! stdio on Tessera files: `fopen` of a Tessera path (and `fdopen` of a Tessera descriptor)
//! returns a glibc stream built with `fopencookie` whose reads, writes, seeks and close go
//! through this library's descriptor calls, so fread, fwrite, fprintf, fgets, fseek, ftell,
//! fflush and fclose work unchanged, with glibc's own buffering. `fileno` of such a stream
//! returns the Tessera descriptor.

use crate::files::{close, lseek, open_path, read, write};
use crate::state::{Busy, FILE_STREAMS, desc, table};
use crate::{fail, real, tessera_path};
use libc::{c_char, c_int, c_void, size_t, ssize_t};
use std::ffi::CStr;
use std::sync::atomic::Ordering;
use tessera_client::posix::fopen_flags;
use tessera_client::{Errno, FsError};

#[repr(C)]
struct CookieIo {
    read: unsafe extern "C" fn(*mut c_void, *mut c_char, size_t) -> ssize_t,
    write: unsafe extern "C" fn(*mut c_void, *const c_char, size_t) -> ssize_t,
    seek: unsafe extern "C" fn(*mut c_void, *mut i64, c_int) -> c_int,
    close: unsafe extern "C" fn(*mut c_void) -> c_int,
}

unsafe extern "C" {
    fn fopencookie(cookie: *mut c_void, mode: *const c_char, io: CookieIo) -> *mut libc::FILE;
}

fn fd_of(cookie: *mut c_void) -> c_int {
    cookie as usize as c_int
}

unsafe extern "C" fn ck_read(c: *mut c_void, buf: *mut c_char, n: size_t) -> ssize_t {
    // SAFETY: glibc passes the cookie (our descriptor) and a buffer of `n` bytes.
    unsafe { read(fd_of(c), buf.cast(), n) }
}
unsafe extern "C" fn ck_write(c: *mut c_void, buf: *const c_char, n: size_t) -> ssize_t {
    // glibc treats 0 as an error for a write cookie; a failed write returns -1 with errno.
    // SAFETY: glibc passes the cookie (our descriptor) and a buffer of `n` bytes.
    unsafe { write(fd_of(c), buf.cast(), n) }
}
unsafe extern "C" fn ck_seek(c: *mut c_void, off: *mut i64, whence: c_int) -> c_int {
    // SAFETY: glibc passes a valid offset pointer.
    unsafe {
        let r = lseek(fd_of(c), *off, whence);
        if r < 0 {
            return -1;
        }
        *off = r;
    }
    0
}
unsafe extern "C" fn ck_close(c: *mut c_void) -> c_int {
    // SAFETY: glibc passes the cookie, our descriptor, once, at fclose.
    unsafe { close(fd_of(c)) }
}

/// Wraps Tessera descriptor `fd` in a stream.
///
/// # Safety
/// `mode` is a NUL-terminated stdio mode.
pub(crate) unsafe fn stream(fd: c_int, mode: *const c_char) -> *mut libc::FILE {
    let io = CookieIo {
        read: ck_read,
        write: ck_write,
        seek: ck_seek,
        close: ck_close,
    };
    // SAFETY: the cookie is the descriptor number; the functions above match the ABI.
    let f = unsafe { fopencookie(fd as usize as *mut c_void, mode, io) };
    if !f.is_null() {
        table().streams.insert(f as usize, fd);
        FILE_STREAMS.fetch_add(1, Ordering::Relaxed);
    }
    f
}

/// # Safety
/// As `fopen(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fopen(path: *const c_char, mode: *const c_char) -> *mut libc::FILE {
    crate::guarded(|| {
        // SAFETY: `path` is NUL-terminated by fopen(3)'s contract (NULL is tolerated too), all that
        // `tessera_path` reads; `mode` is not passed here.
        match unsafe { tessera_path(libc::AT_FDCWD, path) } {
            Some(p) => {
                let _b = Busy::enter();
                // SAFETY: NULL or NUL-terminated by fopen's contract.
                let m = unsafe { mode_text(mode) };
                let fd =
                    p.and_then(|p| fopen_flags(&m).and_then(|flags| open_path(&p, flags, 0o666)));
                match fd {
                    Ok(fd) => {
                        // SAFETY: `fd` is the Tessera descriptor just opened; `mode` is the caller's string.
                        let f = unsafe { stream(fd, mode) };
                        if f.is_null() {
                            // SAFETY: the descriptor just opened, not handed out.
                            unsafe { close(fd) };
                        }
                        f
                    }
                    Err(e) => {
                        fail(&e);
                        std::ptr::null_mut()
                    }
                }
            }
            None => {
                // SAFETY: NUL-terminated or NULL by the caller's contract.
                let k = unsafe { crate::kernel_at(libc::AT_FDCWD, path) };
                // SAFETY: libc's own call, with the caller's arguments (the path rewritten where
                // it named a real place through Tessera).
                unsafe { real::fopen64(crate::at(&k, path), mode) }
            }
        }
    })
}
/// # Safety
/// As `fopen(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fopen64(path: *const c_char, mode: *const c_char) -> *mut libc::FILE {
    // SAFETY: `path` and `mode` are NUL-terminated strings per fopen(3) on our caller, exactly what
    // our `fopen` requires; they pass through unchanged.
    unsafe { fopen(path, mode) }
}
/// # Safety
/// As `fdopen(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fdopen(fd: c_int, mode: *const c_char) -> *mut libc::FILE {
    crate::guarded(|| {
        if desc(fd).is_some() {
            let _b = Busy::enter();
            // SAFETY: `fd` is a Tessera descriptor; `mode` is the caller's string.
            let f = unsafe { stream(fd, mode) };
            if f.is_null() {
                fail(&FsError::new(
                    Errno::Inval,
                    format!("fdopen of Tessera descriptor {fd}: bad mode"),
                ));
            }
            return f;
        }
        // SAFETY: the caller's arguments, passed unchanged to the real `fdopen`, whose contract the caller met in calling it.
        unsafe { real::fdopen(fd, mode) }
    })
}

/// A stdio mode argument as text (empty for NULL).
///
/// # Safety
/// `mode` is NULL or NUL-terminated.
unsafe fn mode_text(mode: *const c_char) -> String {
    if mode.is_null() {
        return String::new();
    }
    // SAFETY: non-null, and NUL-terminated by this function's contract.
    unsafe { CStr::from_ptr(mode) }
        .to_string_lossy()
        .into_owned()
}

fn our_stream(f: *mut libc::FILE) -> Option<c_int> {
    if FILE_STREAMS.load(Ordering::Relaxed) == 0 {
        return None;
    }
    table().streams.get(&(f as usize)).copied()
}

/// # Safety
/// As `fileno(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fileno(f: *mut libc::FILE) -> c_int {
    crate::guarded(|| {
        match our_stream(f) {
            Some(fd) => fd,
            // SAFETY: the caller's arguments, passed unchanged to the real `fileno`, whose contract the caller met in calling it.
            None => unsafe { real::fileno(f) },
        }
    })
}
/// # Safety
/// As `fclose(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fclose(f: *mut libc::FILE) -> c_int {
    crate::guarded(|| {
        if our_stream(f).is_some() {
            table().streams.remove(&(f as usize));
            FILE_STREAMS.fetch_sub(1, Ordering::Relaxed);
        }
        // SAFETY: the caller's arguments, passed unchanged to the real `fclose`, whose contract the caller met in calling it.
        unsafe { real::fclose(f) }
    })
}

/// `freopen` onto a Tessera path (glibc's opens through its internal `open`). A standard
/// stream (`freopen(path, "w", stdout)`) keeps its descriptor: the Tessera file is placed on
/// it with `dup2`, and the variable (`stdout`) then names a stream of ours on it, which is
/// returned. Any other stream cannot become a Tessera stream in place (glibc would go on
/// writing it through calls the interposer never sees, and the caller may keep using the
/// pointer it has), so that is refused with `ENOTSUP`, the stream left as it was: open the
/// file with `fopen`. Paths elsewhere go to glibc's `freopen`.
///
/// # Safety
/// As `freopen(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn freopen64(
    path: *const c_char,
    mode: *const c_char,
    stream: *mut libc::FILE,
) -> *mut libc::FILE {
    crate::guarded(|| {
        // SAFETY: NUL-terminated or NULL by the caller's contract.
        if unsafe { tessera_path(libc::AT_FDCWD, path) }.is_none() || stream.is_null() {
            // SAFETY: NUL-terminated or NULL by the caller's contract.
            let k = unsafe { crate::kernel_at(libc::AT_FDCWD, path) };
            // SAFETY: glibc's own call, the path rewritten where it named a real place
            // through Tessera.
            return unsafe { real::freopen64(crate::at(&k, path), mode, stream) };
        }
        // SAFETY: a stream of the caller's (freopen's contract).
        let fd = unsafe { fileno(stream) };
        let var = if (0..=2).contains(&fd) {
            crate::std_streams::variable(fd)
        } else {
            std::ptr::null_mut()
        };
        // SAFETY: the variable's address from the dynamic linker, read as a stream pointer.
        if var.is_null() || unsafe { *var } != stream {
            // SAFETY: NUL-terminated (tessera_path saw it).
            let shown = unsafe { crate::show(path) };
            fail(&FsError::new(
                Errno::NotSup,
                format!(
                    "freopen onto {shown}: only stdin, stdout and stderr can be reopened onto a Tessera file in place; open it with fopen"
                ),
            ));
            return std::ptr::null_mut();
        }
        // SAFETY: NULL or NUL-terminated by freopen's contract.
        let m = unsafe { mode_text(mode) };
        let flags = match fopen_flags(&m) {
            Ok(f) => f,
            Err(e) => {
                fail(&e);
                return std::ptr::null_mut();
            }
        };
        // SAFETY: the caller's stream; what it buffered goes where it was going.
        unsafe { libc::fflush(stream) };
        // SAFETY: the interposer's open, dup2 and close on the descriptors named.
        unsafe {
            let new = crate::files::open_impl(libc::AT_FDCWD, path, flags, 0o666);
            if new < 0 {
                return std::ptr::null_mut();
            }
            let placed = crate::files::dup2(new, fd);
            close(new);
            if placed < 0 {
                return std::ptr::null_mut();
            }
            *var
        }
    })
}
alias!(freopen => freopen64(path: *const c_char, mode: *const c_char, stream: *mut libc::FILE) -> *mut libc::FILE);
