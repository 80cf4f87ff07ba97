//! Reading a data log with its block checksums (`tessera_core::sums`): every block a read
//! takes from the device is checked whole before any of its bytes are handed out.
//!
//! Blocks wholly inside the requested span are read straight into the caller's buffer (one
//! `pread` for a run of them) and checked there; a block cut by the span's start or end is
//! read whole into a scratch buffer. Slots are cached (a full block's slot never changes);
//! a slot that is missing or does not match is read again once from the file, since the
//! writer rewrites the slot of the block it is still filling.
//!
//! A run of whole blocks that the page cache holds entirely is handed out without its check,
//! as Btrfs and ZFS do: the checksums guard what the device returns, and a cached page came
//! either from the writer's own write or from a read that checked it, since every reader of a
//! log turns the kernel's read-ahead off for it (`POSIX_FADV_RANDOM`), so no page enters the
//! cache unchecked behind a read. Checking cached bytes again cost a reader as much CPU as
//! copying them (crc32c here: 12 GB/s against a copy's 8.5). Whether a run is cached is asked
//! first without touching it ([`crate::page_cache`]); only then is it read with `RWF_NOWAIT`
//! (which fails if the pages left meanwhile). A `RWF_NOWAIT` read alone is no question: on a
//! miss it starts the device read of the pages, which then sit in the cache unchecked for the
//! next reader. A program other than Tessera reading the logs (a backup, `cp` of the burst
//! buffer) can bring pages in unchecked; the blocks cut by a read's edges are always checked.
//! A block that fails its check is dropped from the cache at once, and again while another
//! reader's device read keeps it there, so the next reader reads it from the device again (a
//! reader of the same block in the microseconds between a failed read and its drop can be
//! handed its cached bytes).
//!
//! With the kernel's read-ahead off, a reader going through a log in pieces (a rank-shifted
//! checkpoint restart: 47001-byte pieces, contiguous in the writer's log) would ask the device
//! for each piece on its own. So the reader reads ahead itself: a read that continues the last
//! one (it starts within a block of where that one ended) also reads the next blocks, up to a
//! window that doubles from 128 KiB to 4 MiB while the reads stay sequential, in one device
//! read, and checks them as it would any other: the pages it leaves in the cache are checked
//! ones, and a block that fails is dropped from the cache for the read that asks for it to
//! find and report.

use crate::library_fds::HeldFile;
use rustix::io::{IoSliceMut, ReadWriteFlags};
use std::cell::{Cell, RefCell};
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use tessera_core::sums::{self, Slot};
use tessera_core::{Errno, FsError, FsResult};

/// A data log and its checksums, for reading.
#[derive(Debug)]
pub struct CheckedData {
    data: HeldFile,
    data_path: PathBuf,
    sums: HeldFile,
    sums_path: PathBuf,
    log2: u8,
    slots: RefCell<Vec<Slot>>,
    /// The reader's own read-ahead (see the top).
    ahead: Cell<ReadAhead>,
    /// The last block cut by a read's edge, checked, if it is full (final): pieces read one
    /// after the other share the block where one ends and the next starts, which would
    /// otherwise be read and checked twice.
    edge: RefCell<Option<(u64, Vec<u8>)>>,
    /// The read-ahead's buffer, kept: a fresh one of up to 4 MiB per window would fault in
    /// (and zero) its pages again each time.
    ahead_buf: RefCell<Vec<u8>>,
}

/// Where the last read ended, the read-ahead window, and how far the log has been read
/// ahead (checked).
#[derive(Clone, Copy, Debug, Default)]
struct ReadAhead {
    last_end: u64,
    window: u64,
    until: u64,
}

/// The first read-ahead window, and the largest.
const AHEAD_MIN: u64 = 128 << 10;
const AHEAD_MAX: u64 = 4 << 20;

