//! Leases on cached attributes, shard side: who may answer a stat from a copy, and whom a
//! change must tell first.
//!
//! A node that asks a namespace shard for an entry's attributes with a lease is recorded as a
//! holder of the entry's key ([`attr_key`] of its path) until the lease ends. Before the shard
//! acknowledges any change that touches the entry (its name, its inode, a transaction's
//! pending state of it), it tells every holder ([`AttrLeases::change`]) and waits until each
//! has confirmed or its lease has ended. A holder stays on the list until it confirms: a
//! second change that comes while the first one's message is still on its way waits for it
//! too. A holder is a daemon incarnation (node and boot): a restarted daemon cannot confirm
//! for the copies its previous run handed out, so it is waited out instead.
//!
//! Keys are hashes: two paths that share one only make their holders drop copies that were
//! still good, never keep one that went stale. Memory is bounded: at most `cap` leases, of
//! which expired ones are swept when the table is full; past that, no lease is granted and
//! the asker answers without caching.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::time::{Duration, Instant};

/// Hashes a `u64` key with one SplitMix64 round: the tables are hit once per listed entry,
/// where SipHash cost more than the rest of the grant.
#[derive(Default)]
pub struct Mix64Hasher(u64);

impl Hasher for Mix64Hasher {
    fn finish(&self) -> u64 {
        crate::placement::mix64(self.0)
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 ^= n;
    }
}

type U64Map<V> = HashMap<u64, V, BuildHasherDefault<Mix64Hasher>>;

/// The keys granted for one inode: almost always one name.
#[derive(Debug)]
enum Keys {
    One(u64),
    Many(Vec<u64>),
}

impl Keys {
    fn as_slice(&self) -> &[u64] {
        match self {
            Keys::One(k) => std::slice::from_ref(k),
            Keys::Many(v) => v,
        }
    }

    fn add(&mut self, key: u64) {
        match self {
            Keys::One(k) if *k == key => {}
            Keys::One(k) => *self = Keys::Many(vec![*k, key]),
            Keys::Many(v) if v.contains(&key) => {}
            Keys::Many(v) => v.push(key),
        }
    }
}

/// The key a path's cached attributes are leased and invalidated under (stable across nodes
/// and releases: the client's slot on its daemon's invalidation board is derived from it).
pub fn attr_key(path: &str) -> u64 {
    let h = u64::from(crc32c::crc32c(path.as_bytes())) | ((path.len() as u64) << 32);
    crate::placement::mix64(h ^ 0x6174_7472_6b65_7973)
}

/// The key a directory's listing is leased and invalidated under: apart from the directory's
/// own entry ([`attr_key`]), so that a name changing inside a directory does not drop the
/// copies of the directory's own attributes (nor a node's check of it as a parent).
pub fn listing_key(dir: &str) -> u64 {
    crate::placement::mix64(attr_key(dir) ^ 0x6c69_7374_696e_6773)
}

/// One holder's lease on one key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Lease {
    node: u32,
    boot: u64,
    expires: Instant,
    /// The shard's version when it was granted.
    granted: u64,
}

/// A holder to tell about a change: its keys, and when its last lease on them ends anyway.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tell {
    pub node: u32,
    pub boot: u64,
    pub keys: Vec<u64>,
    pub expires: Instant,
}

/// What a change must do before it is acknowledged.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AttrChange {
    pub version: u64,
    pub tells: Vec<Tell>,
}

/// The shard's table of attribute leases.
pub struct AttrLeases {
    lease: Duration,
    cap: usize,
    version: u64,
    by_key: U64Map<Vec<Lease>>,
    /// The keys granted for each inode, so a change of the inode finds its names' copies.
    keys_of_ino: U64Map<Keys>,
    count: usize,
    /// Until when changes wait, after a restart that forgot the holders.
    quiet_until: Instant,
}

impl AttrLeases {
    /// `restarted`: this shard had state before, so copies of it may exist somewhere.
    pub fn new(lease: Duration, cap: usize, restarted: bool, now: Instant) -> Self {
        AttrLeases {
            lease,
            cap,
            version: 1,
            by_key: U64Map::default(),
            keys_of_ino: U64Map::default(),
            count: 0,
            quiet_until: if restarted { now + lease } else { now },
        }
    }

