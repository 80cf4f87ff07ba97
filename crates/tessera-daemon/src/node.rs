//! The state of one running daemon, shared by its services and transports.

use crate::{logs, pfs, state, store};
use std::sync::Arc;
use tessera_core::{Errno, FsError, FsResult};
use tessera_proto::{InstanceConfig, InstanceLayout};

/// One running daemon: the wiring between its services, transports and store. Every
/// field is configuration fixed at start, or a service or handle whose state is its own.
pub struct Node {
    pub id: u32,
    pub cfg: InstanceConfig,
    pub layout: InstanceLayout,
    pub secret: Vec<u8>,
    pub store: store::Store,
    /// The namespace and ownership shards, and who holds copies of its stripes.
    pub(crate) shards: state::shards::Shards,
    pub logs: logs::Logs,
    /// How calls reach other nodes' shards (TCP, or in-process for tests).
    pub(crate) links: Box<dyn crate::transport::links::PeerLinks>,
    /// Where this node crashes or holds for a test (see [`crate::failpoints`]).
    pub(crate) failpoints: crate::failpoints::Failpoints,
    /// How file bytes are fetched from other nodes' logs (TCP on connections of its own, or
    /// in-process for tests).
    pub bulk: Box<dyn crate::transport::bulk::BulkPath>,
    /// The client ids this node hands out.
    pub(crate) client_ids: crate::client_ids::ClientIds,
    /// When it started, what it counts, whether it is stopping.
    pub(crate) life: crate::lifecycle::Lifecycle,
    pub uid: u32,
    pub gid: u32,
    /// Copies of other nodes' ownership stripes.
    pub(crate) stripe_cache: state::cache::StripeCopies,
    /// Inodes of this node being flushed whole, and those whose bytes are unchanged since
    /// a whole-file flush (see [`crate::services::locality`]).
    pub(crate) flushed: crate::services::locality::FlushedFiles,
    /// Logs a migration moved every byte away from, or an aborted transaction or a member
    /// that died unpublished wrote, released when due (see [`crate::services::migrate`]).
    pub(crate) releases: crate::services::migrate::Releases,
    /// One flush at a time per file (by inode), on the inode's node.
    pub(crate) flush_locks: crate::services::flush::FlushLocks,
    /// Byte-range locks of this node's inodes, and where this node's clients hold locks.
    pub locks: crate::services::locks::LockService,
    /// Which client ids are bound to live connections.
    pub clients: state::clients::Clients,
    /// The PFS directory, reached only without following links.
    pub pfs: Arc<pfs::Pfs>,
    /// Transactions: pending state, the ones this node is home of, members.
    pub txns: crate::services::txn::Txns,
    /// This node's shard of the catalogue of variables.
    pub catalogue: crate::services::catalogue_shard::CatalogueShard,
    /// Operations on names in flight: driven here, or answered here.
    pub names: state::names::NameIntents,
    pub drops: state::drops::FilesToDrop,
    pub seals: state::seals::DirSeals,
    /// Attributes cached by clients under leases, as shard and as holder.
    pub attrs: Arc<crate::services::attr_cache::AttrCache>,
    /// Logs this daemon writes for clients that work through it alone.
    pub client_logs: crate::services::client_logs::ClientLogs,
    /// What it counts for dashboards, and where it serves them.
    pub metrics: crate::metrics::Metrics,
}

impl Node {
    /// Whether the daemon is stopping (its state being written and closed).
    pub fn stopping(&self) -> bool {
        self.life.stopping()
    }

    /// Runs a PFS call on the blocking pool, never on an async worker: the PFS may be a
    /// network file system that stalls for seconds. On a local file system the call runs
    /// here: it takes microseconds, and the hand-over to a pool thread and back cost a create
    /// or remove more than the call (two wake-ups on every create, for the lstat that finds
    /// whether the name is already on the PFS).
    pub async fn on_pfs<T: Send + 'static>(
        &self,
        p: &str,
        call: impl FnOnce(&pfs::Pfs, &str) -> FsResult<T> + Send + 'static,
    ) -> FsResult<T> {
        if self.pfs.is_local() {
            return call(&self.pfs, p);
        }
        let pfs = self.pfs.clone();
        let p = p.to_string();
        tokio::task::spawn_blocking(move || call(&pfs, &p))
            .await
            .map_err(blocking_failed)?
    }

    /// Hands out a client id (unique on this node, persisted before use).
    pub async fn new_client_id(&self) -> FsResult<u64> {
        Ok(self.new_client_ids(1).await?.start)
    }

    /// `n` new client ids at once. Ids are made durable a block ahead (one state write per
    /// [`crate::client_ids::BLOCK`] ids, none for most calls): a restart resumes past the
    /// block, so an id is never handed out twice, and log files are never shared.
    pub async fn new_client_ids(&self, n: u64) -> FsResult<std::ops::Range<u64>> {
        // The block's state write is queued under the counter's lock, so the log holds the
        // reservations in the order they were made.
        let (ids, pending) = self.client_ids.hand_out(n, |upto| {
            let op = store::DbOp::SetMeta(store::MetaKey::NextClient, upto);
            self.store.submit(vec![op])
        });
        if let Some((upto, pending)) = pending {
            pending.durable().await?;
            self.client_ids.durable_below(upto);
        }
        Ok(ids)
    }

    /// Whether `id` was handed out by this node (a reconnecting client may keep it).
    pub fn issued_client_id(&self, id: u64) -> bool {
        self.client_ids.issued(id)
    }

    /// A path as the user writes it (with the mount prefix), for messages.
    pub fn user_path(&self, p: &str) -> String {
        if p == "/" {
            self.cfg.mount.clone()
        } else {
            format!("{}{p}", self.cfg.mount.trim_end_matches('/'))
        }
    }

    pub(crate) fn count_request(&self) {
        self.life.count_request();
    }
}

/// The error for a blocking-pool task that did not finish (it panicked, or the runtime is
/// shutting down).
pub fn blocking_failed(e: tokio::task::JoinError) -> FsError {
    FsError::new(Errno::Io, format!("a blocking PFS call failed: {e}"))
}
