//! The logs of a process: the writer of its own (one for every file it writes on its node),
//! and a cache of views of other processes' logs on the node.

use super::*;
use tessera_core::FsResult;
use tessera_core::index::IndexHeader;
use tessera_logstore::{LogView, LogWriter};
use tessera_proto::Writing;

impl Inner {
    /// The writer of this process's log for `ino`, told to the daemon on the file's first
    /// write under the current log id (the daemon publishes what the process leaves
    /// unpublished if it dies) and opened on the first write of all: the process's own, or its
    /// daemon's for it when it works through its daemon alone. One log holds every file the
    /// process writes on its node.
    pub fn writer(&mut self, ino: u64) -> FsResult<crate::log_sink::LogHandle<'_>> {
        use crate::log_sink::{DaemonLog, LogSink};
        self.client_id()?;
        let log = self.log_id();
        if !self.files.get(&ino).is_some_and(|fs| fs.writing) {
            self.call(Writing { ino })?;
        }
        if self.log.as_ref().is_none_or(|(id, _)| *id != log) {
            let sink = if self.through_daemon {
                LogSink::Daemon(DaemonLog {
                    log,
                    lens: Default::default(),
                })
            } else {
                let (d, i) = self.cfg.log_paths(self.node, log);
                LogSink::Local(Box::new(LogWriter::open(
                    &d,
                    &i,
                    IndexHeader {
                        log,
                        node: self.node,
                        epoch: 0,
                        txn: self.membership.is_member(),
                    },
                )?))
            };
            self.log = Some((log, sink));
        }
        let fs = self.files.entry(ino).or_default();
        if !fs.writing {
            fs.writing = true;
            self.written.insert(ino);
        }
        Ok(crate::log_sink::LogHandle { g: self, ino })
    }

    /// The writer of `ino` if this process writes it now (none is made).
    pub fn written_log(&mut self, ino: u64) -> Option<crate::log_sink::LogHandle<'_>> {
        (self.log.is_some() && self.files.get(&ino).is_some_and(|fs| fs.writing))
            .then_some(crate::log_sink::LogHandle { g: self, ino })
    }

    /// The log this process writes now, if it opened one.
    pub(crate) fn log_sink(&mut self) -> Option<&mut crate::log_sink::LogSink> {
        self.log.as_mut().map(|(_, s)| s)
    }

    /// The id of the logs this process writes now: its client id, or its transaction's log.
    pub fn log_id(&self) -> u64 {
        self.membership.log_id(self.client_id)
    }

    /// Cuts this process's view of `ino` at `size` after a truncate, and records it in the
    /// index log (so its daemon never publishes the cut bytes for it).
    pub fn truncate_local(&mut self, ino: u64, size: u64) -> FsResult<()> {
        if let Some(fs) = self.files.get_mut(&ino) {
            fs.local.truncate(size);
            fs.dirty.truncate(size);
            fs.attached.truncate(size);
        }
        if let Some(mut w) = self.written_log(ino) {
            w.mark(tessera_core::index::Entry::Truncated { size, at: 0 })?;
        }
        Ok(())
    }

    /// The log of another process on this node, refreshed if a query happened since.
    pub fn foreign_view(&mut self, client: u64) -> FsResult<&LogView> {
        let (d, i) = self.cfg.log_paths(self.node, client);
        self.foreign
            .get(client, self.query_gen, || LogView::open(&d, &i))
    }
}
