//! Opening a node's state files, replaying the state log into the database, and salvaging a
//! damaged log.
//!
//! Both files are the user's own on a device others may share (`tessera_logstore::private`):
//! created `O_EXCL | O_NOFOLLOW` with mode 0600, reopened `O_NOFOLLOW` and checked to be
//! regular files owned by the user. The log's framing is `tessera_core::wal`. At start a torn
//! tail (a write cut by a crash, never acknowledged) is dropped and reported; damage followed
//! by intact records stops the daemon with the file, the offset and the way out
//! (`tessera salvage`), and the log is left exactly as it is.

use super::DbOp;
use redb::Database;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use tessera_core::wal::{self, Damage, Scan};
use tessera_core::{Errno, FsError, FsResult};
use tessera_logstore::private;

/// The state files of one node, opened.
pub struct StateFiles {
    pub db: Database,
    pub wal: File,
    pub wal_path: PathBuf,
    /// The log's bytes as found.
    pub logged: Vec<u8>,
}

/// Opens (creating if needed) `meta.redb` and `meta.wal` in `dir`.
pub fn open(dir: &Path) -> FsResult<StateFiles> {
    let db_path = dir.join("meta.redb");
    let wal_path = dir.join("meta.wal");
    // The daemon's own files: no program places descriptors in a daemon.
    let db_file = private::create_or_open(&db_path)?.0.into_inner();
    let db = redb::backends::FileBackend::new(db_file)
        .and_then(|backend| redb::Builder::new().create_with_backend(backend))
        .map_err(|e| {
            let hint = if e.to_string().contains("already open") {
                " (is another daemon for this node running?)"
            } else {
                ""
            };
            FsError::new(
                Errno::Io,
                format!("opening state database {}: {e}{hint}", db_path.display()),
            )
        })?;
    let mut wal = private::create_or_open(&wal_path)?.0.into_inner();
    let mut logged = Vec::new();
    wal.read_to_end(&mut logged)
        .map_err(|e| FsError::io(format!("reading {}", wal_path.display()), &e))?;
    if logged.len() < wal::HEADER_LEN {
        // New, or its creation was cut short: nothing was ever logged in it.
        wal.set_len(0)
            .and_then(|_| wal.write_all_at(&wal::header(), 0))
            .map_err(|e| {
                FsError::io(format!("writing the header of {}", wal_path.display()), &e)
            })?;
        logged.clear();
    }
    Ok(StateFiles {
        db,
        wal,
        wal_path,
        logged,
    })
}

/// The intact records' operations, in log order; `None` for a record whose payload does not
/// decode (written by another build).
pub fn decode(bytes: &[u8], scan: &Scan) -> Vec<(usize, Option<Vec<DbOp>>)> {
    scan.records
        .iter()
        .map(|(at, r)| {
            (
                *at,
                postcard::from_bytes::<Vec<DbOp>>(&bytes[r.clone()]).ok(),
            )
        })
        .collect()
}

fn header_error(path: &Path, e: wal::HeaderError) -> FsError {
    FsError::new(
        Errno::Io,
        format!(
            "{}: {e}; it is kept as it is (move it away to start this node with the database alone)",
            path.display()
        ),
    )
}

/// The operations to replay at start; refuses a log damaged in the middle. Also returns what
/// to report (a torn tail).
pub fn replay(files: &StateFiles, node: u32) -> FsResult<(Vec<DbOp>, Vec<String>)> {
    let path = &files.wal_path;
    let scan = wal::scan(&files.logged).map_err(|e| header_error(path, e))?;
    let decoded = decode(&files.logged, &scan);
    let undecodable: Vec<usize> = decoded
        .iter()
        .filter(|(_, ops)| ops.is_none())
        .map(|(at, _)| *at)
        .collect();
    if let Some(first) = scan.damage.first() {
        let more = match scan.damage.len() {
            1 => String::new(),
            n => format!(" and {} more damaged stretches", n - 1),
        };
        return Err(FsError::new(
            Errno::Io,
            format!(
                "state log {} is damaged at byte {} ({} bytes{more}); {} intact records after it hold changes that were acknowledged, so this daemon will not start and drop them. The log is kept as it is: run `tessera salvage --node {node}` to keep every intact record (it reports what it drops and saves a copy of the damaged log), then start the node again",
                path.display(),
                first.start,
                first.end - first.start,
                scan.records_after_damage()
            ),
        ));
    }
    if let Some(at) = undecodable.first() {
        return Err(FsError::new(
            Errno::Io,
            format!(
                "state log {}: the record at byte {at} is intact but does not decode (written by another version of Tessera?); run `tessera salvage --node {node}` to drop it",
                path.display()
            ),
        ));
    }
    let mut problems = Vec::new();
    if let Some(t) = scan.torn {
        problems.push(format!(
            "state log {}: torn tail of {} bytes at byte {} dropped (a write cut by a crash; its changes were never acknowledged)",
            path.display(),
            t.end - t.start,
            t.start
        ));
    }
    let ops = decoded
        .into_iter()
        .flat_map(|(_, ops)| ops.unwrap_or_default())
        .collect();
    Ok((ops, problems))
}

