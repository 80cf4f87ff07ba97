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
