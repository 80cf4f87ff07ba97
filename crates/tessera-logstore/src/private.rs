//! Files and directories of one user on a device other users may share.
//!
//! A burst-buffer root is often a shared directory (`/dev/shm`, a node-local SSD mounted for
//! everyone). Another user who can write there could plant a directory or a link where
//! Tessera will put a user's logs or state, to read them, to have a user's data appended to a
//! file of their choice, or a file of the user's truncated. So: directories are created 0700
//! and must be real directories owned by us; files are created with `O_CREAT | O_EXCL |
//! O_NOFOLLOW` and mode 0600, and an existing one is opened with `O_NOFOLLOW` and then checked
//! (`fstat`) to be a regular file owned by us.

use crate::library_fds::{Held, HeldFile};
use rustix::fs::{FileType, Mode, OFlags};
use std::path::Path;
use tessera_core::{Errno, FsError, FsResult};

fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

fn io(what: impl std::fmt::Display, e: rustix::io::Errno) -> FsError {
    if e == rustix::io::Errno::LOOP {
        FsError::new(
            Errno::Loop,
            format!("{what}: it is a symbolic link (planted by someone?); refusing to follow it"),
        )
    } else {
        FsError::io(what, &e.into())
    }
}

/// Checks that an open descriptor is a regular file owned by us.
fn check_file(f: &impl rustix::fd::AsFd, path: &Path) -> FsResult<()> {
    let st = rustix::fs::fstat(f).map_err(|e| io(format!("stat {}", path.display()), e))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(FsError::new(
            Errno::Access,
            format!(
                "{} is not a regular file; refusing to use it",
                path.display()
            ),
        ));
    }
    check_owner(st.st_uid, path)
}

/// Refuses what another user owns: they could have planted it.
fn check_owner(uid: u32, path: &Path) -> FsResult<()> {
    if uid == euid() {
        return Ok(());
    }
    Err(FsError::new(
        Errno::Access,
        format!(
            "{} belongs to uid {uid}, not to uid {}: another user may have planted it; remove it, or choose a burst-buffer root of your own",
            path.display(),
            euid()
        ),
    ))
}

/// Opens an existing file of ours: `O_NOFOLLOW`, then a regular file owned by us; held out
/// of the program's way (`library_fds`).
pub fn open_existing(path: &Path, write: bool) -> FsResult<HeldFile> {
    let access = if write { OFlags::RDWR } else { OFlags::RDONLY };
    let fd = rustix::fs::open(
        path,
        access | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    )
    .map_err(|e| io(format!("opening {}", path.display()), e))?;
    check_file(&fd, path)?;
    Held::new(fd)
}

/// Creates a file of ours (`O_EXCL | O_NOFOLLOW`, mode 0600), or opens the existing one as
/// [`open_existing`] does. Returns the file and whether it was created.
pub fn create_or_open(path: &Path) -> FsResult<(HeldFile, bool)> {
    match rustix::fs::open(
        path,
        OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    ) {
        Ok(fd) => Ok((Held::new(fd)?, true)),
        Err(rustix::io::Errno::EXIST) => Ok((open_existing(path, true)?, false)),
        Err(e) => Err(io(format!("creating {}", path.display()), e)),
    }
}

/// Makes `dir` a private directory of ours: created with mode 0700 if missing; otherwise it
/// must be a directory (not a link) owned by us, and loses any group or other permissions.
/// Only for directories Tessera owns by design (a node's directory and those below it).
pub fn private_dir(dir: &Path) -> FsResult<()> {
    match rustix::fs::mkdir(dir, Mode::from_raw_mode(0o700)) {
        Ok(()) | Err(rustix::io::Errno::EXIST) => {}
        Err(e) => return Err(io(format!("creating {}", dir.display()), e)),
    }
    let fd = rustix::fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| {
        if e == rustix::io::Errno::NOTDIR || e == rustix::io::Errno::LOOP {
            FsError::new(
                Errno::Access,
                format!(
                    "{} is not a directory (a link or a file is in its place); refusing to use it",
                    dir.display()
                ),
            )
        } else {
            io(format!("opening {}", dir.display()), e)
        }
    })?;
    let st = rustix::fs::fstat(&fd).map_err(|e| io(format!("stat {}", dir.display()), e))?;
    check_owner(st.st_uid, dir)?;
    if st.st_mode & 0o077 != 0 {
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o700))
            .map_err(|e| io(format!("chmod 0700 {}", dir.display()), e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{PermissionsExt, symlink};

    #[test]
    fn links_and_foreign_places_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().join("node");
        private_dir(&d).unwrap();
        assert_eq!(
            std::fs::metadata(&d).unwrap().permissions().mode() & 0o777,
            0o700
        );
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        private_dir(&d).unwrap();
        assert_eq!(
            std::fs::metadata(&d).unwrap().permissions().mode() & 0o777,
            0o700,
            "group and other bits are taken away"
        );
        symlink(&d, tmp.path().join("linkdir")).unwrap();
        assert_eq!(
            private_dir(&tmp.path().join("linkdir")).unwrap_err().errno,
            Errno::Access
        );
        let (f, created) = create_or_open(&d.join("log")).unwrap();
        assert!(created);
        drop(f);
        assert!(!create_or_open(&d.join("log")).unwrap().1);
        assert_eq!(
            std::fs::metadata(d.join("log"))
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o600
        );
        std::fs::write(tmp.path().join("outside"), b"x").unwrap();
        symlink(tmp.path().join("outside"), d.join("planted")).unwrap();
        assert_eq!(
            create_or_open(&d.join("planted")).unwrap_err().errno,
            Errno::Loop
        );
        assert_eq!(
            open_existing(&d.join("planted"), false).unwrap_err().errno,
            Errno::Loop
        );
        std::fs::create_dir(d.join("adir")).unwrap();
        assert_eq!(
            open_existing(&d.join("adir"), false).unwrap_err().errno,
            Errno::Access
        );
    }
}
