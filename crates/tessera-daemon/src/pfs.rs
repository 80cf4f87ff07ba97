//! The PFS mirror: every access of the daemon to the PFS directory.
//!
//! Each path is resolved from a descriptor of the PFS root with `openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS)`, and its last component is acted on with a `*at` call that does not
//! follow it (`AT_SYMLINK_NOFOLLOW`, `O_NOFOLLOW`, `unlinkat`, `renameat`). A symbolic link
//! planted in the PFS directory, on a file or on a directory of a path, therefore never makes
//! a lookup, truncate, unlink, rename or flush land outside it: a path through a link does not
//! exist for Tessera, and a link at the end of a path is a link ([`FileKind::Symlink`]), which
//! a change never follows. Reads follow a link only to a target the namespace resolved beneath
//! the root (`tessera_core::path::link_target`).
//!
//! Flush builds a file under a temporary name beside its target ([`Pfs::create_temp`],
//! created `O_EXCL | O_NOFOLLOW` with mode 0600), copies the current PFS file into it keeping
//! its holes ([`copy_sparse`]), and publishes it with the file's mode by renaming it over the
//! target ([`Pfs::publish`]).

use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags, SeekFrom};
use std::fs::File;
use std::path::{Path, PathBuf};
use tessera_core::namespace::NewNode;
use tessera_core::{Errno, FsError, FsResult, path};
use tessera_proto::FileKind;

/// Prefix of temporary flush files; readdir hides such names and lookups ignore them.
pub const TMP_MARKER: &str = ".tessera-flush.";

/// A temporary file being built by a flush: its directory, name, internal path and handle.
pub struct Temp {
    dir: OwnedFd,
    pub name: String,
    /// Internal path of the temporary (`/dir/.tessera-flush.N.X`), for the other nodes.
    pub path: String,
    pub file: File,
}

/// The PFS directory, opened once.
pub struct Pfs {
    root: OwnedFd,
    dir: PathBuf,
    /// On a file system of this machine's own disks or memory (see [`answers_locally`]).
    local: bool,
}

/// Whether a file system of type `f_type` (statfs) answers metadata calls from this
/// machine's own disks or memory: ext2/3/4, XFS, Btrfs, tmpfs, F2FS, ZFS. Anything else
/// (NFS, Lustre, GPFS, BeeGFS, CIFS, FUSE, or a type not known here) may wait on a network.
pub fn answers_locally(f_type: i64) -> bool {
    const LOCAL: [i64; 7] = [
        0xEF53,      // ext2, ext3, ext4
        0x5846_5342, // XFS
        0x9123_683E, // Btrfs
        0x0102_1994, // tmpfs
        0xF2F5_2010, // F2FS
        0x2FC1_2FC1, // ZFS
        0x8584_58F6, // ramfs
    ];
    LOCAL.contains(&f_type)
}

fn beneath() -> ResolveFlags {
    ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS
}

/// An internal path as a path relative to the root (`.` for the root itself).
fn rel(p: &str) -> &str {
    match p.trim_start_matches('/') {
        "" => ".",
        r => r,
    }
}

fn io_err(what: impl std::fmt::Display, e: rustix::io::Errno) -> FsError {
    FsError::io(what, &std::io::Error::from(e))
}

/// Whether a resolution error means "no such entry beneath the root" (missing, or reached
/// only through a link or a non-directory).
fn absent(e: rustix::io::Errno) -> bool {
    use rustix::io::Errno as E;
    matches!(e, E::NOENT | E::NOTDIR | E::LOOP | E::XDEV)
}

fn kind_of(t: FileType) -> Option<FileKind> {
    match t {
        FileType::RegularFile => Some(FileKind::File),
        FileType::Directory => Some(FileKind::Dir),
        FileType::Symlink => Some(FileKind::Symlink),
        _ => None,
    }
}

impl Pfs {
    /// Opens the PFS directory (it must exist and be a directory).
    pub fn open(dir: &Path) -> FsResult<Pfs> {
        let root = rustix::fs::open(
            dir,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| io_err(format!("opening the PFS directory {}", dir.display()), e))?;
        let local = rustix::fs::fstatfs(&root).is_ok_and(|s| answers_locally(s.f_type));
        Ok(Pfs {
            root,
            dir: dir.to_path_buf(),
            local,
        })
    }

