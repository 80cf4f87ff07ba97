//! The invalidation board: counters a daemon bumps and its clients read, in a sealed memfd.
//!
//! Layout (little-endian, version [`VERSION`]): a 64-byte header, then `slots` 8-byte
//! counters.
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 8 | magic `TSRBOARD` |
//! | 8 | 4 | version |
//! | 12 | 4 | slots |
//! | 16 | 8 | generation (bumped to invalidate every slot at once) |
//! | 24 | 40 | reserved, zero |
//! | 64 | 8 × slots | one epoch per slot |
//!
//! The daemon creates the region as a memfd, maps it read-write, and then seals it against
//! growing, shrinking and any later writable mapping: a client can map it only read-only, so
//! no client can write garbage into it or cut it under the daemon (which would fault on its
//! next write). Clients open it through `/proc/<daemon pid>/fd/<fd>`, which the kernel allows
//! only to processes of the daemon's own user.
//!
//! A child made by `fork` inherits the parent's read-only mapping, which stays correct: the
//! counters are the daemon's, not the process's.

use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{MemfdFlags, Mode, OFlags, SealFlags};
use rustix::mm::{MapFlags, ProtFlags};
use std::ffi::c_void;
use std::path::Path;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

/// The first eight bytes of a board.
pub const MAGIC: [u8; 8] = *b"TSRBOARD";
/// The layout version written at offset 8.
pub const VERSION: u32 = 1;
/// Bytes before the first slot.
pub const HEADER_BYTES: usize = 64;
/// The largest board a client accepts (16 Mi slots, 128 MiB).
const MAX_SLOTS: u32 = 1 << 24;

/// Why a board could not be made or opened.
#[derive(Debug)]
pub enum BoardError {
    Io(std::io::Error),
    /// The region is not a board of this version.
    Layout(String),
}

impl std::fmt::Display for BoardError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BoardError::Io(e) => write!(f, "{e}"),
            BoardError::Layout(why) => write!(f, "not an invalidation board: {why}"),
        }
    }
}

impl std::error::Error for BoardError {}

impl From<rustix::io::Errno> for BoardError {
    fn from(e: rustix::io::Errno) -> Self {
        BoardError::Io(e.into())
    }
}

/// A mapped board: read-write for the daemon that made it, read-only for its clients.
pub struct Board {
    /// The start of the mapping, `len` bytes long, aligned to a page.
    base: NonNull<u8>,
    len: usize,
    slots: u32,
    /// The maker's descriptor, for clients to open; a reader keeps none (the mapping
    /// outlives it), so a program that closes every descriptor, as a child does before
    /// `exec`, closes nothing of ours.
    fd: Option<OwnedFd>,
    writable: bool,
}

// SAFETY: the mapping is shared memory that is only ever accessed through atomics, and the
// struct owns it until drop; moving or sharing the handle across threads is sound.
unsafe impl Send for Board {}
// SAFETY: as above; every access is an atomic load or read-modify-write.
unsafe impl Sync for Board {}

fn bytes_for(slots: u32) -> usize {
    HEADER_BYTES + 8 * slots as usize
}

impl Board {
    /// Makes a board of `slots` counters, all zero, sealed so that only this mapping can
    /// write it.
    pub fn create(slots: u32) -> Result<Board, BoardError> {
        if slots == 0 || slots > MAX_SLOTS {
            return Err(BoardError::Layout(format!(
                "{slots} slots; a board has 1 to {MAX_SLOTS}"
            )));
        }
        let fd = rustix::fs::memfd_create(
            "tessera-board",
            MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
        )?;
        let len = bytes_for(slots);
        rustix::fs::ftruncate(&fd, len as u64)?;
        let base = map(&fd, len, true)?;
        let board = Board {
            base,
            len,
            slots,
            fd: Some(fd),
            writable: true,
        };
        board.header_bytes_mut(|h| {
            h[0..8].copy_from_slice(&MAGIC);
            h[8..12].copy_from_slice(&VERSION.to_le_bytes());
            h[12..16].copy_from_slice(&slots.to_le_bytes());
        });
        // After the header is written: from here on no new writable mapping can be made, and
        // the size is fixed, so the daemon's own mapping can never fault.
        rustix::fs::fcntl_add_seals(
            fd_of(&board.fd),
            SealFlags::SHRINK | SealFlags::GROW | SealFlags::FUTURE_WRITE | SealFlags::SEAL,
        )?;
        Ok(board)
    }

