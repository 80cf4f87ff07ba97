//! The index log: where each logical byte a process wrote sits in its data log, and what of
//! it the process has published.
//!
//! A process keeps a data log (the bytes it wrote, appended in write order) and an index log
//! (this format). Every record names the file (`ino`) it is about, so one log can hold the
//! writes of many files; its header names the log (the writing process's log id, its node and
//! the log's epoch). The byte layout is specified in `docs/format.md`; in short:
//!
//! ```text
//! header  (32 B)  magic "TSXI" | version u16 | record size u16 | log u64 | node u32 | epoch u32 | txn u32 | crc32c u32
//! record  (56 B)  ino u64 | a u64 | b u64 | c u64 | d u64 | e u64 | kind u8 | 0 0 0 | crc32c u32
//! ```
//!
//! All integers are little-endian; each CRC32C covers the bytes before it in its header or
//! record. **Every record is written twice in a row** (a pair, one write): a damaged copy is
//! repaired from the other, so one flipped byte loses nothing, and a pair whose copies are
//! both damaged loses only what it described (see [`ParsedRecords::entries`]). Kinds:
//!
//! * 1, a strided run of writes contiguous in the data log (`a` start, `b` len, `c` stride,
//!   `d` count, `e` log offset): piece `i` covers logical `[start + i*stride, +len)` and sits at
//!   `log offset + i*len`. Later records win over earlier ones where they overlap.
//! * 2, published up to data-log position `e`: every write stored below it has been attached.
//! * 3, a range published (`a` start, `b` length) when the data log held `e` bytes, by an
//!   attach of part of the writes.
//! * 4, truncated to `a` bytes by this process when the data log held `e` bytes: its
//!   unpublished writes stored below `e` lose their bytes beyond `a`.
//!
//! Markers say where in the data log they were made, not where in the index log they sit, so
//! they never close the open run (a strided pattern stays one record however often the
//! process publishes). They let a daemon publish, after the process died, exactly what it had
//! written and not yet published ([`unpublished`], over one file's entries). A marker of a
//! file is about that file's writes only; positions are the shared data log's.
//!
//! [`IndexBuilder`] turns a stream of writes into records, extending the current record while
//! the writes continue its pattern, and writes them through: the log's last pair is rewritten
//! in place as its run grows. [`parse_header`] and [`parse_records`] read the log back: a torn
//! tail (an incomplete pair: a crash mid-append, or a writer still appending) is reported,
//! never used.

use crate::run::Run;

pub const MAGIC: [u8; 4] = *b"TSXI";
pub const VERSION: u16 = 3;
pub const HEADER_SIZE: usize = 32;
pub const RECORD_SIZE: usize = 56;
/// A record and its copy.
pub const PAIR_SIZE: usize = 2 * RECORD_SIZE;
/// Record kinds.
pub const KIND_WRITE_RUN: u8 = 1;
pub const KIND_PUBLISHED: u8 = 2;
pub const KIND_PUBLISHED_RANGE: u8 = 3;
pub const KIND_TRUNCATED: u8 = 4;

/// Identity of the log, repeated in its header so a misplaced file is detected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexHeader {
    /// The writing process's log id (its client id, or its transaction's log).
    pub log: u64,
    pub node: u32,
    /// Which of the log's successive files this is (a log moves to a new epoch when its
    /// files have grown large, so that space is given back by dropping whole epochs).
    pub epoch: u32,
    /// A transaction's log (written by one of its members), not a process's own.
    pub txn: bool,
}

/// An entry and the file it is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tagged {
    /// The file's inode number; 0 for a lost pair, whose file is unknown.
    pub ino: u64,
    pub entry: Entry,
}

/// A strided run of logical ranges stored contiguously from `log_offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexRecord {
    pub run: Run,
    pub log_offset: u64,
}

impl IndexRecord {
    /// The pieces as (logical start, logical end, log offset), in write order.
    pub fn pieces(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.run
            .pieces()
            .enumerate()
            .map(|(i, (s, e))| (s, e, self.log_offset + i as u64 * self.run.len))
    }

    /// Bytes of the data log this record accounts for.
    pub fn log_bytes(&self) -> u64 {
        self.run.bytes()
    }
}

/// One entry of the index log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    Write(IndexRecord),
    /// Every write stored below data-log position `pos` has been published (attached).
    PublishedUpTo {
        pos: u64,
    },
    /// `[start, end)` was published when the data log held `at` bytes.
    PublishedRange {
        start: u64,
        end: u64,
        at: u64,
    },
    /// The process truncated the file to `size` when the data log held `at` bytes.
    Truncated {
        size: u64,
        at: u64,
    },
    /// A pair whose copies are both damaged: what it said is unknown. `offset` is the pair's
    /// byte offset in the index log.
    Lost {
        offset: u64,
    },
}

/// Why an index log could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error("index header is not a Tessera index (bad magic or checksum)")]
    BadHeader,
    #[error("index format version {0} is not supported (this build reads version {VERSION})")]
    UnsupportedVersion(u16),
}

