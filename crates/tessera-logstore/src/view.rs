//! Reading another process's logs: its index log parsed incrementally into one extent map
//! per file, its data log read through its block checksums.
//!
//! A damaged index record is repaired from its copy ([`tessera_core::index`]); a pair damaged
//! twice loses what it described, and which file it was about. Its bytes then read as missing
//! (the caller reports them with [`LogView::damage_note`]), and since it may have overwritten
//! earlier bytes of its file, a read served by a record older than it (earlier in the index,
//! of any file: each file's records are in the index in its write order) fails with EIO
//! instead of returning what may be stale. A lost pair proves harmless (a marker, not a
//! write) when the intact write records account for every byte of the data log: a lost
//! write would have had bytes of its own.
//!
//! The index log only grows (its writer appends a file's new records at that file's sync
//! points), so each refresh reads only what was appended since the last one.

use crate::checked::CheckedData;
use crate::library_fds::HeldFile;
use crate::{len_of, private, sums_path};
use std::collections::HashMap;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use tessera_core::index::{self, Damage, Entry, IndexHeader, ParsedRecords, Tail};
use tessera_core::range_map::Slice;
use tessera_core::{Errno, FsError, FsResult, RangeMap, RangeSet};

/// Where a logical byte sits: its data-log position, and the index-log offset of the record
/// that put it there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct At {
    pub pos: u64,
    pub record: u64,
}

impl Slice for At {
    fn advance(&self, by: u64) -> Self {
        At {
            pos: self.pos + by,
            record: self.record,
        }
    }
}

/// A reader's view of one process's logs.
#[derive(Debug)]
pub struct LogView {
    index: HeldFile,
    index_path: PathBuf,
    data: CheckedData,
    /// Bytes of the index log already applied to `maps`.
    parsed: u64,
    maps: HashMap<u64, RangeMap<At>>,
    /// Data-log positions the intact write records account for, in all and per file.
    described: RangeSet,
    described_by: HashMap<u64, RangeSet>,
    tail: Tail,
    damage: Vec<Damage>,
    /// The index-log offset of the latest lost pair.
    lost: Option<u64>,
    header: Option<IndexHeader>,
}

impl LogView {
    /// Opens the logs; `ENOENT` if the process never wrote on this node.
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
            maps: HashMap::new(),
            described: RangeSet::new(),
            described_by: HashMap::new(),
            tail: Tail::Clean,
            damage: Vec::new(),
            lost: None,
            header: None,
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
            self.header = header;
            body = &buf[index::HEADER_SIZE..];
            self.parsed = index::HEADER_SIZE as u64;
        }
        let parsed = index::parse_records(body, self.parsed);
        for (n, t) in parsed.entries.iter().enumerate() {
            let record = self.parsed + (n * index::PAIR_SIZE) as u64;
            match t.entry {
                Entry::Write(r) => {
                    let map = self.maps.entry(t.ino).or_default();
                    for (s, e, pos) in r.pieces() {
                        map.insert(s, e, At { pos, record });
                    }
                    if r.log_bytes() > 0 {
                        let (s, e) = (r.log_offset, r.log_offset + r.log_bytes());
                        self.described.add(s, e);
                        self.described_by.entry(t.ino).or_default().add(s, e);
                    }
                }
                Entry::Lost { offset } => self.lost = Some(offset),
                _ => {}
            }
        }
        self.damage.extend(parsed.damage);
        self.parsed += parsed.consumed as u64;
        self.tail = parsed.tail;
        Ok(())
    }

    /// Whether the index log's header was read (a log being created has none yet).
    pub fn has_header(&self) -> bool {
        self.parsed > 0
    }

    /// The log's identity, once its header was read.
    pub fn header(&self) -> Option<IndexHeader> {
        self.header
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

    /// Whether this log holds every byte of `[start, end)` of file `ino`.
    pub fn covers(&self, ino: u64, start: u64, end: u64) -> bool {
        self.maps.get(&ino).is_some_and(|m| m.covers(start, end))
    }

    /// The files whose bytes this log serves (those it was told to forget are not).
    pub fn files(&self) -> impl Iterator<Item = u64> + '_ {
        self.maps.keys().copied()
    }

    /// Every file this log holds writes of, forgotten ones too.
    pub fn written_files(&self) -> impl Iterator<Item = u64> + '_ {
        self.described_by.keys().copied()
    }

    /// The data-log positions of every write of file `ino` the index holds (superseded ones
    /// too): what the log would give back if the file went.
    pub fn positions_of(&self, ino: u64) -> Option<&RangeSet> {
        self.described_by.get(&ino)
    }

    /// Forgets file `ino` (it was removed): its bytes read as missing from now on.
    pub fn forget(&mut self, ino: u64) {
        self.maps.remove(&ino);
    }

    /// The data log's path.
    pub fn data_path(&self) -> &Path {
        self.data.data_path()
    }

    /// The index-log offset before which records may be stale: the latest lost pair's,
    /// unless the intact records account for the whole data log.
    fn stale_before(&self) -> FsResult<Option<u64>> {
        let Some(lost) = self.lost else {
            return Ok(None);
        };
        let data_len = self.data.data_len()?;
        Ok((!self.described.covers(0, data_len)).then_some(lost))
    }

    /// Fills `out` with bytes `[start, start + out.len())` of file `ino`, every block
    /// checked; returns the sub-ranges this log does not hold (left untouched in `out`).
    pub fn read(&self, ino: u64, start: u64, out: &mut [u8]) -> FsResult<Vec<(u64, u64)>> {
        self.read_ranges(ino, &[(start, start + out.len() as u64)], out)
    }

    /// Fills `out` with the bytes of file `ino` in `ranges`, concatenated, every block
    /// checked; returns the sub-ranges this log does not hold. Pieces that lie one after the
    /// other both in the log and in `out` (a writer's strided pieces, read back in order) are
    /// read as one: one device read, and no partial blocks between them read twice.
    pub fn read_ranges(
        &self,
        ino: u64,
        ranges: &[(u64, u64)],
        out: &mut [u8],
    ) -> FsResult<Vec<(u64, u64)>> {
        let Some(map) = self.maps.get(&ino) else {
            return Ok(ranges.to_vec());
        };
        let stale_before = self.stale_before()?;
        // (log position, offset in `out`, length)
        let mut spans: Vec<(u64, usize, usize)> = Vec::new();
        let mut missing = Vec::new();
        let mut at = 0usize;
        for &(start, end) in ranges {
            for ext in map.overlapping(start, end) {
                if let Some(offset) = stale_before
                    && ext.value.record < offset
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
                let o = at + (ext.start - start) as usize;
                let len = (ext.end - ext.start) as usize;
                match spans.last_mut() {
                    Some((pos, a, l)) if *pos + *l as u64 == ext.value.pos && *a + *l == o => {
                        *l += len;
                    }
                    _ => spans.push((ext.value.pos, o, len)),
                }
            }
            missing.extend(map.gaps(start, end));
            at += (end - start) as usize;
        }
        for (pos, a, len) in spans {
            self.data.read(&mut out[a..a + len], pos)?;
        }
        Ok(missing)
    }
}

/// Every entry of an index log (or journal), parsed once (for a daemon publishing what a
/// process that died had not), with the log's identity.
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
