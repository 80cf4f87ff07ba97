//! Model-level synchronisation of an open file: commit, fsync, session open and close, and
//! close, each placed by the file's consistency model.

use super::*;
use tessera_core::FsResult;

impl File {
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

    pub(super) fn close_inner(&mut self) -> FsResult<()> {
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