/// How the readable part of an index log ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tail {
    /// Every byte belonged to a complete pair.
    Clean,
    /// The last `bytes` bytes from `offset` are an incomplete pair: a crash mid-append, or a
    /// writer still appending. They are not used.
    Torn { offset: u64, bytes: u64 },
}

pub fn encode_header(h: &IndexHeader) -> [u8; HEADER_SIZE] {
    let mut b = [0u8; HEADER_SIZE];
    b[0..4].copy_from_slice(&MAGIC);
    b[4..6].copy_from_slice(&VERSION.to_le_bytes());
    b[6..8].copy_from_slice(&(RECORD_SIZE as u16).to_le_bytes());
    b[8..16].copy_from_slice(&h.log.to_le_bytes());
    b[16..20].copy_from_slice(&h.node.to_le_bytes());
    b[20..24].copy_from_slice(&h.epoch.to_le_bytes());
    b[24..28].copy_from_slice(&u32::from(h.txn).to_le_bytes());
    let crc = crc32c::crc32c(&b[0..28]);
    b[28..32].copy_from_slice(&crc.to_le_bytes());
    b
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Parses the header; `Ok(None)` if fewer than [`HEADER_SIZE`] bytes exist yet (torn create).
pub fn parse_header(b: &[u8]) -> Result<Option<IndexHeader>, FormatError> {
    if b.len() < HEADER_SIZE {
        return Ok(None);
    }
    let h = &b[..HEADER_SIZE];
    let crc = u32::from_le_bytes(h[28..32].try_into().expect("4 bytes"));
    if h[0..4] != MAGIC || crc32c::crc32c(&h[0..28]) != crc {
        return Err(FormatError::BadHeader);
    }
    let version = u16::from_le_bytes([h[4], h[5]]);
    let record_size = u16::from_le_bytes([h[6], h[7]]);
    if version != VERSION || record_size as usize != RECORD_SIZE {
        return Err(FormatError::UnsupportedVersion(version));
    }
    Ok(Some(IndexHeader {
        log: u64_at(h, 8),
        node: u32::from_le_bytes(h[16..20].try_into().expect("4 bytes")),
        epoch: u32::from_le_bytes(h[20..24].try_into().expect("4 bytes")),
        txn: u32::from_le_bytes(h[24..28].try_into().expect("4 bytes")) != 0,
    }))
}

/// One record (a single copy) of an entry about file `ino`.
pub fn encode_record(ino: u64, e: &Entry) -> [u8; RECORD_SIZE] {
    let (fields, kind): ([u64; 5], u8) = match *e {
        Entry::Write(r) => (
            [
                r.run.start,
                r.run.len,
                r.run.stride,
                r.run.count,
                r.log_offset,
            ],
            KIND_WRITE_RUN,
        ),
        Entry::PublishedUpTo { pos } => ([0, 0, 0, 0, pos], KIND_PUBLISHED),
        Entry::PublishedRange { start, end, at } => {
            ([start, end - start, 0, 0, at], KIND_PUBLISHED_RANGE)
        }
        Entry::Truncated { size, at } => ([size, 0, 0, 0, at], KIND_TRUNCATED),
        Entry::Lost { .. } => unreachable!("a lost entry is never written"),
    };
    let mut b = [0u8; RECORD_SIZE];
    b[0..8].copy_from_slice(&ino.to_le_bytes());
    for (i, f) in fields.iter().enumerate() {
        b[8 + i * 8..16 + i * 8].copy_from_slice(&f.to_le_bytes());
    }
    b[48] = kind;
    let crc = crc32c::crc32c(&b[0..52]);
    b[52..56].copy_from_slice(&crc.to_le_bytes());
    b
}

/// The pair (record and copy) of an entry about file `ino`, as appended to the log.
pub fn encode_pair(ino: u64, e: &Entry) -> [u8; PAIR_SIZE] {
    let r = encode_record(ino, e);
    let mut b = [0u8; PAIR_SIZE];
    b[..RECORD_SIZE].copy_from_slice(&r);
    b[RECORD_SIZE..].copy_from_slice(&r);
    b
}

/// The entry a record holds, if it is intact and well formed.
fn decode_record(b: &[u8]) -> Option<Tagged> {
    let crc = u32::from_le_bytes(b[52..56].try_into().expect("4 bytes"));
    if crc32c::crc32c(&b[0..52]) != crc {
        return None;
    }
    let ino = u64_at(b, 0);
    let f = |i: usize| u64_at(b, 8 + i * 8);
    let entry = match b[48] {
        KIND_WRITE_RUN => {
            let run = Run {
                start: f(0),
                len: f(1),
                stride: f(2),
                count: f(3),
            };
            // The pieces' data-log positions must exist (no overflow past them).
            let valid = run.is_valid() && f(4).checked_add(run.bytes()).is_some();
            valid.then_some(Entry::Write(IndexRecord {
                run,
                log_offset: f(4),
            }))
        }
        KIND_PUBLISHED => Some(Entry::PublishedUpTo { pos: f(4) }),
        KIND_PUBLISHED_RANGE => Some(Entry::PublishedRange {
            start: f(0),
            end: f(0).checked_add(f(1))?,
            at: f(4),
        }),
        KIND_TRUNCATED => Some(Entry::Truncated {
            size: f(0),
            at: f(4),
        }),
        _ => None,
    }?;
    Some(Tagged { ino, entry })
}

/// A damaged record found while parsing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Damage {
    /// Byte offset of the damaged record (or of the pair, when both copies are damaged).
    pub offset: u64,
    /// Whether the other copy of the pair was intact (nothing was lost).
    pub repaired: bool,
}

