//! Reading a data log with its block checksums (`tessera_core::sums`): every block a read
//! touches is checked whole before any of its bytes are handed out.
//!
//! Blocks wholly inside the requested span are read straight into the caller's buffer (one
//! `pread` for a run of them) and checked there; a block cut by the span's start or end is
//! read whole into a scratch buffer. Slots are cached (a full block's slot never changes);
//! a slot that is missing or does not match is read again once from the file, since the
//! writer rewrites the slot of the block it is still filling.

use std::cell::RefCell;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use tessera_core::sums::{self, Slot};
use tessera_core::{Errno, FsError, FsResult};

/// A data log and its checksums, for reading.
#[derive(Debug)]
pub struct CheckedData {
    data: File,
    data_path: PathBuf,
    sums: File,
    sums_path: PathBuf,
    log2: u8,
    slots: RefCell<Vec<Slot>>,
}

impl CheckedData {
    /// `data` and `sums` opened by the caller (privately); the sums header must be complete.
    pub fn new(data: File, data_path: &Path, sums: File, sums_path: &Path) -> FsResult<Self> {
        let mut h = [0u8; sums::HEADER_SIZE];
        let n = sums
            .read_at(&mut h, 0)
            .map_err(|e| FsError::io(format!("reading {}", sums_path.display()), &e))?;
        let log2 = sums::parse_header(&h[..n])
            .map_err(|e| FsError::new(Errno::Io, format!("{}: {e}", sums_path.display())))?
            .unwrap_or(sums::BLOCK_LOG2);
        Ok(CheckedData {
            data,
            data_path: data_path.to_path_buf(),
            sums,
            sums_path: sums_path.to_path_buf(),
            log2,
            slots: RefCell::new(Vec::new()),
        })
    }

    pub fn data_path(&self) -> &Path {
        &self.data_path
    }

    /// The slots of blocks `from..`, read again from the file (those before stay cached).
    fn reload_from(&self, from: u64) -> FsResult<()> {
        let mut slots = self.slots.borrow_mut();
        slots.truncate(from as usize);
        let len = self
            .sums
            .metadata()
            .map_err(|e| FsError::io(format!("stat {}", self.sums_path.display()), &e))?
            .len();
        let start = sums::slot_offset(slots.len() as u64);
        if len <= start {
            return Ok(());
        }
        let mut buf = vec![0u8; (len - start) as usize / sums::SLOT_SIZE * sums::SLOT_SIZE];
        self.sums
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

    fn corrupt(&self, k: u64, why: &str) -> FsError {
        let b = 1u64 << self.log2;
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

    fn read_raw(&self, out: &mut [u8], pos: u64) -> FsResult<()> {
        self.data
            .read_exact_at(out, pos)
            .map_err(|e| FsError::io(format!("reading {}", self.data_path.display()), &e))
    }

    /// Reads `out.len()` bytes at data-log position `pos`, every block checked.
    pub fn read(&self, out: &mut [u8], pos: u64) -> FsResult<()> {
        let block = 1u64 << self.log2;
        let end = pos + out.len() as u64;
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
            self.checked_block(k, need_end, &mut scratch)?;
            let from = (at - bstart) as usize;
            let to = (need_end - bstart) as usize;
            if scratch.len() < to {
                return Err(self.corrupt(k, "has no checksum for the bytes asked for"));
            }
            out[(at - pos) as usize..(need_end - pos) as usize].copy_from_slice(&scratch[from..to]);
            at = need_end;
        }
        Ok(())
    }
}
