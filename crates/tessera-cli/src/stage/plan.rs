//! What a staging run copies: the files of the sources (trees walked), where each goes, how,
//! and which node's worker copies it. Kept in a file of the instance directory, which every
//! host of the job sees, so each worker reads its share there.

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use tessera_client::{Client, Errno, InstanceConfig};
use tessera_core::staging::{COMPLETION_XATTR, Completion};

/// How one file is copied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum How {
    /// From a directory outside the instance to a Tessera path: written into the burst
    /// buffer of the worker's node and attached there.
    In,
    /// From a Tessera path to the instance's PFS directory: a flush.
    Flush,
    /// From a Tessera path to a directory outside the instance: a copy published by
    /// temporary-then-rename, as flush publishes.
    Out,
    /// A file of the instance's PFS directory, in place: the bytes only its PFS copy holds
    /// are read through Tessera and written back at their offsets, into the burst buffer of
    /// the worker's node; its times are kept.
    Fetch,
}

/// Where the files of a Tessera tree go.
#[derive(Clone, Copy, Debug)]
pub enum Target<'a> {
    /// The same path in the instance's PFS directory (a flush).
    Pfs,
    /// Under a local directory.
    Local(&'a Path),
    /// Nowhere else: their PFS bytes come into the burst buffers.
    InPlace,
}

/// The Tessera path a stage-in source has already, if any: a Tessera path (beneath the
/// instance's prefix `mount`), or a path in the instance's PFS directory `pfs`, whose files
/// Tessera imports at their own paths.
pub fn in_place(source: &str, mount: &str, pfs: &Path) -> Option<String> {
    if let Ok(inner) = tessera_core::path::resolve(source, mount) {
        return Some(tessera_path(mount, &inner));
    }
    let source = std::fs::canonicalize(source).ok()?;
    let pfs = std::fs::canonicalize(pfs).ok()?;
    pfs_to_tessera(&source, &pfs, mount)
}

/// The Tessera path of `source` when it lies in PFS directory `pfs` (both canonical).
pub fn pfs_to_tessera(source: &Path, pfs: &Path, mount: &str) -> Option<String> {
    let rel = source.strip_prefix(pfs).ok()?.to_str()?;
    Some(tessera_path(mount, &format!("/{rel}")))
}

/// The user path of internal path `inner` (`/` is the prefix itself).
fn tessera_path(mount: &str, inner: &str) -> String {
    let mount = mount.trim_end_matches('/');
    if inner == "/" {
        mount.to_string()
    } else {
        format!("{mount}{inner}")
    }
}

/// One file to copy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Copy {
    pub how: How,
    pub source: String,
    pub dest: String,
    /// The source as the plan found it.
    pub size: u64,
    pub mtime_ns: i64,
}

/// A run's copies and each node's share of them (indices into `copies`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Plan {
    pub copies: Vec<Copy>,
    pub shares: Vec<Vec<usize>>,
}

/// A local file's modification time in nanoseconds since the epoch.
pub fn mtime_of(m: &std::fs::Metadata) -> i64 {
    m.mtime().saturating_mul(1_000_000_000) + m.mtime_nsec()
}

/// The files of local `source` (a file, or a tree walked without following links), each
/// with the path it gets under `dest` (`cp -r SOURCE DEST/` places it the same way).
pub fn local_files(source: &Path, dest: &str) -> Result<Vec<Copy>> {
    let source = std::fs::canonicalize(source)
        .with_context(|| format!("stage-in source {}", source.display()))?;
    let name = source
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let top = format!("{}/{name}", dest.trim_end_matches('/'));
    let mut out = Vec::new();
    walk_local(&source, &top, &mut out)?;
    Ok(out)
}

fn walk_local(path: &Path, dest: &str, out: &mut Vec<Copy>) -> Result<()> {
    let m = std::fs::symlink_metadata(path).with_context(|| format!("{}", path.display()))?;
    if m.is_dir() {
        let mut entries: Vec<_> = std::fs::read_dir(path)
            .with_context(|| format!("listing {}", path.display()))?
            .collect::<std::io::Result<_>>()?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let name = e.file_name().to_string_lossy().into_owned();
            walk_local(&e.path(), &format!("{dest}/{name}"), out)?;
        }
    } else if m.is_file() {
        out.push(Copy {
            how: How::In,
            source: path.display().to_string(),
            dest: dest.to_string(),
            size: m.len(),
            mtime_ns: mtime_of(&m),
        });
    } else {
        eprintln!(
            "tessera: skipping {}: only regular files and directories are staged",
            path.display()
        );
    }
    Ok(())
}

/// The files of Tessera path `source` (a file or a tree), each with where it goes.
pub fn tessera_files(c: &Client, source: &str, target: Target) -> Result<Vec<Copy>> {
    let a = c
        .stat(source)
        .with_context(|| format!("stage source {source}"))?;
    let top = match target {
        Target::Local(d) => {
            let name = source
                .trim_end_matches('/')
                .rsplit('/')
                .next()
                .unwrap_or("");
            Some(d.join(name))
        }
        Target::Pfs | Target::InPlace => None,
    };
    let how = match target {
        Target::Pfs => How::Flush,
        Target::Local(_) => How::Out,
        Target::InPlace => How::Fetch,
    };
    let mut out = Vec::new();
    walk_tessera(c, source, &a, how, top.as_deref(), &mut out)?;
    Ok(out)
}

