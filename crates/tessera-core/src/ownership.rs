//! The state machine of an ownership shard: for each (file, stripe) placed on a daemon, which
//! log holds the newest attached bytes of each range.
//!
//! Last attach wins, byte by byte. Each stripe's map is a [`RunMap`]: an attach of a strided
//! pattern is one entry however many pieces it has, and the interleaved patterns of many
//! writers stay one entry each (see `run_map` for how older runs keep what a newer one does
//! not cover). Each mutation returns the exact [`OwnerChange`]s that bring the persisted owner
//! table to the same state, in proportion to what it changed. The daemon persists the changes
//! and serves the queries; nothing here waits or does I/O.

use crate::run_map::{RunChange, RunMap};
use crate::{OwnedRun, Owner, Run};
use std::collections::BTreeMap;

/// A change to the persisted owner table, whose rows are keyed by (file, stripe, run start).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OwnerChange {
    Put {
        ino: u64,
        stripe: u64,
        run: Run,
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
    /// Ordered by (file, stripe): a file's stripes are one range of keys, found without
    /// visiting other files' (a scan of every map per query made a read or remove cost
    /// time in proportion to the files on the shard).
    maps: BTreeMap<(u64, u64), RunMap<Owner>>,
}

fn rows(ino: u64, stripe: u64, changes: Vec<RunChange<Owner>>) -> Vec<OwnerChange> {
    changes
        .into_iter()
        .map(|c| match c {
            RunChange::Put(run, owner) => OwnerChange::Put {
                ino,
                stripe,
                run,
                owner,
            },
            RunChange::Del(start) => OwnerChange::Del { ino, stripe, start },
        })
        .collect()
}

impl Ownership {
    /// The shard as persisted: rows of (file, stripe, run, owner).
    pub fn load(rows: &[(u64, u64, Run, Owner)]) -> Self {
        let mut o = Ownership::default();
        for (ino, stripe, run, owner) in rows {
            o.maps
                .entry((*ino, *stripe))
                .or_default()
                .restore(*run, *owner);
        }
        o
    }

    /// Runs `f` on the map of (ino, stripe), if there is one, and returns its changes as rows.
    fn change<T: Default>(
        &mut self,
        ino: u64,
        stripe: u64,
        f: impl FnOnce(&mut RunMap<Owner>) -> (T, Vec<RunChange<Owner>>),
    ) -> (T, Vec<OwnerChange>) {
        let Some(map) = self.maps.get_mut(&(ino, stripe)) else {
            return (T::default(), Vec::new());
        };
        let (out, changes) = f(map);
        if map.is_empty() {
            self.maps.remove(&(ino, stripe));
        }
        (out, rows(ino, stripe, changes))
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
        let mut changes = Vec::new();
        for r in runs {
            changes.extend(map.insert(*r, owner));
        }
        rows(ino, stripe, changes)
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
        self.change(ino, stripe, |map| {
            map.remove_where(start, end, |o| *o == owner)
        })
    }

    /// The owners of `[start, end)` of a stripe, clipped to it, ascending by start.
    pub fn query(&self, ino: u64, stripe: u64, start: u64, end: u64) -> Vec<OwnedRun> {
        self.maps.get(&(ino, stripe)).map_or_else(Vec::new, |m| {
            m.overlapping(start, end)
                .into_iter()
                .map(OwnedRun::from)
                .collect()
        })
    }

    /// The whole map of a stripe, ascending by start.
    pub fn query_stripe(&self, ino: u64, stripe: u64) -> Vec<OwnedRun> {
        self.maps
            .get(&(ino, stripe))
            .map_or_else(Vec::new, |m| m.iter().map(OwnedRun::from).collect())
    }

    /// All runs of `ino` on this shard (optionally only `only`'s), ascending by start.
    pub fn query_file(&self, ino: u64, only: Option<Owner>) -> Vec<OwnedRun> {
        self.query_file_page(ino, only, 0, usize::MAX).0
    }

    /// The runs of `ino` on this shard (optionally only `only`'s) that start at or after
    /// `from`, ascending by start, at most `max` (at least one); and the start of the first
    /// run left out. Runs are cut at stripe boundaries, so the stripes in order give the runs
    /// in order.
    pub fn query_file_page(
        &self,
        ino: u64,
        only: Option<Owner>,
        from: u64,
        max: usize,
    ) -> (Vec<OwnedRun>, Option<u64>) {
        let max = max.max(1);
        let stripes = self.stripes_of(ino);
        let mut out = Vec::new();
        for s in stripes {
            let runs = self.maps[&(ino, s)].iter_from(from);
            for (run, owner) in runs.filter(|(_, o)| only.is_none_or(|only| only == *o)) {
                if out.len() == max {
                    return (out, Some(run.start));
                }
                out.push(OwnedRun { run, owner });
            }
        }
        (out, None)
    }

