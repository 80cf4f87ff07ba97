//! The log store: each process's data log and index log for one file, on its node's burst
//! buffer.
//!
//! * [`LogWriter`] appends a process's writes to its data log and their index records
//!   (strided runs, see `tessera_core::index`) to its index log. Index records are buffered
//!   in memory and appended at sync points ([`LogWriter::sync_index`]): a reader never needs an
//!   index record before the writer has attached the bytes it describes.
//! * [`LogView`] reads another process's logs: it parses the index log incrementally into an
//!   extent map and serves byte ranges from the data log. The daemon's read service and flush
//!   use it for logs of their node; clients use it for logs of other processes on their own
//!   node, without a round trip.
//!
//! Blocking `std::fs` I/O only; no threads. Every file is created and opened as [`private`]
//! says, so a link or a file another user planted on a shared burst buffer is refused.

pub mod private;

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use tessera_core::index::{self, IndexBuilder, IndexHeader, Tail};
use tessera_core::{Errno, FsError, FsResult, RangeMap};

/// Flush buffered index records once they reach this size even without a sync point, so a
/// long unsynchronised run of scattered writes keeps bounded memory.
const INDEX_BUFFER_LIMIT: usize = 64 << 10;

/// Appends one process's writes of one file.
#[derive(Debug)]
pub struct LogWriter {
    data: File,
    index: File,
    data_path: PathBuf,
    data_len: u64,
    index_len: u64,
    builder: IndexBuilder,
}

impl LogWriter {
    /// Creates the logs, or continues existing ones (a process that reconnected keeps its id).
    /// The directory of the logs (`<node>/logs/<ino>`) is made private; the directories
    /// above it are the node's daemon's, which made them private when it started.
    pub fn open(data_path: &Path, index_path: &Path, header: IndexHeader) -> FsResult<Self> {
        if let Some(dir) = data_path.parent() {
            private::private_dir(dir)?;
        }
        let data = private::create_or_open(data_path)?.0;
        let index = private::create_or_open(index_path)?.0;
        let data_len = len_of(&data, data_path)?;
        let mut index_len = len_of(&index, index_path)?;
        if index_len < index::HEADER_SIZE as u64 {
            index
                .write_all_at(&index::encode_header(&header), 0)
                .map_err(|e| {
                    FsError::io(format!("writing index header {}", index_path.display()), &e)
                })?;
            index_len = index::HEADER_SIZE as u64;
        } else {
            // Continue after the last valid record: a torn tail is cut off, not built upon.
            let bytes = std::fs::read(index_path)
                .map_err(|e| FsError::io(format!("reading {}", index_path.display()), &e))?;
            let found = index::parse_header(&bytes)
                .map_err(|e| FsError::new(Errno::Io, format!("{}: {e}", index_path.display())))?;
            if found != Some(header) {
                return Err(FsError::new(
                    Errno::Io,
                    format!(
                        "{} belongs to another log ({found:?}, expected {header:?})",
                        index_path.display()
                    ),
                ));
            }
            let parsed =
                index::parse_records(&bytes[index::HEADER_SIZE..], index::HEADER_SIZE as u64)
                    .map_err(|e| {
                        FsError::new(Errno::Io, format!("{}: {e}", index_path.display()))
                    })?;
            index_len = (index::HEADER_SIZE + parsed.consumed) as u64;
            index.set_len(index_len).map_err(|e| {
                FsError::io(format!("cutting torn tail of {}", index_path.display()), &e)
            })?;
        }
        Ok(LogWriter {
            data,
            index,
            data_path: data_path.to_path_buf(),
            data_len,
            index_len,
            builder: IndexBuilder::new(),
        })
    }

    /// Appends `buf`, the bytes of logical offset `logical`; returns their position in the
    /// data log. On failure (e.g. ENOSPC) nothing is recorded and earlier data is untouched.
    pub fn append(&mut self, logical: u64, buf: &[u8]) -> FsResult<u64> {
        let pos = self.data_len;
        if let Err(e) = self.data.write_all_at(buf, pos) {
            // Drop whatever part made it, so the log ends where the index says it does.
            let _ = self.data.set_len(pos);
            return Err(FsError::io(
                format!(
                    "appending {} bytes to {}",
                    buf.len(),
                    self.data_path.display()
                ),
                &e,
            ));
        }
        self.data_len += buf.len() as u64;
        self.builder.push(logical, buf.len() as u64, pos);
        if self.builder.pending_bytes() >= INDEX_BUFFER_LIMIT {
            self.write_index(false)?;
        }
        Ok(pos)
    }

