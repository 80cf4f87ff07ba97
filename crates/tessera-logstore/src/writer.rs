//! Appending one process's writes (of one or many files) to its logs: data log, block
//! checksums, journal, index log.
//!
//! Every write is recorded at once in the journal (one `tessera_core::index::IndexBuilder`
//! per file: a file's open run's pair is rewritten in place as it grows), so a process killed
//! at any moment loses no write that returned: its daemon publishes what the journal holds.
//! Readers use the index log, which receives a file's new journal records at that file's
//! sync points ([`LogWriter::sync_index`], before an attach): a reader of an attached range
//! must see the bytes as attached, not a newer write the process has not published, of that
//! file or of another. Both files have the same format and hold the same records; the index
//! holds them in the order the files were synced, each file's in its write order. Block
//! checksums are written at sync points and before the process reads its own log, so every
//! byte a reader is sent to is covered; what a process left without checksums when it died
//! is sealed by its daemon ([`seal_logs`]).

use crate::library_fds::HeldFile;
use crate::{journal_path, len_of, private, sums_path};
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use tessera_core::index::{self, Append, Entry, IndexBuilder, IndexHeader, ParsedRecords};
use tessera_core::sums::{self, Slot, SumsBuilder};
use tessera_core::{Errno, FsError, FsResult};

/// One file's records in a log: its builder, and what the index has not received yet.
#[derive(Debug, Clone)]
struct FileRecords {
    builder: IndexBuilder,
    /// Where the open run's pair sits in the journal (rewritten as the run grows).
    open_at: Option<u64>,
    /// The file's pairs written to the journal since its last sync, the open run's last.
    unsynced: Vec<u8>,
    /// Bytes of the file this writer appended to the data log, and of its pairs it gave
    /// the index (the file's share of the log).
    data_bytes: u64,
    index_bytes: u64,
}

impl FileRecords {
    fn new(ino: u64) -> Self {
        FileRecords {
            builder: IndexBuilder::new(ino),
            open_at: None,
            unsynced: Vec::new(),
            data_bytes: 0,
            index_bytes: 0,
        }
    }
}

/// Appends one process's writes.
#[derive(Debug)]
pub struct LogWriter {
    data: HeldFile,
    index: HeldFile,
    journal: HeldFile,
    sums_file: HeldFile,
    data_path: PathBuf,
    index_path: PathBuf,
    journal_path: PathBuf,
    sums_path: PathBuf,
    data_len: u64,
    index_len: u64,
    journal_len: u64,
    files: HashMap<u64, FileRecords>,
    /// The files with something the index has not received (records, or a published
    /// marker): the only ones [`LogWriter::sync_all`] visits, so that a durable sync costs
    /// what changed, not every file the process ever wrote.
    changed: std::collections::BTreeSet<u64>,
    sums: SumsBuilder,
    /// Reads of the process's own log, checked like everyone else's.
    checked: crate::checked::CheckedData,
}

impl LogWriter {
    /// Descriptors a writer holds open: its four files, and the data and sums again for
    /// checked reads of its own log.
    pub const DESCRIPTORS: u64 = 6;

    /// Creates the logs, or continues existing ones (a process that reconnected keeps its id).
    /// The directory of the logs is made private; the directories above it are the node's
    /// daemon's, which made them private when it started.
    pub fn open(data_path: &Path, index_path: &Path, header: IndexHeader) -> FsResult<Self> {
        Self::open_with(data_path, index_path, header, false)
    }

    /// As [`LogWriter::open`], keeping the journal's whole records that the index lacks: the
    /// logs of a process whose daemon writes them for it, taken up again after the daemon
    /// restarted while the process went on (those records are its unpublished writes, which
    /// its next sync makes readable and its next attach publishes).
    pub fn resume(data_path: &Path, index_path: &Path, header: IndexHeader) -> FsResult<Self> {
        Self::open_with(data_path, index_path, header, true)
    }