impl CheckedData {
    /// `data` and `sums` opened by the caller (privately); the sums header must be complete.
    pub fn new(
        data: HeldFile,
        data_path: &Path,
        sums: HeldFile,
        sums_path: &Path,
    ) -> FsResult<Self> {
        let mut h = [0u8; sums::HEADER_SIZE];
        let n = sums
            .get()
            .read_at(&mut h, 0)
            .map_err(|e| FsError::io(format!("reading {}", sums_path.display()), &e))?;
        let log2 = sums::parse_header(&h[..n])
            .map_err(|e| FsError::new(Errno::Io, format!("{}: {e}", sums_path.display())))?
            .unwrap_or(sums::BLOCK_LOG2);
        // No read-ahead: a page this reader's reads bring into the cache is one it checks.
        // Advice only: a file system without it still reads correctly (and a cached block
        // is then one this process, or another reader, may not have checked: see the top).
        let _ = rustix::fs::fadvise(&*data.get(), 0, None, rustix::fs::Advice::Random);
        Ok(CheckedData {
            data,
            data_path: data_path.to_path_buf(),
            sums,
            sums_path: sums_path.to_path_buf(),
            log2,
            slots: RefCell::new(Vec::new()),
            ahead: Cell::new(ReadAhead::default()),
            edge: RefCell::new(None),
            ahead_buf: RefCell::new(Vec::new()),
        })
    }

    pub fn data_path(&self) -> &Path {
        &self.data_path
    }

    /// The data log's length now.
    pub fn data_len(&self) -> FsResult<u64> {
        crate::len_of(&self.data.get(), &self.data_path)
    }

    /// The slots of blocks `from..`, read again from the file (those before stay cached).
    fn reload_from(&self, from: u64) -> FsResult<()> {
        let mut slots = self.slots.borrow_mut();
        slots.truncate(from as usize);
        let len = self
            .sums
            .get()
            .metadata()
            .map_err(|e| FsError::io(format!("stat {}", self.sums_path.display()), &e))?
            .len();
        let start = sums::slot_offset(slots.len() as u64);
        if len <= start {
            return Ok(());
        }
        let mut buf = vec![0u8; (len - start) as usize / sums::SLOT_SIZE * sums::SLOT_SIZE];
        self.sums
            .get()
            .read_exact_at(&mut buf, start)
            .map_err(|e| FsError::io(format!("reading {}", self.sums_path.display()), &e))?;
        slots.extend(buf.chunks_exact(sums::SLOT_SIZE).map(Slot::decode));
        Ok(())
    }

    /// The slot of block `k` (`fresh`: read from the file again); a slot that claims more
    /// than a block is damage.
    fn slot(&self, k: u64, fresh: bool) -> FsResult<Option<Slot>> {
        if fresh || k as usize >= self.slots.borrow().len() {
            let from = (self.slots.borrow().len() as u64).min(k);
            self.reload_from(from)?;
        }
        let slot = self.slots.borrow().get(k as usize).copied();
        match slot {
            Some(s) if u64::from(s.len) > 1 << self.log2 => {
                Err(self.corrupt(k, "has a damaged checksum slot"))
            }
            other => Ok(other),
        }
    }

    /// The error for block `k`; its pages leave the page cache, so that the next read of it
    /// comes from the device and is checked again rather than handed out from the cache.
    fn corrupt(&self, k: u64, why: &str) -> FsError {
        let b = 1u64 << self.log2;
        if self.has_hole(k * b, (k + 1) * b) {
            return FsError::new(
                Errno::Stale,
                format!(
                    "bytes [{}, {}) of data log {} were given back (every file they held was removed, or moved away): a reader that learned of them before must ask where the file's bytes are now",
                    k * b,
                    (k + 1) * b,
                    self.data_path.display()
                ),
            );
        }
        self.drop_from_cache(k * b, b);
        FsError::new(
            Errno::Io,
            format!(
                "data log {} is corrupt: block {k} (bytes [{}, {}) of the log) {why}; its bytes are not returned",
                self.data_path.display(),
                k * b,
                (k + 1) * b
            ),
        )
    }

    /// Reads and checks block `k` into `buf` (resized to the slot's length).
    fn checked_block(&self, k: u64, need_end: u64, buf: &mut Vec<u8>) -> FsResult<()> {
        let start = k << self.log2;
        let mut covered = false;
        for fresh in [false, true] {
            let Some(slot) = self.slot(k, fresh)? else {
                continue;
            };
            if start + u64::from(slot.len) < need_end {
                continue;
            }
            covered = true;
            buf.resize(slot.len as usize, 0);
            self.read_raw(buf, start)?;
            if slot.matches(buf) {
                return Ok(());
            }
        }
        Err(self.corrupt(
            k,
            if covered {
                "fails its checksum"
            } else {
                "has no checksum for the bytes asked for"
            },
        ))
    }

