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
//! `vfork` child's `dup2`, `close` and `close_range` leave its parent's table alone, and
//! `posix_spawn` applies its file actions in the child), so descriptors are
//! found by their placeholder's identity among the kernel's (`/proc/self/fd`), never by
//! number.
//!
//! The file: a new program's interposer cannot see the old one's table, so the open Tessera
//! files travel in `TESSERA_FDS` (`tessera_core::inherited_fds`: per file its placeholder's
//! identity, its status flags and its path), in every environment an exec call passes, and
//! in the process's own while `system` or `popen` starts its shell. When the library is
//! loaded it takes the variable out of its environment, opens each file again (without
//! `O_CREAT` or `O_TRUNC`: the first open did what they ask) and binds it to the descriptors
//! that hold its placeholder; standard streams on them become Tessera streams. Before a
//! program replaces this one, what this one wrote to Tessera is published, so the new
//! program's writes land after it.
//!
//! Nothing here waits for a lock: in a forked child the thread that held it does not exist.
//! A file another thread is using at that moment keeps a private position, and is not passed
//! on (the new program's writes to it fail with `EPERM`, loudly).

use crate::real;
use crate::state::{self, Busy, Desc, DescRef, Object};
use libc::c_int;
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::{Arc, Mutex};
use tessera_client::posix::OpenIntent;
use tessera_client::{FsError, FsResult, OpenOptions};
use tessera_core::inherited_fds::InheritedFile;

/// The environment variable that carries the inherited descriptors across exec.
pub const FDS_VAR: &str = "TESSERA_FDS";

/// An open Tessera file of this process with the kernel descriptors that hold its
/// placeholder now.
struct Held {
    desc: DescRef,
    placeholder: (u64, u64),
    fds: Vec<c_int>,
}

