//! Tessera's attributes and errors in FUSE's terms.

use fuser::{FileAttr, FileType, INodeNo};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tessera_client::{Attr, FileKind, FsError};

/// The `st_blksize` reported: the size `cp` and friends use for each read and write, which
/// FUSE passes on whole up to its largest request (128 KiB by default).
pub const BLOCK_SIZE: u32 = 128 << 10;

/// The time of a nanosecond count since the epoch (negative: before it).
pub fn time_of(ns: i64) -> SystemTime {
    if ns >= 0 {
        UNIX_EPOCH + Duration::from_nanos(ns as u64)
    } else {
        UNIX_EPOCH - Duration::from_nanos(ns.unsigned_abs())
    }
}

/// Nanoseconds since the epoch of a time.
pub fn ns_of(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_nanos()).unwrap_or(i64::MAX),
    }
}

/// A file's attributes as FUSE reports them. The node id is the inode number: Tessera's
/// root is inode 1, FUSE's root node id.
pub fn file_attr(a: &Attr) -> FileAttr {
    FileAttr {
        ino: INodeNo(a.ino),
        size: a.size,
        blocks: a.size.div_ceil(512),
        atime: time_of(a.atime_ns),
        mtime: time_of(a.mtime_ns),
        ctime: time_of(a.ctime_ns),
        crtime: time_of(a.ctime_ns),
        kind: match a.kind {
            FileKind::File => FileType::RegularFile,
            FileKind::Dir => FileType::Directory,
            FileKind::Symlink => FileType::Symlink,
        },
        perm: (a.mode & 0o7777) as u16,
        nlink: a.nlink.max(1),
        uid: a.uid,
        gid: a.gid,
        rdev: 0,
        blksize: BLOCK_SIZE,
        flags: 0,
    }
}

/// The kind of a directory entry.
pub fn file_type(kind: FileKind) -> FileType {
    match kind {
        FileKind::File => FileType::RegularFile,
        FileKind::Dir => FileType::Directory,
        FileKind::Symlink => FileType::Symlink,
    }
}

/// The errno FUSE answers for an error (the message goes to the mount's log).
pub fn errno(e: &FsError) -> fuser::Errno {
    fuser::Errno::from_i32(e.errno.code())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_before_and_after_the_epoch_round_trip() {
        for ns in [0, 1, 1_700_000_000_123_456_789, -5_000_000_001] {
            assert_eq!(ns_of(time_of(ns)), ns);
        }
    }

    #[test]
    fn tesseras_root_is_fuses_root() {
        assert_eq!(tessera_core::namespace::ROOT_INO, crate::inodes::ROOT);
    }

    #[test]
    fn a_file_is_its_inode_with_its_permission_bits() {
        let a = Attr {
            ino: 77,
            kind: FileKind::File,
            mode: 0o100644,
            uid: 1,
            gid: 2,
            size: 513,
            atime_ns: 0,
            mtime_ns: 0,
            ctime_ns: 0,
            nlink: 2,
        };
        let f = file_attr(&a);
        assert_eq!(f.ino, INodeNo(77));
        assert_eq!(f.perm, 0o644);
        assert_eq!(f.blocks, 2);
        assert_eq!(f.nlink, 2);
        assert_eq!(f.kind, FileType::RegularFile);
    }
}
