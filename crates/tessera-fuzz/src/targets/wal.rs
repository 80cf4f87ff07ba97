//! The state log: a daemon's write-ahead log of metadata changes, read at every start.
//!
//! A log of records (encoded operations, or raw payloads) is damaged and scanned. The scan
//! must cover the log exactly (records, damaged stretches and a torn tail, in order and
//! without overlap), find every record whose bytes survived and nothing else, tell damage in
//! the middle from a torn tail, and refuse a damaged header. Intact records of operations
//! decode to those operations.
//!
//! One limit is by design: after damage, a record is found again by its magic, so a payload
//! that itself holds a complete encoded record could be taken for one. Inputs whose payloads
//! hold the record magic are checked for everything but that.

use super::damage::{Damage, damaged, occurrences};
use arbitrary::{Arbitrary, Unstructured};
use tessera_core::wal::{self, HEADER_LEN, HeaderError, RECORD_MAGIC};
use tessera_core::{Owner, Run};
use tessera_daemon::store::state_log;
use tessera_daemon::store::{DbOp, MetaKey};

/// An operation, as arbitrary as the types allow.
#[derive(Arbitrary, Debug)]
enum Op {
    DelDentry(String, String),
    DelInode(u64),
    PutOwner(u64, u64, u64, u64, u32, u64),
    DelOwner(u64, u64, u64),
    SetMeta(bool, u64),
    FlushTemp(bool, String),
    PutClient(u64, u32, u64),
    DelClient(u64),
    PutPublished(u64, u64, u64),
}

impl Op {
    fn db(self) -> DbOp {
        match self {
            Op::DelDentry(parent, name) => DbOp::DelDentry { parent, name },
            Op::DelInode(ino) => DbOp::DelInode(ino),
            Op::PutOwner(ino, stripe, start, len, node, client) => DbOp::PutOwner {
                ino,
                stripe,
                run: Run::single(start, len),
                owner: Owner { node, client },
            },
            Op::DelOwner(ino, stripe, start) => DbOp::DelOwner { ino, stripe, start },
            Op::SetMeta(ino, v) => DbOp::SetMeta(
                if ino {
                    MetaKey::NextIno
                } else {
                    MetaKey::NextClient
                },
                v,
            ),
            Op::FlushTemp(put, name) => {
                if put {
                    DbOp::PutFlushTemp(name)
                } else {
                    DbOp::DelFlushTemp(name)
                }
            }
            Op::PutClient(id, pid, start) => DbOp::PutClient { id, pid, start },
            Op::DelClient(id) => DbOp::DelClient(id),
            Op::PutPublished(client, ino, pos) => DbOp::PutPublished { client, ino, pos },
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Record {
    Ops(Vec<Op>),
    Raw(Vec<u8>),
}

#[derive(Arbitrary, Debug)]
struct Input {
    records: Vec<Record>,
    damage: Vec<Damage>,
}

/// The structured input `data` stands for.
pub fn describe(data: &[u8]) -> String {
    format!("{:#?}", Input::arbitrary_take_rest(Unstructured::new(data)))
}

pub fn run(data: &[u8]) {
    let Ok(input) = Input::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    let mut log = wal::header().to_vec();
    // (payload, its operations if it holds any, its span in the log)
    let mut written = Vec::new();
    for r in input.records {
        let (payload, ops) = match r {
            Record::Ops(ops) => {
                let ops: Vec<DbOp> = ops.into_iter().map(Op::db).collect();
                (
                    postcard::to_stdvec(&ops).expect("encoding to memory"),
                    Some(ops),
                )
            }
            Record::Raw(p) => (p, None),
        };
        let start = log.len();
        log.extend_from_slice(&wal::encode_record(&payload));
        written.push((payload, ops, start..log.len()));
    }
    let bytes = &damaged(&log, &input.damage);

    let header_intact = bytes.get(..HEADER_LEN) == Some(&wal::header()[..]);
    let scan = match wal::scan(bytes) {
        Ok(scan) => scan,
        Err(e) => {
            assert!(!header_intact, "an intact header was refused: {e}");
            let (HeaderError::NotALog | HeaderError::Version { .. }) = e;
            return;
        }
    };
    if bytes.len() < HEADER_LEN {
        assert_eq!(scan, wal::Scan::default());
        return;
    }
    assert!(
        bytes[..4] == wal::MAGIC && bytes[4..6] == wal::VERSION.to_le_bytes(),
        "a header of another kind or version was accepted"
    );

    // The scan covers the log exactly, in order.
    let mut spans: Vec<(usize, usize, bool)> = scan
        .records
        .iter()
        .map(|(at, p)| (*at, p.end, true))
        .chain(scan.damage.iter().map(|d| (d.start, d.end, false)))
        .chain(scan.torn.iter().map(|d| (d.start, d.end, false)))
        .collect();
    spans.sort();
    let mut at = HEADER_LEN;
    for (s, e, _) in &spans {
        assert_eq!(*s, at, "the scan skips or overlaps bytes at {at}: {scan:?}");
        assert!(e > s, "an empty span in {scan:?}");
        at = *e;
    }
    assert_eq!(at, bytes.len(), "the scan stops short: {scan:?}");
    if let Some(t) = scan.torn {
        assert_eq!(t.end, bytes.len(), "a torn tail before the end");
    }
    for d in &scan.damage {
        assert!(
            scan.records.iter().any(|(r, _)| *r == d.end),
            "damage not followed by a record: {d:?}"
        );
    }

    // Every record found is intact.
    for (at, p) in &scan.records {
        assert_eq!(
            &bytes[*at..p.end],
            &wal::encode_record(&bytes[p.clone()])[..],
            "a record that is not intact at {at}"
        );
    }

    // Exactly the records that survived are found (wherever damage moved them), and their
    // operations decode.
    let holds_magic = |b: &[u8]| b.windows(4).any(|w| w == RECORD_MAGIC);
    let magic_inside = written.iter().any(|(p, _, _)| holds_magic(p))
        || input
            .damage
            .iter()
            .any(|d| matches!(d, Damage::Insert { bytes, .. } if holds_magic(bytes)));
    let mut survived: Vec<(usize, &Option<Vec<DbOp>>)> = written
        .iter()
        .flat_map(|(_, ops, span)| {
            occurrences(&bytes[HEADER_LEN..], &log[span.clone()])
                .into_iter()
                .map(move |at| (HEADER_LEN + at, ops))
        })
        .collect();
    survived.sort_by_key(|(at, _)| *at);
    survived.dedup_by_key(|(at, _)| *at);
    if !magic_inside {
        let found: Vec<usize> = scan.records.iter().map(|(at, _)| *at).collect();
        let want: Vec<usize> = survived.iter().map(|(at, _)| *at).collect();
        assert_eq!(found, want, "records found / records intact");
    }
    let decoded = state_log::decode(bytes, &scan);
    for (at, ops) in survived {
        let Some((_, got)) = decoded.iter().find(|(r, _)| *r == at) else {
            assert!(magic_inside, "an intact record at {at} was not decoded");
            continue;
        };
        if let Some(ops) = ops {
            assert_eq!(
                got.as_ref(),
                Some(ops),
                "the operations of the record at {at}"
            );
        } else if let Some(got) = got {
            let again = postcard::to_stdvec(got).expect("encoding to memory");
            assert_eq!(
                postcard::from_bytes::<Vec<DbOp>>(&again).ok().as_ref(),
                Some(got)
            );
        }
    }
}
