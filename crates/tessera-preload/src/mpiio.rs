//! MPI-IO atomic mode on Tessera files, whichever MPI-IO implementation the program runs.
//!
//! `MPI_File_set_atomicity(fh, 1)` promises that each access is atomic (concurrent
//! overlapping accesses do not interleave, even for non-contiguous file views) and
//! sequentially consistent (a write is seen by another rank's read ordered after it by a
//! barrier alone, without `MPI_File_sync`). ROMIO keeps that promise with fcntl locks over each
//! access's extent, which Tessera's lock service honours. Open MPI's ompio (4.1) records the
//! flag and takes no lock on any file system except NFS, and it writes a non-contiguous view
//! as many separate `pwrite`s: on Tessera, whose writes become visible at synchronisation
//! points, its atomic mode would silently give neither property.
//!
//! So the interposer also wraps the MPI-IO data-access calls. For a file opened on a Tessera
//! path whose atomicity is on, each access runs under one lock of the run's [`Strategy`]: by
//! default a list lock of exactly the bytes the access touches (from the file view, see
//! [`crate::mpi_types`]), else a record lock over its extent or the whole file. Taking it makes
//! the process re-learn who owns what before it reads; releasing it publishes the process's
//! writes. Collective calls run as their independent forms (a lock held across a collective
//! would deadlock the ranks; ROMIO does the same in atomic mode). Non-blocking calls run as
//! their blocking forms and hand back a completed generalized request, so the lock is never
//! held past the call. A per-file mutex keeps the threads of one rank apart. Files elsewhere,
//! and Tessera files with atomicity off, pass straight through at the cost of one map lookup.
//!
//! Under a list lock, ROMIO's own extent locks are answered without locking while the access
//! runs (they would serialise the ranks again; the list lock covers every byte), and the
//! access's writes are clipped to its bytes, so a data-sieving write does not rewrite the
//! holes the list lock leaves to others (see [`crate::atomic_scope`]). Record locks (`extent`,
//! `whole`) are exclusive for reads too, as ROMIO's are: ROMIO's extent locks then nest inside
//! them, owned by the same process.
//!
//! The shared-pointer calls outside atomic mode, and the ordered calls in either mode (they are
//! collective, so never under a lock), publish a write when they return and re-learn the file
//! before a read (see [`shared_pointer_sync`]): what ranks write through the shared pointer is
//! seen by reads ordered after it by a barrier, as on a local disk.
//!
//! Not covered (they pass through unchanged): split collectives (`*_begin`/`*_end`) and MPI-4's
//! large-count `_c` forms (which Open MPI 4.1 does not have).
//!
//! MPI handles are passed as machine words: `MPI_Datatype`, `MPI_Comm`, `MPI_Info` and
//! `MPI_Request` are pointers in Open MPI and integers in MPICH (`MPI_File` is a pointer in
//! both), and on the x86-64 and AArch64 calling conventions either travels in one register,
//! so forwarding the word is exact for both.

use crate::state::{self, Busy, client};
use crate::{report, tessera_path};
use libc::{c_char, c_int, c_void};
use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};
use tessera_client::{File, FsResult, LockKind, LockRun, OpenOptions};
use tessera_core::file_view::FileView;

/// An MPI handle (`MPI_File`, `MPI_Datatype`, `MPI_Comm`, `MPI_Info`), forwarded as a word.
type Handle = usize;

/// What the interposer knows of an MPI file opened on a Tessera path.
struct MpiFile {
    /// The user's Tessera path.
    path: String,
    atomic: bool,
    /// A handle of the file used only to take the whole-file locks (opened at the first
    /// atomic access, closed with the MPI file).
    lock: Option<Arc<Mutex<File>>>,
    /// The flattened file view (`Some(None)`: one that cannot be followed), read at the first
    /// atomic access after `MPI_File_set_view`, which forgets it.
    view: Option<Option<Arc<FileView>>>,
}

fn files() -> MutexGuard<'static, HashMap<Handle, MpiFile>> {
    static FILES: LazyLock<Mutex<HashMap<Handle, MpiFile>>> = LazyLock::new(Default::default);
    FILES.lock().unwrap_or_else(|p| p.into_inner())
}

fn lock_file(f: &Mutex<File>) -> MutexGuard<'_, File> {
    f.lock().unwrap_or_else(|p| p.into_inner())
}