/// Result of parsing a stretch of pairs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedRecords {
    /// The entries in log order; a pair lost to damage appears as [`Entry::Lost`].
    pub entries: Vec<Tagged>,
    /// Bytes of the input consumed by complete pairs (a multiple of [`PAIR_SIZE`]).
    pub consumed: usize,
    pub tail: Tail,
    pub damage: Vec<Damage>,
}

impl ParsedRecords {
    /// The entries about file `ino`, in log order, with every lost pair (which may have
    /// been about it).
    pub fn of(&self, ino: u64) -> Vec<Entry> {
        self.entries
            .iter()
            .filter(|t| t.ino == ino || matches!(t.entry, Entry::Lost { .. }))
            .map(|t| t.entry)
            .collect()
    }
}

/// Of two intact copies of one pair that differ, the one that extends the other (the same
/// run of the same file grown by later writes), if that is what they are.
fn newer_of(x: Tagged, y: Tagged) -> Option<Tagged> {
    let (Entry::Write(a), Entry::Write(b)) = (x.entry, y.entry) else {
        return None;
    };
    if x.ino != y.ino {
        return None;
    }
    let (small, big) = if a.log_bytes() <= b.log_bytes() {
        (a, b)
    } else {
        (b, a)
    };
    let same_start = small.log_offset == big.log_offset && small.run.start == big.run.start;
    let grown = if small.run.count == 1 && big.run.count == 1 {
        small.run.len <= big.run.len
    } else if small.run.count == 1 {
        small.run.len == big.run.len
    } else {
        small.run.len == big.run.len
            && small.run.stride == big.run.stride
            && small.run.count <= big.run.count
    };
    (same_start && grown).then_some(Tagged {
        ino: x.ino,
        entry: Entry::Write(big),
    })
}

/// Parses the pairs in `buf`, which starts `base` bytes into the log (after the header). Never
/// fails: a damaged copy is repaired from the other one, a pair damaged twice is
/// [`Entry::Lost`], an incomplete last pair is a torn tail.
pub fn parse_records(buf: &[u8], base: u64) -> ParsedRecords {
    let pairs = buf.len() / PAIR_SIZE;
    let mut entries = Vec::with_capacity(pairs);
    let mut damage = Vec::new();
    for p in 0..pairs {
        let at = p * PAIR_SIZE;
        let offset = base + at as u64;
        let (a, b) = (
            &buf[at..at + RECORD_SIZE],
            &buf[at + RECORD_SIZE..at + PAIR_SIZE],
        );
        match (decode_record(a), decode_record(b)) {
            (Some(x), Some(y)) if x == y => entries.push(x),
            // A rewrite of the open run cut by a crash: the larger copy is the newer one,
            // and its bytes were written before it.
            (Some(x), Some(y)) if let Some(newer) = newer_of(x, y) => entries.push(newer),
            (Some(x), None) => {
                entries.push(x);
                damage.push(Damage {
                    offset: offset + RECORD_SIZE as u64,
                    repaired: true,
                });
            }
            (None, Some(y)) => {
                entries.push(y);
                damage.push(Damage {
                    offset,
                    repaired: true,
                });
            }
            // Both damaged, or two intact copies that disagree: nothing to trust.
            _ => {
                entries.push(Tagged {
                    ino: 0,
                    entry: Entry::Lost { offset },
                });
                damage.push(Damage {
                    offset,
                    repaired: false,
                });
            }
        }
    }
    let consumed = pairs * PAIR_SIZE;
    let tail = if consumed == buf.len() {
        Tail::Clean
    } else {
        Tail::Torn {
            offset: base + consumed as u64,
            bytes: (buf.len() - consumed) as u64,
        }
    };
    ParsedRecords {
        entries,
        consumed,
        tail,
        damage,
    }
}

/// The journal's entries that the index log lacks, in journal order: what a writer that
/// stopped (or a daemon that restarted under it) had not synced yet.
///
/// A sync gives the index one file's journal entries since its last sync, so each file's
/// entries in the index are a prefix of its entries in the journal, and the rest of them is
/// what is missing. Where a file's entries are not such a prefix (a damaged pair), all of its
/// journal entries are missing: appended again in order after what the index holds, they
/// leave every byte where the journal says (later records win). Lost pairs are skipped.
pub fn unsynced(journal: &ParsedRecords, index: &ParsedRecords) -> Vec<Tagged> {
    use std::collections::HashMap;
    let is_lost = |t: &&Tagged| matches!(t.entry, Entry::Lost { .. });
    let mut in_index: HashMap<u64, Vec<Entry>> = HashMap::new();
    for t in index.entries.iter().filter(|t| !is_lost(t)) {
        in_index.entry(t.ino).or_default().push(t.entry);
    }
    let mut in_journal: HashMap<u64, Vec<Entry>> = HashMap::new();
    for t in journal.entries.iter().filter(|t| !is_lost(t)) {
        in_journal.entry(t.ino).or_default().push(t.entry);
    }
    // How many of each file's journal entries the index already holds.
    let synced: HashMap<u64, usize> = in_journal
        .iter()
        .map(|(ino, j)| {
            let i = in_index.get(ino).map_or(&[][..], |v| &v[..]);
            (*ino, if j.starts_with(i) { i.len() } else { 0 })
        })
        .collect();
    let mut seen: HashMap<u64, usize> = HashMap::new();
    journal
        .entries
        .iter()
        .filter(|t| !is_lost(t))
        .filter(|t| {
            let n = seen.entry(t.ino).or_default();
            *n += 1;
            *n > synced[&t.ino]
        })
        .copied()
        .collect()
}

