//! Tessera descriptors across `fork` and `exec`, as the kernel's own: a shell's
//! `cmd > /tessera/x` hands an external `cmd` a descriptor that keeps working in it, and
//! processes that hold one description share its file position (`{ echo a; /bin/echo b; } >
//! /tessera/f` keeps both lines).
//!
//! The position: a Tessera file's placeholder is a write-only open of an empty, sealed
//! memory file (see [`state::file_placeholder`]), whose kernel file position every process
//! that holds the placeholder shares. The position lives in the description while only this
//! process holds it; before the process forks or starts a program it moves into the kernel
//! ([`Desc::shared`]). A `vfork` child that starts a program moves it for its parent too: they
//! share the description's memory and the placeholder.
//!
//! The descriptors: a child may have moved or closed them since the table last saw them (a
//! `vfork` child's `dup2` and `close` leave its parent's table alone, and `close_range` is not
//! seen at all), so before a program starts, the kernel's descriptors (`/proc/self/fd`) are
//! matched to the open Tessera files by their placeholder's identity.
//!
//! The file: a new program's interposer cannot see the old one's table, so the table of
//! inherited descriptors travels in `TESSERA_FDS` (in every environment an exec call passes,
//! and in the process's own for `system`, `popen` and the exec calls that use it): per
//! descriptor its number, the memory file's identity (device and inode, so a number that was
//! closed or reused meanwhile is left alone), its status flags and its path. When the library
//! is loaded it opens each such file again (without `O_CREAT` or `O_TRUNC`: the first open
//! did what they ask) and binds it to the inherited descriptors; standard streams on them
//! become Tessera streams. Before a program replaces this one, what this one wrote to Tessera
//! is published, so the new program's writes land after it.

use crate::real;
use crate::state::{self, Busy, Desc, DescRef, Object};
use libc::c_int;
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::{Arc, Mutex};
use tessera_client::posix::OpenIntent;
use tessera_client::{FsError, FsResult, OpenOptions};
use tessera_core::inherited_fds::InheritedFd;

/// The environment variable that carries the inherited descriptors across exec.
pub const FDS_VAR: &str = "TESSERA_FDS";

/// An open Tessera file of this process with the kernel descriptors that hold its
/// placeholder now.
struct Held {
    desc: DescRef,
    fds: Vec<c_int>,
}

/// The process's open Tessera files that have a memory-file placeholder, each with the
/// kernel descriptors holding it; with `wait` false, none if another thread holds the table,
/// and without the files another thread is using.
fn held(wait: bool) -> Vec<Held> {
    let descs: Vec<DescRef> = {
        let t = if wait {
            state::table()
        } else {
            match state::try_table() {
                Some(t) => t,
                None => return Vec::new(),
            }
        };
        let mut seen = std::collections::HashSet::new();
        t.fds
            .values()
            .filter(|d| seen.insert(Arc::as_ptr(d)))
            .cloned()
            .collect()
    };
    let mut by_placeholder: HashMap<(u64, u64), Held> = HashMap::new();
    for d in descs {
        let id = match wait {
            true => placeholder_of(&state::lock_desc(&d)),
            false => d.try_lock().ok().and_then(|g| placeholder_of(&g)),
        };
        if let Some(id) = id {
            by_placeholder.insert(
                id,
                Held {
                    desc: d,
                    fds: Vec::new(),
                },
            );
        }
    }
    if by_placeholder.is_empty() {
        return Vec::new();
    }
    for fd in kernel_fds() {
        if let Some(h) = state::identity(fd).and_then(|id| by_placeholder.get_mut(&id)) {
            h.fds.push(fd);
        }
    }
    by_placeholder
        .into_values()
        .filter(|h| !h.fds.is_empty())
        .collect()
}

fn placeholder_of(d: &Desc) -> Option<(u64, u64)> {
    matches!(d.obj, Object::File(_))
        .then_some(d.placeholder)
        .flatten()
}

