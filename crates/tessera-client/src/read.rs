//! Assembling a read from its sources, and reading ahead for handles with a session view.
//!
//! Sources, newest first (see `file.rs` for why this order is right):
//!
//! 1. this process's own unattached writes;
//! 2. the owners: our own log, another process's log on this node (read straight from its
//!    files), or logs on other nodes (one `Read` request to our daemon, which fetches from every
//!    owner in parallel);
//! 3. the PFS copy for ranges no one owns, then zeros up to the size.
//!
//! **Read-ahead.** A handle whose owners are cached for its session (session and MPI-IO models)
//! watches its own access pattern. Once reads keep the same length and a constant
//! positive stride three times running (sequential reads are the stride-equals-length case), the next accesses of the
//! pattern that live on other nodes are fetched together with the bytes needed now, in one
//! request, and kept for the reads that follow. This is what turns thousands of small remote
//! reads (a rank-shifted checkpoint restart, the CS-R pattern) into a few large transfers. Commit
//! and POSIX handles query on every read and never read ahead: their next read must see a commit
//! that happens in between.

use crate::client::Inner;
use std::collections::{BTreeMap, VecDeque};
use std::os::unix::fs::FileExt;
use tessera_core::{Errno, Extent, FsError, FsResult, Owner, RangeSet, RunMap};
use tessera_proto::Read;
use tessera_proto::reports::{LOCAL_READ_BYTES, PFS_READ_BYTES};

/// Accesses at least this large are not read ahead.
const LARGE_ACCESS: u64 = 1 << 20;

/// Most bytes read ahead in one request, and the most kept per handle.
const AHEAD_WINDOW: u64 = 8 << 20;
const AHEAD_KEPT: usize = 32 << 20;

/// A reader's access pattern: constant length and stride.
#[derive(Debug, Default)]
pub(crate) struct Pattern {
    last: Option<(u64, u64)>,
    stride: Option<u64>,
    repeats: u32,
}

impl Pattern {
    /// Records an access of `len` bytes at `off`.
    pub fn observe(&mut self, off: u64, len: u64) {
        match self.last {
            Some((lo, ll)) if ll == len && off > lo && off - lo >= len => {
                let s = off - lo;
                if self.stride == Some(s) {
                    self.repeats += 1;
                } else {
                    self.stride = Some(s);
                    self.repeats = 1;
                }
            }
            _ => {
                self.stride = None;
                self.repeats = 0;
            }
        }
        self.last = Some((off, len));
    }

    /// The accesses expected after the last one, up to `budget` bytes, if a pattern holds.
    pub fn predict(&self, budget: u64) -> Vec<(u64, u64)> {
        let (Some((off, len)), Some(stride)) = (self.last, self.stride) else {
            return Vec::new();
        };
        // Two equal strides in a row (three accesses): one positive gap alone is what random
        // access looks like half of the time. Accesses of a MiB or more are large requests
        // already; reading ahead would only add a copy.
        if self.repeats < 2 || len == 0 || len >= LARGE_ACCESS {
            return Vec::new();
        }
        let n = (budget / len).min(1 << 16);
        (1..=n)
            .map_while(|i| {
                let s = off.checked_add(stride.checked_mul(i)?)?;
                Some((s, s.checked_add(len)?))
            })
            .collect()
    }
}

/// Remote bytes fetched ahead of use.
#[derive(Debug, Default)]
pub(crate) struct Ahead {
    /// start -> (end, bytes)
    map: BTreeMap<u64, (u64, Vec<u8>)>,
    order: VecDeque<u64>,
    bytes: usize,
}

impl Ahead {
    pub fn clear(&mut self) {
        *self = Ahead::default();
    }

    /// Copies `[s, e)` into `dst` if one fetched piece holds all of it.
    fn take(&self, s: u64, e: u64, dst: &mut [u8]) -> bool {
        match self.map.range(..=s).next_back() {
            Some((start, (end, data))) if *end >= e => {
                dst.copy_from_slice(&data[(s - start) as usize..(e - start) as usize]);
                true
            }
            _ => false,
        }
    }

