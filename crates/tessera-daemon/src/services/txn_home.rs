//! The transaction service, home side (D2T): the daemon that opened a transaction counts
//! its member processes, runs its two-phase commit (prepare on every node, one durable
//! decision record, completion everywhere), answers where it stands, and aborts one whose
//! processes all ended. The state machine is `tessera_core::txn_home`; this module carries
//! out its actions.
//!
//! Failpoints (`TESSERA_FAILPOINT`, for the crash tests): `home-before-decision` and
//! `home-after-decision` end this daemon at once around the decision record.

use super::txn_homes::{Found, Home};
use crate::Node;
use crate::rpc::ServePeer;
use crate::store::DbOp;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tessera_core::txn_home::{Action, HomeState, HomeTxn, Outcome};
use tessera_core::{Errno, FsError, FsResult};
use tessera_proto::{
    TxnComplete, TxnHomeDecide, TxnMember, TxnMembers, TxnPrepare, TxnStatus, TxnVerdict,
};

/// How often homes check their transactions' timeouts and retry unfinished completions.
const TICK: Duration = Duration::from_millis(250);

/// The decision record's value for an outcome (the `home_txns` table of `store::tables`).
fn record(outcome: Outcome) -> u8 {
    match outcome {
        Outcome::Commit => 1,
        Outcome::Abort => 2,
    }
}

/// What a process that asked to commit (`commit`) or abort is told of `outcome`.
fn answer_to(
    txn: u64,
    commit: bool,
    outcome: Outcome,
    reasons: &[String],
) -> Result<(), Vec<String>> {
    match (commit, outcome) {
        (true, Outcome::Commit) | (false, Outcome::Abort) => Ok(()),
        (true, Outcome::Abort) if !reasons.is_empty() => Err(reasons.to_vec()),
        (true, Outcome::Abort) => Err(vec![format!("transaction {txn:016x} was aborted")]),
        (false, Outcome::Commit) => {
            Err(vec![format!("transaction {txn:016x} is already committed")])
        }
    }
}

/// Why a transaction past its open state takes no members.
fn closed(txn: u64) -> FsError {
    FsError::new(
        Errno::Inval,
        format!("transaction {txn:016x} is committing or decided: it takes no new members"),
    )
}

impl ServePeer<TxnMember> for Node {
    async fn serve_peer(&self, r: TxnMember) -> FsResult<()> {
        let who = (r.node, r.client);
        if r.joined {
            return self.admit(r.txn, &[who]);
        }
        let now = self.txns.now_ms();
        self.txns.homes.with(r.txn, |h| {
            if h.members.remove(&who) {
                h.machine.left(now);
            }
        });
        Ok(())
    }
}

impl Node {
    /// At `txn`'s home: the processes `who` (node, client) are members from now on. Refused
    /// unless the transaction is open (a member joining again, after its daemon restarted,
    /// stays one whatever the state).
    pub(crate) fn admit(&self, txn: u64, who: &[(u32, u64)]) -> FsResult<()> {
        let admitted = self.txns.homes.with(txn, |h| {
            if who.iter().all(|w| h.members.contains(w)) {
                return Ok(());
            }
            if *h.machine.state() != HomeState::Open {
                return Err(closed(txn));
            }
            for w in who {
                if h.members.insert(*w) {
                    h.machine.joined();
                }
            }
            Ok(())
        });
        admitted.unwrap_or_else(|| Err(self.not_open(txn)))
    }

    /// Refuses at its home a transaction that may not be joined (or enrolled in) because it
    /// is no longer, or never was, open here.
    pub(crate) fn check_open(&self, txn: u64) -> FsResult<()> {
        match self
            .txns
            .homes
            .with(txn, |h| *h.machine.state() == HomeState::Open)
        {
            Some(true) => Ok(()),
            Some(false) => Err(closed(txn)),
            None => Err(self.not_open(txn)),
        }
    }

    fn not_open(&self, txn: u64) -> FsError {
        let why = match self.txns.homes.finished(txn) {
            Some(Outcome::Commit) => "it was committed",
            Some(Outcome::Abort) => "it was aborted",
            None => "it was never opened, or finished long ago",
        };
        FsError::new(
            Errno::Inval,
            format!("transaction {txn:016x} is not open ({why}); open a new one"),
        )
    }
}

