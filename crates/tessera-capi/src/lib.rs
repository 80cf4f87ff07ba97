//! `libtessera.so`: the C API of Tessera, declared and documented in `include/tessera.h`.
//!
//! Every function here is a thin, checked layer over the Rust client library
//! (`tessera_client`): it validates the pointers and numbers it is given, maps the result to
//! the C conventions (0 or a count on success, -1 or NULL with `errno` on failure), and keeps
//! the failure's message for `tessera_errmsg`. A panic never crosses into C: it becomes an
//! `EIO` failure with a message.
//!
//! Handles: `tessera_client` is a boxed [`Client`] (shared by threads, as the client is);
//! `tessera_file` a boxed [`CFile`], freed by `tessera_close`. A NULL handle is `EINVAL`; a
//! NULL buffer, string or result pointer is `EFAULT`, as the kernel answers.
//!
//! Every helper that dereferences a caller's pointer is an `unsafe fn` stating what the
//! pointer must be; every `unsafe` block says why that holds.

#![deny(clippy::undocumented_unsafe_blocks)]

use libc::{c_char, c_int, mode_t, size_t, ssize_t};
use std::cell::RefCell;
use std::ffi::{CStr, CString};
use tessera_client::{
    Attr, Client, Errno, File, FileKind, FsError, FsResult, InstanceLayout, LockKind, Model,
    OpenOptions, OwnedExtent, RangeAsk, Residence, Whence, catch_panic, posix::OpenIntent,
};

#[cfg(test)]
mod layout_test;

/// The `TESSERA_VERSION` of `tessera.h`.
pub const VERSION: c_int = 100;

/// `tessera_client`.
pub struct CClient(Client);

/// `tessera_file`: an open file and the path it was opened with (for `tessera_fstat`).
pub struct CFile {
    file: File,
    client: Client,
    path: String,
}

/// `struct tessera_stat`.
#[repr(C)]
pub struct CStat {
    pub ino: u64,
    pub kind: u32,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub atime_ns: i64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
}

/// `struct tessera_extent`.
#[repr(C)]
pub struct CExtent {
    pub start: u64,
    pub end: u64,
    pub node: u32,
    pub client: u64,
}

/// `TESSERA_HOST_MAX`.
pub const HOST_MAX: usize = 64;

/// `struct tessera_location`.
#[repr(C)]
pub struct CLocation {
    pub start: u64,
    pub end: u64,
    pub node: i32,
    pub residence: u32,
    pub host: [c_char; HOST_MAX],
    pub addr: [c_char; HOST_MAX],
}

/// `struct tessera_placement`.
#[repr(C)]
pub struct CPlacement {
    pub error: i32,
    pub hosts: u32,
    pub size: u64,
    pub best_bytes: u64,
    pub view_time_ns: i64,
    pub best_host: [c_char; HOST_MAX],
}

/// `s` as a NUL-terminated C array, cut to fit.
fn c_name(s: &str) -> [c_char; HOST_MAX] {
    let mut out = [0 as c_char; HOST_MAX];
    for (o, b) in out.iter_mut().zip(s.bytes().take(HOST_MAX - 1)) {
        *o = b as c_char;
    }
    out
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Records a failure for `tessera_errmsg` and sets errno.
fn set_error(e: &FsError) {
    let msg = format!("{} ({})", e.message, e.errno.name());
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|l| *l.borrow_mut() = c);
    // SAFETY: errno is thread-local.
    unsafe { *libc::__errno_location() = e.code() };
}

fn inval(msg: impl Into<String>) -> FsError {
    FsError::new(Errno::Inval, msg)
}

/// Runs `f`, turning an error (or a panic) into errno, the message, and `on_err`.
fn guard<T>(on_err: T, f: impl FnOnce() -> FsResult<T>) -> T {
    match catch_panic("libtessera", f) {
        Ok(v) => v,
        Err(e) => {
            set_error(&e);
            on_err
        }
    }
}

