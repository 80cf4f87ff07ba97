//! The instance directory is its user's own: every file Tessera reads or writes there is
//! checked to be the user's before it is trusted.
//!
//! An instance directory often sits where others can create names (`/tmp`, a shared project
//! directory). Whoever makes the directory or a file in it first chooses what the daemons
//! read: the burst-buffer root, the PFS directory, the peer secret (and with it, the right to
//! read every file through the peer protocol and to stop the daemons), or a link that turns a
//! daemon's log into an append to the user's `~/.bashrc`. So the directory, `instance.toml`,
//! `secret`, `hosts.toml`, `hosts.lock` and `logs/` with what it holds must be:
//!
//! * not a symbolic link (files are opened `O_NOFOLLOW`, the directory is checked by `lstat`);
//! * owned by the user (the effective uid);
//! * writable by the user alone (no group or other write bit); the secret also readable by
//!   the user alone.
//!
//! Files are created `O_EXCL | O_NOFOLLOW` with mode 0600 (logs are opened for append
//! `O_NOFOLLOW` and checked after opening); every check is made on the open descriptor
//! (`fstat`), so a name swapped between the check and the use changes nothing. A refusal is
//! `EACCES` naming the path, its owner and mode, and what to do.

use rustix::fs::{FileType, Mode, OFlags};
use std::fs::File;
use std::path::Path;
use tessera_core::{Errno, FsError, FsResult};

fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// What a file of the instance directory may be read by, beyond its owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Secrecy {
    /// Others may read it (configuration, host table, logs), never write it.
    Readable,
    /// Only its owner may read it (the secret).
    Private,
}

impl Secrecy {
    /// The permission bits the file must not have.
    fn forbidden(self) -> u32 {
        match self {
            Secrecy::Readable => 0o022,
            Secrecy::Private => 0o077,
        }
    }
}

/// The refusal of a path whose owner or mode makes it untrustworthy.
fn untrusted(path: &Path, what: &str, uid: u32, mode: u32) -> FsError {
    // The owner is named once: by `what` when it is the reason.
    let owner = if what.contains("uid") {
        String::new()
    } else {
        format!("owner uid {uid}, ")
    };
    FsError::new(
        Errno::Access,
        format!(
            "{} {what} ({owner}mode {:04o}); an instance directory and its files must belong to you (uid {}) and be writable by you alone, or another user could choose what your daemons read; if it is yours, `chmod go-w` it (`chmod 600` the secret), else remove it or use another instance directory (--instance DIR or TESSERA_INSTANCE)",
            path.display(),
            mode & 0o7777,
            euid()
        ),
    )
}

fn io(what: impl std::fmt::Display, e: rustix::io::Errno) -> FsError {
    FsError::io(what, &e.into())
}

/// Checks owner, kind and mode of an open descriptor against what `path` must be.
fn check_open(fd: &File, path: &Path, kind: FileType, secrecy: Secrecy) -> FsResult<()> {
    let st = rustix::fs::fstat(fd).map_err(|e| io(format!("stat {}", path.display()), e))?;
    let mode = st.st_mode;
    if FileType::from_raw_mode(mode) != kind {
        let want = if kind == FileType::Directory {
            "a directory"
        } else {
            "a regular file"
        };
        return Err(untrusted(path, &format!("is not {want}"), st.st_uid, mode));
    }
    if st.st_uid != euid() {
        return Err(untrusted(
            path,
            &format!("belongs to uid {}, not to you", st.st_uid),
            st.st_uid,
            mode,
        ));
    }
    if mode & secrecy.forbidden() != 0 {
        let who = if secrecy == Secrecy::Private {
            "can be read or written by others"
        } else {
            "can be written by others"
        };
        return Err(untrusted(path, who, st.st_uid, mode));
    }
    Ok(())
}

/// Maps a refused `O_NOFOLLOW` open (the name is a link, or not a directory where one
/// belongs) to a clear refusal.
fn open_error(path: &Path, e: rustix::io::Errno) -> FsError {
    if e != rustix::io::Errno::LOOP && e != rustix::io::Errno::NOTDIR {
        return io(format!("opening {}", path.display()), e);
    }
    match rustix::fs::lstat(path) {
        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
            untrusted(path, "is a symbolic link", st.st_uid, st.st_mode)
        }
        Ok(st) => untrusted(path, "is not a directory", st.st_uid, st.st_mode),
        Err(e) => io(format!("opening {}", path.display()), e),
    }
}

/// Checks that `dir` is a directory of the user's that only they can write (not a link).
pub fn check_dir(dir: &Path) -> FsResult<()> {
    let fd = rustix::fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| open_error(dir, e))?;
    check_open(&File::from(fd), dir, FileType::Directory, Secrecy::Readable)
}

/// Makes `dir` (mode 0700; its missing parents too) or checks the one that exists.
pub fn make_dir(dir: &Path) -> FsResult<()> {
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(|e| FsError::io(format!("creating {}", parent.display()), &e))?;
    }
    match rustix::fs::mkdir(dir, Mode::from_raw_mode(0o700)) {
        Ok(()) | Err(rustix::io::Errno::EXIST) => check_dir(dir),
        Err(e) => Err(io(format!("creating {}", dir.display()), e)),
    }
}

/// Opens a file of the instance directory for reading, after checking it; `None` if it does
/// not exist.
pub fn open_read(path: &Path, secrecy: Secrecy) -> FsResult<Option<File>> {
    let fd = match rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(e) => return Err(open_error(path, e)),
    };
    let f = File::from(fd);
    check_open(&f, path, FileType::RegularFile, secrecy)?;
    Ok(Some(f))
}

