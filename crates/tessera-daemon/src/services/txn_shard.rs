//! The transaction service, shard side (D2T): what every node holds back for the
//! transactions that wrote to its shards (attaches on ownership shards, size extensions on
//! inode shards), its prepare and completion, and how a node resolves transactions it holds
//! state of by asking their homes (after a restart, or when a home's completion did not
//! arrive). The overlay rules are `tessera_core::txn_pending`.
//!
//! Failpoints (`TESSERA_FAILPOINT`): `shard-after-prepare` ends the daemon once it has
//! prepared (between prepare and decision); `shard-before-complete` ends it when the decision
//! arrives (between decision and completion).

use crate::Node;
use crate::rpc::ServePeer;
use crate::store::DbOp;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tessera_core::ownership::OwnerChange;
use tessera_core::{Errno, FsError, FsResult, Owner, Run};
use tessera_proto::{
    AttrAs, InodeGetAs, TxnComplete, TxnMovedIn, TxnPrepare, TxnStatus, TxnTruncate, TxnVerdict,
    TxnView, txn_home,
};

/// How long a query keeps asking again, 10 ms apart, while a transaction it left out is
/// unknown to its home (an orphan, which the resolver of its node drops within
/// [`RESOLVE_EVERY`]) or its home cannot be reached, before it fails.
pub(crate) const RESOLVE_WAIT: Duration = Duration::from_secs(5);

/// The error of a query of `ino` (or a status of transaction `ino`) that could not learn
/// the decisions it depends on.
pub(crate) fn undecidable(what: u64) -> FsError {
    FsError::new(
        Errno::Again,
        format!(
            "{what:#x}: a transaction with writes here could not be resolved (its home daemon does not answer); try again once it is back"
        ),
    )
}

/// How often a node asks the homes of the transactions it holds state of where they stand.
const RESOLVE_EVERY: Duration = Duration::from_millis(500);

impl ServePeer<TxnPrepare> for Node {
    async fn serve_peer(&self, r: TxnPrepare) -> FsResult<()> {
        // A rename whose old name was marked here and whose new name never was (its member's
        // daemon died between the two) cannot commit: the file would lose its name.
        let moved = self.txns.entries(|e| e.moved_away(r.txn));
        for (from, ino, to) in moved {
            let shard = tessera_core::placement::path_shard(&to, self.cfg.nodes);
            let ask = TxnMovedIn {
                txn: r.txn,
                path: to.clone(),
                ino,
            };
            if !self.call(shard, ask).await? {
                return Err(FsError::new(
                    Errno::Canceled,
                    format!(
                        "the rename of {} to {} in transaction {:016x} was not completed (a daemon failed between its two names); the transaction cannot commit whole",
                        self.user_path(&from),
                        self.user_path(&to),
                        r.txn
                    ),
                ));
            }
        }
        let ops = self.txns.pending(|p| p.prepare(r.txn));
        let ops: Vec<DbOp> = ops.into_iter().map(DbOp::from).collect();
        self.store.submit(ops).durable().await?;
        self.failpoints.crash_at("shard-after-prepare")?;
        Ok(())
    }
}

impl ServePeer<TxnMovedIn> for Node {
    async fn serve_peer(&self, r: TxnMovedIn) -> FsResult<bool> {
        let p = tessera_core::path::normalize(&r.path)?;
        Ok(self.txns.entries(|e| e.moved_in(r.txn, &p, r.ino)))
    }
}

impl ServePeer<TxnComplete> for Node {
    async fn serve_peer(&self, r: TxnComplete) -> FsResult<()> {
        self.failpoints.crash_at("shard-before-complete")?;
        self.complete_here(r.txn, r.commit).await
    }
}

impl ServePeer<TxnTruncate> for Node {
    async fn serve_peer(&self, r: TxnTruncate) -> FsResult<()> {
        self.check_txn_id(r.txn)?;
        let holds_inode = tessera_core::placement::ino_shard(r.ino) == self.id;
        if holds_inode {
            self.inode(r.ino)?;
        }
        let (durable, tell) = self.shards.ownership(|_| {
            // Under the lock, as an attach: a completion running now cannot slip between.
            self.check_not_done(r.txn)?;
            let path = holds_inode.then_some(r.path.as_str());
            let ops = self
                .txns
                .pending(|p| p.truncate(r.txn, r.ino, r.size, path))?;
            // Copies cached elsewhere would hide the cut from the members' answers.
            self.shards.callbacks(|callbacks| {
                let keys = callbacks.held_stripes(r.ino);
                let tell = callbacks.change(keys);
                let ops = ops.into_iter().map(DbOp::from).collect();
                Ok((self.store.submit(ops), tell))
            })
        })?;
        durable.durable().await?;
        self.tell_holders(tell).await;
        Ok(())
    }
}

