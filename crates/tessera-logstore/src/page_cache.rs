//! What of a file the page cache holds, asked without touching it (`cachestat`, Linux 6.5).
//!
//! A checked reader hands out a run of cached blocks without checking them again
//! ([`crate::checked`]); it must learn that they are cached without bringing anything in.
//! A `preadv2` with `RWF_NOWAIT` is not such a question: on a miss it starts the device read
//! of the pages it asked for and answers "would block", leaving pages in the cache that no
//! reader checked (the next reader's `RWF_NOWAIT` read then hands them out). `cachestat`
//! only counts. Where the kernel lacks it, every answer is "not all cached", and every block
//! is checked.

use std::os::fd::BorrowedFd;

/// Pages of `[off, off + len)` the page cache holds, or `None` where the kernel cannot say.
pub fn cached_pages(fd: BorrowedFd<'_>, off: u64, len: u64) -> Option<u64> {
    tessera_sys::cached_pages(fd, off, len)
}

/// Whether the page cache holds every page of `[off, off + len)`; `false` where unknown.
pub fn all_cached(fd: BorrowedFd<'_>, off: u64, len: u64) -> bool {
    if len == 0 {
        return true;
    }
    let page = rustix::param::page_size() as u64;
    let pages = (off + len).div_ceil(page) - off / page;
    cached_pages(fd, off, len).is_some_and(|n| n >= pages)
}

/// Whether the page cache holds none of `[off, off + len)`; `false` where unknown.
pub fn none_cached(fd: BorrowedFd<'_>, off: u64, len: u64) -> bool {
    cached_pages(fd, off, len) == Some(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::os::unix::fs::FileExt;

    #[test]
    fn counts_what_was_written_and_nothing_after_a_drop() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("f");
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&p)
            .unwrap();
        f.write_all_at(&vec![7u8; 64 << 10], 0).unwrap();
        assert!(
            cached_pages(f.as_fd(), 0, 64 << 10).is_some(),
            "cachestat needs Linux 6.5 or later"
        );
        assert!(all_cached(f.as_fd(), 0, 64 << 10));
        assert!(all_cached(f.as_fd(), 100, 5000));
        f.sync_all().unwrap();
        rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed).unwrap();
        assert!(
            none_cached(f.as_fd(), 0, 64 << 10),
            "the test directory must be on a disk (not tmpfs)"
        );
        assert!(!all_cached(f.as_fd(), 0, 4096));
    }
}