    /// Whether the PFS directory is on a local file system ([`answers_locally`]): its
    /// metadata calls then never stall for long.
    pub fn is_local(&self) -> bool {
        self.local
    }

    /// Where an internal path lives on the PFS, for messages.
    pub fn show(&self, p: &str) -> String {
        self.dir
            .join(p.trim_start_matches('/'))
            .display()
            .to_string()
    }

    /// Opens `p` beneath the root with `flags`, following no link on the way.
    fn open_beneath(&self, p: &str, flags: OFlags) -> Result<OwnedFd, rustix::io::Errno> {
        rustix::fs::openat2(&self.root, rel(p), flags, Mode::empty(), beneath())
    }

    /// A directory beneath the root, resolved without following links.
    fn dir_fd(&self, p: &str) -> Result<OwnedFd, rustix::io::Errno> {
        self.open_beneath(p, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC)
    }

    /// The directory holding `p` and `p`'s name.
    fn parent<'a>(&self, p: &'a str) -> Result<(OwnedFd, &'a str), rustix::io::Errno> {
        let (parent, name) = path::split(p).ok_or(rustix::io::Errno::INVAL)?;
        Ok((self.dir_fd(parent)?, name))
    }

    /// The attributes of the entry at `p`, without following a link at its end; `None` if it
    /// does not exist beneath the root (or is not a file, directory or link).
    pub fn lstat(&self, p: &str) -> FsResult<Option<NewNode>> {
        if p == "/" {
            return Ok(None);
        }
        let (dir, name) = match self.parent(p) {
            Ok(x) => x,
            Err(e) if absent(e) => return Ok(None),
            Err(e) => return Err(io_err(format!("resolving {}", self.show(p)), e)),
        };
        let st = match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(e) if absent(e) => return Ok(None),
            Err(e) => return Err(io_err(format!("lstat {}", self.show(p)), e)),
        };
        let Some(kind) = kind_of(FileType::from_raw_mode(st.st_mode)) else {
            return Ok(None);
        };
        Ok(Some(NewNode {
            kind,
            mode: st.st_mode & 0o7777,
            uid: st.st_uid,
            gid: st.st_gid,
            size: if kind == FileKind::Dir {
                0
            } else {
                st.st_size as u64
            },
            mtime_ns: st.st_mtime as i64 * 1_000_000_000 + st.st_mtime_nsec as i64,
        }))
    }

    /// What the link at `p` holds.
    pub fn read_link(&self, p: &str) -> FsResult<String> {
        let (dir, name) = self
            .parent(p)
            .map_err(|e| io_err(format!("resolving {}", self.show(p)), e))?;
        let target = rustix::fs::readlinkat(&dir, name, Vec::new())
            .map_err(|e| io_err(format!("readlink {}", self.show(p)), e))?;
        target.into_string().map_err(|_| {
            FsError::new(
                Errno::Inval,
                format!("{}: the link's target is not UTF-8", self.show(p)),
            )
        })
    }

    /// Creates the symbolic link `p` (its parent directories too) with `target` as given.
    pub fn symlink(&self, target: &str, p: &str) -> FsResult<()> {
        let (parent, name) = path::split(p).ok_or_else(|| {
            FsError::new(Errno::Exist, "the root directory cannot be a symbolic link")
        })?;
        let dir = self.make_dirs(parent)?;
        rustix::fs::symlinkat(target, &dir, name).map_err(|e| {
            io_err(
                format!("creating the symbolic link {} -> {target}", self.show(p)),
                e,
            )
        })
    }

    /// The entries of directory `p` that Tessera can show (UTF-8 names of files,
    /// directories and links, temporaries left out); empty if it does not exist.
    pub fn list(&self, p: &str) -> FsResult<Vec<(String, FileKind)>> {
        let fd = match self.open_beneath(p, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC) {
            Ok(fd) => fd,
            Err(e) if absent(e) => return Ok(Vec::new()),
            Err(e) => return Err(io_err(format!("opening {}", self.show(p)), e)),
        };
        let mut dir =
            rustix::fs::Dir::new(fd).map_err(|e| io_err(format!("listing {}", self.show(p)), e))?;
        let mut out = Vec::new();
        while let Some(entry) = dir.read() {
            let entry = entry.map_err(|e| io_err(format!("listing {}", self.show(p)), e))?;
            let Ok(name) = entry.file_name().to_str() else {
                continue;
            };
            if name == "." || name == ".." || name.starts_with(TMP_MARKER) {
                continue;
            }
            if let Some(kind) = kind_of(entry.file_type()) {
                out.push((name.to_string(), kind));
            } else if let Some(m) = self.lstat(&path::join(p, name))? {
                out.push((name.to_string(), m.kind));
            }
        }
        Ok(out)
    }

    /// Whether directory `p` holds anything at all (hidden temporaries included).
    pub fn has_entries(&self, p: &str) -> bool {
        let Ok(fd) = self.open_beneath(p, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC)
        else {
            return false;
        };
        let Ok(mut dir) = rustix::fs::Dir::new(fd) else {
            return false;
        };
        while let Some(Ok(e)) = dir.read() {
            let n = e.file_name().to_bytes();
            if n != b"." && n != b".." {
                return true;
            }
        }
        false
    }

    /// Removes the file or link at `p` (a link itself, never its target); nothing to do if
    /// it does not exist beneath the root.
    pub fn remove_file(&self, p: &str) -> FsResult<()> {
        let (dir, name) = match self.parent(p) {
            Ok(x) => x,
            Err(e) if absent(e) => return Ok(()),
            Err(e) => return Err(io_err(format!("resolving {}", self.show(p)), e)),
        };
        match rustix::fs::unlinkat(&dir, name, AtFlags::empty()) {
            Ok(()) => Ok(()),
            Err(e) if absent(e) => Ok(()),
            Err(e) => Err(io_err(format!("removing {}", self.show(p)), e)),
        }
    }

    /// Removes the empty directory `p`, if it exists beneath the root (a link there stays).
    pub fn remove_dir(&self, p: &str) -> FsResult<()> {
        let (dir, name) = match self.parent(p) {
            Ok(x) => x,
            Err(e) if absent(e) => return Ok(()),
            Err(e) => return Err(io_err(format!("resolving {}", self.show(p)), e)),
        };
        match rustix::fs::unlinkat(&dir, name, AtFlags::REMOVEDIR) {
            Ok(()) => Ok(()),
            Err(e) if absent(e) => Ok(()),
            Err(e) => Err(io_err(format!("removing {}", self.show(p)), e)),
        }
    }

    /// The directory `p`, creating every missing component (mode 0755), each one resolved
    /// without following links: a link on the way is `ELOOP`.
    pub fn make_dirs(&self, p: &str) -> FsResult<OwnedFd> {
        let mut at = rustix::fs::openat(
            &self.root,
            ".",
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| io_err("opening the PFS directory", e))?;
        let mut done = String::new();
        for name in p.split('/').filter(|c| !c.is_empty()) {
            done = path::join(if done.is_empty() { "/" } else { &done }, name);
            match rustix::fs::mkdirat(&at, name, Mode::from_raw_mode(0o755)) {
                Ok(()) => {}
                Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(io_err(format!("creating {}", self.show(&done)), e)),
            }
            at = rustix::fs::openat(
                &at,
                name,
                OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| {
                let link = matches!(
                    rustix::fs::statat(&at, name, AtFlags::SYMLINK_NOFOLLOW),
                    Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink
                );
                if link {
                    FsError::new(
                        Errno::Loop,
                        format!(
                            "{} is a symbolic link; Tessera does not follow links in the PFS directory",
                            self.show(&done)
                        ),
                    )
                } else {
                    io_err(format!("opening the directory {}", self.show(&done)), e)
                }
            })?;
        }
        Ok(at)
    }

    /// Renames the entry at `from` to `to` (a link moves as a link), creating `to`'s parent
    /// directories. Returns `false` if `from` does not exist beneath the root.
    pub fn rename(&self, from: &str, to: &str) -> FsResult<bool> {
        let (from_dir, from_name) = match self.parent(from) {
            Ok(x) => x,
            Err(e) if absent(e) => return Ok(false),
            Err(e) => return Err(io_err(format!("resolving {}", self.show(from)), e)),
        };
        if rustix::fs::statat(&from_dir, from_name, AtFlags::SYMLINK_NOFOLLOW).is_err() {
            return Ok(false);
        }
        let (to_parent, to_name) = path::split(to).ok_or_else(|| {
            FsError::new(Errno::Inval, "the root directory cannot be a rename target")
        })?;
        let to_dir = self.make_dirs(to_parent)?;
        rustix::fs::renameat(&from_dir, from_name, &to_dir, to_name).map_err(|e| {
            io_err(
                format!("moving {} to {}", self.show(from), self.show(to)),
                e,
            )
        })?;
        Ok(true)
    }

    /// Cuts the regular file at `p` to `size` if it is longer; a link or a missing file is
    /// left alone.
    pub fn truncate(&self, p: &str, size: u64) -> FsResult<()> {
        let Some(f) = self.open_regular(p, OFlags::WRONLY)? else {
            return Ok(());
        };
        let len = rustix::fs::fstat(&f)
            .map_err(|e| io_err(format!("stat {}", self.show(p)), e))?
            .st_size as u64;
        if len > size {
            rustix::fs::ftruncate(&f, size)
                .map_err(|e| io_err(format!("truncating the PFS copy {}", self.show(p)), e))?;
        }
        Ok(())
    }

    /// Opens the regular file at `p` (`None` if it is missing, a link, or reached through
    /// one).
    pub fn open_regular(&self, p: &str, access: OFlags) -> FsResult<Option<File>> {
        let fd = match self.open_beneath(
            p,
            access | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        ) {
            Ok(fd) => fd,
            Err(e) if absent(e) => return Ok(None),
            Err(e) => return Err(io_err(format!("opening {}", self.show(p)), e)),
        };
        let st = rustix::fs::fstat(&fd).map_err(|e| io_err(format!("stat {}", self.show(p)), e))?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Ok(None);
        }
        Ok(Some(File::from(fd)))
    }

    /// The internal path of a new temporary for a flush of `target`: beside it, named after
    /// `node` and a random number (short and fixed-length, so any name that fits also fits
    /// its temporary).
    pub fn temp_path(target: &str, node: u32) -> FsResult<String> {
        let (parent, _) = path::split(target)
            .ok_or_else(|| FsError::new(Errno::Inval, "cannot flush the root"))?;
        Ok(path::join(
            parent,
            &format!("{TMP_MARKER}{node}.{:016x}", rand::random::<u64>()),
        ))
    }

    /// Creates the temporary at `temp` (from [`Pfs::temp_path`]), its directories as needed:
    /// `O_EXCL | O_NOFOLLOW`, mode 0600 until it is published.
    pub fn create_temp(&self, temp: &str) -> FsResult<Temp> {
        let (parent, name) = path::split(temp)
            .filter(|(_, n)| n.starts_with(TMP_MARKER))
            .ok_or_else(|| {
                FsError::new(Errno::Inval, format!("{temp} is not a flush temporary"))
            })?;
        let dir = self.make_dirs(parent)?;
        let fd = rustix::fs::openat(
            &dir,
            name,
            OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )
        .map_err(|e| io_err(format!("creating {}", self.show(temp)), e))?;
        Ok(Temp {
            dir,
            name: name.to_string(),
            path: temp.to_string(),
            file: File::from(fd),
        })
    }

    /// Opens a temporary another node's flush created, for writing its part: it must be a
    /// flush temporary, a regular file, reached without a link.
    pub fn open_temp(&self, p: &str) -> FsResult<File> {
        let refuse = || {
            FsError::new(
                Errno::Access,
                format!(
                    "refusing to flush into {}: not a flush file of this instance",
                    self.show(p)
                ),
            )
        };
        let p = path::normalize(p).map_err(|_| refuse())?;
        match path::split(&p) {
            Some((_, name)) if name.starts_with(TMP_MARKER) => {}
            _ => return Err(refuse()),
        }
        self.open_regular(&p, OFlags::WRONLY)?.ok_or_else(refuse)
    }

    /// Removes a flush temporary by its internal path (at start, for those a crash left).
    pub fn remove_temp(&self, p: &str) -> FsResult<()> {
        match path::split(p) {
            Some((_, name)) if name.starts_with(TMP_MARKER) => self.remove_file(p),
            _ => Err(FsError::new(
                Errno::Inval,
                format!("{p} is not a flush temporary"),
            )),
        }
    }

    /// Gives the temporary its final size and mode, makes it durable, and renames it over
    /// `target` (in the same directory): readers of the PFS see the old file or the new one.
    /// On failure the temporary is removed.
    pub fn publish(&self, temp: Temp, target: &str, size: u64, mode: u32) -> FsResult<()> {
        let result = self.try_publish(&temp, target, size, mode);
        if result.is_err() {
            self.discard(temp);
        }
        result
    }

    fn try_publish(&self, temp: &Temp, target: &str, size: u64, mode: u32) -> FsResult<()> {
        let (_, name) = path::split(target)
            .ok_or_else(|| FsError::new(Errno::Inval, "cannot flush the root"))?;
        let f = &temp.file;
        f.set_len(size)
            .map_err(|e| FsError::io(format!("sizing {}", self.show(&temp.path)), &e))?;
        rustix::fs::fchmod(f, Mode::from_raw_mode(mode & 0o7777))
            .map_err(|e| io_err(format!("chmod {}", self.show(&temp.path)), e))?;
        f.sync_all()
            .map_err(|e| FsError::io(format!("syncing {}", self.show(&temp.path)), &e))?;
        rustix::fs::renameat(&temp.dir, temp.name.as_str(), &temp.dir, name)
            .map_err(|e| io_err(format!("publishing {}", self.show(target)), e))?;
        // The directory entry must be durable too; a PATH descriptor cannot be synced.
        if let Ok(d) = rustix::fs::openat(
            &temp.dir,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            let _ = rustix::fs::fsync(&d);
        }
        Ok(())
    }

    /// Removes a temporary that will not be published.
    pub fn discard(&self, temp: Temp) {
        let _ = rustix::fs::unlinkat(&temp.dir, temp.name.as_str(), AtFlags::empty());
    }
}

