//! Ownership held back by transactions: what an ownership shard keeps for the attaches a
//! transaction made, before the transaction's decision makes them everyone's (D2T). The
//! file sizes its attaches extend are held back the same way, on the inode's shard.
//!
//! Each transaction has its own overlay per (file, stripe): a [`RunMap`] of the owners its
//! members attached, last attach winning as in the shard's own map. A query sees the shard's
//! committed map with the overlays of the transactions that are visible to it laid on top:
//! its own transaction's (members see their pending writes), and those decided to commit whose
//! completion has not reached the shard yet. A transaction is, on a shard:
//!
//! * **active**: members may attach; invisible to everyone else, surely (no decision can be
//!   taken before this shard has prepared it);
//! * **prepared**: its overlay is durable and closed; in doubt until the decision, so a query
//!   from outside that touches it must learn the decision from the transaction's home first
//!   ([`PendingOwnership::in_doubt`]), and reports how it treated each transaction so that the
//!   asking node can tell a query cut by a decision from a whole one ([`Seen`]);
//! * then **committed** (its overlay becomes part of the map: [`PendingOwnership::commit`]) or
//!   **aborted** (its overlay is dropped).
//!
//! A transaction may also truncate a file: its members then see the file end there (every byte
//! beyond the cut gone, committed or their own) until their writes extend it again; at commit
//! the file is cut before the transaction's bytes are laid in, so its later writes stay.
//!
//! Two transactions pending at once may not attach the same bytes, nor may one write beyond
//! another's cut: the second is refused (first writer wins), so the overlays visible at once
//! never overlap and their order does not matter. Writes outside any transaction go to the committed map at once; a transaction that
//! commits later lays its bytes over them (it takes effect at its decision).
//!
//! Two rules are the daemon's to keep, since they need the transaction's home: an attach
//! under a transaction is taken only while its home reports it open (this state machine would
//! start a new overlay for a transaction it already committed or aborted, which nothing would
//! ever decide); and a plain attach that touches a prepared transaction's bytes first learns
//! its decision and, if it committed, completes it here, so that the plain write, made after
//! the decision, lands on top of the transaction's bytes rather than under them.

use crate::meta::SizeChange;
use crate::ownership::{OwnerChange, Ownership};
use crate::run_map::{RunChange, RunMap};
use crate::txn_state::TxnId;
use crate::{Errno, FsError, FsResult, OwnedRun, Owner, Run};
use std::collections::{BTreeMap, HashMap};

/// Where a transaction stands on one shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShardTxn {
    Active,
    Prepared,
}

/// How a query treated a transaction whose overlay it touched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Seen {
    /// Laid over the map: the asker's own, or decided to commit.
    Included,
    /// Left out: active, or prepared and not decided (yet).
    Excluded,
}

/// The bytes `[start, end)` of one stripe of one file: what a query asks a shard about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub ino: u64,
    pub stripe: u64,
    pub start: u64,
    pub end: u64,
}

/// A change to the persisted pending table: overlay rows keyed by (transaction, file, stripe,
/// run start), and a transaction's state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PendingChange {
    Put {
        txn: TxnId,
        ino: u64,
        stripe: u64,
        run: Run,
        owner: Owner,
    },
    Del {
        txn: TxnId,
        ino: u64,
        stripe: u64,
        start: u64,
    },
    /// The transaction extends `ino` to at least `end` (to exactly `end` and beyond by its
    /// writes, where it also cuts the file).
    Size { txn: TxnId, ino: u64, end: u64 },
    /// The transaction cuts `ino` at `cut`.
    Cut { txn: TxnId, ino: u64, cut: Cut },
    /// The transaction is prepared on this shard (no row: active).
    Prepared { txn: TxnId },
    /// Every row and the state of the transaction go.
    Forget { txn: TxnId },
}

/// Where a transaction cuts a file, and (on the file's inode shard) the name whose PFS copy
/// is cut with it at commit.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Cut {
    pub at: u64,
    pub path: Option<String>,
}

#[derive(Default)]
struct Overlay {
    state: Option<ShardTxn>,
    maps: HashMap<(u64, u64), RunMap<Owner>>,
    /// The sizes it extends files of this shard to; exact sizes for the files it cuts.
    sizes: BTreeMap<u64, u64>,
    /// The files it truncates, by inode.
    cuts: BTreeMap<u64, Cut>,
}

impl Overlay {
    fn state(&self) -> ShardTxn {
        self.state.unwrap_or(ShardTxn::Active)
    }

    fn cut_before(&self, ino: u64, end: u64) -> bool {
        self.cuts.get(&ino).is_some_and(|c| c.at < end)
    }