impl ServePeer<TxnHomeDecide> for Node {
    async fn serve_peer(&self, r: TxnHomeDecide) -> FsResult<()> {
        let looked = self.txns.homes.look(r.txn, |found| match found {
            Found::Home(h) => {
                let (tx, rx) = tokio::sync::oneshot::channel();
                h.waiters.push((r.commit, tx));
                let actions = if r.commit {
                    h.machine.commit()
                } else {
                    h.machine.abort(r.reasons)
                };
                Ok((rx, actions))
            }
            // Finished: the decision asked again is answered as it was taken.
            Found::Gone(outcome, reasons) => Err(match outcome {
                Some(Outcome::Commit) if r.commit => Ok(()),
                Some(Outcome::Abort) if !r.commit => Ok(()),
                Some(Outcome::Commit) => Err(FsError::new(
                    Errno::Inval,
                    format!("transaction {:016x} is already committed", r.txn),
                )),
                Some(Outcome::Abort) => Err(FsError::new(
                    Errno::Canceled,
                    if reasons.is_empty() {
                        format!("transaction {:016x} was aborted", r.txn)
                    } else {
                        reasons.join("; ")
                    },
                )),
                None => Err(FsError::new(
                    Errno::Inval,
                    format!(
                        "transaction {:016x} is unknown at its home: it was never opened, or it finished long ago",
                        r.txn
                    ),
                )),
            }),
        });
        let (rx, actions) = match looked {
            Ok(waiting) => waiting,
            Err(answer) => return answer,
        };
        self.drive(r.txn, actions).await;
        match rx.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(reasons)) => Err(FsError::new(
                if r.commit {
                    Errno::Canceled
                } else {
                    Errno::Inval
                },
                reasons.join("; "),
            )),
            Err(_) => Err(FsError::new(
                Errno::Io,
                format!("the home of transaction {:016x} stopped deciding", r.txn),
            )),
        }
    }
}

impl ServePeer<TxnStatus> for Node {
    async fn serve_peer(&self, r: TxnStatus) -> FsResult<TxnVerdict> {
        Ok(self.txns.homes.look(r.txn, |found| match found {
            Found::Home(h) => match h.machine.decided() {
                None => TxnVerdict::Undecided,
                Some(Outcome::Commit) => TxnVerdict::Committed,
                Some(Outcome::Abort) => TxnVerdict::Aborted,
            },
            Found::Gone(Some(Outcome::Commit), _) => TxnVerdict::Committed,
            Found::Gone(Some(Outcome::Abort), _) => TxnVerdict::Aborted,
            Found::Gone(None, _) => TxnVerdict::Unknown,
        }))
    }
}

impl Node {
    /// Feeds an event to a home transaction's state machine.
    fn home_event(&self, txn: u64, event: impl FnOnce(&mut HomeTxn) -> Vec<Action>) -> Vec<Action> {
        self.txns
            .homes
            .with(txn, |h| event(&mut h.machine))
            .unwrap_or_default()
    }

    /// Carries out a home's actions, and the actions they lead to, until none is left.
    /// Completions that fail are retried by [`Node::keep_homes`].
    ///
    /// The process that asked for the decision is answered once every node completed (not
    /// at the durable record): a node's completion runs in steps, and the catalogue and
    /// namespace reads that meet a transaction completing on their node leave it to that
    /// completion rather than wait for it, so a member reading at once after its commit
    /// could otherwise find part of the data set missing.
    pub async fn drive(&self, txn: u64, mut actions: Vec<Action>) {
        while !actions.is_empty() {
            let mut next = Vec::new();
            let mut prepare = Vec::new();
            let mut complete = Vec::new();
            for a in actions {
                match a {
                    Action::Prepare { node } => prepare.push(node),
                    Action::Complete { node, outcome } => complete.push((node, outcome)),
                    Action::WriteDecision(outcome) => {
                        if self.failpoints.crash_at("home-before-decision").is_err() {
                            return;
                        }
                        let put = DbOp::PutHomeTxn {
                            txn,
                            state: record(outcome),
                        };
                        // A failed state write stops the daemon (the store's rule); the
                        // decision is then taken again from the record, or as an abort.
                        let _ = self.store.submit(vec![put]).durable().await;
                        if self.failpoints.crash_at("home-after-decision").is_err() {
                            return;
                        }
                        self.metrics.decided(outcome == Outcome::Commit);
                        let now = self.txns.now_ms();
                        self.txns.homes.with(txn, |h| h.decided_at = Some(now));
                        next.extend(self.home_event(txn, |h| h.decision_durable()));
                    }
                    // Each waiter is told how the decision stands to what it asked for.
                    Action::Answer(_) => {
                        self.txns.homes.with(txn, |h| {
                            if let Some(outcome) = h.machine.decided() {
                                let reasons = h.machine.reasons().to_vec();
                                for (commit, w) in std::mem::take(&mut h.waiters) {
                                    let _ = w.send(answer_to(txn, commit, outcome, &reasons));
                                }
                            }
                        });
                    }
                    Action::Forget => {
                        self.txns.homes.finish(txn);
                        drop(self.store.submit(vec![DbOp::DelHomeTxn(txn)]));
                    }
                }
            }
            let prepared = prepare.iter().map(|n| self.call(*n, TxnPrepare { txn }));
            let prepared = futures::future::join_all(prepared).await;
            for (node, r) in prepare.into_iter().zip(prepared) {
                let answer = r.map_err(|e| e.to_string());
                next.extend(self.home_event(txn, |h| h.prepared(node, answer)));
            }
            let completed = complete.iter().map(|(n, o)| {
                let commit = *o == Outcome::Commit;
                self.call(*n, TxnComplete { txn, commit })
            });
            let completed = futures::future::join_all(completed).await;
            for ((node, _), r) in complete.into_iter().zip(completed) {
                match r {
                    Ok(()) => next.extend(self.home_event(txn, |h| h.completed(node))),
                    Err(e) => tracing::warn!(
                        "node {node} did not complete transaction {txn:016x}: {e}; retrying"
                    ),
                }
            }
            actions = next;
        }
    }

