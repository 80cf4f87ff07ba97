//! The framing of a daemon's state log (`meta.wal`): a header, then self-delimiting records
//! that can be found again after damage.
//!
//! ```text
//! header  (12 B)  magic "TSWL" | version u16 | reserved u16 (0) | crc32c u32 of the first 8 bytes
//! record          magic "TSWR" | length u32 | crc32c u32 of (length | payload) | payload
//! ```
//!
//! All integers are little-endian. The length is covered by the checksum, so a damaged length
//! cannot make a reader skip good records unnoticed; the record magic lets [`scan`] find the
//! next intact record after a damaged stretch. That is what separates the two ways a log
//! goes bad:
//!
//! * a **torn tail**: the bytes after the last intact record hold no intact record (a write
//!   cut by a crash: its changes were never acknowledged). The tail is dropped.
//! * **damage in the middle**: an intact record follows the bad bytes. Acknowledged changes
//!   lie after the damage, so nothing may be dropped silently: the daemon refuses to start and
//!   an explicit salvage keeps every intact record.

/// Magic of the header.
pub const MAGIC: [u8; 4] = *b"TSWL";
/// Format version of the state log, of its framing and of the records the daemon writes in
/// it; a log of another version is refused with both named. 3: ownership records carry runs.
pub const VERSION: u16 = 3;
/// Bytes of the header.
pub const HEADER_LEN: usize = 12;
/// Magic at the start of every record.
pub const RECORD_MAGIC: [u8; 4] = *b"TSWR";
/// Bytes of a record before its payload.
pub const RECORD_HEADER_LEN: usize = 12;

/// The header of a new log.
pub fn header() -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[0..4].copy_from_slice(&MAGIC);
    h[4..6].copy_from_slice(&VERSION.to_le_bytes());
    let crc = crc32c::crc32c(&h[0..8]);
    h[8..12].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Frames one record around `payload`.
pub fn encode_record(payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).expect("a state-log record is far below 4 GiB");
    let mut rec = Vec::with_capacity(RECORD_HEADER_LEN + payload.len());
    rec.extend_from_slice(&RECORD_MAGIC);
    rec.extend_from_slice(&len.to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&len.to_le_bytes()), payload);
    rec.extend_from_slice(&crc.to_le_bytes());
    rec.extend_from_slice(payload);
    rec
}

/// Why a log cannot be read at all.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("not a Tessera state log (bad magic or header checksum)")]
    NotALog,
    #[error("state log format version {found}; this build reads version {VERSION}")]
    Version { found: u16 },
}

/// A stretch of bytes that holds no intact record: `[start, end)` of the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Damage {
    pub start: usize,
    pub end: usize,
}

/// What [`scan`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scan {
    /// Intact records: (offset of the record, payload range), in log order.
    pub records: Vec<(usize, std::ops::Range<usize>)>,
    /// Damaged stretches followed by an intact record.
    pub damage: Vec<Damage>,
    /// Bytes after the last intact record that hold no intact record.
    pub torn: Option<Damage>,
}

impl Scan {
    /// Intact records that lie after the first damaged stretch (changes that were
    /// acknowledged after the damage, which a silent drop would lose).
    pub fn records_after_damage(&self) -> usize {
        match self.damage.first() {
            Some(d) => self.records.iter().filter(|(at, _)| *at >= d.end).count(),
            None => 0,
        }
    }
}

/// The payload range of an intact record at `at`, if there is one.
fn record_at(bytes: &[u8], at: usize) -> Option<std::ops::Range<usize>> {
    let head = bytes.get(at..at.checked_add(RECORD_HEADER_LEN)?)?;
    if head[0..4] != RECORD_MAGIC {
        return None;
    }
    let len = u32::from_le_bytes(head[4..8].try_into().expect("4 bytes"));
    let crc = u32::from_le_bytes(head[8..12].try_into().expect("4 bytes"));
    let start = at + RECORD_HEADER_LEN;
    let payload = bytes.get(start..start.checked_add(len as usize)?)?;
    (crc32c::crc32c_append(crc32c::crc32c(&len.to_le_bytes()), payload) == crc)
        .then(|| start..start + len as usize)
}