    fn refuse_if_prepared(&self, txn: TxnId) -> FsResult<()> {
        if self.state() == ShardTxn::Prepared {
            return Err(FsError::new(
                Errno::Inval,
                format!(
                    "transaction {txn:016x} is committing: it takes no more writes (write before its vote)"
                ),
            ));
        }
        Ok(())
    }
}

fn pending_elsewhere(ino: u64, at: u64, other: TxnId) -> FsError {
    FsError::new(
        Errno::Busy,
        format!(
            "bytes of inode {ino} at {at} are pending in transaction {other:016x}: two transactions cannot write the same bytes at once; commit or abort that one first"
        ),
    )
}

/// The overlays of every transaction pending on one shard.
#[derive(Default)]
pub struct PendingOwnership {
    txns: BTreeMap<TxnId, Overlay>,
}

fn rows(txn: TxnId, ino: u64, stripe: u64, changes: Vec<RunChange<Owner>>) -> Vec<PendingChange> {
    changes
        .into_iter()
        .map(|c| match c {
            RunChange::Put(run, owner) => PendingChange::Put {
                txn,
                ino,
                stripe,
                run,
                owner,
            },
            RunChange::Del(start) => PendingChange::Del {
                txn,
                ino,
                stripe,
                start,
            },
        })
        .collect()
}

impl PendingOwnership {
    /// The shard's pending table as persisted: overlay rows, sizes, cuts, and the prepared
    /// transactions.
    pub fn load(
        rows: &[(TxnId, u64, u64, Run, Owner)],
        sizes: &[(TxnId, u64, u64)],
        cuts: &[(TxnId, u64, Cut)],
        prepared: &[TxnId],
    ) -> Self {
        let mut p = PendingOwnership::default();
        for (txn, ino, end) in sizes {
            p.txns.entry(*txn).or_default().sizes.insert(*ino, *end);
        }
        for (txn, ino, cut) in cuts {
            p.txns
                .entry(*txn)
                .or_default()
                .cuts
                .insert(*ino, cut.clone());
        }
        for (txn, ino, stripe, run, owner) in rows {
            p.txns
                .entry(*txn)
                .or_default()
                .maps
                .entry((*ino, *stripe))
                .or_default()
                .restore(*run, *owner);
        }
        for txn in prepared {
            p.txns.entry(*txn).or_default().state = Some(ShardTxn::Prepared);
        }
        p
    }

