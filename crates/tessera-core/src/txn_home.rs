//! The two-phase commit of one transaction between the daemons, as its home daemon runs it
//! (D2T). Pure: it takes events and answers with the actions the daemon must carry out.
//!
//! A transaction has a home (the daemon of its coordinator process); its members' processes
//! join it there. Committing runs: **prepare** on every participating node (each makes the
//! transaction's pending state durable and closes it to further writes, or refuses); then
//! **one decision record** written at the home, the switch that makes everything visible; then
//! **completion** on every participant (each lays the pending state into its maps), after which
//! the record can go. The record is kept until every participant has completed, so a prepared
//! participant that asks the home learns the decision, and one that hears "unknown" knows no
//! decision was ever taken (presumed abort).
//!
//! Failures: a transaction none of whose member processes is still alive aborts once
//! `timeout` has passed since the last one ended (one that no process ever joined stays open
//! until asked: the daemon opens a transaction when its first member joins); a participant
//! that refuses or does not answer the prepare aborts it; after a restart, a home with a
//! decision record completes it, and one without aborts what it had open.
//!
//! A node in doubt that asks the home while the decision is being written ([`HomeState::
//! Deciding`], [`HomeTxn::decided`] is `None`) must be told "not decided yet, ask again", never
//! "unknown": presumed abort is only for a transaction the home has no state of.

use crate::txn_state::TxnId;
use std::collections::BTreeSet;

/// What the home decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Commit,
    Abort,
}

/// What the daemon must do for the state machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Ask `node` to prepare the transaction.
    Prepare { node: u32 },
    /// Write the decision record durably, then report [`HomeTxn::decision_durable`].
    WriteDecision(Outcome),
    /// Tell `node` the decision; it reports [`HomeTxn::completed`] when done.
    Complete { node: u32, outcome: Outcome },
    /// Answer the process that asked to commit (or abort), with the reasons of an abort.
    Answer(Result<(), Vec<String>>),
    /// Every participant completed: the record and the state can go.
    Forget,
}

/// Where the transaction stands at its home.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HomeState {
    /// Members write; nothing prepared.
    Open,
    /// Waiting for the prepare answers of `waiting`.
    Preparing {
        waiting: BTreeSet<u32>,
        refused: Vec<String>,
    },
    /// The decision is being written.
    Deciding(Outcome),
    /// Decided and durable; waiting for `waiting` to complete.
    Completing {
        outcome: Outcome,
        waiting: BTreeSet<u32>,
    },
    /// Done: every participant completed.
    Done(Outcome),
}

/// One transaction at its home.
#[derive(Clone, Debug)]
pub struct HomeTxn {
    pub txn: TxnId,
    state: HomeState,
    /// The nodes that may hold its pending state (every node of the instance).
    nodes: u32,
    /// Member processes alive, and when the last one ended (ms on the caller's clock).
    members: u32,
    last_left_ms: Option<u64>,
    /// What a process asked for and waits the answer to, if any.
    asked: Option<Outcome>,
    /// Why the transaction aborts, for the answer.
    reasons: Vec<String>,
}

impl HomeTxn {
    /// A transaction opened at its home on an instance of `nodes` daemons.
    pub fn open(txn: TxnId, nodes: u32) -> HomeTxn {
        HomeTxn {
            txn,
            state: HomeState::Open,
            nodes,
            members: 0,
            last_left_ms: None,
            asked: None,
            reasons: Vec::new(),
        }
    }

    pub fn state(&self) -> &HomeState {
        &self.state
    }

    /// The decision, once it is durable (what a participant in doubt is told).
    pub fn decided(&self) -> Option<Outcome> {
        match &self.state {
            HomeState::Completing { outcome, .. } | HomeState::Done(outcome) => Some(*outcome),
            _ => None,
        }
    }

    /// Why it aborts or aborted (empty for a commit).
    pub fn reasons(&self) -> &[String] {
        &self.reasons
    }

    /// A member process joined.
    pub fn joined(&mut self) {
        self.members += 1;
        self.last_left_ms = None;
    }

    /// A member process ended (its connection closed) at `now_ms`.
    pub fn left(&mut self, now_ms: u64) {
        self.members = self.members.saturating_sub(1);
        if self.members == 0 {
            self.last_left_ms = Some(now_ms);
        }
    }

