//! The ownership service, shard side: the stripes of ownership maps this node holds, and the
//! leases under which other nodes cache them. A change is queued to the store under the
//! ownership lock; the holders of cached copies are told before it is acknowledged.

use crate::Node;
use crate::rpc::ServePeer;
use crate::state::cache::Change;
use crate::store::DbOp;
use tessera_core::ownership::{OwnerChange, Ownership};
use tessera_core::txn_pending::{PendingOwnership, Seen, Span};
use tessera_core::{Errno, FsError, FsResult, OwnedRun, Run};
use tessera_proto::{
    DropFile, Invalidate, OwnAttach, OwnDetach, OwnDetachFile, OwnFetchStripe, OwnQueryFile,
    OwnTruncate, OwnedPage, Stripe, TxnView,
};

/// Which cached copies a change makes stale.
pub(crate) enum Stale {
    Stripe(u64, u64),
    File(u64),
}

impl ServePeer<OwnAttach> for Node {
    async fn serve_peer(&self, r: OwnAttach) -> FsResult<()> {
        check_runs(&r.runs, r.stripe, self.cfg.stripe_size)?;
        self.check_fences(r.ino, &r.fences, r.owner.node == self.id)?;
        if let Some(txn) = r.txn {
            self.check_txn_id(txn)?;
            return self
                .attach_pending(txn, r.ino, r.stripe, r.owner, &r.runs)
                .await;
        }
        self.complete_decided_under(r.ino, r.stripe, &r.runs)
            .await?;
        let stale = Stale::Stripe(r.ino, r.stripe);
        self.change_ownership(stale, |own| {
            ((), own.attach(r.ino, r.stripe, r.owner, &r.runs))
        })
        .await
    }
}

impl ServePeer<OwnDetach> for Node {
    async fn serve_peer(&self, r: OwnDetach) -> FsResult<u64> {
        let stale = Stale::Stripe(r.ino, r.stripe);
        self.change_ownership(stale, |own| {
            own.detach(r.ino, r.stripe, r.owner, r.start, r.end)
        })
        .await
    }
}

impl ServePeer<OwnDetachFile> for Node {
    async fn serve_peer(&self, r: OwnDetachFile) -> FsResult<()> {
        self.change_ownership(Stale::File(r.ino), |own| {
            ((), own.detach_file(r.ino, r.owner))
        })
        .await
    }
}

impl ServePeer<OwnTruncate> for Node {
    async fn serve_peer(&self, r: OwnTruncate) -> FsResult<()> {
        // Made after every decision taken so far: a decided transaction's bytes here are
        // laid in first, so the truncate cuts them too.
        let touching = self.txns.pending(|p| p.touching_file(r.ino));
        self.complete_decided(touching).await?;
        self.change_ownership(Stale::File(r.ino), |own| ((), own.truncate(r.ino, r.size)))
            .await
    }
}

impl ServePeer<DropFile> for Node {
    async fn serve_peer(&self, r: DropFile) -> FsResult<()> {
        let touching = self.txns.pending(|p| p.touching_file(r.ino));
        self.complete_decided(touching).await?;
        self.change_ownership(Stale::File(r.ino), |own| ((), own.drop_file(r.ino)))
            .await?;
        self.release_files(&[r.ino])
    }
}

impl ServePeer<OwnFetchStripe> for Node {
    async fn serve_peer(&self, r: OwnFetchStripe) -> FsResult<Stripe> {
        self.shards.ownership(|own| {
            let (runs, excluded, cached) = self.txns.pending(|pending| {
                let (runs, excluded) = if pending.touches_stripe(r.ino, r.stripe) {
                    let ss = self.cfg.stripe_size;
                    let lo = r.stripe.saturating_mul(ss);
                    let span = Span {
                        ino: r.ino,
                        stripe: r.stripe,
                        start: lo,
                        end: lo.saturating_add(ss),
                    };
                    view_query(pending, own, span, &r.view)
                } else {
                    (own.query_stripe(r.ino, r.stripe), Vec::new())
                };
                // A copy never hides pending bytes without saying so: none is granted of a stripe a
                // transaction writes to (its first pending attach there dropped the copies), nor to
                // a member, whose view includes its own.
                let cached = r.from != self.id
                    && r.view == TxnView::default()
                    && !pending.touches_stripe(r.ino, r.stripe)
                    && runs.len() <= crate::state::cache::MAX_CACHED_RUNS;
                (runs, excluded, cached)
            });
            // Granted under the ownership lock: no change can slip between map and lease.
            let version = if cached {
                self.shards
                    .callbacks(|cb| cb.grant((r.ino, r.stripe), r.from))
            } else {
                0
            };
            Ok(Stripe {
                runs,
                version,
                cached,
                excluded,
            })
        })
    }
}

impl ServePeer<Invalidate> for Node {
    async fn serve_peer(&self, r: Invalidate) -> FsResult<()> {
        self.stripe_cache.invalidate((r.ino, r.stripe), r.version);
        Ok(())
    }
}