    /// Moves with every change: a grant is given only if it did not move while the entry
    /// was read.
    pub fn version(&self) -> u64 {
        self.version
    }

    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// Whether no lease is held (a change then has nobody to tell).
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The number of leases recorded (expired ones included until swept).
    pub fn len(&self) -> usize {
        self.count
    }

    /// Records a lease of `node` (incarnation `boot`) on `key`, the entry of inode `ino`;
    /// returns when the shard's count of it ends, or `None` when the table is full.
    pub fn grant(
        &mut self,
        key: u64,
        ino: u64,
        node: u32,
        boot: u64,
        now: Instant,
    ) -> Option<Instant> {
        let expires = self.grant_key(key, node, boot, now)?;
        self.link(ino, key);
        Some(expires)
    }

    /// Links inode `ino` to `key`: a change of the inode tells the holders of `key`.
    fn link(&mut self, ino: u64, key: u64) {
        self.keys_of_ino
            .entry(ino)
            .and_modify(|k| k.add(key))
            .or_insert(Keys::One(key));
    }

    /// Records a lease on `key` alone; `None` when the table is full.
    fn grant_key(&mut self, key: u64, node: u32, boot: u64, now: Instant) -> Option<Instant> {
        if self.count >= self.cap {
            self.sweep(now);
            if self.count >= self.cap {
                return None;
            }
        }
        let expires = now + self.lease;
        let version = self.version;
        let list = self.by_key.entry(key).or_default();
        // The same holder again with nothing changed since (a listing repeated): the lease
        // only lasts longer.
        let same = |l: &&mut Lease| l.node == node && l.boot == boot && l.granted == version;
        if let Some(l) = list.iter_mut().find(same) {
            l.expires = expires;
            return Some(expires);
        }
        list.push(Lease {
            node,
            boot,
            expires,
            granted: self.version,
        });
        self.count += 1;
        Some(expires)
    }

    /// Records one lease of `node` (run `boot`) on a listing of a directory (`dir_key`, the
    /// [`listing_key`] of its path) covering the inodes `inos` listed in it: a change of any of
    /// their names (which touches the directory's listing key too) or inodes reaches the
    /// holder.
    /// One lease per page, not per entry: a listing of thousands of names costs one lease
    /// and a link per inode. `None` when the table is full.
    pub fn grant_page(
        &mut self,
        dir_key: u64,
        inos: &[u64],
        node: u32,
        boot: u64,
        now: Instant,
    ) -> Option<Instant> {
        let expires = self.grant_key(dir_key, node, boot, now)?;
        for ino in inos {
            self.link(*ino, dir_key);
        }
        Some(expires)
    }

    /// A change touching the entries under `keys` and the inodes `inos`: returns the new
    /// version and the holders to tell. They stay holders until they confirm
    /// ([`AttrLeases::dropped`]) or their leases end.
    pub fn change(&mut self, keys: &[u64], inos: &[u64], now: Instant) -> AttrChange {
        self.version += 1;
        let mut all: Vec<u64> = keys.to_vec();
        for ino in inos {
            if let Some(k) = self.keys_of_ino.get(ino) {
                all.extend(k.as_slice());
            }
        }
        all.sort_unstable();
        all.dedup();
        let mut tells: HashMap<(u32, u64), Tell> = HashMap::new();
        for key in all {
            let Some(list) = self.by_key.get_mut(&key) else {
                continue;
            };
            let before = list.len();
            list.retain(|l| l.expires > now);
            self.count -= before - list.len();
            for l in list.iter() {
                let t = tells.entry((l.node, l.boot)).or_insert_with(|| Tell {
                    node: l.node,
                    boot: l.boot,
                    keys: Vec::new(),
                    expires: l.expires,
                });
                if !t.keys.contains(&key) {
                    t.keys.push(key);
                }
                t.expires = t.expires.max(l.expires);
            }
            if list.is_empty() {
                self.by_key.remove(&key);
            }
        }
        let mut tells: Vec<Tell> = tells.into_values().collect();
        tells.sort_by_key(|t| (t.node, t.boot));
        AttrChange {
            version: self.version,
            tells,
        }
    }