    /// Maps, read-only, the board at `path` (a daemon's `/proc/<pid>/fd/<fd>`).
    pub fn open(path: &Path) -> Result<Board, BoardError> {
        let fd = rustix::fs::open(path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| BoardError::Io(std::io::Error::from(e)))?;
        let size = rustix::fs::fstat(&fd)?.st_size as u64;
        if size < HEADER_BYTES as u64 {
            return Err(BoardError::Layout(format!(
                "{size} bytes is shorter than the header"
            )));
        }
        // Sealed by its maker: it cannot shrink under this mapping. A region that is not
        // sealed is refused, since a cut would fault this process.
        let seals = rustix::fs::fcntl_get_seals(&fd)?;
        if !seals.contains(SealFlags::SHRINK) {
            return Err(BoardError::Layout(
                "the region is not sealed against shrinking".into(),
            ));
        }
        let header = map(&fd, HEADER_BYTES, false)?;
        // SAFETY: `header` maps HEADER_BYTES readable bytes that nobody can shrink away.
        let head = unsafe { std::slice::from_raw_parts(header.as_ptr(), HEADER_BYTES) }.to_vec();
        // SAFETY: unmaps exactly the mapping made above, which nothing else refers to.
        unsafe { rustix::mm::munmap(header.as_ptr().cast::<c_void>(), HEADER_BYTES)? };
        let slots = check_header(&head, size)?;
        let len = bytes_for(slots);
        let base = map(&fd, len, false)?;
        drop(fd);
        Ok(Board {
            base,
            len,
            slots,
            fd: None,
            writable: false,
        })
    }

    /// The maker's descriptor of the region (clients open it through `/proc`); `None` on a
    /// reader.
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.fd.as_ref().map(|f| f.as_fd())
    }

    pub fn slots(&self) -> u32 {
        self.slots
    }

    /// The slot that `key` falls in.
    pub fn slot_of(&self, key: u64) -> u32 {
        (key % u64::from(self.slots)) as u32
    }

    /// The counter that, when it moves, invalidates every slot.
    pub fn generation(&self) -> u64 {
        self.word(16).load(Ordering::SeqCst)
    }

    /// The epoch of `slot` (taken modulo the number of slots).
    pub fn epoch(&self, slot: u32) -> u64 {
        self.slot(slot).load(Ordering::SeqCst)
    }

    /// Moves the epoch of `slot`; returns false on a read-only mapping.
    pub fn bump(&self, slot: u32) -> bool {
        if self.writable {
            self.slot(slot).fetch_add(1, Ordering::SeqCst);
        }
        self.writable
    }

    /// Moves the generation, invalidating every slot; returns false on a read-only mapping.
    pub fn bump_generation(&self) -> bool {
        if self.writable {
            self.word(16).fetch_add(1, Ordering::SeqCst);
        }
        self.writable
    }

    fn slot(&self, slot: u32) -> &AtomicU64 {
        let i = (slot % self.slots) as usize;
        self.word(HEADER_BYTES + 8 * i)
    }

    /// The 8-byte word at `offset`.
    fn word(&self, offset: usize) -> &AtomicU64 {
        assert!(
            offset.is_multiple_of(8) && offset + 8 <= self.len,
            "word outside the board"
        );
        // SAFETY: the offset is 8-aligned inside the mapping (checked above), the mapping is
        // page-aligned and lives as long as `self`, and every access to shared words goes
        // through atomics, so no Rust reference to plain data aliases it.
        unsafe { &*self.base.as_ptr().add(offset).cast::<AtomicU64>() }
    }

    /// Writes header bytes; only while making the board, before anyone else maps it.
    fn header_bytes_mut(&self, f: impl FnOnce(&mut [u8])) {
        assert!(self.writable);
        // SAFETY: the board was just made: this process holds the only mapping and the
        // descriptor has not been shared, so nothing else reads these bytes now.
        let head = unsafe { std::slice::from_raw_parts_mut(self.base.as_ptr(), HEADER_BYTES) };
        f(head);
    }
}

impl Drop for Board {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly this board's mapping; the borrow rules keep every reference
        // into it (all tied to `&self`) from outliving the board.
        let _ = unsafe { rustix::mm::munmap(self.base.as_ptr().cast::<c_void>(), self.len) };
    }
}

fn fd_of(fd: &Option<OwnedFd>) -> BorrowedFd<'_> {
    fd.as_ref().expect("the maker keeps its descriptor").as_fd()
}

/// The number of slots of a board whose header is `head` and region `size` bytes, or why it
/// is not one.
fn check_header(head: &[u8], size: u64) -> Result<u32, BoardError> {
    if head[0..8] != MAGIC {
        return Err(BoardError::Layout("wrong magic".into()));
    }
    let version = u32::from_le_bytes(head[8..12].try_into().expect("4 bytes"));
    if version != VERSION {
        return Err(BoardError::Layout(format!(
            "layout version {version}; this build reads version {VERSION}"
        )));
    }
    let slots = u32::from_le_bytes(head[12..16].try_into().expect("4 bytes"));
    if slots == 0 || slots > MAX_SLOTS || (bytes_for(slots) as u64) > size {
        return Err(BoardError::Layout(format!(
            "{slots} slots do not fit a region of {size} bytes"
        )));
    }
    Ok(slots)
}

