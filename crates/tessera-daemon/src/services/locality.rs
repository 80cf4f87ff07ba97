//! The locality service (FusionFS and Swift): where the bytes of files live, asked by schedulers.
//!
//! A [`Locate`] of many ranges costs a fixed number of batched rounds, not one per path: the
//! names on their path shards (each shard also answers for the inodes it holds, the usual
//! case, and for the PFS copies), then the inodes held elsewhere if any, then the ownership
//! runs on the shards of the ranges' stripes. The answer is built by
//! [`tessera_core::locality::locate`].
//!
//! Answers come from the committed state and are advisory: they carry the time they were
//! assembled, and a scheduler that acts on a stale one only loses speed. Whether owned bytes
//! are also in the PFS copy is known from a whole-file flush that published with no change to
//! the file while it ran, and forgotten at the file's next change (and at a restart, where
//! they are reported as burst-buffer bytes only).

use crate::Node;
use crate::rpc::{ServeClient, ServePeer};
use std::collections::BTreeMap;
use tessera_core::locality::{CopyFacts, locate};
use tessera_core::placement::{ino_shard, path_shard, split_by_stripe, stripe_shard};
use tessera_core::{Errno, FsError, FsResult, OwnedRun, path};
use tessera_proto::{
    DentryGet, FileKind, FileLocation, ForwardPing, InodeFacts, Locate, LocateInodes, LocateNames,
    LocateRuns, Located, NamedFile, Ping, SpanRuns, TxnView,
};

/// Most ranges one locate may name.
pub const MAX_LOCATE_RANGES: usize = 65_536;
/// Most extents listed per range.
pub const MAX_EXTENTS: u32 = 1 << 16;
/// Most runs one shard returns for one batch before the rest is paged.
const MAX_RUNS_PER_ANSWER: u32 = 1 << 16;
/// Ranges spanning more stripes than this are answered from the whole file's pages.
const MAX_STRIPES_PER_SPAN: u64 = 4096;
/// Locates of at most this many ranges use (and fill) the leased stripe copies.
const LEASED_RANGES: usize = 4;

impl ServeClient<Locate> for Node {
    async fn serve_client(&self, _: u64, r: Locate) -> FsResult<Located> {
        if r.ranges.len() > MAX_LOCATE_RANGES {
            return Err(FsError::new(
                Errno::Inval,
                format!(
                    "a locate of {} ranges: at most {MAX_LOCATE_RANGES} per call; split the batch",
                    r.ranges.len()
                ),
            ));
        }
        let view_time_ns = super::namespace_shard::now_ns();
        // The listings of all ranges must fit one answer frame (an extent encodes in at most
        // about 40 bytes); the per-host totals are whole however short the listing.
        let fit = (self.cfg.max_frame as usize / 48) / r.ranges.len().max(1);
        let max_extents = (r.max_extents.clamp(1, MAX_EXTENTS) as usize).min(fit.max(1));
        let files = self.locate_ranges(&r.ranges, max_extents).await?;
        Ok(Located {
            view_time_ns,
            files,
        })
    }
}

impl ServeClient<ForwardPing> for Node {
    async fn serve_client(&self, _: u64, r: ForwardPing) -> FsResult<u32> {
        if r.node >= self.cfg.nodes {
            return Err(FsError::new(
                Errno::Inval,
                format!(
                    "no node {} (the instance has {} nodes)",
                    r.node, self.cfg.nodes
                ),
            ));
        }
        self.call(r.node, Ping).await
    }
}

impl ServePeer<LocateNames> for Node {
    async fn serve_peer(&self, r: LocateNames) -> FsResult<Vec<Option<NamedFile>>> {
        let mut found = Vec::with_capacity(r.paths.len());
        for p in &r.paths {
            let get = DentryGet {
                path: p.clone(),
                view: TxnView::default(),
            };
            found.push(self.serve_peer(get).await?);
        }
        // One trip to the blocking pool for the PFS copies of the whole batch.
        let files: Vec<Option<String>> = r
            .paths
            .iter()
            .zip(&found)
            .map(|(p, f)| {
                f.as_ref()
                    .filter(|(d, _)| d.kind == FileKind::File)
                    .map(|_| p.clone())
            })
            .collect();
        let pfs = self.pfs.clone();
        let pfs_sizes: Vec<Option<u64>> = tokio::task::spawn_blocking(move || {
            files
                .iter()
                .map(|p| {
                    let p = p.as_ref()?;
                    let st = pfs.lstat(p).ok()??;
                    (st.kind == FileKind::File).then_some(st.size)
                })
                .collect()
        })
        .await
        .map_err(crate::node::blocking_failed)?;
        Ok(found
            .into_iter()
            .zip(pfs_sizes)
            .map(|(f, pfs_size)| {
                f.map(|(d, attr)| NamedFile {
                    ino: d.ino,
                    kind: d.kind,
                    pfs_size,
                    inode: attr.map(|a| (a.size, self.is_flushed_clean(d.ino))),
                })
            })
            .collect())
    }
}

