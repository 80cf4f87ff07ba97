//! Leased caches of remote ownership stripes, kept coherent by callbacks.
//!
//! A query for a stripe held by another daemon costs a round trip through that daemon. A
//! coordinator may instead keep a copy of the whole stripe, fetched once, for a lease:
//!
//! * the shard remembers who holds a copy ([`Callbacks`]) and, before it acknowledges any change
//!   to that stripe (attach, detach, truncate, removal), tells each holder to drop it and waits
//!   for the answer; a holder that cannot be reached is waited out until its lease ends. A
//!   holder stays on the list until it has confirmed that it dropped its copy: a second change
//!   that comes while the first one's message is still on its way must wait for it too (it
//!   used to find no holder and be acknowledged while the stale copy still answered queries);
//! * the coordinator ([`StripeCache`]) uses a copy only within its lease (counted from before
//!   it asked, so it ends no later than the shard's count), and ignores a copy older than an
//!   invalidation it has already seen (answers and invalidations travel on different
//!   connections and may cross).
//!
//! So a query that happens after an attach was acknowledged never sees the state before it,
//! which is all that POSIX and commit consistency need from queries. Versions come from one
//! counter per shard that starts at the wall-clock time in nanoseconds, so they keep growing
//! across restarts; a restarted shard that had state before waits one lease before it
//! acknowledges changes, since it has forgotten who held copies.

use std::collections::HashMap;
use std::time::{Duration, Instant};
use tessera_core::{Owner, RunMap};

/// How long a copy may be used without hearing from its shard.
pub const LEASE: Duration = Duration::from_secs(2);
/// Stripes with more runs than this are answered by range, not copied whole.
pub const MAX_CACHED_RUNS: usize = 1 << 16;

type Key = (u64, u64);

/// A copy to drop: its stripe, its holder, and when its lease ends anyway.
pub struct Holder {
    pub key: Key,
    pub node: u32,
    pub expires: Instant,
}

/// What a change must do before it is acknowledged: tell these holders about `version`.
pub struct Change {
    pub version: u64,
    pub holders: Vec<Holder>,
}

/// A copy a node holds: until when, and the version it was granted at.
#[derive(Clone, Copy, Debug)]
struct Lease {
    node: u32,
    expires: Instant,
    granted: u64,
}

/// Shard side: who holds copies of which stripes, and the version at which each stripe (or
/// its whole file) last changed, for the conditional attaches of migration: a copy made at
/// version `v` may replace a stripe's owners only if the stripe has not changed since.
pub struct Callbacks {
    version: u64,
    holders: HashMap<Key, Vec<Lease>>,
    stripe_changed: HashMap<Key, u64>,
    file_changed: HashMap<u64, u64>,
    /// The first version of this run of the shard: changes before it were not recorded.
    floor: u64,
    /// Until when changes wait, after a restart that forgot the holders.
    quiet_until: Instant,
}

impl Callbacks {
    /// `restarted`: this shard had state before, so copies of it may exist somewhere.
    pub fn new(restarted: bool) -> Self {
        let now_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        Callbacks {
            version: now_ns,
            holders: HashMap::new(),
            stripe_changed: HashMap::new(),
            file_changed: HashMap::new(),
            floor: now_ns,
            quiet_until: if restarted {
                crate::clock::now() + LEASE
            } else {
                crate::clock::now()
            },
        }
    }

    /// Records that `node` takes a copy of `key` now; returns the version of that copy.
    pub fn grant(&mut self, key: Key, node: u32) -> u64 {
        let now = crate::clock::now();
        let list = self.holders.entry(key).or_default();
        list.retain(|l| l.node != node && l.expires > now);
        list.push(Lease {
            node,
            expires: now + LEASE,
            granted: self.version,
        });
        self.version
    }

    /// A change to `keys` (all of them are about to change): returns the new version and the
    /// holders to tell, with their lease ends. They stay holders until they confirm
    /// ([`Callbacks::dropped`]) or their lease ends.
    pub fn change(&mut self, keys: impl IntoIterator<Item = Key>) -> Change {
        self.version += 1;
        let now = crate::clock::now();
        let mut holders = Vec::new();
        for key in keys {
            if let Some(list) = self.holders.get_mut(&key) {
                list.retain(|l| l.expires > now);
                holders.extend(list.iter().map(|l| Holder {
                    key,
                    node: l.node,
                    expires: l.expires,
                }));
                if list.is_empty() {
                    self.holders.remove(&key);
                }
            }
        }
        Change {
            version: self.version,
            holders,
        }
    }