    /// The holder confirmed it dropped its copies of `keys` for the change at `version`:
    /// leases granted before that change are gone (one granted since is newer, and kept).
    pub fn dropped(&mut self, node: u32, boot: u64, keys: &[u64], version: u64) {
        for key in keys {
            if let Some(list) = self.by_key.get_mut(key) {
                let before = list.len();
                list.retain(|l| l.node != node || l.boot != boot || l.granted >= version);
                self.count -= before - list.len();
                if list.is_empty() {
                    self.by_key.remove(key);
                }
            }
        }
    }

    /// How long a change must still wait after a restart (zero normally).
    pub fn quiet_for(&self, now: Instant) -> Duration {
        self.quiet_until.saturating_duration_since(now)
    }

    /// Forgets expired leases, and inode links to keys nobody holds.
    pub fn sweep(&mut self, now: Instant) {
        let mut count = 0;
        self.by_key.retain(|_, list| {
            list.retain(|l| l.expires > now);
            count += list.len();
            !list.is_empty()
        });
        self.count = count;
        let by_key = &self.by_key;
        self.keys_of_ino.retain(|_, keys| match keys {
            Keys::One(k) => by_key.contains_key(k),
            Keys::Many(v) => {
                v.retain(|k| by_key.contains_key(k));
                !v.is_empty()
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const LEASE: Duration = Duration::from_millis(100);

    #[test]
    fn holders_are_told_until_they_confirm() {
        let t0 = Instant::now();
        let mut l = AttrLeases::new(LEASE, 100, false, t0);
        let k = attr_key("/a/b");
        l.grant(k, 7, 2, 1, t0).unwrap();
        l.grant(k, 7, 3, 1, t0).unwrap();
        let first = l.change(&[], &[7], t0);
        assert_eq!(
            first.tells.len(),
            2,
            "a change of the inode reaches its name's holders"
        );
        let second = l.change(&[k], &[], t0);
        assert_eq!(
            second.tells.len(),
            2,
            "holders that had not confirmed were forgotten"
        );
        l.dropped(2, 1, &[k], first.version);
        l.dropped(3, 1, &[k], first.version);
        assert!(l.change(&[k], &[7], t0).tells.is_empty());
        assert!(l.is_empty());
        // A lease granted after a change survives the confirmation of that change.
        let c = l.change(&[k], &[], t0);
        l.grant(k, 7, 2, 1, t0).unwrap();
        l.dropped(2, 1, &[k], c.version);
        assert_eq!(l.change(&[k], &[], t0).tells.len(), 1);
    }

    #[test]
    fn a_page_lease_is_told_by_its_entries_inodes_and_dropped_once() {
        let t0 = Instant::now();
        let mut l = AttrLeases::new(LEASE, 100, false, t0);
        let dir = listing_key("/d");
        assert_ne!(dir, attr_key("/d"));
        l.grant_page(dir, &[7, 8], 2, 1, t0).unwrap();
        assert_eq!(l.len(), 1, "one lease for the whole page");
        let c = l.change(&[], &[8], t0);
        assert_eq!(c.tells.len(), 1);
        assert_eq!(c.tells[0].keys, vec![dir]);
        l.dropped(2, 1, &[dir], c.version);
        assert!(
            l.change(&[dir], &[7], t0).tells.is_empty(),
            "a confirmed page lease is told again"
        );
    }

    #[test]
    fn a_restarted_holder_confirms_only_for_itself() {
        let t0 = Instant::now();
        let mut l = AttrLeases::new(LEASE, 100, false, t0);
        let k = attr_key("/f");
        l.grant(k, 1, 2, 10, t0).unwrap();
        let c = l.change(&[k], &[], t0);
        l.dropped(2, 11, &[k], c.version);
        assert_eq!(l.change(&[k], &[], t0).tells[0].boot, 10);
        // Its lease ends: nobody is told any more.
        assert!(l.change(&[k], &[], t0 + LEASE).tells.is_empty());
    }

    #[test]
    fn a_full_table_sweeps_then_refuses() {
        let t0 = Instant::now();
        let mut l = AttrLeases::new(LEASE, 2, false, t0);
        assert!(l.grant(1, 1, 0, 0, t0).is_some());
        assert!(l.grant(2, 2, 0, 0, t0).is_some());
        assert!(l.grant(3, 3, 0, 0, t0).is_none(), "past the cap");
        assert!(
            l.grant(3, 3, 0, 0, t0 + LEASE).is_some(),
            "expired leases are swept"
        );
        assert_eq!(l.len(), 1);
        assert_eq!(l.quiet_for(t0), Duration::ZERO);
        let r = AttrLeases::new(LEASE, 2, true, t0);
        assert_eq!(r.quiet_for(t0), LEASE);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Grant { key: u8, node: u8, boot: u8 },
        Change { key: Option<u8>, ino: Option<u8> },
        Confirm,
        Wait(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u8..6, 0u8..3, 0u8..2).prop_map(|(key, node, boot)| Op::Grant { key, node, boot }),
            (proptest::option::of(0u8..6), proptest::option::of(0u8..6))
                .prop_map(|(key, ino)| Op::Change { key, ino }),
            Just(Op::Confirm),
            (0u8..60).prop_map(Op::Wait),
        ]
    }

    /// A lease in the model: a copy that may still answer until confirmed dropped or expired.
    #[derive(Clone, Debug)]
    struct Copy {
        key: u64,
        node: u32,
        boot: u64,
        expires: Instant,
        stale_since: Option<u64>,
    }

    proptest! {
        /// Against a model of copies: every change tells each holder of a copy it makes
        /// stale, and keeps telling it until it confirms, unless that copy has expired.
        #[test]
        fn every_live_copy_is_told(ops in proptest::collection::vec(op(), 1..80)) {
            let t0 = Instant::now();
            let mut now = t0;
            let mut l = AttrLeases::new(LEASE, 8, false, t0);
            let mut copies: Vec<Copy> = Vec::new();
            // Key k belongs to inode k (one name per file), so changes by inode reach it.
            let mut unconfirmed: Vec<(AttrChange, u64)> = Vec::new();
            for op in ops {
                match op {
                    Op::Grant { key, node, boot } => {
                        let (k, n, b) = (u64::from(key), u32::from(node), u64::from(boot));
                        if let Some(expires) = l.grant(k, k, n, b, now) {
                            copies.push(Copy { key: k, node: n, boot: b, expires, stale_since: None });
                        }
                    }
                    Op::Change { key, ino } => {
                        let keys: Vec<u64> = key.map(u64::from).into_iter().collect();
                        let inos: Vec<u64> = ino.map(u64::from).into_iter().collect();
                        let c = l.change(&keys, &inos, now);
                        for copy in copies.iter_mut() {
                            let hit = keys.contains(&copy.key) || inos.contains(&copy.key);
                            if hit && copy.expires > now {
                                copy.stale_since.get_or_insert(c.version);
                            }
                        }
                        // Every live copy that went stale and was not confirmed is told.
                        for copy in copies.iter().filter(|c| c.stale_since.is_some() && c.expires > now) {
                            let hit = keys.contains(&copy.key) || inos.contains(&copy.key);
                            if hit {
                                prop_assert!(
                                    c.tells.iter().any(|t| t.node == copy.node && t.boot == copy.boot
                                        && t.keys.contains(&copy.key) && t.expires >= copy.expires),
                                    "copy {:?} not told by {:?}", copy, c
                                );
                            }
                        }
                        unconfirmed.push((c.clone(), 0));
                    }
                    Op::Confirm => {
                        if let Some((c, _)) = unconfirmed.pop() {
                            for t in &c.tells {
                                l.dropped(t.node, t.boot, &t.keys, c.version);
                                copies.retain(|copy| !(copy.node == t.node && copy.boot == t.boot
                                    && t.keys.contains(&copy.key)
                                    && copy.stale_since.is_some_and(|v| v <= c.version)));
                            }
                        }
                    }
                    Op::Wait(ms) => {
                        now += Duration::from_millis(u64::from(ms));
                        copies.retain(|c| c.expires > now);
                    }
                }
                prop_assert!(l.len() <= 8);
            }
        }
    }
}