    /// The coordinator process asks to commit (after its processes voted to commit).
    pub fn commit(&mut self) -> Vec<Action> {
        match &self.state {
            HomeState::Open => {
                self.asked = Some(Outcome::Commit);
                let waiting: BTreeSet<u32> = (0..self.nodes).collect();
                let actions = waiting
                    .iter()
                    .map(|n| Action::Prepare { node: *n })
                    .collect();
                self.state = HomeState::Preparing {
                    waiting,
                    refused: Vec::new(),
                };
                actions
            }
            // Asked again (a retry): the answer comes when the decision is durable.
            HomeState::Preparing { .. } | HomeState::Deciding(_) => {
                self.asked = Some(Outcome::Commit);
                Vec::new()
            }
            HomeState::Completing { outcome, .. } | HomeState::Done(outcome) => {
                vec![Action::Answer(self.answer(Outcome::Commit, *outcome))]
            }
        }
    }

    /// The coordinator process asks to abort (its processes voted to abort, or it gave up).
    pub fn abort(&mut self, reasons: Vec<String>) -> Vec<Action> {
        match &self.state {
            HomeState::Open | HomeState::Preparing { .. } => {
                self.asked = Some(Outcome::Abort);
                self.decide(Outcome::Abort, reasons)
            }
            HomeState::Deciding(_) => {
                self.asked = Some(Outcome::Abort);
                Vec::new()
            }
            HomeState::Completing { outcome, .. } | HomeState::Done(outcome) => {
                vec![Action::Answer(self.answer(Outcome::Abort, *outcome))]
            }
        }
    }

    fn decide(&mut self, outcome: Outcome, reasons: Vec<String>) -> Vec<Action> {
        self.state = HomeState::Deciding(outcome);
        self.reasons = reasons;
        vec![Action::WriteDecision(outcome)]
    }

    /// The answer to a process that asked for `asked` when the decision is `outcome`.
    fn answer(&self, asked: Outcome, outcome: Outcome) -> Result<(), Vec<String>> {
        match (asked, outcome) {
            (_, o) if o == asked => Ok(()),
            (Outcome::Commit, _) => Err(if self.reasons.is_empty() {
                vec![format!("transaction {:016x} was aborted", self.txn)]
            } else {
                self.reasons.clone()
            }),
            (Outcome::Abort, _) => Err(vec![format!(
                "transaction {:016x} is already committed",
                self.txn
            )]),
        }
    }

    /// `node` answered the prepare: `Ok`, or why it cannot (an unreachable node counts as a
    /// refusal; the daemon reports it so after the peer timeout).
    pub fn prepared(&mut self, node: u32, answer: Result<(), String>) -> Vec<Action> {
        let HomeState::Preparing { waiting, refused } = &mut self.state else {
            return Vec::new();
        };
        if !waiting.remove(&node) {
            return Vec::new();
        }
        if let Err(why) = answer {
            refused.push(format!("node {node} could not prepare: {why}"));
        }
        if !waiting.is_empty() {
            return Vec::new();
        }
        let refused = std::mem::take(refused);
        let outcome = if refused.is_empty() {
            Outcome::Commit
        } else {
            Outcome::Abort
        };
        self.decide(outcome, refused)
    }

    /// The decision record is durable: completion starts, and the asker is answered.
    pub fn decision_durable(&mut self) -> Vec<Action> {
        let HomeState::Deciding(outcome) = self.state else {
            return Vec::new();
        };
        let waiting: BTreeSet<u32> = (0..self.nodes).collect();
        let mut actions: Vec<Action> = waiting
            .iter()
            .map(|n| Action::Complete { node: *n, outcome })
            .collect();
        if let Some(asked) = self.asked.take() {
            actions.push(Action::Answer(self.answer(asked, outcome)));
        }
        self.state = HomeState::Completing { outcome, waiting };
        actions
    }

    /// `node` completed the decision.
    pub fn completed(&mut self, node: u32) -> Vec<Action> {
        let HomeState::Completing { outcome, waiting } = &mut self.state else {
            return Vec::new();
        };
        waiting.remove(&node);
        if !waiting.is_empty() {
            return Vec::new();
        }
        self.state = HomeState::Done(*outcome);
        vec![Action::Forget]
    }