    fn open_with(
        data_path: &Path,
        index_path: &Path,
        header: IndexHeader,
        keep_journal: bool,
    ) -> FsResult<Self> {
        if let Some(dir) = data_path.parent() {
            private::private_dir(dir)?;
        }
        let sums_path = sums_path(data_path);
        let journal_path = journal_path(data_path);
        let data = private::create_or_open(data_path)?.0;
        let index = private::create_or_open(index_path)?.0;
        let journal = private::create_or_open(&journal_path)?.0;
        let sums_file = private::create_or_open(&sums_path)?.0;
        let index_len = prepare_index(&index.get(), index_path, header)?;
        let mut files = HashMap::new();
        let mut changed = std::collections::BTreeSet::new();
        let journal_len = if keep_journal {
            let indexed = read_body(&index.get(), index_path, index_len)?;
            let journal_len = len_of(&journal.get(), &journal_path)?;
            let journaled = read_body(&journal.get(), &journal_path, journal_len)?;
            if journal_len < index::HEADER_SIZE as u64 {
                // A journal that never got its header: the index is all there is.
                copy_range(
                    &index.get(),
                    index_path,
                    &journal.get(),
                    &journal_path,
                    0,
                    index::HEADER_SIZE as u64,
                )?;
            }
            for t in index::unsynced(&journaled, &indexed) {
                changed.insert(t.ino);
                files
                    .entry(t.ino)
                    .or_insert_with(|| FileRecords::new(t.ino))
                    .unsynced
                    .extend_from_slice(&index::encode_pair(t.ino, &t.entry));
            }
            // Whole pairs only: a torn last one (a crash in the middle of an append) goes.
            (index::HEADER_SIZE + journaled.consumed) as u64
        } else {
            // The journal continues from the index: records a process left unsynced before
            // it reopened its logs are not its dirty writes any more.
            copy_range(
                &index.get(),
                index_path,
                &journal.get(),
                &journal_path,
                0,
                index_len,
            )?;
            index_len
        };
        journal
            .get()
            .set_len(journal_len)
            .map_err(|e| FsError::io(format!("cutting {}", journal_path.display()), &e))?;
        let data_len = len_of(&data.get(), data_path)?;
        let sums = seal(
            &data.get(),
            data_path,
            &sums_file.get(),
            &sums_path,
            data_len,
        )?;
        let checked = crate::checked::CheckedData::new(
            data.try_clone()?,
            data_path,
            sums_file.try_clone()?,
            &sums_path,
        )?;
        Ok(LogWriter {
            data,
            index,
            journal,
            sums_file,
            data_path: data_path.to_path_buf(),
            index_path: index_path.to_path_buf(),
            journal_path,
            sums_path,
            data_len,
            index_len,
            journal_len,
            files,
            changed,
            sums,
            checked,
        })
    }

    /// File `ino`'s records, noted as changed since its last sync.
    fn file(&mut self, ino: u64) -> &mut FileRecords {
        self.changed.insert(ino);
        self.files
            .entry(ino)
            .or_insert_with(|| FileRecords::new(ino))
    }

    /// Appends `buf`, the bytes of logical offset `logical` of file `ino`, and records them
    /// in the journal; returns their position in the data log. On failure (e.g. ENOSPC)
    /// nothing is recorded, the data log is cut back and earlier data is untouched.
    pub fn append(&mut self, ino: u64, logical: u64, buf: &[u8]) -> FsResult<u64> {
        let pos = self.data_len;
        let failed = |this: &Self, what: &Path, e: std::io::Error| {
            // Drop whatever part made it, so the log ends where the journal says it does.
            let _ = this.data.get().set_len(pos);
            FsError::io(
                format!("appending {} bytes to {}", buf.len(), what.display()),
                &e,
            )
        };
        if let Err(e) = self.data.get().write_all_at(buf, pos) {
            return Err(failed(self, &self.data_path, e));
        }
        // The file's records change only once the journal has the record.
        let journal_len = self.journal_len;
        let f = self
            .files
            .entry(ino)
            .or_insert_with(|| FileRecords::new(ino));
        let before = f.clone();
        let journal = self.journal.get();
        let recorded = match f.builder.push(logical, buf.len() as u64, pos) {
            Some(Append::Rewrite(pair)) => match f.open_at {
                Some(at) => journal.write_all_at(&pair, at).map(|()| {
                    let n = f.unsynced.len();
                    f.unsynced[n - index::PAIR_SIZE..].copy_from_slice(&pair);
                    0
                }),
                None => Err(std::io::Error::other("no open run in the journal")),
            },
            Some(Append::New(bytes)) => journal.write_all_at(&bytes, journal_len).map(|()| {
                f.unsynced.extend_from_slice(&bytes);
                f.open_at = Some(journal_len + (bytes.len() - index::PAIR_SIZE) as u64);
                bytes.len() as u64
            }),
            None => Ok(0),
        };
        drop(journal);
        match recorded {
            Ok(appended) => self.journal_len += appended,
            Err(e) => {
                // A pair that was being rewritten goes back to what it said (best effort:
                // if it fails too, the pair's other copy or the next write mends it).
                if let (Some(at), Some(open)) = (before.open_at, before.builder.open_record()) {
                    let _ = self
                        .journal
                        .get()
                        .write_all_at(&index::encode_pair(ino, &Entry::Write(open)), at);
                }
                *self.file(ino) = before;
                return Err(failed(self, &self.journal_path, e));
            }
        }
        self.data_len += buf.len() as u64;
        self.file(ino).data_bytes += buf.len() as u64;
        self.sums.push(buf);
        Ok(pos)
    }

