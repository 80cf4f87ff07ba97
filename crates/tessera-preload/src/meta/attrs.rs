//! Attributes Tessera does not store: modes, owners and times, accepted when they change
//! nothing and refused otherwise, or answered from what Tessera knows.

use super::*;
use crate::state;
use crate::state::{Object, client, desc, lookup};
use crate::{real, run, tessera_path};
use libc::{c_char, c_int, mode_t};
use tessera_client::{Attr, AttrChange, Errno, FsError, FsResult};

/// An owner change is accepted when it changes nothing (tar run as root restores the owner a
/// file already has: an instance belongs to one user) and refused with EPERM otherwise.
pub(crate) fn same_or_refuse(a: &Attr, owner: (u32, u32), what: &str) -> FsResult<c_int> {
    let (u, g) = owner;
    if (u == u32::MAX || u == a.uid) && (g == u32::MAX || g == a.gid) {
        Ok(0)
    } else {
        Err(FsError::new(
            Errno::Perm,
            format!(
                "{what}: every file of a Tessera instance belongs to the instance's user; owners cannot change"
            ),
        ))
    }
}

/// The entry a change of `p` acts on: `p` itself with `AT_SYMLINK_NOFOLLOW`, else where the
/// links at its end lead.
pub(crate) fn at_end(p: String, flags: c_int) -> FsResult<String> {
    if flags & libc::AT_SYMLINK_NOFOLLOW != 0 {
        Ok(p)
    } else {
        Ok(client()?.follow(&p)?.0)
    }
}

pub(crate) fn chmod_path(p: &str, mode: mode_t) -> FsResult<c_int> {
    let change = AttrChange {
        mode: Some(mode & 0o7777),
        ..Default::default()
    };
    client()?.set_attr(p, change).map(|_| 0)
}

pub(crate) fn fd_path(fd: c_int) -> FsResult<String> {
    let d = lookup(fd).ok_or_else(|| crate::ebadf(fd))?;
    Ok(state::lock_desc(&d).path.clone())
}

/// # Safety
/// As `chmod(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn chmod(path: *const c_char, mode: mode_t) -> c_int {
    // SAFETY: `path` is NUL-terminated (or NULL) per chmod(2), as `fchmodat` requires of it;
    // `mode` and flags 0 are ints.
    unsafe { fchmodat(libc::AT_FDCWD, path, mode, 0) }
}
/// # Safety
/// As `fchmodat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fchmodat(
    dirfd: c_int,
    path: *const c_char,
    mode: mode_t,
    flags: c_int,
) -> c_int {
    // A link's own mode is refused as Linux refuses it (lchmod expects that): quietly.
    let expected: &[Errno] = if flags & libc::AT_SYMLINK_NOFOLLOW != 0 {
        &[Errno::NotSup]
    } else {
        &[]
    };
    // SAFETY: `path` is NULL or NUL-terminated by fchmodat(2)'s contract on our caller;
    // `tessera_path` only reads it, with `dirfd` as given.
    match unsafe { tessera_path(dirfd, path) } {
        Some(p) => crate::run_quiet_on(expected, || {
            let p = at_end(p?, flags)?;
            chmod_path(&p, mode)
        }),
        None => {
            // SAFETY: NUL-terminated or NULL by the caller's contract.
            let k = unsafe { crate::kernel_at(dirfd, path) };
            // SAFETY: libc's own call, with the caller's arguments (the path rewritten where
            // it named a real place through Tessera).
            unsafe { real::fchmodat(dirfd, crate::at(&k, path), mode, flags) }
        }
    }
}
/// # Safety
/// As `fchmod(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fchmod(fd: c_int, mode: mode_t) -> c_int {
    if desc(fd).is_some() {
        return run(|| chmod_path(&fd_path(fd)?, mode));
    }
    // SAFETY: the caller's arguments, passed unchanged to the real `fchmod`, whose contract the caller met in calling it.
    unsafe { real::fchmod(fd, mode) }
}
/// # Safety
/// As `chown(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn chown(path: *const c_char, uid: libc::uid_t, gid: libc::gid_t) -> c_int {
    // SAFETY: `path` meets chown(2)'s contract (NUL-terminated), which is fchownat's for it;
    // `uid` and `gid` are ints.
    unsafe { fchownat(libc::AT_FDCWD, path, uid, gid, 0) }
}
/// # Safety
/// As `lchown(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lchown(path: *const c_char, uid: libc::uid_t, gid: libc::gid_t) -> c_int {
    // SAFETY: `path` is NUL-terminated per lchown(2), as `fchownat` needs; AT_SYMLINK_NOFOLLOW
    // and the ids are plain ints.
    unsafe { fchownat(libc::AT_FDCWD, path, uid, gid, libc::AT_SYMLINK_NOFOLLOW) }
}
/// # Safety
/// As `fchownat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fchownat(
    dirfd: c_int,
    path: *const c_char,
    uid: libc::uid_t,
    gid: libc::gid_t,
    flags: c_int,
) -> c_int {
    // SAFETY: `path` is NULL or NUL-terminated per fchownat(2) on our caller, which is all
    // `tessera_path` reads.
    match unsafe { tessera_path(dirfd, path) } {
        Some(p) => run(|| {
            let p = p?;
            same_or_refuse(&client()?.stat(&p)?, (uid, gid), &format!("chown {p}"))
        }),
        None => {
            // SAFETY: NUL-terminated or NULL by the caller's contract.
            let k = unsafe { crate::kernel_at(dirfd, path) };
            // SAFETY: libc's own call, with the caller's arguments (the path rewritten where
            // it named a real place through Tessera).
            unsafe { real::fchownat(dirfd, crate::at(&k, path), uid, gid, flags) }
        }
    }
}
/// # Safety
/// As `fchown(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fchown(fd: c_int, uid: libc::uid_t, gid: libc::gid_t) -> c_int {
    if desc(fd).is_some() {
        return run(|| same_or_refuse(&fd_attr(fd)?, (uid, gid), "fchown"));
    }
    // SAFETY: the caller's arguments, passed unchanged to the real `fchown`, whose contract the caller met in calling it.
    unsafe { real::fchown(fd, uid, gid) }
}