/// Reads a whole file of the instance directory, after checking it; `None` if it does not
/// exist.
pub fn read_to_string(path: &Path, secrecy: Secrecy) -> FsResult<Option<String>> {
    let Some(mut f) = open_read(path, secrecy)? else {
        return Ok(None);
    };
    let mut text = String::new();
    std::io::Read::read_to_string(&mut f, &mut text)
        .map_err(|e| FsError::io(format!("reading {}", path.display()), &e))?;
    Ok(Some(text))
}

/// Creates a new private file (`O_EXCL | O_NOFOLLOW`, mode 0600).
pub fn create_new(path: &Path) -> FsResult<File> {
    let fd = rustix::fs::open(
        path,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .map_err(|e| match e {
        rustix::io::Errno::EXIST => FsError::new(
            Errno::Exist,
            format!(
                "{} exists already; it was not made by this command (remove it if it is stale)",
                path.display()
            ),
        ),
        e => io(format!("creating {}", path.display()), e),
    })?;
    Ok(File::from(fd))
}

/// Opens a file of the directory for writing (created 0600 if missing; `append`: every write
/// at its end), without following a link, and checks it.
pub fn open_write(path: &Path, append: bool) -> FsResult<File> {
    let mut flags = OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
    flags |= if append {
        OFlags::WRONLY | OFlags::APPEND
    } else {
        OFlags::RDWR
    };
    let fd = rustix::fs::open(path, flags, Mode::from_raw_mode(0o600))
        .map_err(|e| open_error(path, e))?;
    let f = File::from(fd);
    check_open(&f, path, FileType::RegularFile, Secrecy::Readable)?;
    // The writes that follow block as a file's do (NONBLOCK kept a planted FIFO from
    // hanging the open).
    let fl = rustix::fs::fcntl_getfl(&f).map_err(|e| io(format!("{}", path.display()), e))?;
    rustix::fs::fcntl_setfl(&f, fl - OFlags::NONBLOCK)
        .map_err(|e| io(format!("{}", path.display()), e))?;
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{PermissionsExt, symlink};

    fn chmod(p: &Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    fn refused(r: FsResult<impl std::fmt::Debug>, says: &str) {
        let e = r.unwrap_err();
        assert_eq!(e.errno, Errno::Access, "{e}");
        assert!(e.message.contains(says), "{e}");
    }

    #[test]
    fn directories_must_be_private_real_and_ours() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().join("a/b/inst");
        make_dir(&d).unwrap();
        assert_eq!(
            std::fs::metadata(&d).unwrap().permissions().mode() & 0o777,
            0o700
        );
        chmod(&d, 0o755);
        check_dir(&d).unwrap();
        chmod(&d, 0o775);
        refused(check_dir(&d), "can be written by others");
        refused(make_dir(&d), "mode 0775");
        chmod(&d, 0o700);
        symlink(&d, tmp.path().join("link")).unwrap();
        refused(check_dir(&tmp.path().join("link")), "symbolic link");
        refused(make_dir(&tmp.path().join("link")), "symbolic link");
        std::fs::write(tmp.path().join("file"), b"").unwrap();
        refused(check_dir(&tmp.path().join("file")), "is not a directory");
    }

    #[test]
    fn files_are_read_only_when_trustworthy() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("instance.toml");
        assert!(read_to_string(&p, Secrecy::Readable).unwrap().is_none());
        std::io::Write::write_all(&mut create_new(&p).unwrap(), b"nodes = 1").unwrap();
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(create_new(&p).unwrap_err().errno, Errno::Exist);
        chmod(&p, 0o644);
        assert_eq!(
            read_to_string(&p, Secrecy::Readable).unwrap().unwrap(),
            "nodes = 1"
        );
        refused(
            read_to_string(&p, Secrecy::Private),
            "read or written by others",
        );
        chmod(&p, 0o664);
        refused(read_to_string(&p, Secrecy::Readable), "written by others");
        let target = tmp.path().join("elsewhere");
        std::fs::write(&target, b"planted").unwrap();
        chmod(&target, 0o600);
        let link = tmp.path().join("secret");
        symlink(&target, &link).unwrap();
        refused(read_to_string(&link, Secrecy::Private), "symbolic link");
        std::fs::create_dir(tmp.path().join("adir")).unwrap();
        refused(
            read_to_string(&tmp.path().join("adir"), Secrecy::Readable),
            "not a regular file",
        );
    }

    #[test]
    fn a_log_never_follows_a_planted_link() {
        let tmp = tempfile::tempdir().unwrap();
        let victim = tmp.path().join("bashrc");
        std::fs::write(&victim, b"mine\n").unwrap();
        let log = tmp.path().join("node-0.log");
        symlink(&victim, &log).unwrap();
        refused(open_write(&log, true), "symbolic link");
        assert_eq!(std::fs::read(&victim).unwrap(), b"mine\n");
        std::fs::remove_file(&log).unwrap();
        let mut f = open_write(&log, true).unwrap();
        std::io::Write::write_all(&mut f, b"a line\n").unwrap();
        assert_eq!(std::fs::read(&log).unwrap(), b"a line\n");
        let mut again = open_write(&log, true).unwrap();
        std::io::Write::write_all(&mut again, b"another\n").unwrap();
        assert_eq!(std::fs::read(&log).unwrap(), b"a line\nanother\n");
    }
}
