//! Leases and fences: how a lock whose holder stopped answering is taken away safely.
//!
//! - **Renewal.** Every daemon renews, a few times per lease, its lease on each lock node
//!   where its clients hold or wait for locks ([`RenewLease`]). It notes, per lock node, the
//!   send time of the last renewal that was answered plus the lease: until then its locks
//!   there are surely still held, as the lock node counts the lease from when it heard the
//!   renewal, which is later.
//! - **Expiry.** Each lock node expires, as often, the holders not heard from for longer than
//!   the lease (`LockManager::expire`): their record locks and queued requests go at once;
//!   their list grants are revoked. The answer to every later renewal of that holder lists
//!   the revoked tokens, and the holder fences them before it trusts the renewed lease: a
//!   holder that resumes after a stop learns what it lost before it can publish under it.
//! - **Fencing.** A revoked grant's token is sent to every node ([`Fence`]); each stripe shard
//!   refuses from then on any attach carrying it. Only when every node that answers within a
//!   lease has the fence are the bytes granted to the next request. A node that does not
//!   answer (the stopped holder's own daemon, typically) is passed over; its shards are
//!   guarded by the holder-side check: a daemon refuses to publish its own clients' writes
//!   under a list lock once its own view of the lease has ended, and it ends sooner than the
//!   lock node's.

use crate::Node;
use crate::rpc::ServePeer;
use std::sync::Arc;
use tessera_core::lock_manager::Token;
use tessera_core::placement::ino_shard;
use tessera_core::{Errno, FsError, FsResult};
use tessera_proto::{Fence, RenewLease};

impl ServePeer<RenewLease> for Node {
    async fn serve_peer(&self, r: RenewLease) -> FsResult<Vec<Fence>> {
        Ok(self.locks.renewal_from(r.node))
    }
}

impl ServePeer<Fence> for Node {
    async fn serve_peer(&self, r: Fence) -> FsResult<()> {
        self.locks.fence(r.ino, r.token);
        Ok(())
    }
}

impl Node {
    /// Renews this node's leases and expires silent holders, until shutdown. Runs on every
    /// daemon: each is a holder for its clients and a lock node for its inodes.
    pub async fn keep_leases(self: Arc<Self>) {
        let period = self.lease() / 4;
        loop {
            tokio::time::sleep(period).await;
            self.renew_leases().await;
            let revoked = self.locks.expire_silent(self.cfg.lock_lease_ms);
            for r in revoked {
                tracing::warn!(
                    ino = r.ino,
                    token = r.token,
                    holder_pid = r.holder.pid,
                    "a list lock's holder was silent for longer than the lease: lock revoked"
                );
                tokio::spawn(self.clone().fence(r.ino, r.token));
            }
        }
    }

    /// Renews this node's lease on every lock node where its clients may hold locks.
    async fn renew_leases(&self) {
        let nodes = self.locks.lock_nodes();
        let renewals = nodes
            .into_iter()
            .map(|lock_node| self.renew_lease(lock_node));
        futures::future::join_all(renewals).await;
    }

    /// Renews this node's lease on `lock_node`; returns whether it was renewed. The tokens
    /// the lock node revoked are fenced here before the lease is extended, so an attach
    /// checked after the extension sees them.
    pub(crate) async fn renew_lease(&self, lock_node: u32) -> bool {
        let lease = self.lease();
        let sent = crate::clock::now();
        let call = self.call(lock_node, RenewLease { node: self.id });
        let Ok(Ok(revoked)) = tokio::time::timeout(lease / 2, call).await else {
            return false;
        };
        self.locks.renewed(lock_node, sent, lease, revoked);
        true
    }

    /// Whether this node's lease on `lock_node` is surely still valid for `margin` more.
    pub(crate) fn lease_valid_for(&self, lock_node: u32, margin: std::time::Duration) -> bool {
        self.locks
            .lease_until(lock_node)
            .is_some_and(|u| crate::clock::now() + margin <= u)
    }

    /// Sends the fence of a revoked token to every node, then frees the grant's bytes.
    async fn fence(self: Arc<Self>, ino: u64, token: Token) {
        let lease = self.lease();
        let calls = (0..self.cfg.nodes).map(|n| {
            let call = self.call(n, Fence { ino, token });
            async move {
                match tokio::time::timeout(lease, call).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => tracing::warn!(node = n, "fencing list lock {token}: {e}"),
                    Err(_) => tracing::warn!(
                        node = n,
                        "fencing list lock {token}: no answer within the lease; passed over"
                    ),
                }
            }
        });
        futures::future::join_all(calls).await;
        self.locks.free_fenced(ino, token);
    }

    /// Refuses an attach under list locks that were revoked (`fences` are their tokens): on
    /// every shard by the fences received, and for this node's own clients (`local`) also by
    /// this node's own view of its lease.
    pub fn check_fences(&self, ino: u64, fences: &[Token], local: bool) -> FsResult<()> {
        if fences.is_empty() {
            return Ok(());
        }
        let refused = |token: Token| {
            FsError::new(
                Errno::Stale,
                format!(
                    "writes made under list lock {token} of inode {ino} were refused: the lock was revoked when its holder's daemon did not renew its lease in time (lock_lease_ms = {}); lock again and redo them",
                    self.cfg.lock_lease_ms
                ),
            )
        };
        if let Some(t) = self.locks.first_fenced(ino, fences) {
            return Err(refused(t));
        }
        if local && !self.lease_valid_for(ino_shard(ino), std::time::Duration::ZERO) {
            return Err(refused(fences[0]));
        }
        Ok(())
    }
}