fn walk_tessera(
    c: &Client,
    path: &str,
    a: &tessera_client::Attr,
    how: How,
    dest: Option<&Path>,
    out: &mut Vec<Copy>,
) -> Result<()> {
    match a.kind {
        tessera_client::FileKind::Dir => {
            let mut entries = c.readdir(path)?;
            entries.sort_by(|x, y| x.name.cmp(&y.name));
            for e in entries {
                let child = format!("{}/{}", path.trim_end_matches('/'), e.name);
                let ca = c.stat(&child)?;
                let d = dest.map(|d| d.join(&e.name));
                walk_tessera(c, &child, &ca, how, d.as_deref(), out)?;
            }
        }
        tessera_client::FileKind::File => out.push(Copy {
            how,
            source: path.to_string(),
            dest: dest.map_or_else(|| path.to_string(), |d| d.display().to_string()),
            size: a.size,
            mtime_ns: a.mtime_ns,
        }),
        tessera_client::FileKind::Symlink => {
            eprintln!("tessera: skipping {path}: a link; only files and directories are staged")
        }
    }
    Ok(())
}

/// What a copy's destination holds before the copy.
#[derive(Debug, PartialEq, Eq)]
pub enum Found {
    /// No file there (for a stage-in: nothing to clear before writing).
    Absent,
    /// A file with no record, or one that does not decode.
    Unrecorded,
    Recorded(Completion),
}

impl Found {
    /// Whether the destination is a finished copy of a source of this size and time.
    pub fn covers(&self, size: u64, mtime_ns: i64) -> bool {
        matches!(self, Found::Recorded(r) if r.covers(size, mtime_ns))
    }
}

/// The completion record of `copy`'s destination, if it has one; `cfg` is the instance's.
pub fn record(c: &Client, cfg: &InstanceConfig, copy: &Copy) -> Found {
    let text = match copy.how {
        How::In => match c.get_xattr(&copy.dest, COMPLETION_XATTR) {
            Ok(text) => text,
            Err(e) if e.errno == Errno::NoEnt => return Found::Absent,
            Err(_) => return Found::Unrecorded,
        },
        How::Flush => match pfs_path(cfg, &copy.dest) {
            Some(p) => match local_xattr(&p) {
                Some(text) => text,
                None if !p.exists() => return Found::Absent,
                None => return Found::Unrecorded,
            },
            None => return Found::Unrecorded,
        },
        How::Out => match local_xattr(Path::new(&copy.dest)) {
            Some(text) => text,
            None => return Found::Unrecorded,
        },
        // Where its bytes are says whether it is staged (`Client::locate`).
        How::Fetch => return Found::Unrecorded,
    };
    std::str::from_utf8(&text)
        .ok()
        .and_then(Completion::decode)
        .map_or(Found::Unrecorded, Found::Recorded)
}

/// Where a Tessera path's flushed copy is in the PFS directory.
pub fn pfs_path(cfg: &InstanceConfig, tessera: &str) -> Option<PathBuf> {
    let inner = tessera_core::path::resolve(tessera, &cfg.mount).ok()?;
    Some(cfg.pfs_dir.join(inner.trim_start_matches('/')))
}

/// An extended attribute of a local file (`None` if it has none, or the file system keeps
/// none).
pub fn local_xattr(path: &Path) -> Option<Vec<u8>> {
    // A record is a few dozen bytes; a longer value is not one.
    let mut buf = vec![0u8; 256];
    let n = rustix::fs::getxattr(path, COMPLETION_XATTR, &mut buf).ok()?;
    buf.truncate(n);
    Some(buf)
}

/// Writes a local file's completion record; false where the file system keeps no extended
/// attributes (the file is then copied again by a rerun).
pub fn set_local_xattr(path: &Path, value: &[u8]) -> Result<bool> {
    match rustix::fs::setxattr(
        path,
        COMPLETION_XATTR,
        value,
        rustix::fs::XattrFlags::empty(),
    ) {
        Ok(()) => Ok(true),
        Err(e) if e == rustix::io::Errno::NOTSUP => Ok(false),
        Err(e) => bail!("recording the copy in {}: {e}", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_in_the_pfs_directory_or_the_prefix_are_in_place() {
        let pfs = Path::new("/scratch/pfs");
        assert_eq!(
            pfs_to_tessera(Path::new("/scratch/pfs/run/a"), pfs, "/tessera").as_deref(),
            Some("/tessera/run/a")
        );
        assert_eq!(
            pfs_to_tessera(pfs, pfs, "/tessera/").as_deref(),
            Some("/tessera")
        );
        assert_eq!(
            pfs_to_tessera(Path::new("/scratch/pfsx/a"), pfs, "/tessera"),
            None
        );
        assert_eq!(pfs_to_tessera(Path::new("/home/a"), pfs, "/tessera"), None);
        assert_eq!(
            in_place("/tessera/run//a/", "/tessera", pfs).as_deref(),
            Some("/tessera/run/a")
        );
        assert_eq!(
            in_place("/tessera", "/tessera", pfs).as_deref(),
            Some("/tessera")
        );
        assert_eq!(in_place("/no/such/dir", "/tessera", pfs), None);
    }
}
