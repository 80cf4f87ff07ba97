//! Process state of the interposer: the connection, the mount prefix, and the table of
//! Tessera descriptors, directory streams and stdio streams.
//!
//! A Tessera descriptor is a real kernel descriptor (an `O_PATH` open of `/dev/null`) whose
//! number this table maps to a Tessera open file description, so its number can never collide
//! with a descriptor the kernel hands out, and a call the interposer does not handle fails on
//! the placeholder with `EBADF` instead of touching some other file. `dup` shares the
//! description (offset and status flags), as POSIX says.
//!
//! Calls made while the interposer is itself at work (the client library opening its logs,
//! writing to its socket) pass straight to libc: see [`Busy`].

use crate::real;
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, OnceLock};
use tessera_client::{Client, Errno, File, FsError, FsResult, InstanceLayout, Model};

thread_local! {
    static BUSY: Cell<bool> = const { Cell::new(false) };
}

/// Marks this thread as inside the interposer until dropped: every intercepted call it makes
/// meanwhile goes straight to libc.
pub struct Busy(bool);

impl Busy {
    pub fn enter() -> Busy {
        Busy(BUSY.with(|b| b.replace(true)))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let prev = self.0;
        BUSY.with(|b| b.set(prev));
    }
}

pub fn busy() -> bool {
    BUSY.with(|b| b.get())
}

/// What a Tessera descriptor refers to.
pub enum Object {
    File(Box<File>),
    Dir,
    /// An `O_PATH` descriptor of a file: it names the file (for fstat, *at calls) but
    /// cannot read or write it.
    Path,
}

/// An open file description.
pub struct Desc {
    /// The user's path (with the prefix), normalised.
    pub path: String,
    pub obj: Object,
    /// Status flags for F_GETFL (access mode, O_APPEND, O_NONBLOCK).
    pub flags: i32,
    pub pos: u64,
}

pub type DescRef = Arc<Mutex<Desc>>;

/// Locks a description (a panic elsewhere leaves it usable: its fields stay consistent).
pub fn lock_desc(d: &DescRef) -> MutexGuard<'_, Desc> {
    d.lock().unwrap_or_else(|p| p.into_inner())
}

/// A directory stream handed out as `DIR *`.
pub struct DirStream {
    pub fd: i32,
    pub entries: Vec<(std::ffi::CString, u64, u8)>,
    pub pos: usize,
    pub ent: libc::dirent64,
}

#[derive(Default)]
pub struct Table {
    pub fds: HashMap<i32, DescRef>,
    pub dirs: HashMap<usize, Box<DirStream>>,
    /// stdio streams of Tessera files: `FILE *` -> descriptor.
    pub streams: HashMap<usize, i32>,
    /// Inodes on which this process took byte-range locks (closing any descriptor of the file
    /// releases them, as POSIX says).
    pub locked: std::collections::HashSet<u64>,
}

static TABLE: LazyLock<Mutex<Table>> = LazyLock::new(Default::default);

/// One bit per descriptor below 65536: whether it is Tessera's. Lets every call on another
/// descriptor pass through without a lock.
static FD_BITS: [AtomicU64; 1024] = [const { AtomicU64::new(0) }; 1024];
/// Tessera descriptors at or above 65536 (then the table is consulted).
static HIGH_FDS: AtomicUsize = AtomicUsize::new(0);
pub static DIR_STREAMS: AtomicUsize = AtomicUsize::new(0);
pub static FILE_STREAMS: AtomicUsize = AtomicUsize::new(0);

pub fn table() -> MutexGuard<'static, Table> {
    TABLE.lock().unwrap_or_else(|p| p.into_inner())
}