    /// The transactions pending here and their states.
    pub fn transactions(&self) -> impl Iterator<Item = (TxnId, ShardTxn)> + '_ {
        self.txns.iter().map(|(t, o)| (*t, o.state()))
    }

    /// `owner`, a member of `txn`, attaches `runs` (clipped to the stripe) under it.
    pub fn attach(
        &mut self,
        txn: TxnId,
        ino: u64,
        stripe: u64,
        owner: Owner,
        runs: &[Run],
    ) -> FsResult<Vec<PendingChange>> {
        if let Some(o) = self.txns.get(&txn) {
            o.refuse_if_prepared(txn)?;
        }
        for (other, o) in &self.txns {
            if *other == txn {
                continue;
            }
            if let Some(r) = runs.iter().find(|r| o.cut_before(ino, r.end())) {
                return Err(pending_elsewhere(ino, o.cuts[&ino].at.max(r.start), *other));
            }
            let Some(map) = o.maps.get(&(ino, stripe)) else {
                continue;
            };
            for r in runs {
                if let Some((held, _)) = map
                    .overlapping(r.start, r.end())
                    .into_iter()
                    .find(|(held, _)| held.overlaps(r))
                {
                    return Err(pending_elsewhere(ino, held.start.max(r.start), *other));
                }
            }
        }
        let map = self
            .txns
            .entry(txn)
            .or_default()
            .maps
            .entry((ino, stripe))
            .or_default();
        let mut changes = Vec::new();
        for r in runs {
            changes.extend(map.insert(*r, owner));
        }
        Ok(rows(txn, ino, stripe, changes))
    }

    /// `txn` extends `ino` to at least `end` (an attach of its members reached there).
    pub fn extend(&mut self, txn: TxnId, ino: u64, end: u64) -> FsResult<Vec<PendingChange>> {
        let o = self.txns.entry(txn).or_default();
        o.refuse_if_prepared(txn)?;
        let size = o.sizes.entry(ino).or_insert(0);
        if *size >= end {
            return Ok(Vec::new());
        }
        *size = end;
        Ok(vec![PendingChange::Size { txn, ino, end }])
    }

    /// `txn` truncates `ino` to `size`: for its members the file's bytes at and beyond `size`
    /// are gone (its own earlier writes there too), and, where `path` is given (this shard
    /// holds the inode), its size is `size` until their writes extend it. `EBUSY` where
    /// another pending transaction writes beyond `size` or cuts the file too.
    pub fn truncate(
        &mut self,
        txn: TxnId,
        ino: u64,
        size: u64,
        path: Option<&str>,
    ) -> FsResult<Vec<PendingChange>> {
        for (other, o) in &self.txns {
            if *other == txn {
                continue;
            }
            if let Some(c) = o.cuts.get(&ino) {
                return Err(pending_elsewhere(ino, c.at.min(size), *other));
            }
            for ((i, _), map) in &o.maps {
                if let Some((held, _)) = map.iter().find(|(r, _)| *i == ino && r.end() > size) {
                    return Err(pending_elsewhere(ino, held.start.max(size), *other));
                }
            }
        }
        let o = self.txns.entry(txn).or_default();
        o.refuse_if_prepared(txn)?;
        let mut changes = Vec::new();
        let mut stripes: Vec<u64> = o
            .maps
            .keys()
            .filter(|(i, _)| *i == ino)
            .map(|(_, s)| *s)
            .collect();
        stripes.sort_unstable();
        for stripe in stripes {
            let map = o.maps.get_mut(&(ino, stripe)).expect("listed above");
            changes.extend(rows(txn, ino, stripe, map.truncate(size)));
        }
        let cut = Cut {
            at: o.cuts.get(&ino).map_or(size, |c| c.at.min(size)),
            path: path
                .map(str::to_string)
                .or_else(|| o.cuts.get(&ino).and_then(|c| c.path.clone())),
        };
        if o.cuts.get(&ino) != Some(&cut) {
            o.cuts.insert(ino, cut.clone());
            changes.push(PendingChange::Cut { txn, ino, cut });
        }
        if path.is_some() {
            o.sizes.insert(ino, size);
            changes.push(PendingChange::Size {
                txn,
                ino,
                end: size,
            });
        }
        Ok(changes)
    }

    /// The sizes `txn` gives files, to apply when it commits (before [`Self::commit`]): the
    /// size it extends a file to, or the exact size of a file it cuts.
    pub fn sizes_of(&self, txn: TxnId) -> Vec<(u64, SizeChange)> {
        self.txns
            .get(&txn)
            .map(|o| {
                o.sizes
                    .iter()
                    .map(|(i, e)| {
                        let set = if o.cuts.contains_key(i) {
                            SizeChange::Set(*e)
                        } else {
                            SizeChange::Extend(*e)
                        };
                        (*i, set)
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The PFS copies `txn` cuts when it commits: (inode, its name, where).
    pub fn pfs_cuts_of(&self, txn: TxnId) -> Vec<(u64, String, u64)> {
        self.txns
            .get(&txn)
            .map(|o| {
                o.cuts
                    .iter()
                    .filter_map(|(ino, c)| Some((*ino, c.path.clone()?, c.at)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The size `ino` has for `viewer` beyond `size` (the committed one): the largest
    /// extension among its own transaction and those `committed` says were decided, and the
    /// transactions with an extension of it that were left out.
    pub fn size_as(
        &self,
        ino: u64,
        size: u64,
        viewer: Option<TxnId>,
        committed: &dyn Fn(TxnId) -> bool,
    ) -> (u64, Vec<TxnId>) {
        let mut out = size;
        let mut excluded = Vec::new();
        // A cut sets the size before the extensions count (one transaction at most cuts a
        // file at a time).
        let included = |t: &TxnId, o: &Overlay| {
            Some(*t) == viewer || (o.state() == ShardTxn::Prepared && committed(*t))
        };
        for (t, o) in &self.txns {
            if o.cuts.contains_key(&ino) && included(t, o) {
                out = o.sizes.get(&ino).copied().unwrap_or(out);
            }
        }
        for (t, o) in &self.txns {
            let Some(end) = o.sizes.get(&ino) else {
                continue;
            };
            if included(t, o) {
                out = out.max(*end);
            } else {
                excluded.push(*t);
            }
        }
        (out, excluded)
    }

    /// Where the PFS copy of `ino` stops counting for `viewer` (and with the transactions
    /// `committed` says were decided): at the deepest cut among them. Bytes beyond it that no
    /// one owns are holes, whatever the copy still holds until the cut reaches it.
    pub fn pfs_upto(
        &self,
        ino: u64,
        viewer: Option<TxnId>,
        committed: &dyn Fn(TxnId) -> bool,
    ) -> Option<u64> {
        self.txns
            .iter()
            .filter(|(t, o)| {
                Some(**t) == viewer || (o.state() == ShardTxn::Prepared && committed(**t))
            })
            .filter_map(|(_, o)| o.cuts.get(&ino).map(|c| c.at))
            .min()
    }

    /// Whether any transaction holds bytes of this stripe (a copy of its map may not be
    /// cached elsewhere: it would hide them without saying so).
    pub fn touches_stripe(&self, ino: u64, stripe: u64) -> bool {
        self.txns
            .values()
            .any(|o| o.maps.contains_key(&(ino, stripe)) || o.cuts.contains_key(&ino))
    }

    /// The transactions with bytes or a size of `ino` here.
    pub fn touching_file(&self, ino: u64) -> Vec<TxnId> {
        self.txns
            .iter()
            .filter(|(_, o)| {
                o.sizes.contains_key(&ino)
                    || o.cuts.contains_key(&ino)
                    || o.maps.keys().any(|(i, _)| *i == ino)
            })
            .map(|(t, _)| *t)
            .collect()
    }

    /// The stripes of `ino` some transaction holds bytes of or cuts (of `stripe_size` bytes;
    /// `own` names the committed ones).
    pub fn stripes_of(
        &self,
        own: &Ownership,
        ino: u64,
        stripe_size: u64,
    ) -> std::collections::BTreeSet<u64> {
        let mut out: std::collections::BTreeSet<u64> = self
            .txns
            .values()
            .flat_map(|o| o.maps.keys())
            .filter(|(i, _)| *i == ino)
            .map(|(_, s)| *s)
            .collect();
        if let Some(cut) = self
            .txns
            .values()
            .filter_map(|o| o.cuts.get(&ino))
            .map(|c| c.at)
            .min()
        {
            let first = cut / stripe_size.max(1);
            out.extend(own.stripes_of(ino).into_iter().filter(|s| *s >= first));
        }
        out
    }

    /// Prepares `txn`: its overlay is closed to further attaches. Idempotent; a transaction
    /// with nothing here prepares as an empty one.
    pub fn prepare(&mut self, txn: TxnId) -> Vec<PendingChange> {
        let o = self.txns.entry(txn).or_default();
        if o.state() == ShardTxn::Prepared {
            return Vec::new();
        }
        o.state = Some(ShardTxn::Prepared);
        vec![PendingChange::Prepared { txn }]
    }

    /// Commits `txn`: its overlay is attached to the map. Returns the map's changes and the
    /// pending table's. Idempotent (a second commit finds nothing).
    pub fn commit(
        &mut self,
        txn: TxnId,
        own: &mut Ownership,
    ) -> (Vec<OwnerChange>, Vec<PendingChange>) {
        let Some(o) = self.txns.remove(&txn) else {
            return (Vec::new(), Vec::new());
        };
        let mut changes = Vec::new();
        // Cut first: what its members wrote after the truncate stays.
        for (ino, cut) in &o.cuts {
            changes.extend(own.truncate(*ino, cut.at));
        }
        let mut keys: Vec<_> = o.maps.keys().copied().collect();
        keys.sort_unstable();
        for (ino, stripe) in keys {
            for (run, owner) in o.maps[&(ino, stripe)].iter() {
                changes.extend(own.attach(ino, stripe, owner, &[run]));
            }
        }
        (changes, vec![PendingChange::Forget { txn }])
    }

    /// The logs `txn` holds bytes of here: each (file, owner) once, by file. The logs of an
    /// aborted transaction hold nothing anyone can read (a transaction's members write under
    /// log ids of their own), so their space can be given back.
    pub fn logs_of(&self, txn: TxnId) -> BTreeMap<u64, Vec<Owner>> {
        let mut logs: BTreeMap<u64, Vec<Owner>> = BTreeMap::new();
        for ((ino, _), map) in self.txns.get(&txn).into_iter().flat_map(|o| &o.maps) {
            logs.entry(*ino)
                .or_default()
                .extend(map.iter().map(|(_, owner)| owner));
        }
        for owners in logs.values_mut() {
            owners.sort_unstable();
            owners.dedup();
        }
        logs
    }

    /// Aborts `txn`: its overlay goes. Idempotent.
    pub fn abort(&mut self, txn: TxnId) -> Vec<PendingChange> {
        match self.txns.remove(&txn) {
            Some(_) => vec![PendingChange::Forget { txn }],
            None => Vec::new(),
        }
    }

    /// The transactions a query of `span` from `viewer` would have to learn the decision of
    /// first: prepared ones of others, with bytes there.
    pub fn in_doubt(&self, span: Span, viewer: Option<TxnId>) -> Vec<TxnId> {
        self.touching(span)
            .filter(|(t, o)| Some(*t) != viewer && o.state() == ShardTxn::Prepared)
            .map(|(t, _)| t)
            .collect()
    }

    fn touching(&self, span: Span) -> impl Iterator<Item = (TxnId, &Overlay)> + '_ {
        self.txns.iter().filter_map(move |(t, o)| {
            let writes = o
                .maps
                .get(&(span.ino, span.stripe))
                .is_some_and(|map| !map.overlapping(span.start, span.end).is_empty());
            (writes || o.cut_before(span.ino, span.end)).then_some((*t, o))
        })
    }

    /// The owners of `span` as `viewer` sees them: the map, with the overlays of its own
    /// transaction and of those `committed` says were decided to commit laid on top. Also how
    /// each transaction with bytes there was treated.
    pub fn query(
        &self,
        own: &Ownership,
        span: Span,
        viewer: Option<TxnId>,
        committed: &dyn Fn(TxnId) -> bool,
    ) -> (Vec<OwnedRun>, Vec<(TxnId, Seen)>) {
        let Span {
            ino,
            stripe,
            start,
            end,
        } = span;
        let base = own.query(ino, stripe, start, end);
        let mut seen = Vec::new();
        let mut view: Option<RunMap<Owner>> = None;
        for (t, o) in self.touching(span) {
            let include = Some(t) == viewer || (o.state() == ShardTxn::Prepared && committed(t));
            seen.push((
                t,
                if include {
                    Seen::Included
                } else {
                    Seen::Excluded
                },
            ));
            if !include {
                continue;
            }
            let v = view.get_or_insert_with(|| {
                let mut m = RunMap::new();
                for r in &base {
                    m.insert(r.run, r.owner);
                }
                m
            });
            if let Some(cut) = o.cuts.get(&ino) {
                v.truncate(cut.at);
            }
            if let Some(map) = o.maps.get(&(ino, stripe)) {
                for (run, owner) in map.overlapping(start, end) {
                    v.insert(run, owner);
                }
            }
        }
        let runs = match view {
            None => base,
            Some(v) => v
                .overlapping(start, end)
                .into_iter()
                .map(OwnedRun::from)
                .collect(),
        };
        (runs, seen)
    }
}

/// Whether answers from several shards to one query agree on every transaction: a transaction
/// included by one and excluded by another was decided between them (the asker asks the
/// excluding shards again, which then see the decision).
pub fn consistent(answers: &[Vec<(TxnId, Seen)>]) -> Result<(), Vec<TxnId>> {
    let mut how: BTreeMap<TxnId, Seen> = BTreeMap::new();
    let mut cut = Vec::new();
    for (t, s) in answers.iter().flatten() {
        match how.insert(*t, *s) {
            Some(before) if before != *s => cut.push(*t),
            _ => {}
        }
    }
    cut.sort_unstable();
    cut.dedup();
    if cut.is_empty() { Ok(()) } else { Err(cut) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn span(start: u64, end: u64) -> Span {
        Span {
            ino: 1,
            stripe: 0,
            start,
            end,
        }
    }

    fn owner(client: u64) -> Owner {
        Owner { node: 0, client }
    }

    /// Bytes of `[0, n)` as a query from `viewer` answers them.
    fn bytes(
        p: &PendingOwnership,
        own: &Ownership,
        n: u64,
        viewer: Option<TxnId>,
        committed: &dyn Fn(TxnId) -> bool,
    ) -> Vec<Option<u64>> {
        let mut out = vec![None; n as usize];
        for r in p.query(own, span(0, n), viewer, committed).0 {
            for (s, e) in r.run.pieces() {
                for b in s..e {
                    out[b as usize] = Some(r.owner.client);
                }
            }
        }
        out
    }

    #[test]
    fn members_see_their_writes_others_only_after_the_decision() {
        let mut own = Ownership::default();
        let mut p = PendingOwnership::default();
        own.attach(1, 0, owner(9), &[Run::single(0, 100)]);
        p.attach(7, 1, 0, owner(1), &[Run::single(50, 100)])
            .unwrap();
        let never = |_| false;
        assert_eq!(bytes(&p, &own, 150, None, &never)[60], Some(9));
        assert_eq!(bytes(&p, &own, 150, Some(7), &never)[60], Some(1));
        assert_eq!(bytes(&p, &own, 150, Some(7), &never)[120], Some(1));
        assert!(
            p.in_doubt(span(0, 150), None).is_empty(),
            "active: surely hidden"
        );
        p.prepare(7);
        assert_eq!(p.in_doubt(span(0, 150), None), vec![7]);
        assert!(
            p.in_doubt(span(0, 40), None).is_empty(),
            "no bytes of 7 there"
        );
        let (runs, seen) = p.query(&own, span(0, 150), None, &|t| t == 7);
        assert_eq!(seen, vec![(7, Seen::Included)]);
        assert!(runs.iter().any(|r| r.owner == owner(1)));
        let e = p
            .attach(7, 1, 0, owner(1), &[Run::single(0, 1)])
            .unwrap_err();
        assert!(e.message.contains("takes no more writes"), "{e}");
        let (changes, forget) = p.commit(7, &mut own);
        assert!(!changes.is_empty());
        assert_eq!(forget, vec![PendingChange::Forget { txn: 7 }]);
        assert_eq!(bytes(&p, &own, 150, None, &never)[60], Some(1));
        assert_eq!(bytes(&p, &own, 150, None, &never)[10], Some(9));
        assert_eq!(p.commit(7, &mut own), (Vec::new(), Vec::new()));
    }

    #[test]
    fn an_aborted_transaction_names_each_log_it_wrote_once_by_file() {
        let mut p = PendingOwnership::default();
        p.attach(
            7,
            1,
            0,
            owner(1),
            &[Run::single(0, 10), Run::single(20, 10)],
        )
        .unwrap();
        p.attach(7, 1, 1, owner(1), &[Run::single(4096, 10)])
            .unwrap();
        p.attach(7, 1, 0, owner(2), &[Run::single(40, 10)]).unwrap();
        p.attach(7, 3, 0, Owner { node: 1, client: 5 }, &[Run::single(0, 1)])
            .unwrap();
        p.attach(8, 1, 0, owner(6), &[Run::single(60, 1)]).unwrap();
        let logs = p.logs_of(7);
        assert_eq!(
            logs.into_iter().collect::<Vec<_>>(),
            vec![
                (1, vec![owner(1), owner(2)]),
                (3, vec![Owner { node: 1, client: 5 }])
            ]
        );
        p.abort(7);
        assert!(p.logs_of(7).is_empty(), "forgotten with the abort");
        assert_eq!(p.logs_of(8)[&1], vec![owner(6)]);
    }

    #[test]
    fn sizes_grow_for_members_and_for_others_at_the_decision() {
        let mut p = PendingOwnership::default();
        let never = |_| false;
        assert_eq!(
            p.extend(7, 1, 100).unwrap(),
            vec![PendingChange::Size {
                txn: 7,
                ino: 1,
                end: 100
            }]
        );
        assert!(p.extend(7, 1, 50).unwrap().is_empty(), "never shrinks");
        assert_eq!(p.size_as(1, 10, Some(7), &never), (100, vec![]));
        assert_eq!(p.size_as(1, 10, None, &never), (10, vec![7]));
        assert_eq!(p.size_as(2, 10, None, &never), (10, vec![]));
        p.prepare(7);
        assert_eq!(p.size_as(1, 10, None, &|t| t == 7), (100, vec![]));
        assert!(p.extend(7, 1, 200).is_err(), "closed once prepared");
        assert_eq!(p.sizes_of(7), vec![(1, SizeChange::Extend(100))]);
        let reloaded = PendingOwnership::load(&[], &[(7, 1, 100)], &[], &[7]);
        assert_eq!(reloaded.size_as(1, 10, Some(7), &never), (100, vec![]));
        assert_eq!(reloaded.sizes_of(7), vec![(1, SizeChange::Extend(100))]);
    }

    #[test]
    fn a_cut_sets_the_size_for_members_and_at_the_decision() {
        let mut p = PendingOwnership::default();
        let never = |_| false;
        p.extend(7, 1, 100).unwrap();
        let changes = p.truncate(7, 1, 20, Some("/f")).unwrap();
        assert!(changes.contains(&PendingChange::Size {
            txn: 7,
            ino: 1,
            end: 20
        }));
        assert_eq!(p.size_as(1, 500, Some(7), &never), (20, vec![]));
        assert_eq!(p.size_as(1, 500, None, &never), (500, vec![7]));
        p.extend(7, 1, 60).unwrap();
        assert_eq!(p.size_as(1, 500, Some(7), &never), (60, vec![]));
        assert_eq!(p.sizes_of(7), vec![(1, SizeChange::Set(60))]);
        assert_eq!(p.pfs_cuts_of(7), vec![(1, "/f".to_string(), 20)]);
        // A second, deeper cut on a shard without the inode keeps the name.
        p.truncate(7, 1, 5, None).unwrap();
        assert_eq!(p.pfs_cuts_of(7), vec![(1, "/f".to_string(), 5)]);
        let e = p.truncate(8, 1, 0, None).unwrap_err();
        assert_eq!(e.errno, Errno::Busy);
        let e = p
            .attach(8, 1, 0, owner(2), &[Run::single(4, 2)])
            .unwrap_err();
        assert_eq!(e.errno, Errno::Busy, "{e}");
        p.prepare(7);
        assert!(p.truncate(7, 1, 0, None).is_err(), "closed once prepared");
        assert_eq!(p.size_as(1, 500, None, &|t| t == 7), (60, vec![]));
    }

    #[test]
    fn two_transactions_cannot_hold_the_same_bytes() {
        let mut p = PendingOwnership::default();
        // Interleaved strided runs of two transactions share no byte: both fine.
        p.attach(
            1,
            1,
            0,
            owner(1),
            &[Run {
                start: 0,
                len: 10,
                stride: 20,
                count: 5,
            }],
        )
        .unwrap();
        p.attach(
            2,
            1,
            0,
            owner(2),
            &[Run {
                start: 10,
                len: 10,
                stride: 20,
                count: 5,
            }],
        )
        .unwrap();
        let e = p
            .attach(2, 1, 0, owner(2), &[Run::single(45, 2)])
            .unwrap_err();
        assert_eq!(e.errno, Errno::Busy);
        assert!(
            e.message.contains("at 45") && e.message.contains("0000000000000001"),
            "{e}"
        );
        // Once the first aborts, the bytes are free.
        assert_eq!(p.abort(1), vec![PendingChange::Forget { txn: 1 }]);
        p.attach(2, 1, 0, owner(2), &[Run::single(45, 2)]).unwrap();
    }

    #[test]
    fn answers_cut_by_a_decision_are_told_apart() {
        assert_eq!(
            consistent(&[
                vec![(1, Seen::Excluded)],
                vec![(1, Seen::Excluded), (2, Seen::Included)]
            ]),
            Ok(())
        );
        assert_eq!(
            consistent(&[vec![(1, Seen::Excluded)], vec![(1, Seen::Included)]]),
            Err(vec![1])
        );
    }

    #[derive(Clone, Debug)]
    enum Op {
        /// A write outside any transaction: client, start, len.
        Plain(u64, u64, u64),
        /// A write of transaction t: start, len.
        InTxn(usize, u64, u64),
        /// Transaction t truncates the file to a size.
        Truncate(usize, u64),
        Prepare(usize),
        Commit(usize),
        Abort(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (1u64..4, 0u64..200, 1u64..60).prop_map(|(c, s, l)| Op::Plain(c, s, l)),
            (0usize..3, 0u64..200, 1u64..60).prop_map(|(t, s, l)| Op::InTxn(t, s, l)),
            (0usize..3, 0u64..260).prop_map(|(t, n)| Op::Truncate(t, n)),
            (0usize..3).prop_map(Op::Prepare),
            (0usize..3).prop_map(Op::Commit),
            (0usize..3).prop_map(Op::Abort),
        ]
    }

    proptest! {
        /// Against a byte model: outsiders see exactly the committed bytes, each transaction
        /// its own on top, a decided transaction is seen whole or not at all, and reloading the
        /// persisted rows gives the same shard.
        #[test]
        fn pending_ownership_matches_a_byte_model(ops in proptest::collection::vec(op(), 1..60)) {
            const N: u64 = 260;
            let mut own = Ownership::default();
            let mut p = PendingOwnership::default();
            let mut committed: Vec<Option<u64>> = vec![None; N as usize];
            // Per transaction (ids 10, 11, 12; owners 100 + t): its pending bytes, and whether
            // prepared.
            let mut pending: Vec<Vec<Option<u64>>> = vec![vec![None; N as usize]; 3];
            // Where each transaction cuts the file.
            let mut cuts: [Option<u64>; 3] = [None; 3];
            let mut prepared = [false; 3];
            let mut rows: BTreeMap<(TxnId, u64), (Run, Owner)> = BTreeMap::new();
            let mut cut_rows: BTreeMap<TxnId, Cut> = BTreeMap::new();
            let mut prepared_rows: Vec<TxnId> = Vec::new();
            let apply = |rows: &mut BTreeMap<(TxnId, u64), (Run, Owner)>, cut_rows: &mut BTreeMap<TxnId, Cut>, prepared_rows: &mut Vec<TxnId>, changes: Vec<PendingChange>| {
                for c in changes {
                    match c {
                        PendingChange::Put { txn, run, owner, .. } => { rows.insert((txn, run.start), (run, owner)); }
                        PendingChange::Del { txn, start, .. } => { rows.remove(&(txn, start)); }
                        PendingChange::Prepared { txn } => prepared_rows.push(txn),
                        PendingChange::Size { .. } => {}
                        PendingChange::Cut { txn, cut, .. } => { cut_rows.insert(txn, cut); }
                        PendingChange::Forget { txn } => {
                            rows.retain(|(t, _), _| *t != txn);
                            cut_rows.remove(&txn);
                            prepared_rows.retain(|t| *t != txn);
                        }
                    }
                }
            };
            for o in ops {
                match o {
                    Op::Plain(c, s, l) => {
                        own.attach(1, 0, owner(c), &[Run::single(s, l)]);
                        for b in s..s + l { committed[b as usize] = Some(c); }
                    }
                    Op::InTxn(t, s, l) => {
                        let clash = (0..3).filter(|u| *u != t).any(|u| {
                            (s..s + l).any(|b| pending[u][b as usize].is_some())
                                || cuts[u].is_some_and(|c| c < s + l)
                        });
                        let r = p.attach(10 + t as u64, 1, 0, owner(100 + t as u64), &[Run::single(s, l)]);
                        prop_assert_eq!(r.is_ok(), !clash && !prepared[t], "{:?}", r);
                        if let Ok(changes) = r {
                            apply(&mut rows, &mut cut_rows, &mut prepared_rows, changes);
                            for b in s..s + l { pending[t][b as usize] = Some(100 + t as u64); }
                        }
                    }
                    Op::Truncate(t, n) => {
                        let clash = (0..3).filter(|u| *u != t).any(|u| {
                            cuts[u].is_some() || (n..N).any(|b| pending[u][b as usize].is_some())
                        });
                        let r = p.truncate(10 + t as u64, 1, n, None);
                        prop_assert_eq!(r.is_ok(), !clash && !prepared[t], "{:?}", r);
                        if let Ok(changes) = r {
                            apply(&mut rows, &mut cut_rows, &mut prepared_rows, changes);
                            cuts[t] = Some(cuts[t].map_or(n, |c| c.min(n)));
                            for b in n..N { pending[t][b as usize] = None; }
                        }
                    }
                    Op::Prepare(t) => {
                        apply(&mut rows, &mut cut_rows, &mut prepared_rows, p.prepare(10 + t as u64));
                        prepared[t] = true;
                    }
                    Op::Commit(t) => {
                        let (_, changes) = p.commit(10 + t as u64, &mut own);
                        apply(&mut rows, &mut cut_rows, &mut prepared_rows, changes);
                        if let Some(c) = cuts[t] {
                            for b in c..N { committed[b as usize] = None; }
                        }
                        for b in 0..N as usize {
                            if let Some(o) = pending[t][b] { committed[b] = Some(o); }
                        }
                        pending[t] = vec![None; N as usize];
                        cuts[t] = None;
                        prepared[t] = false;
                    }
                    Op::Abort(t) => {
                        apply(&mut rows, &mut cut_rows, &mut prepared_rows, p.abort(10 + t as u64));
                        pending[t] = vec![None; N as usize];
                        cuts[t] = None;
                        prepared[t] = false;
                    }
                }
                let never = |_| false;
                prop_assert_eq!(&bytes(&p, &own, N, None, &never), &committed);
                for t in 0..3 {
                    let mut mine = committed.clone();
                    if let Some(c) = cuts[t] {
                        for b in c..N { mine[b as usize] = None; }
                    }
                    for b in 0..N as usize {
                        if let Some(o) = pending[t][b] { mine[b] = Some(o); }
                    }
                    prop_assert_eq!(&bytes(&p, &own, N, Some(10 + t as u64), &never), &mine);
                    // Decided to commit, not yet completed: outsiders see all of it.
                    if prepared[t] {
                        let decided = |x: TxnId| x == 10 + t as u64;
                        prop_assert_eq!(&bytes(&p, &own, N, None, &decided), &mine);
                    }
                }
            }
            // The persisted rows rebuild the same pending state.
            let table: Vec<(TxnId, u64, u64, Run, Owner)> = rows.iter().map(|((t, _), (r, o))| (*t, 1, 0, *r, *o)).collect();
            let cut_table: Vec<(TxnId, u64, Cut)> = cut_rows.into_iter().map(|(t, c)| (t, 1, c)).collect();
            let reloaded = PendingOwnership::load(&table, &[], &cut_table, &prepared_rows);
            for t in 0..3u64 {
                let never = |_| false;
                prop_assert_eq!(bytes(&reloaded, &own, N, Some(10 + t), &never), bytes(&p, &own, N, Some(10 + t), &never));
            }
            let mut states: Vec<_> = p.transactions().filter(|(_, s)| *s == ShardTxn::Prepared).map(|(t, _)| t).collect();
            let mut again: Vec<_> = reloaded.transactions().filter(|(_, s)| *s == ShardTxn::Prepared).map(|(t, _)| t).collect();
            states.sort_unstable();
            again.sort_unstable();
            prop_assert_eq!(states, again);
        }
    }
}