/// The error for a NULL data pointer (a buffer, a string, a result): `EFAULT`, as the kernel
/// answers. A NULL handle is `EINVAL` instead (see [`client_ref`]).
fn efault(func: &str, what: &str) -> FsError {
    FsError::new(Errno::Fault, format!("{func}: {what} is NULL"))
}

/// A required C string argument, as UTF-8.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that outlives `'a`.
unsafe fn text<'a>(p: *const c_char, func: &str, what: &str) -> FsResult<&'a str> {
    if p.is_null() {
        return Err(efault(func, what));
    }
    // SAFETY: non-null and NUL-terminated by this function's contract.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| inval(format!("{func}: {what} is not valid UTF-8")))
}

/// The client behind a handle.
///
/// # Safety
/// `c` is NULL or a handle `tessera_connect` returned and `tessera_disconnect` has not freed.
unsafe fn client_ref<'a>(c: *mut CClient, func: &str) -> FsResult<&'a Client> {
    if c.is_null() {
        return Err(inval(format!(
            "{func}: client is NULL; call tessera_connect first"
        )));
    }
    // SAFETY: non-null, so a live handle by this function's contract.
    Ok(unsafe { &(*c).0 })
}

/// The file behind a handle.
///
/// # Safety
/// `f` is NULL or a handle `tessera_open` returned, not closed, and used by one thread at a
/// time.
unsafe fn file_mut<'a>(f: *mut CFile, func: &str) -> FsResult<&'a mut CFile> {
    if f.is_null() {
        return Err(inval(format!(
            "{func}: file is NULL; call tessera_open first"
        )));
    }
    // SAFETY: non-null, so a live handle used by this thread only (this function's contract).
    Ok(unsafe { &mut *f })
}

fn model_of(m: c_int) -> FsResult<Option<Model>> {
    Ok(match m {
        0 => None,
        1 => Some(Model::Posix),
        2 => Some(Model::Commit),
        3 => Some(Model::Session),
        4 => Some(Model::MpiIo),
        other => {
            return Err(inval(format!(
                "model {other} is not a tessera_model; use TESSERA_MODEL_DEFAULT, _POSIX, _COMMIT, _SESSION or _MPIIO"
            )));
        }
    })
}

fn model_value(m: Model) -> c_int {
    match m {
        Model::Posix => 1,
        Model::Commit => 2,
        Model::Session => 3,
        Model::MpiIo => 4,
    }
}

fn stat_of(a: &Attr) -> CStat {
    CStat {
        ino: a.ino,
        kind: match a.kind {
            FileKind::File => 1,
            FileKind::Dir => 2,
            FileKind::Symlink => 3,
        },
        mode: a.mode,
        uid: a.uid,
        gid: a.gid,
        size: a.size,
        atime_ns: a.atime_ns,
        mtime_ns: a.mtime_ns,
        ctime_ns: a.ctime_ns,
    }
}

/// A result pointer, as a reference.
///
/// # Safety
/// `p` is NULL or points to writable, aligned storage for a `T` that outlives `'a`.
unsafe fn out_ptr<'a, T>(p: *mut T, func: &str, what: &str) -> FsResult<&'a mut T> {
    if p.is_null() {
        return Err(efault(func, what));
    }
    // SAFETY: non-null, so writable storage for a `T` (this function's contract).
    Ok(unsafe { &mut *p })
}

/// Copies up to `max` extents to `out`; returns the total number.
///
/// # Safety
/// `out` is NULL or points to writable storage for `max` extents.
unsafe fn store_extents(
    ext: &[OwnedExtent],
    out: *mut CExtent,
    max: size_t,
    func: &str,
) -> FsResult<i64> {
    if max > 0 && out.is_null() {
        return Err(FsError::new(
            Errno::Fault,
            format!("{func}: out is NULL but max is {max}"),
        ));
    }
    for (i, e) in ext.iter().take(max).enumerate() {
        // SAFETY: `out` holds at least `max` extents (this function's contract).
        unsafe {
            out.add(i).write(CExtent {
                start: e.start,
                end: e.end,
                node: e.owner.node,
                client: e.owner.client,
            })
        };
    }
    Ok(ext.len() as i64)
}