    /// Whether `[start, end)` of the data log, within its length, holds a hole (a block
    /// punched out when its files went: see [`crate::reclaim`]).
    fn has_hole(&self, start: u64, end: u64) -> bool {
        let data = self.data.get();
        let len = data.metadata().map_or(0, |m| m.len());
        match rustix::fs::seek(&*data, rustix::fs::SeekFrom::Hole(start)) {
            Ok(hole) => hole < end.min(len),
            Err(_) => false,
        }
    }

    /// Drops `[at, at + len)` from the page cache. A page another reader's device read holds
    /// locked stays, so the drop is repeated while any of it is cached (that reader checks
    /// the page and drops it too when its read ends; the bound only keeps a reader that
    /// keeps reading the block from holding this one).
    fn drop_from_cache(&self, at: u64, len: u64) {
        let data = self.data.get();
        for _ in 0..1000 {
            let _ = rustix::fs::fadvise(
                &*data,
                at,
                std::num::NonZeroU64::new(len),
                rustix::fs::Advice::DontNeed,
            );
            if crate::page_cache::cached_pages(data.as_fd(), at, len).is_none_or(|n| n == 0) {
                return;
            }
            std::thread::yield_now();
        }
    }

    /// Reads `out` at `pos` only if the page cache holds all of it: whether it did. Asked
    /// first without touching the pages (see the top: a miss must start no device read).
    fn read_cached(&self, out: &mut [u8], pos: u64) -> bool {
        let want = out.len();
        if !crate::page_cache::all_cached(self.data.get().as_fd(), pos, want as u64) {
            return false;
        }
        let mut bufs = [IoSliceMut::new(out)];
        matches!(
            rustix::io::preadv2(&*self.data.get(), &mut bufs, pos, ReadWriteFlags::NOWAIT),
            Ok(n) if n == want
        )
    }

    fn read_raw(&self, out: &mut [u8], pos: u64) -> FsResult<()> {
        self.data
            .get()
            .read_exact_at(out, pos)
            .map_err(|e| FsError::io(format!("reading {}", self.data_path.display()), &e))
    }

    /// Reads ahead of a read of `[pos, end)` that continues the last one (see the top).
    fn read_ahead(&self, pos: u64, end: u64) -> FsResult<()> {
        let block = 1u64 << self.log2;
        let mut a = self.ahead.get();
        let sequential = pos + block >= a.last_end && pos <= a.last_end + block;
        a.window = if sequential {
            (a.window * 2).clamp(AHEAD_MIN, AHEAD_MAX)
        } else {
            0
        };
        a.last_end = end;
        if !sequential {
            a.until = 0;
        }
        // Read again only once the read nears the end of what was read ahead.
        let from = (pos.max(a.until) >> self.log2) << self.log2;
        let want = end + a.window;
        if a.window == 0 || a.until >= end + a.window / 2 {
            self.ahead.set(a);
            return Ok(());
        }
        // Full blocks with full slots only: the others are checked whenever they are read.
        let first = from >> self.log2;
        let mut last = first;
        while (last << self.log2) < want {
            match self.slot(last, false)? {
                Some(s) if u64::from(s.len) == block => last += 1,
                _ => break,
            }
        }
        a.until = a.until.max(last << self.log2);
        self.ahead.set(a);
        if last == first || self.read_cached_probe(from, (last - first) << self.log2) {
            return Ok(());
        }
        let mut buf = self.ahead_buf.borrow_mut();
        buf.resize(((last - first) << self.log2) as usize, 0);
        self.read_raw(&mut buf, from)?;
        for (i, b) in buf.chunks_exact(block as usize).enumerate() {
            let k = first + i as u64;
            if !self.slot(k, false)?.is_some_and(|s| s.matches(b)) {
                // Left for the read that asks for it: read from the device, checked, reported.
                self.drop_from_cache(k << self.log2, block);
            }
        }
        Ok(())
    }

    /// Whether the page cache holds all of `[at, at + len)` (asked without touching it).
    fn read_cached_probe(&self, at: u64, len: u64) -> bool {
        crate::page_cache::all_cached(self.data.get().as_fd(), at, len)
    }

