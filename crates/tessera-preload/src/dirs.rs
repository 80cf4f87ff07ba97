//! Directory streams over Tessera directories: `opendir` and `fdopendir` hand out a `DIR *`
//! that only this library understands, so every call taking a `DIR *` is intercepted
//! (readdir, readdir64, readdir_r, closedir, dirfd, rewinddir, telldir, seekdir). The entries
//! are listed once, at open, with `.` and `..` first.

use crate::files::{close_tessera, open_path};
use crate::meta::is_dir_fd;
use crate::state::{self, Busy, DIR_STREAMS, DirStream, client, desc, table};
use crate::{fail, real, run, tessera_path};
use libc::{c_char, c_int, c_long};
use std::ffi::CString;
use std::sync::atomic::Ordering;
use tessera_client::{Errno, FileKind, FsError, FsResult};

fn stream_of(fd: c_int, path: &str) -> FsResult<*mut libc::DIR> {
    let c = client()?;
    let me = c.stat(path)?;
    let parent = match path.rsplit_once('/') {
        Some((p, _)) if !p.is_empty() && p.len() >= state::prefix().len() => {
            c.stat(p).map(|a| a.ino).unwrap_or(me.ino)
        }
        _ => me.ino,
    };
    let mut entries = vec![
        (CString::new(".").expect("no NUL"), me.ino, libc::DT_DIR),
        (CString::new("..").expect("no NUL"), parent, libc::DT_DIR),
    ];
    for e in c.readdir(path)? {
        let kind = match e.kind {
            FileKind::File => libc::DT_REG,
            FileKind::Dir => libc::DT_DIR,
            FileKind::Symlink => libc::DT_LNK,
        };
        let name = CString::new(e.name)
            .map_err(|_| FsError::new(Errno::Io, format!("a name in {path} holds a NUL byte")))?;
        entries.push((name, e.ino, kind));
    }
    let s = Box::new(DirStream {
        fd,
        entries,
        pos: 0,
        // SAFETY: plain data.
        ent: unsafe { std::mem::zeroed() },
    });
    // The boxed stream does not move while the table holds it: its address is the `DIR *`.
    let p = &*s as *const DirStream as *mut libc::DIR;
    table().dirs.insert(p as usize, s);
    DIR_STREAMS.fetch_add(1, Ordering::Relaxed);
    Ok(p)
}

/// The Tessera stream behind `d`, if it is one.
fn ours(d: *mut libc::DIR) -> bool {
    DIR_STREAMS.load(Ordering::Relaxed) > 0 && table().dirs.contains_key(&(d as usize))
}

fn with_stream<T>(d: *mut libc::DIR, f: impl FnOnce(&mut DirStream) -> T) -> T {
    let mut t = table();
    let s = t.dirs.get_mut(&(d as usize)).expect("checked by ours()");
    f(s)
}

/// # Safety
/// As `opendir(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn opendir(path: *const c_char) -> *mut libc::DIR {
    crate::guarded(|| {
        // SAFETY: `path` is the caller's NUL-terminated name per opendir(3); `tessera_path`
        // only reads it, and tolerates NULL.
        match unsafe { tessera_path(libc::AT_FDCWD, path) } {
            Some(p) => {
                let _b = Busy::enter();
                let r = p.and_then(|p| {
                    open_path(&p, libc::O_RDONLY | libc::O_DIRECTORY, 0).map(|fd| (fd, p))
                });
                let r = r.and_then(|(fd, _)| {
                    // The directory opened: where the caller's links led.
                    let p = state::lookup(fd).map(|d| state::lock_desc(&d).path.clone());
                    let p = p.ok_or_else(|| crate::ebadf(fd))?;
                    stream_of(fd, &p).inspect_err(|_| {
                        if let Some(d) = state::lookup(fd) {
                            let _ = close_tessera(fd, d);
                        }
                    })
                });
                r.unwrap_or_else(|e| {
                    fail(&e);
                    std::ptr::null_mut()
                })
            }
            None => {
                // SAFETY: NUL-terminated or NULL by the caller's contract.
                let k = unsafe { crate::kernel_at(libc::AT_FDCWD, path) };
                // SAFETY: libc's own call, with the caller's arguments (the path rewritten where
                // it named a real place through Tessera).
                unsafe { real::opendir(crate::at(&k, path)) }
            }
        }
    })
}

