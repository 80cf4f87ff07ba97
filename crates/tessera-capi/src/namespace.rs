//! Namespace calls on paths: create, stat, list, rename, remove and the rest.

use crate::boundary::*;
use crate::*;

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
        // SAFETY: `client` is NULL or a live handle from `tessera_connect`, not yet given to `tessera_disconnect` (tessera.h).
        let c = unsafe { client_ref(client, "tessera_stat") }?;
        // SAFETY: `path` is NULL or a NUL-terminated string that the call does not outlive (tessera.h).
        let p = unsafe { text(path, "tessera_stat", "path") }?;
        // SAFETY: `st` is NULL or points to the caller's own, aligned storage for the result (tessera.h).
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
        // SAFETY: `client` is NULL or a live handle from `tessera_connect`, not yet given to `tessera_disconnect` (tessera.h).
        let c = unsafe { client_ref(client, "tessera_mkdir") }?;
        c.mkdir(
            // SAFETY: `path` is NULL or a NUL-terminated string that the call does not outlive (tessera.h).
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
        // SAFETY: `client` is NULL or a live handle from `tessera_connect`, not yet given to `tessera_disconnect` (tessera.h).
        let c = unsafe { client_ref(client, "tessera_rmdir") }?;
        // SAFETY: `path` is NULL or a NUL-terminated string that the call does not outlive (tessera.h).
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
        // SAFETY: `client` is NULL or a live handle from `tessera_connect`, not yet given to `tessera_disconnect` (tessera.h).
        let c = unsafe { client_ref(client, "tessera_unlink") }?;
        // SAFETY: `path` is NULL or a NUL-terminated string that the call does not outlive (tessera.h).
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
        // SAFETY: `client` is NULL or a live handle from `tessera_connect`, not yet given to `tessera_disconnect` (tessera.h).
        let c = unsafe { client_ref(client, "tessera_rename") }?;
        c.rename(
            // SAFETY: `from` is NULL or a NUL-terminated string that the call does not outlive (tessera.h).
            unsafe { text(from, "tessera_rename", "from") }?,
            // SAFETY: `to` is NULL or a NUL-terminated string that the call does not outlive (tessera.h).
            unsafe { text(to, "tessera_rename", "to") }?,
        )?;
        Ok(0)
    })
}
