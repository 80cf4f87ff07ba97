//! The synchronisation primitives of Wang, Mohror and Snir (their Table V) on an open file:
//! attach, query, detach, and flush to the PFS.

use super::*;
use crate::client::Inner;
use tessera_core::placement::attach_batches;
use tessera_core::{Errno, FsError, FsResult, Owner, Run, run::compress};
use tessera_proto::{Attach, Detach, DetachFile, Flush, OwnedRun};

impl File {
    /// Makes this process's writes of `[offset, offset + len)` visible to all processes. Every
    /// byte of the range must have been written by this process.
    pub fn attach(&mut self, offset: u64, len: u64) -> FsResult<()> {
        self.check_open()?;
        let client = self.client.clone();
        let mut g = client.lock();
        let end = offset.saturating_add(len);
        if len == 0 {
            return Ok(());
        }
        let fs = g.files.entry(self.ino).or_default();
        if let Some((a, b)) = fs.local.gaps(offset, end).first().copied() {
            return Err(FsError::new(
                Errno::Inval,
                format!(
                    "attach of [{offset}, {end}) of {}: bytes [{a}, {b}) were never written by this process; write them first or attach a smaller range",
                    g.user_path(&self.path)
                ),
            ));
        }
        self.attach_ranges(&mut g, &[(offset, end)], false)
    }

    /// Attaches every write of this process not attached yet (no-op if there is none).
    /// Whether the handle was opened for writing.
    pub fn is_writable(&self) -> bool {
        self.writable
    }

    pub fn attach_file(&mut self) -> FsResult<()> {
        self.check_open()?;
        let client = self.client.clone();
        let mut g = client.lock();
        self.attach_dirty(&mut g)
    }

    pub(crate) fn attach_dirty(&mut self, g: &mut Inner) -> FsResult<()> {
        let dirty: Vec<(u64, u64)> = match g.files.get(&self.ino) {
            Some(fs) => fs.dirty.ranges().collect(),
            None => return Ok(()),
        };
        if dirty.is_empty() {
            return Ok(());
        }
        self.attach_ranges(g, &dirty, true)
    }

    /// Sends an attach for `ranges` (written by this process) and updates local state;
    /// `all_dirty`: the ranges are exactly the dirty set (moved over wholesale).
    pub(super) fn attach_ranges(
        &mut self,
        g: &mut Inner,
        ranges: &[(u64, u64)],
        all_dirty: bool,
    ) -> FsResult<()> {
        let mut writer = g.writer(self.ino)?;
        writer.sync_index()?;
        let logged = writer.data_len();
        // Whether this attach leaves nothing unpublished (close, commit, and the attach of a
        // POSIX write are): then it publishes everything stored below `logged`.
        let everything = all_dirty
            || g.files.get(&self.ino).is_some_and(|fs| {
                let mut left = fs.dirty.clone();
                for (s, e) in ranges {
                    left.remove(*s, *e);
                }
                left.is_empty()
            });
        let runs: Vec<Run> = compress(ranges.iter().copied());
        // A run encodes in at most ~40 bytes; stay well inside the frame.
        let max_runs = (g.cfg.max_frame as usize / 64).max(1);
        let batches = attach_batches(runs.clone(), g.cfg.stripe_size, max_runs);
        let last = batches.len().saturating_sub(1);
        let fences = g
            .files
            .get(&self.ino)
            .map_or_else(Vec::new, |fs| fs.fences.clone());
        for (i, batch) in batches.into_iter().enumerate() {
            g.stats.attaches += 1;
            g.call(Attach {
                ino: self.ino,
                runs: batch,
                upto: (everything && i == last).then_some(logged),
                fences: fences.clone(),
            })?;
        }
        // Recorded in the index log too (for a daemon that restarts before the process
        // ends): one lazy marker for a full publication, an immediate one for a part.
        let mut writer = g.writer(self.ino)?;
        if everything {
            writer.published()?;
        } else {
            for (s, e) in ranges {
                writer.mark(tessera_core::index::Entry::PublishedRange {
                    start: *s,
                    end: *e,
                    at: 0,
                })?;
            }
        }
        let me = Owner {
            node: g.node,
            client: g.log_id(),
        };
        let fs = g
            .files
            .get_mut(&self.ino)
            .expect("writer() created the state");
        if all_dirty {
            let dirty = std::mem::take(&mut fs.dirty);
            fs.attached.union_with(dirty);
        } else {
            for (s, e) in ranges {
                fs.dirty.remove(*s, *e);
                fs.attached.add(*s, *e);
            }
        }
        // The bytes left the dirty set, through which every handle of the process reads its
        // own writes: the other handles' cached owners must learn that they are ours now.
        // This handle applies the change in place and stays current if it was.
        let was_current = self.view_epoch == fs.view_epoch;
        fs.view_epoch += 1;
        if was_current {
            self.view_epoch = fs.view_epoch;
        }
        if let Some(o) = self.owners.as_mut() {
            for r in runs {
                o.insert(r, me);
            }
        }
        self.size = self.size.max(ranges.iter().map(|r| r.1).max().unwrap_or(0));
        Ok(())
    }

