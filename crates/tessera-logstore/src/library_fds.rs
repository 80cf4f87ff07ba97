//! The descriptors the library holds (its connection to the daemon, its logs, the views of
//! other processes' logs, the PFS directory), kept out of the way of the program it serves.
//!
//! A program places its own descriptors where it likes: a shell's `exec 5> file` is a `dup2`
//! onto 5, whatever was there; `close` loops and `close_range` clean up before an `exec`. A
//! descriptor of the library at that number would silently become the program's file: the
//! library's writes land in it, and the program's file is the library's log. So:
//!
//! * every descriptor the library keeps is a [`Held`]: opened, then moved to a number at or
//!   above [`base`] (half the descriptor limit, at most 512: programs place theirs low), and
//!   recorded here, in a bitmap that the interposer tests on every `dup2`, `dup3`, `close`,
//!   `close_range` and `fcntl` of the program;
//! * [`relocate`] moves a held descriptor to another number (under its lock, so no library
//!   call is using it meanwhile) so that the program's `dup2` onto the old one can proceed;
//!   the library's object follows it, since it reaches its descriptor through the record;
//! * [`disown`] forgets a descriptor the library inherited across `fork`: the child's program
//!   owns its descriptor table, and the library, which drops the parent's state there, then
//!   never closes a number the program reused.
//!
//! A held descriptor is only used through [`Held::get`], which holds its lock for the call.

use rustix::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, OnceLock, Weak};
use tessera_core::{Errno, FsError, FsResult};

/// The process's soft limit on open descriptors (`u64::MAX` if unlimited or unknown).
pub fn descriptor_limit() -> u64 {
    rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(u64::MAX)
}

/// The lowest number the library's descriptors take: half the descriptor limit, at most
/// 512, so that the program keeps the lower half (shells use 0 to 255) and the library the
/// upper.
pub fn base() -> i32 {
    static BASE: OnceLock<i32> = OnceLock::new();
    *BASE.get_or_init(|| base_for(descriptor_limit()))
}

fn base_for(limit: u64) -> i32 {
    (limit / 2).clamp(3, 512) as i32
}

/// One bit per descriptor below 65536: whether the library holds it.
static BITS: [AtomicU64; 1024] = [const { AtomicU64::new(0) }; 1024];
/// Held descriptors at or above 65536 (then the record is asked).
static HIGH: AtomicUsize = AtomicUsize::new(0);

/// A held descriptor as recorded: its slot, and the process that made it (after `fork`, the
/// child has a copy of the record, and of the descriptor, that is not its library's).
struct Entry {
    slot: Weak<Slot>,
    pid: u32,
}

/// Descriptor number -> the [`Held`] that holds it.
static RECORD: LazyLock<Mutex<HashMap<RawFd, Entry>>> = LazyLock::new(Default::default);

fn record() -> MutexGuard<'static, HashMap<RawFd, Entry>> {
    RECORD.lock().unwrap_or_else(|p| p.into_inner())
}

fn entry(slot: &Arc<Slot>) -> Entry {
    Entry {
        slot: Arc::downgrade(slot),
        pid: std::process::id(),
    }
}

/// Whether descriptor `fd` is held by the library of this process (`false` for one this
/// process inherited across `fork` from its parent's library).
pub fn held_here(fd: RawFd) -> bool {
    record()
        .get(&fd)
        .is_some_and(|e| e.pid == std::process::id())
}

fn mark(fd: RawFd, held: bool) {
    match usize::try_from(fd) {
        Ok(n) if n < BITS.len() * 64 => {
            let bit = 1u64 << (n % 64);
            if held {
                BITS[n / 64].fetch_or(bit, Ordering::SeqCst);
            } else {
                BITS[n / 64].fetch_and(!bit, Ordering::SeqCst);
            }
        }
        Ok(_) if held => {
            HIGH.fetch_add(1, Ordering::SeqCst);
        }
        Ok(_) => {
            HIGH.fetch_sub(1, Ordering::SeqCst);
        }
        Err(_) => {}
    }
}