thread_local! {
    /// Set while a wrapper runs: MPI calls made inside it (a PMPI tool calling the PMPI_
    /// name, an implementation calling its own public names) pass straight through.
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// Marks this thread as inside a wrapper until dropped; `None` if it already was.
struct Inside;

impl Inside {
    fn enter() -> Option<Inside> {
        INSIDE.with(|c| (!c.replace(true)).then_some(Inside))
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        INSIDE.with(|c| c.set(false));
    }
}

/// Whether the MPI library is Open MPI (its handles are pointers, its error codes differ).
pub(crate) fn open_mpi() -> bool {
    static OMPI: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OMPI.get_or_init(|| crate::loaded::anywhere(c"ompi_mpi_comm_world").is_some())
}

/// `MPI_ERR_IO` of the running MPI library, returned when Tessera cannot take a lock.
fn mpi_err_io() -> c_int {
    if open_mpi() { 35 } else { 32 }
}

/// The Tessera path an `MPI_File_open` file name names, if any. ROMIO accepts a file-system
/// prefix (`ufs:/tessera/x`); it is dropped.
///
/// # Safety
/// `name` is null or NUL-terminated.
unsafe fn tessera_file(name: *const c_char) -> Option<String> {
    if name.is_null() {
        return None;
    }
    // SAFETY: NUL-terminated by the caller's contract.
    let bytes = unsafe { std::ffi::CStr::from_ptr(name) }.to_bytes();
    let bare = match bytes.iter().position(|&b| b == b':') {
        Some(i)
            if i > 1
                && bytes[..i]
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || *b == b'_') =>
        {
            &bytes[i + 1..]
        }
        _ => bytes,
    };
    let c = CString::new(bare).ok()?;
    // SAFETY: a NUL-terminated string.
    // A name Tessera refuses is left to the open that follows, which says why.
    unsafe { tessera_path(libc::AT_FDCWD, c.as_ptr()) }.and_then(Result::ok)
}

/// The lock handle of an atomic Tessera file (opened at its first access), or `None` for a
/// file the wrappers leave alone.
fn lock_handle(fh: Handle) -> FsResult<Option<Arc<Mutex<File>>>> {
    handle_of(fh, |f| f.atomic)
}

/// The wrappers' own handle of a Tessera file (opened at first use; it takes the atomic mode's
/// locks, and publishes and refreshes for the shared-pointer calls), or `None` for a file
/// elsewhere.
fn tessera_handle(fh: Handle) -> FsResult<Option<Arc<Mutex<File>>>> {
    handle_of(fh, |_| true)
}

/// The wrappers' handle of `fh` if it is a Tessera file that `wanted` accepts (one lookup of
/// the map, on every wrapped access).
fn handle_of(fh: Handle, wanted: impl Fn(&MpiFile) -> bool) -> FsResult<Option<Arc<Mutex<File>>>> {
    let _b = Busy::enter();
    let mut g = files();
    let Some(f) = g.get_mut(&fh).filter(|f| wanted(f)) else {
        return Ok(None);
    };
    if f.lock.is_none() {
        let mut o = OpenOptions::new();
        o.read(true).model(state::model()?);
        f.lock = Some(Arc::new(Mutex::new(client()?.open(&f.path, &o)?)));
    }
    Ok(f.lock.clone())
}

/// Shared-pointer and ordered accesses outside atomic mode, on Tessera files: a write is
/// published when the call returns, and a read first makes the process re-learn the file, so
/// that a read ordered after another rank's write by a barrier alone sees it. MPI asks for
/// `MPI_File_sync` in between; programs (ROMIO's shared_fp test among them) count on what a
/// local disk gives, and a shared file pointer is itself a promise of coordination. Returns
/// the MPI error of a failure.
fn shared_pointer_sync(fh: Handle, write: bool) -> Result<(), c_int> {
    let handle = match tessera_handle(fh) {
        Ok(None) => return Ok(()),
        Ok(Some(h)) => h,
        Err(e) => {
            let _b = Busy::enter();
            report(&e);
            return Err(mpi_err_io());
        }
    };
    let _b = Busy::enter();
    let mut f = lock_file(&handle);
    let done = if write {
        f.attach_file()
    } else {
        f.refresh();
        Ok(())
    };
    done.map_err(|e| {
        report(&e);
        mpi_err_io()
    })
}

