//! The index log: where each logical byte a process wrote sits in its data log.
//!
//! Every process keeps, per file, a data log (the bytes it wrote, appended in write order) and
//! an index log (this format). The byte layout is specified in `docs/format.md`; in short:
//!
//! ```text
//! header  (32 B)  magic "TSXI" | version u16 | record size u16 | ino u64 | client u64 | node u32 | crc32c u32
//! record  (48 B)  start u64 | len u64 | stride u64 | count u64 | log offset u64 | kind u8 | 0 0 0 | crc32c u32
//! ```
//!
//! All integers are little-endian; each CRC32C covers the bytes before it in its header or
//! record. A record is a strided run of writes that are contiguous in the data log: piece `i`
//! covers logical `[start + i*stride, +len)` and sits at `log offset + i*len`. Later records win
//! over earlier ones where they overlap (file order is write order).
//!
//! [`IndexBuilder`] turns a stream of writes into records, extending the current record while
//! the writes continue its pattern. [`parse_header`] and [`parse_records`] read the log back and
//! classify the tail: a torn tail (a crash mid-append) is reported, never used; a bad record
//! followed by good ones is corruption and an error.

use crate::run::Run;

pub const MAGIC: [u8; 4] = *b"TSXI";
pub const VERSION: u16 = 1;
pub const HEADER_SIZE: usize = 32;
pub const RECORD_SIZE: usize = 48;
/// Record kind: a strided run of writes.
pub const KIND_WRITE_RUN: u8 = 1;

/// Identity of the log, repeated in its header so a misplaced file is detected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexHeader {
    pub ino: u64,
    pub client: u64,
    pub node: u32,
}

/// One index record: a strided run of logical ranges stored contiguously from `log_offset`.
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

/// Why an index log could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error("index header is not a Tessera index (bad magic or checksum)")]
    BadHeader,
    #[error("index format version {0} is not supported (this build reads version {VERSION})")]
    UnsupportedVersion(u16),
    #[error(
        "index record at byte {offset} is corrupt (checksum mismatch) and is followed by valid data"
    )]
    Corrupt { offset: u64 },
    #[error("index record at byte {offset} has unknown kind {kind}")]
    UnknownKind { offset: u64, kind: u8 },
    #[error("index record at byte {offset} describes an invalid run")]
    InvalidRun { offset: u64 },
}

/// How the readable part of an index log ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tail {
    /// Every byte belonged to a valid record.
    Clean,
    /// The last `bytes` bytes from `offset` are an incomplete or unchecksummed record: a crash
    /// mid-append, or a writer still appending. They are not used.
    Torn { offset: u64, bytes: u64 },
}

pub fn encode_header(h: &IndexHeader) -> [u8; HEADER_SIZE] {
    let mut b = [0u8; HEADER_SIZE];
    b[0..4].copy_from_slice(&MAGIC);
    b[4..6].copy_from_slice(&VERSION.to_le_bytes());
    b[6..8].copy_from_slice(&(RECORD_SIZE as u16).to_le_bytes());
    b[8..16].copy_from_slice(&h.ino.to_le_bytes());
    b[16..24].copy_from_slice(&h.client.to_le_bytes());
    b[24..28].copy_from_slice(&h.node.to_le_bytes());
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
        ino: u64_at(h, 8),
        client: u64_at(h, 16),
        node: u32::from_le_bytes(h[24..28].try_into().expect("4 bytes")),
    }))
}

