//! The read service and the burst-buffer accounting of one node.
//!
//! Logs on this node are read through cached [`LogView`]s (the index is parsed once and then
//! only its new tail), for remote readers and for flush. Capacity is accounted in grants:
//! a client reserves space before appending, so a full burst buffer fails the write that
//! would overflow it with ENOSPC while everything already written stays intact.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use tessera_core::{Errno, FsError, FsResult};
use tessera_logstore::LogView;
use tessera_proto::InstanceConfig;

/// Open views of the logs on this node, by (ino, client).
type Views = HashMap<(u64, u64), Arc<Mutex<LogView>>>;

pub struct Logs {
    node: u32,
    cfg: InstanceConfig,
    views: Mutex<Views>,
    capacity: u64,
    used: Mutex<u64>,
}

/// Total size of the regular files below `dir`.
fn du(dir: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => du(&e.path()),
            Ok(_) => e.metadata().map(|m| m.len()).unwrap_or(0),
            Err(_) => 0,
        })
        .sum()
}

impl Logs {
    pub fn new(node: u32, cfg: &InstanceConfig) -> Self {
        let logs_dir = cfg.bb_dir(node).join("logs");
        Logs {
            node,
            cfg: cfg.clone(),
            views: Mutex::new(HashMap::new()),
            capacity: cfg.bb_capacity,
            used: Mutex::new(du(&logs_dir)),
        }
    }

    fn view(&self, ino: u64, client: u64) -> FsResult<Arc<Mutex<LogView>>> {
        if let Some(v) = self.views.lock().expect("views lock").get(&(ino, client)) {
            return Ok(v.clone());
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
        let Ok(files) = std::fs::read_dir(self.cfg.bb_dir(self.node).join("logs")) else {
            return problems;
        };
        for dir in files.flatten() {
            let Ok(logs) = std::fs::read_dir(dir.path()) else {
                continue;
            };
            for e in logs.flatten() {
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
            let missing = v.read(*s, &mut out[at..at + len])?;
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
                if !v.map().covers(s, e) {
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

    /// Deletes every log of `ino` on this node and releases its space.
    pub fn drop_file(&self, ino: u64) -> FsResult<()> {
        self.views
            .lock()
            .expect("views lock")
            .retain(|(i, _), _| *i != ino);
        let dir = self.cfg.log_dir(self.node, ino);
        let bytes = du(&dir);
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(FsError::io(format!("removing logs {}", dir.display()), &e)),
        }
        let mut used = self.used.lock().expect("used lock");
        *used = used.saturating_sub(bytes);
        Ok(())
    }

    /// Grants `bytes` of burst-buffer space, or ENOSPC naming the numbers.
    pub fn reserve(&self, bytes: u64) -> FsResult<u64> {
        let mut used = self.used.lock().expect("used lock");
        let wanted = used
            .checked_add(bytes)
            .filter(|w| *w <= tessera_core::run::MAX_FILE_SIZE);
        let Some(wanted) = wanted else {
            return Err(FsError::new(
                Errno::Inval,
                format!("reservation of {bytes} bytes is out of range"),
            ));
        };
        if self.capacity > 0 && wanted > self.capacity {
            return Err(FsError::new(
                Errno::NoSpace,
                format!(
                    "burst buffer of node {} is full: {} of {} bytes in use, {bytes} more requested; flush and remove files, or start the instance with a larger --bb-capacity",
                    self.node, *used, self.capacity
                ),
            ));
        }
        *used = wanted;
        Ok(bytes)
    }

    pub fn release(&self, bytes: u64) {
        let mut used = self.used.lock().expect("used lock");
        *used = used.saturating_sub(bytes);
    }

    pub fn used(&self) -> u64 {
        *self.used.lock().expect("used lock")
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }
}