/// The process's open Tessera files that have a memory-file placeholder, each with the
/// kernel descriptors holding it. Never waits: in a forked child the thread holding a lock
/// does not exist, so a file another thread is using right now (or all of them, if it holds
/// the table) is left out, and keeps a private position.
fn held() -> Vec<Held> {
    let descs: Vec<DescRef> = match state::try_table() {
        Some(t) => {
            let mut seen = std::collections::HashSet::new();
            t.fds
                .values()
                .filter(|d| seen.insert(Arc::as_ptr(d)))
                .cloned()
                .collect()
        }
        None => return Vec::new(),
    };
    let mut by_placeholder: HashMap<(u64, u64), Held> = HashMap::new();
    for d in descs {
        let id = d.try_lock().ok().and_then(|g| placeholder_of(&g));
        if let Some(id) = id {
            let held = Held {
                desc: d,
                placeholder: id,
                fds: Vec::new(),
            };
            by_placeholder.insert(id, held);
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
/// now on the position is the kernel's, shared with the processes that hold it too. Returns
/// the file as a new program inherits it, unless another thread is using it.
fn share(h: &Held) -> FsResult<Option<InheritedFile>> {
    let Ok(mut g) = h.desc.try_lock() else {
        return Ok(None);
    };
    if !g.shared {
        let at = libc::off_t::try_from(g.pos).unwrap_or(libc::off_t::MAX);
        // SAFETY: a plain call on a descriptor that holds the placeholder.
        if unsafe { real::lseek64(h.fds[0], at, libc::SEEK_SET) } < 0 {
            return Err(FsError::io(
                "sharing a Tessera file's position with a new process",
                &std::io::Error::last_os_error(),
            ));
        }
        g.shared = true;
    }
    let (dev, ino) = h.placeholder;
    Ok(Some(InheritedFile {
        dev,
        ino,
        flags: g.flags,
        path: g.path.clone(),
    }))
}

/// Before `fork` or a new program: every open Tessera file's position moves into the kernel.
/// Returns the files as a new program inherits them.
pub fn share_all() -> Vec<InheritedFile> {
    if state::busy() {
        return Vec::new();
    }
    let _b = Busy::enter();
    let mut files = Vec::new();
    for h in held() {
        match share(&h) {
            Ok(f) => files.extend(f),
            Err(e) => crate::report(&e),
        }
    }
    files
}

/// `TESSERA_FDS=...` for a new program: this process's open Tessera files, positions shared.
/// The new program binds those of its descriptors that still hold their placeholders.
pub fn fds_entry() -> Option<CString> {
    let files = share_all();
    let entries: Vec<String> = files.iter().map(InheritedFile::encode).collect();
    (!entries.is_empty())
        .then(|| CString::new(format!("{FDS_VAR}={}", entries.join(","))).ok())
        .flatten()
}

/// Runs `start` (`system`, `popen`) with `TESSERA_FDS` in the process's own environment,
/// which the program it starts inherits; the environment is as it was afterwards.
pub fn with_environment<T>(start: impl FnOnce() -> T) -> T {
    let entry = std::panic::catch_unwind(|| {
        crate::exit::publish_open_files();
        fds_entry()
    })
    .ok()
    .flatten();
    let Some(e) = entry else {
        return start();
    };
    let value = &e.as_bytes()[FDS_VAR.len() + 1..];
    let Ok(v) = CString::new(value) else {
        return start();
    };
    {
        let _b = Busy::enter();
        // SAFETY: both strings are NUL-terminated; setenv copies them.
        unsafe { libc::setenv(c"TESSERA_FDS".as_ptr(), v.as_ptr(), 1) };
    }
    let r = start();
    let _b = Busy::enter();
    // SAFETY: a NUL-terminated name.
    unsafe { libc::unsetenv(c"TESSERA_FDS".as_ptr()) };
    r
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
    unsafe { libc::pthread_atfork(Some(before_fork), Some(in_fork_parent), Some(in_fork_child)) };
    let _ = std::panic::catch_unwind(take_inherited);
}

/// Before `fork`: the child and the parent will share every Tessera file's position; the
/// record of the library's descriptors is held across the fork (no other thread holds it in
/// the child).
extern "C" fn before_fork() {
    let _ = std::panic::catch_unwind(share_all);
    let _ = std::panic::catch_unwind(tessera_client::library_fds::before_fork);
}

/// In the parent after `fork`.
extern "C" fn in_fork_parent() {
    let _ = std::panic::catch_unwind(tessera_client::library_fds::after_fork);
}

/// In the child of `fork`: its memory is its own.
extern "C" fn in_fork_child() {
    let _ = std::panic::catch_unwind(tessera_client::library_fds::after_fork);
    state::own_memory();
}

/// Binds the descriptors that hold the placeholders `TESSERA_FDS` names to their files,
/// opened again, and takes the variable out of the environment (it described the parent).
fn take_inherited() {
    let var = {
        let _b = Busy::enter();
        let var = std::env::var(FDS_VAR).ok();
        // SAFETY: a NUL-terminated name; the library is being loaded, before the program's
        // threads.
        unsafe { libc::unsetenv(c"TESSERA_FDS".as_ptr()) };
        var
    };
    let Some(var) = var else {
        return;
    };
    let mut by_placeholder: HashMap<(u64, u64), (InheritedFile, Vec<c_int>)> =
        InheritedFile::decode_all(&var)
            .into_iter()
            .map(|f| ((f.dev, f.ino), (f, Vec::new())))
            .collect();
    {
        let _b = Busy::enter();
        for fd in kernel_fds() {
            if let Some((_, fds)) = state::identity(fd).and_then(|id| by_placeholder.get_mut(&id)) {
                fds.push(fd);
            }
        }
    }
    for (file, fds) in by_placeholder.into_values() {
        if fds.is_empty() {
            continue;
        }
        let opened = {
            let _b = Busy::enter();
            crate::caught(|| reopen(&file))
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
fn reopen(e: &InheritedFile) -> FsResult<DescRef> {
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