fn offset(off: i64, func: &str) -> FsResult<u64> {
    u64::try_from(off).map_err(|_| inval(format!("{func}: offset {off} is negative")))
}

/// A buffer argument: NULL is allowed only with a zero count.
fn check_buf(p: *const libc::c_void, n: size_t, func: &str) -> FsResult<()> {
    if p.is_null() && n > 0 {
        return Err(FsError::new(
            Errno::Fault,
            format!("{func}: buf is NULL but count is {n}"),
        ));
    }
    if n > isize::MAX as usize {
        return Err(inval(format!("{func}: count {n} is larger than SSIZE_MAX")));
    }
    Ok(())
}

// ---- errors and versions ----

/// See `tessera.h`.
#[unsafe(no_mangle)]
pub extern "C" fn tessera_errmsg() -> *const c_char {
    LAST_ERROR.with(|l| l.borrow().as_ptr())
}

/// See `tessera.h`.
#[unsafe(no_mangle)]
pub extern "C" fn tessera_version() -> c_int {
    VERSION
}

/// See `tessera.h`.
#[unsafe(no_mangle)]
pub extern "C" fn tessera_model_name(model: c_int) -> *const c_char {
    let name: &'static CStr = match model {
        0 => c"default",
        1 => c"posix",
        2 => c"commit",
        3 => c"session",
        4 => c"mpiio",
        _ => return std::ptr::null(),
    };
    name.as_ptr()
}

/// See `tessera.h`.
///
/// # Safety
/// `name` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_model_from_name(name: *const c_char) -> c_int {
    guard(-1, || {
        // SAFETY: the pointers are as this function's contract states.
        let s = unsafe { text(name, "tessera_model_from_name", "name") }?;
        let m: Model = s.parse().map_err(|e: String| inval(e))?;
        Ok(model_value(m))
    })
}

// ---- connecting ----

/// See `tessera.h`.
///
/// # Safety
/// `instance` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_connect(instance: *const c_char, node: c_int) -> *mut CClient {
    guard(std::ptr::null_mut(), || {
        let layout = if instance.is_null() {
            InstanceLayout::from_env()
        } else {
            // SAFETY: the pointers are as this function's contract states.
            InstanceLayout::new(unsafe { text(instance, "tessera_connect", "instance") }?)
        };
        let node = match node {
            -1 => None,
            n if n >= 0 => Some(n as u32),
            n => {
                return Err(inval(format!(
                    "tessera_connect: node {n} is negative; pass -1 for the default"
                )));
            }
        };
        let c = Client::connect(layout, node)?;
        Ok(Box::into_raw(Box::new(CClient(c))))
    })
}

/// See `tessera.h`.
///
/// # Safety
/// `client` is NULL or a handle from `tessera_connect`, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_disconnect(client: *mut CClient) -> c_int {
    guard(-1, || {
        if !client.is_null() {
            // SAFETY: the handle tessera_connect made; the caller gives it up.
            drop(unsafe { Box::from_raw(client) });
        }
        Ok(0)
    })
}

// ---- namespace ----

/// See `tessera.h`.
///
/// # Safety
/// Pointers as documented in `tessera.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_stat(
    client: *mut CClient,
    path: *const c_char,
    st: *mut CStat,
) -> c_int {
    guard(-1, || {
        // SAFETY: the pointers are as this function's contract states.
        let c = unsafe { client_ref(client, "tessera_stat") }?;
        // SAFETY: the pointers are as this function's contract states.
        let p = unsafe { text(path, "tessera_stat", "path") }?;
        // SAFETY: the pointers are as this function's contract states.
        let out = unsafe { out_ptr(st, "tessera_stat", "st") }?;
        *out = stat_of(&c.stat(p)?);
        Ok(0)
    })
}