/// How atomic accesses are locked: `TESSERA_ATOMIC_LOCKS=list|extent|whole|none`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// A list lock of exactly the bytes the access touches (shared for reads); ROMIO's own
    /// extent locks are elided and the access's writes clipped to its bytes.
    List,
    /// An exclusive record lock over the access's extent, holes included (ROMIO's way).
    Extent,
    /// An exclusive record lock over the whole file.
    Whole,
    /// No lock at all: atomic mode is not kept (for comparisons and the checker's control);
    /// ROMIO's extent locks are elided and writes clipped as under `List`.
    None,
}

/// The strategy of this run (an unknown value is reported once and `list` used).
pub fn strategy() -> Strategy {
    static S: std::sync::OnceLock<Strategy> = std::sync::OnceLock::new();
    *S.get_or_init(|| match std::env::var("TESSERA_ATOMIC_LOCKS").as_deref() {
        Err(_) | Ok("") | Ok("list") => Strategy::List,
        Ok("extent") => Strategy::Extent,
        Ok("whole") => Strategy::Whole,
        Ok("none") => Strategy::None,
        Ok(other) => {
            let _b = Busy::enter();
            report(&tessera_client::FsError::new(
                tessera_client::Errno::Inval,
                format!(
                    "TESSERA_ATOMIC_LOCKS={other} is not list, extent, whole or none; using list"
                ),
            ));
            Strategy::List
        }
    })
}

/// Where an access starts.
#[derive(Clone, Copy)]
enum At {
    /// An explicit offset, in etypes of the view.
    Offset(i64),
    /// The individual file pointer.
    Individual,
    /// The shared file pointer (its value is only known inside the call).
    Shared,
}

/// What an access does, for its lock.
#[derive(Clone, Copy)]
struct Access {
    write: bool,
    at: At,
    count: c_int,
    dt: Handle,
}

/// The file bytes the access touches, or `None` when they cannot be known (a shared file
/// pointer, a filetype the flattener does not follow).
fn exact_runs(fh: Handle, a: Access) -> Option<Vec<tessera_core::Run>> {
    let offset = match a.at {
        At::Offset(o) => u64::try_from(o).ok()?,
        At::Individual => crate::mpi_types::position(fh)?,
        At::Shared => return None,
    };
    let cached = {
        let _b = Busy::enter();
        files().get(&fh).and_then(|f| f.view.clone())
    };
    let view = match cached {
        Some(v) => v,
        None => {
            // Read outside `Busy` (MPI calls), then kept until the view changes.
            let v = crate::mpi_types::file_view(fh).map(Arc::new);
            let _b = Busy::enter();
            if let Some(f) = files().get_mut(&fh) {
                f.view = Some(v.clone());
            }
            v
        }
    }?;
    crate::mpi_types::access_runs(&view, offset, a.count, a.dt)
}

