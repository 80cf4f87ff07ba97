//! One process's view of a D2T transaction: which call may come next, what the
//! process contributes to each collective phase, and what the phase's united result means.
//!
//! The calls, in order: create the transaction (collective); create singleton sub-transactions
//! (one process each, before begin: begin gathers them so every process knows every one); create
//! global sub-transactions (collective, before or after begin: one created before begin is
//! declared, as singletons are, and begin checks that every process declared the same ones);
//! begin (collective); commit
//! sub-transactions (each process its own part); vote (collective: any process may vote abort,
//! and a sub-transaction left uncommitted votes abort for it; the decision is taken with the
//! vote and stands); commit or abort, which take the decision up (an abort before the vote is
//! collective); finalize. The transport (MPI through the tiers, in `tessera-txn`) only moves the items this
//! state machine asks for and hands back their sorted union; every process then applies the
//! same union, so all of them reach the same state.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// A transaction's id: drawn by the coordinator, known to every process after create.
pub type TxnId = u64;

/// A sub-transaction: a singleton of one process (`owner`), or global (`owner` = None).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SubId {
    pub owner: Option<u32>,
    pub seq: u32,
}

impl fmt::Display for SubId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.owner {
            Some(r) => write!(f, "singleton {} of rank {r}", self.seq),
            None => write!(f, "global {}", self.seq),
        }
    }
}

/// The outcome of the vote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    Commit,
    /// Why, one line per distinct reason (sorted).
    Abort(Vec<String>),
}

/// Where the transaction stands for this process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Phase {
    Created,
    Begun,
    Voted(Decision),
    Committed,
    Aborted,
}

impl Phase {
    fn name(&self) -> &'static str {
        match self {
            Phase::Created => "created (not begun)",
            Phase::Begun => "begun",
            Phase::Voted(Decision::Commit) => "voted to commit",
            Phase::Voted(Decision::Abort(_)) => "voted to abort",
            Phase::Committed => "committed",
            Phase::Aborted => "aborted",
        }
    }
}

