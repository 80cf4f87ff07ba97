//! Flush: publish a file's attached bytes into the underlying PFS, atomically.
//!
//! The coordinating daemon builds the new file under a temporary name next to the target,
//! starting from the current PFS copy (so ranges no one owns keep their bytes). Every daemon
//! that owns extents writes them from the logs on its node with large, coalesced writes
//! ([`write_part`]). The coordinator then sets the size, syncs, and renames the temporary
//! file over the target: a reader of the PFS sees the old file or the new one, never a mix.

use crate::Node;
use crate::shard::check_extents;
use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use tessera_core::{Errno, FsError, FsResult, path};
use tessera_proto::{FileKind, OwnedExtent, PeerRequest, PeerResponse, Response};

/// Size of the buffer in which contiguous extents are gathered before one write.
const COALESCE: usize = 8 << 20;
/// Marker in temporary file names; readdir hides such names.
pub const TMP_MARKER: &str = ".tessera-flush.";

pub async fn flush(node: &Node, user_path: &str, range: Option<(u64, u64)>) -> FsResult<Response> {
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
    let owners = match range {
        None => node.query_file(d.ino).await?,
        Some((s, e)) => node.query(d.ino, s, e).await?,
    };
    let size = owners.size.max(attr.size);
    let target = node.cfg.pfs_path(&p);
    let parent = target
        .parent()
        .expect("pfs paths have a parent")
        .to_path_buf();
    let name = target
        .file_name()
        .expect("not the root")
        .to_string_lossy()
        .into_owned();
    let tmp = parent.join(format!(
        ".{name}{TMP_MARKER}{}.{:016x}",
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
    match result {
        Ok((bytes, nodes)) => {
            tracing::info!(
                path = %node.user_path(&p),
                bytes,
                nodes,
                ms = started.elapsed().as_millis() as u64,
                "flushed"
            );
            Ok(Response::Flushed { bytes, nodes })
        }
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
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
    // Only temporary flush files inside this instance's PFS directory may be written.
    let inside = target.starts_with(&node.cfg.pfs_dir)
        && target
            .file_name()
            .is_some_and(|n| n.to_string_lossy().contains(TMP_MARKER));
    if !inside {
        return Err(FsError::new(
            Errno::Access,
            format!(
                "refusing to flush into {}: not a flush file of this instance",
                target.display()
            ),
        ));
    }
    if extents.iter().any(|e| e.owner.node != node.id) {
        return Err(FsError::new(
            Errno::Inval,
            "flush part names extents held by another node",
        ));
    }
    tokio::task::block_in_place(|| write_coalesced(node, ino, &target, &extents))
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
    Ok(written)
}