/// Runs `access` (the independent form of an MPI-IO call) under the lock of the run's
/// [`Strategy`] when the file is a Tessera file in atomic mode; returns `None` otherwise, for
/// the caller to forward the original call.
///
/// The handle's mutex, held from lock to unlock, keeps the threads of one rank apart (a record
/// lock belongs to the process). The map of files is not held meanwhile.
fn atomically(fh: Handle, a: Access, access: impl FnOnce() -> c_int) -> Option<c_int> {
    let handle = match lock_handle(fh) {
        Ok(None) => return None,
        Ok(Some(h)) => h,
        Err(e) => {
            let _b = Busy::enter();
            report(&e);
            return Some(mpi_err_io());
        }
    };
    let mut lock = lock_file(&handle);
    let fail = |e: &tessera_client::FsError| {
        let _b = Busy::enter();
        report(e);
        mpi_err_io()
    };
    let strategy = strategy();
    // Computed outside `Busy`: it calls MPI, which may call into the interposer.
    let runs = match strategy {
        Strategy::Whole => None,
        _ => exact_runs(fh, a),
    };
    if strategy == Strategy::None {
        trace_lock(a.write, &[], std::time::Duration::ZERO);
        return Some(crate::atomic_scope::within(runs, access));
    }
    let _b = Busy::enter();
    // The range of a record lock: the extent of the bytes, or (unknown, or `whole`) the file.
    let (start, len) = match &runs {
        Some(r) if !r.is_empty() && strategy == Strategy::Extent => {
            let lo = r.iter().map(|r| r.start).min().expect("non-empty");
            let hi = r.iter().map(|r| r.end()).max().expect("non-empty");
            (lo, hi - lo)
        }
        _ => (0, 0),
    };
    if strategy == Strategy::List {
        let kind = if a.write {
            LockKind::Exclusive
        } else {
            LockKind::Shared
        };
        let whole = vec![tessera_core::Run::single(
            0,
            tessera_core::run::MAX_FILE_SIZE,
        )];
        let runs = match runs {
            Some(r) if r.is_empty() => {
                drop(_b);
                return Some(access());
            }
            Some(r) => r,
            None => whole,
        };
        let scope = runs.clone();
        let list: Vec<LockRun> = runs.into_iter().map(|run| LockRun { run, kind }).collect();
        let asked = std::time::Instant::now();
        let held = match lock.lock_list(&list, true) {
            Ok(h) => h,
            Err(e) => return Some(fail(&e)),
        };
        trace_lock(a.write, &list, asked.elapsed());
        drop(_b);
        let rc = crate::atomic_scope::within(Some(scope), access);
        let _b = Busy::enter();
        return Some(match lock.unlock_list(held) {
            Ok(()) => rc,
            Err(e) => {
                let code = fail(&e);
                if rc == 0 { code } else { rc }
            }
        });
    }
    let asked = std::time::Instant::now();
    if let Err(e) = lock.lock(start, len, LockKind::Exclusive, true) {
        return Some(fail(&e));
    }
    let range = tessera_core::Run::single(
        start,
        if len == 0 {
            tessera_core::run::MAX_FILE_SIZE - start
        } else {
            len
        },
    );
    let taken = [LockRun {
        run: range,
        kind: LockKind::Exclusive,
    }];
    trace_lock(a.write, &taken, asked.elapsed());
    drop(_b);
    let rc = access();
    let _b = Busy::enter();
    if let Err(e) = lock.unlock(start, len) {
        report(&e);
        // Never leave the lock held for the other ranks to wait on: the handle closes when
        // the last reference goes (closing releases the process's locks on the file), and the
        // next access opens a new one.
        if let Some(f) = files().get_mut(&fh) {
            f.lock = None;
        }
        return Some(if rc == 0 { mpi_err_io() } else { rc });
    }
    Some(rc)
}

/// With `TESSERA_ATOMIC_TRACE`, writes the lock of each atomic access as one line,
/// `tessera atomic write|read: RUN RUN ... | pid=P wait_us=W`, a run as `start+len` or
/// `start+len/stride*count` (an exclusive record lock under `extent` and `whole`, nothing under
/// `none`), and the time it took to get it: what a user (or a test, or the benchmark) checks
/// the ranges against. `TESSERA_ATOMIC_TRACE=1` writes to stderr; a directory gets one file per
/// process, `atomic-<pid>.trace` (lines of many processes cannot interleave there).
fn trace_lock(write: bool, list: &[LockRun], waited: std::time::Duration) {
    /// Where the lines go: stderr (fd 2), a file of this process, or nowhere.
    static SINK: std::sync::OnceLock<Option<c_int>> = std::sync::OnceLock::new();
    let sink = *SINK.get_or_init(|| match std::env::var_os("TESSERA_ATOMIC_TRACE") {
        None => None,
        Some(v) if v == "1" => Some(2),
        Some(dir) => {
            let path =
                std::path::Path::new(&dir).join(format!("atomic-{}.trace", std::process::id()));
            let c = CString::new(path.into_os_string().into_encoded_bytes()).ok()?;
            // SAFETY: a NUL-terminated path; the descriptor stays open for the process's life.
            let fd = unsafe {
                crate::real::open(
                    c.as_ptr(),
                    libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND | libc::O_CLOEXEC,
                    0o644,
                )
            };
            (fd >= 0).then_some(fd)
        }
    });
    let Some(fd) = sink else {
        return;
    };
    let mut line = format!("tessera atomic {}:", if write { "write" } else { "read" });
    for r in list.iter().map(|l| l.run) {
        line += &if r.count == 1 {
            format!(" {}+{}", r.start, r.len)
        } else {
            format!(" {}+{}/{}*{}", r.start, r.len, r.stride, r.count)
        };
    }
    line += &format!(
        " | pid={} wait_us={}\n",
        std::process::id(),
        waited.as_micros()
    );
    // SAFETY: writing a buffer we own to a descriptor this module opened (or stderr).
    unsafe { libc::write(fd, line.as_ptr().cast(), line.len()) };
}