/// Sets access and modification times (NULL: both now; UTIME_NOW, UTIME_OMIT honoured).
///
/// # Safety
/// `times` is NULL or points to two `timespec`s.
pub(crate) unsafe fn set_times(p: &str, times: *const libc::timespec) -> FsResult<c_int> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64);
    let pick = |t: Option<&libc::timespec>| match t {
        None => Ok(Some(now)),
        Some(t) if t.tv_nsec == libc::UTIME_NOW => Ok(Some(now)),
        Some(t) if t.tv_nsec == libc::UTIME_OMIT => Ok(None),
        Some(t) if !(0..1_000_000_000).contains(&t.tv_nsec) => Err(FsError::new(
            Errno::Inval,
            format!("utimensat {p}: tv_nsec {} is out of range", t.tv_nsec),
        )),
        Some(t) => Ok(Some(t.tv_sec * 1_000_000_000 + t.tv_nsec)),
    };
    let (a, m) = if times.is_null() {
        (None, None)
    } else {
        // SAFETY: non-null, so two timespecs (this function's contract).
        let t = unsafe { std::slice::from_raw_parts(times, 2) };
        (Some(&t[0]), Some(&t[1]))
    };
    let change = AttrChange {
        mode: None,
        atime_ns: pick(a)?,
        mtime_ns: pick(m)?,
    };
    publish_writes_of(p)?;
    client()?.set_attr(p, change).map(|_| 0)
}

/// Publishes this process's unpublished writes to the file at `p`: times set explicitly must
/// win over the modification time that publishing them sets, and tar and `cp -p` set the
/// times before they close the file.
pub(crate) fn publish_writes_of(p: &str) -> FsResult<()> {
    // Cloned out first: a description is never locked while the table is.
    let descs: Vec<state::DescRef> = state::table().fds.values().cloned().collect();
    for d in descs {
        let mut g = state::lock_desc(&d);
        if g.path != p || g.flags & libc::O_ACCMODE == libc::O_RDONLY {
            continue;
        }
        if let Object::File(f) = &mut g.obj {
            f.commit()?;
        }
    }
    Ok(())
}

/// # Safety
/// As `utimensat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn utimensat(
    dirfd: c_int,
    path: *const c_char,
    times: *const libc::timespec,
    flags: c_int,
) -> c_int {
    if path.is_null() && desc(dirfd).is_some() {
        // SAFETY: `times` is NULL or two timespecs per utimensat(2), futimens(3)'s own contract;
        // `dirfd` is a Tessera descriptor (checked above).
        return unsafe { futimens(dirfd, times) };
    }
    // SAFETY: `path` is NULL or NUL-terminated by utimensat(2)'s contract; `tessera_path` reads
    // only `path`, not `times`.
    match unsafe { tessera_path(dirfd, path) } {
        Some(p) => run(|| {
            let p = at_end(p?, flags)?;
            // SAFETY: `times` is NULL or two timespecs (utimensat's contract).
            unsafe { set_times(&p, times) }
        }),
        None => {
            // SAFETY: NUL-terminated or NULL by the caller's contract.
            let k = unsafe { crate::kernel_at(dirfd, path) };
            // SAFETY: libc's own call, with the caller's arguments (the path rewritten where
            // it named a real place through Tessera).
            unsafe { real::utimensat(dirfd, crate::at(&k, path), times, flags) }
        }
    }
}
/// # Safety
/// As `futimens(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn futimens(fd: c_int, times: *const libc::timespec) -> c_int {
    if desc(fd).is_some() {
        // SAFETY: `times` is NULL or two timespecs (futimens's contract).
        return run(|| unsafe { set_times(&fd_path(fd)?, times) });
    }
    // SAFETY: the caller's arguments, passed unchanged to the real `futimens`, whose contract the caller met in calling it.
    unsafe { real::futimens(fd, times) }
}
