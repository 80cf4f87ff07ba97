//! A scripted rank that works through plain file calls on a FUSE mount of the instance
//! (`tessera script --posix-root DIR`), so the conformance suite's programs run through the
//! kernel as an unmodified program's would. Each synchronisation of the models becomes what
//! such a program does: a commit or an MPI-IO sync is `fsync`; a session close publishes by
//! closing the descriptor (and the rank opens the file again to go on); a session open is a
//! fresh open, which drops what the kernel cached. The consistency model is the mount's.

use crate::script::{Cmd, pattern_byte, serve};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use tessera_client::{Errno, FsError};

/// The open file, and how to open it again.
struct Open {
    file: File,
    path: PathBuf,
    read: bool,
    write: bool,
}

impl Open {
    fn reopen(&mut self) -> Result<(), FsError> {
        let file = OpenOptions::new()
            .read(self.read)
            .write(self.write)
            .open(&self.path)
            .map_err(|e| FsError::io(format!("reopening {}", self.path.display()), &e))?;
        // The old descriptor closes here: its close publishes.
        self.file = file;
        Ok(())
    }
}

/// Where a Tessera path (with the instance's prefix) is on the mount at `root`.
pub fn on_mount(root: &Path, prefix: &str, path: &str) -> Result<PathBuf, FsError> {
    let below = path
        .strip_prefix(prefix.trim_end_matches('/'))
        .filter(|rest| rest.is_empty() || rest.starts_with('/'))
        .ok_or_else(|| {
            FsError::new(
                Errno::Inval,
                format!("{path} is not beneath the instance's prefix {prefix}"),
            )
        })?;
    Ok(root.join(below.trim_start_matches('/')))
}

fn run(
    root: &Path,
    prefix: &str,
    open: &mut Option<Open>,
    cmd: Cmd,
) -> Result<Option<Vec<u8>>, FsError> {
    let no_file = || FsError::new(Errno::BadF, "no file is open in this rank");
    let io = |what: &str, e: std::io::Error| FsError::io(what, &e);
    match cmd {
        Cmd::Open {
            path,
            read,
            write,
            create,
            ..
        } => {
            let path = on_mount(root, prefix, &path)?;
            let file = OpenOptions::new()
                .read(read)
                .write(write)
                .create(create)
                .open(&path)
                .map_err(|e| io("open", e))?;
            *open = Some(Open {
                file,
                path,
                read,
                write,
            });
        }
        Cmd::Write { off, len, id } => {
            let buf: Vec<u8> = (off..off + len).map(|o| pattern_byte(id, o)).collect();
            let o = open.as_mut().ok_or_else(no_file)?;
            o.file
                .write_all_at(&buf, off)
                .map_err(|e| io("pwrite", e))?;
        }
        Cmd::Read { off, len } => {
            let o = open.as_mut().ok_or_else(no_file)?;
            let mut buf = vec![0u8; len as usize];
            let mut n = 0;
            while n < buf.len() {
                match o.file.read_at(&mut buf[n..], off + n as u64) {
                    Ok(0) => break,
                    Ok(k) => n += k,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(io("pread", e)),
                }
            }
            buf.truncate(n);
            return Ok(Some(buf));
        }
        Cmd::Commit | Cmd::Sync => {
            let o = open.as_mut().ok_or_else(no_file)?;
            o.file.sync_all().map_err(|e| io("fsync", e))?;
        }
        Cmd::SessionClose | Cmd::SessionOpen => open.as_mut().ok_or_else(no_file)?.reopen()?,
        Cmd::Close => {
            open.take().ok_or_else(no_file)?;
        }
        Cmd::Exit => {}
        other => {
            return Err(FsError::new(
                Errno::NotSup,
                format!("{other:?} is not a plain file call: a rank on a mount cannot run it"),
            ));
        }
    }
    Ok(None)
}

/// Runs commands from stdin on the mount at `root` of the instance whose paths start with
/// `prefix`.
pub fn main(root: &Path, prefix: &str) -> anyhow::Result<()> {
    let mut open = None;
    serve(|cmd| run(root, prefix, &mut open, cmd))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tessera_paths_map_beneath_the_mount_and_others_are_refused() {
        let root = Path::new("/mnt/t");
        assert_eq!(
            on_mount(root, "/tessera", "/tessera/a/b").unwrap(),
            Path::new("/mnt/t/a/b")
        );
        assert_eq!(on_mount(root, "/tessera/", "/tessera").unwrap(), root);
        assert!(on_mount(root, "/tessera", "/tesserax/a").is_err());
        assert!(on_mount(root, "/tessera", "/etc/passwd").is_err());
    }
}