/// Whether the library holds descriptor `fd` (one bit test below 65536).
pub fn is_library(fd: RawFd) -> bool {
    match usize::try_from(fd) {
        Ok(n) if n < BITS.len() * 64 => BITS[n / 64].load(Ordering::SeqCst) & (1 << (n % 64)) != 0,
        Ok(_) => HIGH.load(Ordering::SeqCst) > 0 && record().contains_key(&fd),
        Err(_) => false,
    }
}

/// The library's descriptors, lowest first (for tests and messages).
pub fn held() -> Vec<RawFd> {
    let mut all: Vec<RawFd> = record().keys().copied().collect();
    all.sort_unstable();
    all
}

/// A number at or above `at_least`, never `avoid`, for a copy of `fd` (close-on-exec).
fn dup_above(fd: BorrowedFd<'_>, at_least: RawFd, avoid: Option<RawFd>) -> FsResult<OwnedFd> {
    let copy = rustix::io::fcntl_dupfd_cloexec(fd, at_least).map_err(|e| {
        FsError::new(
            Errno::MFile,
            format!(
                "no descriptor is free at or above {at_least} for Tessera's own files ({e}); raise the descriptor limit (ulimit -n)"
            ),
        )
    })?;
    if Some(copy.as_raw_fd()) == avoid {
        // Only when `avoid` was free: it is not (it is the one being moved), so this cannot
        // happen; a second copy would take another number anyway.
        return dup_above(fd, at_least, None);
    }
    Ok(copy)
}

/// What a held descriptor can be: a file or a socket the library uses through `&T`.
pub trait Descriptor: AsFd + From<OwnedFd> + Into<OwnedFd> + Send + 'static {}
impl<T: AsFd + From<OwnedFd> + Into<OwnedFd> + Send + 'static> Descriptor for T {}

/// The slot a [`Held`] keeps its descriptor in; the record points to it, so that
/// [`relocate`] can put the moved descriptor in its place.
type Slot = Mutex<Option<Box<dyn Movable>>>;

/// A held descriptor of some type, as the record sees it.
trait Movable: Send {
    fn fd(&self) -> BorrowedFd<'_>;
    /// Puts `moved` in place of this descriptor, which is forgotten (left open).
    fn replace_with(&mut self, moved: OwnedFd);
    fn as_any(&self) -> &dyn std::any::Any;
    /// Gives the descriptor up: `close` closes it, else it is forgotten (left open).
    fn give_up(self: Box<Self>, close: bool);
    /// The descriptor, as the type it was made with.
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any>;
}

struct Of<T>(Option<T>);

impl<T: Descriptor> Movable for Of<T> {
    fn fd(&self) -> BorrowedFd<'_> {
        self.0.as_ref().expect("held").as_fd()
    }
    fn replace_with(&mut self, moved: OwnedFd) {
        let old = self.0.replace(T::from(moved));
        std::mem::forget(old);
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self.0.as_ref().expect("held")
    }
    fn into_any(mut self: Box<Self>) -> Box<dyn std::any::Any> {
        Box::new(self.0.take().expect("held"))
    }
    fn give_up(mut self: Box<Self>, close: bool) {
        let fd = self.0.take();
        if close {
            drop(fd);
        } else {
            std::mem::forget(fd);
        }
    }
}

/// A descriptor the library keeps, at a number out of the program's way and recorded as the
/// library's. Reach it with [`Held::get`].
pub struct Held<T> {
    slot: Arc<Slot>,
    _kind: std::marker::PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for Held<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let guard = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        let raw = guard.as_ref().map(|m| m.fd().as_raw_fd());
        write!(f, "Held({raw:?})")
    }
}

