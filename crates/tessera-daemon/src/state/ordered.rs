//! Locks that are only ever held inside a closure, in one order across the daemon.
//!
//! The namespace and ownership shards, the transactions' pending overlay and entries, the
//! catalogue shard and the stripe-copy callbacks change together in compound operations (a
//! commit lays pending runs into the ownership map, writes the catalogue and tells the copy
//! holders, under all of those at once). Each lives in the service that owns it, behind an
//! [`Ordered`] lock: its state is reached only through [`Ordered::with`], so no guard or
//! reference leaves the service, and each lock has a [`Rank`]: a closure may take a lock of a
//! higher rank inside one of a lower rank, never the reverse. Debug builds (every test) check
//! the rule on each acquisition and panic naming both locks, so an inversion is found by the
//! first test that runs the path, not by a deadlock under load.

use std::cell::Cell;
use std::sync::Mutex;

/// The order locks are taken in: a lock is taken only while every lock held has a lower rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Rank {
    /// Entries and inodes of the namespace shard.
    Namespace = 1,
    /// The ownership maps of this node's stripes.
    Ownership = 2,
    /// What transactions hold back on this node's stripes and sizes.
    Pending = 3,
    /// This node's shard of the catalogue of variables.
    Catalogue = 4,
    /// The entries of files transactions created on this namespace shard.
    Entries = 5,
    /// Who holds copies of this node's stripes.
    Callbacks = 6,
}

thread_local! {
    /// The rank of the innermost ordered lock this thread holds (0: none).
    static HELD: Cell<u8> = const { Cell::new(0) };
}

/// A mutex whose state is reached only inside [`Ordered::with`], taken in [`Rank`] order.
pub struct Ordered<T> {
    rank: Rank,
    state: Mutex<T>,
}

impl<T> Ordered<T> {
    pub fn new(rank: Rank, state: T) -> Ordered<T> {
        Ordered {
            rank,
            state: Mutex::new(state),
        }
    }

    /// Runs `f` on the state under the lock. `f` may take locks of higher ranks; taking one
    /// of a rank not above every lock held is a bug (a panic in debug builds).
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let outer = HELD.with(Cell::get);
        debug_assert!(
            outer < self.rank as u8,
            "lock order: {:?} taken while holding a lock of rank {outer} (see state::ordered::Rank)",
            self.rank
        );
        let mut state = self.state.lock().unwrap_or_else(|poisoned| {
            panic!(
                "{:?} lock poisoned by an earlier panic: {poisoned}",
                self.rank
            )
        });
        // Restored on the way out, also when `f` unwinds: a caught panic (a test's) leaves
        // the thread's record true.
        let _restore = Restore(outer);
        HELD.with(|h| h.set(self.rank as u8));
        f(&mut state)
    }
}

/// Puts back the rank held before a lock was taken.
struct Restore(u8);

impl Drop for Restore {
    fn drop(&mut self) {
        HELD.with(|h| h.set(self.0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locks_nest_in_rank_order_and_release_in_reverse() {
        let ns = Ordered::new(Rank::Namespace, 1);
        let own = Ordered::new(Rank::Ownership, 2);
        let cb = Ordered::new(Rank::Callbacks, 3);
        let sum = ns.with(|a| own.with(|b| cb.with(|c| *a + *b + *c)));
        assert_eq!(sum, 6);
        assert_eq!(HELD.with(Cell::get), 0);
        // After the nest is left, a lower rank may be taken again.
        own.with(|b| *b += 1);
        assert_eq!(ns.with(|a| *a), 1);
        assert_eq!(own.with(|b| *b), 3);
    }

    #[test]
    #[cfg(debug_assertions)]
    fn an_inversion_panics_and_names_the_lock() {
        let own = Ordered::new(Rank::Ownership, ());
        let ns = Ordered::new(Rank::Namespace, ());
        let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            own.with(|_| ns.with(|_| ()));
        }))
        .expect_err("namespace inside ownership must panic");
        let msg = err.downcast_ref::<String>().expect("a formatted message");
        assert!(msg.contains("Namespace"), "{msg}");
        // The unwind restored the thread's record (the ownership lock itself is poisoned,
        // as after any panic under it).
        assert_eq!(HELD.with(Cell::get), 0);
        let own = Ordered::new(Rank::Ownership, ());
        ns.with(|_| own.with(|_| ()));
    }

    #[test]
    #[cfg(debug_assertions)]
    fn the_same_lock_twice_panics_instead_of_deadlocking() {
        let pending = Ordered::new(Rank::Pending, ());
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pending.with(|_| pending.with(|_| ()));
        }));
        assert!(r.is_err());
    }
}
