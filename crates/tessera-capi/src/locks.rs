//! Byte-range locks on open files.

use crate::boundary::*;
use crate::*;

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
        // SAFETY: `file` is NULL or a live handle from `tessera_open`, not yet closed, used by this thread only (tessera.h).
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