    fn holds(&self, s: u64, e: u64) -> bool {
        matches!(self.map.range(..=s).next_back(), Some((_, (end, _))) if *end >= e)
    }

    fn put(&mut self, s: u64, e: u64, data: Vec<u8>) {
        self.bytes += data.len();
        if let Some((_, old)) = self.map.insert(s, (e, data)) {
            self.bytes -= old.len();
        } else {
            self.order.push_back(s);
        }
        while self.bytes > AHEAD_KEPT {
            let Some(k) = self.order.pop_front() else {
                break;
            };
            if let Some((_, d)) = self.map.remove(&k) {
                self.bytes -= d.len();
            }
        }
    }
}

/// The gaps of a read from the PFS copy, read by the daemon (for a process working through
/// it alone); what the copy does not hold reads as zeros.
fn read_pfs_through_daemon(
    g: &mut Inner,
    path: &str,
    offset: u64,
    out: &mut [u8],
    gaps: &[(u64, u64)],
    pfs_upto: Option<u64>,
) -> FsResult<()> {
    let chunk = g.cfg.max_read_chunk();
    let mut ranges = Vec::new();
    for (s, e) in gaps {
        out[(s - offset) as usize..(e - offset) as usize].fill(0);
        let e = pfs_upto.map_or(*e, |u| (*e).min(u.max(*s)));
        let mut a = *s;
        while a < e {
            let b = e.min(a + chunk);
            ranges.push((a, b));
            a = b;
        }
    }
    let mut read = 0;
    for (s, e) in ranges {
        let got = g.call(tessera_proto::ReadPfs {
            path: path.to_string(),
            ranges: vec![(s, e)],
        })?;
        let data = g.last_data();
        let n = got.first().copied().unwrap_or(0) as usize;
        if n > (e - s) as usize || data.len() != n {
            return Err(FsError::new(
                Errno::Proto,
                format!(
                    "the daemon's read of the PFS copy of {path} announced {n} bytes and sent {}",
                    data.len()
                ),
            ));
        }
        let at = (s - offset) as usize;
        out[at..at + n].copy_from_slice(data);
        read += n as u64;
    }
    let total: u64 = gaps.iter().map(|(s, e)| e - s).sum();
    g.stats.read.pfs += read;
    g.stats.read.holes += total - read;
    Ok(())
}

/// Attached bytes `[at, at + dst.len())` of file `ino` from the log of `client` on this
/// node, by the log's index; an error names the bytes the log lacks.
fn read_node_log(
    g: &mut Inner,
    path: &str,
    ino: u64,
    client: u64,
    at: u64,
    dst: &mut [u8],
) -> FsResult<()> {
    if g.through_daemon {
        // No view of one's own: the daemon reads the log.
        let owner = Owner {
            node: g.node,
            client,
        };
        let chunk = g.cfg.max_read_chunk() as usize;
        for (i, piece) in dst.chunks_mut(chunk.max(1)).enumerate() {
            let s = at + (i * chunk) as u64;
            let announced = g.call(Read {
                ino,
                parts: vec![(owner, vec![(s, s + piece.len() as u64)])],
            })?;
            let data = g.last_data();
            tessera_proto::check_data(&announced, data)?;
            piece.copy_from_slice(data);
        }
        g.stats.read.node_logs += dst.len() as u64;
        return Ok(());
    }
    let view = g.foreign_view(client)?;
    if let Some((a, b)) = view.read(ino, at, dst)?.first() {
        let note = view
            .damage_note()
            .map_or(String::new(), |n| format!("; {n}"));
        return Err(FsError::new(
            Errno::Io,
            format!("{path}: the log of client {client} lacks attached bytes [{a},{b}){note}"),
        ));
    }
    g.stats.read.node_logs += dst.len() as u64;
    g.report_read(LOCAL_READ_BYTES, dst.len() as u64);
    Ok(())
}

