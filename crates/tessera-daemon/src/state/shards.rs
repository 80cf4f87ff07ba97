//! This node's shards of the namespace and of file ownership, and who holds copies of its
//! ownership stripes: the state the namespace, ownership, migration and transaction services
//! change together. Each is reached only inside a closure, under its lock, in the order of
//! [`super::ordered::Rank`] (namespace, ownership, then the transactions' pending overlay
//! and the catalogue, then callbacks).

use super::cache::Callbacks;
use super::ordered::{Ordered, Rank};
use tessera_core::namespace::Namespace;
use tessera_core::ownership::Ownership;

pub struct Shards {
    namespace: Ordered<Namespace>,
    ownership: Ordered<Ownership>,
    callbacks: Ordered<Callbacks>,
}

impl Shards {
    pub fn new(namespace: Namespace, ownership: Ownership, callbacks: Callbacks) -> Shards {
        Shards {
            namespace: Ordered::new(Rank::Namespace, namespace),
            ownership: Ordered::new(Rank::Ownership, ownership),
            callbacks: Ordered::new(Rank::Callbacks, callbacks),
        }
    }

    /// Runs `f` on the namespace shard (entries and inodes), under its lock.
    pub fn namespace<R>(&self, f: impl FnOnce(&mut Namespace) -> R) -> R {
        self.namespace.with(f)
    }

    /// Runs `f` on the ownership maps of this node's stripes, under their lock.
    pub fn ownership<R>(&self, f: impl FnOnce(&mut Ownership) -> R) -> R {
        self.ownership.with(f)
    }

    /// Runs `f` on the record of who holds copies of this node's stripes, under its lock.
    pub fn callbacks<R>(&self, f: impl FnOnce(&mut Callbacks) -> R) -> R {
        self.callbacks.with(f)
    }
}