    /// Appends every buffered index record (including the open run) to the index log. Called
    /// before an attach so that readers of the attached range find its records.
    pub fn sync_index(&mut self) -> FsResult<()> {
        self.write_index(true)
    }

    fn write_index(&mut self, close_open_run: bool) -> FsResult<()> {
        let bytes = if close_open_run {
            self.builder.drain()
        } else {
            self.builder.drain_closed()
        };
        if bytes.is_empty() {
            return Ok(());
        }
        self.index
            .write_all_at(&bytes, self.index_len)
            .map_err(|e| FsError::io("appending to the index log", &e))?;
        self.index_len += bytes.len() as u64;
        Ok(())
    }

    /// Makes both logs durable on their device (`fdatasync`), index records included.
    pub fn sync_durable(&mut self) -> FsResult<()> {
        self.sync_index()?;
        self.data
            .sync_data()
            .map_err(|e| FsError::io(format!("syncing {}", self.data_path.display()), &e))?;
        self.index
            .sync_data()
            .map_err(|e| FsError::io("syncing the index log", &e))
    }

    /// Reads `out.len()` bytes from data-log position `pos` (the process's own reads).
    pub fn read_at(&self, out: &mut [u8], pos: u64) -> FsResult<()> {
        self.data
            .read_exact_at(out, pos)
            .map_err(|e| FsError::io(format!("reading {}", self.data_path.display()), &e))
    }

    pub fn data_len(&self) -> u64 {
        self.data_len
    }

    /// Bytes of the index log on disk (header included).
    pub fn index_len(&self) -> u64 {
        self.index_len
    }

    /// Whether writes are waiting to be recorded in the index log.
    pub fn index_pending(&self) -> bool {
        self.builder.has_pending()
    }
}

fn len_of(f: &File, p: &Path) -> FsResult<u64> {
    f.metadata()
        .map(|m| m.len())
        .map_err(|e| FsError::io(format!("stat {}", p.display()), &e))
}

/// A reader's view of one process's logs of one file.
#[derive(Debug)]
pub struct LogView {
    data: File,
    index: File,
    index_path: PathBuf,
    data_path: PathBuf,
    /// Bytes of the index log already applied to `map`.
    parsed: u64,
    map: RangeMap<u64>,
    tail: Tail,
}

impl LogView {
    /// Opens the logs; `ENOENT` if the process never wrote this file on this node.
    pub fn open(data_path: &Path, index_path: &Path) -> FsResult<Self> {
        let open = |p: &Path| private::open_existing(p, false);
        let mut v = LogView {
            data: open(data_path)?,
            index: open(index_path)?,
            index_path: index_path.to_path_buf(),
            data_path: data_path.to_path_buf(),
            parsed: 0,
            map: RangeMap::new(),
            tail: Tail::Clean,
        };
        v.refresh()?;
        Ok(v)
    }

    /// Applies index records appended since the last refresh. A torn tail is left for the
    /// next refresh (the writer may still be appending) and reported by [`LogView::tail`].
    pub fn refresh(&mut self) -> FsResult<()> {
        let len = len_of(&self.index, &self.index_path)?;
        if len <= self.parsed {
            return Ok(());
        }
        let mut buf = vec![0u8; (len - self.parsed) as usize];
        self.index
            .read_exact_at(&mut buf, self.parsed)
            .map_err(|e| FsError::io(format!("reading {}", self.index_path.display()), &e))?;
        let mut body: &[u8] = &buf;
        let corrupt = |e: index::FormatError| {
            FsError::new(Errno::Io, format!("{}: {e}", self.index_path.display()))
        };
        if self.parsed == 0 {
            match index::parse_header(&buf).map_err(corrupt)? {
                None => return Ok(()), // header not written yet
                Some(_) => {
                    body = &buf[index::HEADER_SIZE..];
                    self.parsed = index::HEADER_SIZE as u64;
                }
            }
        }
        let parsed = index::parse_records(body, self.parsed).map_err(corrupt)?;
        for r in &parsed.records {
            for (s, e, pos) in r.pieces() {
                self.map.insert(s, e, pos);
            }
        }
        self.parsed += parsed.consumed as u64;
        self.tail = parsed.tail;
        Ok(())
    }