impl ServePeer<LocateInodes> for Node {
    async fn serve_peer(&self, r: LocateInodes) -> FsResult<Vec<InodeFacts>> {
        Ok(self.shards.namespace(|ns| {
            r.inos
                .iter()
                .map(|&ino| ns.attr(ino).map(|a| (a.size, self.is_flushed_clean(ino))))
                .collect()
        }))
    }
}

impl ServePeer<LocateRuns> for Node {
    async fn serve_peer(&self, r: LocateRuns) -> FsResult<Vec<SpanRuns>> {
        let mut budget = r.max_runs as usize;
        Ok(self.shards.ownership(|own| {
            r.spans
                .iter()
                .map(|&(ino, stripe, start, end)| {
                    let runs = own.stripe_runs_within(ino, stripe, start, end);
                    if runs.len() > budget {
                        return None;
                    }
                    budget -= runs.len();
                    Some(runs)
                })
                .collect()
        }))
    }
}

/// Whole-file flushes under way on this node (a change drops a file from it), and the files
/// whose bytes are unchanged since one published.
#[derive(Default)]
pub struct FlushedFiles {
    sets: std::sync::Mutex<FlushSets>,
}

#[derive(Default)]
struct FlushSets {
    flushing: std::collections::HashSet<u64>,
    clean: std::collections::HashSet<u64>,
}

impl FlushedFiles {
    /// Whether the bytes of `ino` are unchanged since its last whole-file flush.
    pub(crate) fn is_clean(&self, ino: u64) -> bool {
        self.sets
            .lock()
            .expect("flushed files")
            .clean
            .contains(&ino)
    }

    /// Records a flush's start or end, or a change of the file's bytes.
    pub(crate) fn mark(&self, ino: u64, m: FlushMark) {
        let mut f = self.sets.lock().expect("flushed files");
        f.clean.remove(&ino);
        match m {
            FlushMark::Started(whole) => {
                if whole {
                    f.flushing.insert(ino);
                } else {
                    f.flushing.remove(&ino);
                }
            }
            FlushMark::Ended(published) => {
                if f.flushing.remove(&ino) && published {
                    f.clean.insert(ino);
                }
            }
            FlushMark::Changed => {
                f.flushing.remove(&ino);
            }
        }
    }
}

/// What happened to a file, for [`FlushedFiles`].
pub(crate) enum FlushMark {
    /// A flush started (of the whole file, or of a range).
    Started(bool),
    /// A flush ended (published, or failed).
    Ended(bool),
    /// Its bytes or size changed (an attach, truncate, append, or a transaction's completion).
    Changed,
}

/// `(ino, stripe, start, end)`: the part of a range within one stripe.
type StripeSpan = (u64, u64, u64, u64);

/// What the first round learned of one range.
struct Named {
    ino: u64,
    start: u64,
    end: Option<u64>,
    pfs_size: Option<u64>,
    inode: InodeFacts,
}

