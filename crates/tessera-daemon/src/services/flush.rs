//! Flush: publish a file's attached bytes into the underlying PFS, atomically.
//!
//! A flush is coordinated by the node that holds the file's inode, one flush of a file at a
//! time (concurrent flushes of ranges of one file would otherwise each start from the old PFS
//! copy and the last rename would drop the others' bytes). The coordinator records the name of
//! a temporary beside the target in its state (so a crash never leaves it behind: it is removed
//! at the next start), creates it (mode 0600), and fills it with the current PFS copy, holes
//! kept (so ranges no one owns keep their bytes). Every daemon that owns extents writes them
//! from the logs on its node with large, coalesced writes and syncs them ([`write_part`]). The
//! coordinator then sets the size and the file's mode, syncs, and renames the temporary over
//! the target: a reader of the PFS sees the old file or the new one, never a mix. Every PFS
//! path goes through [`crate::pfs`], which never follows a link planted there, and every
//! PFS call runs off the async workers (`crate::blocking`: they copy whole files).
//!
//! A client's [`Flush`] goes to the inode's node as [`FlushFile`]; that node sends each
//! owning node a [`FlushPart`].

use crate::Node;
use crate::pfs::{Pfs, Temp, copy_sparse};
use crate::rpc::{ServeClient, ServePeer};
use crate::services::locality::FlushMark;
use crate::store::DbOp;
use rustix::fs::OFlags;
use std::collections::BTreeMap;
use std::os::unix::fs::FileExt;
use tessera_core::placement::ino_shard;
use tessera_core::{Errno, FsError, FsResult, path};
use tessera_proto::{
    Attr, Dentry, FileKind, Flush, FlushFile, FlushPart, Flushed, OwnedExtent, TxnView,
};

/// One lock per file (by inode) that serialises its flushes, and the renames and removals
/// that must not meet a flush, on the inode's node.
#[derive(Default)]
pub struct FlushLocks {
    by_ino:
        std::sync::Mutex<std::collections::HashMap<u64, std::sync::Arc<tokio::sync::Mutex<()>>>>,
}

impl FlushLocks {
    /// Runs `work` under the flush lock of `ino` (made on first use), after the holders
    /// before it.
    pub async fn serialized<F: std::future::Future>(&self, ino: u64, work: F) -> F::Output {
        let lock = self
            .by_ino
            .lock()
            .expect("flush locks")
            .entry(ino)
            .or_default()
            .clone();
        let _held = lock.lock().await;
        work.await
    }
}

/// Size of the buffer in which contiguous extents are gathered before one write.
const COALESCE: usize = 8 << 20;

impl ServeClient<Flush> for Node {
    async fn serve_client(&self, _: u64, r: Flush) -> FsResult<Flushed> {
        let p = path::normalize(&r.path)?;
        let (d, _) = self
            .lookup(&TxnView::default(), &p)
            .await?
            .ok_or_else(|| self.enoent(&p))?;
        let flush = FlushFile {
            path: p,
            range: r.range,
        };
        self.call(ino_shard(d.ino), flush).await
    }
}

impl ServePeer<FlushFile> for Node {
    async fn serve_peer(&self, r: FlushFile) -> FsResult<Flushed> {
        let (bytes, nodes) = flush(self, &r.path, r.range).await?;
        Ok(Flushed { bytes, nodes })
    }
}

impl ServePeer<FlushPart> for Node {
    async fn serve_peer(&self, r: FlushPart) -> FsResult<u64> {
        let written = write_part(self, r.ino, r.target, r.extents).await?;
        self.metrics.flushed(written);
        Ok(written)
    }
}

