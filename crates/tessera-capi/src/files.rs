//! Open files: open, read and write, sync, commit and flush, size, close.

use crate::boundary::*;
use crate::*;

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
        // SAFETY: `client` is NULL or a live handle from `tessera_connect`, not yet given to `tessera_disconnect` (tessera.h).
        let c = unsafe { client_ref(client, "tessera_open") }?;
        // SAFETY: `path` is NULL or a NUL-terminated string that the call does not outlive (tessera.h).
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
        // SAFETY: `file` is NULL or a live handle from `tessera_open`, not yet closed, used by this thread only (tessera.h).
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
        // SAFETY: `file` is NULL or a live handle from `tessera_open`, not yet closed, used by this thread only (tessera.h).
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
        // SAFETY: `file` is NULL or a live handle from `tessera_open`, not yet closed, used by this thread only (tessera.h).
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
        // SAFETY: `file` is NULL or a live handle from `tessera_open`, not yet closed, used by this thread only (tessera.h).
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
        // SAFETY: `file` is NULL or a live handle from `tessera_open`, not yet closed, used by this thread only (tessera.h).
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
        // SAFETY: `file` is NULL or a live handle from `tessera_open`, not yet closed, used by this thread only (tessera.h).
        let f = unsafe { file_mut(file, "tessera_fstat") }?;
        // SAFETY: `st` is NULL or points to the caller's own, aligned storage for the result (tessera.h).
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
            // SAFETY: `file` is NULL or a live handle from `tessera_open`, not yet closed, used by this thread only (tessera.h).
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
                // SAFETY: `file` is NULL or a live handle from `tessera_open`, not yet closed, used by this thread only (tessera.h).
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
                // SAFETY: `file` is NULL or a live handle from `tessera_open`, not yet closed, used by this thread only (tessera.h).
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
        // SAFETY: `file` is NULL or a live handle from `tessera_open`, not yet closed, used by this thread only (tessera.h).
        let f = unsafe { file_mut(file, "tessera_query") }?;
        let ext = tessera_client::sorted_extents(&f.file.query(off, len)?);
        // SAFETY: `out` is NULL or holds `max` writable extents (this function's contract).
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
        // SAFETY: `file` is NULL or a live handle from `tessera_open`, not yet closed, used by this thread only (tessera.h).
        let f = unsafe { file_mut(file, "tessera_query_file") }?;
        let ext = tessera_client::sorted_extents(&f.file.query_file()?);
        // SAFETY: `out` is NULL or holds `max` writable extents (this function's contract).
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
        // SAFETY: `file` is NULL or a live handle from `tessera_open`, not yet closed, used by this thread only (tessera.h).
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
        // SAFETY: `file` is NULL or a live handle from `tessera_open`, not yet closed, used by this thread only (tessera.h).
        let n = unsafe { file_mut(file, "tessera_flush_file") }?
            .file
            .flush_file()?;
        Ok(n as i64)
    })
}
