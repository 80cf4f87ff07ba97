//! `realpath` and `canonicalize_file_name` on Tessera paths. glibc resolves a path by
//! walking it with internal `readlink` calls the interposer never sees, so the kernel would
//! answer for `/tessera/...`, where nothing exists. Here a Tessera path is walked component by
//! component: each prefix is looked up (`lstat`), a symbolic link is replaced by its target
//! (relative targets against the link's directory, at most 40 in all, then `ELOOP`), a missing
//! component is `ENOENT` and a file before the end `ENOTDIR`. An absolute target inside the
//! PFS directory names the Tessera file there (as lookups take it); a link that leads out of
//! Tessera hands the rest of the walk to glibc. Paths elsewhere go to glibc's own `realpath`.
//!
//! `..` is taken lexically before the walk, as every Tessera path is (`docs/interposer.md`).

use crate::state::{Busy, client, prefix};
use crate::{caught, fail, guarded, real, tessera_path};
use libc::c_char;
use std::ffi::CString;
use tessera_client::posix::{join_user, lexical_normalize, under_prefix};
use tessera_client::{Errno, FileKind, FsError, FsResult};

/// Where the walk of a path ends: a Tessera path, or a path for the kernel to finish.
pub(crate) enum Resolved {
    Tessera(String),
    Kernel(String),
}

/// Resolves the links along the Tessera path `p` (absolute, normalised).
pub(crate) fn resolve(p: &str) -> FsResult<Resolved> {
    let c = client()?;
    let mut hops = 0;
    let mut todo = p.to_string();
    'walk: loop {
        let root = prefix();
        let rest = todo.strip_prefix(root).unwrap_or("").to_string();
        let parts: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
        let mut done = root.to_string();
        // The prefix itself must exist (it always does: the root of the namespace).
        for (i, part) in parts.iter().enumerate() {
            let here = format!("{done}/{part}");
            let a = c.stat(&here)?;
            match a.kind {
                FileKind::Dir => done = here,
                FileKind::File if i + 1 == parts.len() => done = here,
                FileKind::File => {
                    return Err(FsError::new(
                        Errno::NotDir,
                        format!("{here} is a file, and {p} goes on beneath it"),
                    ));
                }
                FileKind::Symlink => {
                    hops += 1;
                    if hops > 40 {
                        return Err(FsError::new(
                            Errno::Loop,
                            format!("{p}: more than 40 symbolic links"),
                        ));
                    }
                    let target = c.readlink(&here)?;
                    let tail = parts[i + 1..].join("/");
                    let joined = join_user(&done, &target);
                    let next = if tail.is_empty() {
                        joined
                    } else {
                        format!("{joined}/{tail}")
                    };
                    let mut next = lexical_normalize(&next);
                    if !under_prefix(&next, root) {
                        // A target in the PFS directory names the Tessera file there, as
                        // lookups take it; anything else is the kernel's.
                        let pfs = c.config().pfs_dir.display().to_string();
                        let inside = next
                            .strip_prefix(pfs.trim_end_matches('/'))
                            .filter(|r| r.is_empty() || r.starts_with('/'))
                            .map(|r| format!("{}{r}", root.trim_end_matches('/')));
                        match inside {
                            Some(t) => next = t,
                            None => return Ok(Resolved::Kernel(next)),
                        }
                    }
                    todo = next;
                    continue 'walk;
                }
            }
        }
        return Ok(Resolved::Tessera(done));
    }
}

/// Hands `path` to the caller as `realpath` does: into `resolved` (`PATH_MAX` bytes) or a
/// buffer of malloc's for the caller to free.
///
/// # Safety
/// `resolved` is NULL or holds `PATH_MAX` bytes.
unsafe fn give(path: &str, resolved: *mut c_char) -> FsResult<*mut c_char> {
    let bytes = path.as_bytes();
    if bytes.len() >= libc::PATH_MAX as usize {
        return Err(FsError::new(
            Errno::NameTooLong,
            format!("{path}: longer than PATH_MAX"),
        ));
    }
    let out = if resolved.is_null() {
        // SAFETY: malloc'd for the caller to free, as glibc's realpath does.
        let p = unsafe { libc::malloc(bytes.len() + 1) } as *mut c_char;
        if p.is_null() {
            // malloc set ENOMEM; nothing more to explain.
            return Ok(p);
        }
        p
    } else {
        resolved
    };
    // SAFETY: `out` holds at least `bytes.len() + 1` bytes (allocated so, or PATH_MAX).
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr().cast(), out, bytes.len());
        *out.add(bytes.len()) = 0;
    }
    Ok(out)
}

/// # Safety
/// As `realpath(3)`: `path` is NUL-terminated, `resolved` NULL or `PATH_MAX` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn realpath(path: *const c_char, resolved: *mut c_char) -> *mut c_char {
    guarded(|| {
        // SAFETY: `path` is NUL-terminated by realpath(3)'s contract (NULL is tolerated), which
        // is all `tessera_path` reads; `resolved` is not passed.
        let Some(p) = (unsafe { tessera_path(libc::AT_FDCWD, path) }) else {
            // SAFETY: NUL-terminated or NULL by the caller's contract.
            let k = unsafe { crate::kernel_at(libc::AT_FDCWD, path) };
            // SAFETY: glibc's own call, the path rewritten where it named a real place through
            // Tessera.
            return unsafe { real::realpath(crate::at(&k, path), resolved) };
        };
        let walked = {
            let _b = Busy::enter();
            caught(|| resolve(&p?))
        };
        let done = match walked {
            // SAFETY: `resolved` as the caller's contract says.
            Ok(Resolved::Tessera(t)) => unsafe { give(&t, resolved) },
            Ok(Resolved::Kernel(k)) => match CString::new(k) {
                // SAFETY: glibc's own call on the real place the links led to.
                Ok(k) => return unsafe { real::realpath(k.as_ptr(), resolved) },
                Err(_) => Err(FsError::new(Errno::Inval, "a link target holds a NUL byte")),
            },
            Err(e) => Err(e),
        };
        done.unwrap_or_else(|e| {
            fail(&e);
            std::ptr::null_mut()
        })
    })
}

/// # Safety
/// As `canonicalize_file_name(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn canonicalize_file_name(path: *const c_char) -> *mut c_char {
    // SAFETY: forwarded; a NULL buffer makes realpath allocate.
    unsafe { realpath(path, std::ptr::null_mut()) }
}