    /// The current version: a state read now is the state "at" it.
    pub fn current(&self) -> u64 {
        self.version
    }

    /// Records that a change at `version` (from [`Callbacks::change`]) touched these stripes,
    /// or (`whole`) every stripe of this file.
    pub fn mark(&mut self, version: u64, stripes: &[Key], whole: Option<u64>) {
        for k in stripes {
            self.stripe_changed.insert(*k, version);
        }
        if let Some(ino) = whole {
            self.file_changed.insert(ino, version);
        }
    }

    /// Whether stripe `key` is as it was at `version`.
    pub fn unchanged_since(&self, key: Key, version: u64) -> bool {
        version >= self.floor
            && version <= self.version
            && self.stripe_changed.get(&key).is_none_or(|v| *v <= version)
            && self.file_changed.get(&key.0).is_none_or(|v| *v <= version)
    }

    /// `node` confirmed it dropped its copy of `key` for the change at `version`: copies it was
    /// granted before that change are gone (a copy granted since is newer, and kept).
    pub fn dropped(&mut self, key: Key, node: u32, version: u64) {
        if let Some(list) = self.holders.get_mut(&key) {
            list.retain(|l| l.node != node || l.granted >= version);
            if list.is_empty() {
                self.holders.remove(&key);
            }
        }
    }

    /// The stripes of `ino` that someone holds a copy of.
    pub fn held_stripes(&self, ino: u64) -> Vec<Key> {
        self.holders
            .keys()
            .filter(|(i, _)| *i == ino)
            .copied()
            .collect()
    }

    /// How long a change must still wait after a restart (zero normally).
    pub fn quiet_for(&self) -> Duration {
        self.quiet_until
            .saturating_duration_since(crate::clock::now())
    }
}

/// Coordinator side: the copies of remote stripes this node holds, shared by its requests
/// (a [`StripeCache`] behind its lock; every operation takes the lock once).
#[derive(Default)]
pub struct StripeCopies {
    cache: std::sync::Mutex<StripeCache>,
}

impl StripeCopies {
    /// The runs of the copy of `key` within `[start, end)`, with the copy's version, if a
    /// copy within its lease is held.
    pub fn runs_within(
        &self,
        key: Key,
        start: u64,
        end: u64,
    ) -> Option<(Vec<tessera_core::OwnedRun>, u64)> {
        let mut cache = self.cache.lock().expect("stripe copies");
        let (map, version) = cache.get_versioned(key)?;
        let runs = map
            .overlapping(start, end)
            .into_iter()
            .map(tessera_core::OwnedRun::from)
            .collect();
        Some((runs, version))
    }

    /// Whether every copy `(key, version)` read is still held within its lease.
    pub fn all_still_held(&self, copies: &[(Key, u64)]) -> bool {
        let cache = self.cache.lock().expect("stripe copies");
        copies.iter().all(|(k, v)| cache.still_holds(*k, *v))
    }

    /// See [`StripeCache::put`].
    pub fn put(&self, key: Key, map: RunMap<Owner>, version: u64, asked: Instant) {
        self.cache
            .lock()
            .expect("stripe copies")
            .put(key, map, version, asked);
    }

    /// See [`StripeCache::invalidate`].
    pub fn invalidate(&self, key: Key, version: u64) {
        self.cache
            .lock()
            .expect("stripe copies")
            .invalidate(key, version);
    }

    /// Lookups answered by a copy, and lookups that found none, since start.
    pub fn counts(&self) -> (u64, u64) {
        self.cache.lock().expect("stripe copies").counts()
    }
}

/// Coordinator side: copies of remote stripes.
#[derive(Default)]
pub struct StripeCache {
    copies: HashMap<Key, (RunMap<Owner>, u64, Instant)>,
    dropped: HashMap<Key, u64>,
    /// Lookups answered by a copy, and lookups that found none (reported in the status).
    hits: u64,
    misses: u64,
}

impl StripeCache {
    /// The copy of `key`, if it is still within its lease (counted as a hit or a miss).
    pub fn get(&mut self, key: Key) -> Option<&RunMap<Owner>> {
        self.get_versioned(key).map(|(map, _)| map)
    }