/// Flushes a file (or one range of it); must run on the node holding the file's inode.
/// Returns (bytes written, nodes that wrote).
async fn flush(node: &Node, user_path: &str, range: Option<(u64, u64)>) -> FsResult<(u64, u32)> {
    let p = path::normalize(user_path)?;
    let (d, attr) = node.lookup(&TxnView::default(), &p).await?.ok_or_else(|| {
        FsError::new(
            Errno::NoEnt,
            format!("{}: no such file", node.user_path(&p)),
        )
    })?;
    match d.kind {
        FileKind::File => {}
        FileKind::Dir => {
            return Err(FsError::new(
                Errno::IsDir,
                format!("{} is a directory; flush its files", node.user_path(&p)),
            ));
        }
        FileKind::Symlink => {
            return Err(FsError::new(
                Errno::Loop,
                format!(
                    "{} is a symbolic link in the PFS directory; flush its target",
                    node.user_path(&p)
                ),
            ));
        }
    }
    if !node.names.of_file(d.ino).is_empty() {
        // A rename counts the new name before it removes the old: wait for the one being
        // driven to end (its file's lock is taken before the flush lock, as a link does).
        node.names.serialized(d.ino, async {}).await;
    }
    node.flush_locks
        .serialized(d.ino, flush_serialised(node, &p, d, attr, range))
        .await
}

/// The flush of file `d` at `p` (attributes `attr`), under its flush lock.
async fn flush_serialised(
    node: &Node,
    p: &str,
    d: Dentry,
    attr: Attr,
    range: Option<(u64, u64)>,
) -> FsResult<(u64, u32)> {
    // Its copy would be found under one of its names only (see `links`, which counts names
    // under this lock).
    let nlink = node.inode(d.ino)?.nlink;
    if nlink > 1 && !node.names.of_file(d.ino).is_empty() {
        return Err(FsError::new(
            Errno::Again,
            format!(
                "{}: a rename of the file is not finished (a daemon it needs does not answer); flush again once it is",
                node.user_path(p),
            ),
        ));
    }
    if nlink > 1 {
        return Err(FsError::new(
            Errno::MLink,
            format!(
                "{} has {nlink} names (hard links); the PFS directory keeps one name per file: remove the others, or flush a copy",
                node.user_path(p),
            ),
        ));
    }
    // A whole-file flush makes the file a candidate before the owners are read: any change
    // from here on drops it, and only a candidate that survives to the publication is
    // reported in both places by locality answers. Any flush ends the previous mark.
    node.flush_marks(d.ino, FlushMark::Started(range.is_none()));
    let mut unmark = Unmark(node, d.ino, true);
    let owners = match range {
        None => node.query_file_whole(d.ino).await?,
        Some((s, e)) => node.query(d.ino, s, e).await?,
    };
    // Never shorter than the bytes about to be written (the size may have been read before a
    // concurrent attach grew the file).
    let written_end = owners.runs.iter().map(|r| r.run.end()).max().unwrap_or(0);
    let size = owners.size.unwrap_or(0).max(attr.size).max(written_end);

    let started = crate::clock::now();
    // The temporary's name is recorded before it exists: whatever a crash interrupts, the
    // next start removes what is left of it.
    let temp_path = Pfs::temp_path(p, node.id)?;
    node.store
        .submit(vec![DbOp::PutFlushTemp(temp_path.clone())])
        .durable()
        .await?;
    let result = match crate::blocking::blocking(|| node.pfs.create_temp(&temp_path)) {
        Ok(temp) => {
            let extents = tessera_proto::extents_of(&owners.runs).collect();
            write_and_publish(node, p, d.ino, extents, temp, size, attr.mode).await
        }
        Err(e) => Err(e),
    };
    unmark.2 = false;
    node.flush_marks(d.ino, FlushMark::Ended(result.is_ok()));
    let forget = node.store.submit(vec![DbOp::DelFlushTemp(temp_path)]);
    forget.durable().await?;
    if result.is_ok() {
        // The logs migrations moved this file away from need no grace any more (on any node:
        // they hold none of the bytes just flushed). Best effort.
        let release = node.every_node(|| tessera_proto::ReleaseLogs {
            ino: d.ino,
            clients: Vec::new(),
            now: true,
        });
        if let Err(e) = node.call_all(release).await {
            tracing::debug!(
                ino = d.ino,
                "ending the grace of migrated logs: {}",
                e.message
            );
        }
    }
    if let Ok((bytes, nodes)) = &result {
        tracing::info!(
            path = %node.user_path(p),
            bytes,
            nodes,
            ms = crate::clock::since(started).as_millis() as u64,
            "flushed"
        );
    }
    result
}

