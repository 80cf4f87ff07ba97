//! Errors and versions: `tessera_errmsg`, `tessera_version` and the model names.

use crate::boundary::*;
use crate::*;

/// See `tessera.h`.
#[unsafe(no_mangle)]
pub extern "C" fn tessera_errmsg() -> *const c_char {
    tessera_cabi::message()
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
        // SAFETY: `name` is NULL or a NUL-terminated string that the call does not outlive (tessera.h).
        let s = unsafe { text(name, "tessera_model_from_name", "name") }?;
        let m: Model = s.parse().map_err(|e: String| inval(e))?;
        Ok(model_value(m))
    })
}
