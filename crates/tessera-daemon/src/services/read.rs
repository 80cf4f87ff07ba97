//! The read service: a client's read of ranges held by logs anywhere in the job, and a peer's
//! read of a log on this node. The bytes travel as the data trailer of the answer, never
//! inside the encoded message.

use crate::Node;
use crate::metrics::ReadSource;
use bytes::Bytes;
use tessera_core::{Errno, FsError, FsResult};
use tessera_proto::{Read, ReadLog};

/// Remote reads are fetched in pieces of this size, in parallel.
const READ_PIECE: u64 = 2 << 20;

/// Log reads up to this size are done inline: page-cache or NVMe reads of bounded size, where
/// a hop to the blocking pool would cost more than the read.
const INLINE_READ: u64 = 256 << 10;

impl Node {
    /// Reads ranges from the logs of several owners, in parallel, concatenated in order.
    pub(crate) async fn read(&self, r: Read) -> FsResult<Vec<Bytes>> {
        let Read { ino, parts } = r;
        self.check_ino(ino)?;
        for (_, ranges) in &parts {
            if let Some((s, e)) = ranges
                .iter()
                .find(|(s, e)| s >= e || *e > tessera_core::run::MAX_FILE_SIZE)
            {
                return Err(FsError::new(
                    Errno::Inval,
                    format!("read of empty, inverted or out-of-range [{s},{e})"),
                ));
            }
        }
        let limit = self.cfg.max_read_chunk();
        let total = parts
            .iter()
            .flat_map(|(_, r)| r.iter().map(|(s, e)| e.saturating_sub(*s)))
            .fold(0u64, u64::saturating_add);
        if total > limit {
            return Err(FsError::new(
                Errno::MsgSize,
                format!("read of {total} bytes in one request exceeds the limit of {limit}"),
            ));
        }
        // Large remote reads are cut into pieces fetched in parallel over separate
        // connections (see `tessera_core::read_plan`).
        let jobs = tessera_core::read_plan::split_read(parts, self.id, READ_PIECE);
        let fetches = jobs.into_iter().map(|(owner, ranges)| {
            let req = ReadLog {
                ino,
                client: owner.client,
                ranges,
            };
            async move {
                let (bytes, source) = if owner.node == self.id {
                    (self.read_log(req).await?, ReadSource::Local)
                } else {
                    (self.bulk.fetch(owner.node, req).await?, ReadSource::Remote)
                };
                self.metrics.read(source, bytes.len() as u64);
                Ok::<_, FsError>(bytes)
            }
        });
        futures::future::try_join_all(fetches).await
    }

    /// Reads from a log on this node for another node's client.
    pub(crate) async fn read_log_for_peer(&self, r: ReadLog) -> FsResult<Vec<Bytes>> {
        let bytes = self.read_log(r).await?;
        self.metrics.served_to_peer(bytes.len() as u64);
        Ok(vec![bytes])
    }

    /// Reads from a log on this node; large reads off the async workers.
    pub(crate) async fn read_log(&self, r: ReadLog) -> FsResult<Bytes> {
        let ReadLog {
            ino,
            client,
            ranges,
        } = r;
        let total: u64 = ranges
            .iter()
            .map(|(s, e)| e.saturating_sub(*s))
            .fold(0, u64::saturating_add);
        if total <= INLINE_READ {
            return self.logs.read(ino, client, &ranges);
        }
        let logs = &self.logs;
        crate::blocking::blocking(|| logs.read(ino, client, &ranges))
    }
}