/// A held descriptor in use: the library's call holds it, so it cannot move meanwhile.
pub struct InUse<'a, T> {
    guard: MutexGuard<'a, Option<Box<dyn Movable>>>,
    _kind: std::marker::PhantomData<&'a T>,
}

impl<T: 'static> std::ops::Deref for InUse<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.guard
            .as_ref()
            .expect("held until dropped")
            .as_any()
            .downcast_ref::<T>()
            .expect("the type it was made with")
    }
}

impl<T: Descriptor> Held<T> {
    /// Takes `fd` for the library: moved to a number at or above [`base`] (its original
    /// closed) and recorded. `EMFILE` if no number is free there.
    pub fn new(fd: impl Into<OwnedFd>) -> FsResult<Held<T>> {
        let fd: OwnedFd = fd.into();
        let fd = if fd.as_raw_fd() >= base() {
            fd
        } else {
            dup_above(fd.as_fd(), base(), None)?
        };
        let raw = fd.as_raw_fd();
        let held: Box<dyn Movable> = Box::new(Of(Some(T::from(fd))));
        let slot = Arc::new(Mutex::new(Some(held)));
        record().insert(raw, entry(&slot));
        mark(raw, true);
        Ok(Held {
            slot,
            _kind: std::marker::PhantomData,
        })
    }

    /// The descriptor, locked for the caller's use.
    pub fn get(&self) -> InUse<'_, T> {
        InUse {
            guard: self.slot.lock().unwrap_or_else(|p| p.into_inner()),
            _kind: std::marker::PhantomData,
        }
    }

    /// Its number now (it may move: for messages and tests).
    pub fn raw(&self) -> RawFd {
        self.get().as_fd().as_raw_fd()
    }

    /// The descriptor, no longer held (for a process whose descriptors no program places:
    /// the daemon).
    pub fn into_inner(self) -> T {
        let held = self
            .slot
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .expect("held until dropped");
        let raw = held.fd().as_raw_fd();
        if record().remove(&raw).is_some() {
            mark(raw, false);
        }
        *held
            .into_any()
            .downcast::<T>()
            .expect("the type it was made with")
    }

    /// A second descriptor of the same open file, held likewise.
    pub fn try_clone(&self) -> FsResult<Held<T>> {
        let copy = dup_above(self.get().as_fd(), base(), None)?;
        Held::new(copy)
    }
}

impl<T> Drop for Held<T> {
    fn drop(&mut self) {
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        let Some(held) = slot.take() else { return };
        let raw = held.fd().as_raw_fd();
        let mut rec = record();
        let ours = rec
            .get(&raw)
            .and_then(|e| e.slot.upgrade())
            .is_some_and(|s| Arc::ptr_eq(&s, &self.slot));
        if ours {
            rec.remove(&raw);
            mark(raw, false);
        }
        drop(rec);
        // Disowned: the number is the program's now, and stays open.
        held.give_up(ours);
    }
}

/// Moves the library's descriptor `fd` to another free number (at or above [`base`] if one
/// is free there, else any other), waiting for the library call that uses it to end; returns
/// the new number. The old number stays open on the same file until the caller's `dup2` or
/// `dup3` replaces it, so no other thread can take it in between. `None` if `fd` is not the
/// library's.
pub fn relocate(fd: RawFd) -> Option<FsResult<RawFd>> {
    let slot = record().get(&fd).and_then(|e| e.slot.upgrade())?;
    let mut guard = slot.lock().unwrap_or_else(|p| p.into_inner());
    let held = guard.as_mut()?;
    if held.fd().as_raw_fd() != fd {
        return None;
    }
    let moved =
        dup_above(held.fd(), base(), Some(fd)).or_else(|_| dup_above(held.fd(), 0, Some(fd)));
    let moved = match moved {
        Ok(m) => m,
        Err(e) => return Some(Err(e)),
    };
    let new = moved.as_raw_fd();
    // The old number is left open for the caller's dup2 to replace atomically.
    held.replace_with(moved);
    let mut rec = record();
    rec.remove(&fd);
    rec.insert(new, entry(&slot));
    mark(fd, false);
    mark(new, true);
    Some(Ok(new))
}