/// The part of a record stored at data-log positions `[lo, hi)`, as logical runs.
fn by_position(r: &IndexRecord, lo: u64, hi: u64) -> Vec<Run> {
    let (start, end) = (r.log_offset.max(lo), (r.log_offset + r.log_bytes()).min(hi));
    if start >= end {
        return Vec::new();
    }
    let run = r.run;
    // Pieces sit back to back in the log: position q is byte (q - log_offset) % len of piece
    // (q - log_offset) / len.
    let at = |q: u64| ((q - r.log_offset) / run.len, (q - r.log_offset) % run.len);
    let ((first, skip), (last, keep)) = (at(start), at(end - 1));
    let keep = keep + 1;
    let piece = |i: u64| run.start + i * run.stride;
    if first == last {
        return vec![Run::single(piece(first) + skip, keep - skip)];
    }
    let mut out = Vec::new();
    let mut from = first;
    if skip > 0 {
        out.push(Run::single(piece(first) + skip, run.len - skip));
        from += 1;
    }
    let to = if keep < run.len { last } else { last + 1 };
    if from < to {
        out.push(Run {
            start: piece(from),
            len: run.len,
            stride: if to - from == 1 { run.len } else { run.stride },
            count: to - from,
        });
    }
    if keep < run.len {
        out.push(Run::single(piece(last), keep));
    }
    out
}

/// The data-log position at which a marker was made.
fn marker_position(e: &Entry) -> u64 {
    match e {
        Entry::PublishedRange { at, .. } | Entry::Truncated { at, .. } => *at,
        Entry::PublishedUpTo { pos } => *pos,
        Entry::Write(_) | Entry::Lost { .. } => 0,
    }
}

/// What of `r` a marker leaves unpublished.
fn cut(marker: &Entry, r: &Run) -> Vec<Run> {
    match *marker {
        Entry::PublishedRange { start, end, .. } => {
            let mut kept = r.clip(0, start);
            kept.extend(r.clip(end, u64::MAX));
            kept
        }
        Entry::Truncated { size, .. } => r.clip(0, size),
        _ => vec![*r],
    }
}

/// What a process had written and not yet published, as logical runs, from its index
/// entries and `floor` (a position its daemon knows it published up to): writes stored at or
/// above the highest published position, less the ranges published after they were written
/// and cut at the truncates made after they were written. Work and memory grow with the
/// records, not with the writes. A lost entry is skipped (the caller reports it).
pub fn unpublished(entries: &[Entry], floor: u64) -> Vec<Run> {
    let frontier = entries.iter().fold(floor, |f, e| match e {
        Entry::PublishedUpTo { pos } => f.max(*pos),
        _ => f,
    });
    // Markers apply to what was stored before them: taken in position order, each one moves
    // the records below it into `settled`, to which it and every later marker apply.
    let mut markers: Vec<&Entry> = entries
        .iter()
        .filter(|e| matches!(e, Entry::PublishedRange { .. } | Entry::Truncated { .. }))
        .collect();
    markers.sort_by_key(|e| marker_position(e));
    let mut pending: Vec<(IndexRecord, u64)> = entries
        .iter()
        .filter_map(|e| match e {
            Entry::Write(r) => Some((*r, frontier)),
            _ => None,
        })
        .collect();
    let mut settled: Vec<Run> = Vec::new();
    for m in markers {
        let at = marker_position(m);
        for (r, lo) in &mut pending {
            if *lo < at {
                settled.extend(by_position(r, *lo, at));
                *lo = at;
            }
        }
        settled = settled.iter().flat_map(|r| cut(m, r)).collect();
    }
    for (r, lo) in &pending {
        settled.extend(by_position(r, *lo, u64::MAX));
    }
    settled
}

/// What one write changes in the index log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Append {
    /// The open run grew: rewrite the log's last pair in place with this one.
    Rewrite([u8; PAIR_SIZE]),
    /// Append these pairs (a marker waiting to be written, then the new open run).
    New(Vec<u8>),
}

