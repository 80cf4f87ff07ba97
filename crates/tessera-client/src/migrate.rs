//! Migration (FusionFS's migrate-on-open): copying the bytes of a file that other
//! nodes hold into this process's log on its own node, so that later reads here are local.
//!
//! The daemon hands out each stripe's owners with the version they were read at; the remote
//! bytes are read as any read would read them, appended to this process's log (not as writes:
//! they are never published as this process's own), and their ownership moves with a
//! conditional attach that leaves alone every stripe changed meanwhile (see the daemon's
//! `services::migrate`). Correct under every model: a stripe moves only if it is exactly as
//! the copy saw it.

use crate::File;
use std::collections::{BTreeMap, BTreeSet};
use tessera_core::{FsResult, Owner, Run};
use tessera_proto::{AttachIf, MigratePlan, Read};

impl File {
    /// Copies the bytes of this file held on other nodes into this process's log and makes
    /// it their owner where they are unchanged; returns the bytes whose ownership moved. Does
    /// nothing (0) once this process has bytes of the file in its log (its own writes or an
    /// earlier migration): the copies must sit below everything it wrote, which is published
    /// for it if it dies.
    pub fn migrate_here(&mut self) -> FsResult<u64> {
        self.check_open()?;
        let client = self.client.clone();
        let mut g = client.lock();
        let ino = self.ino;
        if g.files.get(&ino).is_some_and(|f| !f.local.is_empty()) {
            return Ok(0);
        }
        if g.membership.is_member() {
            return Ok(0);
        }
        if g.through_daemon {
            // A process working through its daemon alone keeps no logs of its own to copy
            // into.
            return Ok(0);
        }
        let me = g.node;
        let plan = g.call(MigratePlan { ino })?;
        let chunk = g.cfg.max_read_chunk().max(1);
        let mut stripes: Vec<(u64, u64, Vec<Run>)> = Vec::new();
        let mut from: BTreeSet<Owner> = BTreeSet::new();
        let mut copied = 0u64;
        for s in plan {
            let remote: Vec<_> = s.runs.iter().filter(|r| r.owner.node != me).collect();
            if remote.is_empty() {
                continue;
            }
            for r in &remote {
                from.insert(r.owner);
                // Pieces in requests of up to `chunk` bytes (a large piece in several).
                let mut batch: Vec<(u64, u64)> = Vec::new();
                let mut bytes = 0;
                for (a, b) in r.run.pieces() {
                    let mut at = a;
                    while at < b {
                        let e = b.min(at + (chunk - bytes));
                        batch.push((at, e));
                        bytes += e - at;
                        at = e;
                        if bytes == chunk {
                            copied += copy_in(&mut g, ino, r.owner, &batch)?;
                            batch.clear();
                            bytes = 0;
                        }
                    }
                }
                if !batch.is_empty() {
                    copied += copy_in(&mut g, ino, r.owner, &batch)?;
                }
            }
            stripes.push((s.stripe, s.version, remote.iter().map(|r| r.run).collect()));
        }
        if stripes.is_empty() {
            return Ok(0);
        }
        let mut writer = g.writer(ino)?;
        writer.sync_index()?;
        let upto = writer.data_len();
        let moved = g.call(AttachIf {
            ino,
            stripes,
            upto: Some(upto),
            from: from.into_iter().collect(),
        })?;

        g.stats.migrated_copied += copied;
        g.stats.migrated += moved;
        let fs = g.files.get_mut(&ino).expect("writer() created the state");
        fs.view_epoch += 1;
        Ok(moved)
    }
}

/// Reads `ranges` of `owner`'s log through the daemon and appends them to this process's log
/// at the same offsets; returns the bytes copied.
fn copy_in(
    g: &mut crate::client::Inner,
    ino: u64,
    owner: Owner,
    ranges: &[(u64, u64)],
) -> FsResult<u64> {
    let announced = g.call(Read {
        ino,
        parts: vec![(owner, ranges.to_vec())],
    })?;
    let data = g.last_data().to_vec();
    tessera_proto::check_data(&announced, &data)?;
    let total: u64 = ranges.iter().map(|(s, e)| e - s).sum();
    g.reserve(total)?;
    let mut at = 0usize;
    let mut placed: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for (s, e) in ranges {
        let len = (e - s) as usize;
        let mut w = g.writer(ino)?;
        let pos = w.append(*s, &data[at..at + len])?;
        // At once in the journal: if this process dies, its daemon publishes what it wrote
        // and did not publish, and a copy of an old version must never be among that.
        let upto = w.data_len();
        w.mark(tessera_core::index::Entry::PublishedUpTo { pos: upto })?;
        placed.insert(*s, (*e, pos));
        at += len;
    }
    let fs = g.files.get_mut(&ino).expect("writer() created the state");
    for (s, (e, pos)) in placed {
        fs.local.insert(s, e, pos);
    }
    Ok(total)
}