/// Copies `src` into `dst` (both at offset 0), keeping holes: a reflink where the file
/// system offers one, otherwise only the data segments (`SEEK_DATA`/`SEEK_HOLE`), so a sparse
/// file stays sparse however often it is flushed.
pub fn copy_sparse(src: &File, dst: &File) -> std::io::Result<()> {
    let len = src.metadata()?.len();
    dst.set_len(len)?;
    if len == 0 || rustix::fs::ioctl_ficlone(dst, src).is_ok() {
        return Ok(());
    }
    let mut at = 0u64;
    while at < len {
        let data = match rustix::fs::seek(src, SeekFrom::Data(at)) {
            Ok(d) => d,
            Err(rustix::io::Errno::NXIO) => break, // only a hole remains
            Err(e) => return Err(e.into()),
        };
        let hole = rustix::fs::seek(src, SeekFrom::Hole(data))?.min(len);
        let (mut off_in, mut off_out) = (data, data);
        while off_in < hole {
            let want = (hole - off_in).min(1 << 30) as usize;
            let n = rustix::fs::copy_file_range(
                src.as_fd(),
                Some(&mut off_in),
                dst.as_fd(),
                Some(&mut off_out),
                want,
            )?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
        at = hole;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};

    #[test]
    fn only_file_systems_of_this_machine_count_as_local() {
        let shm = tempfile::tempdir_in("/dev/shm").unwrap();
        assert!(Pfs::open(shm.path()).unwrap().is_local(), "tmpfs");
        // NFS, Lustre, GPFS, FUSE: calls go to the blocking pool.
        for remote in [0x6969, 0x0BD0_0BD0, 0x4750_4653, 0x6573_5546] {
            assert!(!answers_locally(remote), "{remote:#x}");
        }
        assert!(answers_locally(0xEF53));
    }

    fn setup() -> (tempfile::TempDir, tempfile::TempDir, Pfs) {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("victim"), b"outside").unwrap();
        let pfs = Pfs::open(root.path()).unwrap();
        (root, outside, pfs)
    }

    #[test]
    fn links_are_entries_not_ways_out() {
        let (root, outside, pfs) = setup();
        let r = root.path();
        std::fs::create_dir(r.join("d")).unwrap();
        std::fs::write(r.join("d/f"), b"12345").unwrap();
        symlink(outside.path(), r.join("dirlink")).unwrap();
        symlink(outside.path().join("victim"), r.join("leaf")).unwrap();
        assert_eq!(pfs.lstat("/d/f").unwrap().unwrap().size, 5);
        assert_eq!(pfs.lstat("/leaf").unwrap().unwrap().kind, FileKind::Symlink);
        assert_eq!(pfs.lstat("/dirlink/victim").unwrap(), None);
        assert!(pfs.read_link("/leaf").unwrap().ends_with("victim"));
        pfs.truncate("/leaf", 0).unwrap();
        pfs.truncate("/dirlink/victim", 0).unwrap();
        pfs.remove_file("/dirlink/victim").unwrap();
        assert_eq!(
            std::fs::read(outside.path().join("victim")).unwrap(),
            b"outside"
        );
        assert!(pfs.open_regular("/leaf", OFlags::RDONLY).unwrap().is_none());
        assert_eq!(
            pfs.make_dirs("/dirlink/x").err().unwrap().errno,
            Errno::Loop
        );
        assert!(pfs.rename("/d/f", "/dirlink/f").is_err());
        assert!(r.join("d/f").exists());
        let names = pfs.list("/").unwrap();
        assert!(
            names.contains(&("leaf".into(), FileKind::Symlink)),
            "{names:?}"
        );
        assert!(pfs.list("/dirlink").unwrap().is_empty());
        pfs.remove_file("/leaf").unwrap();
        assert!(std::fs::symlink_metadata(r.join("leaf")).is_err());
        assert!(outside.path().join("victim").exists());
    }

    #[test]
    fn temporaries_publish_with_the_mode_and_stay_inside() {
        let (root, _outside, pfs) = setup();
        let t = pfs
            .create_temp(&Pfs::temp_path("/a/b/file", 3).unwrap())
            .unwrap();
        assert!(t.name.starts_with(".tessera-flush.3."));
        let tmp_mode = std::fs::metadata(root.path().join("a/b").join(&t.name))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(tmp_mode & 0o777, 0o600);
        let other = pfs.open_temp(&t.path).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&other, b"xyz", 10).unwrap();
        assert_eq!(
            pfs.open_temp("/a/b/file").err().unwrap().errno,
            Errno::Access
        );
        pfs.publish(t, "/a/b/file", 13, 0o640).unwrap();
        let m = std::fs::metadata(root.path().join("a/b/file")).unwrap();
        assert_eq!((m.len(), m.mode() & 0o777), (13, 0o640));
    }

    #[test]
    fn a_temporary_that_cannot_be_published_is_removed() {
        let (root, _outside, pfs) = setup();
        let t = pfs
            .create_temp(&Pfs::temp_path("/d/file", 1).unwrap())
            .unwrap();
        let name = t.name.clone();
        // The target became a directory that is not empty: the rename fails.
        std::fs::create_dir_all(root.path().join("d/file/inside")).unwrap();
        assert!(pfs.publish(t, "/d/file", 3, 0o644).is_err());
        assert!(
            !root.path().join("d").join(name).exists(),
            "the temporary stayed"
        );
    }

    #[test]
    fn sparse_copies_keep_their_holes() {
        let dir = tempfile::tempdir().unwrap();
        let src = File::create(dir.path().join("src")).unwrap();
        src.set_len(256 << 20).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&src, b"tail", (256 << 20) - 4).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&src, b"head", 0).unwrap();
        let src = File::open(dir.path().join("src")).unwrap();
        let dst = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.path().join("dst"))
            .unwrap();
        copy_sparse(&src, &dst).unwrap();
        let m = dst.metadata().unwrap();
        assert_eq!(m.len(), 256 << 20);
        assert!(
            m.blocks() * 512 < 1 << 20,
            "{} bytes allocated",
            m.blocks() * 512
        );
        let mut b = [0u8; 4];
        std::os::unix::fs::FileExt::read_exact_at(&dst, &mut b, (256 << 20) - 4).unwrap();
        assert_eq!(&b, b"tail");
        std::os::unix::fs::FileExt::read_exact_at(&dst, &mut b, 0).unwrap();
        assert_eq!(&b, b"head");
    }
}