/// Reads a whole log: its header, every intact record, the damaged stretches between them and
/// a torn tail. An empty log, or one shorter than its header (a crash while it was created),
/// holds nothing.
pub fn scan(bytes: &[u8]) -> Result<Scan, HeaderError> {
    let mut out = Scan::default();
    if bytes.len() < HEADER_LEN {
        return Ok(out);
    }
    let crc = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    if bytes[0..4] != MAGIC || crc32c::crc32c(&bytes[0..8]) != crc {
        return Err(HeaderError::NotALog);
    }
    let version = u16::from_le_bytes([bytes[4], bytes[5]]);
    if version != VERSION {
        return Err(HeaderError::Version { found: version });
    }
    let mut at = HEADER_LEN;
    while at < bytes.len() {
        if let Some(payload) = record_at(bytes, at) {
            at = payload.end;
            out.records
                .push((payload.start - RECORD_HEADER_LEN, payload));
            continue;
        }
        // Every offset is tried: each step moves on by at least one byte.
        match (at + 1..bytes.len()).find(|q| record_at(bytes, *q).is_some()) {
            Some(next) => {
                out.damage.push(Damage {
                    start: at,
                    end: next,
                });
                at = next;
            }
            None => {
                out.torn = Some(Damage {
                    start: at,
                    end: bytes.len(),
                });
                break;
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn log(payloads: &[Vec<u8>]) -> (Vec<u8>, Vec<usize>) {
        let mut b = header().to_vec();
        let mut starts = Vec::new();
        for p in payloads {
            starts.push(b.len());
            b.extend_from_slice(&encode_record(p));
        }
        (b, starts)
    }

    fn payloads_of(bytes: &[u8], s: &Scan) -> Vec<Vec<u8>> {
        s.records
            .iter()
            .map(|(_, r)| bytes[r.clone()].to_vec())
            .collect()
    }

    #[test]
    fn intact_logs_read_back_and_headers_are_checked() {
        let ps = vec![b"one".to_vec(), Vec::new(), vec![7; 300]];
        let (b, _) = log(&ps);
        let s = scan(&b).unwrap();
        assert_eq!(payloads_of(&b, &s), ps);
        assert!(s.damage.is_empty() && s.torn.is_none());
        assert_eq!(scan(&[]).unwrap(), Scan::default());
        assert_eq!(scan(&b[..5]).unwrap(), Scan::default(), "a torn header");
        let mut v = b.clone();
        v[4] = 9;
        let crc = crc32c::crc32c(&v[0..8]);
        v[8..12].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(scan(&v), Err(HeaderError::Version { found: 9 }));
        let mut bad = b;
        bad[0] = b'X';
        assert_eq!(scan(&bad), Err(HeaderError::NotALog));
    }

    #[test]
    fn a_cut_last_record_is_a_torn_tail_and_middle_damage_is_not() {
        let ps: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 20]).collect();
        let (b, starts) = log(&ps);
        let cut = &b[..b.len() - 3];
        let s = scan(cut).unwrap();
        assert_eq!(payloads_of(cut, &s), ps[..4].to_vec());
        assert_eq!(
            s.torn,
            Some(Damage {
                start: starts[4],
                end: cut.len()
            })
        );
        assert!(s.damage.is_empty());
        // A flipped length in record 1: records 2.. are still found, and counted.
        let mut d = b.clone();
        d[starts[1] + 5] ^= 0x40;
        let s = scan(&d).unwrap();
        assert_eq!(
            s.damage,
            vec![Damage {
                start: starts[1],
                end: starts[2]
            }]
        );
        assert_eq!(s.records_after_damage(), 3);
        assert_eq!(payloads_of(&d, &s).len(), 4);
        assert!(s.torn.is_none());
    }

    proptest! {
        /// Whatever bytes are flipped, a scan returns only payloads that were written, in
        /// order, and every record untouched by the flips is among them.
        #[test]
        fn damage_never_invents_or_hides_intact_records(
            ps in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..12),
            flips in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..4),
        ) {
            let (mut b, starts) = log(&ps);
            let mut hit = vec![false; ps.len()];
            for (i, x) in &flips {
                let at = HEADER_LEN + i.index(b.len() - HEADER_LEN);
                b[at] ^= x;
                let rec = starts.iter().rposition(|s| *s <= at).expect("after the header");
                hit[rec] = true;
            }
            let s = scan(&b).unwrap();
            let got = payloads_of(&b, &s);
            // In order, a subsequence of what was written.
            let mut it = ps.iter();
            for g in &got {
                prop_assert!(it.any(|p| p == g), "invented or reordered: {:?}", g);
            }
            for (k, p) in ps.iter().enumerate() {
                if !hit[k] {
                    prop_assert!(s.records.iter().any(|(at, r)| *at == starts[k] && b[r.clone()] == p[..]));
                }
            }
            // Damage reported in the middle only when an intact record follows it.
            for d in &s.damage {
                prop_assert!(s.records.iter().any(|(at, _)| *at == d.end));
            }
        }
    }
}
