//! Extended attributes through the interposer: `getxattr`, `setxattr`, `listxattr` and
//! `removexattr` in their path forms (which follow a link found in the PFS directory), `l`
//! forms (which do not) and `f` forms, on Tessera paths and descriptors; anything else goes to
//! libc. The daemons keep the attributes beside each inode (`user.`, `trusted.`,
//! `security.`), so `cp -a`, `rsync -X` and `tar --xattrs` carry them.

use crate::meta::fd_path;
use crate::state::{client, desc};
use crate::{real, run_quiet_on, tessera_path};
use libc::{c_char, c_int, c_void, size_t, ssize_t};
use tessera_client::{Errno, FsError, FsResult, SetMode};

/// Answers programs probe for and expect (`ls -l` and `cp -a` ask for ACLs and SELinux labels
/// on every file; a buffer too small is how a program learns a value's size: Python's
/// `os.getxattr` tries 128 bytes first): quiet unless `TESSERA_VERBOSE` asks.
const PROBED: &[Errno] = &[Errno::NotSup, Errno::NoData, Errno::Range];

/// The attribute name the caller passed.
///
/// # Safety
/// `name` is NULL or NUL-terminated.
unsafe fn name_of(name: *const c_char) -> FsResult<String> {
    if name.is_null() {
        return Err(FsError::new(
            Errno::Fault,
            "extended attribute name is NULL",
        ));
    }
    // SAFETY: NUL-terminated by the caller's contract.
    let bytes = unsafe { std::ffi::CStr::from_ptr(name) }.to_bytes();
    String::from_utf8(bytes.to_vec()).map_err(|_| {
        FsError::new(
            Errno::NotSup,
            "extended attribute names in Tessera are UTF-8",
        )
    })
}

/// Hands `bytes` to the caller as the xattr calls do: with a size of 0 only their length,
/// `ERANGE` when they do not fit.
///
/// # Safety
/// `out` is NULL or writable for `n` bytes.
unsafe fn give(bytes: &[u8], out: *mut c_void, n: size_t, what: &str) -> FsResult<ssize_t> {
    if n == 0 {
        return Ok(bytes.len() as ssize_t);
    }
    if bytes.len() > n {
        return Err(FsError::new(
            Errno::Range,
            format!("{what}: {} bytes do not fit a buffer of {n}", bytes.len()),
        ));
    }
    if out.is_null() {
        return Err(FsError::new(
            Errno::Fault,
            format!("{what}: the buffer is NULL"),
        ));
    }
    // SAFETY: `out` is writable for `n` >= `bytes.len()` bytes (this function's contract).
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), out.cast::<u8>(), bytes.len()) };
    Ok(bytes.len() as ssize_t)
}

fn mode_of(flags: c_int) -> FsResult<SetMode> {
    match flags {
        0 => Ok(SetMode::Any),
        libc::XATTR_CREATE => Ok(SetMode::Create),
        libc::XATTR_REPLACE => Ok(SetMode::Replace),
        _ => Err(FsError::new(
            Errno::Inval,
            format!("setxattr flags {flags:#x}: 0, XATTR_CREATE or XATTR_REPLACE"),
        )),
    }
}

/// The entry a path form acts on: the path itself, or where its links lead.
fn target(p: String, follow: bool) -> FsResult<String> {
    if follow {
        Ok(client()?.follow(&p)?.0)
    } else {
        Ok(p)
    }
}

/// The operations, on the path of a Tessera entry.
///
/// # Safety
/// `name` is NULL or NUL-terminated; `out` is NULL or writable for `n` bytes.
unsafe fn get_on(p: &str, name: *const c_char, out: *mut c_void, n: size_t) -> FsResult<ssize_t> {
    // SAFETY: the caller's name (this function's contract).
    let name = unsafe { name_of(name) }?;
    let value = client()?.get_xattr(p, &name)?;
    // SAFETY: the caller's buffer (this function's contract).
    unsafe { give(&value, out, n, &name) }
}

/// # Safety
/// `out` is NULL or writable for `n` bytes.
unsafe fn list_on(p: &str, out: *mut c_char, n: size_t) -> FsResult<ssize_t> {
    let names = client()?.list_xattrs(p)?;
    let bytes = tessera_core::xattrs::encode_list(&names);
    // SAFETY: the caller's buffer (this function's contract).
    unsafe { give(&bytes, out.cast(), n, "listxattr") }
}

/// # Safety
/// `name` is NULL or NUL-terminated; `v` is NULL or readable for `n` bytes.
unsafe fn set_on(
    p: &str,
    name: *const c_char,
    v: *const c_void,
    n: size_t,
    flags: c_int,
) -> FsResult<c_int> {
    // SAFETY: the caller's name (this function's contract).
    let name = unsafe { name_of(name) }?;
    let value: &[u8] = if n == 0 {
        &[]
    } else if v.is_null() {
        return Err(FsError::new(
            Errno::Fault,
            format!("{name}: the value is NULL"),
        ));
    } else {
        // SAFETY: readable for `n` bytes (this function's contract).
        unsafe { std::slice::from_raw_parts(v.cast::<u8>(), n) }
    };
    client()?.set_xattr(p, &name, value, mode_of(flags)?)?;
    Ok(0)
}

