//! Connecting to a daemon and letting go: `tessera_connect`, `tessera_disconnect`.

use crate::boundary::*;
use crate::*;

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
            // SAFETY: `instance` is NULL or a NUL-terminated string that the call does not outlive (tessera.h).
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
