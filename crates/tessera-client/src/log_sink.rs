//! Where a process's writes go: its own log on its node's burst buffer, which it
//! appends to without a message, or, under a descriptor limit too low to keep them out of the
//! program's way, the same logs written by its daemon for it (every append, sync, mark and
//! read of them a request: slower, but the process then holds no descriptor but its
//! connection).
//!
//! [`LogHandle`] is what the rest of the library uses either way.

use crate::client::Inner;
use tessera_core::index::Entry;
use tessera_core::{Errno, FsError, FsResult};
use tessera_logstore::LogWriter;
use tessera_proto::{LogAppend, LogLens, LogMark, LogMarkIt, LogReadAt, LogSync};

/// Processes whose descriptor limit is below this work through their daemon alone: the
/// upper half of their descriptors would not hold the library's connection, two log writers
/// (six descriptors each) and the views of others' logs it keeps.
pub const THROUGH_DAEMON_BELOW: u64 = 64;

/// A process's log (of every file it writes on its node).
#[derive(Debug)]
pub(crate) enum LogSink {
    /// Written by the process itself (boxed: the daemon's variant is a few words).
    Local(Box<LogWriter>),
    /// Written by its daemon for it.
    Daemon(DaemonLog),
}

/// What the process knows of the logs its daemon writes for it.
#[derive(Debug)]
pub(crate) struct DaemonLog {
    pub log: u64,
    pub lens: LogLens,
}

/// This process's log, for one file it writes, with what it takes to reach it.
pub struct LogHandle<'a> {
    pub(crate) g: &'a mut Inner,
    pub(crate) ino: u64,
}

impl LogHandle<'_> {
    fn sink(&mut self) -> &mut LogSink {
        self.g
            .log_sink()
            .expect("a handle is made while the process has a log")
    }

    /// The daemon's log id, if the daemon writes this log.
    fn daemon_log(&mut self) -> Option<u64> {
        match self.sink() {
            LogSink::Local(_) => None,
            LogSink::Daemon(d) => Some(d.log),
        }
    }

    fn lens(&mut self) -> Option<&mut LogLens> {
        match self.sink() {
            LogSink::Local(_) => None,
            LogSink::Daemon(d) => Some(&mut d.lens),
        }
    }

    /// Appends `buf`, the bytes of logical offset `logical`; returns their position in the
    /// data log.
    pub fn append(&mut self, logical: u64, buf: &[u8]) -> FsResult<u64> {
        let Some(log) = self.daemon_log() else {
            let ino = self.ino;
            let LogSink::Local(w) = self.sink() else {
                unreachable!()
            };
            return w.append(ino, logical, buf);
        };
        // In pieces that fit a frame; they land one after another in the data log, which
        // only this process writes.
        let piece = self.g.cfg.max_read_chunk() as usize;
        let mut first = None;
        for (i, part) in buf.chunks(piece.max(1)).enumerate() {
            let pos = self.g.call(LogAppend {
                ino: self.ino,
                log,
                offset: logical + (i * piece) as u64,
                data: part.to_vec(),
            })?;
            first.get_or_insert(pos);
            if let Some(l) = self.lens() {
                l.data = l.data.max(pos + part.len() as u64);
            }
        }
        Ok(first.unwrap_or_else(|| self.data_len()))
    }

    /// Makes the new records readable by others (before an attach).
    pub fn sync_index(&mut self) -> FsResult<()> {
        self.sync(false)
    }

    /// Makes the logs durable on their device.
    pub fn sync_durable(&mut self) -> FsResult<()> {
        self.sync(true)
    }

    fn sync(&mut self, durable: bool) -> FsResult<()> {
        let Some(log) = self.daemon_log() else {
            let ino = self.ino;
            let LogSink::Local(w) = self.sink() else {
                unreachable!()
            };
            return if durable {
                w.sync_durable()
            } else {
                w.sync_index(ino)
            };
        };
        let lens = self.g.call(LogSync {
            ino: self.ino,
            log,
            durable,
        })?;
        if let Some(l) = self.lens() {
            *l = lens;
        }
        Ok(())
    }

    pub fn data_len(&mut self) -> u64 {
        match self.sink() {
            LogSink::Local(w) => w.data_len(),
            LogSink::Daemon(d) => d.lens.data,
        }
    }

    pub fn index_len(&mut self) -> u64 {
        match self.sink() {
            LogSink::Local(w) => w.index_len(),
            LogSink::Daemon(d) => d.lens.index,
        }
    }

    /// Records that everything written so far is published.
    pub fn published(&mut self) -> FsResult<()> {
        match self.daemon_log() {
            None => {
                let ino = self.ino;
                if let LogSink::Local(w) = self.sink() {
                    w.published(ino);
                }
                Ok(())
            }
            Some(log) => self.g.call(LogMarkIt {
                ino: self.ino,
                log,
                mark: LogMark::Published,
            }),
        }
    }

    /// Records a publication of a range or a truncate in the journal.
    pub fn mark(&mut self, e: Entry) -> FsResult<()> {
        let Some(log) = self.daemon_log() else {
            let ino = self.ino;
            let LogSink::Local(w) = self.sink() else {
                unreachable!()
            };
            return w.mark(ino, e);
        };
        let mark = match e {
            Entry::PublishedRange { start, end, .. } => LogMark::PublishedRange { start, end },
            Entry::Truncated { size, .. } => LogMark::Truncated { size },
            Entry::PublishedUpTo { .. } => LogMark::Published,
            other => {
                return Err(FsError::new(
                    Errno::Inval,
                    format!("{other:?} is not a mark a process records"),
                ));
            }
        };
        self.g.call(LogMarkIt {
            ino: self.ino,
            log,
            mark,
        })
    }

    /// Reads `out.len()` bytes at data-log position `pos` (the process's own writes).
    pub fn read_at(&mut self, out: &mut [u8], pos: u64) -> FsResult<()> {
        let Some(log) = self.daemon_log() else {
            let LogSink::Local(w) = self.sink() else {
                unreachable!()
            };
            return w.read_at(out, pos);
        };
        let limit = self.g.cfg.max_read_chunk() as usize;
        for (i, chunk) in out.chunks_mut(limit.max(1)).enumerate() {
            let at = pos + (i * limit) as u64;
            let announced = self.g.call(LogReadAt {
                ino: self.ino,
                log,
                pos: at,
                len: chunk.len() as u64,
            })?;
            let data = self.g.last_data();
            tessera_proto::check_data(&announced, data)?;
            chunk.copy_from_slice(data);
        }
        Ok(())
    }
}
