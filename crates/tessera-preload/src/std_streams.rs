//! `stdin`, `stdout` and `stderr` on Tessera descriptors. glibc's own streams write through its
//! internal entry points, which the interposer does not see, so a program that redirects
//! descriptor 1 or 2 into Tessera with `dup2` (a shell running `echo hi > /tessera/x`, whose
//! builtins print with stdio) would hit the placeholder descriptor and fail with EBADF. While
//! descriptor 1 (2) is a Tessera descriptor, `stdout` (`stderr`) is a stream of ours on it;
//! when the descriptor becomes a kernel one again, the original stream is back. Descriptor 0
//! is served the same way for reading (a program started with its input from Tessera: see
//! [`crate::inherit`]).

use crate::state::table;
use libc::{c_char, c_int};
use std::sync::Mutex;

/// The original stream of each standard descriptor while ours stands in (`None`: not
/// swapped).
static SAVED: Mutex<[Option<usize>; 3]> = Mutex::new([None; 3]);

/// The address of libc's (or the program's copy of) `stdin` / `stdout` / `stderr` variable.
pub(crate) fn variable(fd: c_int) -> *mut *mut libc::FILE {
    let name: &[u8] = match fd {
        0 => b"stdin\0",
        1 => b"stdout\0",
        _ => b"stderr\0",
    };
    // SAFETY: a NUL-terminated symbol name; the result is the variable's address or NULL.
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr().cast()) }.cast()
}

/// Before descriptor `fd` changes: a stream of ours on it writes out what it holds, while
/// the descriptor still leads to the Tessera file.
pub fn before_change(fd: c_int) {
    if !(0..=2).contains(&fd) {
        return;
    }
    let saved = SAVED.lock().unwrap_or_else(|p| p.into_inner())[fd as usize];
    if saved.is_some() {
        let var = variable(fd);
        if !var.is_null() {
            // SAFETY: the variable holds our stream (we put it there).
            unsafe { libc::fflush(*var) };
        }
    }
}

/// Descriptor `fd` changed: to a Tessera descriptor (`tessera`), or to a kernel one.
pub fn after_change(fd: c_int, tessera: bool) {
    if !(0..=2).contains(&fd) {
        return;
    }
    let var = variable(fd);
    if var.is_null() {
        return;
    }
    let mut saved = SAVED.lock().unwrap_or_else(|p| p.into_inner());
    match (tessera, saved[fd as usize]) {
        (true, None) => {
            // SAFETY: the variable holds the program's current stream.
            let original = unsafe { *var };
            // SAFETY: the original stream is valid; what it buffered goes to the descriptor
            // as it is now, as it would if the program flushed after its dup2.
            unsafe { libc::fflush(original) };
            let mode = if fd == 0 { c"r" } else { c"w" };
            // SAFETY: `fd` is a Tessera descriptor; "r" and "w" are valid modes.
            let ours = unsafe { crate::stdio::stream(fd, mode.as_ptr() as *const c_char) };
            if ours.is_null() {
                return;
            }
            saved[fd as usize] = Some(original as usize);
            // SAFETY: the variable's address from the dynamic linker; writing a stream pointer
            // is what `stdout = ...` does.
            unsafe { *var = ours };
        }
        (false, Some(original)) => {
            // SAFETY: the variable holds our stream (we put it there).
            let ours = unsafe { *var };
            // SAFETY: the variable's address; the original stream is the one we took out.
            unsafe { *var = original as *mut libc::FILE };
            saved[fd as usize] = None;
            drop(saved);
            // Forget our stream without closing the descriptor (it is the program's now):
            // its buffer was written out before the change.
            table().streams.remove(&(ours as usize));
        }
        _ => {}
    }
}