    /// The copy of `key` and its version, as [`StripeCache::get`].
    pub fn get_versioned(&mut self, key: Key) -> Option<(&RunMap<Owner>, u64)> {
        match self.copies.get(&key) {
            Some((map, version, expires)) if *expires > crate::clock::now() => {
                self.hits += 1;
                Some((map, *version))
            }
            _ => {
                self.misses += 1;
                None
            }
        }
    }

    /// Whether the copy of `key` at `version` is still held and within its lease: no change
    /// of the stripe was acknowledged since it was read.
    pub fn still_holds(&self, key: Key, version: u64) -> bool {
        self.copies
            .get(&key)
            .is_some_and(|(_, v, expires)| *v == version && *expires > crate::clock::now())
    }

    /// Lookups answered by a copy, and lookups that found none, since start.
    pub fn counts(&self) -> (u64, u64) {
        (self.hits, self.misses)
    }

    /// Keeps a copy fetched at `asked` with `version`, unless an invalidation at least as new
    /// was already seen.
    pub fn put(&mut self, key: Key, map: RunMap<Owner>, version: u64, asked: Instant) {
        if self.dropped.get(&key).is_some_and(|v| *v >= version) {
            return;
        }
        self.copies.insert(key, (map, version, asked + LEASE));
    }

    /// The shard changed `key` at `version`: drop the copy and refuse older ones.
    pub fn invalidate(&mut self, key: Key, version: u64) {
        self.copies.remove(&key);
        let v = self.dropped.entry(key).or_insert(0);
        *v = (*v).max(version);
        // Keep the bookkeeping small: expired copies and stale markers go.
        if self.copies.len() > 4096 {
            let now = crate::clock::now();
            self.copies.retain(|_, (_, _, e)| *e > now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Owner = Owner { node: 1, client: 1 };

    fn map() -> RunMap<Owner> {
        let mut m = RunMap::new();
        m.insert(tessera_core::Run::single(0, 10), A);
        m
    }

    #[test]
    fn holders_are_told_once_and_versions_grow() {
        let mut cb = Callbacks::new(false);
        let v1 = cb.grant((1, 0), 2);
        cb.grant((1, 0), 3);
        cb.grant((1, 5), 2);
        let change = cb.change([(1, 0)]);
        assert!(change.version > v1);
        let mut nodes: Vec<u32> = change.holders.iter().map(|h| h.node).collect();
        nodes.sort_unstable();
        assert_eq!(nodes, vec![2, 3]);
        for n in [2, 3] {
            cb.dropped((1, 0), n, change.version);
        }
        assert!(
            cb.change([(1, 0)]).holders.is_empty(),
            "holders that confirmed no longer hold copies"
        );
        assert_eq!(cb.held_stripes(1), vec![(1, 5)]);
        assert_eq!(cb.quiet_for(), Duration::ZERO);
        assert!(Callbacks::new(true).quiet_for() > Duration::from_secs(1));
    }

    #[test]
    fn a_holder_is_told_by_every_change_until_it_confirms() {
        let mut cb = Callbacks::new(false);
        cb.grant((1, 0), 2);
        let first = cb.change([(1, 0)]);
        assert_eq!(first.holders.len(), 1);
        // The first change's message is still on its way: a second change must wait for the
        // holder too, or it would be acknowledged while the stale copy still answers.
        let second = cb.change([(1, 0)]);
        assert_eq!(
            second.holders.len(),
            1,
            "a holder that had not confirmed was forgotten"
        );
        cb.dropped((1, 0), 2, first.version);
        assert!(cb.change([(1, 0)]).holders.is_empty());
        // A copy granted after a change survives the confirmation of that change.
        let v = cb.grant((1, 0), 3);
        cb.dropped((1, 0), 3, v);
        assert_eq!(cb.change([(1, 0)]).holders.len(), 1);
    }

    #[test]
    fn a_copy_older_than_an_invalidation_is_refused() {
        let mut c = StripeCache::default();
        c.invalidate((1, 0), 10);
        c.put((1, 0), map(), 9, crate::clock::now());
        assert!(
            c.get((1, 0)).is_none(),
            "an answer that crossed an invalidation was kept"
        );
        c.put((1, 0), map(), 11, crate::clock::now());
        assert!(c.get((1, 0)).is_some());
        c.invalidate((1, 0), 12);
        assert!(c.get((1, 0)).is_none());
        // An expired lease is not used.
        c.put((2, 0), map(), 20, crate::clock::now() - LEASE);
        assert!(c.get((2, 0)).is_none());
    }
}
