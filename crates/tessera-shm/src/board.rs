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

use crate::region::{Region, ShmError};
use rustix::fd::BorrowedFd;
use rustix::fs::SealFlags;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering, fence};

/// The first eight bytes of a board.
pub const MAGIC: [u8; 8] = *b"TSRBOARD";
/// The layout version written at offset 8.
pub const VERSION: u32 = 1;
/// Bytes before the first slot.
pub const HEADER_BYTES: usize = 64;
/// The largest board a client accepts (16 Mi slots, 128 MiB).
const MAX_SLOTS: u32 = 1 << 24;

/// Why a board could not be made or opened.
pub type BoardError = ShmError;

/// A mapped board: read-write for the daemon that made it, read-only for its clients.
pub struct Board {
    region: Region,
    slots: u32,
}

fn bytes_for(slots: u32) -> usize {
    HEADER_BYTES + 8 * slots as usize
}

impl Board {
    /// Makes a board of `slots` counters, all zero, sealed so that only this mapping can
    /// write it.
    pub fn create(slots: u32) -> Result<Board, BoardError> {
        if slots == 0 || slots > MAX_SLOTS {
            return Err(ShmError::Layout(format!(
                "{slots} slots; a board has 1 to {MAX_SLOTS}"
            )));
        }
        let region = Region::create("tessera-board", bytes_for(slots))?;
        let mut head = [0u8; HEADER_BYTES];
        head[0..8].copy_from_slice(&MAGIC);
        head[8..12].copy_from_slice(&VERSION.to_le_bytes());
        head[12..16].copy_from_slice(&slots.to_le_bytes());
        region.init(&head);
        // After the header is written: from here on no new writable mapping can be made, and
        // the size is fixed, so the daemon's own mapping can never fault.
        region.seal(
            SealFlags::SHRINK | SealFlags::GROW | SealFlags::FUTURE_WRITE | SealFlags::SEAL,
        )?;
        Ok(Board { region, slots })
    }

    /// Maps, read-only, the board at `path` (a daemon's `/proc/<pid>/fd/<fd>`).
    pub fn open(path: &Path) -> Result<Board, BoardError> {
        let mut slots = 0;
        let region = Region::open(path, false, HEADER_BYTES, |head, size| {
            slots = check_header(head, size)?;
            Ok(bytes_for(slots))
        })?;
        Ok(Board { region, slots })
    }

    /// The maker's descriptor of the region (clients open it through `/proc`); `None` on a
    /// reader.
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.region.fd()
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
        // Relaxed, then a fence: a client's mapping is read-only, where only relaxed atomic
        // loads are promised to be sound.
        let g = self.region.word64(16).load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        g
    }

    /// The epoch of `slot` (taken modulo the number of slots).
    pub fn epoch(&self, slot: u32) -> u64 {
        let e = self.slot(slot).load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        e
    }

    /// Moves the epoch of `slot`; returns false on a read-only mapping.
    pub fn bump(&self, slot: u32) -> bool {
        let writable = self.region.writable();
        if writable {
            self.slot(slot).fetch_add(1, Ordering::SeqCst);
        }
        writable
    }

    /// Moves the generation, invalidating every slot; returns false on a read-only mapping.
    pub fn bump_generation(&self) -> bool {
        let writable = self.region.writable();
        if writable {
            self.region.word64(16).fetch_add(1, Ordering::SeqCst);
        }
        writable
    }

    fn slot(&self, slot: u32) -> &AtomicU64 {
        let i = (slot % self.slots) as usize;
        self.region.word64(HEADER_BYTES + 8 * i)
    }
}

/// The number of slots of a board whose header is `head` and region `size` bytes, or why it
/// is not one.
fn check_header(head: &[u8], size: u64) -> Result<u32, BoardError> {
    if head[0..8] != MAGIC {
        return Err(ShmError::Layout("wrong magic".into()));
    }
    let version = u32::from_le_bytes(head[8..12].try_into().expect("4 bytes"));
    if version != VERSION {
        return Err(ShmError::Layout(format!(
            "layout version {version}; this build reads version {VERSION}"
        )));
    }
    let slots = u32::from_le_bytes(head[12..16].try_into().expect("4 bytes"));
    if slots == 0 || slots > MAX_SLOTS || (bytes_for(slots) as u64) > size {
        return Err(ShmError::Layout(format!(
            "{slots} slots do not fit a region of {size} bytes"
        )));
    }
    Ok(slots)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::fs::{MemfdFlags, Mode, OFlags};
    use rustix::mm::{MapFlags, ProtFlags};
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