/// Hands back, for a non-blocking call that already ran as its blocking form, a request that
/// is complete: an MPI generalized request whose status reports the elements transferred. The
/// program waits on it (or tests it) as on any request.
///
/// # Safety
/// `status` is the blocking call's status, `req` the program's request pointer.
unsafe fn completed_request(dt: Handle, status: &[u64; 16], req: *mut c_void) -> c_int {
    /// What the query function reports: the datatype and its number of basic elements.
    struct Done {
        dt: Handle,
        elements: c_int,
    }
    unsafe extern "C" fn query(extra: *mut c_void, status: *mut c_void) -> c_int {
        crate::guarded(|| {
            // SAFETY: `extra` is the `Done` given to MPI_Grequest_start below.
            let d = unsafe { &*(extra as *const Done) };
            let set = next!(PMPI_Status_set_elements: fn(*mut c_void, Handle, c_int) -> c_int);
            let cancelled = next!(PMPI_Status_set_cancelled: fn(*mut c_void, c_int) -> c_int);
            // SAFETY: the status MPI passes; the datatype the program passed.
            unsafe {
                cancelled(status, 0);
                set(status, d.dt, d.elements)
            }
        })
    }
    unsafe extern "C" fn free(extra: *mut c_void) -> c_int {
        crate::guarded(|| {
            // SAFETY: the box given to MPI_Grequest_start, freed once by MPI.
            drop(unsafe { Box::from_raw(extra as *mut Done) });
            0
        })
    }
    unsafe extern "C" fn cancel(_extra: *mut c_void, _complete: c_int) -> c_int {
        crate::guarded(|| 0)
    }
    type Query = unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int;
    type Free = unsafe extern "C" fn(*mut c_void) -> c_int;
    type Cancel = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;
    let get_elements = next!(PMPI_Get_elements: fn(*const c_void, Handle, *mut c_int) -> c_int);
    let start =
        next!(PMPI_Grequest_start: fn(Query, Free, Cancel, *mut c_void, *mut c_void) -> c_int);
    let complete = next!(PMPI_Grequest_complete: fn(Handle) -> c_int);
    let mut elements: c_int = 0;
    // SAFETY: MPI calls with the program's datatype and pointers to live values.
    unsafe {
        let rc = get_elements(status.as_ptr().cast(), dt, &mut elements);
        if rc != 0 {
            return rc;
        }
        let extra = Box::into_raw(Box::new(Done { dt, elements })).cast::<c_void>();
        let rc = start(query, free, cancel, extra, req);
        if rc != 0 {
            drop(Box::from_raw(extra as *mut Done));
            return rc;
        }
        // A request is a pointer in Open MPI, an int in MPICH.
        let handle = if open_mpi() {
            *(req as *const usize)
        } else {
            *(req as *const u32) as usize
        };
        complete(handle)
    }
}

