//! The log store: a process's data log, block checksums and index log on its node's burst
//! buffer. One log can hold the writes of many files: every index record names its file.
//!
//! * [`LogWriter`] appends a process's writes to its data log, their index records (strided
//!   runs, each written twice, see `tessera_core::index`) at once to its journal, and at a
//!   file's sync points their checksums to the `.sums` file (`tessera_core::sums`) and the
//!   file's new journal records to the index log, which readers use: a daemon can publish
//!   everything a process that died had written, and a reader sees a process's writes as it
//!   last published them.
//! * [`LogView`] reads another process's logs: it parses the index log incrementally into an
//!   extent map per file and serves byte ranges from the data log, checking every block
//!   ([`checked`]). The daemon's read service and flush use it for logs of their node;
//!   clients use it for logs of other processes on their own node, without a round trip.
//!
//! Blocking `std::fs` I/O only; no threads. Every file is created and opened as [`private`]
//! says, so a link or a file another user planted on a shared burst buffer is refused.

#![forbid(unsafe_code)]

pub mod checked;
pub mod library_fds;
pub mod page_cache;
pub mod private;
pub mod reclaim;
mod view;
mod writer;

pub use view::{At, LogView, read_entries};
pub use writer::{LogWriter, seal_logs};

use std::fs::File;
use std::path::{Path, PathBuf};
use tessera_core::{FsError, FsResult};

/// The checksum file of a data log (`N.data` -> `N.sums`).
pub fn sums_path(data_path: &Path) -> PathBuf {
    data_path.with_extension("sums")
}

/// The journal of a data log (`N.data` -> `N.journal`): every write, recorded at once.
pub fn journal_path(data_path: &Path) -> PathBuf {
    data_path.with_extension("journal")
}

/// The list of removed files of a data log (`N.data` -> `N.dead`): inode numbers, 8 bytes
/// each, appended as the node lets the files go. A log whose files are all listed there and
/// whose writer is gone is deleted; a restarted daemon reads the list again.
pub fn dead_path(data_path: &Path) -> PathBuf {
    data_path.with_extension("dead")
}

/// The removed files listed for the log of `data_path` (none if it has no list yet). A torn
/// last entry is ignored.
pub fn read_dead(data_path: &Path) -> FsResult<std::collections::HashSet<u64>> {
    let p = dead_path(data_path);
    let bytes = match private::open_existing(&p, false) {
        Ok(f) => {
            let f = f.get();
            let mut b = vec![0u8; len_of(&f, &p)? as usize];
            std::os::unix::fs::FileExt::read_exact_at(&*f, &mut b, 0)
                .map_err(|e| FsError::io(format!("reading {}", p.display()), &e))?;
            b
        }
        Err(e) if e.errno == tessera_core::Errno::NoEnt => Vec::new(),
        Err(e) => return Err(e),
    };
    Ok(bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect())
}

/// Lists `inos` as removed files of the log of `data_path`, durably (a file whose release is
/// done must never be forgotten as removed, or its log would never go).
pub fn append_dead(data_path: &Path, inos: &[u64]) -> FsResult<()> {
    if inos.is_empty() {
        return Ok(());
    }
    let p = dead_path(data_path);
    let (f, _) = private::create_or_open(&p)?;
    let f = f.get();
    // Whole entries only: a torn one from a crash is written over.
    let at = len_of(&f, &p)? / 8 * 8;
    let bytes: Vec<u8> = inos.iter().flat_map(|i| i.to_le_bytes()).collect();
    std::os::unix::fs::FileExt::write_all_at(&*f, &bytes, at)
        .and_then(|()| f.sync_data())
        .map_err(|e| FsError::io(format!("writing {}", p.display()), &e))
}

