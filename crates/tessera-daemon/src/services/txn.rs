//! The transaction service, client side (D2T): a process opens a transaction (this
//! daemon becomes its home), joins one (its connection's attaches and size changes are then
//! pending under it, and its queries see them), and asks for the decision.
//!
//! How the transaction library's processes become members all at once (ids reserved ahead,
//! one enrollment at begin) is in [`super::txn_enroll`]; the home's part (membership, the
//! two-phase commit, status) in [`super::txn_home`]; what every node keeps pending, and
//! completes, in [`super::txn_shard`].

use crate::Node;
use crate::rpc::{ServeClient, ServePeer};
use crate::state::ordered::{Ordered, Rank};
use crate::store::{DbOp, MetaKey};
use std::sync::{Arc, Mutex};
use tessera_core::txn_entries::PendingEntries;
use tessera_core::txn_pending::PendingOwnership;
use tessera_core::txn_reserved::ReservedIds;
use tessera_core::{Errno, FsError, FsResult};
use tessera_proto::{
    TxnDecide, TxnHomeDecide, TxnJoin, TxnMember, TxnMembers, TxnOpen, txn_home, txn_id,
};

/// Everything a daemon keeps of transactions.
pub struct Txns {
    /// What transactions hold back on this node's shards (ranked after the ownership maps).
    pending: Ordered<PendingOwnership>,
    /// The entries of files transactions created, on this namespace shard (ranked after the
    /// namespace shard and the catalogue).
    entries: Ordered<PendingEntries>,
    /// The transactions this node is the home of, and the outcomes of those it finished.
    pub homes: super::txn_homes::Homes,
    /// Which transaction each client of this node is a member of, and the leaves to tell.
    pub members: super::txn_members::Members,
    /// Transactions completed here since start: a late attach under one is refused.
    pub done: super::txn_members::Completed,
    next: Mutex<u64>,
    /// Ids handed out ahead ([`tessera_proto::TxnReserve`]) and not opened yet. In memory: after a restart
    /// a job's reserved ids are refused (its processes were cut off from this home anyway).
    reserved: Mutex<ReservedIds>,
    epoch: std::time::Instant,
}

impl Txns {
    pub fn new(pending: PendingOwnership, entries: PendingEntries, next: u64) -> Txns {
        Txns {
            pending: Ordered::new(Rank::Pending, pending),
            entries: Ordered::new(Rank::Entries, entries),
            homes: Default::default(),
            members: Default::default(),
            done: Default::default(),
            next: Mutex::new(next.max(1)),
            reserved: Mutex::new(ReservedIds::default()),
            epoch: crate::clock::now(),
        }
    }

    /// Takes the next `count` transaction numbers: `f` gets the first and the counter after
    /// them, and runs under the counter's lock, so that the state writes it queues are in
    /// the order the numbers were taken.
    pub fn take_numbers<R>(&self, count: u64, f: impl FnOnce(u64, u64) -> R) -> R {
        let mut next = self.next.lock().expect("txn counter");
        let first = *next;
        *next += count;
        f(first, *next)
    }

    /// Records `count` ids from `first` as reserved, to be opened by their members.
    pub fn reserve(&self, first: u64, count: u64) {
        self.reserved
            .lock()
            .expect("reserved")
            .reserve(first, count);
    }

    /// Takes `txn` off the reserved ids; whether it was reserved (and not opened yet).
    pub fn take_reserved(&self, txn: u64) -> bool {
        self.reserved.lock().expect("reserved").take(txn)
    }

    /// Milliseconds since start, the clock of the homes' timeouts.
    pub fn now_ms(&self) -> u64 {
        crate::clock::since(self.epoch).as_millis() as u64
    }

    /// The transaction client `client`'s connection is a member of.
    pub fn member(&self, client: u64) -> Option<u64> {
        self.members.get(client).map(|(t, _)| t)
    }

    /// The log id client `client` writes under: its own, or the one of its transaction.
    pub fn log_of(&self, client: u64) -> u64 {
        self.members.get(client).map_or(client, |(_, log)| log)
    }

    /// Runs `f` on what transactions hold back on this node's stripes, under its lock.
    pub fn pending<R>(&self, f: impl FnOnce(&mut PendingOwnership) -> R) -> R {
        self.pending.with(f)
    }

    /// Runs `f` on the entries transactions created on this namespace shard, under their
    /// lock.
    pub fn entries<R>(&self, f: impl FnOnce(&mut PendingEntries) -> R) -> R {
        self.entries.with(f)
    }

    /// Whether this node holds pending state of `txn` (it is not complete here).
    pub fn holds(&self, txn: u64) -> bool {
        self.pending(|p| p.transactions().any(|(t, _)| t == txn))
    }

    /// Whether `txn` is prepared on this node (closed to further changes).
    pub fn is_prepared(&self, txn: u64) -> bool {
        self.pending(|p| {
            p.transactions()
                .any(|(t, s)| t == txn && s == tessera_core::txn_pending::ShardTxn::Prepared)
        })
    }
}

