//! The state machine of an ownership shard: for each (file, stripe) placed on a daemon, which
//! log holds the newest attached bytes of each range.
//!
//! Last attach wins; a partial overlap splits, a range fully covered is removed, contiguous
//! ranges of one owner merge (the contract of [`RangeMap`]). Each mutation returns the exact
//! [`OwnerChange`]s that bring the persisted owner table to the same state: the entries around
//! the touched ranges are compared before and after, so an attach costs database work in
//! proportion to what it changed, not to the size of the map. The daemon persists the changes
//! and serves the queries; nothing here waits or does I/O.

use crate::range_map::Extent;
use crate::{Owner, RangeMap, Run};
use std::collections::{BTreeMap, HashMap};

/// A change to the persisted owner table, whose rows are keyed by (file, stripe, start).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OwnerChange {
    Put {
        ino: u64,
        stripe: u64,
        start: u64,
        end: u64,
        owner: Owner,
    },
    Del {
        ino: u64,
        stripe: u64,
        start: u64,
    },
}

#[derive(Default)]
pub struct Ownership {
    maps: HashMap<(u64, u64), RangeMap<Owner>>,
}

type Snapshot = BTreeMap<u64, (u64, Owner)>;

/// The whole extents overlapping any of `ranges`, each widened by one byte on either side so
/// that neighbours which may merge are included.
fn snapshot(map: &RangeMap<Owner>, ranges: &[(u64, u64)]) -> Snapshot {
    let mut out = Snapshot::new();
    for (s, e) in ranges {
        for ext in map.overlapping_whole(s.saturating_sub(1), e.saturating_add(1)) {
            out.insert(ext.start, (ext.end, ext.value));
        }
    }
    out
}

/// The changes turning `before` into `after` for one (file, stripe).
fn diff(ino: u64, stripe: u64, before: &Snapshot, after: &Snapshot) -> Vec<OwnerChange> {
    let mut ops = Vec::new();
    for (start, v) in before {
        if after.get(start) != Some(v) {
            ops.push(OwnerChange::Del {
                ino,
                stripe,
                start: *start,
            });
        }
    }
    for (start, (end, owner)) in after {
        if before.get(start) != Some(&(*end, *owner)) {
            ops.push(OwnerChange::Put {
                ino,
                stripe,
                start: *start,
                end: *end,
                owner: *owner,
            });
        }
    }
    ops
}

impl Ownership {
    pub fn load(rows: &[(u64, u64, u64, u64, Owner)]) -> Self {
        let mut o = Ownership::default();
        for (ino, stripe, start, end, owner) in rows {
            o.maps
                .entry((*ino, *stripe))
                .or_default()
                .insert(*start, *end, *owner);
        }
        o
    }

    /// Runs `f` on the map of (ino, stripe) and returns the database operations for what it
    /// changed within `ranges`.
    fn mutate(
        &mut self,
        ino: u64,
        stripe: u64,
        ranges: &[(u64, u64)],
        f: impl FnOnce(&mut RangeMap<Owner>),
    ) -> Vec<OwnerChange> {
        let map = self.maps.entry((ino, stripe)).or_default();
        let before = snapshot(map, ranges);
        f(map);
        let after = snapshot(map, ranges);
        if map.is_empty() {
            self.maps.remove(&(ino, stripe));
        }
        diff(ino, stripe, &before, &after)
    }

    /// Makes `owner` the owner of every byte of `runs` (already clipped to this stripe).
    pub fn attach(
        &mut self,
        ino: u64,
        stripe: u64,
        owner: Owner,
        runs: &[Run],
    ) -> Vec<OwnerChange> {
        let map = self.maps.entry((ino, stripe)).or_default();
        let mut ops = Vec::new();
        for r in runs {
            for (s, e) in r.pieces() {
                // A piece that touches nothing in the map (the common case: a first attach)
                // is exactly one new entry; only pieces next to or over existing entries need
                // the before/after comparison.
                if map
                    .overlapping_whole(s.saturating_sub(1), e.saturating_add(1))
                    .is_empty()
                {
                    map.insert(s, e, owner);
                    ops.push(OwnerChange::Put {
                        ino,
                        stripe,
                        start: s,
                        end: e,
                        owner,
                    });
                } else {
                    let before = snapshot(map, &[(s, e)]);
                    map.insert(s, e, owner);
                    let after = snapshot(map, &[(s, e)]);
                    ops.extend(diff(ino, stripe, &before, &after));
                }
            }
        }
        ops
    }

    /// Drops `owner`'s bytes in `[start, end)`; returns how many bytes it held there.
    pub fn detach(
        &mut self,
        ino: u64,
        stripe: u64,
        owner: Owner,
        start: u64,
        end: u64,
    ) -> (u64, Vec<OwnerChange>) {
        if !self.maps.contains_key(&(ino, stripe)) {
            return (0, Vec::new());
        }
        let mut removed = 0;
        let ops = self.mutate(ino, stripe, &[(start, end)], |map| {
            removed = map.remove_where(start, end, |o| *o == owner);
        });
        (removed, ops)
    }

    /// The owners of `[start, end)` of a stripe, clipped to it.
    pub fn query(&self, ino: u64, stripe: u64, start: u64, end: u64) -> Vec<Extent<Owner>> {
        self.maps
            .get(&(ino, stripe))
            .map_or_else(Vec::new, |m| m.overlapping(start, end))
    }

