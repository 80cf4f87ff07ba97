//! Open files: the data path (write, read, seek) and the synchronisation primitives (attach,
//! query, detach, flush), placed by the file's consistency model.
//!
//! A write appends to this process's data log and records the range in the process's local
//! extent map; no message is sent unless the model attaches per write. A read is assembled
//! from up to four sources, newest first:
//!
//! 1. this process's own unattached writes (in a properly synchronised program nothing newer
//!    can exist: another process's newer write would need our commit/close first);
//! 2. the owners from the last query: our own log, another process's log on this node (read
//!    straight from its files), or a log on another node (through the daemons);
//! 3. the PFS copy of the file for ranges no one owns;
//! 4. zeros (holes) up to the file size.

use crate::client::{Client, Inner};
use crate::read::{Ahead, Pattern, ReadAhead, Source, fill};
use tessera_core::locks::{HeldLock, LockKind};
use tessera_core::placement::attach_batches;
use tessera_core::posix::OpenIntent;
use tessera_core::{Errno, FsError, FsResult, Model, Owner, Run, RunMap, run::compress};
use tessera_proto::{
    AppendAt, Attach, Detach, DetachFile, Flush, GetLock, Lock, Open, OpenFlags, OwnedRun, Owners,
    Query, QueryFile, Stat,
};

/// Bytes of upcoming pattern accesses considered for read-ahead at each remote miss.
const AHEAD_BUDGET: u64 = 8 << 20;

/// How to open a file.
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    read: bool,
    write: bool,
    create: bool,
    exclusive: bool,
    truncate: bool,
    append: bool,
    mode: u32,
    model: Option<Model>,
}

impl OpenOptions {
    pub fn new() -> Self {
        OpenOptions {
            mode: 0o644,
            ..Default::default()
        }
    }
    pub fn read(&mut self, v: bool) -> &mut Self {
        self.read = v;
        self
    }
    pub fn write(&mut self, v: bool) -> &mut Self {
        self.write = v;
        self
    }
    pub fn create(&mut self, v: bool) -> &mut Self {
        self.create = v;
        self
    }
    /// With `create`: fail with EEXIST if the file exists.
    pub fn exclusive(&mut self, v: bool) -> &mut Self {
        self.exclusive = v;
        self
    }
    pub fn truncate(&mut self, v: bool) -> &mut Self {
        self.truncate = v;
        self
    }
    pub fn append(&mut self, v: bool) -> &mut Self {
        self.append = v;
        self
    }
    pub fn mode(&mut self, mode: u32) -> &mut Self {
        self.mode = mode;
        self
    }
    /// The consistency model of this handle (default: the instance's `default_model`).
    pub fn model(&mut self, m: Model) -> &mut Self {
        self.model = Some(m);
        self
    }

    /// Options from decoded `open(2)` flags and a creation mode: access, `O_CREAT`, `O_EXCL`
    /// (with `O_CREAT`), `O_TRUNC`. `O_APPEND` is left to the caller: a descriptor keeps its
    /// own position, and Linux accepts it on a read-only open.
    pub fn from_intent(intent: &OpenIntent, mode: u32) -> Self {
        let mut o = OpenOptions::new();
        o.read(intent.read)
            .write(intent.write)
            .create(intent.create)
            .exclusive(intent.create && intent.exclusive)
            .truncate(intent.truncate)
            .mode(mode & 0o7777);
        o
    }
}

/// Where `seek` moves from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Whence {
    Start(u64),
    Current(i64),
    End(i64),
}

/// An open Tessera file.
pub struct File {
    pub(crate) client: Client,
    pub(crate) ino: u64,
    path: String,
    model: Model,
    readable: bool,
    writable: bool,
    append: bool,
    pos: u64,
    /// Size known from the namespace at the last open/query/stat.
    size: u64,
    /// Owners from the last whole-file query (session and MPI-IO models).
    owners: Option<RunMap<Owner>>,
    /// Where the PFS copy stops counting, from the last answer with a size (a transaction
    /// this process sees cut the file there).
    pfs_upto: Option<u64>,
    /// The file's `view_epoch` when `owners` was learned.
    view_epoch: u64,
    /// This handle's access pattern and the bytes read ahead for it (with cached owners).
    pattern: Pattern,
    ahead: Ahead,
    /// Whether this handle took byte-range locks (released at close, as POSIX does).
    locked: bool,
    closed: bool,
}