impl ServePeer<OwnQueryFile> for Node {
    async fn serve_peer(&self, r: OwnQueryFile) -> FsResult<OwnedPage> {
        self.shards.ownership(|own| {
            let (mut runs, mut resume) = own.query_file_page(r.ino, r.only, r.from, r.max as usize);
            self.txns.pending(|pending| {
                let stripes = pending.stripes_of(own, r.ino, self.cfg.stripe_size);
                if stripes.is_empty() {
                    return Ok(OwnedPage {
                        runs,
                        resume,
                        excluded: Vec::new(),
                    });
                }
                // Stripes some transaction writes to are answered from the view instead (runs are
                // cut at stripes, so each run lies in one).
                let ss = self.cfg.stripe_size;
                let limit = resume.unwrap_or(u64::MAX);
                runs.retain(|x| !stripes.contains(&(x.run.start / ss)));
                let mut excluded = Vec::new();
                for stripe in stripes {
                    let lo = stripe.saturating_mul(ss);
                    let hi = lo.saturating_add(ss);
                    if hi <= r.from || lo >= limit {
                        continue;
                    }
                    let span = Span {
                        ino: r.ino,
                        stripe,
                        start: lo,
                        end: hi,
                    };
                    let (seen, left_out) = view_query(pending, own, span, &r.view);
                    excluded.extend(left_out);
                    runs.extend(seen.into_iter().filter(|x| {
                        x.run.start >= r.from
                            && x.run.start < limit
                            && r.only.is_none_or(|o| x.owner == o)
                    }));
                }
                runs.sort_by_key(|x| x.run.start);
                if runs.len() > r.max as usize {
                    resume = Some(runs[r.max as usize].run.start);
                    runs.truncate(r.max as usize);
                }
                excluded.sort_unstable();
                excluded.dedup();
                Ok(OwnedPage {
                    runs,
                    resume,
                    excluded,
                })
            })
        })
    }
}

/// The owners of `span` as `view` sees them, and the transactions with bytes there it left
/// out.
pub(crate) fn view_query(
    pending: &PendingOwnership,
    own: &Ownership,
    span: Span,
    view: &TxnView,
) -> (Vec<OwnedRun>, Vec<u64>) {
    let committed = |t| view.committed.contains(&t);
    let (runs, seen) = pending.query(own, span, view.viewer, &committed);
    let excluded = seen
        .into_iter()
        .filter(|(_, s)| *s == Seen::Excluded)
        .map(|(t, _)| t)
        .collect();
    (runs, excluded)
}

impl Node {
    /// Applies a change to this node's ownership shard, waits until it is durable, and tells
    /// the holders of the copies it makes stale before answering. Every call counts as a
    /// change of its stripes, rows or not: an attach of the same owner's same range changes
    /// no row but does change the bytes readers get (migration's versions rely on it).
    pub(crate) async fn change_ownership<T>(
        &self,
        stale: Stale,
        change: impl FnOnce(&mut Ownership) -> (T, Vec<OwnerChange>),
    ) -> FsResult<T> {
        let (out, pending, tell) = self.shards.ownership(|own| {
            let (out, ops) = change(own);
            self.shards.callbacks(|cb| {
                let tell = match stale {
                    Stale::Stripe(ino, stripe) => {
                        let tell = cb.change([(ino, stripe)]);
                        cb.mark(tell.version, &[(ino, stripe)], None);
                        tell
                    }
                    Stale::File(ino) => {
                        let keys = cb.held_stripes(ino);
                        let tell = cb.change(keys);
                        cb.mark(tell.version, &[], Some(ino));
                        tell
                    }
                };
                let ops = ops.into_iter().map(DbOp::from).collect();
                (out, self.store.submit(ops), tell)
            })
        });
        pending.durable().await?;
        self.tell_holders(tell).await;
        Ok(out)
    }

    /// Tells the holders of changed stripes to drop their copies before the change is
    /// acknowledged; a holder that cannot be reached is waited out until its lease ends. After
    /// a restart, changes first wait until every lease granted before it has ended.
    pub(crate) async fn tell_holders(&self, change: Change) {
        let quiet = self.shards.callbacks(|cb| cb.quiet_for());
        if !quiet.is_zero() {
            tokio::time::sleep(quiet).await;
        }
        let version = change.version;
        let calls = change.holders.into_iter().map(|h| async move {
            let (ino, stripe) = h.key;
            let told = Invalidate {
                ino,
                stripe,
                version,
            };
            match self.call(h.node, told).await {
                Ok(()) => self
                    .shards
                    .callbacks(|cb| cb.dropped(h.key, h.node, version)),
                // Unreachable: its copy is dead when its lease ends.
                Err(_) => tokio::time::sleep_until(h.expires.into()).await,
            }
        });
        futures::future::join_all(calls).await;
    }
}

/// Runs from the wire must be well formed and inside the stripe they were sent for.
pub(crate) fn check_runs(runs: &[Run], stripe: u64, stripe_size: u64) -> FsResult<()> {
    let lo = stripe.saturating_mul(stripe_size);
    let hi = lo.saturating_add(stripe_size);
    for r in runs {
        if !r.is_valid() || r.start < lo || r.end() > hi {
            return Err(FsError::new(
                Errno::Inval,
                format!("attach run {r:?} is malformed or outside stripe {stripe} [{lo},{hi})"),
            ));
        }
    }
    Ok(())
}