/// # Safety
/// As `fdopendir(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fdopendir(fd: c_int) -> *mut libc::DIR {
    crate::guarded(|| {
        if desc(fd).is_some() {
            let _b = Busy::enter();
            let r = match is_dir_fd(fd) {
                Some(p) => stream_of(fd, &p),
                None => Err(FsError::new(
                    Errno::NotDir,
                    format!("fdopendir: descriptor {fd} is a Tessera file, not a directory"),
                )),
            };
            return r.unwrap_or_else(|e| {
                fail(&e);
                std::ptr::null_mut()
            });
        }
        // SAFETY: the caller's arguments, passed unchanged to the real `fdopendir`, whose contract the caller met in calling it.
        unsafe { real::fdopendir(fd) }
    })
}

fn next(s: &mut DirStream) -> *mut libc::dirent64 {
    let Some((name, ino, kind)) = s.entries.get(s.pos) else {
        return std::ptr::null_mut();
    };
    s.pos += 1;
    let bytes = name.as_bytes_with_nul();
    let e = &mut s.ent;
    e.d_ino = *ino;
    e.d_off = s.pos as i64;
    e.d_reclen = std::mem::size_of::<libc::dirent64>() as u16;
    e.d_type = *kind;
    for (dst, src) in e.d_name.iter_mut().zip(bytes) {
        *dst = *src as c_char;
    }
    e
}

/// # Safety
/// As `readdir(3)` (`struct dirent` and `struct dirent64` are the same on 64-bit Linux).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn readdir64(d: *mut libc::DIR) -> *mut libc::dirent64 {
    crate::guarded(|| {
        if ours(d) {
            return with_stream(d, next);
        }
        // SAFETY: the caller's arguments, passed unchanged to the real `readdir64`, whose contract the caller met in calling it.
        unsafe { real::readdir64(d) }
    })
}
alias!(readdir => readdir64(d: *mut libc::DIR) -> *mut libc::dirent64);
/// # Safety
/// As `readdir_r(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn readdir64_r(
    d: *mut libc::DIR,
    entry: *mut libc::dirent64,
    result: *mut *mut libc::dirent64,
) -> c_int {
    crate::guarded(|| {
        // SAFETY: the caller's buffers.
        unsafe {
            let e = readdir64(d);
            if e.is_null() {
                *result = std::ptr::null_mut();
            } else {
                entry.copy_from_nonoverlapping(e, 1);
                *result = entry;
            }
        }
        0
    })
}
alias!(readdir_r => readdir64_r(d: *mut libc::DIR, entry: *mut libc::dirent64, result: *mut *mut libc::dirent64) -> c_int);

/// # Safety
/// As `closedir(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn closedir(d: *mut libc::DIR) -> c_int {
    if ours(d) {
        let s = table().dirs.remove(&(d as usize));
        DIR_STREAMS.fetch_sub(1, Ordering::Relaxed);
        let fd = s.map_or(-1, |s| s.fd);
        return match desc(fd) {
            Some(dd) => run(|| close_tessera(fd, dd).map(|()| 0)),
            None => 0,
        };
    }
    // SAFETY: the caller's arguments, passed unchanged to the real `closedir`, whose contract the caller met in calling it.
    unsafe { real::closedir(d) }
}
/// # Safety
/// As `dirfd(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dirfd(d: *mut libc::DIR) -> c_int {
    crate::guarded(|| {
        if ours(d) {
            return with_stream(d, |s| s.fd);
        }
        // SAFETY: the caller's arguments, passed unchanged to the real `dirfd`, whose contract the caller met in calling it.
        unsafe { real::dirfd(d) }
    })
}
/// # Safety
/// As `rewinddir(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rewinddir(d: *mut libc::DIR) {
    crate::guarded(|| {
        if ours(d) {
            return with_stream(d, |s| s.pos = 0);
        }
        // SAFETY: the caller's arguments, passed unchanged to the real `rewinddir`, whose contract the caller met in calling it.
        unsafe { real::rewinddir(d) }
    })
}
/// # Safety
/// As `telldir(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn telldir(d: *mut libc::DIR) -> c_long {
    crate::guarded(|| {
        if ours(d) {
            return with_stream(d, |s| s.pos as c_long);
        }
        // SAFETY: the caller's arguments, passed unchanged to the real `telldir`, whose contract the caller met in calling it.
        unsafe { real::telldir(d) }
    })
}
/// # Safety
/// As `seekdir(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn seekdir(d: *mut libc::DIR, pos: c_long) {
    crate::guarded(|| {
        if ours(d) {
            return with_stream(d, |s| s.pos = pos.max(0) as usize);
        }
        // SAFETY: the caller's arguments, passed unchanged to the real `seekdir`, whose contract the caller met in calling it.
        unsafe { real::seekdir(d, pos) }
    })
}