    /// Who holds the newest attached bytes of `[offset, offset + len)`.
    /// Who holds the newest attached bytes of `[offset, offset + len)`: runs, disjoint,
    /// ascending by start (see [`tessera_proto::extents_of`] for the pieces).
    pub fn query(&mut self, offset: u64, len: u64) -> FsResult<Vec<OwnedRun>> {
        self.check_open()?;
        let client = self.client.clone();
        let mut g = client.lock();
        let o = query(&mut g, self.ino, offset, offset.saturating_add(len))?;
        self.learn_size(&o);
        Ok(o.runs)
    }

    /// Who holds the newest attached bytes of the whole file; refreshes this handle's view.
    pub fn query_file(&mut self) -> FsResult<Vec<OwnedRun>> {
        self.check_open()?;
        let client = self.client.clone();
        let mut g = client.lock();
        Ok(self.relearn(&mut g)?.runs)
    }

    /// Gives up this process's ownership of `[offset, offset + len)`, which it must have
    /// attached, and drops those bytes from its local buffer. Flush first to keep them.
    pub fn detach(&mut self, offset: u64, len: u64) -> FsResult<()> {
        self.check_open()?;
        let client = self.client.clone();
        let mut g = client.lock();
        let end = offset.saturating_add(len);
        if len == 0 {
            return Ok(());
        }
        let gaps = g
            .files
            .get(&self.ino)
            .map_or(vec![(offset, end)], |fs| fs.attached.gaps(offset, end));
        if let Some((a, b)) = gaps.first() {
            return Err(FsError::new(
                Errno::Inval,
                format!(
                    "detach of [{offset}, {end}) of {}: bytes [{a}, {b}) are not attached by this process; attach them first or detach a smaller range",
                    g.user_path(&self.path)
                ),
            ));
        }
        g.call(Detach {
            ino: self.ino,
            start: offset,
            end,
        })?;
        let me = Owner {
            node: g.node,
            client: g.log_id(),
        };
        let fs = g.files.get_mut(&self.ino).expect("checked above");
        fs.attached.remove(offset, end);
        // Newer writes of the range that are not attached yet stay ours.
        for (s, e) in fs.dirty.gaps(offset, end) {
            fs.local.remove(s, e);
        }
        if let Some(o) = self.owners.as_mut() {
            o.remove_where(offset, end, |w| *w == me);
        }
        Ok(())
    }

    /// Gives up all of this process's ownership of the file.
    pub fn detach_file(&mut self) -> FsResult<()> {
        self.check_open()?;
        let client = self.client.clone();
        let mut g = client.lock();
        g.call(DetachFile { ino: self.ino })?;
        let me = Owner {
            node: g.node,
            client: g.log_id(),
        };
        if let Some(fs) = g.files.get_mut(&self.ino) {
            let attached: Vec<(u64, u64)> = fs.attached.ranges().collect();
            for (a, b) in attached {
                for (s, e) in fs.dirty.gaps(a, b) {
                    fs.local.remove(s, e);
                }
            }
            fs.attached = Default::default();
        }
        if let Some(o) = self.owners.as_mut() {
            o.remove_value(me);
        }
        Ok(())
    }

    /// Writes the attached bytes of `[offset, offset + len)` to the PFS (this process's
    /// unattached writes are attached first); returns bytes written.
    pub fn flush(&mut self, offset: u64, len: u64) -> FsResult<u64> {
        self.flush_range(Some((offset, offset.saturating_add(len))))
    }

    /// Writes the whole file to the PFS, atomically; returns bytes written.
    pub fn flush_file(&mut self) -> FsResult<u64> {
        self.flush_range(None)
    }

    pub(super) fn flush_range(&mut self, range: Option<(u64, u64)>) -> FsResult<u64> {
        self.check_open()?;
        let client = self.client.clone();
        let mut g = client.lock();
        self.attach_dirty(&mut g)?;
        let flushed = g.call(Flush {
            path: self.path.clone(),
            range,
        })?;
        Ok(flushed.bytes)
    }
}
