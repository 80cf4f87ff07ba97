//! The read service and the burst-buffer accounting of one node.
//!
//! Logs on this node are read through cached [`LogView`]s (the index is parsed once and then
//! only its new tail), for remote readers and for flush.
//!
//! Capacity is accounted from what the logs really hold (their sizes on disk), plus the part
//! of each live client's reservations it has not written yet: a client reserves space in
//! grants before appending, so a full burst buffer fails the write that would overflow it with
//! ENOSPC while everything already written stays intact. A client's reservation goes with its
//! connection, and a client cannot release more than it was granted, so neither a process that
//! dies nor a crafted request moves the count away from the truth.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tessera_core::{Errno, FsError, FsResult};
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

/// Open views of the logs on this node, by (ino, client), least recently used dropped first.
struct Views<V = Arc<Mutex<LogView>>> {
    open: HashMap<(u64, u64), (V, u64)>,
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
    fn get(&mut self, key: (u64, u64)) -> Option<V> {
        self.tick += 1;
        let (view, used) = self.open.get_mut(&key)?;
        *used = self.tick;
        Some(view.clone())
    }

    fn insert(&mut self, key: (u64, u64), view: V) {
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

    fn retain(&mut self, keep: impl Fn(&(u64, u64)) -> bool) {
        self.open.retain(|k, _| keep(k));
    }
}

pub struct Logs {
    node: u32,
    cfg: InstanceConfig,
    views: Mutex<Views>,
    capacity: u64,
    /// Per live client: bytes granted (less what it released), and bytes of its logs that
    /// were deleted since (written under those grants, gone from the disk).
    granted: Mutex<HashMap<u64, Grant>>,
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

/// The client whose log a file is (`<client>.<kind>`).
fn client_of(name: &std::ffi::OsStr) -> Option<u64> {
    name.to_str()?.split('.').next()?.parse().ok()
}

impl Logs {
    pub fn new(node: u32, cfg: &InstanceConfig) -> Self {
        Logs {
            node,
            cfg: cfg.clone(),
            views: Mutex::new(Views::default()),
            capacity: cfg.bb_capacity,
            granted: Mutex::new(HashMap::new()),
        }
    }

    /// The log files on this node (`logs/<ino>/<client>.<kind>`); directories that vanish
    /// or cannot be read while this walks are passed over.
    fn log_files(&self) -> impl Iterator<Item = std::fs::DirEntry> {
        std::fs::read_dir(self.cfg.bb_dir(self.node).join("logs"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|ino_dir| std::fs::read_dir(ino_dir.path()).ok())
            .flatten()
            .flatten()
    }

    /// The sizes of the log files on this node.
    fn usage(&self) -> Usage {
        let mut u = Usage::default();
        for f in self.log_files() {
            let len = f.metadata().map_or(0, |m| m.len());
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

    fn view(&self, ino: u64, client: u64) -> FsResult<Arc<Mutex<LogView>>> {
        if let Some(v) = self.views.lock().expect("views lock").get((ino, client)) {
            return Ok(v);
        }
        let (d, i) = self.cfg.log_paths(self.node, ino, client);
        let view = LogView::open(&d, &i).map_err(|e| {
            if e.errno == Errno::NoEnt {
                FsError::new(
                    Errno::Io,
                    format!(
                        "node {} holds no log of client {client} for inode {ino:#x}: {}",
                        self.node, e.message
                    ),
                )
            } else {
                e
            }
        })?;
        let v = Arc::new(Mutex::new(view));
        self.views
            .lock()
            .expect("views lock")
            .insert((ino, client), v.clone());
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
    pub fn read(&self, ino: u64, client: u64, ranges: &[(u64, u64)]) -> FsResult<Vec<u8>> {
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
        let view = self.view(ino, client)?;
        let mut v = view.lock().expect("view lock");
        v.refresh()?;
        let mut out = vec![0u8; total as usize];
        let mut at = 0usize;
        for (s, e) in ranges {
            let len = (e - s) as usize;
            let missing = v.read(ino, *s, &mut out[at..at + len])?;
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
            at += len;
        }
        Ok(out)
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
        let view = match self.view(ino, client) {
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
        let view = self.view(ino, client)?;
        let mut v = view.lock().expect("view lock");
        v.refresh()?;
        f(&v)
    }

    /// Deletes the logs of `ino` written by `client` (a migration moved every byte they held
    /// elsewhere); returns the bytes freed.
    pub fn drop_log(&self, ino: u64, client: u64) -> FsResult<u64> {
        self.views
            .lock()
            .expect("views lock")
            .retain(|k| *k != (ino, client));
        let mut freed = 0;
        let (d, i) = self.cfg.log_paths(self.node, ino, client);
        // The journal first: a crash part way must not leave a journal whose writes a
        // restarted daemon would publish from a log that is gone.
        let journal = tessera_logstore::journal_path(&d);
        let sums = tessera_logstore::sums_path(&d);
        for p in [journal, d, i, sums] {
            let len = std::fs::metadata(&p).map_or(0, |m| m.len());
            match std::fs::remove_file(&p) {
                Ok(()) => freed += len,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(FsError::io(format!("removing log {}", p.display()), &e)),
            }
        }
        if let Some(g) = self.granted.lock().expect("granted lock").get_mut(&client) {
            g.retired += freed;
        }
        Ok(freed)
    }

    /// Deletes every log of `ino` on this node (its space is free at once: usage is what the
    /// logs hold).
    pub fn drop_file(&self, ino: u64) -> FsResult<()> {
        self.views
            .lock()
            .expect("views lock")
            .retain(|(i, _)| *i != ino);
        let dir = self.cfg.log_dir(self.node, ino);
        // Bytes written under live clients' grants leave the disk: remember they were written.
        if let Ok(files) = std::fs::read_dir(&dir) {
            let mut granted = self.granted.lock().expect("granted lock");
            for f in files.flatten() {
                if let Some(g) = client_of(&f.file_name()).and_then(|c| granted.get_mut(&c)) {
                    g.retired += f.metadata().map_or(0, |m| m.len());
                }
            }
        }
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(FsError::io(format!("removing logs {}", dir.display()), &e)),
        }
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
            .retain(|(_, c)| *c != client);
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_keep_the_most_recently_used() {
        let mut v: Views<u64> = Views::default();
        let most = max_views();
        for c in 0..most as u64 {
            v.insert((1, c), c);
        }
        assert_eq!(v.get((1, 0)), Some(0)); // used again: now the newest
        v.insert((1, 1000), 1000);
        assert_eq!(v.open.len(), most);
        assert_eq!(
            v.get((1, 1)),
            None,
            "the least recently used view stays open"
        );
        assert_eq!(v.get((1, 0)), Some(0));
        v.retain(|(_, c)| *c != 0);
        assert_eq!(v.get((1, 0)), None);
    }
}