/// A query's answer as a map (its runs are disjoint, as the shards keep them).
fn owners_map(o: &Owners) -> RunMap<Owner> {
    let mut m = RunMap::new();
    for r in &o.runs {
        m.restore(r.run, r.owner);
    }
    m
}

impl File {
    pub(crate) fn open(client: &Client, user_path: &str, o: &OpenOptions) -> FsResult<File> {
        let mut g = client.lock();
        let path = g.resolve(user_path)?;
        if !o.read && !o.write {
            return Err(FsError::new(
                Errno::Inval,
                format!("open of {}: choose read, write or both", g.user_path(&path)),
            ));
        }
        if (o.truncate || o.append) && !o.write {
            return Err(FsError::new(
                Errno::Inval,
                format!(
                    "open of {}: truncate and append need write access",
                    g.user_path(&path)
                ),
            ));
        }
        let model = o.model.unwrap_or(g.cfg.default_model);
        let want_owners = model.policy().query_on_open && o.read;
        let req = Open {
            path: path.clone(),
            flags: OpenFlags {
                create: o.create,
                exclusive: o.exclusive,
                truncate: o.truncate,
                write: o.write,
            },
            mode: o.mode,
            want_owners,
        };
        // `path` becomes where PFS links led (a read open follows them).
        let tessera_proto::Opened {
            attr,
            mut owners,
            path,
        } = g.call(req)?;
        if want_owners {
            g.stats.queries += 1;
            g.query_gen += 1;
        }
        if let Some(o) = owners.as_mut() {
            rest_of_file(&mut g, attr.ino, o)?;
        }
        if o.truncate {
            g.truncate_local(attr.ino, 0)?;
        }
        let view_epoch = g.files.entry(attr.ino).or_default().view_epoch;
        Ok(File {
            client: client.clone(),
            ino: attr.ino,
            path,
            model,
            readable: o.read,
            writable: o.write,
            append: o.append,
            pos: 0,
            // The query's size was read after the open's and before its extents.
            size: owners.as_ref().and_then(|o| o.size).unwrap_or(attr.size),
            owners: owners.as_ref().map(owners_map),
            pfs_upto: owners.as_ref().and_then(|o| o.pfs_upto),
            view_epoch,
            pattern: Pattern::default(),
            ahead: Ahead::default(),
            locked: false,
            closed: false,
        })
    }

    pub fn model(&self) -> Model {
        self.model
    }

    /// Inode number of the file.
    pub fn ino(&self) -> u64 {
        self.ino
    }

    /// Path inside the file system (without the mount prefix): the file opened, after any
    /// PFS link was followed.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The path as the user writes it (with the mount prefix).
    pub fn user_path(&self) -> String {
        self.client.lock().user_path(&self.path)
    }

    pub(crate) fn check_open(&self) -> FsResult<()> {
        if self.closed {
            return Err(FsError::new(
                Errno::BadF,
                format!("{} is closed", self.path),
            ));
        }
        Ok(())
    }

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
    fn catch_up(&mut self, g: &mut Inner) -> FsResult<()> {
        let stale = self.owners.is_some()
            && g.files.get(&self.ino).map_or(0, |f| f.view_epoch) != self.view_epoch;
        if stale {
            self.relearn(g)?;
        }
        Ok(())
    }