/// Defines a data-access wrapper under its MPI_ and PMPI_ names:
/// `access!(SHAPE RW NAME, PNAME, INDEP, PINDEP)`, where RW is `write` or `read` and INDEP is
/// the blocking independent form the access runs as in atomic mode. Shapes: `at` (fh, offset,
/// buf, count, datatype, status), `ptr` (fh, buf, count, datatype, status; the individual file
/// pointer, or the shared one for a name with `shared`), `iat` and `iptr` (the same with a
/// request in place of the status).
macro_rules! access {
    (at $rw:ident $name:ident, $pname:ident, $indep:ident, $pindep:ident) => {
        access!(@each [$name, $pname] @blocking $indep, $rw, at(off), [count, dt],
            (fh: Handle, off: i64, buf: *mut c_void, count: c_int, dt: Handle, st: *mut c_void),
            (Handle, i64, *mut c_void, c_int, Handle, *mut c_void), (fh, off, buf, count, dt, st));
    };
    (ptr $rw:ident $name:ident, $pname:ident, $indep:ident, $pindep:ident) => {
        access!(@each [$name, $pname] @blocking $indep, $rw, ptr($name), [count, dt],
            (fh: Handle, buf: *mut c_void, count: c_int, dt: Handle, st: *mut c_void),
            (Handle, *mut c_void, c_int, Handle, *mut c_void), (fh, buf, count, dt, st));
    };
    (iat $rw:ident $name:ident, $pname:ident, $indep:ident, $pindep:ident) => {
        access!(@each [$name, $pname] @nonblocking $indep, $rw, at(off), [count, dt],
            (fh: Handle, off: i64, buf: *mut c_void, count: c_int, dt: Handle, rq: *mut c_void),
            (Handle, i64, *mut c_void, c_int, Handle, *mut c_void), (fh, off, buf, count, dt), rq);
    };
    (iptr $rw:ident $name:ident, $pname:ident, $indep:ident, $pindep:ident) => {
        access!(@each [$name, $pname] @nonblocking $indep, $rw, ptr($name), [count, dt],
            (fh: Handle, buf: *mut c_void, count: c_int, dt: Handle, rq: *mut c_void),
            (Handle, *mut c_void, c_int, Handle, *mut c_void), (fh, buf, count, dt), rq);
    };
    (@each [$first:ident $(, $more:ident)*] $($rest:tt)*) => {
        access!(@one $first $($rest)*);
        access!(@each [$($more),*] $($rest)*);
    };
    (@each [] $($rest:tt)*) => {};
    (@one $sym:ident @blocking $indep:ident, $rw:ident, $at:ident($p:ident), [$n:ident, $dt:ident],
     ($($arg:ident : $ty:ty),*), ($($fty:ty),*), ($fh:ident $(, $call:ident)*)) => {
        access!(@wrap $sym, $rw, $at($p), [$n, $dt], ($($arg: $ty),*), ($($fty),*), $fh, ($fh $(, $call)*), {
            let f = next!($indep: fn($($fty),*) -> c_int);
            // SAFETY: forwarding the caller's arguments.
            unsafe { f($fh $(, $call)*) }
        });
    };
    (@one $sym:ident @nonblocking $indep:ident, $rw:ident, $at:ident($p:ident), [$n:ident, $dt:ident],
     ($($arg:ident : $ty:ty),*), ($($fty:ty),*), ($fh:ident $(, $call:ident)*), $rq:ident) => {
        access!(@wrap $sym, $rw, $at($p), [$n, $dt], ($($arg: $ty),*), ($($fty),*), $fh, ($fh $(, $call)*, $rq), {
            // The blocking form, with a status of our own where the request was.
            let f = next!($indep: fn($($fty),*) -> c_int);
            let mut status = [0u64; 16];
            // SAFETY: the caller's arguments and a status larger than any MPI_Status.
            let rc = unsafe { f($fh $(, $call)*, status.as_mut_ptr().cast()) };
            if rc != 0 {
                return rc;
            }
            // SAFETY: the caller's datatype and request pointer.
            unsafe { completed_request($dt, &status, $rq) }
        });
    };
    (@at at($off:ident)) => { At::Offset($off) };
    (@at ptr($name:ident)) => {
        if stringify!($name).contains("shared") { At::Shared } else { At::Individual }
    };
    (@rw write) => { true };
    (@rw read) => { false };
    // The entry point: `$atomic` in atomic mode (under the lock), else the call forwarded.
    (@wrap $sym:ident, $rw:ident, $at:ident($p:ident), [$n:ident, $dt:ident],
     ($($arg:ident : $ty:ty),*), ($($fty:ty),*),
     $fh:ident, ($($fwd:ident),*), $atomic:block) => {
        #[doc = concat!("`", stringify!($sym), "`: atomic on Tessera files in atomic mode (see the module docs).")]
        ///
        /// # Safety
        /// As the MPI function.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $sym($($arg: $ty),*) -> c_int {
            // Whether this is a shared-pointer access outside atomic mode (and a write).
            let mut shared = None;
            if let Some(_in) = Inside::enter() {
                let a = Access {
                    write: access!(@rw $rw),
                    at: access!(@at $at($p)),
                    count: $n,
                    dt: $dt,
                };
                if let Some(rc) = atomically($fh, a, || $atomic) {
                    return rc;
                }
                if matches!(a.at, At::Shared) {
                    shared = Some(a.write);
                }
            }
            let f = next!($sym: fn($($fty),*) -> c_int);
            forward_shared($fh, shared, || {
                // SAFETY: forwarding the caller's arguments.
                unsafe { f($($fwd),*) }
            })
        }
    };
}

/// Runs a forwarded access; for a shared-pointer one (`shared`: whether it writes), with the
/// publication or refresh of [`shared_pointer_sync`] around it.
fn forward_shared(fh: Handle, shared: Option<bool>, call: impl FnOnce() -> c_int) -> c_int {
    if shared == Some(false)
        && let Err(rc) = shared_pointer_sync(fh, false)
    {
        return rc;
    }
    let rc = call();
    if rc == 0
        && shared == Some(true)
        && let Err(e) = shared_pointer_sync(fh, true)
    {
        return e;
    }
    rc
}

