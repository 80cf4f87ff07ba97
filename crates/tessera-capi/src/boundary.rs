//! The C boundary of `libtessera`: the checks of its handles and the conversions of its
//! types, over the plumbing shared with the other C libraries (`tessera_cabi`).

use crate::*;

/// `s` as a NUL-terminated C array, cut to fit.
pub(crate) fn c_name(s: &str) -> [c_char; HOST_MAX] {
    let mut out = [0 as c_char; HOST_MAX];
    for (o, b) in out.iter_mut().zip(s.bytes().take(HOST_MAX - 1)) {
        *o = b as c_char;
    }
    out
}

// The plumbing every C library of Tessera shares: errno and the thread's message, the panic
// guard, NULL as EFAULT, C strings and result pointers.
pub(crate) use tessera_cabi::{c_text as text, null_argument as efault, out_ref as out_ptr};

pub(crate) fn inval(msg: impl Into<String>) -> FsError {
    FsError::new(Errno::Inval, msg)
}

/// Runs the body of an entry point: its value, or `on_err` with errno and the message set
/// when it fails or panics.
pub(crate) fn guard<T>(on_err: T, f: impl FnOnce() -> FsResult<T>) -> T {
    tessera_cabi::guard("libtessera", on_err, f)
}

/// The client behind a handle.
///
/// # Safety
/// `c` is NULL or a handle `tessera_connect` returned and `tessera_disconnect` has not freed.
pub(crate) unsafe fn client_ref<'a>(c: *mut CClient, func: &str) -> FsResult<&'a Client> {
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
pub(crate) unsafe fn file_mut<'a>(f: *mut CFile, func: &str) -> FsResult<&'a mut CFile> {
    if f.is_null() {
        return Err(inval(format!(
            "{func}: file is NULL; call tessera_open first"
        )));
    }
    // SAFETY: non-null, so a live handle used by this thread only (this function's contract).
    Ok(unsafe { &mut *f })
}

pub(crate) fn model_of(m: c_int) -> FsResult<Option<Model>> {
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

pub(crate) fn model_value(m: Model) -> c_int {
    match m {
        Model::Posix => 1,
        Model::Commit => 2,
        Model::Session => 3,
        Model::MpiIo => 4,
    }
}

pub(crate) fn stat_of(a: &Attr) -> CStat {
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

/// Copies up to `max` extents to `out`; returns the total number.
///
/// # Safety
/// `out` is NULL or points to writable storage for `max` extents.
pub(crate) unsafe fn store_extents(
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

pub(crate) fn offset(off: i64, func: &str) -> FsResult<u64> {
    u64::try_from(off).map_err(|_| inval(format!("{func}: offset {off} is negative")))
}

/// A buffer argument: NULL is allowed only with a zero count.
pub(crate) fn check_buf(p: *const libc::c_void, n: size_t, func: &str) -> FsResult<()> {
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
