//! The data path of an open file: write (appending to the process's log), read (assembled from
//! the process's own writes, the owners' logs, the PFS copy and holes), seek and size.

use super::*;
use crate::client::Inner;
use crate::read::{ReadAhead, Source, fill};
use tessera_core::{Errno, FsError, FsResult, Owner, RunMap};
use tessera_proto::{AppendAt, Owners, Stat};

impl File {
    /// Writes `buf` at `offset`; returns the bytes written (all of them, or an error).
    pub fn write_at(&mut self, buf: &[u8], offset: u64) -> FsResult<usize> {
        self.check_open()?;
        let client = self.client.clone();
        let mut g = client.lock();
        if !self.writable {
            return Err(FsError::new(
                Errno::BadF,
                format!("{} was opened read-only", g.user_path(&self.path)),
            ));
        }
        if buf.is_empty() {
            return Ok(0);
        }
        let end = tessera_core::run::end_within_limit(offset, buf.len() as u64, "write")?;
        g.reserve(buf.len() as u64)?;
        let pos = g.writer(self.ino)?.append(offset, buf).map_err(|e| {
            if e.errno == Errno::NoSpace {
                FsError::new(
                    Errno::NoSpace,
                    format!(
                        "burst buffer full: {}; earlier writes are intact",
                        e.message
                    ),
                )
            } else {
                e
            }
        })?;
        let fs = g
            .files
            .get_mut(&self.ino)
            .expect("writer() created the state");
        fs.local.insert(offset, end, pos);
        fs.dirty.add(offset, end);
        if self.model.policy().attach_on_write {
            self.attach_ranges(&mut g, &[(offset, end)], false)?;
        }
        Ok(buf.len())
    }

    /// Re-learns the owners (and the size) if a lock, sync or publication of this process
    /// made this handle's cached view stale (see `FileState::view_epoch`).
    pub(super) fn catch_up(&mut self, g: &mut Inner) -> FsResult<()> {
        let stale = self.owners.is_some()
            && g.files.get(&self.ino).map_or(0, |f| f.view_epoch) != self.view_epoch;
        if stale {
            self.relearn(g)?;
        }
        Ok(())
    }

    /// Asks who holds the whole file and makes that this handle's view (owners, size, epoch).
    pub(super) fn relearn(&mut self, g: &mut Inner) -> FsResult<Owners> {
        let o = query_file(g, self.ino)?;
        self.learn_size(&o);
        self.owners = Some(owners_map(&o));
        self.ahead.clear();
        self.view_epoch = g.files.get(&self.ino).map_or(0, |f| f.view_epoch);
        Ok(o)
    }

    /// Where an append of `len` bytes goes: a range the file's daemon reserves at its end
    /// (the size covers it at once), so appenders in different processes never write over
    /// each other, under every model. A member of a transaction appends at the end as it sees
    /// it (its size changes are pending until the commit).
    pub fn append_offset(&mut self, len: u64) -> FsResult<u64> {
        self.check_open()?;
        let client = self.client.clone();
        let mut g = client.lock();
        if g.membership.is_member() || len == 0 {
            self.catch_up(&mut g)?;
            let local_end = g.files.get(&self.ino).map_or(0, |f| f.local.max_end());
            return Ok(self.size.max(local_end));
        }
        let at = g.call(AppendAt { ino: self.ino, len })?;
        self.size = self.size.max(at + len);
        Ok(at)
    }

