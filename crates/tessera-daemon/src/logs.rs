//! The read service and the burst-buffer accounting of one node.
//!
//! Logs on this node are read through cached [`LogView`]s (the index is parsed once and then
//! only its new tail), for remote readers and for flush. A log is a process's (or a
//! transaction's) for every file it writes on this node: when a file is removed, or a
//! migration moved its bytes away, each log holding it lists it as let go (`N.dead`), and a
//! log whose files are all let go and whose writer is gone is deleted whole.
//!
//! Capacity is accounted from what the logs really hold (their sizes on disk), plus the part
//! of each live client's reservations it has not written yet: a client reserves space in
//! grants before appending, so a full burst buffer fails the write that would overflow it with
//! ENOSPC while everything already written stays intact. A client's reservation goes with its
//! connection, and a client cannot release more than it was granted, so neither a process that
//! dies nor a crafted request moves the count away from the truth.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use tessera_core::{Errno, FsError, FsResult, RangeSet};
use tessera_logstore::LogView;
use tessera_proto::InstanceConfig;

/// Open views of the logs on this node kept at most: 256, or fewer if half the daemon's
/// descriptor limit would not hold them (a view holds three descriptors; the rest are its
/// connections). A view also holds the log's extent map; kept for every writer a node ever
/// had, they made a daemon's memory and descriptors grow with the writers of a job (about
/// 50 KB per strided writer of 1,000 pieces), not with the ones reading or writing now.
fn max_views() -> usize {
    // The limit is raised, if at all, before the daemon serves: asked once.
    static MOST: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *MOST.get_or_init(|| {
        let half = tessera_logstore::library_fds::descriptor_limit() / 2;
        (half / 3).clamp(16, 256) as usize
    })
}

/// Open views of the logs on this node, by log id, least recently used dropped first.
struct Views<V = Arc<Mutex<LogView>>> {
    open: HashMap<u64, (V, u64)>,
    tick: u64,
}

impl<V> Default for Views<V> {
    fn default() -> Self {
        Views {
            open: HashMap::new(),
            tick: 0,
        }
    }
}

impl<V: Clone> Views<V> {
    fn get(&mut self, key: u64) -> Option<V> {
        self.tick += 1;
        let (view, used) = self.open.get_mut(&key)?;
        *used = self.tick;
        Some(view.clone())
    }

    fn insert(&mut self, key: u64, view: V) {
        if self.open.len() >= max_views()
            && let Some(oldest) = self
                .open
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| *k)
        {
            self.open.remove(&oldest);
        }
        self.tick += 1;
        self.open.insert(key, (view, self.tick));
    }

    fn retain(&mut self, keep: impl Fn(&u64) -> bool) {
        self.open.retain(|k, _| keep(k));
    }
}

pub struct Logs {
    node: u32,
    cfg: InstanceConfig,
    /// Buffers of the bytes read for other nodes, reused.
    buffers: std::sync::Arc<crate::buffers::BufferPool>,
    views: Mutex<Views>,
    capacity: u64,
    /// Per live client: bytes granted (less what it released), and bytes of its logs that
    /// were deleted since (written under those grants, gone from the disk).
    granted: Mutex<HashMap<u64, Grant>>,
    /// Per log: the files it lists as let go (as read from its `N.dead`, and added since).
    let_go: Mutex<HashMap<u64, HashSet<u64>>>,
    /// Per log: the data-log positions of the files let go that its index describes (built
    /// at the first release after a start, then grown), from which whole dead blocks are
    /// punched out while the writer goes on.
    dead_at: Mutex<HashMap<u64, RangeSet>>,
}

#[derive(Clone, Copy, Debug, Default)]
struct Grant {
    granted: u64,
    retired: u64,
}

/// What the logs of this node hold on disk, in all and per client.
#[derive(Default)]
struct Usage {
    total: u64,
    per_client: HashMap<u64, u64>,
}