/// See `tessera.h`.
///
/// # Safety
/// Pointers as documented in `tessera.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_mkdir(
    client: *mut CClient,
    path: *const c_char,
    mode: mode_t,
) -> c_int {
    guard(-1, || {
        // SAFETY: the pointers are as this function's contract states.
        let c = unsafe { client_ref(client, "tessera_mkdir") }?;
        // SAFETY: the pointers are as this function's contract states.
        c.mkdir(
            // SAFETY: forwarded under this function's own contract.
            unsafe { text(path, "tessera_mkdir", "path") }?,
            mode & 0o7777,
        )?;
        Ok(0)
    })
}

/// See `tessera.h`.
///
/// # Safety
/// Pointers as documented in `tessera.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_rmdir(client: *mut CClient, path: *const c_char) -> c_int {
    guard(-1, || {
        // SAFETY: the pointers are as this function's contract states.
        let c = unsafe { client_ref(client, "tessera_rmdir") }?;
        // SAFETY: the pointers are as this function's contract states.
        c.rmdir(unsafe { text(path, "tessera_rmdir", "path") }?)?;
        Ok(0)
    })
}

/// See `tessera.h`.
///
/// # Safety
/// Pointers as documented in `tessera.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_unlink(client: *mut CClient, path: *const c_char) -> c_int {
    guard(-1, || {
        // SAFETY: the pointers are as this function's contract states.
        let c = unsafe { client_ref(client, "tessera_unlink") }?;
        // SAFETY: the pointers are as this function's contract states.
        c.unlink(unsafe { text(path, "tessera_unlink", "path") }?)?;
        Ok(0)
    })
}

/// See `tessera.h`.
///
/// # Safety
/// Pointers as documented in `tessera.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_rename(
    client: *mut CClient,
    from: *const c_char,
    to: *const c_char,
) -> c_int {
    guard(-1, || {
        // SAFETY: the pointers are as this function's contract states.
        let c = unsafe { client_ref(client, "tessera_rename") }?;
        c.rename(
            // SAFETY: the pointers are as this function's contract states.
            unsafe { text(from, "tessera_rename", "from") }?,
            // SAFETY: the pointers are as this function's contract states.
            unsafe { text(to, "tessera_rename", "to") }?,
        )?;
        Ok(0)
    })
}

// ---- files ----

/// See `tessera.h`.
///
/// # Safety
/// Pointers as documented in `tessera.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_open(
    client: *mut CClient,
    path: *const c_char,
    flags: c_int,
    mode: mode_t,
    model: c_int,
) -> *mut CFile {
    guard(std::ptr::null_mut(), || {
        // SAFETY: the pointers are as this function's contract states.
        let c = unsafe { client_ref(client, "tessera_open") }?;
        // SAFETY: the pointers are as this function's contract states.
        let p = unsafe { text(path, "tessera_open", "path") }?;
        let intent = OpenIntent::from_flags(flags)?;
        if intent.directory || intent.path_only {
            return Err(inval(format!(
                "tessera_open of {p}: O_DIRECTORY and O_PATH do not open files; use tessera_stat"
            )));
        }
        let mut o = OpenOptions::from_intent(&intent, mode);
        o.append(intent.append && intent.write);
        if let Some(m) = model_of(model)? {
            o.model(m);
        }
        let file = c.open(p, &o)?;
        Ok(Box::into_raw(Box::new(CFile {
            file,
            client: c.clone(),
            path: p.to_string(),
        })))
    })
}

/// See `tessera.h`.
///
/// # Safety
/// `file` is NULL or a handle from `tessera_open`, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_close(file: *mut CFile) -> c_int {
    guard(-1, || {
        if file.is_null() {
            return Ok(0);
        }
        // SAFETY: the handle tessera_open made; the caller gives it up.
        let f = unsafe { Box::from_raw(file) };
        f.file.close()?;
        Ok(0)
    })
}

/// See `tessera.h`.
///
/// # Safety
/// `buf` holds `count` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_read(
    file: *mut CFile,
    buf: *mut libc::c_void,
    count: size_t,
) -> ssize_t {
    guard(-1, || {
        // SAFETY: the pointers are as this function's contract states.
        let f = unsafe { file_mut(file, "tessera_read") }?;
        check_buf(buf, count, "tessera_read")?;
        if count == 0 {
            return Ok(0);
        }
        // SAFETY: `count` writable bytes (the contract).
        let b = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), count) };
        Ok(f.file.read(b)? as ssize_t)
    })
}

