//! The PFS copy of a file, opened beneath the PFS root for reads of bytes no log holds.

use super::*;
use tessera_core::{FsError, FsResult};

impl Inner {
    /// Opens the PFS copy of the file at internal path `p` for reading, resolved beneath the
    /// PFS root (a link there is followed only to a target beneath it); `None` if there is no
    /// such regular file.
    pub fn open_pfs_copy(
        &mut self,
        p: &str,
    ) -> FsResult<Option<tessera_logstore::library_fds::HeldFile>> {
        use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};
        let pfs_dir = &self.cfg.pfs_dir;
        let shown = self.user_path(p);
        let root = match &self.pfs_root {
            Some(r) => r,
            None => {
                let fd = rustix::fs::open(
                    pfs_dir,
                    OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .map_err(|e| {
                    FsError::io(
                        format!("opening the PFS directory {}", pfs_dir.display()),
                        &e.into(),
                    )
                })?;
                self.pfs_root
                    .insert(tessera_logstore::library_fds::Held::new(fd)?)
            }
        };
        let root = root.get();
        let rel = match p.trim_start_matches('/') {
            "" => ".",
            r => r,
        };
        let fd = match rustix::fs::openat2(
            &*root,
            rel,
            OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
        ) {
            Ok(fd) => fd,
            Err(
                rustix::io::Errno::NOENT
                | rustix::io::Errno::NOTDIR
                | rustix::io::Errno::XDEV
                | rustix::io::Errno::LOOP,
            ) => return Ok(None),
            Err(e) => {
                return Err(FsError::io(
                    format!("opening the PFS copy of {shown}"),
                    &e.into(),
                ));
            }
        };
        match rustix::fs::fstat(&fd) {
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile => {
                Ok(Some(tessera_logstore::library_fds::Held::new(fd)?))
            }
            _ => Ok(None),
        }
    }
}
