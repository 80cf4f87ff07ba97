//! Flush: publish a file's attached bytes into the underlying PFS, atomically.
//!
//! A flush is coordinated by the node that holds the file's inode, one flush of a file at a
//! time (concurrent flushes of ranges of one file would otherwise each start from the old PFS
//! copy and the last rename would drop the others' bytes). The coordinator builds the new file
//! under a temporary name next to the target, starting from the current PFS copy (so ranges no
//! one owns keep their bytes). Every daemon that owns extents writes them from the logs on its
//! node with large, coalesced writes and syncs them ([`write_part`]). The coordinator then sets
//! the size, syncs, and renames the temporary file over the target: a reader of the PFS sees
//! the old file or the new one, never a mix.

use crate::Node;
use crate::shard::check_extents;
use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Component, Path, PathBuf};
use tessera_core::{Errno, FsError, FsResult, path};
use tessera_proto::{FileKind, OwnedExtent, PeerRequest, PeerResponse};

/// Size of the buffer in which contiguous extents are gathered before one write.
const COALESCE: usize = 8 << 20;
/// Prefix of temporary flush files; readdir hides such names.
pub const TMP_MARKER: &str = ".tessera-flush.";

/// Flushes a file (or one range of it); must run on the node holding the file's inode.
/// Returns (bytes written, nodes that wrote).
pub async fn flush(
    node: &Node,
    user_path: &str,
    range: Option<(u64, u64)>,
) -> FsResult<(u64, u32)> {
    let p = path::normalize(user_path)?;
    let (d, attr) = node.lookup(&p).await?.ok_or_else(|| {
        FsError::new(
            Errno::NoEnt,
            format!("{}: no such file", node.user_path(&p)),
        )
    })?;
    if d.kind == FileKind::Dir {
        return Err(FsError::new(
            Errno::IsDir,
            format!("{} is a directory; flush its files", node.user_path(&p)),
        ));
    }
    let lock = node.flush_lock(d.ino);
    let _serialised = lock.lock().await;
    let owners = match range {
        None => node.query_file(d.ino).await?,
        Some((s, e)) => node.query(d.ino, s, e).await?,
    };
    let size = owners.size.unwrap_or(0).max(attr.size);
    let target = node.cfg.pfs_path(&p);
    let parent = target
        .parent()
        .ok_or_else(|| FsError::new(Errno::Inval, "cannot flush the root"))?
        .to_path_buf();
    // A short fixed-length temporary name: any file name that fits also fits its temporary.
    let tmp = parent.join(format!(
        "{TMP_MARKER}{}.{:016x}",
        node.id,
        rand::random::<u64>()
    ));

    let started = std::time::Instant::now();
    let result = async {
        tokio::task::block_in_place(|| prepare_tmp(&parent, &target, &tmp))?;
        let mut per_node: BTreeMap<u32, Vec<OwnedExtent>> = BTreeMap::new();
        for e in owners.extents {
            per_node.entry(e.owner.node).or_default().push(e);
        }
        let nodes = per_node.len() as u32;
        let reqs = per_node
            .into_iter()
            .map(|(n, extents)| {
                (
                    n,
                    PeerRequest::FlushPart {
                        ino: d.ino,
                        target: tmp.display().to_string(),
                        extents,
                    },
                )
            })
            .collect();
        let mut bytes = 0;
        for r in node.call_all(reqs).await? {
            match r {
                PeerResponse::Bytes(b) => bytes += b,
                other => {
                    return Err(FsError::new(
                        Errno::Proto,
                        format!("unexpected flush answer {other:?}"),
                    ));
                }
            }
        }
        tokio::task::block_in_place(|| publish(&tmp, &target, &parent, size))?;
        Ok((bytes, nodes))
    }
    .await;
    match &result {
        Ok((bytes, nodes)) => tracing::info!(
            path = %node.user_path(&p),
            bytes,
            nodes,
            ms = started.elapsed().as_millis() as u64,
            "flushed"
        ),
        Err(_) => {
            let _ = std::fs::remove_file(&tmp);
        }
    }
    result
}

/// Creates the temporary file as a copy of the current PFS file (or empty).
fn prepare_tmp(parent: &Path, target: &Path, tmp: &Path) -> FsResult<()> {
    std::fs::create_dir_all(parent)
        .map_err(|e| FsError::io(format!("creating {}", parent.display()), &e))?;
    if target.is_file() {
        std::fs::copy(target, tmp).map_err(|e| {
            FsError::io(
                format!("copying {} to {}", target.display(), tmp.display()),
                &e,
            )
        })?;
    } else {
        std::fs::File::create(tmp)
            .map_err(|e| FsError::io(format!("creating {}", tmp.display()), &e))?;
    }
    Ok(())
}

