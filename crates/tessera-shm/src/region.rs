//! A mapped memfd: the creation, sealing, opening and word access that every shared region of
//! this crate builds on.
//!
//! Bytes another process may write at any moment are only ever touched through atomics
//! (8-byte words, or 4-byte ones for futex words), so no Rust reference to plain data aliases
//! shared memory, and a torn or hostile write can only produce bytes the reader then
//! validates.

use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{MemfdFlags, Mode, OFlags, SealFlags};
use rustix::mm::{MapFlags, ProtFlags};
use std::ffi::c_void;
use std::path::Path;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Why a shared region could not be made, opened or read.
#[derive(Debug)]
pub enum ShmError {
    Io(std::io::Error),
    /// The region is not what it claims to be (wrong magic, version, or sizes).
    Layout(String),
    /// A length or sequence in the region is impossible: its other side wrote garbage.
    Garbage(String),
}

impl std::fmt::Display for ShmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ShmError::Io(e) => write!(f, "{e}"),
            ShmError::Layout(why) => write!(f, "not a region of this layout: {why}"),
            ShmError::Garbage(why) => write!(f, "garbage in a shared region: {why}"),
        }
    }
}

impl std::error::Error for ShmError {}

impl From<rustix::io::Errno> for ShmError {
    fn from(e: rustix::io::Errno) -> Self {
        ShmError::Io(e.into())
    }
}

/// A shared mapping of a memfd, `len` bytes from offset 0.
pub(crate) struct Region {
    /// The start of the mapping, `len` bytes long, aligned to a page.
    base: NonNull<u8>,
    len: usize,
    /// The maker's descriptor, for the other side to open through `/proc`; an opener keeps
    /// none (the mapping outlives it), so a program that closes every descriptor, as a child
    /// does before `exec`, closes nothing of ours.
    fd: Option<OwnedFd>,
    writable: bool,
}

// SAFETY: the mapping is shared memory only ever accessed through atomics, owned by the
// struct until drop; moving or sharing the handle across threads is sound.
unsafe impl Send for Region {}
// SAFETY: as above; every access is an atomic load, store or read-modify-write.
unsafe impl Sync for Region {}

impl Region {
    /// A fresh memfd of `len` zero bytes, mapped read-write; the maker keeps its descriptor.
    pub fn create(name: &str, len: usize) -> Result<Region, ShmError> {
        let fd = rustix::fs::memfd_create(name, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?;
        rustix::fs::ftruncate(&fd, len as u64)?;
        let base = map(&fd, len, true)?;
        Ok(Region {
            base,
            len,
            fd: Some(fd),
            writable: true,
        })
    }

    /// Adds `seals` to the maker's memfd.
    pub fn seal(&self, seals: SealFlags) -> Result<(), ShmError> {
        let fd = self
            .fd
            .as_ref()
            .ok_or_else(|| ShmError::Layout("only the maker of a region can seal it".into()))?;
        rustix::fs::fcntl_add_seals(fd, seals)?;
        Ok(())
    }

    /// Maps the region at `path` (its maker's `/proc/<pid>/fd/<fd>`): `check` reads the
    /// first `header` bytes and the region's size and says how many bytes to map.
    pub fn open(
        path: &Path,
        writable: bool,
        header: usize,
        check: impl FnOnce(&[u8], u64) -> Result<usize, ShmError>,
    ) -> Result<Region, ShmError> {
        let flags = if writable {
            OFlags::RDWR
        } else {
            OFlags::RDONLY
        };
        let fd = rustix::fs::open(path, flags | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| ShmError::Io(std::io::Error::from(e)))?;
        let size = rustix::fs::fstat(&fd)?.st_size as u64;
        if size < header as u64 {
            return Err(ShmError::Layout(format!(
                "{size} bytes is shorter than the header"
            )));
        }
        // A region that could be cut under this mapping would fault this process on its
        // next access: only one sealed against shrinking is mapped.
        let seals = rustix::fs::fcntl_get_seals(&fd)?;
        if !seals.contains(SealFlags::SHRINK) {
            return Err(ShmError::Layout(
                "the region is not sealed against shrinking".into(),
            ));
        }
        // The header holds words the maker may be changing now (the board's generation, the
        // ring's control words): copied out a word at a time, like every shared byte.
        let bytes = {
            let head = Region {
                base: map(&fd, header, false)?,
                len: header,
                fd: None,
                writable: false,
            };
            let mut bytes = Vec::new();
            head.copy_out(0, header, &mut bytes);
            bytes
        };
        let len = check(&bytes, size)?;
        if len as u64 > size {
            return Err(ShmError::Layout(format!(
                "{len} bytes do not fit a region of {size}"
            )));
        }
        let base = map(&fd, len, writable)?;
        Ok(Region {
            base,
            len,
            fd: None,
            writable,
        })
    }

    /// The maker's descriptor (the other side opens it through `/proc`); `None` on an
    /// opener, or once the maker let it go.
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.fd.as_ref().map(|f| f.as_fd())
    }

    /// Closes the maker's descriptor; the mapping stays.
    pub fn close_fd(&mut self) {
        self.fd = None;
    }