/// Empties the log once its operations are durable in the database (its header stays).
pub fn empty(files: &StateFiles) -> FsResult<()> {
    files
        .wal
        .set_len(wal::HEADER_LEN as u64)
        .map_err(|e| FsError::io(format!("emptying {}", files.wal_path.display()), &e))
}

/// What `tessera salvage` did.
#[derive(Debug, Default)]
pub struct SalvageReport {
    pub log: PathBuf,
    pub kept_records: usize,
    pub kept_changes: usize,
    /// Damaged stretches dropped, and intact records that did not decode.
    pub dropped: Vec<Damage>,
    pub torn: Option<Damage>,
    /// Where the damaged log was saved.
    pub saved: Option<PathBuf>,
}

impl std::fmt::Display for SalvageReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.dropped.is_empty() && self.torn.is_none() {
            return write!(
                f,
                "{}: intact; {} records ({} changes) applied, nothing dropped",
                self.log.display(),
                self.kept_records,
                self.kept_changes
            );
        }
        writeln!(
            f,
            "{}: kept {} intact records ({} changes)",
            self.log.display(),
            self.kept_records,
            self.kept_changes
        )?;
        for d in &self.dropped {
            writeln!(
                f,
                "  dropped damaged bytes [{}, {}) ({} bytes): the changes they held are lost",
                d.start,
                d.end,
                d.end - d.start
            )?;
        }
        if let Some(t) = self.torn {
            writeln!(
                f,
                "  dropped a torn tail [{}, {}) (never acknowledged)",
                t.start, t.end
            )?;
        }
        if let Some(s) = &self.saved {
            write!(f, "  the damaged log was saved as {}", s.display())?;
        }
        Ok(())
    }
}

/// Keeps every intact record of a damaged state log: saves a copy of the log, applies the
/// intact records to the database in order, drops the rest, and empties the log. The node's
/// daemon must be stopped (the database refuses a second opener).
pub fn salvage(dir: &Path) -> FsResult<SalvageReport> {
    let files = open(dir)?;
    let scan = wal::scan(&files.logged).map_err(|e| header_error(&files.wal_path, e))?;
    let mut report = SalvageReport {
        log: files.wal_path.clone(),
        torn: scan.torn,
        dropped: scan.damage.clone(),
        ..Default::default()
    };
    if !scan.damage.is_empty() || scan.torn.is_some() {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let saved = dir.join(format!("meta.wal.damaged-{secs}"));
        let copy = private::create_or_open(&saved)?.0.into_inner();
        copy.set_len(0)
            .and_then(|_| copy.write_all_at(&files.logged, 0))
            .and_then(|_| copy.sync_all())
            .map_err(|e| FsError::io(format!("saving {}", saved.display()), &e))?;
        report.saved = Some(saved);
    }
    let mut ops = Vec::new();
    for (at, decoded) in decode(&files.logged, &scan) {
        match decoded {
            Some(o) => {
                report.kept_records += 1;
                report.kept_changes += o.len();
                ops.extend(o);
            }
            None => {
                let len = scan
                    .records
                    .iter()
                    .find(|(a, _)| *a == at)
                    .map_or(0, |(_, r)| r.end - at);
                report.dropped.push(Damage {
                    start: at,
                    end: at + len,
                });
            }
        }
    }
    super::apply(&files.db, ops.iter())?;
    empty(&files)?;
    Ok(report)
}