    /// How the index log ended at the last refresh.
    pub fn tail(&self) -> Tail {
        self.tail
    }

    /// Logical ranges this log holds, with their data-log positions.
    pub fn map(&self) -> &RangeMap<u64> {
        &self.map
    }

    /// Fills `out` with logical bytes `[start, start + out.len())`; returns the sub-ranges this
    /// log does not hold (left untouched in `out`).
    pub fn read(&self, start: u64, out: &mut [u8]) -> FsResult<Vec<(u64, u64)>> {
        let end = start + out.len() as u64;
        for ext in self.map.overlapping(start, end) {
            let dst = &mut out[(ext.start - start) as usize..(ext.end - start) as usize];
            self.data
                .read_exact_at(dst, ext.value)
                .map_err(|e| FsError::io(format!("reading {}", self.data_path.display()), &e))?;
        }
        Ok(self.map.gaps(start, end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(dir: &Path) -> (PathBuf, PathBuf) {
        (dir.join("1.data"), dir.join("1.index"))
    }

    const H: IndexHeader = IndexHeader {
        ino: 5,
        client: 1,
        node: 0,
    };

    #[test]
    fn view_sees_synced_writes_only() {
        let tmp = tempfile::tempdir().unwrap();
        let (d, i) = paths(tmp.path());
        let mut w = LogWriter::open(&d, &i, H).unwrap();
        w.append(100, b"hello").unwrap();
        let mut v = LogView::open(&d, &i).unwrap();
        assert!(v.map().is_empty(), "unsynced writes are private");
        w.sync_index().unwrap();
        w.append(102, b"XY").unwrap(); // newer, not yet synced
        v.refresh().unwrap();
        let mut out = [0u8; 7];
        let missing = v.read(99, &mut out).unwrap();
        assert_eq!(&out[1..6], b"hello");
        assert_eq!(missing, vec![(99, 100), (105, 106)]);
        w.sync_index().unwrap();
        v.refresh().unwrap();
        v.read(99, &mut out).unwrap();
        assert_eq!(&out[1..6], b"heXYo");
    }

    #[test]
    fn reopened_writer_cuts_torn_tail_and_continues() {
        let tmp = tempfile::tempdir().unwrap();
        let (d, i) = paths(tmp.path());
        let mut w = LogWriter::open(&d, &i, H).unwrap();
        w.append(0, b"abc").unwrap();
        w.sync_index().unwrap();
        drop(w);
        // A crash mid-append leaves half a record.
        let f = std::fs::OpenOptions::new().append(true).open(&i).unwrap();
        f.write_all_at(&[1, 2, 3], len_of(&f, &i).unwrap()).unwrap();
        let v = LogView::open(&d, &i).unwrap();
        assert!(matches!(v.tail(), Tail::Torn { bytes: 3, .. }));
        let mut w = LogWriter::open(&d, &i, H).unwrap();
        w.append(3, b"def").unwrap();
        w.sync_index().unwrap();
        let v = LogView::open(&d, &i).unwrap();
        assert_eq!(v.tail(), Tail::Clean);
        let mut out = [0u8; 6];
        assert!(v.read(0, &mut out).unwrap().is_empty());
        assert_eq!(&out, b"abcdef");
    }

    #[test]
    fn writer_refuses_a_foreign_index() {
        let tmp = tempfile::tempdir().unwrap();
        let (d, i) = paths(tmp.path());
        LogWriter::open(&d, &i, H).unwrap();
        let other = IndexHeader { client: 2, ..H };
        assert_eq!(LogWriter::open(&d, &i, other).unwrap_err().errno, Errno::Io);
    }

    #[test]
    fn corrupt_index_is_an_error_for_readers() {
        let tmp = tempfile::tempdir().unwrap();
        let (d, i) = paths(tmp.path());
        let mut w = LogWriter::open(&d, &i, H).unwrap();
        w.append(0, b"a").unwrap();
        w.append(10, b"bb").unwrap();
        w.sync_index().unwrap();
        let mut bytes = std::fs::read(&i).unwrap();
        bytes[index::HEADER_SIZE + 2] ^= 0x40;
        std::fs::write(&i, &bytes).unwrap();
        let e = LogView::open(&d, &i).unwrap_err();
        assert_eq!(e.errno, Errno::Io);
        assert!(e.message.contains("corrupt"), "{e}");
    }
}