/// The pieces of the owners' runs within `[start, end)`, ascending: only the pieces a read
/// touches are expanded, so reading a few pieces of a file of many writers costs a few.
fn owned_pieces(owners: &RunMap<Owner>, start: u64, end: u64) -> Vec<Extent<Owner>> {
    let mut out: Vec<Extent<Owner>> = owners
        .overlapping(start, end)
        .into_iter()
        .flat_map(|(run, value)| {
            run.pieces()
                .map(move |(start, end)| Extent { start, end, value })
                .collect::<Vec<_>>()
        })
        .collect();
    out.sort_unstable_by_key(|e| e.start);
    out
}

/// Read-ahead state handed to [`fill`] by a handle with a session view.
pub(crate) struct ReadAhead<'a> {
    pub ahead: &'a mut Ahead,
    pub predicted: Vec<(u64, u64)>,
}

/// Where a file's bytes come from, as a read learned it.
pub(crate) struct Source<'a> {
    pub path: &'a str,
    pub owners: &'a RunMap<Owner>,
    /// Bytes beyond this that no one owns are holes, whatever the PFS copy holds.
    pub pfs_upto: Option<u64>,
}

/// Fills `out` with logical bytes `[offset, offset + out.len())` from the newest source.
pub(crate) fn fill(
    g: &mut Inner,
    ino: u64,
    source: &Source<'_>,
    offset: u64,
    out: &mut [u8],
    mut read_ahead: Option<ReadAhead<'_>>,
) -> FsResult<()> {
    let Source {
        path,
        owners,
        pfs_upto,
    } = *source;
    let end = offset + out.len() as u64;
    let me = Owner {
        node: g.node,
        client: g.log_id(),
    };
    let mut todo = RangeSet::new();
    todo.add(offset, end);

    // 1. Own unattached writes.
    let own: Vec<(u64, u64, u64)> = match g.files.get(&ino) {
        Some(fs) if fs.writing => fs
            .dirty
            .overlapping(offset, end)
            .iter()
            .flat_map(|d| {
                fs.local
                    .overlapping(d.start, d.end)
                    .into_iter()
                    .map(|ext| (ext.start, ext.end, ext.value))
            })
            .collect(),
        _ => Vec::new(),
    };
    for (s, e, pos) in own {
        let dst = &mut out[(s - offset) as usize..(e - offset) as usize];
        g.writer(ino)?.read_at(dst, pos)?;
        todo.remove(s, e);
        g.stats.read.own_unattached += e - s;
        g.report_read(LOCAL_READ_BYTES, e - s);
    }

    // 2. Owners: local ones now, remote ones collected.
    let mut remote: Vec<(Owner, u64, u64)> = Vec::new();
    for o in owned_pieces(owners, offset, end) {
        let parts: Vec<(u64, u64)> = todo
            .overlapping(o.start, o.end)
            .iter()
            .map(|x| (x.start, x.end))
            .collect();
        for (s, e) in parts {
            let dst = &mut out[(s - offset) as usize..(e - offset) as usize];
            let (writing, forgot) = g
                .files
                .get(&ino)
                .map_or((false, false), |fs| (fs.writing, fs.forgot));
            if o.value == me && writing {
                // Our own bytes, from our log. A cached owner list can be older than our own
                // truncate or detach: bytes we no longer hold are left to the PFS copy / zeros.
                let Some(fs) = g.files.get(&ino) else {
                    continue;
                };
                let mine: Vec<(u64, u64, u64)> = fs
                    .local
                    .overlapping(s, e)
                    .into_iter()
                    .map(|ext| (ext.start, ext.end, ext.value))
                    .collect();
                let mut gaps = RangeSet::new();
                gaps.add(s, e);
                for (xs, xe, pos) in mine {
                    let d = &mut dst[(xs - s) as usize..(xe - s) as usize];
                    g.writer(ino)?.read_at(d, pos)?;
                    todo.remove(xs, xe);
                    gaps.remove(xs, xe);
                    g.stats.read.own_log += xe - xs;
                    g.report_read(LOCAL_READ_BYTES, xe - xs);
                }
                if forgot {
                    // Bytes written under this log before a switch of logs (joining or
                    // leaving a transaction), which `local` no longer knows: by its index.
                    for gap in gaps.overlapping(s, e) {
                        let d = &mut dst[(gap.start - s) as usize..(gap.end - s) as usize];
                        read_node_log(g, path, ino, me.client, gap.start, d)?;
                        todo.remove(gap.start, gap.end);
                    }
                }
                continue;
            } else if o.value.node == g.node {
                // Another process's log on this node, or one of ours this process has no
                // writer of now (it attached those bytes before it joined or left a
                // transaction): read by its index like any other.
                read_node_log(g, path, ino, o.value.client, s, dst)?;
            } else if read_ahead
                .as_ref()
                .is_some_and(|ra| ra.ahead.take(s, e, dst))
            {
                g.stats.read.read_ahead_hits += e - s;
            } else {
                remote.push((o.value, s, e));
            }
            todo.remove(s, e);
        }
    }
    if !remote.is_empty() {
        // What the pattern says comes next, on other nodes, not fetched yet.
        let mut extra: Vec<(Owner, u64, u64)> = Vec::new();
        if let Some(ra) = read_ahead.as_ref() {
            let dirty = g.files.get(&ino).map(|f| &f.dirty);
            for (ps, pe) in &ra.predicted {
                for o in owned_pieces(owners, *ps, *pe) {
                    let foreign = o.value != me && o.value.node != g.node;
                    let mine_dirty =
                        dirty.is_some_and(|d| !d.overlapping(o.start, o.end).is_empty());
                    if foreign && !mine_dirty && !ra.ahead.holds(o.start, o.end) {
                        extra.push((o.value, o.start, o.end));
                    }
                }
            }
        }
        fetch_remote(
            g,
            ino,
            offset,
            out,
            &remote,
            &extra,
            read_ahead.as_mut().map(|ra| &mut *ra.ahead),
        )?;
    }

    // 3./4. The PFS copy, then zeros.
    let gaps: Vec<(u64, u64)> = todo.ranges().collect();
    if gaps.is_empty() {
        return Ok(());
    }
    if g.through_daemon {
        return read_pfs_through_daemon(g, path, offset, out, &gaps, pfs_upto);
    }
    let pfs = g.open_pfs_copy(path)?;
    for (s, e) in gaps {
        let dst = &mut out[(s - offset) as usize..(e - offset) as usize];
        dst.fill(0);
        let from_pfs = pfs_upto.map_or(dst.len(), |u| u.saturating_sub(s).min(e - s) as usize);
        let mut done = 0;
        if let Some(f) = &pfs {
            while done < from_pfs {
                match f.get().read_at(&mut dst[done..from_pfs], s + done as u64) {
                    Ok(0) => break,
                    Ok(k) => done += k,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        return Err(FsError::io(format!("reading the PFS copy of {path}"), &e));
                    }
                }
            }
        }
        g.stats.read.pfs += done as u64;
        g.stats.read.holes += (e - s) - done as u64;
        g.report_read(PFS_READ_BYTES, done as u64);
    }
    Ok(())
}