/// Ends a flush's candidacy when dropped armed: a flush that returned early with an error.
struct Unmark<'a>(&'a Node, u64, bool);

impl Drop for Unmark<'_> {
    fn drop(&mut self) {
        if self.2 {
            self.0.flush_marks(self.1, FlushMark::Ended(false));
        }
    }
}

/// Fills the temporary (the current PFS copy, then every node's extents) and publishes it;
/// removes it on failure.
async fn write_and_publish(
    node: &Node,
    p: &str,
    ino: u64,
    extents: Vec<OwnedExtent>,
    temp: Temp,
    size: u64,
    mode: u32,
) -> FsResult<(u64, u32)> {
    let filled = async {
        crate::blocking::blocking(|| -> FsResult<()> {
            if let Some(current) = node.pfs.open_regular(p, OFlags::RDONLY)? {
                copy_sparse(&current, &temp.file).map_err(|e| {
                    FsError::io(
                        format!(
                            "copying {} to {}",
                            node.pfs.show(p),
                            node.pfs.show(&temp.path)
                        ),
                        &e,
                    )
                })?;
            }
            Ok(())
        })?;
        let mut per_node: BTreeMap<u32, Vec<OwnedExtent>> = BTreeMap::new();
        for e in extents {
            per_node.entry(e.owner.node).or_default().push(e);
        }
        let nodes = per_node.len() as u32;
        let parts = per_node.into_iter().map(|(n, extents)| {
            let part = FlushPart {
                ino,
                target: temp.path.clone(),
                extents,
            };
            (n, part)
        });
        let bytes = node.call_all(parts).await?.into_iter().sum();
        Ok((bytes, nodes))
    }
    .await;
    match filled {
        Ok(done) => {
            crate::blocking::blocking(|| node.pfs.publish(temp, p, size, mode))?;
            Ok(done)
        }
        Err(e) => {
            crate::blocking::blocking(|| node.pfs.discard(temp));
            Err(e)
        }
    }
}

/// Writes `extents`, held by logs on this node, into `target`; returns the bytes written.
async fn write_part(
    node: &Node,
    ino: u64,
    target: String,
    mut extents: Vec<OwnedExtent>,
) -> FsResult<u64> {
    check_extents(&mut extents)?;
    if extents.iter().any(|e| e.owner.node != node.id) {
        return Err(FsError::new(
            Errno::Inval,
            "flush part names extents held by another node",
        ));
    }
    crate::blocking::blocking(|| {
        let f = node.pfs.open_temp(&target)?;
        write_coalesced(node, ino, &f, &target, &extents)
    })
}

fn write_coalesced(
    node: &Node,
    ino: u64,
    f: &std::fs::File,
    target: &str,
    extents: &[OwnedExtent],
) -> FsResult<u64> {
    let target = node.pfs.show(target);
    let mut buf: Vec<u8> = Vec::with_capacity(COALESCE);
    let mut buf_start = 0u64;
    let mut written = 0u64;
    let mut emit = |buf: &mut Vec<u8>, at: u64| -> FsResult<()> {
        if !buf.is_empty() {
            f.write_all_at(buf, at)
                .map_err(|e| FsError::io(format!("writing {target}"), &e))?;
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
            let (missing, note) = node.logs.with_view(ino, e.owner.client, |v| {
                Ok((v.read(ino, at, &mut buf[old..])?, v.damage_note()))
            })?;
            if let Some((ms, me)) = missing.first() {
                let note = note.map_or(String::new(), |n| format!("; {n}"));
                return Err(FsError::new(
                    Errno::Io,
                    format!(
                        "log of client {} lacks attached bytes [{ms},{me}) of inode {ino:#x}{note}",
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
        .map_err(|e| FsError::io(format!("syncing {target}"), &e))?;
    Ok(written)
}

/// Sorts and checks extents received for a flush.
fn check_extents(extents: &mut [OwnedExtent]) -> FsResult<()> {
    extents.sort_by_key(|e| e.start);
    for e in extents.iter() {
        if e.start >= e.end {
            return Err(FsError::new(
                Errno::Inval,
                format!("empty extent [{},{})", e.start, e.end),
            ));
        }
    }
    Ok(())
}
