//! Giving back the space of a log's dead bytes while its writer goes on: every checksum block
//! of the data log that holds only bytes of files let go is punched out of the file
//! (`FALLOC_FL_PUNCH_HOLE`; the log keeps its length, so no position moves and none is ever
//! reused). A block that still holds one live byte is kept whole: its checksum covers the
//! block, and a live reader must find it intact. A reader that still holds positions into a
//! punched block reads a hole, which [`crate::checked`] reports as `ESTALE`, never as bytes.

use crate::private;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use tessera_core::sums::BLOCK_LOG2;
use tessera_core::{FsError, FsResult, RangeSet};

/// The checksum blocks (as byte ranges) that `dead` covers whole, among those that `fresh`
/// (the positions that just died) touches: the ones a release of `fresh` makes punchable.
pub fn whole_dead_blocks(dead: &RangeSet, fresh: &RangeSet) -> Vec<(u64, u64)> {
    let block = 1u64 << BLOCK_LOG2;
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (s, e) in fresh.ranges() {
        let first = s / block;
        let last = e.div_ceil(block);
        for k in first..last {
            let (bs, be) = (k * block, (k + 1) * block);
            if dead.covers(bs, be) {
                match out.last_mut() {
                    Some(l) if l.1 == bs => l.1 = be,
                    Some(l) if l.1 > bs => {}
                    _ => out.push((bs, be)),
                }
            }
        }
    }
    out
}

/// Punches `ranges` out of the data log at `data_path`; returns the bytes of disk given back.
pub fn punch(data_path: &Path, ranges: &[(u64, u64)]) -> FsResult<u64> {
    if ranges.is_empty() {
        return Ok(0);
    }
    let f = private::open_existing(data_path, true)?;
    let f = f.get();
    let used = |f: &std::fs::File| f.metadata().map_or(0, |m| m.blocks() * 512);
    let before = used(&f);
    for &(s, e) in ranges {
        rustix::fs::fallocate(
            &*f,
            rustix::fs::FallocateFlags::PUNCH_HOLE | rustix::fs::FallocateFlags::KEEP_SIZE,
            s,
            e - s,
        )
        .map_err(|e| FsError::io(format!("punching {}", data_path.display()), &e.into()))?;
    }
    // The checksums of punched blocks stay: a block's slot is final once it is full, and a
    // read of the block then fails its check on a hole, which names it released.
    Ok(before.saturating_sub(used(&f)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: u64 = 1 << BLOCK_LOG2;

    fn set(ranges: &[(u64, u64)]) -> RangeSet {
        let mut s = RangeSet::new();
        for (a, b) in ranges {
            s.add(*a, *b);
        }
        s
    }

    #[test]
    fn only_blocks_dead_whole_are_punched() {
        // Dead: [100, 3B + 5); fresh: all of it. Blocks 1 and 2 are whole; 0 and 3 are not.
        let dead = set(&[(100, 3 * B + 5)]);
        assert_eq!(whole_dead_blocks(&dead, &dead), vec![(B, 3 * B)]);
        // A live byte in block 1 keeps it.
        let dead = set(&[(0, B + 7), (B + 8, 3 * B)]);
        assert_eq!(
            whole_dead_blocks(&dead, &dead),
            vec![(0, B), (2 * B, 3 * B)]
        );
        // A block another file's death completes is found from the fresh part alone.
        let dead = set(&[(0, 2 * B)]);
        assert_eq!(
            whole_dead_blocks(&dead, &set(&[(B + 10, B + 20)])),
            vec![(B, 2 * B)]
        );
    }

    #[test]
    fn a_punched_block_gives_its_disk_back_and_keeps_the_length() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("1.data");
        private::create_or_open(&p).unwrap();
        std::fs::write(&p, vec![7u8; 4 * B as usize]).unwrap();
        let f = std::fs::File::open(&p).unwrap();
        f.sync_all().unwrap();
        let freed = punch(&p, &[(B, 3 * B)]).unwrap();
        assert!(freed >= 2 * B, "{freed} bytes given back");
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 4 * B);
        let bytes = std::fs::read(&p).unwrap();
        assert!(bytes[B as usize..3 * B as usize].iter().all(|b| *b == 0));
        assert!(bytes[..B as usize].iter().all(|b| *b == 7));
    }
}