/// The burst buffer's numbers, as reported by status and statfs.
#[derive(Clone, Copy, Debug, Default)]
pub struct Space {
    /// Bytes the logs hold on disk.
    pub used: u64,
    /// Bytes reserved by live clients and not written yet.
    pub reserved: u64,
}

/// The bytes a log file holds: its length, less the blocks punched out of it (its disk
/// blocks, when fewer: a file is not charged for the rounding of its last block).
fn held(m: &std::fs::Metadata) -> u64 {
    m.len().min(std::os::unix::fs::MetadataExt::blocks(m) * 512)
}

/// The client whose log a file is (`<client>.<kind>`).
fn client_of(name: &std::ffi::OsStr) -> Option<u64> {
    name.to_str()?.split('.').next()?.parse().ok()
}

impl Logs {
    pub fn new(node: u32, cfg: &InstanceConfig) -> Self {
        Logs {
            node,
            cfg: cfg.clone(),
            buffers: Default::default(),
            views: Mutex::new(Views::default()),
            capacity: cfg.bb_capacity,
            granted: Mutex::new(HashMap::new()),
            let_go: Mutex::new(HashMap::new()),
            dead_at: Mutex::new(HashMap::new()),
        }
    }

    /// The log files on this node (`logs/<log>.<kind>`).
    fn log_files(&self) -> impl Iterator<Item = std::fs::DirEntry> {
        std::fs::read_dir(self.cfg.logs_dir(self.node))
            .into_iter()
            .flatten()
            .flatten()
    }

    /// The ids of the logs on this node (those with an index log).
    pub fn log_ids(&self) -> Vec<u64> {
        self.log_files()
            .filter(|f| f.path().extension().is_some_and(|x| x == "index"))
            .filter_map(|f| client_of(&f.file_name()))
            .collect()
    }

    /// The sizes of the log files on this node.
    fn usage(&self) -> Usage {
        let mut u = Usage::default();
        for f in self.log_files() {
            // The list of files let go is the daemon's bookkeeping, not data.
            if f.path().extension().is_some_and(|x| x == "dead") {
                continue;
            }
            let len = f.metadata().map_or(0, |m| held(&m));
            u.total += len;
            if let Some(c) = client_of(&f.file_name()) {
                *u.per_client.entry(c).or_default() += len;
            }
        }
        u
    }

    /// Reserved bytes not written yet, over every live client: what it was granted less
    /// what its logs hold and held before they were deleted.
    fn outstanding(granted: &HashMap<u64, Grant>, usage: &Usage) -> u64 {
        granted
            .iter()
            .map(|(c, g)| {
                let written = usage.per_client.get(c).copied().unwrap_or(0) + g.retired;
                g.granted.saturating_sub(written)
            })
            .sum()
    }

    /// What the burst buffer holds and what is reserved.
    pub fn space(&self) -> Space {
        let usage = self.usage();
        let granted = self.granted.lock().expect("granted lock");
        Space {
            used: usage.total,
            reserved: Self::outstanding(&granted, &usage),
        }
    }

    /// The view of log `client`, opened at first use. `reading`: the file a reader wants
    /// from it, named in the error if the log is not there (the reader was sent to it).
    fn view(&self, client: u64, reading: Option<u64>) -> FsResult<Arc<Mutex<LogView>>> {
        if let Some(v) = self.views.lock().expect("views lock").get(client) {
            return Ok(v);
        }
        let (d, i) = self.cfg.log_paths(self.node, client);
        let view = LogView::open(&d, &i).map_err(|e| match reading {
            Some(ino) if e.errno == Errno::NoEnt => FsError::new(
                Errno::Io,
                format!(
                    "node {} holds no log of client {client} for inode {ino:#x}: {}",
                    self.node, e.message
                ),
            ),
            _ => e,
        })?;
        let v = Arc::new(Mutex::new(view));
        self.views
            .lock()
            .expect("views lock")
            .insert(client, v.clone());
        Ok(v)
    }

