//! Logs the daemon writes for a process that cannot spare descriptors: under a descriptor
//! limit too low to keep its own logs out of the program's way, the client library holds no
//! descriptor but its connection (`tessera_client`'s "through the daemon" mode), and its
//! daemon appends to the process's logs for it, syncs and marks them, reads them back, and
//! reads PFS copies. The logs are the same files the process would write (same paths, same
//! format), so attaches, reads by others, flushes and the publication of what a process left
//! at its end work unchanged. A connection's writers close when it ends, before what it
//! left is published.

use crate::Node;
use crate::rpc::ServeClient;
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tessera_core::index::{Entry, IndexHeader};
use tessera_core::{Errno, FsError, FsResult};
use tessera_logstore::LogWriter;
use tessera_proto::{LogAppend, LogLens, LogMark, LogMarkIt, LogReadAt, LogSync, ReadPfs};

/// A log the daemon writes for a client, used by one request at a time.
type SharedWriter = Arc<Mutex<LogWriter>>;

/// Writers the daemon keeps open per client (six descriptors each): its own log and its
/// transaction's; beyond, the one used least recently closes (and resumes when used again:
/// [`LogWriter::resume`] keeps what its journal holds that its index lacks).
const WRITERS_PER_CLIENT: usize = 2;

/// A client's log: (client, log id).
type LogKey = (u64, u64);

/// The writers this daemon holds for its clients: key -> (writer, last use).
#[derive(Default)]
pub struct ClientLogs {
    writers: Mutex<HashMap<LogKey, (SharedWriter, u64)>>,
    uses: std::sync::atomic::AtomicU64,
}

impl ClientLogs {
    /// Closes the writers of a client whose connection ended. (A new connection cannot take
    /// the client's id before its old one's end is dealt with: see `Clients::bind`.)
    pub fn client_gone(&self, client: u64) {
        self.writers
            .lock()
            .expect("client logs")
            .retain(|(c, _), _| *c != client);
    }
}

impl Node {
    /// The writer of `client`'s log `log`, for file `ino`, opened on first use. `log` must be
    /// the client's own id or its transaction's log id: a process writes no other's logs.
    fn client_log(&self, client: u64, ino: u64, log: u64) -> FsResult<SharedWriter> {
        if log != client && log != self.txns.log_of(client) {
            return Err(FsError::new(
                Errno::Access,
                format!(
                    "client {client} asked to write log {log}, which is neither its own nor its transaction's"
                ),
            ));
        }
        self.check_ino(ino)?;
        let now = self
            .client_logs
            .uses
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let key = (client, log);
        if let Some((w, used)) = self
            .client_logs
            .writers
            .lock()
            .expect("client logs")
            .get_mut(&key)
        {
            *used = now;
            return Ok(w.clone());
        }
        // Opened outside the map's lock (file I/O); a client's requests come one at a time,
        // so no other request opens the same log meanwhile.
        let (d, i) = self.cfg.log_paths(self.id, log);
        let header = IndexHeader {
            log,
            node: self.id,
            epoch: 0,
            txn: log != client,
        };
        let w = Arc::new(Mutex::new(crate::blocking::blocking(|| {
            LogWriter::resume(&d, &i, header)
        })?));
        let mut all = self.client_logs.writers.lock().expect("client logs");
        let mine: Vec<(LogKey, u64)> = all
            .iter()
            .filter(|(k, _)| k.0 == client)
            .map(|(k, (_, used))| (*k, *used))
            .collect();
        if mine.len() >= WRITERS_PER_CLIENT
            && let Some((oldest, _)) = mine.into_iter().min_by_key(|(_, used)| *used)
        {
            all.remove(&oldest);
        }
        all.insert(key, (w.clone(), now));
        Ok(w)
    }

    /// Runs `f` on the writer, off the async workers' hot path (its calls are file I/O).
    fn with_client_log<T>(
        &self,
        client: u64,
        ino: u64,
        log: u64,
        f: impl FnOnce(&mut LogWriter) -> FsResult<T>,
    ) -> FsResult<T> {
        let w = self.client_log(client, ino, log)?;
        crate::blocking::blocking(|| f(&mut w.lock().expect("client log")))
    }