impl ServePeer<InodeGetAs> for Node {
    async fn serve_peer(&self, r: InodeGetAs) -> FsResult<AttrAs> {
        let mut attr = self.inode(r.ino)?;
        let committed = |t| r.view.committed.contains(&t);
        self.txns.pending(|pending| {
            let (size, excluded) = pending.size_as(r.ino, attr.size, r.view.viewer, &committed);
            attr.size = size;
            Ok(AttrAs {
                attr,
                excluded,
                pfs_upto: pending.pfs_upto(r.ino, r.view.viewer, &committed),
            })
        })
    }
}

impl Node {
    /// `owner` attaches `runs` of one stripe under `txn`: pending, visible to its members.
    /// Copies of the stripe cached elsewhere are dropped first (they would hide the pending
    /// bytes from the answers that must name them), and none is granted until it completes.
    pub(crate) async fn attach_pending(
        &self,
        txn: u64,
        ino: u64,
        stripe: u64,
        owner: Owner,
        runs: &[Run],
    ) -> FsResult<()> {
        let (durable, tell) = self.shards.ownership(|_| {
            // Under the lock: a completion running now cannot slip between check and attach.
            self.check_not_done(txn)?;
            let ops = self
                .txns
                .pending(|p| p.attach(txn, ino, stripe, owner, runs))?;
            let tell = self.shards.callbacks(|cb| cb.change([(ino, stripe)]));
            let ops = ops.into_iter().map(DbOp::from).collect();
            Ok((self.store.submit(ops), tell))
        })?;
        durable.durable().await?;
        self.tell_holders(tell).await;
        Ok(())
    }

    /// `txn` extends `ino` (of this node) to `end`: pending, visible to its members.
    pub(crate) async fn extend_pending(&self, txn: u64, ino: u64, end: u64) -> FsResult<()> {
        self.check_not_done(txn)?;
        self.inode(ino)?;
        let ops = self.txns.pending(|p| p.extend(txn, ino, end))?;
        let ops = ops.into_iter().map(DbOp::from).collect();
        self.store.submit(ops).durable().await
    }

    /// Before a plain attach of `runs` of one stripe: the prepared transactions with bytes
    /// there that were decided to commit are completed here first, so that the plain write,
    /// made after their decision, lands on top of their bytes and not under them.
    pub(crate) async fn complete_decided_under(
        &self,
        ino: u64,
        stripe: u64,
        runs: &[Run],
    ) -> FsResult<()> {
        let doubt: std::collections::BTreeSet<u64> = self.txns.pending(|pending| {
            runs.iter()
                .flat_map(|r| {
                    let span = tessera_core::txn_pending::Span {
                        ino,
                        stripe,
                        start: r.start,
                        end: r.end(),
                    };
                    pending.in_doubt(span, None)
                })
                .collect()
        });
        for txn in doubt {
            if let Ok(TxnVerdict::Committed) = self.call(txn_home(txn), TxnStatus { txn }).await {
                self.complete_here(txn, true).await?;
            }
        }
        Ok(())
    }

    pub(crate) fn check_not_done(&self, txn: u64) -> FsResult<()> {
        if self.txns.done.contains(txn) {
            return Err(FsError::new(
                Errno::Inval,
                format!(
                    "transaction {txn:016x} was already decided: a write under it can no longer be part of it"
                ),
            ));
        }
        Ok(())
    }