    pub fn writable(&self) -> bool {
        self.writable
    }

    /// The 8-byte word at `offset`.
    pub fn word64(&self, offset: usize) -> &AtomicU64 {
        assert!(
            offset.is_multiple_of(8) && offset + 8 <= self.len,
            "word outside the region"
        );
        // SAFETY: the offset is 8-aligned inside the mapping (checked above), the mapping is
        // page-aligned and lives as long as `self`, and every access to shared words goes
        // through atomics, so no Rust reference to plain data aliases it.
        unsafe { &*self.base.as_ptr().add(offset).cast::<AtomicU64>() }
    }

    /// The 4-byte word at `offset` (a futex word, or a field the other side may change).
    pub fn word32(&self, offset: usize) -> &AtomicU32 {
        assert!(
            offset.is_multiple_of(4) && offset + 4 <= self.len,
            "word outside the region"
        );
        // SAFETY: as in `word64`, for a 4-aligned word.
        unsafe { &*self.base.as_ptr().add(offset).cast::<AtomicU32>() }
    }

    /// Writes `bytes` at `offset` (8-aligned), a word at a time; the last word's bytes past
    /// the end of `bytes` become zero.
    pub fn copy_in(&self, offset: usize, bytes: &[u8]) {
        assert!(self.writable, "copy into a read-only region");
        let mut at = offset;
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            let v = u64::from_le_bytes(w.try_into().expect("8 bytes"));
            self.word64(at).store(v, Ordering::Relaxed);
            at += 8;
        }
        let tail = words.remainder();
        if !tail.is_empty() {
            let mut last = [0u8; 8];
            last[..tail.len()].copy_from_slice(tail);
            self.word64(at)
                .store(u64::from_le_bytes(last), Ordering::Relaxed);
        }
    }

    /// Writes `bytes` at `offset` (any alignment) with one memory copy: for bulk bytes, which
    /// the other side reads only once this side has published them.
    pub fn copy_bulk_in(&self, offset: usize, bytes: &[u8]) {
        assert!(self.writable, "copy into a read-only region");
        assert!(
            offset
                .checked_add(bytes.len())
                .is_some_and(|end| end <= self.len),
            "bytes outside the region"
        );
        // SAFETY: the span is inside the mapping (checked above), which lives as long as
        // `self`; it is written through a raw pointer, never through a Rust reference, so
        // whatever the other process does to these bytes at the same time (a misbehaving
        // client) can only leave it garbage, which it alone reads.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.base.as_ptr().add(offset),
                bytes.len(),
            );
        }
    }

    /// The `len` bytes at `offset`, borrowed in place.
    ///
    /// # Safety
    ///
    /// No process may write these bytes while the borrow lives: the caller must hold them
    /// under a protocol in which the other side writes them only when this side asks (the
    /// request ring's answer area, read by the client between an answer and its next
    /// request; the daemon is the user's own process, checked at connect).
    pub unsafe fn bytes(&self, offset: usize, len: usize) -> &[u8] {
        assert!(
            offset.checked_add(len).is_some_and(|end| end <= self.len),
            "bytes outside the region"
        );
        // SAFETY: inside the mapping (checked above), which outlives the borrow of `self`;
        // nobody writes the span while it is borrowed (the caller's contract).
        unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(offset), len) }
    }

    /// Replaces `out` with the `len` bytes at `offset` (8-aligned), read a word at a time.
    pub fn copy_out(&self, offset: usize, len: usize, out: &mut Vec<u8>) {
        let words = len.div_ceil(8);
        assert!(
            offset.is_multiple_of(8) && offset + 8 * words <= self.len,
            "bytes outside the region"
        );
        out.clear();
        out.resize(8 * words, 0);
        for (i, chunk) in out.chunks_exact_mut(8).enumerate() {
            let v = self.word64(offset + 8 * i).load(Ordering::Relaxed);
            chunk.copy_from_slice(&v.to_le_bytes());
        }
        out.truncate(len);
    }

    /// Writes the first bytes of the region; only while making it, before anyone else maps
    /// it.
    pub fn init(&self, bytes: &[u8]) {
        assert!(self.writable && self.fd.is_some(), "init by the maker only");
        self.copy_in(0, bytes);
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly this region's mapping; the borrow rules keep every reference
        // into it (all tied to `&self`) from outliving the region.
        let _ = unsafe { rustix::mm::munmap(self.base.as_ptr().cast::<c_void>(), self.len) };
    }
}

/// Maps `len` bytes of `fd`, shared.
fn map(fd: &OwnedFd, len: usize, writable: bool) -> Result<NonNull<u8>, ShmError> {
    let prot = if writable {
        ProtFlags::READ | ProtFlags::WRITE
    } else {
        ProtFlags::READ
    };
    // SAFETY: a fresh mapping at an address the kernel chooses; it aliases no Rust object.
    let ptr =
        unsafe { rustix::mm::mmap(std::ptr::null_mut(), len, prot, MapFlags::SHARED, fd, 0)? };
    NonNull::new(ptr.cast::<u8>()).ok_or_else(|| ShmError::Layout("mapped at null".into()))
}