impl Node {
    /// Answers each range on its own (a missing path fails only its entry).
    async fn locate_ranges(
        &self,
        ranges: &[tessera_proto::LocateRange],
        max_extents: usize,
    ) -> FsResult<Vec<Result<FileLocation, FsError>>> {
        let n = self.cfg.nodes;
        // Round 1: the names, on their path shards.
        let mut out: Vec<Result<Named, FsError>> = Vec::with_capacity(ranges.len());
        let mut by_shard: BTreeMap<u32, Vec<(usize, String)>> = BTreeMap::new();
        for (i, r) in ranges.iter().enumerate() {
            let checked = path::normalize(&r.path).and_then(|p| {
                let end = match r.len {
                    Some(len) => Some(tessera_core::run::end_within_limit(r.start, len, "locate")?),
                    None => None,
                };
                Ok((p, end))
            });
            match checked {
                Ok((p, end)) => {
                    by_shard.entry(path_shard(&p, n)).or_default().push((i, p));
                    out.push(Ok(Named {
                        ino: 0,
                        start: r.start,
                        end,
                        pfs_size: None,
                        inode: None,
                    }));
                }
                Err(e) => out.push(Err(e)),
            }
        }
        let asks = by_shard.iter().map(|(shard, items)| {
            let paths = items.iter().map(|(_, p)| p.clone()).collect();
            (*shard, LocateNames { paths })
        });
        let answers = self.call_all(asks.collect::<Vec<_>>()).await?;
        for ((_, items), found) in by_shard.iter().zip(answers) {
            for ((i, p), f) in items.iter().zip(found) {
                let slot = &mut out[*i];
                let Ok(named) = slot else { continue };
                match f {
                    None => *slot = Err(self.enoent(p)),
                    Some(f) if f.kind != FileKind::File => {
                        *slot = Err(not_a_file(&self.user_path(p), f.kind))
                    }
                    Some(f) => {
                        named.ino = f.ino;
                        named.pfs_size = f.pfs_size;
                        named.inode = f.inode;
                    }
                }
            }
        }
        // Round 2: inodes held apart from their names (renamed or linked files).
        let mut by_inode_shard: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (i, named) in out.iter().enumerate() {
            if let Ok(named) = named
                && named.inode.is_none()
            {
                by_inode_shard
                    .entry(ino_shard(named.ino))
                    .or_default()
                    .push(i);
            }
        }
        if !by_inode_shard.is_empty() {
            let asks = by_inode_shard.iter().map(|(shard, idx)| {
                let inos = idx
                    .iter()
                    .map(|&i| out[i].as_ref().map_or(0, |x| x.ino))
                    .collect();
                (*shard, LocateInodes { inos })
            });
            let answers = self.call_all(asks.collect::<Vec<_>>()).await?;
            for ((_, idx), facts) in by_inode_shard.iter().zip(answers) {
                for (&i, f) in idx.iter().zip(facts) {
                    if f.is_none() {
                        let p = path::normalize(&ranges[i].path)?;
                        out[i] = Err(self.enoent(&p));
                    } else if let Ok(named) = &mut out[i] {
                        named.inode = f;
                    }
                }
            }
        }
        // Round 3: the runs, on the shards of each range's stripes. A few ranges are answered
        // as a query is, from this daemon's leased copies of remote stripes where it holds
        // them (fetched and leased otherwise): a scheduler asking again about the same files
        // pays one forwarded trip, not two. Many ranges go in one request per shard.
        let ss = self.cfg.stripe_size;
        let mut spans: BTreeMap<u32, Vec<(usize, StripeSpan)>> = BTreeMap::new();
        let mut whole: Vec<usize> = Vec::new();
        let mut runs: BTreeMap<usize, Vec<OwnedRun>> = BTreeMap::new();
        let leased = ranges.len() <= LEASED_RANGES;
        for (i, named) in out.iter().enumerate() {
            let Ok(named) = named else { continue };
            let (size, _) = named.inode.unwrap_or_default();
            let end = named.end.unwrap_or(size).min(size);
            if named.start >= end {
                continue;
            }
            if (end - 1) / ss - named.start / ss + 1 > MAX_STRIPES_PER_SPAN {
                whole.push(i);
                continue;
            }
            for (stripe, s, e) in split_by_stripe(named.start, end, ss) {
                let shard = stripe_shard(named.ino, stripe, n);
                spans
                    .entry(shard)
                    .or_default()
                    .push((i, (named.ino, stripe, s, e)));
            }
        }
        if leased {
            let per_span = spans
                .values()
                .flatten()
                .map(|(i, (ino, stripe, s, e))| async move {
                    let got = self.committed_stripe_owners(*ino, *stripe, *s, *e).await;
                    got.map(|r| (*i, r))
                });
            for (i, r) in futures::future::try_join_all(per_span).await? {
                runs.entry(i).or_default().extend(r);
            }
            spans.clear();
        }
        let asks = spans.iter().map(|(shard, items)| {
            let req = LocateRuns {
                spans: items.iter().map(|(_, s)| *s).collect(),
                max_runs: MAX_RUNS_PER_ANSWER,
            };
            (*shard, req)
        });
        let answers = self.call_all(asks.collect::<Vec<_>>()).await?;
        for ((_, items), got) in spans.iter().zip(answers) {
            for ((i, _), r) in items.iter().zip(got) {
                match r {
                    Some(r) => runs.entry(*i).or_default().extend(r),
                    None => whole.push(*i),
                }
            }
        }
        whole.sort_unstable();
        whole.dedup();
        for &i in &whole {
            let ino = out[i].as_ref().map_or(0, |x| x.ino);
            runs.insert(i, self.query_file_whole(ino).await?.runs);
        }
        Ok(out
            .into_iter()
            .enumerate()
            .map(|(i, named)| {
                let named = named?;
                let (size, flushed_clean) = named.inode.unwrap_or_default();
                let facts = CopyFacts {
                    size,
                    pfs_size: named.pfs_size,
                    flushed_clean,
                };
                let end = named.end.unwrap_or(u64::MAX);
                let got = runs.remove(&i).unwrap_or_default();
                Ok(FileLocation {
                    ino: named.ino,
                    size,
                    placement: locate(&got, named.start, end, facts, max_extents),
                })
            })
            .collect())
    }
}

impl Node {
    /// Whether the bytes of `ino` are unchanged since its last whole-file flush.
    pub(crate) fn is_flushed_clean(&self, ino: u64) -> bool {
        self.flushed.is_clean(ino)
    }

    /// Records a flush's start or end, or a change of the file's bytes.
    pub(crate) fn flush_marks(&self, ino: u64, m: FlushMark) {
        self.flushed.mark(ino, m);
    }
}

fn not_a_file(p: &str, kind: FileKind) -> FsError {
    match kind {
        FileKind::Dir => FsError::new(
            Errno::IsDir,
            format!("{p} is a directory: locate the files in it"),
        ),
        _ => FsError::new(
            Errno::Inval,
            format!("{p} is a symbolic link: locate its target"),
        ),
    }
}