/// The table, unless another thread holds it (for paths that must never wait: exit).
pub fn try_table() -> Option<MutexGuard<'static, Table>> {
    match TABLE.try_lock() {
        Ok(t) => Some(t),
        Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

fn mark(fd: i32, on: bool) {
    if (0..65536).contains(&fd) {
        let bit = 1u64 << (fd % 64);
        let w = &FD_BITS[fd as usize / 64];
        if on {
            w.fetch_or(bit, Ordering::Relaxed);
        } else {
            w.fetch_and(!bit, Ordering::Relaxed);
        }
    } else if fd >= 65536 {
        if on {
            HIGH_FDS.fetch_add(1, Ordering::Relaxed);
        } else {
            HIGH_FDS.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// The description behind `fd`, if it is a Tessera descriptor (and the call is not the
/// interposer's own). The bitmap test comes first: a call on any other descriptor costs a
/// load and a bit test, no thread-local access.
pub fn desc(fd: i32) -> Option<DescRef> {
    let d = lookup(fd)?;
    if busy() {
        return None;
    }
    Some(d)
}

/// Like [`desc`], also from inside the interposer.
pub fn lookup(fd: i32) -> Option<DescRef> {
    if fd < 0 {
        return None;
    }
    if fd < 65536 {
        if FD_BITS[fd as usize / 64].load(Ordering::Relaxed) & (1 << (fd % 64)) == 0 {
            return None;
        }
    } else if HIGH_FDS.load(Ordering::Relaxed) == 0 {
        return None;
    }
    table().fds.get(&fd).cloned()
}

/// Reserves a kernel descriptor number for a Tessera description; `cloexec` is the caller's
/// O_CLOEXEC, kept on the placeholder where F_GETFD and F_SETFD find it.
pub fn placeholder(cloexec: bool) -> FsResult<i32> {
    let flags = libc::O_PATH | if cloexec { libc::O_CLOEXEC } else { 0 };
    // SAFETY: a NUL-terminated path and plain flags.
    let fd = unsafe { real::open(c"/dev/null".as_ptr(), flags, 0) };
    if fd < 0 {
        return Err(FsError::io(
            "reserving a descriptor for a Tessera file",
            &std::io::Error::last_os_error(),
        ));
    }
    Ok(fd)
}

/// Binds descriptor `fd` (a placeholder) to a description.
pub fn install(fd: i32, d: DescRef) {
    let old = table().fds.insert(fd, d);
    if old.is_none() {
        mark(fd, true);
    }
    if let Some(old) = old
        && let Err(e) = release(old)
    {
        crate::report(&e);
    }
}

/// Unbinds `fd`; the description closes when its last descriptor goes. Does not close the
/// kernel placeholder.
pub fn uninstall(fd: i32) -> Option<DescRef> {
    let d = table().fds.remove(&fd);
    if d.is_some() {
        mark(fd, false);
    }
    d
}

/// Drops one reference to a description: the last one closes the Tessera file (publishing
/// its writes, as close does in every model).
pub fn release(d: DescRef) -> FsResult<()> {
    if let Ok(m) = Arc::try_unwrap(d) {
        let desc = m.into_inner().unwrap_or_else(|p| p.into_inner());
        if let Object::File(f) = desc.obj {
            return f.close();
        }
    }
    Ok(())
}

static CWD: Mutex<Option<String>> = Mutex::new(None);
/// Whether `CWD` is set: relative paths of a process that never entered Tessera are decided
/// without taking the lock.
static CWD_SET: AtomicBool = AtomicBool::new(false);

/// The working directory when it is inside Tessera (the kernel's is left where it was).
pub fn cwd() -> Option<String> {
    if !CWD_SET.load(Ordering::Acquire) {
        return None;
    }
    CWD.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Enters a Tessera directory (`Some`) or leaves Tessera (`None`).
pub fn set_cwd(dir: Option<String>) {
    let mut g = CWD.lock().unwrap_or_else(|p| p.into_inner());
    CWD_SET.store(dir.is_some(), Ordering::Release);
    *g = dir;
}

static PREFIX: OnceLock<String> = OnceLock::new();

/// The prefix for a path check: `None` while this thread is inside the interposer before the
/// prefix is known (its own calls, such as reading the instance's configuration to learn
/// the prefix, go to libc), so the fast path needs no thread-local access once it is known.
pub fn prefix_for_check() -> Option<&'static str> {
    match PREFIX.get() {
        Some(p) => Some(p),
        None if busy() => None,
        None => Some(prefix()),
    }
}

/// The mount prefix: `TESSERA_PREFIX`, else the instance's configured mount, else `/tessera`.
pub fn prefix() -> &'static str {
    PREFIX.get_or_init(|| {
        let _b = Busy::enter();
        if let Ok(p) = std::env::var("TESSERA_PREFIX") {
            return tessera_client::posix::lexical_normalize(&p);
        }
        InstanceLayout::from_env()
            .load_config()
            .map(|c| c.mount)
            .unwrap_or_else(|_| tessera_client::DEFAULT_MOUNT.to_string())
    })
}

/// The consistency model of interposed files: `TESSERA_MODEL`, session by default (read
/// once per process).
pub fn model() -> FsResult<Model> {
    static MODEL: OnceLock<FsResult<Model>> = OnceLock::new();
    MODEL
        .get_or_init(|| match std::env::var("TESSERA_MODEL") {
            Ok(m) => m.parse::<Model>().map_err(|e| {
                FsError::new(
                    Errno::Inval,
                    format!("TESSERA_MODEL={m}: {e}; use posix, commit, session or mpiio"),
                )
            }),
            Err(_) => Ok(Model::Session),
        })
        .clone()
}

/// The process's connection, made at the first Tessera call (and again if it failed).
pub fn client() -> FsResult<Client> {
    static CLIENT: Mutex<Option<Client>> = Mutex::new(None);
    let mut g = CLIENT.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(c) = g.as_ref() {
        return Ok(c.clone());
    }
    let c = Client::from_env()?;
    *g = Some(c.clone());
    Ok(c)
}