/// See `tessera.h`.
///
/// # Safety
/// `buf` holds `count` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_write(
    file: *mut CFile,
    buf: *const libc::c_void,
    count: size_t,
) -> ssize_t {
    guard(-1, || {
        // SAFETY: the pointers are as this function's contract states.
        let f = unsafe { file_mut(file, "tessera_write") }?;
        check_buf(buf, count, "tessera_write")?;
        if count == 0 {
            return Ok(0);
        }
        // SAFETY: `count` readable bytes (the contract).
        let b = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), count) };
        Ok(f.file.write(b)? as ssize_t)
    })
}

/// See `tessera.h`.
///
/// # Safety
/// `buf` holds `count` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_pread(
    file: *mut CFile,
    buf: *mut libc::c_void,
    count: size_t,
    off: i64,
) -> ssize_t {
    guard(-1, || {
        // SAFETY: the pointers are as this function's contract states.
        let f = unsafe { file_mut(file, "tessera_pread") }?;
        check_buf(buf, count, "tessera_pread")?;
        let off = offset(off, "tessera_pread")?;
        if count == 0 {
            return Ok(0);
        }
        // SAFETY: `count` writable bytes (the contract).
        let b = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), count) };
        Ok(f.file.read_at(b, off)? as ssize_t)
    })
}

/// See `tessera.h`.
///
/// # Safety
/// `buf` holds `count` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_pwrite(
    file: *mut CFile,
    buf: *const libc::c_void,
    count: size_t,
    off: i64,
) -> ssize_t {
    guard(-1, || {
        // SAFETY: the pointers are as this function's contract states.
        let f = unsafe { file_mut(file, "tessera_pwrite") }?;
        check_buf(buf, count, "tessera_pwrite")?;
        let off = offset(off, "tessera_pwrite")?;
        if count == 0 {
            return Ok(0);
        }
        // SAFETY: `count` readable bytes (the contract).
        let b = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), count) };
        Ok(f.file.write_at(b, off)? as ssize_t)
    })
}

/// See `tessera.h`.
///
/// # Safety
/// `file` as documented in `tessera.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_seek(file: *mut CFile, off: i64, whence: c_int) -> i64 {
    guard(-1, || {
        // SAFETY: the pointers are as this function's contract states.
        let f = unsafe { file_mut(file, "tessera_seek") }?;
        let w = match whence {
            libc::SEEK_SET => Whence::Start(offset(off, "tessera_seek")?),
            libc::SEEK_CUR => Whence::Current(off),
            libc::SEEK_END => Whence::End(off),
            other => {
                return Err(inval(format!(
                    "tessera_seek: whence {other} is not SEEK_SET, SEEK_CUR or SEEK_END"
                )));
            }
        };
        let pos = f.file.seek(w)?;
        i64::try_from(pos).map_err(|_| inval(format!("tessera_seek: position {pos} overflows")))
    })
}

/// See `tessera.h`.
///
/// # Safety
/// Pointers as documented in `tessera.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_fstat(file: *mut CFile, st: *mut CStat) -> c_int {
    guard(-1, || {
        // SAFETY: the pointers are as this function's contract states.
        let f = unsafe { file_mut(file, "tessera_fstat") }?;
        // SAFETY: the pointers are as this function's contract states.
        let out = unsafe { out_ptr(st, "tessera_fstat", "st") }?;
        let mut s = stat_of(&f.client.stat(&f.path)?);
        s.size = f.file.len()?;
        *out = s;
        Ok(0)
    })
}

/// See `tessera.h`.
///
/// # Safety
/// `file` as documented in `tessera.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_file_model(file: *mut CFile) -> c_int {
    guard(-1, || {
        Ok(model_value(
            // SAFETY: the pointers are as this function's contract states.
            unsafe { file_mut(file, "tessera_file_model") }?
                .file
                .model(),
        ))
    })
}

