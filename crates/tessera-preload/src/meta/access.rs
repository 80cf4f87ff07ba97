//! `access`, `faccessat` and `euidaccess`: permission checks against Tessera's attributes.

use crate::state::client;
use crate::{real, run, tessera_path};
use libc::{c_char, c_int};
use tessera_client::{Errno, FileKind, FsError, FsResult};

pub(crate) fn access_check(p: &str, mode: c_int) -> FsResult<c_int> {
    let a = client()?.stat_follow(p)?;
    // The instance belongs to one user, who owns every file: check the owner bits.
    let bits = (a.mode >> 6) & 7;
    let want = [(libc::R_OK, 4), (libc::W_OK, 2), (libc::X_OK, 1)];
    for (flag, bit) in want {
        if mode & flag != 0 && bits & bit == 0 && !(flag == libc::X_OK && a.kind == FileKind::Dir) {
            return Err(FsError::new(
                Errno::Access,
                format!("{p}: mode {:o} does not allow this access", a.mode & 0o777),
            ));
        }
    }
    Ok(0)
}

/// # Safety
/// As `access(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn access(path: *const c_char, mode: c_int) -> c_int {
    // SAFETY: `path` is NUL-terminated per access(2), which is what `faccessat` requires of it;
    // `mode` and flags 0 are ints.
    unsafe { faccessat(libc::AT_FDCWD, path, mode, 0) }
}
/// # Safety
/// As `faccessat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn faccessat(
    dirfd: c_int,
    path: *const c_char,
    mode: c_int,
    flags: c_int,
) -> c_int {
    // SAFETY: `path` is NULL or NUL-terminated by faccessat(2)'s contract on our caller, all
    // `tessera_path` reads.
    match unsafe { tessera_path(dirfd, path) } {
        Some(p) => run(|| {
            let p = p?;
            access_check(&p, mode)
        }),
        None => {
            // SAFETY: NUL-terminated or NULL by the caller's contract.
            let k = unsafe { crate::kernel_at(dirfd, path) };
            // SAFETY: libc's own call, with the caller's arguments (the path rewritten where
            // it named a real place through Tessera).
            unsafe { real::faccessat(dirfd, crate::at(&k, path), mode, flags) }
        }
    }
}
/// # Safety
/// As `euidaccess(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn euidaccess(path: *const c_char, mode: c_int) -> c_int {
    // SAFETY: `path` is NUL-terminated per euidaccess(3), as `faccessat` needs; AT_EACCESS and
    // `mode` are ints.
    unsafe { faccessat(libc::AT_FDCWD, path, mode, libc::AT_EACCESS) }
}
alias!(eaccess => euidaccess(path: *const c_char, mode: c_int) -> c_int);
