//! Releasing removed files' bytes in the background. An unlink of a file's last name answers
//! once the file's inode shard recorded it in its list of files to drop (in the same write that
//! ends the removal); this task then tells every node, in batches ([`DropFiles`]), to drop the
//! files' ownership and let them go from their logs (a log whose files are all gone is
//! deleted once its writer is), and takes them off the list once every node answered. A restart finds the list and finishes it; a node that does not answer is asked
//! again.
//!
//! Why this is safe: the file has no name left, so no new open reaches it, and its inode number
//! is never given to another file; a create of the same name is another inode, whose bytes a
//! release never touches. Its PFS copy went before the unlink answered (a step of the
//! removal), so a copy flushed under the name afterwards is the new file's.
//!
//! Failpoint (`TESSERA_FAILPOINT`, for the tests): `drops-hold` keeps every file on the list.

use crate::Node;
use crate::rpc::ServePeer;
use crate::services::ownership_shard::Stale;
use crate::store::DbOp;
use std::sync::Arc;
use std::time::Duration;
use tessera_core::FsResult;
use tessera_proto::DropFiles;

/// How long a batch that a node did not answer waits before it is sent again.
const RETRY_EVERY: Duration = Duration::from_millis(500);

impl ServePeer<DropFiles> for Node {
    async fn serve_peer(&self, r: DropFiles) -> FsResult<()> {
        for &ino in &r.inos {
            let touching = self.txns.pending(|p| p.touching_file(ino));
            self.complete_decided(touching).await?;
            self.change_ownership(Stale::File(ino), |own| ((), own.drop_file(ino)))
                .await?;
        }
        self.release_files(&r.inos)
    }
}

impl Node {
    /// Lets removed files go from the logs of this node (see [`crate::logs::Logs::drop_files`]).
    pub(crate) fn release_files(&self, inos: &[u64]) -> FsResult<()> {
        crate::blocking::blocking(|| {
            self.logs.drop_files(
                inos,
                |ino| {
                    self.clients
                        .writers_of(ino)
                        .into_iter()
                        .map(|c| self.txns.log_of(c))
                        .collect()
                },
                |log, txn| self.log_in_use(log, txn),
            )
        })
    }

    /// Whether a process may still write the log `log`: its own id is connected, or expected
    /// back after a restart, or it is the log of a transaction (`txn`) a connected process is
    /// a member of, or may be one of a process expected back (a restart cut its membership,
    /// which it takes up again when it reconnects).
    pub(crate) fn log_in_use(&self, log: u64, txn: bool) -> bool {
        self.clients.is_live(log)
            || self.clients.is_absent(log)
            || (txn && self.clients.any_absent())
            || self.txns.members.writes_log(log)
    }

    /// The background task: releases the listed files on every node, a batch at a time.
    pub async fn keep_dropping(self: Arc<Self>) {
        loop {
            if self.stopping() {
                return;
            }
            let batch = self.drops.batch();
            if batch.is_empty() || self.failpoints.is_set("drops-hold") {
                tokio::select! {
                    () = self.drops.added() => {}
                    _ = tokio::time::sleep(RETRY_EVERY) => {}
                }
                continue;
            }
            let inos = batch.clone();
            let released = self
                .call_all(self.every_node(|| DropFiles { inos: inos.clone() }))
                .await;
            let done = match released {
                Ok(_) => {
                    self.store
                        .submit(vec![DbOp::DelFilesToDrop(batch.clone())])
                        .durable()
                        .await
                }
                Err(e) => Err(e),
            };
            match done {
                Ok(()) => {
                    tracing::debug!(files = batch.len(), "removed files released");
                    self.drops.released(&batch);
                }
                Err(e) => {
                    tracing::info!(
                        "{} removed files are not released yet (asked again in {} ms): {e}",
                        batch.len(),
                        RETRY_EVERY.as_millis()
                    );
                    tokio::time::sleep(RETRY_EVERY).await;
                }
            }
        }
    }
}