/// Turns a stream of writes to one file into index records, one record per strided pattern,
/// written through: every write updates the index log at once (a process killed at any
/// moment loses no write that finished), and the log still grows with patterns, not writes.
///
/// A write that extends the open run rewrites that run's pair in place, wherever it sits
/// in the log (a larger run, a superset of the old one; see [`parse_records`] for a rewrite
/// cut by a crash). A write that does not extend it appends a new pair. Markers close
/// the open run (the next write starts a new one), except the published-up-to marker, which
/// waits in memory for the next new pair: the daemon learns the same from the attach itself.
#[derive(Clone, Debug, Default)]
pub struct IndexBuilder {
    /// The file whose records this builder makes.
    ino: u64,
    open: Option<IndexRecord>,
    records_written: u64,
    /// The highest published-up-to position not written yet (one marker for many).
    published: Option<u64>,
}

impl IndexBuilder {
    /// A builder of the records of file `ino`.
    pub fn new(ino: u64) -> Self {
        IndexBuilder {
            ino,
            ..Self::default()
        }
    }

    /// The file whose records this builder makes.
    pub fn ino(&self) -> u64 {
        self.ino
    }

    /// Records a write of logical `[start, start + len)` stored at `log_offset` in the data
    /// log; returns what to write to the index log.
    pub fn push(&mut self, start: u64, len: u64, log_offset: u64) -> Option<Append> {
        if len == 0 {
            return None;
        }
        if let Some(r) = &mut self.open
            && log_offset == r.log_offset + r.run.bytes()
        {
            let run = &mut r.run;
            let extended = if run.count == 1 && start == run.start + run.len {
                // Sequential: the single piece grows.
                run.len += len;
                run.stride = run.len;
                true
            } else if run.count == 1 && len == run.len && start >= run.start + run.len {
                run.stride = start - run.start;
                run.count = 2;
                true
            } else if run.count > 1
                && len == run.len
                && Some(start)
                    == run
                        .stride
                        .checked_mul(run.count)
                        .and_then(|x| x.checked_add(run.start))
            {
                run.count += 1;
                true
            } else {
                false
            };
            if extended {
                // Each write ends within the largest file size, so the run stays valid.
                debug_assert!(r.run.is_valid(), "{r:?}");
                return Some(Append::Rewrite(encode_pair(self.ino, &Entry::Write(*r))));
            }
        }
        let mut bytes = self.take_published();
        let r = IndexRecord {
            run: Run::single(start, len),
            log_offset,
        };
        bytes.extend_from_slice(&encode_pair(self.ino, &Entry::Write(r)));
        self.open = Some(r);
        self.records_written += 1;
        Some(Append::New(bytes))
    }

    /// Notes that every write stored below `pos` is published; written with the next new
    /// pair, as one marker however many publications came before it.
    pub fn mark_published(&mut self, pos: u64) {
        self.published = Some(self.published.map_or(pos, |p| p.max(pos)));
    }

    fn take_published(&mut self) -> Vec<u8> {
        match self.published.take() {
            Some(pos) => encode_pair(self.ino, &Entry::PublishedUpTo { pos }).to_vec(),
            None => Vec::new(),
        }
    }

    /// A marker (published range, truncated) to append now; it closes the open run.
    pub fn mark(&mut self, e: Entry) -> Vec<u8> {
        debug_assert!(!matches!(e, Entry::Write(_) | Entry::Lost { .. }));
        self.open = None;
        let mut bytes = self.take_published();
        bytes.extend_from_slice(&encode_pair(self.ino, &e));
        bytes
    }

    /// Closes the open run: the next write starts a new record (at a sync point, after which
    /// the record is read by others and must not change).
    pub fn close(&mut self) {
        self.open = None;
    }

    /// The waiting published-up-to marker, to append now (it closes the open run); empty if
    /// there is none.
    pub fn flush_published(&mut self) -> Vec<u8> {
        let bytes = self.take_published();
        if !bytes.is_empty() {
            self.open = None;
        }
        bytes
    }

    /// The open run, if any.
    pub fn open_record(&self) -> Option<IndexRecord> {
        self.open
    }

