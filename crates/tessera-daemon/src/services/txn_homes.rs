//! The transactions this node is the home of (D2T): each one's state machine, member
//! processes and the processes waiting for its decision; and the outcomes of those it
//! finished most recently, so that a decision asked again, or a query that saw one before its
//! completion, still learns it. Reached through operations that run under its lock; none
//! hands out the lock or a reference into the table.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use tessera_core::txn_home::{HomeTxn, Outcome};
use tokio::sync::oneshot;

/// A process waiting for a decision: whether it asked to commit, and where its answer goes
/// (the reasons of an abort, or why what it asked for was not done).
pub type Waiter = (bool, oneshot::Sender<Result<(), Vec<String>>>);

/// A transaction at its home: the state machine, its member processes, and the processes
/// waiting for its decision.
pub struct Home {
    pub machine: HomeTxn,
    pub members: HashSet<(u32, u64)>,
    /// Each with what it asked for (commit: `true`).
    pub waiters: Vec<Waiter>,
    /// When the decision became durable (ms): completions still missing a second later are
    /// sent again.
    pub decided_at: Option<u64>,
    /// When each member node was last heard from about its members (ms).
    pub heard: HashMap<u32, u64>,
}

/// The outcomes of recently finished transactions, the oldest dropped beyond
/// [`Finished::KEPT`].
#[derive(Default)]
struct Finished {
    outcomes: HashMap<u64, (Outcome, Vec<String>)>,
    order: std::collections::VecDeque<u64>,
}

impl Finished {
    const KEPT: usize = 65_536;

    /// Records `txn`'s outcome, with the reasons of an abort.
    fn insert(&mut self, txn: u64, outcome: Outcome, reasons: Vec<String>) {
        if self.outcomes.insert(txn, (outcome, reasons)).is_none() {
            self.order.push_back(txn);
        }
        while self.order.len() > Self::KEPT {
            if let Some(old) = self.order.pop_front() {
                self.outcomes.remove(&old);
            }
        }
    }

    fn get(&self, txn: u64) -> Option<Outcome> {
        self.outcomes.get(&txn).map(|(o, _)| *o)
    }

    /// Why `txn` aborted, as its processes were told.
    fn reasons(&self, txn: u64) -> Vec<String> {
        self.outcomes
            .get(&txn)
            .map(|(_, r)| r.clone())
            .unwrap_or_default()
    }
}

/// The homes of this node and the outcomes it finished.
#[derive(Default)]
pub struct Homes {
    /// Lock order: this, then `finished`.
    open: Mutex<HashMap<u64, Home>>,
    finished: Mutex<Finished>,
}

/// What a look at a transaction found: its home here, or how it finished (`None`: never
/// opened here, or finished long ago).
pub enum Found<'a> {
    Home(&'a mut Home),
    Gone(Option<Outcome>, Vec<String>),
}

impl Homes {
    /// Adds the home of `txn`.
    pub fn insert(&self, txn: u64, home: Home) {
        self.open.lock().expect("homes").insert(txn, home);
    }

    /// Whether `txn` has its home here now.
    pub fn contains(&self, txn: u64) -> bool {
        self.open.lock().expect("homes").contains_key(&txn)
    }

    /// Runs `f` on the home of `txn`, if it is here.
    pub fn with<R>(&self, txn: u64, f: impl FnOnce(&mut Home) -> R) -> Option<R> {
        self.open.lock().expect("homes").get_mut(&txn).map(f)
    }

    /// Runs `f` on what is known of `txn`: its home, or how it finished. Both are looked at
    /// under the homes' lock, so a transaction moving from one to the other is seen once.
    pub fn look<R>(&self, txn: u64, f: impl FnOnce(Found<'_>) -> R) -> R {
        let mut open = self.open.lock().expect("homes");
        match open.get_mut(&txn) {
            Some(h) => f(Found::Home(h)),
            None => {
                let finished = self.finished.lock().expect("finished");
                f(Found::Gone(finished.get(txn), finished.reasons(txn)))
            }
        }
    }

    /// Runs `f` on every home here, collecting what it returns.
    pub fn each<R>(&self, mut f: impl FnMut(u64, &mut Home) -> Option<R>) -> Vec<R> {
        let mut open = self.open.lock().expect("homes");
        open.iter_mut().filter_map(|(txn, h)| f(*txn, h)).collect()
    }

    /// `txn` is complete everywhere: its home goes, its outcome (if decided) is kept.
    pub fn finish(&self, txn: u64) {
        let gone = self.open.lock().expect("homes").remove(&txn);
        if let Some(h) = gone
            && let Some(outcome) = h.machine.decided()
        {
            let reasons = h.machine.reasons().to_vec();
            self.finished
                .lock()
                .expect("finished")
                .insert(txn, outcome, reasons);
        }
    }

    /// How `txn` finished, if it did recently.
    pub fn finished(&self, txn: u64) -> Option<Outcome> {
        self.finished.lock().expect("finished").get(txn)
    }

    /// The homes here, and how many of them are undecided.
    pub fn counts(&self) -> (u64, u64) {
        let open = self.open.lock().expect("homes");
        let undecided = open.values().filter(|h| h.machine.decided().is_none());
        (open.len() as u64, undecided.count() as u64)
    }
}