    /// Asks the member nodes of every open transaction which of its members they still
    /// count: a process whose connection ended while its daemon was away (restarted), or
    /// whose node stays unreachable for `txn_timeout_ms` (the node died with it), is no longer
    /// a member, so a transaction whose processes are all gone times out.
    async fn check_members(&self, now: u64) {
        let asks: Vec<(u64, u32, Vec<u64>)> = self
            .txns
            .homes
            .each(|txn, h| {
                if *h.machine.state() != HomeState::Open {
                    return None;
                }
                let mut by_node: std::collections::BTreeMap<u32, Vec<u64>> = Default::default();
                for (node, client) in &h.members {
                    by_node.entry(*node).or_default().push(*client);
                }
                Some(by_node.into_iter().map(move |(n, c)| (txn, n, c)))
            })
            .into_iter()
            .flatten()
            .collect();
        for (txn, node, clients) in asks {
            let ask = TxnMembers {
                txn,
                clients: clients.clone(),
            };
            let answer = tokio::time::timeout(TICK, self.call(node, ask)).await;
            let timeout_ms = self.cfg.txn_timeout_ms;
            self.txns.homes.with(txn, |h| {
                let gone: Vec<u64> = match answer {
                    Ok(Ok(still)) => {
                        h.heard.insert(node, now);
                        clients.into_iter().filter(|c| !still.contains(c)).collect()
                    }
                    _ => {
                        let heard = *h.heard.entry(node).or_insert(now);
                        if now < heard + timeout_ms {
                            return;
                        }
                        tracing::warn!(
                            "transaction {txn:016x}: node {node} has not answered for {} ms; its processes no longer count as members",
                            now - heard
                        );
                        clients
                    }
                };
                for client in gone {
                    if h.members.remove(&(node, client)) {
                        h.machine.left(now);
                    }
                }
            });
        }
    }

    /// Recovers the transactions this node was the home of when it stopped: a decision record
    /// is completed everywhere again; an open one (no decision was taken) aborts.
    pub fn recover_homes(&self, records: &[(u64, u8)]) -> Vec<(u64, Vec<Action>)> {
        records
            .iter()
            .map(|(txn, state)| {
                let outcome = match state {
                    1 => Some(Outcome::Commit),
                    2 => Some(Outcome::Abort),
                    _ => None,
                };
                let (machine, actions) = HomeTxn::recover(*txn, self.cfg.nodes, outcome);
                self.txns.homes.insert(
                    *txn,
                    Home {
                        machine,
                        members: HashSet::new(),
                        waiters: Vec::new(),
                        decided_at: None,
                        heard: std::collections::HashMap::new(),
                    },
                );
                (*txn, actions)
            })
            .collect()
    }

    /// Until shutdown: aborts the open transactions whose processes all ended
    /// `txn_timeout_ms` ago, and retries completions that did not reach a node.
    pub async fn keep_homes(self: Arc<Self>) {
        loop {
            tokio::time::sleep(TICK).await;
            let now = self.txns.now_ms();
            let timeout_ms = self.cfg.txn_timeout_ms;
            let work: Vec<(u64, Vec<Action>)> = self.txns.homes.each(|txn, h| {
                let mut actions = h.machine.tick(now, timeout_ms);
                let late = h.decided_at.is_none_or(|at| now >= at + 1000);
                if let (true, HomeState::Completing { outcome, waiting }) =
                    (late, h.machine.state())
                {
                    h.decided_at = Some(now);
                    actions.extend(waiting.iter().map(|node| Action::Complete {
                        node: *node,
                        outcome: *outcome,
                    }));
                }
                (!actions.is_empty()).then_some((txn, actions))
            });
            self.check_members(now).await;
            for (txn, actions) in work {
                if actions
                    .iter()
                    .any(|a| matches!(a, Action::WriteDecision(_)))
                {
                    tracing::warn!(
                        "transaction {txn:016x}: every process ended before it committed; aborting"
                    );
                }
                self.drive(txn, actions).await;
            }
        }
    }
}
