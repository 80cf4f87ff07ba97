//! Reading another process's logs: its index log parsed incrementally into an extent map, its
//! data log read through its block checksums.
//!
//! A damaged index record is repaired from its copy ([`tessera_core::index`]); a pair damaged
//! twice loses what it described. Its bytes then read as missing (the caller reports them with
//! [`LogView::damage_note`]), and since it may have overwritten earlier bytes of the log, a
//! read served by data older than it fails with EIO instead of returning what may be stale.
//! A lost pair proves harmless (a marker, not a write) when the next write record starts where
//! the data log stood before it.
//!
//! The index log only grows (its writer copies the journal's new records into it at sync
//! points), so each refresh reads only what was appended since the last one.

use crate::checked::CheckedData;
use crate::library_fds::HeldFile;
use crate::{len_of, private, sums_path};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use tessera_core::index::{self, Damage, Entry, IndexHeader, ParsedRecords, Tail};
use tessera_core::{Errno, FsError, FsResult, RangeMap};

/// A reader's view of one process's logs of one file.
#[derive(Debug)]
pub struct LogView {
    index: HeldFile,
    index_path: PathBuf,
    data: CheckedData,
    /// Bytes of the index log already applied to `map`.
    parsed: u64,
    map: RangeMap<u64>,
    tail: Tail,
    damage: Vec<Damage>,
    /// End of the data described by the write records so far.
    log_end: u64,
    /// A lost pair not yet known to be harmless: (its offset, `log_end` before it).
    lost: Option<(u64, u64)>,
    /// Data below this log position may be stale: (position, offset of the lost pair). The
    /// latest lost pair counts: it may have overwritten anything stored before it.
    horizon: Option<(u64, u64)>,
}

impl LogView {
    /// Opens the logs; `ENOENT` if the process never wrote this file on this node.
    pub fn open(data_path: &Path, index_path: &Path) -> FsResult<Self> {
        let sums = sums_path(data_path);
        let data = CheckedData::new(
            private::open_existing(data_path, false)?,
            data_path,
            private::open_existing(&sums, false)?,
            &sums,
        )?;
        let mut v = LogView {
            index: private::open_existing(index_path, false)?,
            index_path: index_path.to_path_buf(),
            data,
            parsed: 0,
            map: RangeMap::new(),
            tail: Tail::Clean,
            damage: Vec::new(),
            log_end: 0,
            lost: None,
            horizon: None,
        };
        v.refresh()?;
        Ok(v)
    }

    /// Applies index records appended since the last refresh. A torn tail is left for the
    /// next refresh (the writer may still be appending) and reported by [`LogView::tail`].
    pub fn refresh(&mut self) -> FsResult<()> {
        let len = len_of(&self.index.get(), &self.index_path)?;
        if len <= self.parsed {
            return Ok(());
        }
        let mut buf = vec![0u8; (len - self.parsed) as usize];
        self.index
            .get()
            .read_exact_at(&mut buf, self.parsed)
            .map_err(|e| FsError::io(format!("reading {}", self.index_path.display()), &e))?;
        let mut body: &[u8] = &buf;
        if self.parsed == 0 {
            let header = index::parse_header(&buf).map_err(|e| {
                FsError::new(Errno::Io, format!("{}: {e}", self.index_path.display()))
            })?;
            if header.is_none() {
                return Ok(()); // header not written yet
            }
            body = &buf[index::HEADER_SIZE..];
            self.parsed = index::HEADER_SIZE as u64;
        }
        let parsed = index::parse_records(body, self.parsed);
        for e in &parsed.entries {
            self.apply(e);
        }
        self.damage.extend(parsed.damage);
        self.parsed += parsed.consumed as u64;
        self.tail = parsed.tail;
        Ok(())
    }