    /// Appends marker pairs of file `ino` to the journal (they closed its open run).
    fn append_journal(&mut self, ino: u64, bytes: &[u8]) -> FsResult<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        self.journal
            .get()
            .write_all_at(bytes, self.journal_len)
            .map_err(|e| FsError::io(format!("writing {}", self.journal_path.display()), &e))?;
        self.journal_len += bytes.len() as u64;
        let f = self.file(ino);
        f.unsynced.extend_from_slice(bytes);
        f.open_at = None;
        Ok(())
    }

    /// Makes every write of file `ino` so far readable by others: writes the checksums of
    /// what was appended, then gives the index log the file's new journal records (its open
    /// run is closed first: a pair in the index is never rewritten). Called before an
    /// attach. The other files' records stay unsynced.
    pub fn sync_index(&mut self, ino: u64) -> FsResult<()> {
        self.write_sums()?;
        let pending = self.file(ino).builder.flush_published();
        self.append_journal(ino, &pending)?;
        let f = self.file(ino);
        f.builder.close();
        f.open_at = None;
        if f.unsynced.is_empty() {
            self.changed.remove(&ino);
            return Ok(());
        }
        let bytes = std::mem::take(&mut f.unsynced);
        let written = self.index.get().write_all_at(&bytes, self.index_len);
        if let Err(e) = written {
            self.file(ino).unsynced = bytes;
            return Err(FsError::io(
                format!("writing {}", self.index_path.display()),
                &e,
            ));
        }
        self.index_len += bytes.len() as u64;
        self.file(ino).index_bytes += bytes.len() as u64;
        self.changed.remove(&ino);
        Ok(())
    }

    /// [`LogWriter::sync_index`] of every file of the log with something to sync.
    pub fn sync_all(&mut self) -> FsResult<()> {
        let inos: Vec<u64> = self.changed.iter().copied().collect();
        for ino in inos {
            self.sync_index(ino)?;
        }
        self.write_sums()
    }

    /// Records that every write of file `ino` so far is published (attached); written to
    /// the journal with the file's next new record. (The daemon learns it from the attach
    /// itself, so a process that dies before the marker is written is not published twice.)
    pub fn published(&mut self, ino: u64) {
        let at = self.data_len;
        self.file(ino).builder.mark_published(at);
    }

    /// Records, in the journal at once, that a range of file `ino` was published or that the
    /// process truncated it (`at` is filled in): what a daemon publishes for a process that
    /// died is what it had written and not published, cut at its truncates.
    pub fn mark(&mut self, ino: u64, e: Entry) -> FsResult<()> {
        let e = match e {
            Entry::PublishedRange { start, end, .. } => Entry::PublishedRange {
                start,
                end,
                at: self.data_len,
            },
            Entry::Truncated { size, .. } => Entry::Truncated {
                size,
                at: self.data_len,
            },
            other => other,
        };
        let bytes = self.file(ino).builder.mark(e);
        self.append_journal(ino, &bytes)
    }

    /// Writes the checksums of everything appended so far.
    fn write_sums(&mut self) -> FsResult<()> {
        if let Some((off, bytes)) = self.sums.drain() {
            self.sums_file
                .get()
                .write_all_at(&bytes, off)
                .map_err(|e| {
                    FsError::io(format!("appending to {}", self.sums_path.display()), &e)
                })?;
        }
        Ok(())
    }

    /// Makes the logs durable on their device (`fdatasync`), data and checksums before the
    /// index that points at them; every file is synced first.
    pub fn sync_durable(&mut self) -> FsResult<()> {
        self.sync_all()?;
        for (f, p) in [
            (&self.data, &self.data_path),
            (&self.sums_file, &self.sums_path),
            (&self.journal, &self.journal_path),
            (&self.index, &self.index_path),
        ] {
            f.get()
                .sync_data()
                .map_err(|e| FsError::io(format!("syncing {}", p.display()), &e))?;
        }
        Ok(())
    }

    /// Reads `out.len()` bytes from data-log position `pos` (the process's own reads),
    /// checked against the block checksums.
    pub fn read_at(&mut self, out: &mut [u8], pos: u64) -> FsResult<()> {
        self.write_sums()?;
        self.checked.read(out, pos)
    }

    pub fn data_len(&self) -> u64 {
        self.data_len
    }

    /// Bytes of the index log on disk (header included).
    pub fn index_len(&self) -> u64 {
        self.index_len
    }

    /// File `ino`'s share of the log, as this writer made it: bytes of its data, and of its
    /// index records with the log's header.
    pub fn file_bytes(&self, ino: u64) -> (u64, u64) {
        self.files.get(&ino).map_or((0, 0), |f| {
            (f.data_bytes, index::HEADER_SIZE as u64 + f.index_bytes)
        })
    }
}