/// # Safety
/// `name` is NULL or NUL-terminated.
unsafe fn remove_on(p: &str, name: *const c_char) -> FsResult<c_int> {
    // SAFETY: the caller's name (this function's contract).
    let name = unsafe { name_of(name) }?;
    client()?.remove_xattr(p, &name)?;
    Ok(0)
}

/// Runs `tessera` on a Tessera path (following its links or not), else `kernel` with the
/// path as the kernel must see it.
///
/// # Safety
/// `path` is NULL or NUL-terminated.
unsafe fn by_path<T: From<i8>>(
    path: *const c_char,
    follow: bool,
    tessera: impl FnOnce(&str) -> FsResult<T>,
    kernel: impl FnOnce(*const c_char) -> T,
) -> T {
    // SAFETY: NUL-terminated or NULL (this function's contract).
    match unsafe { tessera_path(libc::AT_FDCWD, path) } {
        Some(p) => run_quiet_on(PROBED, || tessera(&target(p?, follow)?)),
        None => {
            // SAFETY: NUL-terminated or NULL (this function's contract).
            let k = unsafe { crate::kernel_at(libc::AT_FDCWD, path) };
            kernel(crate::at(&k, path))
        }
    }
}

/// Runs `tessera` on the file of a Tessera descriptor, else `kernel`.
fn by_fd<T: From<i8>>(
    fd: c_int,
    tessera: impl FnOnce(&str) -> FsResult<T>,
    kernel: impl FnOnce() -> T,
) -> T {
    if desc(fd).is_some() {
        return run_quiet_on(PROBED, || tessera(&target(fd_path(fd)?, true)?));
    }
    kernel()
}

/// Defines the path forms of a call: `$name` follows links, `$lname` does not.
macro_rules! path_forms {
    ($name:ident, $lname:ident, ($($arg:ident : $ty:ty),*) -> $ret:ty, $imp:ident) => {
        path_forms!(@one $name, true, ($($arg: $ty),*) -> $ret, $imp);
        path_forms!(@one $lname, false, ($($arg: $ty),*) -> $ret, $imp);
    };
    (@one $sym:ident, $follow:expr, ($($arg:ident : $ty:ty),*) -> $ret:ty, $imp:ident) => {
        #[doc = concat!("As `", stringify!($sym), "(2)`.")]
        ///
        /// # Safety
        /// As the libc function.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $sym(path: *const c_char, $($arg: $ty),*) -> $ret {
            // SAFETY: the caller's arguments, under the libc function's contract.
            unsafe {
                by_path(
                    path,
                    $follow,
                    |p| $imp(p, $($arg),*),
                    |k| real::$sym(k, $($arg),*),
                )
            }
        }
    };
}

/// Defines the descriptor form of a call.
macro_rules! fd_form {
    ($sym:ident, ($($arg:ident : $ty:ty),*) -> $ret:ty, $imp:ident) => {
        #[doc = concat!("As `", stringify!($sym), "(2)`.")]
        ///
        /// # Safety
        /// As the libc function.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $sym(fd: c_int, $($arg: $ty),*) -> $ret {
            by_fd(
                fd,
                // SAFETY: the caller's arguments, under the libc function's contract.
                |p| unsafe { $imp(p, $($arg),*) },
                // SAFETY: the caller's arguments, passed unchanged to the real function this entry point
                // wraps, whose contract the caller met in calling it.
                || unsafe { real::$sym(fd, $($arg),*) },
            )
        }
    };
}

path_forms!(getxattr, lgetxattr, (name: *const c_char, v: *mut c_void, n: size_t) -> ssize_t, get_on);
fd_form!(fgetxattr, (name: *const c_char, v: *mut c_void, n: size_t) -> ssize_t, get_on);
path_forms!(listxattr, llistxattr, (list: *mut c_char, n: size_t) -> ssize_t, list_on);
fd_form!(flistxattr, (list: *mut c_char, n: size_t) -> ssize_t, list_on);
path_forms!(setxattr, lsetxattr, (name: *const c_char, v: *const c_void, n: size_t, flags: c_int) -> c_int, set_on);
fd_form!(fsetxattr, (name: *const c_char, v: *const c_void, n: size_t, flags: c_int) -> c_int, set_on);
path_forms!(removexattr, lremovexattr, (name: *const c_char) -> c_int, remove_on);
fd_form!(fremovexattr, (name: *const c_char) -> c_int, remove_on);