/// Defines the MPI_ and PMPI_ names of an ordered call (collective, on the shared pointer in
/// rank order): never under a lock (it is collective), published and refreshed as the
/// shared-pointer calls are outside atomic mode, in either mode.
macro_rules! ordered {
    ($rw:ident $name:ident, $pname:ident) => {
        ordered!(@one $rw $name);
        ordered!(@one $rw $pname);
    };
    (@one $rw:ident $sym:ident) => {
        #[doc = concat!("`", stringify!($sym), "`: published or refreshed on Tessera files (see [`shared_pointer_sync`]).")]
        ///
        /// # Safety
        /// As the MPI function.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $sym(
            fh: Handle,
            buf: *mut c_void,
            count: c_int,
            dt: Handle,
            status: *mut c_void,
        ) -> c_int {
            let shared = Inside::enter().map(|_| access!(@rw $rw));
            let f = next!($sym: fn(Handle, *mut c_void, c_int, Handle, *mut c_void) -> c_int);
            forward_shared(fh, shared, || {
                // SAFETY: forwarding the caller's arguments.
                unsafe { f(fh, buf, count, dt, status) }
            })
        }
    };
}

ordered!(write MPI_File_write_ordered, PMPI_File_write_ordered);
ordered!(read MPI_File_read_ordered, PMPI_File_read_ordered);

access!(at write MPI_File_write_at, PMPI_File_write_at, MPI_File_write_at, PMPI_File_write_at);
access!(at write MPI_File_write_at_all, PMPI_File_write_at_all, MPI_File_write_at, PMPI_File_write_at);
access!(ptr write MPI_File_write, PMPI_File_write, MPI_File_write, PMPI_File_write);
access!(ptr write MPI_File_write_all, PMPI_File_write_all, MPI_File_write, PMPI_File_write);
access!(ptr write MPI_File_write_shared, PMPI_File_write_shared, MPI_File_write_shared, PMPI_File_write_shared);
access!(at read MPI_File_read_at, PMPI_File_read_at, MPI_File_read_at, PMPI_File_read_at);
access!(at read MPI_File_read_at_all, PMPI_File_read_at_all, MPI_File_read_at, PMPI_File_read_at);
access!(ptr read MPI_File_read, PMPI_File_read, MPI_File_read, PMPI_File_read);
access!(ptr read MPI_File_read_all, PMPI_File_read_all, MPI_File_read, PMPI_File_read);
access!(ptr read MPI_File_read_shared, PMPI_File_read_shared, MPI_File_read_shared, PMPI_File_read_shared);
access!(iat write MPI_File_iwrite_at, PMPI_File_iwrite_at, MPI_File_write_at, PMPI_File_write_at);
access!(iat write MPI_File_iwrite_at_all, PMPI_File_iwrite_at_all, MPI_File_write_at, PMPI_File_write_at);
access!(iptr write MPI_File_iwrite, PMPI_File_iwrite, MPI_File_write, PMPI_File_write);
access!(iptr write MPI_File_iwrite_all, PMPI_File_iwrite_all, MPI_File_write, PMPI_File_write);
access!(iptr write MPI_File_iwrite_shared, PMPI_File_iwrite_shared, MPI_File_write_shared, PMPI_File_write_shared);
access!(iat read MPI_File_iread_at, PMPI_File_iread_at, MPI_File_read_at, PMPI_File_read_at);
access!(iat read MPI_File_iread_at_all, PMPI_File_iread_at_all, MPI_File_read_at, PMPI_File_read_at);
access!(iptr read MPI_File_iread, PMPI_File_iread, MPI_File_read, PMPI_File_read);
access!(iptr read MPI_File_iread_all, PMPI_File_iread_all, MPI_File_read, PMPI_File_read);
access!(iptr read MPI_File_iread_shared, PMPI_File_iread_shared, MPI_File_read_shared, PMPI_File_read_shared);