    /// Reads `out.len()` bytes at data-log position `pos`, every block checked.
    pub fn read(&self, out: &mut [u8], pos: u64) -> FsResult<()> {
        let block = 1u64 << self.log2;
        let end = pos + out.len() as u64;
        // Advice to itself: whatever fails here is found, and reported, by the read below.
        let _ = self.read_ahead(pos, end);
        let mut at = pos;
        let mut scratch = Vec::new();
        while at < end {
            let k = at >> self.log2;
            let bstart = k << self.log2;
            // A run of whole full blocks goes straight into `out`.
            if at == bstart && end - at >= block {
                let whole = (end - at) / block;
                let last = k + whole - 1;
                let mut slots = Vec::with_capacity(whole as usize);
                let mut ok = true;
                for j in k..=last {
                    match self.slot(j, false)? {
                        Some(s) if u64::from(s.len) == block => slots.push(s),
                        _ => {
                            ok = false;
                            break;
                        }
                    }
                }
                if ok {
                    let dst = &mut out[(at - pos) as usize..(at - pos + whole * block) as usize];
                    if self.read_cached(dst, at) {
                        at += whole * block;
                        continue;
                    }
                    self.read_raw(dst, at)?;
                    for (i, s) in slots.iter().enumerate() {
                        let b = &dst[i * block as usize..(i + 1) * block as usize];
                        if !s.matches(b) {
                            // Full slots are final: one fresh look, then it is damage.
                            let j = k + i as u64;
                            self.checked_block(j, (j + 1) << self.log2, &mut scratch)?;
                            dst[i * block as usize..(i + 1) * block as usize]
                                .copy_from_slice(&scratch);
                        }
                    }
                    at += whole * block;
                    continue;
                }
            }
            let need_end = end.min(bstart + block);
            let from = (at - bstart) as usize;
            let to = (need_end - bstart) as usize;
            if let Some((_, bytes)) = self.edge.borrow().as_ref().filter(|(e, _)| *e == k) {
                out[(at - pos) as usize..(need_end - pos) as usize]
                    .copy_from_slice(&bytes[from..to]);
                at = need_end;
                continue;
            }
            self.checked_block(k, need_end, &mut scratch)?;
            if scratch.len() < to {
                return Err(self.corrupt(k, "has no checksum for the bytes asked for"));
            }
            out[(at - pos) as usize..(need_end - pos) as usize].copy_from_slice(&scratch[from..to]);
            if scratch.len() as u64 == block {
                // Full, so final: kept for the next piece, which likely starts in it.
                *self.edge.borrow_mut() = Some((k, std::mem::take(&mut scratch)));
            }
            at = need_end;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page_cache::none_cached;
    use crate::{LogWriter, private};
    use tessera_core::index::IndexHeader;

    /// A log of `blocks` full blocks, synced and dropped from the page cache, and a reader.
    fn log_on_device(dir: &Path, blocks: u64) -> (PathBuf, CheckedData, Vec<u8>) {
        let (d, i) = (dir.join("1.data"), dir.join("1.index"));
        let header = IndexHeader {
            log: 1,
            node: 0,
            epoch: 0,
            txn: false,
        };
        let mut w = LogWriter::open(&d, &i, header).unwrap();
        let len = (blocks << sums::BLOCK_LOG2) as usize;
        let bytes: Vec<u8> = (0..len).map(|k| (k % 251) as u8).collect();
        w.append(1, 0, &bytes).unwrap();
        w.sync_durable().unwrap();
        drop(w);
        let reader = reader_of(&d);
        drop_all(&d);
        (d, reader, bytes)
    }

    /// A checked reader of the data log at `d` and its checksums.
    fn reader_of(d: &Path) -> CheckedData {
        let s = crate::sums_path(d);
        CheckedData::new(
            private::open_existing(d, false).unwrap(),
            d,
            private::open_existing(&s, false).unwrap(),
            &s,
        )
        .unwrap()
    }

    /// Flips byte `at` of the data log at `d` (whose bytes are `bytes`) on the device, with
    /// nothing of it left in the page cache.
    fn damage_on_device(d: &Path, bytes: &[u8], at: u64) {
        let f = std::fs::OpenOptions::new().write(true).open(d).unwrap();
        f.write_all_at(&[bytes[at as usize] ^ 1], at).unwrap();
        drop(f);
        drop_all(d);
    }

    fn drop_all(p: &Path) {
        let f = std::fs::File::open(p).unwrap();
        f.sync_all().unwrap();
        rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed).unwrap();
        let len = f.metadata().unwrap().len();
        assert!(
            none_cached(f.as_fd(), 0, len),
            "the test directory must be on a disk (not tmpfs), with cachestat (Linux 6.5)"
        );
    }

    #[test]
    fn asking_whether_blocks_are_cached_brings_none_in() {
        let tmp = tempfile::tempdir().unwrap();
        let (d, reader, _) = log_on_device(tmp.path(), 4);
        let mut out = vec![0u8; 4 << sums::BLOCK_LOG2];
        assert!(!reader.read_cached(&mut out, 0));
        // A `RWF_NOWAIT` read that misses starts the device read of what it asked for: the
        // pages would now sit in the cache unchecked.
        let f = std::fs::File::open(&d).unwrap();
        assert!(
            none_cached(f.as_fd(), 0, out.len() as u64),
            "the probe brought pages into the cache"
        );
    }

    #[test]
    fn a_damaged_block_is_refused_by_every_reader_after_the_first() {
        let tmp = tempfile::tempdir().unwrap();
        let (d, first, bytes) = log_on_device(tmp.path(), 4);
        let block = 1u64 << sums::BLOCK_LOG2;
        let at = 2 * block + 17;
        damage_on_device(&d, &bytes, at);
        let mut out = vec![0u8; bytes.len()];
        let e = first.read(&mut out, 0).unwrap_err();
        assert!(e.message.contains("block 2"), "{e}");
        let f = std::fs::File::open(&d).unwrap();
        assert!(
            none_cached(f.as_fd(), 2 * block, block),
            "the damaged block stayed in the cache"
        );
        let second = reader_of(&d);
        for _ in 0..3 {
            let e = second.read(&mut out, 0).unwrap_err();
            assert_eq!(e.errno, Errno::Io, "{e}");
        }
        // The blocks around it still read.
        let mut one = vec![0u8; block as usize];
        second.read(&mut one, 3 * block).unwrap();
        assert!(one[..] == bytes[3 * block as usize..]);
    }

    #[test]
    fn sequential_pieces_are_read_ahead_checked_and_damage_ahead_is_not_cached() {
        let tmp = tempfile::tempdir().unwrap();
        let blocks = 64;
        let (d, reader, bytes) = log_on_device(tmp.path(), blocks);
        let block = 1u64 << sums::BLOCK_LOG2;
        // Damage a block well ahead of the first reads.
        let bad = 20 * block + 5;
        damage_on_device(&d, &bytes, bad);
        // Pieces of 47001 bytes, one after the other, as a rank-shifted restart reads them.
        let piece = 47_001usize;
        let mut at = 0usize;
        let mut out = vec![0u8; piece];
        for _ in 0..3 {
            reader.read(&mut out, at as u64).unwrap();
            assert!(out[..] == bytes[at..at + piece]);
            at += piece;
        }
        let cached = |from: u64, len: u64| {
            let f = std::fs::File::open(&d).unwrap();
            crate::page_cache::all_cached(f.as_fd(), from, len)
        };
        // The blocks after the last read are in the cache: read ahead.
        assert!(cached(at as u64, 2 * block), "nothing was read ahead");
        // A random reader gets no read-ahead.
        let random = reader_of(&d);
        let mut one = vec![0u8; 100];
        random.read(&mut one, 60 * block).unwrap();
        random.read(&mut one, 50 * block).unwrap();
        assert!(!cached(51 * block, block), "a random reader read ahead");
        // Read on until the damaged block: it was not left in the cache by the read-ahead,
        // and the read of it fails.
        let f = std::fs::File::open(&d).unwrap();
        let e = loop {
            match reader.read(&mut out, at as u64) {
                Ok(()) => {
                    assert!(out[..] == bytes[at..at + piece]);
                    at += piece;
                    assert!(at < bad as usize + piece, "the damage was read past");
                }
                Err(e) => break e,
            }
        };
        assert!(e.message.contains("block 20"), "{e}");
        assert!(
            none_cached(f.as_fd(), 20 * block, block),
            "the damaged block stayed cached"
        );
    }
}