    /// Number of write records started so far.
    pub fn records_written(&self) -> u64 {
        self.records_written
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INO: u64 = 0x2a_0000_0007;

    /// Golden bytes of the index log: its header and one pair of each entry kind written. A
    /// change here makes every existing index log unreadable: bump `VERSION` and re-bless
    /// (`TESSERA_BLESS=1 cargo test -p tessera-core golden`).
    #[test]
    fn golden_index_bytes() {
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        let header = IndexHeader {
            log: 42,
            node: 3,
            epoch: 5,
            txn: false,
        };
        let ino = (3 << 48) | 17;
        let entries = [
            (
                "write",
                Entry::Write(IndexRecord {
                    run: Run {
                        start: 47001,
                        len: 47001,
                        stride: 188_004,
                        count: 1000,
                    },
                    log_offset: 4096,
                }),
            ),
            ("published_up_to", Entry::PublishedUpTo { pos: 1 << 33 }),
            (
                "published_range",
                Entry::PublishedRange {
                    start: 10,
                    end: 20,
                    at: 30,
                },
            ),
            ("truncated", Entry::Truncated { size: 7, at: 8 }),
        ];
        let mut text = format!("header {}\n", hex(&encode_header(&header)));
        for (name, e) in &entries {
            text += &format!("{name} {}\n", hex(&encode_pair(ino, e)));
        }
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/index.txt");
        if std::env::var_os("TESSERA_BLESS").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &text).unwrap();
        }
        let committed = std::fs::read_to_string(&path)
            .expect("tests/golden/index.txt (create it with TESSERA_BLESS=1)");
        assert_eq!(text, committed, "the index log format changed");
        // And the committed bytes still parse to the same entries.
        let mut log = Vec::new();
        for (_, e) in &entries {
            log.extend_from_slice(&encode_pair(ino, e));
        }
        let parsed = parse_records(&log, 0);
        let want: Vec<Entry> = entries.iter().map(|(_, e)| *e).collect();
        assert_eq!(parsed.of(ino), want);
        assert!(parsed.entries.iter().all(|t| t.ino == ino));
    }
    use proptest::prelude::*;

    /// An index log body built from a builder's output, as a writer keeps it.
    #[derive(Default)]
    struct Log {
        bytes: Vec<u8>,
        last: Option<usize>,
    }

    impl Log {
        fn push(&mut self, b: &mut IndexBuilder, start: u64, len: u64, pos: u64) {
            match b.push(start, len, pos) {
                Some(Append::Rewrite(pair)) => {
                    let at = self.last.expect("a rewrite follows a new pair");
                    self.bytes[at..at + PAIR_SIZE].copy_from_slice(&pair);
                }
                Some(Append::New(bytes)) => {
                    self.last = Some(self.bytes.len() + bytes.len() - PAIR_SIZE);
                    self.bytes.extend_from_slice(&bytes);
                }
                None => {}
            }
        }

        fn append(&mut self, bytes: Vec<u8>) {
            if !bytes.is_empty() {
                self.last = None;
                self.bytes.extend_from_slice(&bytes);
            }
        }
    }

    fn writes_of(p: &ParsedRecords) -> Vec<IndexRecord> {
        p.entries
            .iter()
            .filter_map(|t| match t.entry {
                Entry::Write(r) => Some(r),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn header_round_trips_and_rejects_damage() {
        let h = IndexHeader {
            log: 9,
            node: 2,
            epoch: 7,
            txn: true,
        };
        let mut b = encode_header(&h);
        assert_eq!(parse_header(&b), Ok(Some(h)));
        assert_eq!(parse_header(&b[..10]), Ok(None));
        b[9] ^= 1;
        assert_eq!(parse_header(&b), Err(FormatError::BadHeader));
        let mut v1 = encode_header(&h);
        v1[4] = 1;
        let crc = crc32c::crc32c(&v1[0..28]);
        v1[28..32].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(parse_header(&v1), Err(FormatError::UnsupportedVersion(1)));
    }

    #[test]
    fn strided_checkpoint_costs_one_pair() {
        let (mut b, mut log) = (IndexBuilder::new(INO), Log::default());
        let (xfer, ranks, rank) = (47_001u64, 4u64, 1u64);
        for i in 0..5_000u64 {
            log.push(&mut b, (i * ranks + rank) * xfer, xfer, i * xfer);
        }
        let bytes = log.bytes;
        assert_eq!(bytes.len(), PAIR_SIZE);
        let parsed = parse_records(&bytes, 0);
        assert_eq!(
            writes_of(&parsed)[0].run,
            Run {
                start: xfer,
                len: xfer,
                stride: ranks * xfer,
                count: 5_000
            }
        );
    }

    #[test]
    fn sequential_writes_grow_one_piece() {
        let (mut b, mut log) = (IndexBuilder::new(INO), Log::default());
        for i in 0..10u64 {
            log.push(&mut b, i * 100, 100, i * 100);
        }
        let parsed = parse_records(&log.bytes, 0);
        assert_eq!(writes_of(&parsed).len(), 1);
        assert_eq!(writes_of(&parsed)[0].run, Run::single(0, 1000));
    }

    #[test]
    fn a_torn_pair_is_reported_not_used_and_a_damaged_copy_is_repaired() {
        let (mut b, mut log) = (IndexBuilder::new(INO), Log::default());
        log.push(&mut b, 0, 10, 0);
        log.push(&mut b, 500, 7, 10);
        let bytes = log.bytes;
        // Cut mid-pair: the second pair is torn.
        let cut = &bytes[..PAIR_SIZE + 60];
        let p = parse_records(cut, 32);
        assert_eq!(writes_of(&p).len(), 1);
        assert_eq!(
            p.tail,
            Tail::Torn {
                offset: 32 + PAIR_SIZE as u64,
                bytes: 60
            }
        );
        // One damaged copy anywhere: everything is still there, the damage reported.
        for at in [3, RECORD_SIZE + 3, PAIR_SIZE + 45, bytes.len() - 1] {
            let mut d = bytes.clone();
            d[at] ^= 0xff;
            let p = parse_records(&d, 0);
            assert_eq!(
                writes_of(&p),
                writes_of(&parse_records(&bytes, 0)),
                "flip at {at}"
            );
            assert_eq!(p.damage.len(), 1);
            assert!(p.damage[0].repaired);
        }
        // Both copies of the first pair: lost, the second still read.
        let mut d = bytes.clone();
        d[3] ^= 1;
        d[RECORD_SIZE + 3] ^= 1;
        let p = parse_records(&d, 0);
        assert_eq!(p.entries[0].entry, Entry::Lost { offset: 0 });
        assert_eq!(writes_of(&p).len(), 1);
        assert_eq!(p.tail, Tail::Clean);
    }

    #[test]
    fn a_record_whose_data_would_lie_past_the_last_position_is_refused() {
        let r = IndexRecord {
            run: Run::single(0, 100),
            log_offset: u64::MAX - 10,
        };
        let p = parse_records(&encode_pair(INO, &Entry::Write(r)), 0);
        assert_eq!(p.of(INO), vec![Entry::Lost { offset: 0 }]);
    }

    #[test]
    fn markers_round_trip_and_publications_leave_the_open_run_open() {
        let (mut b, mut log) = (IndexBuilder::new(INO), Log::default());
        log.push(&mut b, 0, 10, 0);
        b.mark_published(10);
        log.push(&mut b, 10, 10, 10);
        b.mark_published(20);
        log.push(&mut b, 20, 10, 20);
        let p = parse_records(&log.bytes, 0);
        assert_eq!(writes_of(&p).len(), 1, "publications do not break the run");
        assert_eq!(writes_of(&p)[0].run, Run::single(0, 30));
        log.append(b.mark(Entry::PublishedRange {
            start: 2,
            end: 5,
            at: 30,
        }));
        log.append(b.mark(Entry::Truncated { size: 8, at: 30 }));
        log.push(&mut b, 30, 10, 30);
        let p = parse_records(&log.bytes, 0);
        assert_eq!(
            p.of(INO),
            vec![
                Entry::Write(IndexRecord {
                    run: Run::single(0, 30),
                    log_offset: 0
                }),
                Entry::PublishedUpTo { pos: 20 },
                Entry::PublishedRange {
                    start: 2,
                    end: 5,
                    at: 30
                },
                Entry::Truncated { size: 8, at: 30 },
                Entry::Write(IndexRecord {
                    run: Run::single(30, 10),
                    log_offset: 30
                }),
            ]
        );
    }

    #[test]
    fn a_rewrite_cut_by_a_crash_keeps_the_larger_copy() {
        let (mut b, mut log) = (IndexBuilder::new(INO), Log::default());
        log.push(&mut b, 0, 8, 0);
        log.push(&mut b, 16, 8, 8);
        let old = log.bytes.clone();
        log.push(&mut b, 32, 8, 16);
        // The crash left the new first copy and the old second one.
        let mut torn = log.bytes.clone();
        torn[RECORD_SIZE..].copy_from_slice(&old[RECORD_SIZE..]);
        let p = parse_records(&torn, 0);
        assert_eq!(writes_of(&p), writes_of(&parse_records(&log.bytes, 0)));
        assert!(p.damage.is_empty());
    }

    /// One write of the model: logical `[start, start + len)` stored at log position `pos`.
    #[derive(Clone, Copy, Debug)]
    enum Step {
        Write { start: u64, len: u64 },
        PublishedUpTo,
        PublishedRange { start: u64, end: u64 },
        Truncated { size: u64 },
    }

    /// The bytes a byte model says are unpublished, and the entries a builder makes.
    fn run_steps(steps: &[Step], space: usize) -> (Vec<bool>, Vec<Entry>) {
        // (logical byte, log position) of every byte written, newest last.
        let mut written: Vec<(u64, u64)> = Vec::new();
        let mut markers: Vec<(u64, Step)> = Vec::new();
        let (mut b, mut log) = (IndexBuilder::new(INO), Log::default());
        let mut pos = 0u64;
        for s in steps {
            match *s {
                Step::Write { start, len } => {
                    log.push(&mut b, start, len, pos);
                    for k in 0..len {
                        written.push((start + k, pos + k));
                    }
                    pos += len;
                }
                Step::PublishedUpTo => b.mark_published(pos),
                Step::PublishedRange { start, end } => log.append(b.mark(Entry::PublishedRange {
                    start,
                    end,
                    at: pos,
                })),
                Step::Truncated { size } => log.append(b.mark(Entry::Truncated { size, at: pos })),
            }
            markers.push((pos, *s));
        }
        let mut dirty = vec![false; space];
        for (o, p) in written {
            let published = markers.iter().any(|(at, m)| {
                *at > p
                    && match *m {
                        Step::PublishedUpTo => true,
                        Step::PublishedRange { start, end } => start <= o && o < end,
                        Step::Truncated { size } => o >= size,
                        Step::Write { .. } => false,
                    }
            });
            if !published {
                dirty[o as usize] = true;
            }
        }
        log.append(b.flush_published());
        (dirty, parse_records(&log.bytes, 0).of(INO))
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            5 => (0u64..60, 1u64..6).prop_map(|(start, len)| Step::Write { start, len }),
            1 => Just(Step::PublishedUpTo),
            1 => (0u64..70, 0u64..30).prop_map(|(s, l)| Step::PublishedRange { start: s, end: s + l }),
            1 => (0u64..70).prop_map(|size| Step::Truncated { size }),
        ]
    }

    fn entry() -> impl Strategy<Value = Entry> {
        prop_oneof![
            4 => (0u64..40, 1u64..6, 0u64..8, 1u64..5).prop_map(|(start, len, gap, count)| {
                Entry::Write(IndexRecord {
                    run: Run { start, len, stride: len + gap, count },
                    log_offset: 0,
                })
            }),
            1 => (0u64..100).prop_map(|pos| Entry::PublishedUpTo { pos }),
            1 => (0u64..80, 0u64..30, 0u64..100).prop_map(|(s, l, at)| Entry::PublishedRange { start: s, end: s + l, at }),
            1 => (0u64..80, 0u64..100).prop_map(|(size, at)| Entry::Truncated { size, at }),
        ]
    }

    proptest! {
        /// Whatever the write stream, replaying the records gives each write's log position.
        #[test]
        fn records_replay_every_write(writes in proptest::collection::vec((0u64..64, 1u64..8), 1..60)) {
            let (mut b, mut index) = (IndexBuilder::new(INO), Log::default());
            let mut log = 0;
            let mut model = vec![None; 80];
            for (start, len) in &writes {
                index.push(&mut b, *start, *len, log);
                for k in 0..*len { model[(start + k) as usize] = Some(log + k); }
                log += len;
            }
            let parsed = parse_records(&index.bytes, 0);
            prop_assert_eq!(parsed.tail, Tail::Clean);
            let mut got = vec![None; 80];
            let mut total = 0;
            for r in writes_of(&parsed) {
                total += r.log_bytes();
                for (s, e, pos) in r.pieces() {
                    for k in 0..(e - s) { got[(s + k) as usize] = Some(pos + k); }
                }
            }
            prop_assert_eq!(total, log);
            prop_assert_eq!(got, model);
        }

        /// Writes to several files interleaved in one log (each file's open run rewritten
        /// where it sits) replay, file by file, to each write's log position.
        #[test]
        fn interleaved_files_replay_apart(
            writes in proptest::collection::vec((1u64..4, 0u64..64, 1u64..8), 1..80),
        ) {
            let mut builders: Vec<IndexBuilder> = (0..4).map(IndexBuilder::new).collect();
            let mut open_at: [Option<usize>; 4] = [None; 4];
            let mut bytes = Vec::new();
            let mut pos = 0;
            let mut model = vec![vec![None; 80]; 4];
            for &(ino, start, len) in &writes {
                match builders[ino as usize].push(start, len, pos) {
                    Some(Append::Rewrite(pair)) => {
                        let at = open_at[ino as usize].expect("a rewrite follows a new pair");
                        bytes[at..at + PAIR_SIZE].copy_from_slice(&pair);
                    }
                    Some(Append::New(b)) => {
                        open_at[ino as usize] = Some(bytes.len() + b.len() - PAIR_SIZE);
                        bytes.extend_from_slice(&b);
                    }
                    None => {}
                }
                for k in 0..len { model[ino as usize][(start + k) as usize] = Some(pos + k); }
                pos += len;
            }
            let parsed = parse_records(&bytes, 0);
            for ino in 1..4u64 {
                let mut got = vec![None; 80];
                for e in parsed.of(ino) {
                    let Entry::Write(r) = e else { continue };
                    for (s, e, at) in r.pieces() {
                        for k in 0..(e - s) { got[(s + k) as usize] = Some(at + k); }
                    }
                }
                prop_assert_eq!(&got, &model[ino as usize], "file {}", ino);
            }
        }

        /// `unpublished` agrees with a byte model of writes, publications and truncates,
        /// whatever the builder made of them (merged runs, markers inside open runs).
        #[test]
        fn unpublished_matches_the_model(steps in proptest::collection::vec(step(), 0..30)) {
            let space = 128;
            let (want, entries) = run_steps(&steps, space);
            let mut got = vec![false; space];
            for r in unpublished(&entries, 0) {
                prop_assert!(r.is_valid(), "{:?}", r);
                for (s, e) in r.pieces() {
                    for k in s..e { got[k as usize] = true; }
                }
            }
            prop_assert_eq!(got, want);
        }

        /// A flipped byte in any one record never changes what the log says.
        #[test]
        fn one_damaged_record_changes_nothing(
            entries in proptest::collection::vec(entry(), 1..12),
            at in any::<prop::sample::Index>(),
            x in 1u8..=255,
        ) {
            let (mut b, mut log) = (IndexBuilder::new(INO), Log::default());
            let mut pos = 0;
            for e in &entries {
                match e {
                    Entry::Write(r) => {
                        for (s, t, _) in r.pieces() { log.push(&mut b, s, t - s, pos); pos += t - s; }
                    }
                    Entry::PublishedUpTo { pos } => b.mark_published(*pos),
                    m => log.append(b.mark(*m)),
                }
            }
            log.append(b.flush_published());
            let bytes = log.bytes;
            let clean = parse_records(&bytes, 0);
            let mut d = bytes.clone();
            let i = at.index(d.len());
            d[i] ^= x;
            let damaged = parse_records(&d, 0);
            prop_assert_eq!(&damaged.entries, &clean.entries);
            prop_assert!(damaged.damage.len() == 1 && damaged.damage[0].repaired);
        }
    }
}