/// The records of a log file's first `len` bytes (header skipped; none if it has none).
fn read_body(f: &File, path: &Path, len: u64) -> FsResult<ParsedRecords> {
    let h = index::HEADER_SIZE as u64;
    let mut buf = vec![0u8; len.saturating_sub(h) as usize];
    f.read_exact_at(&mut buf, h)
        .map_err(|e| FsError::io(format!("reading {}", path.display()), &e))?;
    Ok(index::parse_records(&buf, h))
}

/// Copies bytes `[from, to)` of one log file into another at the same offsets.
fn copy_range(
    src: &File,
    src_path: &Path,
    dst: &File,
    dst_path: &Path,
    from: u64,
    to: u64,
) -> FsResult<()> {
    if to <= from {
        return Ok(());
    }
    let mut buf = vec![0u8; (to - from) as usize];
    src.read_exact_at(&mut buf, from)
        .map_err(|e| FsError::io(format!("reading {}", src_path.display()), &e))?;
    dst.write_all_at(&buf, from)
        .map_err(|e| FsError::io(format!("writing {}", dst_path.display()), &e))
}

/// Writes a new index log's header, or checks an existing one's and cuts its torn tail (a
/// torn pair is never built upon). Returns the index log's length.
fn prepare_index(index: &File, path: &Path, header: IndexHeader) -> FsResult<u64> {
    let len = len_of(index, path)?;
    if len < index::HEADER_SIZE as u64 {
        index
            .set_len(0)
            .and_then(|_| index.write_all_at(&index::encode_header(&header), 0))
            .map_err(|e| FsError::io(format!("writing index header {}", path.display()), &e))?;
        return Ok(index::HEADER_SIZE as u64);
    }
    let mut bytes = vec![0u8; len as usize];
    index
        .read_exact_at(&mut bytes, 0)
        .map_err(|e| FsError::io(format!("reading {}", path.display()), &e))?;
    let found = index::parse_header(&bytes)
        .map_err(|e| FsError::new(Errno::Io, format!("{}: {e}", path.display())))?;
    if found != Some(header) {
        return Err(FsError::new(
            Errno::Io,
            format!(
                "{} belongs to another log ({found:?}, expected {header:?})",
                path.display()
            ),
        ));
    }
    let parsed = index::parse_records(&bytes[index::HEADER_SIZE..], index::HEADER_SIZE as u64);
    let len = (index::HEADER_SIZE + parsed.consumed) as u64;
    index
        .set_len(len)
        .map_err(|e| FsError::io(format!("cutting torn tail of {}", path.display()), &e))?;
    Ok(len)
}

