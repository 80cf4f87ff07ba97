//! Descriptors the library keeps open sit high, out of the way of the program it serves: a
//! shell running `exec 3> file` puts the file on descriptor 3 with `dup2`, which would
//! silently close whatever the library held there (its connection to the daemon, a log).
//! Programs place their own descriptors low (shells use 0 to 255), so the library's go at or
//! above half the process's descriptor limit, capped at 512.

use rustix::fd::{AsRawFd, OwnedFd};
use std::sync::OnceLock;

/// The process's soft limit on open descriptors (`u64::MAX` if unlimited or unknown).
pub fn descriptor_limit() -> u64 {
    rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(u64::MAX)
}

/// The lowest number the library's descriptors take (0: leave them where they are, when
/// the descriptor limit is too small to spare a high range).
fn base() -> i32 {
    static BASE: OnceLock<i32> = OnceLock::new();
    *BASE.get_or_init(|| match (descriptor_limit() / 2).min(512) {
        b if b < 64 => 0,
        b => b as i32,
    })
}

/// `fd` moved to a number at or above [`base`] (close-on-exec), or left where it is if it is
/// there already or no such number is free.
pub fn raise(fd: OwnedFd) -> OwnedFd {
    let base = base();
    if fd.as_raw_fd() >= base {
        return fd;
    }
    rustix::io::fcntl_dupfd_cloexec(&fd, base).unwrap_or(fd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors_go_high_and_keep_their_file() {
        let f = std::fs::File::open("/dev/null").unwrap();
        let low = OwnedFd::from(f);
        let high = raise(low);
        assert!(
            high.as_raw_fd() >= base(),
            "{} < {}",
            high.as_raw_fd(),
            base()
        );
        let st = rustix::fs::fstat(&high).unwrap();
        let null = rustix::fs::stat("/dev/null").unwrap();
        assert_eq!((st.st_rdev, st.st_ino), (null.st_rdev, null.st_ino));
        let flags = rustix::io::fcntl_getfd(&high).unwrap();
        assert!(flags.contains(rustix::io::FdFlags::CLOEXEC));
    }
}