    /// The runs of one stripe of `ino` within `[start, end)`, clipped, ascending by start.
    pub fn stripe_runs_within(&self, ino: u64, stripe: u64, start: u64, end: u64) -> Vec<OwnedRun> {
        self.maps
            .get(&(ino, stripe))
            .map(|m| {
                m.overlapping(start, end)
                    .into_iter()
                    .map(OwnedRun::from)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The stripes of `ino` this shard holds a map for.
    pub fn stripes_of(&self, ino: u64) -> Vec<u64> {
        self.maps
            .range((ino, 0)..=(ino, u64::MAX))
            .map(|((_, s), _)| *s)
            .collect()
    }

    /// Drops every byte of `ino` owned by `owner` on this shard.
    pub fn detach_file(&mut self, ino: u64, owner: Owner) -> Vec<OwnerChange> {
        let mut ops = Vec::new();
        for s in self.stripes_of(ino) {
            ops.extend(self.change(ino, s, |map| ((), map.remove_value(owner))).1);
        }
        ops
    }

    /// Drops every byte at or beyond `size`.
    pub fn truncate(&mut self, ino: u64, size: u64) -> Vec<OwnerChange> {
        let mut ops = Vec::new();
        for s in self.stripes_of(ino) {
            ops.extend(self.change(ino, s, |map| ((), map.truncate(size))).1);
        }
        ops
    }

    /// Forgets the file entirely.
    pub fn drop_file(&mut self, ino: u64) -> Vec<OwnerChange> {
        let mut ops = Vec::new();
        for s in self.stripes_of(ino) {
            let map = self.maps.remove(&(ino, s)).expect("key listed above");
            ops.extend(map.iter().map(|(run, _)| OwnerChange::Del {
                ino,
                stripe: s,
                start: run.start,
            }));
        }
        ops
    }

    /// (files, entries) held by this shard: an entry is one run of one owner.
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
    use std::collections::BTreeMap;

    const A: Owner = Owner { node: 0, client: 1 };
    const B: Owner = Owner { node: 1, client: 2 };

    type Table = BTreeMap<(u64, u64, u64), (Run, Owner)>;

    /// Replays the changes onto a model of the owners table.
    fn apply(table: &mut Table, ops: &[OwnerChange]) {
        for op in ops {
            match *op {
                OwnerChange::Put {
                    ino,
                    stripe,
                    run,
                    owner,
                } => {
                    table.insert((ino, stripe, run.start), (run, owner));
                }
                OwnerChange::Del { ino, stripe, start } => {
                    table.remove(&(ino, stripe, start));
                }
            }
        }
    }

    fn table_of(o: &Ownership) -> Table {
        let mut t = BTreeMap::new();
        for ((ino, s), m) in &o.maps {
            for (run, owner) in m.iter() {
                t.insert((*ino, *s, run.start), (run, owner));
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
        let rb = Run { start: 10, ..ra };
        o.attach(7, 0, A, &[ra]);
        o.attach(7, 0, B, &[rb]);
        let q = o.query(7, 0, 0, 60);
        assert_eq!(
            q,
            vec![
                OwnedRun { run: ra, owner: A },
                OwnedRun { run: rb, owner: B }
            ]
        );
        // A range query clips the runs.
        let q = o.query(7, 0, 15, 35);
        let runs: Vec<Run> = q.iter().map(|r| r.run).collect();
        assert_eq!(
            runs,
            vec![Run::single(15, 5), Run::single(20, 10), Run::single(30, 5)]
        );
        // A re-attaches everything: one entry.
        o.attach(7, 0, A, &[Run::single(0, 60)]);
        assert_eq!(
            o.query_file(7, None),
            vec![OwnedRun {
                run: Run::single(0, 60),
                owner: A
            }]
        );
        let (removed, _) = o.detach(7, 0, B, 0, 60);
        assert_eq!(removed, 0, "B owns nothing any more");
    }

    #[test]
    fn pages_cover_every_run_once_in_order() {
        let mut o = Ownership::default();
        // Runs on three stripes (of 100 bytes), two owners.
        for i in 0..30u64 {
            let owner = if i % 3 == 0 { A } else { B };
            o.attach(4, i / 10, owner, &[Run::single(i * 10, 5)]);
        }
        for only in [None, Some(A)] {
            let all = o.query_file(4, only);
            let mut paged = Vec::new();
            let mut from = 0;
            loop {
                let (page, resume) = o.query_file_page(4, only, from, 4);
                assert!(page.len() <= 4);
                paged.extend(page);
                match resume {
                    Some(r) => from = r,
                    None => break,
                }
            }
            assert_eq!(paged, all);
            assert!(all.windows(2).all(|w| w[0].run.start < w[1].run.start));
        }
        assert_eq!(o.query_file(4, Some(A)).len(), 10);
    }

    proptest! {
        /// The changes of every mutation keep the persisted table equal to memory, and a shard
        /// loaded from the table answers as the live one.
        #[test]
        fn changes_mirror_memory(ops in proptest::collection::vec((0u8..5, 0u64..80, 1u64..20, 0u64..2, 1u64..4, any::<bool>()), 1..40)) {
            let mut o = Ownership::default();
            let mut table = BTreeMap::new();
            for (kind, start, len, stripe, count, who) in ops {
                let owner = if who { A } else { B };
                let changes = match kind {
                    0 | 1 => o.attach(1, stripe, owner, &[Run { start, len, stride: len + 3, count }]),
                    2 => o.detach(1, stripe, owner, start, start + len).1,
                    3 => o.truncate(1, start),
                    _ => o.detach_file(1, owner),
                };
                apply(&mut table, &changes);
                prop_assert_eq!(&table, &table_of(&o));
            }
            let rows: Vec<(u64, u64, Run, Owner)> = table.iter().map(|((i, s, _), (r, w))| (*i, *s, *r, *w)).collect();
            let loaded = Ownership::load(&rows);
            prop_assert_eq!(loaded.query_file(1, None), o.query_file(1, None));
            let changes = o.drop_file(1);
            apply(&mut table, &changes);
            prop_assert!(table.is_empty());
        }
    }
}