/// Maps `len` bytes of `fd`, shared; writable only for the board's maker.
fn map(fd: &OwnedFd, len: usize, writable: bool) -> Result<NonNull<u8>, BoardError> {
    let prot = if writable {
        ProtFlags::READ | ProtFlags::WRITE
    } else {
        ProtFlags::READ
    };
    // SAFETY: a fresh mapping at an address the kernel chooses; it aliases no Rust object.
    let ptr =
        unsafe { rustix::mm::mmap(std::ptr::null_mut(), len, prot, MapFlags::SHARED, fd, 0)? };
    NonNull::new(ptr.cast::<u8>()).ok_or_else(|| BoardError::Layout("mapped at null".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    fn proc_path(b: &Board) -> std::path::PathBuf {
        let fd = b.fd().expect("a maker's board").as_raw_fd();
        format!("/proc/{}/fd/{}", std::process::id(), fd).into()
    }

    #[test]
    fn a_reader_sees_the_makers_bumps() {
        let maker = Board::create(1024).unwrap();
        let reader = Board::open(&proc_path(&maker)).unwrap();
        assert_eq!(reader.slots(), 1024);
        assert_eq!(reader.epoch(7), 0);
        assert!(maker.bump(7));
        assert!(maker.bump(7 + 1024), "slots wrap");
        assert_eq!(reader.epoch(7), 2);
        assert_eq!(reader.epoch(8), 0);
        assert!(maker.bump_generation());
        assert_eq!(reader.generation(), 1);
        assert!(!reader.bump(7), "a reader cannot bump");
        assert!(reader.fd().is_none(), "a reader keeps a descriptor");
        assert_eq!(maker.epoch(7), 2);
    }

    #[test]
    fn a_reader_cannot_map_it_writable_nor_cut_it() {
        let maker = Board::create(16).unwrap();
        let path = proc_path(&maker);
        let rw = rustix::fs::open(&path, OFlags::RDWR, Mode::empty()).unwrap();
        // SAFETY: a fresh mapping attempt; it fails, and if it did not it would alias nothing.
        let writable = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                bytes_for(16),
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                &rw,
                0,
            )
        };
        assert!(writable.is_err(), "the seal lets a client write the board");
        assert!(
            rustix::fs::ftruncate(&rw, 8).is_err(),
            "the board could be cut"
        );
        assert!(
            rustix::fs::ftruncate(&rw, 1 << 20).is_err(),
            "the board could grow"
        );
        maker.bump(3);
        assert_eq!(maker.epoch(3), 1, "the maker's own mapping stays writable");
    }

    #[test]
    fn a_forked_child_reads_the_counters_its_parent_mapped() {
        let maker = Board::create(64).unwrap();
        let reader = Board::open(&proc_path(&maker)).unwrap();
        maker.bump(5);
        // SAFETY: the child only reads atomics and exits with `_exit`, touching no lock.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let ok = reader.epoch(5) == 1;
            // SAFETY: ends the child without running the parent's destructors or atexit.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: waits for the child made above.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    }

    #[test]
    fn a_region_that_is_not_a_board_is_refused() {
        let plain = rustix::fs::memfd_create("x", MemfdFlags::ALLOW_SEALING).unwrap();
        rustix::fs::ftruncate(&plain, 4096).unwrap();
        let path = format!("/proc/{}/fd/{}", std::process::id(), plain.as_raw_fd());
        assert!(matches!(
            Board::open(Path::new(&path)),
            Err(BoardError::Layout(_))
        ));
        rustix::fs::fcntl_add_seals(&plain, SealFlags::SHRINK).unwrap();
        let err = Board::open(Path::new(&path)).err().unwrap();
        assert!(err.to_string().contains("magic"), "{err}");
        assert!(Board::create(0).is_err());
    }

    #[test]
    fn headers_with_bad_fields_are_refused() {
        let mut head = vec![0u8; HEADER_BYTES];
        head[0..8].copy_from_slice(&MAGIC);
        head[8..12].copy_from_slice(&2u32.to_le_bytes());
        assert!(check_header(&head, 1 << 20).is_err(), "a later version");
        head[8..12].copy_from_slice(&VERSION.to_le_bytes());
        head[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(check_header(&head, u64::MAX).is_err(), "too many slots");
        head[12..16].copy_from_slice(&100u32.to_le_bytes());
        assert!(check_header(&head, 64 + 799).is_err(), "slots past the end");
        assert_eq!(check_header(&head, 64 + 800).unwrap(), 100);
    }
}
