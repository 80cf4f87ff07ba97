//! Byte-range locks of one file, with the semantics of POSIX record locks (`fcntl` F_SETLK).
//!
//! A lock belongs to an owner (a process); an owner holds at most one lock kind per byte, and a
//! new lock of the owner replaces whatever it held in the range (a shared lock can be upgraded
//! or downgraded in place, a range can be split). Two owners conflict where their ranges
//! overlap and at least one of the locks is exclusive. Ranges are `[start, end)`; a lock "to
//! end of file" uses `end = u64::MAX`, so it covers any later growth of the file.
//!
//! The table is pure state: granting, waiting and releasing on process death are the daemon's
//! business. It is kept per file so a later lock manager can take several ranges at once (list
//! locks) by checking every range before setting any.

use crate::range_map::{RangeMap, Slice};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Shared (read) or exclusive (write).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LockKind {
    Shared,
    Exclusive,
}

impl Slice for LockKind {
    fn advance(&self, _by: u64) -> Self {
        *self
    }
}

impl LockKind {
    /// Whether a lock of this kind and one of `other` may overlap (only two shared locks can).
    pub fn compatible(self, other: LockKind) -> bool {
        self == LockKind::Shared && other == LockKind::Shared
    }
}

/// Who holds a lock: a process-wide unique id, and the pid reported to F_GETLK.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LockOwner {
    pub id: u64,
    pub pid: u32,
}

/// Bits of an owner id that number the client on its node; the node id is above them.
const CLIENT_BITS: u32 = 40;

/// The owner id of a client: unique across the job (its node's id in the high bits).
pub fn owner_id(node: u32, client: u64) -> u64 {
    (u64::from(node) << CLIENT_BITS) | (client & ((1 << CLIENT_BITS) - 1))
}

/// The node whose daemon serves the owner (and renews its locks' lease).
pub fn owner_node(owner_id: u64) -> u32 {
    (owner_id >> CLIENT_BITS) as u32
}

/// A held lock as reported to a caller (the first conflict of F_GETLK, or a listing).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldLock {
    pub start: u64,
    pub end: u64,
    pub kind: LockKind,
    pub owner: LockOwner,
}

/// The locks of one file.
#[derive(Clone, Debug, Default)]
pub struct LockTable {
    by_owner: BTreeMap<LockOwner, RangeMap<LockKind>>,
}

impl LockTable {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn is_empty(&self) -> bool {
        self.by_owner.is_empty()
    }

    /// The first lock of another owner that conflicts with `kind` on `[start, end)` (lowest
    /// start; ties by owner), or `None` if the lock can be granted now.
    pub fn conflict(
        &self,
        owner: LockOwner,
        kind: LockKind,
        start: u64,
        end: u64,
    ) -> Option<HeldLock> {
        let mut first: Option<HeldLock> = None;
        for (o, map) in &self.by_owner {
            if o.id == owner.id {
                continue;
            }
            for e in map.overlapping_whole(start, end) {
                if kind.compatible(e.value) {
                    continue;
                }
                if first.is_none_or(|f| e.start < f.start) {
                    first = Some(HeldLock {
                        start: e.start,
                        end: e.end,
                        kind: e.value,
                        owner: *o,
                    });
                }
                break;
            }
        }
        first
    }

    /// Takes `kind` on `[start, end)` for `owner` if no other owner conflicts; otherwise
    /// returns the conflicting lock and changes nothing.
    pub fn try_lock(
        &mut self,
        owner: LockOwner,
        kind: LockKind,
        start: u64,
        end: u64,
    ) -> Result<(), HeldLock> {
        if start >= end {
            return Ok(());
        }
        if let Some(c) = self.conflict(owner, kind, start, end) {
            return Err(c);
        }
        // The pid may differ from an earlier lock of the owner after a fork; the id decides.
        let map = match self.by_owner.keys().find(|o| o.id == owner.id).copied() {
            Some(o) => self.by_owner.get_mut(&o).expect("present"),
            None => self.by_owner.entry(owner).or_default(),
        };
        map.insert(start, end, kind);
        Ok(())
    }

    /// Releases `owner`'s locks on `[start, end)` (splitting a lock that extends beyond).
    pub fn unlock(&mut self, owner_id: u64, start: u64, end: u64) {
        if start >= end {
            return;
        }
        let keys: Vec<LockOwner> = self
            .by_owner
            .keys()
            .filter(|o| o.id == owner_id)
            .copied()
            .collect();
        for k in keys {
            let map = self.by_owner.get_mut(&k).expect("present");
            map.remove(start, end);
            if map.is_empty() {
                self.by_owner.remove(&k);
            }
        }
    }

    /// Releases every lock of the owner (it closed the file or died); returns whether it held
    /// any.
    pub fn release_owner(&mut self, owner_id: u64) -> bool {
        let before = self.by_owner.len();
        self.by_owner.retain(|o, _| o.id != owner_id);
        before != self.by_owner.len()
    }

