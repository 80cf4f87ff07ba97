//! `dlopen` and `dlmopen` of libraries stored in Tessera. The dynamic linker cannot map a
//! file it does not see, so a Tessera library's bytes are staged into a memory file and the
//! linker loads that (`/proc/self/fd/N`); a second `dlopen` of the same path loads it again
//! (the linker knows it by the memory file's name), and its own `$ORIGIN` is that memory
//! file's.
//!
//! Every other name must reach the linker as if the program had called it directly: glibc
//! takes the caller's return address to choose whose `RUNPATH`, `$ORIGIN` and namespace a
//! bare name is searched with, and a wrapper would make that the interposer's. So these entry
//! points are naked: they ask [`open_target`] which function serves the call, put the
//! arguments and the stack back exactly as the caller left them, and jump to it; glibc's
//! `dlopen` then returns straight to the caller.

use crate::real;
use libc::{c_char, c_int, c_long, c_void};
use std::ffi::{CStr, CString};
use std::sync::atomic::AtomicUsize;

/// Whether `path` names a library in Tessera (a name with a slash, under the prefix).
///
/// # Safety
/// `path` is NULL or NUL-terminated.
unsafe fn in_tessera(path: *const c_char) -> bool {
    // SAFETY: this function's contract.
    !path.is_null()
        && unsafe { CStr::from_ptr(path) }.to_bytes().contains(&b'/')
        // SAFETY: as above.
        && unsafe { crate::tessera_path(libc::AT_FDCWD, path) }.is_some()
}

/// The function that serves `dlopen(path, _)`: the staging one for a Tessera path, glibc's
/// otherwise.
///
/// # Safety
/// `path` is NULL or NUL-terminated.
unsafe extern "C" fn open_target(path: *const c_char, _flags: c_int) -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    // SAFETY: this function's contract.
    if unsafe { in_tessera(path) } {
        staged_dlopen as *const () as usize
    } else {
        real::lookup(&NEXT, b"dlopen\0")
    }
}

/// The function that serves `dlmopen(lmid, path, _)`, as [`open_target`].
///
/// # Safety
/// `path` is NULL or NUL-terminated.
unsafe extern "C" fn mopen_target(_lmid: c_long, path: *const c_char, _flags: c_int) -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    // SAFETY: this function's contract.
    if unsafe { in_tessera(path) } {
        staged_dlmopen as *const () as usize
    } else {
        real::lookup(&NEXT, b"dlmopen\0")
    }
}

/// Stages the Tessera library at `path` and has `load` map the memory file.
///
/// # Safety
/// `path` is NUL-terminated and Tessera's.
unsafe fn staged(path: *const c_char, load: impl Fn(*const c_char) -> *mut c_void) -> *mut c_void {
    crate::guarded(|| {
        // SAFETY: NUL-terminated (this function's contract).
        let Some(p) = (unsafe { crate::tessera_path(libc::AT_FDCWD, path) }) else {
            return std::ptr::null_mut();
        };
        let fd = crate::run(|| p.and_then(|p| crate::exec::staged_as(&p, false)));
        if fd < 0 {
            return std::ptr::null_mut();
        }
        let Ok(name) = CString::new(format!("/proc/self/fd/{fd}")) else {
            return std::ptr::null_mut();
        };
        let handle = load(name.as_ptr());
        // The mapping outlives the descriptor.
        // SAFETY: our own descriptor.
        unsafe { libc::close(fd) };
        handle
    })
}

/// `dlopen` of a Tessera library.
///
/// # Safety
/// As `dlopen(3)`, with `path` Tessera's.
unsafe extern "C" fn staged_dlopen(path: *const c_char, flags: c_int) -> *mut c_void {
    // SAFETY: the dynamic linker's own call on the staged file, under this function's contract.
    unsafe { staged(path, |p| real::dlopen(p, flags)) }
}

/// `dlmopen` of a Tessera library.
///
/// # Safety
/// As `dlmopen(3)`, with `path` Tessera's.
unsafe extern "C" fn staged_dlmopen(
    lmid: c_long,
    path: *const c_char,
    flags: c_int,
) -> *mut c_void {
    // SAFETY: the dynamic linker's own call on the staged file, under this function's contract.
    unsafe { staged(path, |p| real::dlmopen(lmid, p, flags)) }
}

/// `dlopen(3)`: see the module.
///
/// # Safety
/// As `dlopen(3)`.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlopen(path: *const c_char, flags: c_int) -> *mut c_void {
    // At entry rsp = 8 mod 16 (the return address): two saved arguments and one more word
    // align the call; all three come off again, so the jump finds the caller's stack.
    core::arch::naked_asm!(
        "push rdi",
        "push rsi",
        "sub rsp, 8",
        "call {target}",
        "add rsp, 8",
        "pop rsi",
        "pop rdi",
        "jmp rax",
        target = sym open_target,
    )
}

/// `dlmopen(3)`: see the module.
///
/// # Safety
/// As `dlmopen(3)`.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlmopen(lmid: c_long, path: *const c_char, flags: c_int) -> *mut c_void {
    // Three saved arguments align the call (8 + 24 = 0 mod 16).
    core::arch::naked_asm!(
        "push rdi",
        "push rsi",
        "push rdx",
        "call {target}",
        "pop rdx",
        "pop rsi",
        "pop rdi",
        "jmp rax",
        target = sym mopen_target,
    )
}

/// `dlopen(3)`: see the module.
///
/// # Safety
/// As `dlopen(3)`.
#[cfg(target_arch = "aarch64")]
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlopen(path: *const c_char, flags: c_int) -> *mut c_void {
    // The frame keeps the link register and the arguments across the call; the jump goes
    // with the caller's link register, so glibc returns to the caller.
    core::arch::naked_asm!(
        "stp x29, x30, [sp, #-32]!",
        "stp x0, x1, [sp, #16]",
        "bl {target}",
        "mov x16, x0",
        "ldp x0, x1, [sp, #16]",
        "ldp x29, x30, [sp], #32",
        "br x16",
        target = sym open_target,
    )
}

/// `dlmopen(3)`: see the module.
///
/// # Safety
/// As `dlmopen(3)`.
#[cfg(target_arch = "aarch64")]
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlmopen(lmid: c_long, path: *const c_char, flags: c_int) -> *mut c_void {
    core::arch::naked_asm!(
        "stp x29, x30, [sp, #-48]!",
        "stp x0, x1, [sp, #16]",
        "str x2, [sp, #32]",
        "bl {target}",
        "mov x16, x0",
        "ldp x0, x1, [sp, #16]",
        "ldr x2, [sp, #32]",
        "ldp x29, x30, [sp], #48",
        "br x16",
        target = sym mopen_target,
    )
}