pub fn encode_record(r: &IndexRecord) -> [u8; RECORD_SIZE] {
    let mut b = [0u8; RECORD_SIZE];
    b[0..8].copy_from_slice(&r.run.start.to_le_bytes());
    b[8..16].copy_from_slice(&r.run.len.to_le_bytes());
    b[16..24].copy_from_slice(&r.run.stride.to_le_bytes());
    b[24..32].copy_from_slice(&r.run.count.to_le_bytes());
    b[32..40].copy_from_slice(&r.log_offset.to_le_bytes());
    b[40] = KIND_WRITE_RUN;
    let crc = crc32c::crc32c(&b[0..44]);
    b[44..48].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Result of parsing a stretch of records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedRecords {
    pub records: Vec<IndexRecord>,
    /// Bytes of `buf` consumed by valid records (a multiple of [`RECORD_SIZE`]).
    pub consumed: usize,
    pub tail: Tail,
}

/// Parses the records in `buf`, which starts `base` bytes into the log (after the header).
///
/// A bad checksum on the *last* complete record counts as a torn tail (an append in progress
/// or cut by a crash); a bad checksum with a valid record after it is corruption.
pub fn parse_records(buf: &[u8], base: u64) -> Result<ParsedRecords, FormatError> {
    let mut records = Vec::with_capacity(buf.len() / RECORD_SIZE);
    let chunks = buf.len() / RECORD_SIZE;
    for i in 0..chunks {
        let b = &buf[i * RECORD_SIZE..(i + 1) * RECORD_SIZE];
        let offset = base + (i * RECORD_SIZE) as u64;
        let crc = u32::from_le_bytes(b[44..48].try_into().expect("4 bytes"));
        if crc32c::crc32c(&b[0..44]) != crc {
            let later_valid = (i + 1..chunks).any(|j| {
                let n = &buf[j * RECORD_SIZE..(j + 1) * RECORD_SIZE];
                crc32c::crc32c(&n[0..44]) == u32::from_le_bytes(n[44..48].try_into().expect("4"))
            });
            if later_valid {
                return Err(FormatError::Corrupt { offset });
            }
            return Ok(ParsedRecords {
                records,
                consumed: i * RECORD_SIZE,
                tail: Tail::Torn {
                    offset,
                    bytes: (buf.len() - i * RECORD_SIZE) as u64,
                },
            });
        }
        if b[40] != KIND_WRITE_RUN {
            return Err(FormatError::UnknownKind {
                offset,
                kind: b[40],
            });
        }
        let run = Run {
            start: u64_at(b, 0),
            len: u64_at(b, 8),
            stride: u64_at(b, 16),
            count: u64_at(b, 24),
        };
        if !run.is_valid() {
            return Err(FormatError::InvalidRun { offset });
        }
        records.push(IndexRecord {
            run,
            log_offset: u64_at(b, 32),
        });
    }
    let consumed = chunks * RECORD_SIZE;
    let tail = if consumed == buf.len() {
        Tail::Clean
    } else {
        Tail::Torn {
            offset: base + consumed as u64,
            bytes: (buf.len() - consumed) as u64,
        }
    };
    Ok(ParsedRecords {
        records,
        consumed,
        tail,
    })
}

/// Turns a stream of writes into index records, one record per strided pattern.
///
/// The current record stays open (in memory) while writes extend it; [`IndexBuilder::drain`]
/// encodes everything pending so the caller can append it to the index file at a sync point.
#[derive(Debug, Default)]
pub struct IndexBuilder {
    open: Option<IndexRecord>,
    encoded: Vec<u8>,
    records_written: u64,
}

impl IndexBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a write of logical `[start, start + len)` stored at `log_offset` in the data log.
    pub fn push(&mut self, start: u64, len: u64, log_offset: u64) {
        if len == 0 {
            return;
        }
        if let Some(r) = &mut self.open
            && log_offset == r.log_offset + r.run.bytes()
        {
            let run = &mut r.run;
            if run.count == 1 && start == run.start + run.len {
                // Sequential: the single piece grows.
                run.len += len;
                run.stride = run.len;
                return;
            }
            if run.count == 1 && len == run.len && start >= run.start + run.len {
                run.stride = start - run.start;
                run.count = 2;
                return;
            }
            if run.count > 1
                && len == run.len
                && Some(start)
                    == run
                        .stride
                        .checked_mul(run.count)
                        .and_then(|x| x.checked_add(run.start))
            {
                run.count += 1;
                return;
            }
        }
        self.close_open();
        self.open = Some(IndexRecord {
            run: Run::single(start, len),
            log_offset,
        });
    }

    fn close_open(&mut self) {
        if let Some(r) = self.open.take() {
            self.encoded.extend_from_slice(&encode_record(&r));
            self.records_written += 1;
        }
    }

    /// Closes the open record and returns all encoded, not yet drained records.
    pub fn drain(&mut self) -> Vec<u8> {
        self.close_open();
        std::mem::take(&mut self.encoded)
    }

    /// Returns the encoded closed records, leaving the open run open (it may still grow).
    pub fn drain_closed(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.encoded)
    }

    /// Bytes encoded but not drained (the open record is not counted).
    pub fn pending_bytes(&self) -> usize {
        self.encoded.len()
    }

    /// Whether anything (open record or encoded bytes) waits to be drained.
    pub fn has_pending(&self) -> bool {
        self.open.is_some() || !self.encoded.is_empty()
    }

    /// Number of records closed so far.
    pub fn records_written(&self) -> u64 {
        self.records_written
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn header_round_trips_and_rejects_damage() {
        let h = IndexHeader {
            ino: 7,
            client: 9,
            node: 2,
        };
        let mut b = encode_header(&h);
        assert_eq!(parse_header(&b), Ok(Some(h)));
        assert_eq!(parse_header(&b[..10]), Ok(None));
        b[9] ^= 1;
        assert_eq!(parse_header(&b), Err(FormatError::BadHeader));
        let mut v2 = encode_header(&h);
        v2[4] = 2;
        let crc = crc32c::crc32c(&v2[0..28]);
        v2[28..32].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(parse_header(&v2), Err(FormatError::UnsupportedVersion(2)));
    }

    #[test]
    fn strided_checkpoint_costs_one_record() {
        let mut b = IndexBuilder::new();
        let (xfer, ranks, rank) = (47_001u64, 4u64, 1u64);
        for i in 0..5_000u64 {
            b.push((i * ranks + rank) * xfer, xfer, i * xfer);
        }
        let bytes = b.drain();
        assert_eq!(bytes.len(), RECORD_SIZE);
        let parsed = parse_records(&bytes, 0).unwrap();
        assert_eq!(
            parsed.records[0].run,
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
        let mut b = IndexBuilder::new();
        for i in 0..10u64 {
            b.push(i * 100, 100, i * 100);
        }
        let parsed = parse_records(&b.drain(), 0).unwrap();
        assert_eq!(parsed.records.len(), 1);
        assert_eq!(parsed.records[0].run, Run::single(0, 1000));
    }

    #[test]
    fn torn_tail_is_reported_not_used() {
        let mut b = IndexBuilder::new();
        b.push(0, 10, 0);
        b.push(500, 7, 10);
        let bytes = b.drain();
        // Cut mid-record.
        let cut = &bytes[..RECORD_SIZE + 20];
        let p = parse_records(cut, 32).unwrap();
        assert_eq!(p.records.len(), 1);
        assert_eq!(
            p.tail,
            Tail::Torn {
                offset: 32 + RECORD_SIZE as u64,
                bytes: 20
            }
        );
        // Damage the last full record: also a torn tail.
        let mut damaged = bytes.clone();
        damaged[RECORD_SIZE + 3] ^= 0xff;
        let p = parse_records(&damaged, 0).unwrap();
        assert_eq!(p.records.len(), 1);
        assert!(matches!(p.tail, Tail::Torn { .. }));
        // Damage the first record while the second is valid: corruption.
        let mut corrupt = bytes;
        corrupt[3] ^= 0xff;
        assert_eq!(
            parse_records(&corrupt, 0),
            Err(FormatError::Corrupt { offset: 0 })
        );
    }

    proptest! {
        /// Whatever the write stream, replaying the records gives each write's log position.
        #[test]
        fn records_replay_every_write(writes in proptest::collection::vec((0u64..64, 1u64..8), 1..60)) {
            let mut b = IndexBuilder::new();
            let mut log = 0;
            let mut model = vec![None; 80];
            for (start, len) in &writes {
                b.push(*start, *len, log);
                for k in 0..*len { model[(start + k) as usize] = Some(log + k); }
                log += len;
            }
            let parsed = parse_records(&b.drain(), 0).unwrap();
            prop_assert_eq!(parsed.tail, Tail::Clean);
            let mut got = vec![None; 80];
            let mut total = 0;
            for r in &parsed.records {
                total += r.log_bytes();
                for (s, e, pos) in r.pieces() {
                    for k in 0..(e - s) { got[(s + k) as usize] = Some(pos + k); }
                }
            }
            prop_assert_eq!(total, log);
            prop_assert_eq!(got, model);
        }
    }
}