/// Forgets that the library holds `fd` (in a child of `fork`, whose program now uses the
/// number): the library's object never closes it, and no longer uses it.
pub fn disown(fd: RawFd) {
    if record().remove(&fd).is_some() {
        mark(fd, false);
    }
}

thread_local! {
    /// The record, held across `fork` by the forking thread (see [`before_fork`]).
    static HELD_ACROSS_FORK: std::cell::RefCell<Option<MutexGuard<'static, HashMap<RawFd, Entry>>>> =
        const { std::cell::RefCell::new(None) };
}

/// Before `fork` (a `pthread_atfork` prepare handler): takes the record, so that no other
/// thread holds it in the child, where nobody would release it.
pub fn before_fork() {
    let guard = record();
    HELD_ACROSS_FORK.with(|h| *h.borrow_mut() = Some(guard));
}

/// After `fork`, in the parent and in the child: gives the record back.
pub fn after_fork() {
    HELD_ACROSS_FORK.with(|h| drop(h.borrow_mut().take()));
}

/// Convenience: a file the library keeps.
pub type HeldFile = Held<std::fs::File>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::FileExt;

    fn tmpfile(bytes: &[u8]) -> std::fs::File {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(bytes).unwrap();
        f
    }

    /// Where descriptor `fd` of this process leads (`None`: not open).
    fn target(fd: RawFd) -> Option<std::path::PathBuf> {
        std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()
    }

    #[test]
    fn the_library_takes_the_upper_half() {
        assert_eq!(base_for(64), 32);
        assert_eq!(base_for(1024), 512);
        assert_eq!(base_for(1 << 20), 512);
        assert_eq!(base_for(4), 3);
        let h: HeldFile = Held::new(tmpfile(b"x")).unwrap();
        assert!(h.raw() >= base());
        assert!(is_library(h.raw()));
        let flags = rustix::io::fcntl_getfd(h.get().as_fd()).unwrap();
        assert!(flags.contains(rustix::io::FdFlags::CLOEXEC));
    }

    #[test]
    fn a_relocated_descriptor_follows_its_holder() {
        let h: HeldFile = Held::new(tmpfile(b"library bytes")).unwrap();
        let old = h.raw();
        let file = target(old).unwrap();
        let new = relocate(old).unwrap().unwrap();
        assert_ne!(new, old);
        assert!(!is_library(old) && is_library(new));
        assert_eq!(h.raw(), new);
        assert_eq!(target(new).unwrap(), file);
        assert_eq!(
            target(old).unwrap(),
            file,
            "left open for the program's dup2 to replace"
        );
        let mut buf = [0u8; 13];
        h.get().read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"library bytes");
        drop(h);
        assert!(!is_library(new));
        assert_eq!(relocate(old), None, "not the library's");
    }

    #[test]
    fn a_disowned_descriptor_is_never_closed_by_the_library() {
        let h: HeldFile = Held::new(tmpfile(b"x")).unwrap();
        let fd = h.raw();
        let file = target(fd).unwrap();
        disown(fd);
        assert!(!is_library(fd));
        drop(h);
        assert_eq!(target(fd), Some(file), "left open for the program");
    }

    #[test]
    fn clones_are_held_too() {
        let h: HeldFile = Held::new(tmpfile(b"abc")).unwrap();
        let c = h.try_clone().unwrap();
        assert_ne!(c.raw(), h.raw());
        assert!(is_library(c.raw()) && is_library(h.raw()));
        assert!(held().contains(&c.raw()));
        let mut b = [0u8; 3];
        c.get().read_exact_at(&mut b, 0).unwrap();
        assert_eq!(&b, b"abc");
    }
}