impl ServeClient<TxnOpen> for Node {
    async fn serve_client(&self, _: u64, _: TxnOpen) -> FsResult<u64> {
        let (txn, durable) = self.txns.take_numbers(1, |n, after| {
            let txn = txn_id(self.id, n);
            let ops = vec![DbOp::SetMeta(MetaKey::NextTxn, after)];
            (txn, self.open_home(txn, ops))
        });
        durable.durable().await?;
        Ok(txn)
    }
}

impl ServeClient<TxnJoin> for Node {
    async fn serve_client(&self, client: u64, r: TxnJoin) -> FsResult<u64> {
        let before = self.txns.members.get(client);
        if let (Some((txn, log)), Some(want)) = (before, r.txn)
            && txn == want
        {
            return Ok(log);
        }
        let Some(txn) = r.txn else {
            self.txns.members.set(client, None);
            if let Some((old, _)) = before {
                self.leave_txn(old, client);
            }
            return Ok(client);
        };
        self.check_txn_id(txn)?;
        let log = match r.log {
            Some(log) if self.issued_client_id(log) && !self.clients.is_live(log) => log,
            Some(log) => {
                return Err(FsError::new(
                    Errno::Inval,
                    format!(
                        "log id {log} was not handed out by node {} to a transaction",
                        self.id
                    ),
                ));
            }
            None => self.new_client_id().await?,
        };
        let join = TxnMember {
            txn,
            node: self.id,
            client,
            joined: true,
        };
        // Counted here first: the home's check of its members must never find a member it
        // registered unknown here.
        self.txns.members.set(client, Some((txn, log)));
        if let Err(e) = self.call(txn_home(txn), join).await {
            self.txns.members.set(client, before);
            return Err(e);
        }
        if let Some((old, _)) = before {
            self.leave_txn(old, client);
        }
        Ok(log)
    }
}

impl ServePeer<TxnMembers> for Node {
    async fn serve_peer(&self, r: TxnMembers) -> FsResult<Vec<u64>> {
        Ok(self.txns.members.still_in(r.txn, r.clients))
    }
}

impl ServeClient<TxnDecide> for Node {
    async fn serve_client(&self, _: u64, r: TxnDecide) -> FsResult<()> {
        self.check_txn_id(r.txn)?;
        let decide = TxnHomeDecide {
            txn: r.txn,
            commit: r.commit,
            reasons: r.reasons,
        };
        self.call(txn_home(r.txn), decide).await
    }
}

impl Node {
    /// A member's change failed after part of it took effect on some shards: `txn` can no
    /// longer commit whole, so it is aborted, with the failure as the reason its processes
    /// are told.
    pub(crate) async fn doom(&self, txn: u64, failure: &FsError) {
        let abort = TxnHomeDecide {
            txn,
            commit: false,
            reasons: vec![format!(
                "a change was made on some daemons and not on others: {failure}"
            )],
        };
        if let Err(e) = self.call(txn_home(txn), abort).await {
            tracing::warn!("aborting transaction {txn:016x} after a partial change: {e}");
        }
    }

    /// A transaction id from the wire must name a home in this instance.
    pub(crate) fn check_txn_id(&self, txn: u64) -> FsResult<()> {
        if txn_home(txn) >= self.cfg.nodes {
            return Err(FsError::new(
                Errno::Inval,
                format!(
                    "transaction {txn:016x} names home node {}, but this instance has {} nodes",
                    txn_home(txn),
                    self.cfg.nodes
                ),
            ));
        }
        Ok(())
    }

    /// Queues telling `txn`'s home that `client` is no longer a member (see
    /// [`Node::tell_leaves`]).
    pub(crate) fn leave_txn(&self, txn: u64, client: u64) {
        // Completed here means decided: its home counts members only while it is open.
        if self.txns.done.contains(txn) {
            return;
        }
        self.txns.members.left(txn, client);
    }

    /// Until shutdown: tells the homes which members left (best effort: a home that cannot
    /// be reached counts its members by asking, and times the transaction out on its own).
    pub async fn tell_leaves(self: Arc<Self>) {
        loop {
            let leaves = self.txns.members.leaves_to_tell().await;
            let told = leaves.iter().map(|(txn, client)| {
                let leave = TxnMember {
                    txn: *txn,
                    node: self.id,
                    client: *client,
                    joined: false,
                };
                self.call(txn_home(*txn), leave)
            });
            for ((txn, client), r) in leaves.iter().zip(futures::future::join_all(told).await) {
                if let Err(e) = r {
                    tracing::debug!(
                        "telling the home of {txn:016x} that client {client} left: {e}"
                    );
                }
            }
        }
    }

    /// The client's connection ended: it leaves its transaction. The log id it wrote under
    /// if that transaction is still undecided here: what it left unpublished there is not
    /// published (its writes count only if published before its vote). `None`: what it left
    /// is its own.
    pub async fn txn_client_gone(&self, client: u64) -> Option<u64> {
        let (txn, log) = self.txns.members.set(client, None)?;
        self.leave_txn(txn, client);
        // A member of a transaction completed here had left it (its library leaves without
        // telling the daemon until its next call): what it wrote since is its own.
        (!self.txns.done.contains(txn)).then_some(log)
    }
}