    /// Asks who holds the whole file and makes that this handle's view (owners, size, epoch).
    fn relearn(&mut self, g: &mut Inner) -> FsResult<Owners> {
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
        if g.txn.is_some() || len == 0 {
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
    fn learn_size(&mut self, o: &Owners) {
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

    // ----- primitives (Wang, Mohror and Snir, Table V) -----

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
    fn attach_ranges(
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

    fn flush_range(&mut self, range: Option<(u64, u64)>) -> FsResult<u64> {
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

    // ----- byte-range locks (fcntl record locks) -----

    /// Takes a shared or exclusive lock on `[offset, offset + len)` (`len == 0`: to end of file,
    /// including later growth) for this process. With `wait`, blocks until it is granted;
    /// without, fails with `EAGAIN` naming the holder. A lock of this process replaces what it
    /// held in the range. Locks are released by [`File::unlock`], at close, or when the process
    /// ends.
    ///
    /// Locks synchronise like close and open do (as NFS locks do): after taking one, every
    /// handle of the file in this process re-learns the owners before its next read (the lock
    /// belongs to the process, not to this handle); releasing one publishes this process's
    /// writes first. Writes made under a lock are thus seen by the next holder, which is what
    /// MPI-IO atomic mode builds on.
    pub fn lock(&mut self, offset: u64, len: u64, kind: LockKind, wait: bool) -> FsResult<()> {
        self.lock_request(offset, len, Some(kind), wait)?;
        self.locked = true;
        self.refresh();
        Ok(())
    }

    /// Releases this process's locks on `[offset, offset + len)` (`len == 0`: to end of file),
    /// after publishing its writes.
    pub fn unlock(&mut self, offset: u64, len: u64) -> FsResult<()> {
        // The process's writes, through whichever handle they were made.
        self.check_open()?;
        let client = self.client.clone();
        let mut g = client.lock();
        self.attach_dirty(&mut g)?;
        drop(g);
        self.lock_request(offset, len, None, false)
    }

    /// The first lock of another process that would conflict with `kind` on the range, or
    /// `None` if it could be taken now (fcntl F_GETLK).
    pub fn get_lock(
        &mut self,
        offset: u64,
        len: u64,
        kind: LockKind,
    ) -> FsResult<Option<HeldLock>> {
        self.check_open()?;
        let (start, end) = lock_range(offset, len)?;
        let client = self.client.clone();
        let mut g = client.lock();
        g.call(GetLock {
            ino: self.ino,
            start,
            end,
            kind,
        })
    }

    fn lock_request(
        &mut self,
        offset: u64,
        len: u64,
        kind: Option<LockKind>,
        wait: bool,
    ) -> FsResult<()> {
        self.check_open()?;
        let (start, end) = lock_range(offset, len)?;
        let client = self.client.clone();
        let mut g = client.lock();
        g.call(Lock {
            ino: self.ino,
            start,
            end,
            kind,
            wait,
            pid: std::process::id(),
        })
    }

    // ----- model-level synchronisation -----

    /// Commit (fsync): makes this process's writes visible to every later read.
    pub fn commit(&mut self) -> FsResult<()> {
        self.attach_file()
    }

    /// `fsync`: commit, and make this process's logs of the file durable on the burst-buffer
    /// device (a commit alone publishes the bytes but leaves them in the page cache).
    pub fn fsync(&mut self) -> FsResult<()> {
        self.commit()?;
        let client = self.client.clone();
        let mut g = client.lock();
        // A writer closed while idle (see `Inner::close_idle_writers`) is opened again: what
        // the process wrote to its log must reach the device all the same.
        let wrote = g
            .files
            .get(&self.ino)
            .is_some_and(|f| f.writing || !f.local.is_empty());
        if wrote {
            g.writer(self.ino)?.sync_durable()?;
        }
        Ok(())
    }

    /// Bytes of this file in the data log and the index log this process writes it to (its
    /// burst-buffer footprint; the index's share counts the log's header). Through the
    /// daemon, the whole log's.
    pub fn log_bytes(&self) -> (u64, u64) {
        let mut g = self.client.lock();
        if !g.files.get(&self.ino).is_some_and(|f| f.writing) {
            return (0, 0);
        }
        let ino = self.ino;
        g.log_sink().map_or((0, 0), |w| match w {
            crate::log_sink::LogSink::Local(w) => w.file_bytes(ino),
            crate::log_sink::LogSink::Daemon(d) => (d.lens.data, d.lens.index),
        })
    }

    /// Session open: learn the current owners of the whole file (done by open already).
    pub fn session_open(&mut self) -> FsResult<()> {
        self.query_file().map(drop)
    }

    /// Makes every handle of this file in this process that caches owners (session and
    /// MPI-IO handles opened for reading) re-learn them before its next read, so reads after
    /// this call see everything published before it. Costs nothing until such a read.
    pub fn refresh(&mut self) {
        let mut g = self.client.lock();
        g.files.entry(self.ino).or_default().view_epoch += 1;
    }

    /// Session close: publish this process's writes (done by close as well).
    pub fn session_close(&mut self) -> FsResult<()> {
        self.attach_file()
    }

    /// MPI-IO sync: publish this process's writes, then learn everyone's.
    pub fn sync(&mut self) -> FsResult<()> {
        self.attach_file()?;
        self.query_file().map(drop)
    }

    /// Publishes this process's unattached writes of the file, for a process that is ending
    /// without closing it. Never waits for another thread inside the client (it may never
    /// return) and never touches a parent's state (a `vfork` child shares it): then nothing is
    /// done here, and the daemon publishes the writes from the journal when the process has
    /// ended. Returns whether it published.
    pub fn publish_at_exit(&mut self) -> FsResult<bool> {
        if self.closed || !self.writable {
            return Ok(false);
        }
        let client = self.client.clone();
        let Some(mut g) = client.try_lock_own() else {
            return Ok(false);
        };
        self.attach_dirty(&mut g)?;
        Ok(true)
    }

    /// Closes the handle, publishing this process's unattached writes (every model does, so
    /// a forgotten commit never strands data).
    pub fn close(mut self) -> FsResult<()> {
        self.close_inner()
    }

    fn close_inner(&mut self) -> FsResult<()> {
        if self.closed {
            return Ok(());
        }
        // Published before the locks go (a lock protects the writes made under it, whichever
        // handle made them).
        let published = if self.writable || self.locked {
            let client = self.client.clone();
            let mut g = client.lock();
            self.attach_dirty(&mut g)
        } else {
            Ok(())
        };
        let unlocked = if self.locked {
            self.locked = false;
            self.lock_request(0, 0, None, false)
        } else {
            Ok(())
        };
        self.closed = true;
        published.and(unlocked)
    }
}

impl Drop for File {
    fn drop(&mut self) {
        let _ = self.close_inner();
    }
}

/// A lock's byte range: `len == 0` reaches to end of file, now and after growth.
fn lock_range(offset: u64, len: u64) -> FsResult<(u64, u64)> {
    if len == 0 {
        return Ok((offset, u64::MAX));
    }
    offset
        .checked_add(len)
        .map(|end| (offset, end))
        .ok_or_else(|| {
            FsError::new(
                Errno::Inval,
                format!("lock range {offset} + {len} overflows the file offset"),
            )
        })
}

fn query(g: &mut Inner, ino: u64, start: u64, end: u64) -> FsResult<Owners> {
    g.stats.queries += 1;
    g.query_gen += 1;
    let mut o: Owners = g.call(Query { ino, start, end })?;
    if o.next.is_some() {
        // A range over many stripes of a file of many runs: the rest comes in whole-file pages.
        while let Some(from) = o.next.take() {
            let page: Owners = g.call(QueryFile { ino, from })?;
            for r in page.runs {
                let clipped = r.run.clip(start, end);
                o.runs
                    .extend(clipped.into_iter().map(|run| OwnedRun { run, ..r }));
            }
            o.next = page.next.filter(|n| *n < end);
        }
        o.runs.sort_by_key(|r| r.run.start);
    }
    Ok(o)
}

fn query_file(g: &mut Inner, ino: u64) -> FsResult<Owners> {
    g.stats.queries += 1;
    g.query_gen += 1;
    let mut o = g.call(QueryFile { ino, from: 0 })?;
    rest_of_file(g, ino, &mut o)?;
    Ok(o)
}

/// Completes a whole-file answer that did not fit in one frame, page after page.
fn rest_of_file(g: &mut Inner, ino: u64, o: &mut Owners) -> FsResult<()> {
    while let Some(from) = o.next.take() {
        let page: Owners = g.call(QueryFile { ino, from })?;
        o.runs.extend(page.runs);
        o.next = page.next;
    }
    Ok(())
}
