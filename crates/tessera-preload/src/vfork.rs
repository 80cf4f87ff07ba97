//! Children of `vfork` that need Tessera. A `vfork` child runs in its parent's memory until
//! it starts a program, so the interposer's state there is the parent's and cannot serve it;
//! yet Python's `subprocess` (and the workflow tools built on it: Snakemake, Parsl;
//! `python3 -m venv` running pip) changes into `cwd=` in exactly such a child.
//!
//! - In a process that has used Tessera (or with `TESSERA_VFORK=fork`), `vfork` is a fork: the
//!   child has its own memory and is served like any process. A fork costs more the larger
//!   the parent (its page tables are copied: measured in docs/interposer.md), so a process
//!   that never touched Tessera keeps glibc's `vfork`. `TESSERA_VFORK=vfork` keeps it
//!   everywhere.
//! - A `chdir` into Tessera in a child of glibc's `vfork` is noted for the program it starts
//!   (in `TESSERA_CWD`, with the child's kernel working directory made one that is gone, as
//!   a virtual working directory always has), touching none of the parent's state; the new
//!   program starts there. It is not looked up first: a directory that does not exist shows
//!   as `ENOENT` in the program's first relative call, not in the `chdir`.
//! - Any other Tessera path in such a child is refused with `ENOTSUP` and the reason, as in
//!   children made by `clone(CLONE_VM)` directly (glibc's `posix_spawn`).

use crate::state;
use libc::{c_char, c_int, pid_t};
use std::cell::RefCell;
use std::sync::OnceLock;
use tessera_client::posix::{join_user, lexical_normalize, under_prefix};

/// What `TESSERA_VFORK` asks: `fork` (every `vfork` a fork), `vfork` (none), else `auto`.
#[derive(Clone, Copy, PartialEq)]
enum Choice {
    Auto,
    Fork,
    Vfork,
}

fn choice() -> Choice {
    static CHOICE: OnceLock<Choice> = OnceLock::new();
    *CHOICE.get_or_init(|| {
        let _b = state::Busy::enter();
        match std::env::var("TESSERA_VFORK").as_deref() {
            Ok("fork") => Choice::Fork,
            Ok("vfork") => Choice::Vfork,
            _ => Choice::Auto,
        }
    })
}

/// The function `vfork` hands over to: glibc's `fork` where the child may need Tessera, else
/// glibc's `vfork`.
extern "C" fn vfork_target() -> usize {
    use std::sync::atomic::AtomicUsize;
    static FORK: AtomicUsize = AtomicUsize::new(0);
    static VFORK: AtomicUsize = AtomicUsize::new(0);
    let fork = match choice() {
        Choice::Fork => true,
        Choice::Vfork => false,
        Choice::Auto => state::used_tessera(),
    };
    // A record left by an earlier child is stale (and its pid may come again).
    CHILD_CWD.with_borrow_mut(|c| *c = None);
    if fork {
        crate::real::lookup(&FORK, b"fork\0")
    } else {
        crate::real::lookup(&VFORK, b"vfork\0")
    }
}

/// `vfork(2)`, or `fork(2)` where its child may need Tessera (see the module).
///
/// A `vfork` cannot be wrapped by a function that calls it: the child returns through the
/// wrapper's frame and reuses its stack, so the parent, resuming in it, would find it
/// clobbered. This entry point therefore asks [`vfork_target`] which function to run, puts
/// the stack back exactly as the caller left it, and jumps: glibc's function returns straight
/// to the caller, as if called by it.
///
/// # Safety
/// As `vfork(2)`; where it is a fork, with `fork(2)`'s guarantees.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn vfork() -> pid_t {
    // At entry the stack holds the return address (rsp = 8 mod 16): one more word aligns it
    // for the call, and is taken off again before the jump.
    core::arch::naked_asm!(
        "sub rsp, 8",
        "call {target}",
        "add rsp, 8",
        "jmp rax",
        target = sym vfork_target,
    )
}

/// See the x86-64 form.
///
/// # Safety
/// As `vfork(2)`; where it is a fork, with `fork(2)`'s guarantees.
#[cfg(target_arch = "aarch64")]
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn vfork() -> pid_t {
    // The link register holds the caller's return address: saved around the call, restored
    // before the jump, so glibc's function returns to the caller.
    core::arch::naked_asm!(
        "stp x29, x30, [sp, #-16]!",
        "bl {target}",
        "mov x16, x0",
        "ldp x29, x30, [sp], #16",
        "br x16",
        target = sym vfork_target,
    )
}

thread_local! {
    /// The working directory a `vfork` child chose, for the program it starts: the child's
    /// pid, and its choice (`None`: a kernel directory). Written by the child, which runs on
    /// its parent's thread (so two threads' children never share it), and cleared before
    /// each `vfork` or fork; a record of another pid is stale.
    static CHILD_CWD: RefCell<Option<(pid_t, Option<String>)>> = const { RefCell::new(None) };
}

/// The working directory to hand the program this `vfork` child starts, if it chose one:
/// `Some(None)` when it chose a kernel directory.
pub fn child_cwd() -> Option<Option<String>> {
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    CHILD_CWD.with_borrow(|c| match c {
        Some((pid, cwd)) if *pid == me => Some(cwd.clone()),
        _ => None,
    })
}

/// `chdir` in a child of `vfork`: into Tessera, noted for the program it starts; elsewhere, the
/// kernel's. A relative path is taken against the directory the child chose last, else the
/// working directory it was born with.
///
/// # Safety
/// `path` is NULL or NUL-terminated.
pub unsafe fn chdir_in_child(path: *const c_char) -> c_int {
    if path.is_null() {
        tessera_cabi::set_errno(libc::EFAULT);
        return -1;
    }
    // SAFETY: NUL-terminated (this function's contract).
    let text = unsafe { std::ffi::CStr::from_ptr(path) }
        .to_string_lossy()
        .into_owned();
    let base = child_cwd().unwrap_or_else(state::cwd);
    let absolute = match base {
        Some(b) if !text.starts_with('/') => Some(lexical_normalize(&join_user(&b, &text))),
        _ if text.starts_with('/') => Some(lexical_normalize(&text)),
        _ => None,
    };
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    let chosen = match absolute {
        Some(a) if under_prefix(&a, state::prefix()) => {
            let _b = state::Busy::enter();
            crate::exec::void_kernel_cwd();
            Some(a)
        }
        other => {
            let target = other.and_then(|a| std::ffi::CString::new(a).ok());
            let target = target.as_ref().map_or(path, |c| c.as_ptr());
            // SAFETY: the kernel's chdir, of the child's own working directory.
            if unsafe { crate::real::chdir(target) } != 0 {
                return -1;
            }
            None
        }
    };
    CHILD_CWD.with_borrow_mut(|c| *c = Some((me, chosen)));
    0
}