/// Defines a `fn(file) -> int` entry point calling one `File` method.
macro_rules! file_call {
    ($name:ident, $method:ident) => {
        /// See `tessera.h`.
        ///
        /// # Safety
        /// `file` as documented in `tessera.h`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(file: *mut CFile) -> c_int {
            guard(-1, || {
                // SAFETY: the pointers are as this function's contract states.
                unsafe { file_mut(file, stringify!($name)) }?
                    .file
                    .$method()?;
                Ok(0)
            })
        }
    };
}

file_call!(tessera_commit, commit);
file_call!(tessera_fsync, fsync);
file_call!(tessera_session_open, session_open);
file_call!(tessera_session_close, session_close);
file_call!(tessera_sync, sync);
file_call!(tessera_attach_file, attach_file);
file_call!(tessera_detach_file, detach_file);

/// Defines a `fn(file, offset, len) -> int` entry point calling one `File` method.
macro_rules! range_call {
    ($name:ident, $method:ident) => {
        /// See `tessera.h`.
        ///
        /// # Safety
        /// `file` as documented in `tessera.h`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(file: *mut CFile, off: u64, len: u64) -> c_int {
            guard(-1, || {
                // SAFETY: the pointers are as this function's contract states.
                unsafe { file_mut(file, stringify!($name)) }?
                    .file
                    .$method(off, len)?;
                Ok(0)
            })
        }
    };
}

range_call!(tessera_attach, attach);
range_call!(tessera_detach, detach);
range_call!(tessera_unlock, unlock);

/// See `tessera.h`.
///
/// # Safety
/// `out` holds `max` extents.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_query(
    file: *mut CFile,
    off: u64,
    len: u64,
    out: *mut CExtent,
    max: size_t,
) -> i64 {
    guard(-1, || {
        // SAFETY: the pointers are as this function's contract states.
        let f = unsafe { file_mut(file, "tessera_query") }?;
        let ext = tessera_client::sorted_extents(&f.file.query(off, len)?);
        // SAFETY: the pointers are as this function's contract states.
        unsafe { store_extents(&ext, out, max, "tessera_query") }
    })
}

/// See `tessera.h`.
///
/// # Safety
/// `out` holds `max` extents.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_query_file(
    file: *mut CFile,
    out: *mut CExtent,
    max: size_t,
) -> i64 {
    guard(-1, || {
        // SAFETY: the pointers are as this function's contract states.
        let f = unsafe { file_mut(file, "tessera_query_file") }?;
        let ext = tessera_client::sorted_extents(&f.file.query_file()?);
        // SAFETY: the pointers are as this function's contract states.
        unsafe { store_extents(&ext, out, max, "tessera_query_file") }
    })
}

/// See `tessera.h`.
///
/// # Safety
/// `file` as documented in `tessera.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_flush(file: *mut CFile, off: u64, len: u64) -> i64 {
    guard(-1, || {
        // SAFETY: the pointers are as this function's contract states.
        let n = unsafe { file_mut(file, "tessera_flush") }?
            .file
            .flush(off, len)?;
        Ok(n as i64)
    })
}

/// See `tessera.h`.
///
/// # Safety
/// `file` as documented in `tessera.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_flush_file(file: *mut CFile) -> i64 {
    guard(-1, || {
        // SAFETY: the pointers are as this function's contract states.
        let n = unsafe { file_mut(file, "tessera_flush_file") }?
            .file
            .flush_file()?;
        Ok(n as i64)
    })
}

// ---- locks ----

/// See `tessera.h`.
///
/// # Safety
/// `file` as documented in `tessera.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_lock(
    file: *mut CFile,
    off: u64,
    len: u64,
    kind: c_int,
    wait: c_int,
) -> c_int {
    guard(-1, || {
        // SAFETY: the pointers are as this function's contract states.
        let f = unsafe { file_mut(file, "tessera_lock") }?;
        let k = match kind {
            0 => LockKind::Shared,
            1 => LockKind::Exclusive,
            other => {
                return Err(inval(format!(
                    "tessera_lock: kind {other} is not TESSERA_LOCK_SHARED or TESSERA_LOCK_EXCLUSIVE"
                )));
            }
        };
        f.file.lock(off, len, k, wait != 0)?;
        Ok(0)
    })
}

