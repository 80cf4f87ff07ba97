//! The catalogue service, shard side: this node's part of the catalogue (the variables whose
//! names hash here), its changes made durable before they are answered, and the rule that
//! makes a transaction's catalogue entries visible at its decision record: before a lookup,
//! a listing, a wait, or a change outside any transaction, every prepared transaction with
//! entries there is resolved by its home, and one decided to commit is completed here first.
//! The catalogue's rules are `tessera_core::catalogue`.

use crate::Node;
use crate::rpc::ServePeer;
use crate::state::ordered::{Ordered, Rank};
use crate::store::DbOp;
use std::time::Duration;
use tessera_core::catalogue::{Catalogue, CatalogueChange};
use tessera_core::txn_pending::ShardTxn;
use tessera_core::{Errno, FsError, FsResult};
use tessera_proto::{
    CatShardChange, CatShardList, CatShardLookup, CatShardWait, CatalogueOp, VersionView,
};
use tokio::sync::Notify;

/// This node's shard of the catalogue.
pub struct CatalogueShard {
    /// Ranked after the ownership maps and the transactions' pending overlay.
    table: Ordered<Catalogue>,
    /// Woken whenever a version is committed or deleted here.
    changed: Notify,
}

impl CatalogueShard {
    /// Wakes every waiter: a version was committed or deleted here.
    pub fn tell_changed(&self) {
        self.changed.notify_waiters();
    }

    /// Resolves at the next [`CatalogueShard::tell_changed`] after it was made: made before
    /// a waiter looks, it misses no change that comes after the look.
    pub fn next_change(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }

    pub fn new(table: Catalogue) -> CatalogueShard {
        CatalogueShard {
            table: Ordered::new(Rank::Catalogue, table),
            changed: Notify::new(),
        }
    }

    /// Runs `f` on the catalogue table, under its lock (ranked after the transactions'
    /// pending overlay).
    pub fn table<R>(&self, f: impl FnOnce(&mut Catalogue) -> R) -> R {
        self.table.with(f)
    }
}

/// How often a wait looks again at the transactions it may depend on, when no commit here
/// woke it.
const WAIT_TICK: Duration = Duration::from_millis(100);

impl ServePeer<CatShardChange> for Node {
    async fn serve_peer(&self, r: CatShardChange) -> FsResult<()> {
        if r.txn.is_none() {
            // Made after every decision taken so far: it lands on top of their entries.
            self.settle_catalogue(Some(r.op.name()), None).await?;
        }
        let durable = self.txns.pending(|pending| {
            self.catalogue.table(|table| {
            let changes = match r.txn {
                    Some(txn) => {
                        self.check_not_done(txn)?;
                        let prepared = pending
                            .transactions()
                            .any(|(t, s)| t == txn && s == ShardTxn::Prepared);
                        if prepared {
                            return Err(FsError::new(
                                Errno::Inval,
                                format!(
                                    "transaction {txn:016x} is committing: a catalogue change can no longer be part of it (make it before the vote)"
                                ),
                            ));
                        }
                        match r.op {
                            CatalogueOp::Create(v) => table.create(txn, v),
                            CatalogueOp::AddChunk { name, chunk } => table.add_chunk(txn, &name, chunk),
                            CatalogueOp::Delete { name } => table.delete(txn, &name),
                        }?
                    }
                    None => match r.op {
                        CatalogueOp::Create(v) => table.create_now(v),
                        CatalogueOp::AddChunk { name, chunk } => table.append_chunk(&name, chunk),
                        CatalogueOp::Delete { name } => table.delete_now(&name),
                    }?,
                };
                Ok(self
                    .store
                    .submit(changes.into_iter().map(DbOp::from).collect()))
            })
        })?;
        durable.durable().await?;
        if r.txn.is_none() {
            self.catalogue.tell_changed();
        }
        Ok(())
    }
}

impl ServePeer<CatShardLookup> for Node {
    async fn serve_peer(&self, r: CatShardLookup) -> FsResult<VersionView> {
        let viewer = r.view.viewer;
        self.settle_catalogue(Some(&r.name), viewer).await?;
        self.catalogue
            .table(|t| t.lookup(&r.name, r.version, viewer))
    }
}

impl ServePeer<CatShardList> for Node {
    async fn serve_peer(&self, r: CatShardList) -> FsResult<Vec<(String, u64)>> {
        let viewer = r.view.viewer;
        self.settle_catalogue(None, viewer).await?;
        Ok(self.catalogue.table(|t| t.list(viewer)))
    }
}

impl ServePeer<CatShardWait> for Node {
    async fn serve_peer(&self, r: CatShardWait) -> FsResult<u64> {
        let started = crate::clock::now();
        let limit = Duration::from_millis(r.timeout_ms);
        loop {
            // Registered before looking, so a commit between the look and the wait wakes it.
            let changed = self.catalogue.next_change();
            self.settle_catalogue(Some(&r.name), None).await?;
            let latest = self.catalogue.table(|t| t.latest(&r.name));
            if latest >= r.version {
                return Ok(latest);
            }
            let left = limit.saturating_sub(crate::clock::since(started));
            if left.is_zero() {
                return Err(FsError::new(
                    Errno::TimedOut,
                    format!(
                        "variable {:?} did not reach version {} within {} ms (its newest is {latest})",
                        r.name, r.version, r.timeout_ms
                    ),
                ));
            }
            let _ = tokio::time::timeout(left.min(WAIT_TICK), changed).await;
        }
    }
}

impl Node {
    /// Resolves the prepared transactions (other than `viewer`) with catalogue entries on
    /// `name` (every name: `None`): those decided by now are completed here, so what is read
    /// next includes exactly the transactions decided before it. One not prepared here is
    /// undecided (a home decides only once every node prepared). Fails with `EAGAIN` when a
    /// home cannot be reached.
    pub(crate) async fn settle_catalogue(
        &self,
        name: Option<&str>,
        viewer: Option<u64>,
    ) -> FsResult<()> {
        let on = self.catalogue.table(|t| t.pending_on(name, viewer));
        self.complete_decided(on).await
    }

    /// The catalogue changes of completing `txn` here (committing or dropping its entries).
    pub(crate) fn complete_catalogue(&self, txn: u64, commit: bool) -> Vec<CatalogueChange> {
        self.catalogue.table(|table| {
            if commit {
                table.commit(txn)
            } else {
                table.abort(txn)
            }
        })
    }
}
