//! Appending one process's writes of one file: data log, block checksums, journal, index log.
//!
//! Every write is recorded at once in the journal (`tessera_core::index::IndexBuilder`: the
//! open run's pair is rewritten in place as it grows), so a process killed at any moment loses
//! no write that returned: its daemon publishes what the journal holds. Readers use the index
//! log, which receives the journal's new records at each sync point
//! ([`LogWriter::sync_index`], before an attach): a reader of an attached range must see the
//! bytes as attached, not a newer write the process has not published. Both files have the
//! same format; the index is a prefix of the journal. Block checksums are written at sync
//! points and before the process reads its own log, so every byte a reader is sent to is
//! covered; what a process left without checksums when it died is sealed by its daemon
//! ([`seal_sums`]).

use crate::library_fds::HeldFile;
use crate::{journal_path, len_of, private, sums_path};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use tessera_core::index::{self, Append, Entry, IndexBuilder, IndexHeader};
use tessera_core::sums::{self, Slot, SumsBuilder};
use tessera_core::{Errno, FsError, FsResult};

/// Appends one process's writes of one file.
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
    /// Bytes of the index log: the journal's bytes up to the last sync point.
    index_len: u64,
    journal_len: u64,
    /// Where the open run's pair sits in the journal (rewritten as the run grows).
    open_at: Option<u64>,
    builder: IndexBuilder,
    sums: SumsBuilder,
    /// Reads of the process's own log, checked like everyone else's.
    checked: crate::checked::CheckedData,
}

impl LogWriter {
    /// Descriptors a writer holds open: its four files, and the data and sums again for
    /// checked reads of its own log.
    pub const DESCRIPTORS: u64 = 6;

    /// Creates the logs, or continues existing ones (a process that reconnected keeps its id).
    /// The directory of the logs (`<node>/logs/<ino>`) is made private; the directories
    /// above it are the node's daemon's, which made them private when it started.
    pub fn open(data_path: &Path, index_path: &Path, header: IndexHeader) -> FsResult<Self> {
        Self::open_with(data_path, index_path, header, false)
    }

    /// As [`LogWriter::open`], keeping the journal's whole records past the index: the logs
    /// of a process whose daemon writes them for it, taken up again after the daemon
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
        let journal_len = len_of(&journal.get(), &journal_path)?;
        let journal_len = if keep_journal && journal_len >= index_len {
            // Whole pairs only: a torn last one (a crash in the middle of an append) goes.
            let body = journal_len - index::HEADER_SIZE as u64;
            index::HEADER_SIZE as u64 + body / index::PAIR_SIZE as u64 * index::PAIR_SIZE as u64
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
            open_at: None,
            builder: IndexBuilder::new(),
            sums,
            checked,
        })
    }

    /// Appends `buf`, the bytes of logical offset `logical`, and records them in the journal;
    /// returns their position in the data log. On failure (e.g. ENOSPC) nothing is recorded,
    /// the data log is cut back and earlier data is untouched.
    pub fn append(&mut self, logical: u64, buf: &[u8]) -> FsResult<u64> {
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
        // The builder changes only once the journal has the record.
        let before = self.builder.clone();
        let recorded = match self.builder.push(logical, buf.len() as u64, pos) {
            Some(Append::Rewrite(pair)) => match self.open_at {
                Some(at) => self.journal.get().write_all_at(&pair, at).map(|()| None),
                None => Err(std::io::Error::other("no open run in the journal")),
            },
            Some(Append::New(bytes)) => self
                .journal
                .get()
                .write_all_at(&bytes, self.journal_len)
                .map(|()| Some(bytes.len() as u64)),
            None => Ok(None),
        };
        match recorded {
            Ok(appended) => {
                if let Some(n) = appended {
                    self.journal_len += n;
                    self.open_at = Some(self.journal_len - index::PAIR_SIZE as u64);
                }
            }
            Err(e) => {
                // A pair that was being rewritten goes back to what it said (best effort:
                // if it fails too, the pair's other copy or the next write mends it).
                if let (Some(at), Some(open)) = (self.open_at, before.open_record()) {
                    let _ = self
                        .journal
                        .get()
                        .write_all_at(&index::encode_pair(&Entry::Write(open)), at);
                }
                self.builder = before;
                return Err(failed(self, &self.journal_path, e));
            }
        }
        self.data_len += buf.len() as u64;
        self.sums.push(buf);
        Ok(pos)
    }

    /// Appends marker pairs to the journal (they closed the open run).
    fn append_journal(&mut self, bytes: &[u8]) -> FsResult<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        self.journal
            .get()
            .write_all_at(bytes, self.journal_len)
            .map_err(|e| FsError::io(format!("writing {}", self.journal_path.display()), &e))?;
        self.journal_len += bytes.len() as u64;
        self.open_at = None;
        Ok(())
    }

    /// Makes every write so far readable by others: writes the checksums of what was
    /// appended, then gives the index log the journal's new records (the open run is closed
    /// first: a pair in the index is never rewritten). Called before an attach.
    pub fn sync_index(&mut self) -> FsResult<()> {
        self.write_sums()?;
        let pending = self.builder.flush_published();
        self.append_journal(&pending)?;
        self.builder.close();
        self.open_at = None;
        copy_range(
            &self.journal.get(),
            &self.journal_path,
            &self.index.get(),
            &self.index_path,
            self.index_len,
            self.journal_len,
        )?;
        self.index_len = self.journal_len;
        Ok(())
    }

    /// Records that every write so far is published (attached); written to the journal
    /// with the next new record. (The daemon learns it from the attach itself, so a process
    /// that dies before the marker is written is not published twice.)
    pub fn published(&mut self) {
        self.builder.mark_published(self.data_len);
    }

    /// Records, in the journal at once, that a range was published or that the process
    /// truncated the file (`at` is filled in): what a daemon publishes for a process that
    /// died is what it had written and not published, cut at its truncates.
    pub fn mark(&mut self, e: Entry) -> FsResult<()> {
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
        let bytes = self.builder.mark(e);
        self.append_journal(&bytes)
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
    /// index that points at them.
    pub fn sync_durable(&mut self) -> FsResult<()> {
        self.sync_index()?;
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
    // Whole pairs only: a torn last one is not copied.
    let body = journal_len.saturating_sub(index::HEADER_SIZE as u64);
    let whole =
        index::HEADER_SIZE as u64 + body / index::PAIR_SIZE as u64 * index::PAIR_SIZE as u64;
    copy_range(
        &journal.get(),
        &journal_path,
        &index.get(),
        index_path,
        index_len,
        whole,
    )
}