/// `MPI_File_open`: remembers files opened on Tessera paths.
///
/// # Safety
/// As the MPI function.
unsafe fn file_open(
    next: unsafe extern "C" fn(Handle, *const c_char, c_int, Handle, *mut Handle) -> c_int,
    comm: Handle,
    name: *const c_char,
    amode: c_int,
    info: Handle,
    fh: *mut Handle,
) -> c_int {
    let inside = Inside::enter();
    // SAFETY: the name the caller passed.
    let path = inside.as_ref().and_then(|_| unsafe { tessera_file(name) });
    // SAFETY: forwarding the caller's arguments.
    let rc = unsafe { next(comm, name, amode, info, fh) };
    // `path` is only known inside the outermost wrapper.
    if let Some(path) = path
        && rc == 0
        && !fh.is_null()
    {
        let _b = Busy::enter();
        files().insert(
            // SAFETY: non-null (checked above) and just written by MPI.
            unsafe { *fh },
            MpiFile {
                path,
                atomic: false,
                lock: None,
                view: None,
            },
        );
    }
    drop(inside);
    rc
}

/// `MPI_File_close`: forgets the file once it is closed (its lock handle closes, releasing
/// any lock).
///
/// # Safety
/// As the MPI function.
unsafe fn file_close(next: unsafe extern "C" fn(*mut Handle) -> c_int, fh: *mut Handle) -> c_int {
    let inside = Inside::enter();
    // The handle before MPI resets it to MPI_FILE_NULL.
    // SAFETY: the caller's file handle pointer.
    let key = (!fh.is_null()).then(|| unsafe { *fh });
    // SAFETY: forwarding the caller's argument.
    let rc = unsafe { next(fh) };
    if let (Some(_), Some(key), 0) = (inside, key, rc) {
        let _b = Busy::enter();
        let gone = files().remove(&key);
        drop(gone);
    }
    rc
}

/// `MPI_File_set_atomicity`: records the mode of Tessera files.
///
/// # Safety
/// As the MPI function.
unsafe fn set_atomicity(
    next: unsafe extern "C" fn(Handle, c_int) -> c_int,
    fh: Handle,
    flag: c_int,
) -> c_int {
    let inside = Inside::enter();
    // SAFETY: forwarding the caller's arguments.
    let rc = unsafe { next(fh, flag) };
    if inside.is_some() && rc == 0 {
        let _b = Busy::enter();
        if let Some(f) = files().get_mut(&fh) {
            f.atomic = flag != 0;
        }
    }
    rc
}

/// `MPI_File_set_view`: forgets the flattened view of a Tessera file.
///
/// # Safety
/// As the MPI function.
unsafe fn set_view(
    next: unsafe extern "C" fn(Handle, i64, Handle, Handle, *const c_char, Handle) -> c_int,
    fh: Handle,
    disp: i64,
    etype: Handle,
    filetype: Handle,
    datarep: *const c_char,
    info: Handle,
) -> c_int {
    let inside = Inside::enter();
    // SAFETY: forwarding the caller's arguments.
    let rc = unsafe { next(fh, disp, etype, filetype, datarep, info) };
    if inside.is_some() && rc == 0 {
        let _b = Busy::enter();
        if let Some(f) = files().get_mut(&fh) {
            f.view = None;
        }
    }
    rc
}

/// Defines the MPI_ and PMPI_ names of a file-management wrapper.
macro_rules! manage {
    ($name:ident, $pname:ident, $imp:ident, ($($arg:ident : $ty:ty),*)) => {
        manage!(@one $name, $imp, ($($arg: $ty),*));
        manage!(@one $pname, $imp, ($($arg: $ty),*));
    };
    (@one $sym:ident, $imp:ident, ($($arg:ident : $ty:ty),*)) => {
        #[doc = concat!("`", stringify!($sym), "` (see the module docs).")]
        ///
        /// # Safety
        /// As the MPI function.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $sym($($arg: $ty),*) -> c_int {
            let next = next!($sym: fn($($ty),*) -> c_int);
            // SAFETY: `next` is `$sym`'s next definition, typed with this exact signature;
            // pointer args (`name`, `fh`, `datarep`) are the MPI caller's, as `$imp` requires.
            unsafe { $imp(next, $($arg),*) }
        }
    };
}

manage!(MPI_File_open, PMPI_File_open, file_open,
    (comm: Handle, name: *const c_char, amode: c_int, info: Handle, fh: *mut Handle));
manage!(MPI_File_close, PMPI_File_close, file_close, (fh: *mut Handle));
manage!(MPI_File_set_atomicity, PMPI_File_set_atomicity, set_atomicity, (fh: Handle, flag: c_int));
manage!(MPI_File_set_view, PMPI_File_set_view, set_view,
    (fh: Handle, disp: i64, etype: Handle, filetype: Handle, datarep: *const c_char, info: Handle));