// ---- locality ----

fn residence_value(r: Residence) -> u32 {
    match r {
        Residence::Hole => 0,
        Residence::BurstBuffer => 1,
        Residence::Pfs => 2,
        Residence::Both => 3,
    }
}

/// See `tessera.h`.
///
/// # Safety
/// Pointers as documented in `tessera.h`: `out` holds `max` locations; `view_time_ns` is NULL
/// or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_locate(
    client: *mut CClient,
    path: *const c_char,
    offset: u64,
    len: u64,
    out: *mut CLocation,
    max: size_t,
    view_time_ns: *mut i64,
) -> i64 {
    guard(-1, || {
        const F: &str = "tessera_locate";
        // SAFETY: the pointers are as this function's contract states.
        let c = unsafe { client_ref(client, F) }?;
        // SAFETY: the pointers are as this function's contract states.
        let p = unsafe { text(path, F, "path") }?;
        if max > 0 && out.is_null() {
            return Err(efault(F, "out (with max above 0)"));
        }
        let len = (len != u64::MAX).then_some(len);
        let l = c.locate(p, offset, len)?;
        for (i, e) in l.extents.iter().take(max).enumerate() {
            let (node, host, addr) = match &e.holder {
                Some(h) => (h.node as i32, c_name(&h.host), c_name(&h.addr)),
                None => (-1, c_name(""), c_name("")),
            };
            // SAFETY: `out` holds at least `max` locations (this function's contract).
            unsafe {
                out.add(i).write(CLocation {
                    start: e.start,
                    end: e.end,
                    node,
                    residence: residence_value(e.residence),
                    host,
                    addr,
                })
            };
        }
        if !view_time_ns.is_null() {
            // SAFETY: non-null, so writable (this function's contract).
            unsafe { view_time_ns.write(l.view_time_ns) };
        }
        Ok(l.extents.len() as i64)
    })
}

/// See `tessera.h`.
///
/// # Safety
/// Pointers as documented in `tessera.h`: `paths` holds `n` strings, `out` `n` placements.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_locate_many(
    client: *mut CClient,
    paths: *const *const c_char,
    n: size_t,
    out: *mut CPlacement,
) -> c_int {
    guard(-1, || {
        const F: &str = "tessera_locate_many";
        // SAFETY: the pointers are as this function's contract states.
        let c = unsafe { client_ref(client, F) }?;
        if n == 0 {
            return Ok(0);
        }
        if paths.is_null() {
            return Err(efault(F, "paths"));
        }
        if out.is_null() {
            return Err(efault(F, "out"));
        }
        let mut asks = Vec::with_capacity(n);
        for i in 0..n {
            // SAFETY: `paths` holds `n` string pointers (this function's contract).
            let p = unsafe { *paths.add(i) };
            // SAFETY: each is NULL or a NUL-terminated string (this function's contract).
            let p = unsafe { text(p, F, "a path") }?;
            asks.push(RangeAsk::file(p));
        }
        let answers = c.locate_many(&asks, 1)?;
        for (i, a) in answers.iter().enumerate() {
            let placed = match a {
                Ok(l) => CPlacement {
                    error: 0,
                    hosts: l.bytes_by_host.len() as u32,
                    size: l.size,
                    best_bytes: l.bytes_by_host.first().map_or(0, |h| h.bytes),
                    view_time_ns: l.view_time_ns,
                    best_host: c_name(l.best_host().unwrap_or("")),
                },
                Err(e) => CPlacement {
                    error: e.code(),
                    hosts: 0,
                    size: 0,
                    best_bytes: 0,
                    view_time_ns: 0,
                    best_host: c_name(""),
                },
            };
            // SAFETY: `out` holds `n` placements (this function's contract).
            unsafe { out.add(i).write(placed) };
        }
        Ok(0)
    })
}