/// The process's open kernel descriptors.
fn kernel_fds() -> Vec<c_int> {
    let _b = Busy::enter();
    match std::fs::read_dir("/proc/self/fd") {
        Ok(dir) => dir
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Moves a file's position into the kernel open file description of its placeholder: from
/// now on the position is the kernel's, shared with the processes that hold it too.
fn share(h: &Held) -> std::io::Result<()> {
    let mut g = state::lock_desc(&h.desc);
    if g.shared {
        return Ok(());
    }
    let at = libc::off_t::try_from(g.pos).unwrap_or(libc::off_t::MAX);
    // SAFETY: a plain call on a descriptor that holds the placeholder.
    if unsafe { real::lseek64(h.fds[0], at, libc::SEEK_SET) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    g.shared = true;
    Ok(())
}

/// Before `fork` or a new program: every open Tessera file's position moves into the kernel.
pub fn share_all() {
    share_files(true);
}

/// As [`share_all`]; with `wait` false (before `fork`, which must not wait for another
/// thread), files another thread is using keep a private position.
fn share_files(wait: bool) -> Vec<Held> {
    if state::busy() {
        return Vec::new();
    }
    let _b = Busy::enter();
    let files = held(wait);
    for h in &files {
        if let Err(e) = share(h) {
            crate::report(&FsError::io(
                "sharing a Tessera file's position with a new process",
                &e,
            ));
        }
    }
    files
}

/// `TESSERA_FDS=...` for a new program, after [`share_all`]: this process's Tessera files on
/// the descriptors that do not close on exec.
pub fn fds_entry() -> Option<CString> {
    let files = share_files(true);
    let _b = Busy::enter();
    let mut entries = Vec::new();
    for h in files {
        let g = state::lock_desc(&h.desc);
        let Some((dev, ino)) = g.placeholder.filter(|_| g.shared) else {
            continue;
        };
        for fd in h.fds {
            // SAFETY: a plain call on a descriptor number.
            if unsafe { real::fcntl(fd, libc::F_GETFD, 0) } & libc::FD_CLOEXEC != 0 {
                continue;
            }
            let flags = g.flags;
            let path = g.path.clone();
            entries.push(
                InheritedFd {
                    fd,
                    dev,
                    ino,
                    flags,
                    path,
                }
                .encode(),
            );
        }
    }
    (!entries.is_empty())
        .then(|| CString::new(format!("{FDS_VAR}={}", entries.join(","))).ok())
        .flatten()
}

/// Sets `TESSERA_FDS` in the process's own environment (for `system`, `popen` and the exec
/// calls that pass `environ`), or removes it when there is nothing to pass.
pub fn refresh_environment() {
    let entry = fds_entry();
    let _b = Busy::enter();
    match entry {
        Some(e) => {
            let value = &e.as_bytes()[FDS_VAR.len() + 1..];
            if let Ok(v) = CString::new(value) {
                // SAFETY: both strings are NUL-terminated; setenv copies them.
                unsafe { libc::setenv(c"TESSERA_FDS".as_ptr(), v.as_ptr(), 1) };
            }
        }
        // SAFETY: a NUL-terminated name.
        None => unsafe {
            libc::unsetenv(c"TESSERA_FDS".as_ptr());
        },
    }
}

/// Before this process becomes another program: what it wrote is published.
pub fn before_exec() {
    crate::exit::publish_open_files();
}

/// Registers the fork handlers and takes the descriptors a parent left, when the library is
/// loaded.
#[used]
#[unsafe(link_section = ".init_array")]
static INHERIT: extern "C" fn() = at_load;

extern "C" fn at_load() {
    state::own_memory();
    // SAFETY: registers plain functions.
    unsafe { libc::pthread_atfork(Some(before_fork), None, Some(in_fork_child)) };
    let _ = std::panic::catch_unwind(take_inherited);
}

/// Before `fork`: the child and the parent will share every Tessera file's position.
extern "C" fn before_fork() {
    let _ = std::panic::catch_unwind(|| share_files(false));
}

/// In the child of `fork`: its memory is its own.
extern "C" fn in_fork_child() {
    state::own_memory();
}

/// Binds the descriptors `TESSERA_FDS` names (those still open on their memory file) to
/// their files, opened again.
fn take_inherited() {
    let var = {
        let _b = Busy::enter();
        std::env::var(FDS_VAR).ok()
    };
    let Some(var) = var else {
        return;
    };
    // Descriptors of one placeholder share one description.
    let mut by_file: HashMap<(u64, u64), (InheritedFd, Vec<c_int>)> = HashMap::new();
    for e in InheritedFd::decode_all(&var) {
        let _b = Busy::enter();
        if state::identity(e.fd) != Some((e.dev, e.ino)) {
            continue;
        }
        let fd = e.fd;
        by_file
            .entry((e.dev, e.ino))
            .or_insert_with(|| (e, Vec::new()))
            .1
            .push(fd);
    }
    for (e, fds) in by_file.into_values() {
        let opened = {
            let _b = Busy::enter();
            crate::caught(|| reopen(&e))
        };
        match opened {
            Ok(d) => {
                for fd in fds {
                    state::install(fd, d.clone());
                    crate::std_streams::after_change(fd, true);
                }
            }
            Err(e) => crate::report(&e),
        }
    }
}

/// The description of an inherited descriptor: its file opened again, its position the
/// placeholder's.
fn reopen(e: &InheritedFd) -> FsResult<DescRef> {
    let flags = e.flags & crate::files::STATUS_FLAGS;
    let intent = OpenIntent::from_flags(flags)?;
    let mut o = OpenOptions::from_intent(&intent, 0);
    o.model(state::model()?);
    let f = state::client()?.open(&e.path, &o)?;
    Ok(Arc::new(Mutex::new(Desc {
        path: e.path.clone(),
        obj: Object::File(Box::new(f)),
        flags,
        pos: 0,
        shared: true,
        placeholder: Some((e.dev, e.ino)),
    })))
}