    /// Lays `txn`'s pending state into this node's maps (`commit`) or drops it. Idempotent.
    ///
    /// Sizes first, then ownership and the end of the pending rows in one batch: until the
    /// second step the overlay is still pending here, so a query that reads the new size
    /// finds the transaction named in the owners' answer and asks for its decision; a restart
    /// in between completes it again.
    pub(crate) async fn complete_here(&self, txn: u64, commit: bool) -> FsResult<()> {
        {
            // Under the ownership and catalogue locks, as the attaches and catalogue changes
            // check it.
            self.shards.ownership(|_| {
                self.catalogue.table(|_| {
                    self.txns.entries(|_| {
                        self.txns.done.insert(txn);
                    })
                })
            })
        }
        // Files it created first: their entries and inodes are in place (or gone) before the
        // pending rows that name them are forgotten. The store writes in the order it is
        // given, so one wait at the end makes all of it durable: a crash before then loses a
        // tail of the completion, which the next one (from the decision record) redoes.
        let entries = self.complete_entries(txn, commit).await?;
        if !commit {
            let (durable, logs) = {
                let (logs, ops) = self
                    .txns
                    .pending(|pending| (pending.logs_of(txn), pending.abort(txn)));
                let catalogue = self.complete_catalogue(txn, false);
                let ops = ops
                    .into_iter()
                    .map(DbOp::from)
                    .chain(catalogue.into_iter().map(DbOp::from))
                    .collect();
                (self.store.submit(ops), logs)
            };
            durable.durable().await?;
            self.release_aborted_logs(logs);
            return Ok(());
        }
        let (sizes, pfs_cuts) = self
            .txns
            .pending(|pending| (pending.sizes_of(txn), pending.pfs_cuts_of(txn)));
        // Their bytes change now: no longer what a flush published.
        for (ino, _) in &sizes {
            self.flush_marks(*ino, super::locality::FlushMark::Changed);
        }
        // Every size in one batch.
        let sizes = self.queue_namespace(|ns| {
            let now = super::namespace_shard::now_ns();
            let mut changes = Vec::new();
            for (ino, size) in sizes {
                match ns.set_size(ino, size, now) {
                    Ok((_, c)) => changes.extend(c),
                    // Unlinked meanwhile: nothing to extend.
                    Err(e) => tracing::debug!("extending {ino:#x} for {txn:016x}: {e}"),
                }
            }
            Ok(((), changes))
        })?;
        if !pfs_cuts.is_empty() {
            // The PFS copies are cut only after the sizes that cut them are durable.
            entries.durable().await?;
            sizes.1.durable().await?;
        }
        // The PFS copies of the files it cut lose the bytes beyond the cut (a read of a hole
        // would find them there otherwise): the copy under the name the file had, if the name
        // (as the decision left it) still leads to it, out of a flush's way. Idempotent: a
        // copy is only ever shortened.
        let decided = TxnView {
            viewer: None,
            committed: vec![txn],
        };
        for (ino, p, at) in pfs_cuts {
            if self
                .lookup(&decided, &p)
                .await?
                .is_none_or(|(d, _)| d.ino != ino)
            {
                continue;
            }
            self.flush_locks
                .serialized(ino, self.on_pfs(&p, move |pfs, p| pfs.truncate(p, at)))
                .await?;
        }
        let (durable, tell) = self.shards.ownership(|own| {
            self.txns.pending(|pending| {
                let (changes, forget) = pending.commit(txn, own);
                let catalogue = self.complete_catalogue(txn, true);
                let mut keys: Vec<(u64, u64)> = changes
                    .iter()
                    .map(|c| match c {
                        OwnerChange::Put { ino, stripe, .. }
                        | OwnerChange::Del { ino, stripe, .. } => (*ino, *stripe),
                    })
                    .collect();
                keys.sort_unstable();
                keys.dedup();
                let tell = self.shards.callbacks(|cb| {
                    let tell = cb.change(keys.iter().copied());
                    cb.mark(tell.version, &keys, None);
                    tell
                });
                let ops = changes
                    .into_iter()
                    .map(DbOp::from)
                    .chain(catalogue.into_iter().map(DbOp::from))
                    .chain(forget.into_iter().map(DbOp::from))
                    .collect();
                (self.store.submit(ops), tell)
            })
        });
        durable.durable().await?;
        self.catalogue.tell_changed();
        self.tell_holders(tell).await;
        Ok(())
    }

    /// Gives back the space of the logs an aborted transaction wrote (`logs`, by file, as its
    /// pending state here named them): each log's node releases it once nothing owns a byte
    /// of it, as it releases a log a migration moved away from. The release task tells the
    /// nodes, so that the completion does not wait on a node that may be down. Best effort: a
    /// log not released stays until its file goes.
    fn release_aborted_logs(&self, logs: BTreeMap<u64, Vec<Owner>>) {
        let out = logs
            .into_iter()
            .flat_map(|(ino, owners)| super::migrate::release_requests(ino, owners));
        self.releases.send(out);
    }

