//! The ownership service, shard side: the stripes of ownership maps this node holds, and the
//! leases under which other nodes cache them. A change is queued to the store under the
//! ownership lock; the holders of cached copies are told before it is acknowledged.

use crate::Node;
use crate::rpc::ServePeer;
use crate::state::cache::Change;
use crate::store::DbOp;
use tessera_core::ownership::{OwnerChange, Ownership};
use tessera_core::{Errno, FsError, FsResult, Run};
use tessera_proto::{
    DropFile, Invalidate, OwnAttach, OwnDetach, OwnDetachFile, OwnFetchStripe, OwnQueryFile,
    OwnTruncate, OwnedPage, Stripe,
};

/// Which cached copies a change makes stale.
enum Stale {
    Stripe(u64, u64),
    File(u64),
}

impl ServePeer<OwnAttach> for Node {
    async fn serve_peer(&self, r: OwnAttach) -> FsResult<()> {
        check_runs(&r.runs, r.stripe, self.cfg.stripe_size)?;
        self.check_fences(r.ino, &r.fences, r.owner.node == self.id)?;
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
        self.change_ownership(Stale::File(r.ino), |own| ((), own.truncate(r.ino, r.size)))
            .await
    }
}

impl ServePeer<DropFile> for Node {
    async fn serve_peer(&self, r: DropFile) -> FsResult<()> {
        self.change_ownership(Stale::File(r.ino), |own| ((), own.drop_file(r.ino)))
            .await?;
        self.logs.drop_file(r.ino)
    }
}

impl ServePeer<OwnFetchStripe> for Node {
    async fn serve_peer(&self, r: OwnFetchStripe) -> FsResult<Stripe> {
        let own = self.own.lock().expect("own");
        let runs = own.query_stripe(r.ino, r.stripe);
        let cached = r.from != self.id && runs.len() <= crate::state::cache::MAX_CACHED_RUNS;
        // Granted under the ownership lock: no change can slip between map and lease.
        let version = if cached {
            self.callbacks
                .lock()
                .expect("callbacks")
                .grant((r.ino, r.stripe), r.from)
        } else {
            0
        };
        Ok(Stripe {
            runs,
            version,
            cached,
        })
    }
}

impl ServePeer<Invalidate> for Node {
    async fn serve_peer(&self, r: Invalidate) -> FsResult<()> {
        self.stripe_cache
            .lock()
            .expect("stripe cache")
            .invalidate((r.ino, r.stripe), r.version);
        Ok(())
    }
}

impl ServePeer<OwnQueryFile> for Node {
    async fn serve_peer(&self, r: OwnQueryFile) -> FsResult<OwnedPage> {
        let own = self.own.lock().expect("own");
        let (runs, resume) = own.query_file_page(r.ino, r.only, r.from, r.max as usize);
        Ok(OwnedPage { runs, resume })
    }
}

impl Node {
    /// Applies a change to this node's ownership shard, waits until it is durable, and tells
    /// the holders of the copies it makes stale before answering.
    async fn change_ownership<T>(
        &self,
        stale: Stale,
        change: impl FnOnce(&mut Ownership) -> (T, Vec<OwnerChange>),
    ) -> FsResult<T> {
        let (out, pending, tell) = {
            let mut own = self.own.lock().expect("own");
            let (out, ops) = change(&mut own);
            let mut cb = self.callbacks.lock().expect("callbacks");
            let tell = match stale {
                Stale::Stripe(ino, stripe) => cb.change([(ino, stripe)]),
                Stale::File(ino) => {
                    let keys = cb.held_stripes(ino);
                    cb.change(keys)
                }
            };
            let ops = ops.into_iter().map(DbOp::from).collect();
            (out, self.store.submit(ops), tell)
        };
        pending.durable().await?;
        self.tell_holders(tell).await;
        Ok(out)
    }

    /// Tells the holders of changed stripes to drop their copies before the change is
    /// acknowledged; a holder that cannot be reached is waited out until its lease ends. After
    /// a restart, changes first wait until every lease granted before it has ended.
    async fn tell_holders(&self, change: Change) {
        let quiet = self.callbacks.lock().expect("callbacks").quiet_for();
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
                    .callbacks
                    .lock()
                    .expect("callbacks")
                    .dropped(h.key, h.node, version),
                // Unreachable: its copy is dead when its lease ends.
                Err(_) => tokio::time::sleep_until(h.expires.into()).await,
            }
        });
        futures::future::join_all(calls).await;
    }
}

/// Runs from the wire must be well formed and inside the stripe they were sent for.
fn check_runs(runs: &[Run], stripe: u64, stripe_size: u64) -> FsResult<()> {
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