    /// Every held lock, by owner then offset.
    pub fn held(&self) -> Vec<HeldLock> {
        self.by_owner
            .iter()
            .flat_map(|(o, m)| {
                m.iter().map(move |e| HeldLock {
                    start: e.start,
                    end: e.end,
                    kind: e.value,
                    owner: *o,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn owner(id: u64) -> LockOwner {
        LockOwner {
            id,
            pid: id as u32 + 100,
        }
    }

    #[test]
    fn shared_locks_coexist_exclusive_conflicts() {
        let mut t = LockTable::new();
        t.try_lock(owner(1), LockKind::Shared, 0, 100).unwrap();
        t.try_lock(owner(2), LockKind::Shared, 50, 150).unwrap();
        let c = t
            .try_lock(owner(3), LockKind::Exclusive, 120, 130)
            .unwrap_err();
        assert_eq!(c.owner, owner(2));
        assert_eq!((c.start, c.end, c.kind), (50, 150, LockKind::Shared));
        // The owner's own lock never conflicts: upgrade in place where no one else holds.
        t.try_lock(owner(2), LockKind::Exclusive, 100, 150).unwrap();
        assert!(t.try_lock(owner(1), LockKind::Shared, 99, 101).is_err());
        assert!(t.try_lock(owner(1), LockKind::Shared, 0, 100).is_ok());
    }

    #[test]
    fn unlock_splits_and_release_clears() {
        let mut t = LockTable::new();
        t.try_lock(owner(1), LockKind::Exclusive, 0, u64::MAX)
            .unwrap();
        t.unlock(1, 10, 20);
        assert!(t.try_lock(owner(2), LockKind::Exclusive, 10, 20).is_ok());
        assert!(t.try_lock(owner(2), LockKind::Shared, 19, 21).is_err());
        assert!(t.release_owner(1));
        assert!(!t.release_owner(1));
        assert!(
            t.try_lock(owner(2), LockKind::Exclusive, 0, u64::MAX)
                .is_ok()
        );
        assert_eq!(t.held().len(), 1);
    }

    #[test]
    fn first_conflict_is_the_lowest() {
        let mut t = LockTable::new();
        t.try_lock(owner(5), LockKind::Exclusive, 60, 70).unwrap();
        t.try_lock(owner(6), LockKind::Shared, 30, 40).unwrap();
        let c = t.conflict(owner(1), LockKind::Exclusive, 0, 100).unwrap();
        assert_eq!((c.start, c.owner), (30, owner(6)));
        let c = t.conflict(owner(1), LockKind::Shared, 0, 100).unwrap();
        assert_eq!((c.start, c.owner), (60, owner(5)));
    }

    /// The naive model: for each byte of a small file, the kind each owner holds.
    #[derive(Default)]
    struct Model {
        bytes: BTreeMap<(u64, u64), LockKind>, // (offset, owner) -> kind
    }

    impl Model {
        fn conflicts(&self, o: u64, kind: LockKind, s: u64, e: u64) -> bool {
            self.bytes
                .iter()
                .any(|(&(b, ow), &k)| ow != o && b >= s && b < e && !kind.compatible(k))
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        Lock(u64, bool, u64, u64),
        Unlock(u64, u64, u64),
        Release(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        let range = (0u64..64, 1u64..24).prop_map(|(s, l)| (s, s + l));
        prop_oneof![
            4 => (0u64..4, any::<bool>(), range.clone()).prop_map(|(o, x, (s, e))| Op::Lock(o, x, s, e)),
            2 => (0u64..4, range).prop_map(|(o, (s, e))| Op::Unlock(o, s, e)),
            1 => (0u64..4).prop_map(Op::Release),
        ]
    }

    proptest! {
        /// Random lock/unlock/release sequences: grant decisions and the held bytes match the
        /// byte-per-byte model, and a reported conflict really conflicts.
        #[test]
        fn matches_byte_model(ops in proptest::collection::vec(op(), 1..80)) {
            let mut t = LockTable::new();
            let mut m = Model::default();
            for op in ops {
                match op {
                    Op::Lock(o, x, s, e) => {
                        let kind = if x { LockKind::Exclusive } else { LockKind::Shared };
                        let expect_conflict = m.conflicts(o, kind, s, e);
                        match t.try_lock(owner(o), kind, s, e) {
                            Ok(()) => {
                                prop_assert!(!expect_conflict);
                                for b in s..e {
                                    m.bytes.insert((b, o), kind);
                                }
                            }
                            Err(c) => {
                                prop_assert!(expect_conflict);
                                prop_assert!(c.owner.id != o);
                                prop_assert!(c.start < e && c.end > s);
                                prop_assert!(!kind.compatible(c.kind));
                            }
                        }
                    }
                    Op::Unlock(o, s, e) => {
                        t.unlock(o, s, e);
                        m.bytes.retain(|&(b, ow), _| !(ow == o && b >= s && b < e));
                    }
                    Op::Release(o) => {
                        t.release_owner(o);
                        m.bytes.retain(|&(_, ow), _| ow != o);
                    }
                }
                let mut held = BTreeMap::new();
                for h in t.held() {
                    for b in h.start..h.end {
                        prop_assert!(held.insert((b, h.owner.id), h.kind).is_none());
                    }
                }
                prop_assert_eq!(&held, &m.bytes);
            }
        }
    }
}