/// Sets the final size, makes the file durable, and renames it into place.
fn publish(tmp: &Path, target: &Path, parent: &Path, size: u64) -> FsResult<()> {
    let f = OpenOptions::new()
        .write(true)
        .open(tmp)
        .map_err(|e| FsError::io(format!("opening {}", tmp.display()), &e))?;
    f.set_len(size)
        .map_err(|e| FsError::io(format!("sizing {}", tmp.display()), &e))?;
    f.sync_all()
        .map_err(|e| FsError::io(format!("syncing {}", tmp.display()), &e))?;
    std::fs::rename(tmp, target)
        .map_err(|e| FsError::io(format!("publishing {}", target.display()), &e))?;
    if let Ok(d) = std::fs::File::open(parent) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Writes `extents`, held by logs on this node, into `target`; returns the bytes written.
pub async fn write_part(
    node: &Node,
    ino: u64,
    target: String,
    mut extents: Vec<OwnedExtent>,
) -> FsResult<u64> {
    check_extents(&mut extents)?;
    let target = PathBuf::from(target);
    check_flush_target(&target, &node.cfg.pfs_dir)?;
    if extents.iter().any(|e| e.owner.node != node.id) {
        return Err(FsError::new(
            Errno::Inval,
            "flush part names extents held by another node",
        ));
    }
    tokio::task::block_in_place(|| write_coalesced(node, ino, &target, &extents))
}

/// Only temporary flush files directly inside the instance's PFS directory tree may be
/// written by a peer's request.
fn check_flush_target(target: &Path, pfs_dir: &Path) -> FsResult<()> {
    let refuse = || {
        Err(FsError::new(
            Errno::Access,
            format!(
                "refusing to flush into {}: not a flush file of this instance",
                target.display()
            ),
        ))
    };
    let plain = target
        .components()
        .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    let named = target
        .file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with(TMP_MARKER));
    if !plain || !named || !target.starts_with(pfs_dir) {
        return refuse();
    }
    // The directory must really be inside the PFS directory (no symlink out of it).
    match target.parent().map(std::fs::canonicalize) {
        Some(Ok(dir)) if dir.starts_with(pfs_dir) => Ok(()),
        _ => refuse(),
    }
}

fn write_coalesced(node: &Node, ino: u64, target: &Path, extents: &[OwnedExtent]) -> FsResult<u64> {
    let f = OpenOptions::new()
        .write(true)
        .open(target)
        .map_err(|e| FsError::io(format!("opening {}", target.display()), &e))?;
    let mut buf: Vec<u8> = Vec::with_capacity(COALESCE);
    let mut buf_start = 0u64;
    let mut written = 0u64;
    let mut emit = |buf: &mut Vec<u8>, at: u64| -> FsResult<()> {
        if !buf.is_empty() {
            f.write_all_at(buf, at)
                .map_err(|e| FsError::io(format!("writing {}", target.display()), &e))?;
            written += buf.len() as u64;
            buf.clear();
        }
        Ok(())
    };
    for e in extents {
        let mut at = e.start;
        while at < e.end {
            if !buf.is_empty() && (buf_start + buf.len() as u64 != at || buf.len() == COALESCE) {
                emit(&mut buf, buf_start)?;
            }
            if buf.is_empty() {
                buf_start = at;
            }
            let take = (e.end - at).min((COALESCE - buf.len()) as u64) as usize;
            let old = buf.len();
            buf.resize(old + take, 0);
            let missing = node
                .logs
                .with_view(ino, e.owner.client, |v| v.read(at, &mut buf[old..]))?;
            if let Some((ms, me)) = missing.first() {
                return Err(FsError::new(
                    Errno::Io,
                    format!(
                        "log of client {} lacks attached bytes [{ms},{me}) of inode {ino:#x}",
                        e.owner.client
                    ),
                ));
            }
            at += take as u64;
        }
    }
    emit(&mut buf, buf_start)?;
    // Durable before the coordinator publishes: on a shared PFS its fsync does not cover
    // the pages this node wrote.
    f.sync_data()
        .map_err(|e| FsError::io(format!("syncing {}", target.display()), &e))?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flush_targets_must_be_temporaries_inside_the_pfs() {
        let pfs = tempfile::tempdir().unwrap();
        let pfs = std::fs::canonicalize(pfs.path()).unwrap();
        std::fs::create_dir_all(pfs.join("sub")).unwrap();
        let ok = pfs.join("sub").join(format!("{TMP_MARKER}0.0123"));
        assert!(check_flush_target(&ok, &pfs).is_ok());
        let escapes = pfs.join("sub/../../etc").join(format!("{TMP_MARKER}0.1"));
        assert_eq!(
            check_flush_target(&escapes, &pfs).unwrap_err().errno,
            Errno::Access
        );
        assert!(
            check_flush_target(&pfs.join("sub/data"), &pfs).is_err(),
            "not a temporary name"
        );
        assert!(check_flush_target(Path::new("/tmp/.tessera-flush.0.1"), &pfs).is_err());
        // A symlink pointing out of the PFS directory is refused too.
        std::os::unix::fs::symlink("/tmp", pfs.join("link")).unwrap();
        assert!(
            check_flush_target(&pfs.join("link").join(format!("{TMP_MARKER}0.2")), &pfs).is_err()
        );
    }
}