    /// Time passes: an open transaction whose member processes all ended `timeout_ms` ago
    /// aborts.
    pub fn tick(&mut self, now_ms: u64, timeout_ms: u64) -> Vec<Action> {
        match (&self.state, self.last_left_ms) {
            (HomeState::Open, Some(left)) if self.members == 0 && now_ms >= left + timeout_ms => {
                self.decide(
                    Outcome::Abort,
                    vec!["every process of the transaction ended before it committed".into()],
                )
            }
            _ => Vec::new(),
        }
    }

    /// The home restarted: with its decision record, it completes it again on every node;
    /// without, whatever was open or preparing aborts (no decision was taken).
    pub fn recover(txn: TxnId, nodes: u32, record: Option<Outcome>) -> (HomeTxn, Vec<Action>) {
        let mut t = HomeTxn::open(txn, nodes);
        let outcome = record.unwrap_or(Outcome::Abort);
        let mut actions = Vec::new();
        if record.is_none() {
            actions.push(Action::WriteDecision(Outcome::Abort));
            t.state = HomeState::Deciding(Outcome::Abort);
            return (t, actions);
        }
        t.state = HomeState::Deciding(outcome);
        actions.extend(t.decision_durable());
        (t, actions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn durable_then(t: &mut HomeTxn, actions: Vec<Action>) -> Vec<Action> {
        assert!(
            matches!(actions.as_slice(), [Action::WriteDecision(_)]),
            "{actions:?}"
        );
        t.decision_durable()
    }

    #[test]
    fn a_commit_prepares_every_node_decides_once_and_completes_everywhere() {
        let mut t = HomeTxn::open(1, 3);
        t.joined();
        let a = t.commit();
        assert_eq!(
            a,
            (0..3)
                .map(|node| Action::Prepare { node })
                .collect::<Vec<_>>()
        );
        assert!(t.prepared(0, Ok(())).is_empty());
        assert!(
            t.prepared(0, Ok(())).is_empty(),
            "a repeated answer changes nothing"
        );
        assert!(t.prepared(2, Ok(())).is_empty());
        let a = t.prepared(1, Ok(()));
        assert_eq!(a, vec![Action::WriteDecision(Outcome::Commit)]);
        assert_eq!(t.decided(), None, "not before the record is durable");
        let a = t.decision_durable();
        assert!(a.contains(&Action::Answer(Ok(()))));
        assert_eq!(t.decided(), Some(Outcome::Commit));
        assert!(t.completed(0).is_empty() && t.completed(1).is_empty());
        assert_eq!(t.completed(2), vec![Action::Forget]);
    }

    #[test]
    fn one_refusal_aborts_and_says_why() {
        let mut t = HomeTxn::open(1, 2);
        t.commit();
        t.prepared(0, Ok(()));
        let a = t.prepared(1, Err("no space".into()));
        let a = durable_then(&mut t, a);
        assert!(a.contains(&Action::Complete {
            node: 1,
            outcome: Outcome::Abort
        }));
        assert_eq!(
            a.last(),
            Some(&Action::Answer(Err(vec![
                "node 1 could not prepare: no space".to_string()
            ])))
        );
    }

    #[test]
    fn vanished_processes_abort_after_the_timeout_only() {
        let mut t = HomeTxn::open(1, 2);
        t.joined();
        t.joined();
        t.left(1_000);
        assert!(
            t.tick(100_000, 10_000).is_empty(),
            "one process still lives"
        );
        t.left(2_000);
        assert!(t.tick(11_999, 10_000).is_empty());
        let a = t.tick(12_000, 10_000);
        assert_eq!(a, vec![Action::WriteDecision(Outcome::Abort)]);
        let a = t.decision_durable();
        assert_eq!(
            a.len(),
            2,
            "completion on both nodes, nobody to answer: {a:?}"
        );
    }

    #[test]
    fn a_restarted_home_keeps_its_decision_or_presumes_abort() {
        let (t, a) = HomeTxn::recover(1, 2, Some(Outcome::Commit));
        assert_eq!(t.decided(), Some(Outcome::Commit));
        assert_eq!(a.len(), 2);
        let (t, a) = HomeTxn::recover(1, 2, None);
        assert_eq!(a, vec![Action::WriteDecision(Outcome::Abort)]);
        assert_eq!(t.decided(), None);
    }

    #[derive(Clone, Debug)]
    enum Ev {
        Commit,
        Abort,
        Prepared(u32, bool),
        Durable,
        Completed(u32),
        Join,
        Leave(u64),
        Tick(u64),
        /// The home restarts; the decision being written at that moment persisted or not.
        Restart(bool),
    }

    fn ev() -> impl Strategy<Value = Ev> {
        // Prepare answers weigh most: a commit needs one from every node before anything else
        // interesting can happen.
        prop_oneof![
            2 => Just(Ev::Commit),
            1 => Just(Ev::Abort),
            6 => (0u32..3, prop::bool::weighted(0.8)).prop_map(|(n, ok)| Ev::Prepared(n, ok)),
            2 => Just(Ev::Durable),
            3 => (0u32..3).prop_map(Ev::Completed),
            1 => Just(Ev::Join),
            1 => (0u64..30_000).prop_map(Ev::Leave),
            1 => (0u64..60_000).prop_map(Ev::Tick),
            1 => any::<bool>().prop_map(Ev::Restart),
        ]
    }

    proptest! {
        /// Whatever the order of events, restarts included: at most one decision is ever
        /// made durable, it never changes, a commit needs every node's prepare, completion is
        /// only sent after the decision is durable and always with it, and the asker's answer
        /// agrees with it.
        #[test]
        fn one_decision_never_changes(evs in proptest::collection::vec(ev(), 1..80)) {
            let nodes = 3;
            let mut t = HomeTxn::open(7, nodes);
            let mut durable: Option<Outcome> = None;
            let mut writing: Option<Outcome> = None;
            let mut prepared_ok: BTreeSet<u32> = BTreeSet::new();
            let mut asked_prepare = false;
            let mut last_asked: Option<Outcome> = None;
            for e in evs {
                match e {
                    Ev::Commit => last_asked = Some(Outcome::Commit),
                    Ev::Abort => last_asked = Some(Outcome::Abort),
                    _ => {}
                }
                let actions = match e {
                    Ev::Commit => t.commit(),
                    Ev::Abort => t.abort(vec!["voted".into()]),
                    Ev::Prepared(n, ok) => {
                        let was_waiting = matches!(t.state(), HomeState::Preparing { waiting, .. } if waiting.contains(&n));
                        if ok && was_waiting { prepared_ok.insert(n); }
                        t.prepared(n, if ok { Ok(()) } else { Err("refused".into()) })
                    }
                    Ev::Durable => {
                        let a = t.decision_durable();
                        if let Some(w) = writing.take() {
                            prop_assert!(durable.is_none_or(|d| d == w), "a second, different decision");
                            durable = Some(w);
                        }
                        a
                    }
                    Ev::Completed(n) => t.completed(n),
                    Ev::Join => { t.joined(); Vec::new() }
                    Ev::Leave(at) => { t.left(at); Vec::new() }
                    Ev::Tick(at) => t.tick(at, 10_000),
                    Ev::Restart(persisted) => {
                        // The record survives if it was durable, or written just before.
                        if persisted && let Some(w) = writing {
                            durable = Some(w);
                        }
                        let (nt, a) = HomeTxn::recover(7, nodes, durable);
                        t = nt;
                        writing = None;
                        if durable.is_none() { prepared_ok.clear(); }
                        a
                    }
                };
                for a in actions {
                    match a {
                        Action::Prepare { .. } => asked_prepare = true,
                        Action::WriteDecision(o) => {
                            prop_assert!(durable.is_none_or(|d| d == o), "deciding {:?} after {:?}", o, durable);
                            prop_assert!(writing.is_none_or(|w| w == o), "deciding {:?} while {:?} is being written", o, writing);
                            if o == Outcome::Commit {
                                prop_assert!(asked_prepare && prepared_ok.len() == nodes as usize, "commit without every prepare");
                            }
                            writing = Some(o);
                        }
                        Action::Complete { outcome, .. } => {
                            prop_assert_eq!(Some(outcome), durable, "completion before or against the record");
                        }
                        Action::Answer(r) => {
                            let d = durable.or(t.decided());
                            prop_assert!(d.is_some(), "answered before a durable decision");
                            // Success means the decision is what was asked for.
                            if r.is_ok() {
                                prop_assert_eq!(d, Some(last_asked.expect("someone asked")));
                            }
                        }
                        Action::Forget => prop_assert!(durable.is_some()),
                    }
                }
                if let Some(d) = t.decided() {
                    prop_assert_eq!(Some(d), durable);
                }
            }
        }
    }
}