    /// Checks every index log on this node; returns one line per log whose tail is torn (a
    /// crash mid-append: the torn records are not used) or whose records are corrupt (the log
    /// is refused). Called at startup so that damage is reported, not discovered by a reader.
    pub fn scan(&self) -> Vec<String> {
        let mut problems = Vec::new();
        for e in self.log_files() {
            let index = e.path();
            if index.extension().is_none_or(|x| x != "index") {
                continue;
            }
            match LogView::open(&index.with_extension("data"), &index) {
                Ok(v) => {
                    if let tessera_core::index::Tail::Torn { offset, bytes } = v.tail() {
                        problems.push(format!(
                            "{}: torn tail of {bytes} bytes at offset {offset} (an append cut by a crash, never published; not used)",
                            index.display()
                        ));
                    }
                    for d in v.damage() {
                        problems.push(if d.repaired {
                            format!(
                                "{}: the record at byte {} is damaged; its copy is intact and used",
                                index.display(),
                                d.offset
                            )
                        } else {
                            format!(
                                "{}: both copies of the record at byte {} are damaged: the bytes it described read as EIO",
                                index.display(),
                                d.offset
                            )
                        });
                    }
                }
                Err(err) => problems.push(err.message),
            }
        }
        problems
    }

    /// Reads logical `ranges` of the log (ino, client), concatenated. Bytes the log does not
    /// hold are an error: the ownership map said this log holds them.
    /// The bytes come in a pooled buffer (`crate::buffers`).
    pub fn read(&self, ino: u64, client: u64, ranges: &[(u64, u64)]) -> FsResult<bytes::Bytes> {
        // Validate everything from the wire before allocating or locking anything.
        let limit = self.cfg.max_read_chunk();
        let mut total = 0u64;
        for (s, e) in ranges {
            if s >= e || *e > tessera_core::run::MAX_FILE_SIZE {
                return Err(FsError::new(
                    Errno::Inval,
                    format!("read of empty, inverted or out-of-range [{s},{e})"),
                ));
            }
            total = total.saturating_add(e - s);
            if total > limit {
                return Err(FsError::new(
                    Errno::MsgSize,
                    format!(
                        "read of more than {limit} bytes in one request (the per-request limit)"
                    ),
                ));
            }
        }
        let view = self.view(client, Some(ino))?;
        let mut v = view.lock().expect("view lock");
        v.refresh()?;
        self.buffers.filled(total as usize, |out| {
            let missing = v.read_ranges(ino, ranges, out)?;
            if let Some((ms, me)) = missing.first() {
                let note = v.damage_note().map_or(String::new(), |n| format!("; {n}"));
                return Err(FsError::new(
                    Errno::Io,
                    format!(
                        "log of client {client} on node {} lacks bytes [{ms},{me}) of inode {ino:#x} that it was attached for{note}",
                        self.node
                    ),
                ));
            }
            Ok(())
        })
    }

    /// Checks that the log (ino, client) holds every byte of `runs`, before they are attached:
    /// an attach of bytes the process never wrote would send readers to a log without them.
    pub fn check_holds(&self, ino: u64, client: u64, runs: &[tessera_core::Run]) -> FsResult<()> {
        let never = |s: u64, e: u64, why: &str| {
            FsError::new(
                Errno::Inval,
                format!(
                    "attach of [{s}, {e}) of inode {ino:#x} by client {client}: {why}; a process attaches only bytes it wrote"
                ),
            )
        };
        let view = match self.view(client, Some(ino)) {
            Ok(v) => v,
            Err(_) => {
                let (s, e) = runs.first().map_or((0, 0), |r| (r.start, r.end()));
                return Err(never(
                    s,
                    e,
                    &format!("node {} holds no log of it", self.node),
                ));
            }
        };
        let mut v = view.lock().expect("view lock");
        v.refresh()?;
        for r in runs {
            for (s, e) in r.pieces() {
                if !v.covers(ino, s, e) {
                    return Err(never(s, e, "its log does not hold these bytes"));
                }
            }
        }
        Ok(())
    }

