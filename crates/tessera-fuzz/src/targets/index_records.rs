//! Index records: the pairs a writer appends to describe its data log, read by every
//! daemon that serves or publishes the data.
//!
//! A header and a list of entries are encoded, damaged and parsed. A header is accepted when
//! intact and refused when damaged; every pair yields one entry: the original when a copy is
//! intact (a damaged other copy is reported as repaired), [`Entry::Lost`] when neither is; an
//! incomplete last pair is a torn tail. Whatever the damage, the parsed write records are well
//! formed and what was left unpublished is computed without overflow and in time that does
//! not depend on how many bytes a run describes.

use super::damage::{Damage, damaged};
use arbitrary::{Arbitrary, Unstructured};
use tessera_core::Run;
use tessera_core::index::{
    self, Entry, HEADER_SIZE, IndexHeader, IndexRecord, PAIR_SIZE, RECORD_SIZE, Tail,
};

#[derive(Arbitrary, Debug)]
enum EntryIn {
    /// A run as writers make them.
    Write {
        start: u32,
        len: u16,
        gap: u16,
        count: u16,
        log_offset: u32,
    },
    /// A run of any size (kept only if valid).
    WideWrite {
        start: u64,
        len: u64,
        stride: u64,
        count: u64,
        log_offset: u64,
    },
    PublishedUpTo(u64),
    PublishedRange(u64, u64, u64),
    Truncated(u64, u64),
}

impl EntryIn {
    fn entry(&self) -> Option<Entry> {
        let write = |run: Run, log_offset: u64| {
            (run.is_valid() && log_offset.checked_add(run.bytes()).is_some())
                .then_some(Entry::Write(IndexRecord { run, log_offset }))
        };
        match *self {
            EntryIn::Write {
                start,
                len,
                gap,
                count,
                log_offset,
            } => {
                let len = len as u64 + 1;
                write(
                    Run {
                        start: start as u64,
                        len,
                        stride: len + gap as u64,
                        count: count as u64 + 1,
                    },
                    log_offset as u64,
                )
            }
            EntryIn::WideWrite {
                start,
                len,
                stride,
                count,
                log_offset,
            } => write(
                Run {
                    start,
                    len,
                    stride,
                    count,
                },
                log_offset,
            ),
            EntryIn::PublishedUpTo(pos) => Some(Entry::PublishedUpTo { pos }),
            EntryIn::PublishedRange(start, len, at) => Some(Entry::PublishedRange {
                start,
                end: start.checked_add(len)?,
                at,
            }),
            EntryIn::Truncated(size, at) => Some(Entry::Truncated { size, at }),
        }
    }
}

#[derive(Arbitrary, Debug)]
struct Input {
    ino: u64,
    client: u64,
    node: u32,
    entries: Vec<EntryIn>,
    damage: Vec<Damage>,
    floor: u64,
}

/// The structured input `data` stands for.
pub fn describe(data: &[u8]) -> String {
    format!("{:#?}", Input::arbitrary_take_rest(Unstructured::new(data)))
}

pub fn run(data: &[u8]) {
    let Ok(input) = Input::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    let header = IndexHeader {
        log: input.client,
        node: input.node,
        epoch: input.ino as u32,
        txn: input.node % 2 == 1,
    };
    let ino = input.ino;
    let entries: Vec<Entry> = input.entries.iter().filter_map(EntryIn::entry).collect();
    let mut log = index::encode_header(&header).to_vec();
    for e in &entries {
        log.extend_from_slice(&index::encode_pair(ino, e));
    }
    let bytes = damaged(&log, &input.damage);

    match index::parse_header(&bytes) {
        Ok(None) => assert!(bytes.len() < HEADER_SIZE),
        Ok(Some(h)) => {
            assert_eq!(
                &index::encode_header(&h)[..28],
                &bytes[..28],
                "an accepted header reads back as another"
            );
            if bytes[..HEADER_SIZE] == log[..HEADER_SIZE] {
                assert_eq!(h, header);
            }
        }
        Err(e) => assert_ne!(
            bytes[..HEADER_SIZE],
            log[..HEADER_SIZE],
            "an intact header was refused: {e}"
        ),
    }

    let body = bytes.get(HEADER_SIZE..).unwrap_or_default();
    let base = HEADER_SIZE as u64;
    let parsed = index::parse_records(body, base);
    let pairs = body.len() / PAIR_SIZE;
    assert_eq!(parsed.entries.len(), pairs);
    assert_eq!(parsed.consumed, pairs * PAIR_SIZE);
    let rest = (body.len() - parsed.consumed) as u64;
    let want_tail = if rest == 0 {
        Tail::Clean
    } else {
        Tail::Torn {
            offset: base + parsed.consumed as u64,
            bytes: rest,
        }
    };
    assert_eq!(parsed.tail, want_tail);

    // Each pair, judged by content: a copy is intact when it is some entry's encoding.
    let intact = |copy: &[u8]| {
        entries
            .iter()
            .find(|e| index::encode_record(ino, e)[..] == *copy)
            .copied()
    };
    for (p, tagged) in parsed.entries.iter().enumerate() {
        let got = &tagged.entry;
        if !matches!(got, Entry::Lost { .. }) {
            assert_eq!(tagged.ino, ino, "pair {p} names another file");
        }
        let at = p * PAIR_SIZE;
        let offset = base + at as u64;
        let a = intact(&body[at..at + RECORD_SIZE]);
        let b = intact(&body[at + RECORD_SIZE..at + PAIR_SIZE]);
        let damage: Vec<_> = parsed
            .damage
            .iter()
            .filter(|d| (offset..offset + PAIR_SIZE as u64).contains(&d.offset))
            .collect();
        match (a, b) {
            (Some(x), Some(y)) if x == y => {
                assert_eq!(*got, x, "pair {p}");
                assert!(damage.is_empty(), "pair {p}: {damage:?}");
            }
            (Some(x), Some(y)) => assert!(
                *got == x || *got == y || *got == (Entry::Lost { offset }),
                "pair {p} of two differing copies read as {got:?}"
            ),
            (Some(x), None) | (None, Some(x)) => {
                assert_eq!(*got, x, "pair {p} not repaired from its intact copy");
                assert_eq!(damage.len(), 1, "pair {p}: {damage:?}");
                assert!(damage[0].repaired);
            }
            (None, None) => {
                assert_eq!(*got, Entry::Lost { offset }, "pair {p}");
                assert_eq!(damage.len(), 1, "pair {p}: {damage:?}");
                assert!(!damage[0].repaired);
            }
        }
        if let Entry::Write(r) = got {
            assert!(r.run.is_valid() && r.log_offset.checked_add(r.run.bytes()).is_some());
        }
    }

    for run in index::unpublished(&parsed.of(ino), input.floor) {
        assert!(run.is_valid(), "unpublished returned {run:?}");
    }
}