/// Fetches the `needed` remote ranges into `out` (which starts at logical `offset`), and the
/// `extra` ones into the read-ahead store, in as few requests as the frame size allows. Each
/// request names every owner it needs; the daemon asks them in parallel.
fn fetch_remote(
    g: &mut Inner,
    ino: u64,
    offset: u64,
    out: &mut [u8],
    needed: &[(Owner, u64, u64)],
    extra: &[(Owner, u64, u64)],
    mut ahead: Option<&mut Ahead>,
) -> FsResult<()> {
    let chunk = g.cfg.max_read_chunk();
    // Split large ranges, tag each piece with whether it is needed now.
    let mut pieces: Vec<(Owner, u64, u64, bool)> = Vec::new();
    let mut extra_budget = AHEAD_WINDOW;
    for (list, now) in [(needed, true), (extra, false)] {
        for (owner, s, e) in list {
            let mut a = *s;
            while a < *e {
                let b = (*e).min(a + chunk);
                if !now {
                    if extra_budget < b - a {
                        break;
                    }
                    extra_budget -= b - a;
                }
                pieces.push((*owner, a, b, now));
                a = b;
            }
        }
    }
    // Bytes fetched: needed now, and ahead of use.
    let mut fetched = (0, 0);
    let mut start = 0;
    while start < pieces.len() {
        // Take pieces until the request is full; stop at the first extra piece that would
        // overflow it (extra pieces only ride along).
        let mut bytes = 0;
        let mut stop = start;
        while stop < pieces.len() && bytes + (pieces[stop].2 - pieces[stop].1) <= chunk {
            bytes += pieces[stop].2 - pieces[stop].1;
            stop += 1;
        }
        let batch = &pieces[start..stop.max(start + 1)];
        let mut parts: BTreeMap<Owner, Vec<(u64, u64)>> = BTreeMap::new();
        for (o, s, e, _) in batch {
            parts.entry(*o).or_default().push((*s, *e));
        }
        let parts: Vec<(Owner, Vec<(u64, u64)>)> = parts.into_iter().collect();
        let announced = g.call(Read {
            ino,
            parts: parts.clone(),
        })?;
        let data = g.last_data();
        tessera_proto::check_data(&announced, data)?;
        // The answer is the parts' ranges concatenated in request order.
        let mut at = 0usize;
        let mut got: BTreeMap<(u64, u64), &[u8]> = BTreeMap::new();
        for (_, ranges) in &parts {
            for (s, e) in ranges {
                let len = (e - s) as usize;
                let bytes = data.get(at..at + len).ok_or_else(|| {
                    FsError::new(Errno::Proto, "short read answer from the daemon")
                })?;
                got.insert((*s, *e), bytes);
                at += len;
            }
        }
        for (_, s, e, now) in batch {
            let bytes = got[&(*s, *e)];
            if *now {
                out[(s - offset) as usize..(e - offset) as usize].copy_from_slice(bytes);
                fetched.0 += e - s;
            } else if let Some(a) = ahead.as_deref_mut() {
                a.put(*s, *e, bytes.to_vec());
                fetched.1 += e - s;
            }
        }
        start = stop.max(start + 1);
        // Once everything needed now is in, stop: leftover extra pieces wait for a later miss.
        if !pieces[start..].iter().any(|p| p.3) {
            break;
        }
    }
    g.stats.read.remote += fetched.0;
    g.stats.read.read_ahead_fetched += fetched.1;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_predicts_strided_and_sequential_runs() {
        let mut p = Pattern::default();
        p.observe(100, 10);
        assert!(p.predict(100).is_empty(), "one access is no pattern");
        p.observe(140, 10);
        assert!(p.predict(100).is_empty(), "one gap is no pattern either");
        p.observe(180, 10);
        assert_eq!(p.predict(30), vec![(220, 230), (260, 270), (300, 310)]);
        p.observe(150, 10); // breaks the pattern
        assert!(p.predict(100).is_empty());
        let mut seq = Pattern::default();
        seq.observe(0, 4);
        seq.observe(4, 4);
        seq.observe(8, 4);
        assert_eq!(seq.predict(8), vec![(12, 16), (16, 20)]);
        let mut large = Pattern::default();
        for i in 0..4 {
            large.observe(i << 23, 1 << 23);
        }
        assert!(
            large.predict(1 << 30).is_empty(),
            "8 MiB reads need no read-ahead"
        );
        let mut random = Pattern::default();
        for off in [500, 20, 900, 300] {
            random.observe(off, 8);
        }
        assert!(random.predict(100).is_empty());
    }

    #[test]
    fn ahead_serves_contained_ranges_and_evicts_oldest() {
        let mut a = Ahead::default();
        a.put(10, 20, (10..20).collect());
        let mut dst = [0u8; 4];
        assert!(a.take(12, 16, &mut dst));
        assert_eq!(dst, [12, 13, 14, 15]);
        assert!(!a.take(18, 22, &mut dst));
        assert!(a.holds(10, 20) && !a.holds(5, 12));
        for i in 0..40u64 {
            a.put(
                1000 + i * (1 << 20),
                1000 + (i + 1) * (1 << 20),
                vec![0; 1 << 20],
            );
        }
        assert!(a.bytes <= AHEAD_KEPT);
        assert!(!a.holds(10, 20), "the oldest piece was evicted");
    }
}