    /// Runs `f` with the (refreshed) view of a log; used by flush.
    pub fn with_view<T>(
        &self,
        ino: u64,
        client: u64,
        f: impl FnOnce(&LogView) -> FsResult<T>,
    ) -> FsResult<T> {
        let view = self.view(client, Some(ino))?;
        let mut v = view.lock().expect("view lock");
        v.refresh()?;
        f(&v)
    }

    /// Lets file `ino` go from the log of `client` (a migration moved every byte it held
    /// there elsewhere); the log is deleted if nothing in it is needed any more and
    /// `in_use` says its writer is gone. Returns the bytes freed.
    pub fn drop_log(
        &self,
        ino: u64,
        client: u64,
        in_use: impl Fn(u64, bool) -> bool,
    ) -> FsResult<u64> {
        self.let_go(client, &[ino])?;
        self.delete_if_done(client, &in_use)
    }

    /// Lets removed files `inos` go from every log on this node that holds bytes of one of
    /// them, or whose writer said it writes one (`announced`: the logs of the processes that
    /// said so, which may not have made their writes readable yet). A log whose files are all
    /// let go and whose writer is gone (`in_use` says no) is deleted: its space is free at
    /// once (usage is what the logs hold).
    pub fn drop_files(
        &self,
        inos: &[u64],
        announced: impl Fn(u64) -> Vec<u64>,
        in_use: impl Fn(u64, bool) -> bool,
    ) -> FsResult<()> {
        let mut hits: HashMap<u64, Vec<u64>> = HashMap::new();
        for &ino in inos {
            for log in announced(ino) {
                hits.entry(log).or_default().push(ino);
            }
        }
        for log in self.log_ids() {
            let Ok(view) = self.view(log, None) else {
                continue; // deleted meanwhile
            };
            let mut v = view.lock().expect("view lock");
            if let Err(e) = v.refresh() {
                // One unreadable log must not hold every removal back: it keeps its bytes.
                tracing::warn!(log, "not looking in a log for removed files: {e}");
                continue;
            }
            let held = inos.iter().filter(|i| v.positions_of(**i).is_some());
            hits.entry(log).or_default().extend(held);
        }
        for (log, mut inos) in hits {
            inos.sort_unstable();
            inos.dedup();
            self.let_go(log, &inos)?;
            if let Err(e) = self.delete_if_done(log, &in_use) {
                tracing::warn!(log, "keeping a log whose files all went: {e}");
            }
        }
        Ok(())
    }

    /// Deletes the log `log` if its writer is gone (`in_use`, asked with the log id and
    /// whether it is a transaction's log, says no) and it holds nothing needed: every file it
    /// has bytes of was let go. Returns the bytes freed.
    pub fn delete_if_done(&self, log: u64, in_use: &impl Fn(u64, bool) -> bool) -> FsResult<u64> {
        let (d, i) = self.cfg.log_paths(self.node, log);
        if !i.exists() {
            return Ok(0);
        }
        let view = self.view(log, None)?;
        let needed = {
            let mut v = view.lock().expect("view lock");
            v.refresh()?;
            if in_use(log, v.header().is_some_and(|h| h.txn)) {
                return Ok(0);
            }
            let gone = self.let_go_of(log)?;
            // A log read before its header was written, or whose data no record describes,
            // is kept: nothing says its bytes are not needed. One with no data holds nothing,
            // header or not (its writer may have died between creating it and its first
            // write).
            let empty = d.metadata().is_ok_and(|m| m.len() == 0);
            let described = v.written_files().next().is_some() || empty;
            (!v.has_header() && !empty)
                || !described
                || v.written_files().any(|ino| !gone.contains(&ino))
        };
        if needed {
            return Ok(0);
        }
        self.views.lock().expect("views lock").retain(|k| *k != log);
        self.let_go.lock().expect("let go").remove(&log);
        self.dead_at.lock().expect("dead at").remove(&log);
        let mut freed = 0;
        // The journal first: a crash part way must not leave a journal whose writes a
        // restarted daemon would publish from a log that is gone.
        let journal = tessera_logstore::journal_path(&d);
        let sums = tessera_logstore::sums_path(&d);
        let dead = tessera_logstore::dead_path(&d);
        for (p, counted) in [
            (journal, true),
            (d, true),
            (i, true),
            (sums, true),
            (dead, false),
        ] {
            // The list of files let go is not counted in the usage: nor in what is freed.
            let len = std::fs::metadata(&p).map_or(0, |m| if counted { held(&m) } else { 0 });
            match std::fs::remove_file(&p) {
                Ok(()) => freed += len,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(FsError::io(format!("removing log {}", p.display()), &e)),
            }
        }
        if let Some(g) = self.granted.lock().expect("granted lock").get_mut(&log) {
            g.retired += freed;
        }
        tracing::debug!(log, freed, "deleted a log whose files are all gone");
        Ok(freed)
    }