    /// All extents of `ino` on this shard (optionally only `only`'s), ascending.
    pub fn query_file(&self, ino: u64, only: Option<Owner>) -> Vec<Extent<Owner>> {
        let mut stripes: Vec<u64> = self
            .maps
            .keys()
            .filter(|(i, _)| *i == ino)
            .map(|(_, s)| *s)
            .collect();
        stripes.sort_unstable();
        stripes
            .into_iter()
            .flat_map(|s| self.maps[&(ino, s)].iter())
            .filter(|e| only.is_none_or(|o| o == e.value))
            .collect()
    }

    /// The stripes of `ino` this shard holds a map for.
    fn stripes_of(&self, ino: u64) -> Vec<u64> {
        self.maps
            .keys()
            .filter(|(i, _)| *i == ino)
            .map(|(_, s)| *s)
            .collect()
    }

    /// Drops every byte of `ino` owned by `owner` on this shard.
    pub fn detach_file(&mut self, ino: u64, owner: Owner) -> Vec<OwnerChange> {
        let stripes = self.stripes_of(ino);
        let mut ops = Vec::new();
        for s in stripes {
            let ranges: Vec<(u64, u64)> = self.maps[&(ino, s)]
                .iter()
                .filter(|e| e.value == owner)
                .map(|e| (e.start, e.end))
                .collect();
            ops.extend(self.mutate(ino, s, &ranges, |map| {
                for (a, b) in &ranges {
                    map.remove_where(*a, *b, |o| *o == owner);
                }
            }));
        }
        ops
    }

    /// Drops every byte at or beyond `size`.
    pub fn truncate(&mut self, ino: u64, size: u64) -> Vec<OwnerChange> {
        let stripes = self.stripes_of(ino);
        let mut ops = Vec::new();
        for s in stripes {
            let end = self.maps[&(ino, s)].max_end();
            if end > size {
                ops.extend(self.mutate(ino, s, &[(size, end)], |map| map.truncate(size)));
            }
        }
        ops
    }

    /// Forgets the file entirely.
    pub fn drop_file(&mut self, ino: u64) -> Vec<OwnerChange> {
        let stripes = self.stripes_of(ino);
        let mut ops = Vec::new();
        for s in stripes {
            let map = self.maps.remove(&(ino, s)).expect("key listed above");
            ops.extend(map.iter().map(|e| OwnerChange::Del {
                ino,
                stripe: s,
                start: e.start,
            }));
        }
        ops
    }

    /// (files, extents) held by this shard.
    pub fn stats(&self) -> (u64, u64) {
        let mut files: Vec<u64> = self.maps.keys().map(|(i, _)| *i).collect();
        files.sort_unstable();
        files.dedup();
        (
            files.len() as u64,
            self.maps.values().map(|m| m.len() as u64).sum(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const A: Owner = Owner { node: 0, client: 1 };
    const B: Owner = Owner { node: 1, client: 2 };

    /// Replays DbOps onto a model of the owners table.
    fn apply(table: &mut BTreeMap<(u64, u64, u64), (u64, Owner)>, ops: &[OwnerChange]) {
        for op in ops {
            match op {
                OwnerChange::Put {
                    ino,
                    stripe,
                    start,
                    end,
                    owner,
                } => {
                    table.insert((*ino, *stripe, *start), (*end, *owner));
                }
                OwnerChange::Del { ino, stripe, start } => {
                    table.remove(&(*ino, *stripe, *start));
                }
            }
        }
    }

    fn table_of(o: &Ownership) -> BTreeMap<(u64, u64, u64), (u64, Owner)> {
        let mut t = BTreeMap::new();
        for ((ino, s), m) in &o.maps {
            for e in m.iter() {
                t.insert((*ino, *s, e.start), (e.end, e.value));
            }
        }
        t
    }

    #[test]
    fn strided_attach_interleaves_owners() {
        let mut o = Ownership::default();
        let ra = Run {
            start: 0,
            len: 10,
            stride: 20,
            count: 3,
        };
        let rb = Run {
            start: 10,
            len: 10,
            stride: 20,
            count: 3,
        };
        o.attach(7, 0, A, &[ra]);
        o.attach(7, 0, B, &[rb]);
        let q = o.query(7, 0, 0, 60);
        assert_eq!(q.len(), 6);
        assert!(
            q.iter()
                .enumerate()
                .all(|(i, e)| e.value == if i % 2 == 0 { A } else { B })
        );
        // A re-attaches everything: one merged extent.
        o.attach(7, 0, A, &[Run::single(0, 60)]);
        assert_eq!(
            o.query_file(7, None),
            vec![Extent {
                start: 0,
                end: 60,
                value: A
            }]
        );
        let (removed, _) = o.detach(7, 0, B, 0, 60);
        assert_eq!(removed, 0, "B owns nothing any more");
    }

    proptest! {
        /// The changes of every mutation keep the persisted table equal to memory.
        #[test]
        fn db_ops_mirror_memory(ops in proptest::collection::vec((0u8..5, 0u64..80, 1u64..20, 0u64..2, 1u64..4, any::<bool>()), 1..40)) {
            let mut o = Ownership::default();
            let mut table = BTreeMap::new();
            for (kind, start, len, stripe, count, who) in ops {
                let owner = if who { A } else { B };
                let dbops = match kind {
                    0 | 1 => o.attach(1, stripe, owner, &[Run { start, len, stride: len + 3, count }]),
                    2 => o.detach(1, stripe, owner, start, start + len).1,
                    3 => o.truncate(1, start),
                    _ => o.detach_file(1, owner),
                };
                apply(&mut table, &dbops);
                prop_assert_eq!(&table, &table_of(&o));
            }
            let dbops = o.drop_file(1);
            apply(&mut table, &dbops);
            prop_assert!(table.is_empty());
        }
    }
}