    fn apply(&mut self, e: &Entry) {
        match e {
            Entry::Write(r) => {
                if let Some((offset, end)) = self.lost.take()
                    && r.log_offset != end
                {
                    // The lost pair described data: whatever it overwrote is unknown.
                    self.horizon =
                        Some(self.horizon.map_or((end, offset), |h| h.max((end, offset))));
                }
                for (s, e, pos) in r.pieces() {
                    self.map.insert(s, e, pos);
                }
                self.log_end = self.log_end.max(r.log_offset + r.log_bytes());
            }
            Entry::Lost { offset } => {
                if let Some((first, end)) = self.lost {
                    // Two in a row: the first one's data, if any, is as unknown.
                    self.horizon = Some(self.horizon.map_or((end, first), |h| h.max((end, first))));
                }
                self.lost = Some((*offset, self.log_end));
            }
            _ => {}
        }
    }

    /// How the index log ended at the last refresh.
    pub fn tail(&self) -> Tail {
        self.tail
    }

    /// Damaged index records found so far (repaired or not).
    pub fn damage(&self) -> &[Damage] {
        &self.damage
    }

    /// A sentence on unrepaired index damage, to add to an error about missing bytes.
    pub fn damage_note(&self) -> Option<String> {
        let lost: Vec<u64> = self
            .damage
            .iter()
            .filter(|d| !d.repaired)
            .map(|d| d.offset)
            .collect();
        let first = lost.first()?;
        Some(format!(
            "its index log {} has a damaged record at byte {first}{} whose bytes are lost",
            self.index_path.display(),
            if lost.len() > 1 {
                format!(" (and {} more)", lost.len() - 1)
            } else {
                String::new()
            }
        ))
    }

    /// Logical ranges this log holds, with their data-log positions.
    pub fn map(&self) -> &RangeMap<u64> {
        &self.map
    }

    /// Fills `out` with logical bytes `[start, start + out.len())`, every block checked;
    /// returns the sub-ranges this log does not hold (left untouched in `out`).
    pub fn read(&self, start: u64, out: &mut [u8]) -> FsResult<Vec<(u64, u64)>> {
        let end = start + out.len() as u64;
        // A lost pair not yet known to be harmless makes older data suspect.
        let horizon = match (self.horizon, self.lost) {
            (Some(h), Some((off, at))) => Some(h.max((at, off))),
            (h, None) => h,
            (None, Some((off, at))) => Some((at, off)),
        };
        for ext in self.map.overlapping(start, end) {
            if let Some((below, offset)) = horizon
                && ext.value < below
            {
                return Err(FsError::new(
                    Errno::Io,
                    format!(
                        "bytes [{}, {}) from {} may be stale: the index record at byte {offset} of {} that could have overwritten them is damaged",
                        ext.start,
                        ext.end,
                        self.data.data_path().display(),
                        self.index_path.display()
                    ),
                ));
            }
            let dst = &mut out[(ext.start - start) as usize..(ext.end - start) as usize];
            self.data.read(dst, ext.value)?;
        }
        Ok(self.map.gaps(start, end))
    }
}

/// Every entry of an index log, parsed once (for a daemon publishing what a process that
/// died had not), with the log's identity.
pub fn read_entries(index_path: &Path) -> FsResult<(IndexHeader, ParsedRecords)> {
    let held = private::open_existing(index_path, false)?;
    let f = held.get();
    let len = len_of(&f, index_path)?;
    let mut bytes = vec![0u8; len as usize];
    f.read_exact_at(&mut bytes, 0)
        .map_err(|e| FsError::io(format!("reading {}", index_path.display()), &e))?;
    let header = index::parse_header(&bytes)
        .map_err(|e| FsError::new(Errno::Io, format!("{}: {e}", index_path.display())))?
        .ok_or_else(|| {
            FsError::new(
                Errno::Io,
                format!("{}: no complete header", index_path.display()),
            )
        })?;
    Ok((
        header,
        index::parse_records(&bytes[index::HEADER_SIZE..], index::HEADER_SIZE as u64),
    ))
}