/// A call made out of order or with a wrong argument, or a transaction that cannot commit.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TxnError {
    #[error("{call} cannot be called now: the transaction is {state}; {hint}")]
    Order {
        call: &'static str,
        state: &'static str,
        hint: &'static str,
    },
    #[error("the transaction was aborted: {}", .0.join("; "))]
    Aborted(Vec<String>),
    #[error("the processes disagree on {what}: {seen}")]
    Disagree { what: &'static str, seen: String },
    #[error("{0}")]
    Sub(String),
    /// A bad argument or setting, or a call another process could not make.
    #[error("{0}")]
    Invalid(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Sub {
    name: String,
    /// Singleton: committed by its owner. Global: this process committed its part.
    committed: bool,
}

/// One process's state of one transaction.
#[derive(Clone, Debug)]
pub struct TxnState {
    rank: u32,
    id: TxnId,
    phase: Phase,
    subs: BTreeMap<SubId, Sub>,
    next_singleton: u32,
    next_global: u32,
}

/// What begin checks of the global sub-transactions declared before it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Declared {
    /// A process declared this many.
    Count(u32),
    /// A process declared global `seq` under this name.
    Named(u32, String),
}

impl TxnState {
    /// The state of process `rank` once create has agreed on `id`.
    pub fn new(rank: u32, id: TxnId) -> TxnState {
        TxnState {
            rank,
            id,
            phase: Phase::Created,
            subs: BTreeMap::new(),
            next_singleton: 0,
            next_global: 0,
        }
    }

    pub fn id(&self) -> TxnId {
        self.id
    }

    pub fn phase(&self) -> &Phase {
        &self.phase
    }

    /// Every sub-transaction this process knows (after begin: every singleton of every
    /// process), with its name.
    pub fn subs(&self) -> impl Iterator<Item = (SubId, &str)> {
        self.subs.iter().map(|(id, s)| (*id, s.name.as_str()))
    }

    fn order(&self, call: &'static str, hint: &'static str) -> TxnError {
        TxnError::Order {
            call,
            state: self.phase.name(),
            hint,
        }
    }

    /// A singleton sub-transaction of this process (local).
    pub fn create_singleton(&mut self, name: &str) -> Result<SubId, TxnError> {
        if self.phase != Phase::Created {
            return Err(self.order(
                "create_sub_transaction",
                "create singleton sub-transactions before begin_transaction, which gathers them",
            ));
        }
        let id = SubId {
            owner: Some(self.rank),
            seq: self.next_singleton,
        };
        self.next_singleton += 1;
        self.subs.insert(
            id,
            Sub {
                name: name.to_string(),
                committed: false,
            },
        );
        Ok(id)
    }

    /// Declares a global sub-transaction before begin (local): begin checks that every process
    /// declared the same ones, in the same order ([`TxnState::agree_declared`]).
    pub fn declare_global(&mut self, name: &str) -> Result<SubId, TxnError> {
        if self.phase != Phase::Created {
            return Err(self.order(
                "create_sub_transaction_all",
                "only before begin_transaction is a global sub-transaction declared",
            ));
        }
        let id = SubId {
            owner: None,
            seq: self.next_global,
        };
        self.next_global += 1;
        self.subs.insert(
            id,
            Sub {
                name: name.to_string(),
                committed: false,
            },
        );
        Ok(id)
    }

    /// What this process contributes to begin's check of the declared globals.
    pub fn declared_items(&self) -> Vec<Declared> {
        let globals = self.subs.iter().filter(|(id, _)| id.owner.is_none());
        std::iter::once(Declared::Count(self.next_global))
            .chain(globals.map(|(id, s)| Declared::Named(id.seq, s.name.clone())))
            .collect()
    }

    /// Begin's check of the united declarations: every process declared as many globals, and
    /// each under one name.
    pub fn agree_declared(united: &[Declared]) -> Result<(), TxnError> {
        let counts: Vec<u32> = united
            .iter()
            .filter_map(|d| match d {
                Declared::Count(n) => Some(*n),
                Declared::Named(..) => None,
            })
            .collect();
        if counts.len() > 1 {
            return Err(TxnError::Disagree {
                what: "how many global sub-transactions they created before begin",
                seen: counts
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        let mut named: BTreeMap<u32, Vec<&str>> = BTreeMap::new();
        for d in united {
            if let Declared::Named(seq, name) = d {
                named.entry(*seq).or_default().push(name);
            }
        }
        if let Some(names) = named.values().find(|n| n.len() > 1) {
            return Err(TxnError::Disagree {
                what: "the name of a global sub-transaction",
                seen: names.join(", "),
            });
        }
        Ok(())
    }

    /// What this process contributes to a global sub-transaction's creation after begin: its
    /// name.
    pub fn global_items(&self, name: &str) -> Result<Vec<String>, TxnError> {
        match self.phase {
            Phase::Created | Phase::Begun => Ok(vec![name.to_string()]),
            _ => Err(self.order(
                "create_sub_transaction_all",
                "global sub-transactions are created before the vote",
            )),
        }
    }

    /// The global sub-transaction the united names create: every process must have named it
    /// alike.
    pub fn create_global(&mut self, names: Vec<String>) -> Result<SubId, TxnError> {
        let [name] = <[String; 1]>::try_from(names).map_err(|names| TxnError::Disagree {
            what: "the name of a global sub-transaction",
            seen: names.join(", "),
        })?;
        let id = SubId {
            owner: None,
            seq: self.next_global,
        };
        self.next_global += 1;
        self.subs.insert(
            id,
            Sub {
                name,
                committed: false,
            },
        );
        Ok(id)
    }

    /// What this process contributes to begin: its singleton sub-transactions.
    pub fn begin_items(&self) -> Result<Vec<(SubId, String)>, TxnError> {
        if self.phase != Phase::Created {
            return Err(self.order("begin_transaction", "a transaction begins once"));
        }
        Ok(self
            .subs
            .iter()
            .filter(|(id, _)| id.owner == Some(self.rank))
            .map(|(id, s)| (*id, s.name.clone()))
            .collect())
    }

    /// Begin with every process's singletons.
    pub fn begin(&mut self, singletons: Vec<(SubId, String)>) {
        for (id, name) in singletons {
            self.subs.entry(id).or_insert(Sub {
                name,
                committed: false,
            });
        }
        self.phase = Phase::Begun;
    }

    /// Commits this process's part of `sub` (local).
    pub fn commit_sub(&mut self, sub: SubId) -> Result<(), TxnError> {
        if self.phase != Phase::Begun {
            return Err(self.order(
                "commit_sub_transaction",
                "sub-transactions commit between begin_transaction and the vote",
            ));
        }
        let rank = self.rank;
        let s = self.subs.get_mut(&sub).ok_or_else(|| {
            TxnError::Sub(format!("no sub-transaction {sub} in this transaction"))
        })?;
        if let Some(owner) = sub.owner
            && owner != rank
        {
            return Err(TxnError::Sub(format!(
                "sub-transaction '{}' ({sub}) belongs to rank {owner}; only it commits it",
                s.name
            )));
        }
        s.committed = true;
        Ok(())
    }

    /// What this process contributes to the vote: why it would abort (nothing: commit).
    pub fn vote_items(&self, ok: bool) -> Result<Vec<String>, TxnError> {
        if self.phase != Phase::Begun {
            return Err(self.order(
                "vote_transaction",
                "the vote comes once, after begin_transaction",
            ));
        }
        let mut reasons = Vec::new();
        if !ok {
            reasons.push(format!("rank {} voted to abort", self.rank));
        }
        for (id, s) in &self.subs {
            if s.committed {
                continue;
            }
            match id.owner {
                Some(r) if r == self.rank => reasons.push(format!(
                    "sub-transaction '{}' of rank {r} was not committed",
                    s.name
                )),
                Some(_) => {}
                None => reasons.push(format!(
                    "rank {} did not commit its part of sub-transaction '{}'",
                    self.rank, s.name
                )),
            }
        }
        Ok(reasons)
    }

    /// The decision of the united reasons: commit when there are none.
    pub fn vote(&mut self, reasons: Vec<String>) -> Decision {
        let d = if reasons.is_empty() {
            Decision::Commit
        } else {
            Decision::Abort(reasons)
        };
        self.phase = Phase::Voted(d.clone());
        d
    }

    /// Whether commit may proceed: only after a vote to commit.
    pub fn check_commit(&self) -> Result<(), TxnError> {
        match &self.phase {
            Phase::Voted(Decision::Commit) => Ok(()),
            Phase::Voted(Decision::Abort(r)) => Err(TxnError::Aborted(r.clone())),
            _ => Err(self.order(
                "commit_transaction",
                "commit follows a vote to commit (vote_transaction)",
            )),
        }
    }

    /// The commit completed on every process (or failed: `failures`, united).
    pub fn commit(&mut self, failures: Vec<String>) -> Result<(), TxnError> {
        if failures.is_empty() {
            self.phase = Phase::Committed;
            Ok(())
        } else {
            self.phase = Phase::Aborted;
            Err(TxnError::Aborted(failures))
        }
    }

    /// Whether abort may proceed: anything but a transaction the vote decided to commit
    /// (the decision is taken with the vote and stands).
    pub fn check_abort(&self) -> Result<(), TxnError> {
        match self.phase {
            Phase::Committed => Err(self.order(
                "abort_transaction",
                "a committed transaction stays committed",
            )),
            Phase::Voted(Decision::Commit) => Err(self.order(
                "abort_transaction",
                "the vote decided to commit it and that decision stands; call commit_transaction",
            )),
            _ => Ok(()),
        }
    }

    pub fn abort(&mut self) {
        self.phase = Phase::Aborted;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    /// Runs the phases of `n` processes as the transport would: unite each contribution.
    fn unite<T: Ord + Clone>(each: Vec<Vec<T>>) -> Vec<T> {
        let set: BTreeSet<T> = each.into_iter().flatten().collect();
        set.into_iter().collect()
    }

    #[test]
    fn the_seeds_sequence_commits() {
        let mut ps: Vec<TxnState> = (0..4).map(|r| TxnState::new(r, 7)).collect();
        let single = ps[2].create_singleton("mark variable").unwrap();
        let names = unite(
            ps.iter()
                .map(|p| p.global_items("write").unwrap())
                .collect(),
        );
        let g0: Vec<SubId> = ps
            .iter_mut()
            .map(|p| p.create_global(names.clone()).unwrap())
            .collect();
        let items = unite(ps.iter().map(|p| p.begin_items().unwrap()).collect());
        for p in ps.iter_mut() {
            p.begin(items.clone());
            assert_eq!(p.subs().count(), 2, "every process knows the singleton");
        }
        ps[2].commit_sub(single).unwrap();
        for p in ps.iter_mut() {
            p.commit_sub(g0[0]).unwrap();
        }
        let reasons = unite(ps.iter().map(|p| p.vote_items(true).unwrap()).collect());
        for p in ps.iter_mut() {
            assert_eq!(p.vote(reasons.clone()), Decision::Commit);
            p.check_commit().unwrap();
            p.commit(Vec::new()).unwrap();
            assert_eq!(*p.phase(), Phase::Committed);
            assert!(p.check_abort().is_err());
        }
    }

    #[test]
    fn globals_declared_before_begin_must_agree() {
        let mut ps: Vec<TxnState> = (0..3).map(|r| TxnState::new(r, 1)).collect();
        for p in ps.iter_mut() {
            p.declare_global("read").unwrap();
        }
        let united = unite(ps.iter().map(|p| p.declared_items()).collect());
        TxnState::agree_declared(&united).unwrap();
        ps[2].declare_global("write").unwrap();
        let united = unite(ps.iter().map(|p| p.declared_items()).collect());
        let e = TxnState::agree_declared(&united).unwrap_err();
        assert!(e.to_string().contains("how many global"), "{e}");
        ps[0].declare_global("other").unwrap();
        ps[1].declare_global("write").unwrap();
        let united = unite(ps.iter().map(|p| p.declared_items()).collect());
        let e = TxnState::agree_declared(&united).unwrap_err();
        assert!(e.to_string().contains("other, write"), "{e}");
        ps[0].begin(Vec::new());
        let e = ps[0].declare_global("late").unwrap_err();
        assert!(e.to_string().contains("before begin_transaction"), "{e}");
    }

    #[test]
    fn the_decision_of_the_vote_stands() {
        let mut p = TxnState::new(0, 1);
        p.begin(Vec::new());
        assert_eq!(p.vote(Vec::new()), Decision::Commit);
        let e = p.check_abort().unwrap_err();
        assert!(e.to_string().contains("decided to commit"), "{e}");
        let mut q = TxnState::new(0, 2);
        q.begin(Vec::new());
        q.vote(vec!["rank 0 voted to abort".into()]);
        q.check_abort().unwrap();
        let e = q.check_commit().unwrap_err();
        assert_eq!(e, TxnError::Aborted(vec!["rank 0 voted to abort".into()]));
    }

    #[test]
    fn bad_calls_name_what_was_wrong() {
        let mut p = TxnState::new(0, 1);
        let e = p.check_commit().unwrap_err();
        assert!(e.to_string().contains("vote_transaction"), "{e}");
        p.begin(Vec::new());
        let e = p.create_singleton("late").unwrap_err();
        assert!(e.to_string().contains("before begin_transaction"), "{e}");
        let other = SubId {
            owner: Some(3),
            seq: 0,
        };
        let e = p.commit_sub(other).unwrap_err();
        assert!(e.to_string().contains("no sub-transaction"), "{e}");
        p.begin(vec![(other, "theirs".into())]);
        let e = p.commit_sub(other).unwrap_err();
        assert!(e.to_string().contains("belongs to rank 3"), "{e}");
        let e = p.create_global(vec!["a".into(), "b".into()]).unwrap_err();
        assert!(
            e.to_string().contains("disagree") && e.to_string().contains("a, b"),
            "{e}"
        );
    }

    proptest! {
        /// Any process voting abort, or any part of a sub-transaction left uncommitted, aborts
        /// the whole transaction on every process, with every reason; otherwise all commit.
        #[test]
        fn every_process_reaches_the_same_decision(
            n in 1u32..8,
            singles in proptest::collection::vec((0u32..8, any::<bool>()), 0..6),
            globals in proptest::collection::vec(proptest::collection::vec(any::<bool>(), 8), 0..3),
            votes in proptest::collection::vec(any::<bool>(), 8),
        ) {
            let mut ps: Vec<TxnState> = (0..n).map(|r| TxnState::new(r, 1)).collect();
            let mut created = Vec::new();
            for (owner, commit) in &singles {
                let owner = owner % n;
                created.push((owner, ps[owner as usize].create_singleton("s").unwrap(), *commit));
            }
            let mut gs = Vec::new();
            for (i, _) in globals.iter().enumerate() {
                let name = format!("g{i}");
                let names = unite(ps.iter().map(|p| p.global_items(&name).unwrap()).collect());
                let ids: Vec<SubId> = ps.iter_mut().map(|p| p.create_global(names.clone()).unwrap()).collect();
                prop_assert!(ids.windows(2).all(|w| w[0] == w[1]));
                gs.push(ids[0]);
            }
            let items = unite(ps.iter().map(|p| p.begin_items().unwrap()).collect());
            for p in ps.iter_mut() {
                p.begin(items.clone());
            }
            for (owner, id, commit) in &created {
                if *commit {
                    ps[*owner as usize].commit_sub(*id).unwrap();
                }
            }
            for (g, parts) in gs.iter().zip(&globals) {
                for (r, p) in ps.iter_mut().enumerate() {
                    if parts[r] {
                        p.commit_sub(*g).unwrap();
                    }
                }
            }
            let reasons = unite((0..n as usize).map(|r| ps[r].vote_items(votes[r]).unwrap()).collect());
            let decisions: Vec<Decision> = ps.iter_mut().map(|p| p.vote(reasons.clone())).collect();
            prop_assert!(decisions.windows(2).all(|w| w[0] == w[1]));
            let should_commit = (0..n as usize).all(|r| votes[r])
                && created.iter().all(|c| c.2)
                && globals.iter().all(|parts| parts[..n as usize].iter().all(|c| *c));
            prop_assert_eq!(decisions[0] == Decision::Commit, should_commit);
            for p in &ps {
                prop_assert_eq!(p.check_commit().is_ok(), should_commit);
            }
        }
    }
}