    /// Writes at the current position (or at the end, for append handles) and advances it.
    pub fn write(&mut self, buf: &[u8]) -> FsResult<usize> {
        if self.append {
            self.pos = self.append_offset(buf.len() as u64)?;
        }
        let n = self.write_at(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }

    /// Reads at `offset` into `buf`; returns the bytes read (0 at or past end of file).
    pub fn read_at(&mut self, buf: &mut [u8], offset: u64) -> FsResult<usize> {
        self.check_open()?;
        let client = self.client.clone();
        let mut g = client.lock();
        if !self.readable {
            return Err(FsError::new(
                Errno::BadF,
                format!("{} was opened write-only", g.user_path(&self.path)),
            ));
        }
        if buf.is_empty() {
            return Ok(0);
        }
        let want_end = offset.saturating_add(buf.len() as u64);
        self.catch_up(&mut g)?;
        // Who holds the newest bytes: asked per read, or known since the last session open/sync.
        let fresh;
        let owners: &RunMap<Owner> = match &self.owners {
            Some(cached) if !self.model.policy().query_on_read => cached,
            _ => {
                let o = query(&mut g, self.ino, offset, want_end)?;
                self.learn_size(&o);
                fresh = owners_map(&o);
                &fresh
            }
        };
        let local_end = g.files.get(&self.ino).map_or(0, |f| f.local.max_end());
        let size = self.size.max(local_end);
        if offset >= size {
            return Ok(0);
        }
        let end = want_end.min(size);
        let n = (end - offset) as usize;
        let out = &mut buf[..n];
        let read_ahead = if self.owners.is_some() && !self.model.policy().query_on_read {
            self.pattern.observe(offset, n as u64);
            let predicted = self.pattern.predict(AHEAD_BUDGET);
            Some(ReadAhead {
                ahead: &mut self.ahead,
                predicted,
            })
        } else {
            None
        };
        let source = Source {
            path: &self.path,
            owners,
            pfs_upto: self.pfs_upto,
        };
        fill(&mut g, self.ino, &source, offset, out, read_ahead)?;
        Ok(n)
    }

    /// Reads exactly `buf.len()` bytes at `offset`, or fails with ENODATA naming the size.
    pub fn read_exact_at(&mut self, buf: &mut [u8], offset: u64) -> FsResult<()> {
        let n = self.read_at(buf, offset)?;
        if n < buf.len() {
            let g = self.client.lock();
            let local_end = g.files.get(&self.ino).map_or(0, |f| f.local.max_end());
            let visible = self.size.max(local_end);
            return Err(FsError::new(
                Errno::NoData,
                format!(
                    "read of [{offset}, {}) of {} goes past end of file (size {}, as visible to this process under the {} model)",
                    offset + buf.len() as u64,
                    g.user_path(&self.path),
                    visible,
                    self.model
                ),
            ));
        }
        Ok(())
    }

    /// Reads at the current position and advances it.
    pub fn read(&mut self, buf: &mut [u8]) -> FsResult<usize> {
        let n = self.read_at(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }

    pub fn seek(&mut self, whence: Whence) -> FsResult<u64> {
        self.check_open()?;
        let base = match whence {
            Whence::Start(o) => {
                self.pos = o;
                return Ok(o);
            }
            Whence::Current(d) => (self.pos, d),
            Whence::End(d) => (self.len()?, d),
        };
        let new = base.0.checked_add_signed(base.1).ok_or_else(|| {
            FsError::new(
                Errno::Inval,
                format!("seek to {} + {} is outside the file", base.0, base.1),
            )
        })?;
        self.pos = new;
        Ok(new)
    }

    pub fn tell(&self) -> u64 {
        self.pos
    }

    /// The file size as this process sees it (namespace size, or its own writes beyond it).
    pub fn len(&mut self) -> FsResult<u64> {
        self.check_open()?;
        let client = self.client.clone();
        let mut g = client.lock();
        let a = g.call(Stat {
            path: self.path.clone(),
        })?;
        if a.size > self.size && self.owners.is_some() {
            // Grown since this handle learned its owners: learn them again, so that reads
            // below the new size find its bytes instead of a hole.
            self.relearn(&mut g)?;
        } else {
            self.size = a.size;
        }
        let local_end = g.files.get(&self.ino).map_or(0, |f| f.local.max_end());
        Ok(self.size.max(local_end))
    }

    pub fn is_empty(&mut self) -> FsResult<bool> {
        Ok(self.len()? == 0)
    }

    /// Takes the size from a query answer: exact when the daemon looked it up, otherwise at
    /// least the end of the owned bytes it returned.
    pub(super) fn learn_size(&mut self, o: &Owners) {
        self.size = match o.size {
            Some(s) => {
                self.pfs_upto = o.pfs_upto;
                s
            }
            None => self
                .size
                .max(o.runs.iter().map(|r| r.run.end()).max().unwrap_or(0)),
        };
    }
}