/// Brings a checksum file up to the data log's `data_len` bytes (writing a header if it has
/// none): slots that a writer that stopped never wrote are computed from the data. Returns
/// the builder that continues it.
fn seal(
    data: &File,
    data_path: &Path,
    f: &File,
    path: &Path,
    data_len: u64,
) -> FsResult<SumsBuilder> {
    let len = len_of(f, path)?;
    if len < sums::HEADER_SIZE as u64 {
        f.set_len(0)
            .and_then(|_| f.write_all_at(&sums::encode_header(sums::BLOCK_LOG2), 0))
            .map_err(|e| FsError::io(format!("writing {}", path.display()), &e))?;
    }
    let mut head = [0u8; sums::HEADER_SIZE];
    f.read_exact_at(&mut head, 0)
        .map_err(|e| FsError::io(format!("reading {}", path.display()), &e))?;
    let log2 = sums::parse_header(&head)
        .map_err(|e| FsError::new(Errno::Io, format!("{}: {e}", path.display())))?
        .unwrap_or(sums::BLOCK_LOG2);
    let slots =
        (len.max(sums::HEADER_SIZE as u64) - sums::HEADER_SIZE as u64) / sums::SLOT_SIZE as u64;
    // Start again at the last slot's block (it may be partial), or at the start.
    let from_block = slots.saturating_sub(1);
    let mut b = if from_block == 0 {
        SumsBuilder::new(log2)
    } else {
        SumsBuilder::resume(log2, from_block << log2, Slot::default())
    };
    let mut at = from_block << log2;
    if at > data_len {
        return Err(FsError::new(
            Errno::Io,
            format!(
                "{} has checksums for more than its {data_len} bytes: the log was cut",
                data_path.display()
            ),
        ));
    }
    let mut buf = vec![0u8; 1 << 20];
    while at < data_len {
        let n = ((data_len - at) as usize).min(buf.len());
        data.read_exact_at(&mut buf[..n], at)
            .map_err(|e| FsError::io(format!("reading {}", data_path.display()), &e))?;
        b.push(&buf[..n]);
        at += n as u64;
    }
    if let Some((off, bytes)) = b.drain() {
        f.write_all_at(&bytes, off)
            .map_err(|e| FsError::io(format!("writing {}", path.display()), &e))?;
    }
    f.set_len(sums::slot_offset(data_len.div_ceil(1 << log2)))
        .map_err(|e| FsError::io(format!("cutting {}", path.display()), &e))?;
    Ok(b)
}

/// Seals the logs of a writer that is gone (its daemon publishes what it left): every byte of
/// the data log gets a checksum, and the index log receives the journal's records that the
/// writer never synced, so readers find what is about to be attached.
pub fn seal_logs(data_path: &Path, index_path: &Path) -> FsResult<()> {
    let sums = sums_path(data_path);
    let journal_path = journal_path(data_path);
    let data = private::open_existing(data_path, false)?;
    let f = private::open_existing(&sums, true)?;
    let data_len = len_of(&data.get(), data_path)?;
    seal(&data.get(), data_path, &f.get(), &sums, data_len)?;
    let journal = private::open_existing(&journal_path, false)?;
    let index = private::open_existing(index_path, true)?;
    let (journal_len, index_len) = (
        len_of(&journal.get(), &journal_path)?,
        len_of(&index.get(), index_path)?,
    );
    let journaled = read_body(&journal.get(), &journal_path, journal_len)?;
    let indexed = read_body(&index.get(), index_path, index_len)?;
    // Whole pairs only (a torn tail of the index is cut): the missing records go after them.
    let whole = (index::HEADER_SIZE + indexed.consumed) as u64;
    let mut bytes = Vec::new();
    for t in index::unsynced(&journaled, &indexed) {
        bytes.extend_from_slice(&index::encode_pair(t.ino, &t.entry));
    }
    if index_len < index::HEADER_SIZE as u64 {
        return Err(FsError::new(
            Errno::Io,
            format!("{} has no complete header", index_path.display()),
        ));
    }
    let index = index.get();
    index
        .set_len(whole)
        .and_then(|()| index.write_all_at(&bytes, whole))
        .map_err(|e| FsError::io(format!("writing {}", index_path.display()), &e))
}
