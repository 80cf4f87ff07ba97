//! Process state of the interposer: the connection, the mount prefix, and the table of
//! Tessera descriptors, directory streams and stdio streams.
//!
//! A Tessera descriptor is a real kernel descriptor (a placeholder: for a file, a write-only
//! open of an empty sealed memory file; for a directory or an `O_PATH` open, an `O_PATH` open
//! of `/dev/null`) whose number this table maps to a Tessera open file description, so its
//! number can never collide with a descriptor the kernel hands out, and a call the interposer
//! does not handle fails on the placeholder (`EBADF`, or `EPERM` for a write) instead of
//! touching some other file. `dup` shares the description (offset and status flags), as
//! POSIX says.
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
    /// The file position, unless `shared`.
    pub pos: u64,
    /// Whether the position lives in the kernel open file description of the placeholder,
    /// where other processes that hold it (after `fork` or `exec`) see it move: see
    /// [`crate::inherit`].
    pub shared: bool,
    /// The device and inode of the placeholder's memory file (a file's descriptors, in this
    /// process or another, are found by it).
    pub placeholder: Option<(u64, u64)>,
}

impl Desc {
    /// The file position, as seen through descriptor `fd` of this description.
    pub fn position(&self, fd: i32) -> u64 {
        if !self.shared {
            return self.pos;
        }
        // SAFETY: a plain call on a descriptor number; a shared placeholder is seekable.
        let p = unsafe { real::lseek64(fd, 0, libc::SEEK_CUR) };
        u64::try_from(p).unwrap_or(self.pos)
    }

    /// Moves the file position, for every process that shares it.
    pub fn set_position(&mut self, fd: i32, pos: u64) {
        self.pos = pos;
        if self.shared
            && let Ok(p) = libc::off_t::try_from(pos)
        {
            // SAFETY: as in `position`.
            unsafe { real::lseek64(fd, p, libc::SEEK_SET) };
        }
    }
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
/// In a `vfork` child (which shares this process's memory until it execs or exits) every
/// descriptor is the kernel's: its `dup2` and `close` must not change the parent's table.
pub fn desc(fd: i32) -> Option<DescRef> {
    let d = lookup(fd)?;
    if busy() || in_vfork_child() {
        return None;
    }
    Some(d)
}

/// The process this memory belongs to (0 until the library is loaded).
static OWNER: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// Records the calling process as the owner of this memory: when the library is loaded,
/// and in the child of every `fork` (whose handlers a `vfork` does not run).
pub fn own_memory() {
    // SAFETY: getpid has no preconditions.
    OWNER.store(unsafe { libc::getpid() }, Ordering::Relaxed);
}

/// Whether this is a `vfork` child, running in its parent's memory. A process that is not
/// the memory's owner is one, unless the kernel says its memory is its own: a child of a
/// fork that ran no fork handlers (`_Fork`, a raw `clone`), which becomes the owner.
pub fn in_vfork_child() -> bool {
    let owner = OWNER.load(Ordering::Relaxed);
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    if owner == 0 || owner == me {
        return false;
    }
    const KCMP_VM: libc::c_long = 1;
    // SAFETY: kcmp compares two processes' address spaces; it reads nothing of ours.
    let same = unsafe {
        libc::syscall(
            libc::SYS_kcmp,
            me as libc::c_long,
            owner as libc::c_long,
            KCMP_VM,
            0,
            0,
        )
    };
    let gone = std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
    if same > 0 || (same < 0 && gone) {
        OWNER.store(me, Ordering::Relaxed);
        return false;
    }
    // Shared memory, or no answer (kcmp unavailable): act as a vfork child, which is safe.
    true
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

/// Reserves a kernel descriptor number for a Tessera file: a write-only open of an empty,
/// sealed memory file, so reads that reach it past the interposer fail with `EBADF` and
/// writes with `EPERM`, while its kernel file position can hold the description's position
/// for every process that inherits it (see [`crate::inherit`]). Where no memory file can be
/// made, an `O_PATH` placeholder (whose position stays private to this process). Returns the
/// descriptor and, for a memory file, its identity (see [`Desc::placeholder`]).
pub fn file_placeholder(cloexec: bool) -> FsResult<(i32, Option<(u64, u64)>)> {
    let flags = libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING;
    // SAFETY: a NUL-terminated name and plain flags.
    let m = unsafe { libc::memfd_create(c"tessera-fd".as_ptr(), flags) };
    if m < 0 {
        return Ok((placeholder(cloexec)?, None));
    }
    let seals = libc::F_SEAL_GROW | libc::F_SEAL_SHRINK | libc::F_SEAL_WRITE | libc::F_SEAL_SEAL;
    // SAFETY: our own descriptor and plain arguments.
    let sealed = unsafe { real::fcntl(m, libc::F_ADD_SEALS, seals as libc::c_ulong) } == 0;
    let mut buf = *b"/proc/self/fd/\0\0\0\0\0\0\0\0\0\0\0\0";
    let digits = m.to_string();
    buf[14..14 + digits.len()].copy_from_slice(digits.as_bytes());
    let mode = libc::O_WRONLY | if cloexec { libc::O_CLOEXEC } else { 0 };
    let w = if sealed {
        // SAFETY: `buf` is NUL-terminated (a descriptor number has at most 10 digits).
        unsafe { real::open(buf.as_ptr().cast(), mode, 0) }
    } else {
        -1
    };
    // SAFETY: our own descriptor (`w` is another open of its file).
    unsafe { real::close(m) };
    match (w >= 0).then(|| identity(w)).flatten() {
        Some(id) => Ok((w, Some(id))),
        None => {
            if w >= 0 {
                // SAFETY: our own descriptor.
                unsafe { real::close(w) };
            }
            Ok((placeholder(cloexec)?, None))
        }
    }
}

/// The device and inode of the file a kernel descriptor is open on.
pub fn identity(fd: i32) -> Option<(u64, u64)> {
    // SAFETY: plain data, filled by fstat.
    let mut st: libc::stat64 = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a writable stat buffer.
    (unsafe { real::fstat64(fd, &mut st) } == 0).then_some((st.st_dev, st.st_ino))
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

/// The Tessera descriptors with numbers in `first..=last`, lowest first.
pub fn tessera_fds_in(first: u32, last: u32) -> Vec<(i32, DescRef)> {
    let t = table();
    let mut found: Vec<(i32, DescRef)> = t
        .fds
        .iter()
        .filter(|(fd, _)| u32::try_from(**fd).is_ok_and(|n| (first..=last).contains(&n)))
        .map(|(fd, d)| (*fd, d.clone()))
        .collect();
    found.sort_unstable_by_key(|(fd, _)| *fd);
    found
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

static CLIENT: Mutex<Option<Client>> = Mutex::new(None);

/// The process's connection, if it made one, without waiting (`None` if another thread is
/// making it).
pub fn connected_client() -> Option<Client> {
    match CLIENT.try_lock() {
        Ok(g) => g.clone(),
        Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner().clone(),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

/// Whether the process has reached Tessera (made its connection) at some point.
static USED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether the process has used Tessera: a lock-free test, for paths as hot as `vfork`.
pub fn used_tessera() -> bool {
    USED.load(std::sync::atomic::Ordering::Relaxed)
}

/// The process's connection, made at the first Tessera call (and again if it failed).
pub fn client() -> FsResult<Client> {
    let mut g = CLIENT.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(c) = g.as_ref() {
        return Ok(c.clone());
    }
    let c = Client::from_env()?;
    *g = Some(c.clone());
    USED.store(true, std::sync::atomic::Ordering::Relaxed);
    Ok(c)
}