fn len_of(f: &File, p: &Path) -> FsResult<u64> {
    f.metadata()
        .map(|m| m.len())
        .map_err(|e| FsError::io(format!("stat {}", p.display()), &e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;
    use tessera_core::Errno;
    use tessera_core::index::{self, Entry, IndexHeader, Tail};

    fn paths(dir: &Path) -> (PathBuf, PathBuf) {
        (dir.join("1.data"), dir.join("1.index"))
    }

    const H: IndexHeader = IndexHeader {
        log: 1,
        node: 0,
        epoch: 0,
        txn: false,
    };
    /// The file the tests write.
    const F: u64 = 5;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Reading many ranges at once (spans contiguous in the log and in the output read
        /// as one) gives what reading them one by one gives.
        #[test]
        fn ranges_read_at_once_equal_ranges_read_one_by_one(
            writes in proptest::collection::vec((proptest::bool::ANY, 0u64..200_000, 1usize..40_000), 1..24),
            ranges in proptest::collection::vec((0u64..220_000, 1u64..60_000), 1..12),
        ) {
            let tmp = tempfile::tempdir().unwrap();
            let (d, i) = paths(tmp.path());
            let mut w = LogWriter::open(&d, &i, H).unwrap();
            for (n, (other, off, len)) in writes.iter().enumerate() {
                let bytes: Vec<u8> = (0..*len).map(|k| (k as u64 * 7 + n as u64) as u8).collect();
                w.append(if *other { F + 1 } else { F }, *off, &bytes).unwrap();
            }
            w.sync_index(F).unwrap();
            w.sync_index(F + 1).unwrap();
            let v = LogView::open(&d, &i).unwrap();
            let ranges: Vec<(u64, u64)> = ranges.iter().map(|(s, l)| (*s, s + l)).collect();
            let total: u64 = ranges.iter().map(|(s, e)| e - s).sum();
            let mut at_once = vec![0u8; total as usize];
            let missing = v.read_ranges(F, &ranges, &mut at_once).unwrap();
            let mut one_by_one = vec![0u8; total as usize];
            let mut missing_one = Vec::new();
            let mut at = 0usize;
            for (s, e) in &ranges {
                let len = (e - s) as usize;
                missing_one.extend(v.read(F, *s, &mut one_by_one[at..at + len]).unwrap());
                at += len;
            }
            proptest::prop_assert_eq!(missing, missing_one);
            proptest::prop_assert!(at_once == one_by_one);
        }
    }

    #[test]
    fn view_sees_synced_writes_only() {
        let tmp = tempfile::tempdir().unwrap();
        let (d, i) = paths(tmp.path());
        let mut w = LogWriter::open(&d, &i, H).unwrap();
        w.append(F, 100, b"hello").unwrap();
        w.sync_index(F).unwrap();
        let mut v = LogView::open(&d, &i).unwrap();
        let mut out = [0u8; 7];
        let missing = v.read(F, 99, &mut out).unwrap();
        assert_eq!(&out[1..6], b"hello");
        assert_eq!(missing, vec![(99, 100), (105, 106)]);
        w.append(F, 102, b"XY").unwrap(); // newer
        w.sync_index(F).unwrap();
        v.refresh().unwrap();
        v.read(F, 99, &mut out).unwrap();
        assert_eq!(&out[1..6], b"heXYo");
        let mut own = [0u8; 2];
        w.read_at(&mut own, 5).unwrap();
        assert_eq!(&own, b"XY");
    }

    #[test]
    fn a_reopened_writer_cuts_the_torn_tail_and_continues_from_the_index() {
        let tmp = tempfile::tempdir().unwrap();
        let (d, i) = paths(tmp.path());
        let mut w = LogWriter::open(&d, &i, H).unwrap();
        w.append(F, 0, b"abc").unwrap();
        w.sync_index(F).unwrap();
        w.append(F, 3, b"not synced").unwrap();
        std::mem::forget(w);
        // A crash mid-append leaves half a pair.
        let f = std::fs::OpenOptions::new().append(true).open(&i).unwrap();
        f.write_all_at(&[1, 2, 3], std::fs::metadata(&i).unwrap().len())
            .unwrap();
        let v = LogView::open(&d, &i).unwrap();
        assert!(matches!(v.tail(), Tail::Torn { bytes: 3, .. }));
        // A writer that reopens the logs continues from the index: the unsynced write is no
        // longer its dirty data (its bytes stay in the data log, unindexed).
        let mut w = LogWriter::open(&d, &i, H).unwrap();
        assert_eq!(w.data_len(), 13);
        w.append(F, 13, b"def").unwrap();
        w.sync_index(F).unwrap();
        let v = LogView::open(&d, &i).unwrap();
        assert_eq!(v.tail(), Tail::Clean);
        let mut out = [0u8; 16];
        assert_eq!(v.read(F, 0, &mut out).unwrap(), vec![(3, 13)]);
        assert_eq!(&out[..3], b"abc");
        assert_eq!(&out[13..], b"def");
    }

    #[test]
    fn a_resumed_writer_keeps_the_unsynced_writes_of_its_journal() {
        let tmp = tempfile::tempdir().unwrap();
        let (d, i) = paths(tmp.path());
        let mut w = LogWriter::open(&d, &i, H).unwrap();
        w.append(F, 0, b"abc").unwrap();
        w.sync_index(F).unwrap();
        w.append(F, 3, b"unpublished").unwrap();
        std::mem::forget(w);
        // Half a pair after them: a crash in the middle of the next append.
        let j = crate::journal_path(&d);
        let f = std::fs::OpenOptions::new().append(true).open(&j).unwrap();
        f.write_all_at(&[9, 9, 9], std::fs::metadata(&j).unwrap().len())
            .unwrap();
        let mut w = LogWriter::resume(&d, &i, H).unwrap();
        w.append(F, 14, b"more").unwrap();
        w.sync_index(F).unwrap();
        let v = LogView::open(&d, &i).unwrap();
        assert_eq!(v.tail(), Tail::Clean, "the torn half-pair went");
        let mut out = [0u8; 18];
        assert!(
            v.read(F, 0, &mut out).unwrap().is_empty(),
            "every byte indexed"
        );
        assert_eq!(&out, b"abcunpublishedmore");
    }

    #[test]
    fn writer_refuses_a_foreign_index() {
        let tmp = tempfile::tempdir().unwrap();
        let (d, i) = paths(tmp.path());
        LogWriter::open(&d, &i, H).unwrap();
        let other = IndexHeader { log: 2, ..H };
        assert_eq!(LogWriter::open(&d, &i, other).unwrap_err().errno, Errno::Io);
    }

    /// Writes 40 KiB in scattered pieces (several records, several checksum blocks).
    fn scattered(dir: &Path) -> (PathBuf, PathBuf, Vec<u8>) {
        let (d, i) = paths(dir);
        let mut w = LogWriter::open(&d, &i, H).unwrap();
        let piece = 5000u64;
        let all: Vec<u8> = (0..8 * piece).map(|k| (k % 253) as u8).collect();
        for n in [3u64, 0, 5, 1, 7, 2, 6, 4] {
            let s = (n * piece) as usize;
            w.append(F, n * piece, &all[s..s + piece as usize]).unwrap();
            w.sync_index(F).unwrap();
        }
        (d, i, all)
    }

    #[test]
    fn a_flipped_data_byte_fails_its_block_only() {
        let tmp = tempfile::tempdir().unwrap();
        let (d, i, all) = scattered(tmp.path());
        let mut bytes = std::fs::read(&d).unwrap();
        bytes[20_000] ^= 1; // in data-log block 1 (bytes 16384..32768 of the log)
        std::fs::write(&d, &bytes).unwrap();
        let v = LogView::open(&d, &i).unwrap();
        let mut out = vec![0u8; all.len()];
        let e = v.read(F, 0, &mut out).unwrap_err();
        assert_eq!(e.errno, Errno::Io);
        assert!(e.message.contains("1.data is corrupt: block 1"), "{e}");
        // Logical piece 3 was written first, into data-log block 0: still readable.
        let mut piece = vec![0u8; 5000];
        v.read(F, 15_000, &mut piece).unwrap();
        assert_eq!(piece[..], all[15_000..20_000]);
    }

    #[test]
    fn a_block_read_from_the_device_is_checked_one_the_cache_holds_is_not_again() {
        let tmp = tempfile::tempdir().unwrap();
        let (d, i) = paths(tmp.path());
        let mut w = LogWriter::open(&d, &i, H).unwrap();
        // Four whole blocks in one run: a read of them is one run of whole blocks.
        let all: Vec<u8> = (0..4 * 16384u64).map(|k| (k % 241) as u8).collect();
        w.append(F, 0, &all).unwrap();
        w.sync_index(F).unwrap();
        let v = LogView::open(&d, &i).unwrap();
        let mut out = vec![0u8; all.len()];
        assert!(v.read(F, 0, &mut out).unwrap().is_empty());
        assert_eq!(out, all);
        // Changed in the page cache (not by the device): the cached run is handed out.
        let f = std::fs::OpenOptions::new().write(true).open(&d).unwrap();
        f.write_all_at(&[all[40_000] ^ 1], 40_000).unwrap();
        assert!(v.read(F, 0, &mut out).unwrap().is_empty());
        assert_eq!(out[40_000], all[40_000] ^ 1);
        // Damage the device returns is found, in its block only.
        tessera_testkit::damage_on_device(&d, 20_000);
        let e = v.read(F, 0, &mut out).unwrap_err();
        assert_eq!(e.errno, Errno::Io);
        assert!(e.message.contains("1.data is corrupt: block 1"), "{e}");
        let mut last = vec![0u8; 16384];
        v.read(F, 3 * 16384, &mut last).unwrap();
        assert_eq!(last[..], all[3 * 16384..]);
    }

    #[test]
    fn one_damaged_index_copy_loses_nothing_two_lose_their_record_only() {
        let tmp = tempfile::tempdir().unwrap();
        let (d, i, all) = scattered(tmp.path());
        let clean = std::fs::read(&i).unwrap();
        let pair = |n: usize| index::HEADER_SIZE + n * index::PAIR_SIZE;
        let pairs = (clean.len() - index::HEADER_SIZE) / index::PAIR_SIZE;
        assert!(pairs >= 3, "{pairs} pairs");
        // One copy of every pair damaged: all is read back.
        let mut one = clean.clone();
        for n in 0..pairs {
            one[pair(n) + if n % 2 == 0 { 3 } else { 58 }] ^= 0x20;
        }
        std::fs::write(&i, &one).unwrap();
        let v = LogView::open(&d, &i).unwrap();
        let mut out = vec![0u8; all.len()];
        assert!(v.read(F, 0, &mut out).unwrap().is_empty());
        assert_eq!(out, all);
        assert_eq!(v.damage().len(), pairs);
        // Both copies of the middle pair: older bytes may be stale and are refused, the
        // lost record's bytes are missing and named, newer ones read.
        let mid = pairs / 2;
        let mut two = clean.clone();
        two[pair(mid) + 3] ^= 1;
        two[pair(mid) + 59] ^= 1;
        std::fs::write(&i, &two).unwrap();
        let v = LogView::open(&d, &i).unwrap();
        let mut out = vec![0u8; all.len()];
        assert_eq!(v.read(F, 0, &mut out).unwrap_err().errno, Errno::Io);
        assert!(
            v.damage_note()
                .unwrap()
                .contains(&format!("byte {}", pair(mid)))
        );
    }

    #[test]
    fn the_latest_lost_record_decides_what_may_be_stale() {
        let tmp = tempfile::tempdir().unwrap();
        let (d, i) = paths(tmp.path());
        let mut w = LogWriter::open(&d, &i, H).unwrap();
        // Pairs: A [0,10) at 0, L1 [100,110) at 10, B [200,210) at 20, L2 [200,210) at 30
        // (a rewrite of B's range), C [300,310) at 40.
        for (off, byte) in [
            (0, b'a'),
            (100, b'l'),
            (200, b'b'),
            (200, b'n'),
            (300, b'c'),
        ] {
            w.append(F, off, &[byte; 10]).unwrap();
            w.sync_index(F).unwrap();
        }
        let mut b = std::fs::read(&i).unwrap();
        for n in [1, 3] {
            let at = index::HEADER_SIZE + n * index::PAIR_SIZE;
            b[at + 2] ^= 1;
            b[at + 58] ^= 1;
        }
        std::fs::write(&i, &b).unwrap();
        let v = LogView::open(&d, &i).unwrap();
        let mut out = [0u8; 10];
        // B's bytes were overwritten by the lost L2: never returned as if current.
        assert_eq!(v.read(F, 200, &mut out).unwrap_err().errno, Errno::Io);
        // Written after every lost record: read.
        v.read(F, 300, &mut out).unwrap();
        assert_eq!(out, [b'c'; 10]);
    }

    #[test]
    fn a_damaged_checksum_length_is_an_error_not_an_allocation() {
        let tmp = tempfile::tempdir().unwrap();
        let (d, i, all) = scattered(tmp.path());
        let sums = sums_path(&d);
        let mut b = std::fs::read(&sums).unwrap();
        // The length of block 0's slot, high bit set (4 GiB).
        b[tessera_core::sums::HEADER_SIZE + 7] ^= 0x80;
        std::fs::write(&sums, &b).unwrap();
        let v = LogView::open(&d, &i).unwrap();
        let mut out = vec![0u8; all.len()];
        let e = v.read(F, 0, &mut out).unwrap_err();
        assert!(e.message.contains("damaged checksum slot"), "{e}");
    }

    #[test]
    fn a_lost_marker_is_harmless() {
        let tmp = tempfile::tempdir().unwrap();
        let (d, i) = paths(tmp.path());
        let mut w = LogWriter::open(&d, &i, H).unwrap();
        w.append(F, 0, b"first").unwrap();
        w.mark(F, Entry::Truncated { size: 99, at: 0 }).unwrap();
        w.append(F, 5, b"second").unwrap();
        w.sync_index(F).unwrap();
        let mut b = std::fs::read(&i).unwrap();
        // The marker is the second pair (it closed the first run).
        let marker = index::HEADER_SIZE + index::PAIR_SIZE;
        b[marker + 1] ^= 1;
        b[marker + 57] ^= 1;
        std::fs::write(&i, &b).unwrap();
        let v = LogView::open(&d, &i).unwrap();
        let mut out = [0u8; 11];
        assert!(v.read(F, 0, &mut out).unwrap().is_empty());
        assert_eq!(&out, b"firstsecond");
    }
}

/// One log shared by several files, against a byte model of each file.
#[cfg(test)]
mod shared_tests {
    use super::*;
    use proptest::prelude::*;
    use tessera_core::index::IndexHeader;

    const H: IndexHeader = IndexHeader {
        log: 7,
        node: 1,
        epoch: 2,
        txn: false,
    };
    const SPACE: usize = 48;

    #[derive(Clone, Debug)]
    enum Op {
        Write { file: u64, start: u64, len: u64 },
        Sync { file: u64 },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (1u64..4, 0u64..40, 1u64..8).prop_map(|(file, start, len)| Op::Write { file, start, len }),
            1 => (1u64..4).prop_map(|file| Op::Sync { file }),
        ]
    }

    /// What a view shows of each file: `Some(byte)` where the log holds it.
    fn seen(v: &LogView) -> Vec<Vec<Option<u8>>> {
        (0..4u64)
            .map(|file| {
                let mut out = vec![0u8; SPACE];
                let gaps = v.read(file, 0, &mut out).unwrap();
                (0..SPACE)
                    .map(|k| {
                        let k64 = k as u64;
                        (!gaps.iter().any(|(s, e)| *s <= k64 && k64 < *e)).then_some(out[k])
                    })
                    .collect()
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// A reader sees each file as of its last sync, whatever the other files did; after
        /// the writer is gone and its logs are sealed, every write; a resumed writer keeps
        /// the unsynced writes of every file.
        #[test]
        fn readers_see_each_file_as_last_synced(ops in proptest::collection::vec(op(), 1..40)) {
            let tmp = tempfile::tempdir().unwrap();
            let (d, i) = (tmp.path().join("7.data"), tmp.path().join("7.index"));
            let mut w = LogWriter::open(&d, &i, H).unwrap();
            let mut written = vec![vec![None; SPACE]; 4];
            let mut synced = written.clone();
            let mut n = 0u8;
            for op in &ops {
                match *op {
                    Op::Write { file, start, len } => {
                        let bytes: Vec<u8> = (0..len).map(|_| { n = n.wrapping_add(1); n }).collect();
                        w.append(file, start, &bytes).unwrap();
                        for (k, b) in bytes.iter().enumerate() {
                            written[file as usize][start as usize + k] = Some(*b);
                        }
                    }
                    Op::Sync { file } => {
                        w.sync_index(file).unwrap();
                        synced[file as usize] = written[file as usize].clone();
                    }
                }
            }
            let v = LogView::open(&d, &i).unwrap();
            prop_assert_eq!(seen(&v), synced);
            // The daemon takes the logs up again for the process.
            drop(w);
            let mut r = LogWriter::resume(&d, &i, H).unwrap();
            r.sync_all().unwrap();
            let v = LogView::open(&d, &i).unwrap();
            prop_assert_eq!(seen(&v), written.clone());
            drop(r);
            // Or seals them after it died.
            let mut w = LogWriter::open(&d, &i, H).unwrap();
            w.append(1, 0, &[0xee]).unwrap();
            drop(w);
            seal_logs(&d, &i).unwrap();
            let v = LogView::open(&d, &i).unwrap();
            written[1][0] = Some(0xee);
            prop_assert_eq!(seen(&v), written);
        }
    }
}