    /// Of `txns` (other transactions' state met by a read or a change here), those prepared
    /// on this node are resolved by their homes and, if decided, completed here first: what
    /// is read next includes exactly the transactions decided before it. One not prepared
    /// here is undecided (a home decides only once every node prepared). Fails with `EAGAIN`
    /// when a home cannot be reached.
    pub(crate) async fn complete_decided(&self, mut txns: Vec<u64>) -> FsResult<()> {
        if txns.is_empty() {
            return Ok(());
        }
        txns.sort_unstable();
        txns.dedup();
        // One being completed here already is left to that completion (which may be what
        // asked, through a file it drops).
        txns.retain(|t| !self.txns.done.contains(*t));
        txns.retain(|t| self.txns.is_prepared(*t));
        for txn in txns {
            let status = self.call(txn_home(txn), TxnStatus { txn });
            let verdict = tokio::time::timeout(RESOLVE_WAIT, status)
                .await
                .unwrap_or_else(|_| Err(undecidable(txn)))
                .map_err(|_| undecidable(txn))?;
            match verdict {
                TxnVerdict::Committed => self.complete_here(txn, true).await?,
                TxnVerdict::Aborted => self.complete_here(txn, false).await?,
                // Undecided: not part of what is read now. Unknown: an orphan the resolver
                // drops (a decided one is completed everywhere before its home forgets it).
                TxnVerdict::Undecided | TxnVerdict::Unknown => {}
            }
        }
        Ok(())
    }

    /// The view a client's queries use: its connection's transaction.
    pub(crate) fn view_of(&self, client: u64) -> TxnView {
        TxnView {
            viewer: self.txns.member(client),
            committed: Vec::new(),
        }
    }

    /// Of the transactions a query left out, those decided to commit by now (their homes
    /// say so): the query is asked again with them included. One left out that is still
    /// undecided now was undecided when every part of the answer was given, so no part can
    /// have included it. `None`: a home no longer knows one (finished long ago: its state is
    /// gone from every shard by then), or cannot be reached: ask again.
    pub(crate) async fn decided_since(&self, view: &TxnView, excluded: &[u64]) -> Option<Vec<u64>> {
        let mut asked: Vec<u64> = excluded
            .iter()
            .copied()
            .filter(|t| !view.committed.contains(t) && Some(*t) != view.viewer)
            .collect();
        asked.sort_unstable();
        asked.dedup();
        // Bounded: a home whose host is gone would hold the query for the peer timeout.
        let answers = asked.iter().map(|t| async move {
            let status = self.call(txn_home(*t), TxnStatus { txn: *t });
            tokio::time::timeout(RESOLVE_WAIT, status)
                .await
                .unwrap_or_else(|_| Err(undecidable(*t)))
        });
        let answers = futures::future::join_all(answers).await;
        if answers
            .iter()
            .any(|a| matches!(a, Ok(TxnVerdict::Unknown) | Err(_)))
        {
            return None;
        }
        Some(
            asked
                .into_iter()
                .zip(answers)
                .filter(|(_, a)| matches!(a, Ok(TxnVerdict::Committed)))
                .map(|(t, _)| t)
                .collect(),
        )
    }

    /// An inode's attributes as `viewer` sees them, the decision of any transaction that
    /// extended it taken into account.
    pub(crate) async fn inode_get_as(&self, view: &TxnView, ino: u64) -> FsResult<AttrAs> {
        let shard = tessera_core::placement::ino_shard(ino);
        let mut view = view.clone();
        let started = crate::clock::now();
        loop {
            let got = self
                .call(
                    shard,
                    InodeGetAs {
                        ino,
                        view: view.clone(),
                    },
                )
                .await?;
            match self.decided_since(&view, &got.excluded).await {
                Some(newly) if newly.is_empty() => return Ok(got),
                Some(newly) => view.committed.extend(newly),
                None if crate::clock::since(started) >= RESOLVE_WAIT => {
                    return Err(undecidable(ino));
                }
                None => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    }

    /// Until shutdown: resolves the transactions this node holds state of by their homes'
    /// word. One decided is completed here (a completion that did not arrive, or a restart
    /// between prepare and completion); one its home does not know was aborted and
    /// forgotten, or never opened (presumed abort).
    pub async fn resolve_pending(self: Arc<Self>) {
        loop {
            tokio::time::sleep(RESOLVE_EVERY).await;
            let mut txns: Vec<u64> = self
                .txns
                .pending(|p| p.transactions().map(|(t, _)| t).collect());
            txns.extend(self.catalogue.table(|t| t.transactions()));
            txns.extend(self.txns.entries(|e| e.transactions()));
            txns.sort_unstable();
            txns.dedup();
            for txn in txns {
                let verdict = match self.call(txn_home(txn), TxnStatus { txn }).await {
                    Ok(v) => v,
                    Err(_) => continue,
                };
                let commit = match verdict {
                    TxnVerdict::Undecided => continue,
                    TxnVerdict::Committed => true,
                    TxnVerdict::Aborted | TxnVerdict::Unknown => false,
                };
                if let Err(e) = self.complete_here(txn, commit).await {
                    tracing::warn!("completing transaction {txn:016x}: {e}");
                }
            }
        }
    }
}