    /// A client's read of its own log at data-log positions, for the data trailer.
    pub(crate) fn log_read_at(&self, client: u64, r: LogReadAt) -> FsResult<Vec<Bytes>> {
        let limit = self.cfg.max_read_chunk();
        if r.len > limit {
            return Err(FsError::new(
                Errno::MsgSize,
                format!("a read of {} bytes exceeds the limit of {limit}", r.len),
            ));
        }
        let mut buf = vec![0u8; r.len as usize];
        self.with_client_log(client, r.ino, r.log, |w| w.read_at(&mut buf, r.pos))?;
        self.metrics.read(crate::metrics::ReadSource::Local, r.len);
        Ok(vec![Bytes::from(buf)])
    }

    /// Ranges of a PFS copy for a client: how many bytes of each the copy held, and those
    /// bytes (a range past the copy's end gets fewer, or none).
    pub(crate) async fn read_pfs(&self, r: ReadPfs) -> FsResult<(Vec<u64>, Vec<Bytes>)> {
        let p = tessera_core::path::normalize(&r.path)?;
        let total = r
            .ranges
            .iter()
            .map(|(s, e)| e.saturating_sub(*s))
            .fold(0u64, u64::saturating_add);
        let limit = self.cfg.max_read_chunk();
        if total > limit || r.ranges.iter().any(|(s, e)| s > e) {
            return Err(FsError::new(
                Errno::Inval,
                format!(
                    "a PFS read of {total} bytes in inverted or too large ranges (at most {limit})"
                ),
            ));
        }
        let ranges = r.ranges;
        self.on_pfs(&p, move |pfs, p| {
            let Some(f) = pfs.open_regular(p, rustix::fs::OFlags::RDONLY)? else {
                return Ok((vec![0; ranges.len()], Vec::new()));
            };
            let mut got = Vec::with_capacity(ranges.len());
            let mut data = Vec::with_capacity(ranges.len());
            for (s, e) in ranges {
                let mut buf = vec![0u8; (e - s) as usize];
                let mut n = 0;
                while n < buf.len() {
                    match std::os::unix::fs::FileExt::read_at(&f, &mut buf[n..], s + n as u64) {
                        Ok(0) => break,
                        Ok(k) => n += k,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => {
                            return Err(FsError::io(format!("reading the PFS copy of {p}"), &e));
                        }
                    }
                }
                buf.truncate(n);
                got.push(n as u64);
                data.push(Bytes::from(buf));
            }
            Ok((got, data))
        })
        .await
        .inspect(|(got, _)| {
            let bytes = got.iter().sum();
            self.metrics.read(crate::metrics::ReadSource::Pfs, bytes);
        })
    }
}

impl ServeClient<LogAppend> for Node {
    async fn serve_client(&self, client: u64, r: LogAppend) -> FsResult<u64> {
        tessera_core::run::end_within_limit(r.offset, r.data.len() as u64, "write")?;
        self.with_client_log(client, r.ino, r.log, |w| w.append(r.ino, r.offset, &r.data))
    }
}

impl ServeClient<LogSync> for Node {
    async fn serve_client(&self, client: u64, r: LogSync) -> FsResult<LogLens> {
        self.with_client_log(client, r.ino, r.log, |w| {
            if r.durable {
                w.sync_durable()?;
            } else {
                w.sync_index(r.ino)?;
            }
            Ok(LogLens {
                data: w.data_len(),
                index: w.index_len(),
            })
        })
    }
}

impl ServeClient<LogMarkIt> for Node {
    async fn serve_client(&self, client: u64, r: LogMarkIt) -> FsResult<()> {
        self.with_client_log(client, r.ino, r.log, |w| match r.mark {
            LogMark::Published => {
                w.published(r.ino);
                Ok(())
            }
            LogMark::PublishedRange { start, end } => {
                w.mark(r.ino, Entry::PublishedRange { start, end, at: 0 })
            }
            LogMark::Truncated { size } => w.mark(r.ino, Entry::Truncated { size, at: 0 }),
        })
    }
}
