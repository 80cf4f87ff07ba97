//! Opening and closing: `open` and its other names, `openat`, `creat`, `close`.

use super::*;
use crate::state::{self, Busy, Desc, DescRef, Object, client, desc};
use crate::{real, run, tessera_path};
use libc::{c_char, c_int, c_uint};
use std::sync::{Arc, Mutex};
use tessera_client::posix::OpenIntent;
use tessera_client::{Errno, FileKind, FsError, FsResult, OpenOptions};

pub fn umask() -> u32 {
    // SAFETY: umask only swaps the process mask; it is restored at once.
    unsafe {
        let m = libc::umask(0o022);
        libc::umask(m);
        m
    }
}

/// Opens a Tessera path and returns the new descriptor.
pub fn open_path(path: &str, flags: c_int, mode: u32) -> FsResult<c_int> {
    let intent = OpenIntent::from_flags(flags)?;
    let c = client()?;
    let mut opened = path.to_string();
    let obj = if intent.directory || intent.path_only {
        let a = if flags & libc::O_NOFOLLOW != 0 {
            c.stat(path)?
        } else {
            // Where links lead: a directory is listed, and *at calls resolve, there.
            let (to, a) = c.follow(path)?;
            opened = to;
            a
        };
        match a.kind {
            FileKind::Dir => Object::Dir,
            FileKind::File | FileKind::Symlink if intent.directory => {
                return Err(FsError::new(
                    Errno::NotDir,
                    format!("{path} is not a directory"),
                ));
            }
            FileKind::File | FileKind::Symlink => Object::Path,
        }
    } else {
        let mut o = OpenOptions::from_intent(&intent, mode & !umask());
        o.model(state::model()?);
        if flags & libc::O_NOFOLLOW != 0 && c.stat(path).is_ok_and(|a| a.kind == FileKind::Symlink)
        {
            return Err(FsError::new(
                Errno::Loop,
                format!("{path} is a symbolic link and O_NOFOLLOW was given"),
            ));
        }
        match c.open(path, &o) {
            Ok(mut f) => {
                // Where PFS links led: fstat and the *at calls name the file itself.
                opened = f.user_path();
                if !intent.write && !intent.create && migrate_on_open() {
                    // An optimisation: a failed migration leaves the reads remote.
                    if let Err(e) = f.migrate_here() {
                        crate::report(&FsError::new(
                            e.errno,
                            format!(
                                "TESSERA_MIGRATE=open: {opened} stays where it is: {}",
                                e.message
                            ),
                        ));
                    }
                }
                Object::File(Box::new(f))
            }
            // Opening a directory read-only is how programs list it (opendir, fts).
            Err(e) if e.errno == Errno::IsDir && !intent.write && !intent.create => Object::Dir,
            Err(e) => return Err(e),
        }
    };
    let cloexec = flags & libc::O_CLOEXEC != 0;
    let (fd, placeholder) = match obj {
        Object::File(_) => state::file_placeholder(cloexec)?,
        _ => (state::placeholder(cloexec)?, None),
    };
    state::install(
        fd,
        Arc::new(Mutex::new(Desc {
            path: opened,
            obj,
            flags: flags & STATUS_FLAGS,
            pos: 0,
            shared: false,
            placeholder,
        })),
    );
    Ok(fd)
}

/// Whether opens for reading copy the file's remote bytes to this node first
/// (`TESSERA_MIGRATE=open`, FusionFS and Swift).
pub(crate) fn migrate_on_open() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| match std::env::var("TESSERA_MIGRATE") {
        Ok(v) if v == "open" => true,
        Ok(v) if v.is_empty() || v == "never" => false,
        Ok(v) => {
            // Said whatever TESSERA_VERBOSE says: a setting that does nothing is not routine.
            let _b = Busy::enter();
            eprintln!(
                "tessera: TESSERA_MIGRATE={v}: not a migration policy; use open (or never); files stay where they are"
            );
            false
        }
        Err(_) => false,
    })
}

/// # Safety
/// `path` is null or NUL-terminated.
pub unsafe fn open_impl(dirfd: c_int, path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
    // SAFETY: forwarded contract.
    match unsafe { tessera_path(dirfd, path) } {
        Some(p) => run(|| {
            let p = p?;
            open_path(&p, flags, mode)
        }),
        None => {
            // SAFETY: NUL-terminated or NULL by the caller's contract.
            let k = unsafe { crate::kernel_at(dirfd, path) };
            // SAFETY: libc's own call, with the caller's arguments (the path rewritten where
            // it named a real place through Tessera).
            unsafe { real::openat(dirfd, crate::at(&k, path), flags, mode) }
        }
    }
}

/// # Safety
/// As `open(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn open(path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
    // SAFETY: `path` is NULL or NUL-terminated per open(2), as `open_impl` requires; `flags` and
    // `mode` are ints passed through.
    unsafe { open_impl(libc::AT_FDCWD, path, flags, mode) }
}
/// # Safety
/// As `open(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn open64(path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
    // SAFETY: open64 has open(2)'s contract: `path` is NUL-terminated (or NULL), which is all
    // `open_impl` asks; the ints pass unchanged.
    unsafe { open_impl(libc::AT_FDCWD, path, flags, mode) }
}
alias!(__open => open(path: *const c_char, flags: c_int, mode: c_uint) -> c_int);
alias!(__open64 => open(path: *const c_char, flags: c_int, mode: c_uint) -> c_int);
alias!(openat => open_impl(dirfd: c_int, path: *const c_char, flags: c_int, mode: c_uint) -> c_int);
alias!(openat64 => open_impl(dirfd: c_int, path: *const c_char, flags: c_int, mode: c_uint) -> c_int);
/// # Safety
/// As `creat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn creat(path: *const c_char, mode: c_uint) -> c_int {
    crate::guarded(|| {
        // SAFETY: `path` is NULL or NUL-terminated per creat(2); `open_impl` only needs that,
        // and the flags are our fixed O_CREAT | O_WRONLY | O_TRUNC.
        unsafe {
            open_impl(
                libc::AT_FDCWD,
                path,
                libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC,
                mode,
            )
        }
    })
}
alias!(creat64 => creat(path: *const c_char, mode: c_uint) -> c_int);

/// Closes a Tessera descriptor: the last descriptor of a description closes the file
/// (publishing its writes); any close releases the process's locks on the file (POSIX).
pub fn close_tessera(fd: c_int, d: DescRef) -> FsResult<()> {
    state::uninstall(fd);
    // SAFETY: closing the placeholder this descriptor number held.
    unsafe { real::close(fd) };
    let unlocked = {
        let mut g = state::lock_desc(&d);
        match &mut g.obj {
            Object::File(f) if state::table().locked.remove(&f.ino()) => f.unlock(0, 0),
            _ => Ok(()),
        }
    };
    state::release(d).and(unlocked)
}

/// # Safety
/// As `close(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    if let Some(refused) = crate::library_fds::refuse(fd, "close") {
        return refused;
    }
    let r = match desc(fd) {
        Some(d) => run(|| close_tessera(fd, d).map(|()| 0)),
        // SAFETY: libc's close.
        None => unsafe { real::close(fd) },
    };
    // A failure always says why: never -1 with errno 0.
    if r < 0 && tessera_cabi::errno() == 0 {
        tessera_cabi::set_errno(libc::EIO);
    }
    r
}