    /// The files `log` lists as let go, read from its `N.dead` at first use.
    fn let_go_of(&self, log: u64) -> FsResult<HashSet<u64>> {
        let mut all = self.let_go.lock().expect("let go");
        Ok(Self::listed(&mut all, &self.cfg, self.node, log)?.clone())
    }

    /// The entry of `log` in the let-go lists, read from its file if not yet.
    fn listed<'a>(
        all: &'a mut HashMap<u64, HashSet<u64>>,
        cfg: &InstanceConfig,
        node: u32,
        log: u64,
    ) -> FsResult<&'a mut HashSet<u64>> {
        match all.entry(log) {
            std::collections::hash_map::Entry::Occupied(o) => Ok(o.into_mut()),
            std::collections::hash_map::Entry::Vacant(v) => {
                let (d, _) = cfg.log_paths(node, log);
                Ok(v.insert(tessera_logstore::read_dead(&d)?))
            }
        }
    }

    /// Lists `inos` as let go in `log`, durably, and forgets their bytes in its view. The
    /// lists' lock is held throughout: two releases of the same log must not both append at
    /// its list's end.
    fn let_go(&self, log: u64, inos: &[u64]) -> FsResult<()> {
        let (d, _) = self.cfg.log_paths(self.node, log);
        {
            let mut all = self.let_go.lock().expect("let go");
            if !d.exists() {
                return Ok(());
            }
            let known = Self::listed(&mut all, &self.cfg, self.node, log)?;
            let new: Vec<u64> = inos
                .iter()
                .copied()
                .filter(|i| !known.contains(i))
                .collect();
            tessera_logstore::append_dead(&d, &new)?;
            known.extend(new);
        }
        let Ok(view) = self.view(log, None) else {
            return Ok(()); // deleted meanwhile
        };
        let blocks = {
            let mut v = view.lock().expect("view lock");
            v.refresh()?;
            let mut fresh = RangeSet::new();
            for ino in inos {
                v.forget(*ino);
                if let Some(p) = v.positions_of(*ino) {
                    fresh.union_with(p.clone());
                }
            }
            let mut dead_at = self.dead_at.lock().expect("dead at");
            let dead = match dead_at.entry(log) {
                std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => {
                    // Every file let go before, as far as the index describes it.
                    let mut all = RangeSet::new();
                    for ino in self.let_go_of(log)? {
                        if let Some(p) = v.positions_of(ino) {
                            all.union_with(p.clone());
                        }
                    }
                    fresh = all.clone();
                    e.insert(all)
                }
            };
            dead.union_with(fresh.clone());
            tessera_logstore::reclaim::whole_dead_blocks(dead, &fresh)
        };
        let freed = tessera_logstore::reclaim::punch(&d, &blocks)?;
        if freed > 0 {
            if let Some(g) = self.granted.lock().expect("granted lock").get_mut(&log) {
                g.retired += freed;
            }
            tracing::debug!(log, freed, "gave back the dead blocks of a log");
        }
        Ok(())
    }

    /// Grants `client` `bytes` of burst-buffer space, or ENOSPC naming the numbers.
    pub fn reserve(&self, client: u64, bytes: u64) -> FsResult<u64> {
        if bytes > tessera_core::run::MAX_FILE_SIZE {
            return Err(FsError::new(
                Errno::Inval,
                format!("reservation of {bytes} bytes is out of range"),
            ));
        }
        let usage = self.usage();
        let mut granted = self.granted.lock().expect("granted lock");
        let reserved = Self::outstanding(&granted, &usage);
        if self.capacity > 0 && usage.total + reserved + bytes > self.capacity {
            return Err(FsError::new(
                Errno::NoSpace,
                format!(
                    "burst buffer of node {} is full: its logs hold {} bytes and {reserved} more are reserved, of {}; {bytes} more requested; flush and remove files, or start the instance with a larger --bb-capacity",
                    self.node, usage.total, self.capacity
                ),
            ));
        }
        granted.entry(client).or_default().granted += bytes;
        Ok(bytes)
    }

    /// Takes back `bytes` of what `client` was granted; more than it was granted is refused.
    pub fn release(&self, client: u64, bytes: u64) -> FsResult<()> {
        let mut granted = self.granted.lock().expect("granted lock");
        let g = granted.entry(client).or_default();
        if bytes > g.granted {
            return Err(FsError::new(
                Errno::Inval,
                format!(
                    "release of {bytes} bytes by client {client}, which holds {} bytes granted",
                    g.granted
                ),
            ));
        }
        g.granted -= bytes;
        Ok(())
    }

    /// Forgets a client's reservations (its connection ended; what it wrote stays counted).
    /// Forgets a client whose connection ended: its grant, and the views of its logs (a
    /// reader opens them again if it needs them).
    pub fn client_gone(&self, client: u64) {
        self.granted.lock().expect("granted lock").remove(&client);
        self.views
            .lock()
            .expect("views lock")
            .retain(|c| *c != client);
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_without_data_or_header_goes_once_its_writer_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = InstanceConfig::new(1, dir.path().join("pfs"), dir.path().join("bb"));
        std::fs::create_dir_all(cfg.logs_dir(0)).unwrap();
        let (d, i) = cfg.log_paths(0, 7);
        // What a writer killed between creating its log and writing to it leaves.
        std::fs::write(&d, b"").unwrap();
        std::fs::write(&i, b"").unwrap();
        std::fs::write(tessera_logstore::journal_path(&d), b"").unwrap();
        let sums = tessera_core::sums::encode_header(tessera_core::sums::BLOCK_LOG2);
        std::fs::write(tessera_logstore::sums_path(&d), sums).unwrap();
        let logs = Logs::new(0, &cfg);
        assert_eq!(
            logs.delete_if_done(7, &|_, _| true).unwrap(),
            0,
            "writer alive"
        );
        assert!(d.exists());
        logs.delete_if_done(7, &|_, _| false).unwrap();
        assert!(!d.exists() && !i.exists(), "an empty log was kept");
        assert_eq!(std::fs::read_dir(cfg.logs_dir(0)).unwrap().count(), 0);
    }

    #[test]
    fn views_keep_the_most_recently_used() {
        let mut v: Views<u64> = Views::default();
        let most = max_views();
        for c in 0..most as u64 {
            v.insert(c, c);
        }
        assert_eq!(v.get(0), Some(0)); // used again: now the newest
        v.insert(1000, 1000);
        assert_eq!(v.open.len(), most);
        assert_eq!(v.get(1), None, "the least recently used view stays open");
        assert_eq!(v.get(0), Some(0));
        v.retain(|c| *c != 0);
        assert_eq!(v.get(0), None);
    }
}
