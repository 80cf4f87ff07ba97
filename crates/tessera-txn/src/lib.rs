//! MxN transactions over MPI: D2T's protocol (seed 000) for the processes of a communicator.
//!
//! [`Transactions::init`] splits the communicator into D2T's tiers (a coordinator,
//! sub-coordinators of at most 256 processes, at least two of them, and subordinates;
//! `tessera_core::txn_tiers`). A [`Transaction`] then follows the seed's calls: create,
//! sub-transactions (singleton: one process; global: all), begin, commit sub-transactions,
//! vote, commit or abort, finalize. Every collective call is one gather -> reduce to unique ->
//! broadcast through the tiers ([`tiers::TierComms::unique`]), so no process receives more
//! than its group's and the sub-coordinators' messages. What each process contributes and how
//! it reads the united result is the pure state machine `tessera_core::txn_state`.
//!
//! With Tessera beneath ([`fs`]), the transaction is the file system's too: the coordinator
//! opens it at its daemon, every process joins it at begin, publishes before it votes, and
//! the coordinator's commit (or abort) is the daemons' two-phase commit, so what the
//! processes published appears to everyone else all at once, or never.
//!
//! MPI stays out of the file system crates: this crate is the only one of the file system's
//! libraries that links MPI.

pub mod fs;
pub mod tiers;

use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use serde::{Deserialize, Serialize};
use std::rc::Rc;
use tessera_core::txn_state::TxnState;
pub use tessera_core::txn_state::{Decision, Phase, SubId, TxnError, TxnId};
use tiers::TierComms;

/// Environment variable that sets the sub-coordinators' fan-in (default 256): small values
/// give small jobs all three tiers, for tests. Rank 0's value holds for every process.
pub const FAN_IN_VAR: &str = "TESSERA_TXN_FAN_IN";

/// The collective call a contribution belongs to (with the transaction and, for global
/// sub-transactions, which one): processes that make different calls at the same point all
/// learn it, instead of reading one call's items as another's.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
enum Call {
    Create,
    Global { txn: TxnId, seq: u32 },
    Begin { txn: TxnId },
    Vote { txn: TxnId },
    Commit { txn: TxnId },
    Abort { txn: TxnId },
}

impl Call {
    fn name(&self) -> &'static str {
        match self {
            Call::Create => "create_transaction",
            Call::Global { .. } => "create_sub_transaction_all",
            Call::Begin { .. } => "begin_transaction",
            Call::Vote { .. } => "vote_transaction",
            Call::Commit { .. } => "commit_transaction",
            Call::Abort { .. } => "abort_transaction",
        }
    }
}

/// What a process says in a collective call.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
enum Item {
    /// Every process says it took part, even with nothing else to say.
    Present,
    Id(TxnId),
    Name(String),
    Singleton(SubId, String),
    /// A reason to abort (vote), or a failure (commit).
    Reason(String),
    /// This process could not make the call (a bad argument, a call out of order): every
    /// process fails it alike.
    Refused(String),
}

/// One move through the tiers of call `call`: this process's `items` (or why it cannot make
/// the call) go in; the items of every process come out, or the error every process gets.
fn collective(
    comms: &TierComms,
    call: Call,
    items: Result<Vec<Item>, TxnError>,
) -> Result<Vec<Item>, TxnError> {
    let (mine, own_error) = match items {
        Ok(v) => (v, None),
        Err(e) => (
            vec![Item::Refused(format!("rank {}: {e}", comms.rank))],
            Some(e),
        ),
    };
    let tagged: Vec<(Call, Item)> = std::iter::once(Item::Present)
        .chain(mine)
        .map(|i| (call.clone(), i))
        .collect();
    let all = comms.unique(tagged);
    let mut calls: Vec<&Call> = all.iter().map(|(c, _)| c).collect();
    calls.dedup();
    if calls.len() > 1 {
        return Err(TxnError::Disagree {
            what: "the collective call they make",
            seen: calls
                .iter()
                .map(|c| c.name())
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    if let Some(e) = own_error {
        return Err(e);
    }
    let refused: Vec<&str> = all
        .iter()
        .filter_map(|(_, i)| match i {
            Item::Refused(r) => Some(r.as_str()),
            _ => None,
        })
        .collect();
    if !refused.is_empty() {
        return Err(TxnError::Invalid(format!(
            "{} failed on another process: {}",
            call.name(),
            refused.join("; ")
        )));
    }
    Ok(all.into_iter().map(|(_, i)| i).collect())
}

/// The transaction library of one communicator's processes.
pub struct Transactions {
    comms: Rc<TierComms>,
    fs: Option<Rc<dyn fs::FileSystem>>,
}

impl Transactions {
    /// Splits a copy of `comm` into the tiers. Collective over `comm`.
    pub fn init(comm: &SimpleCommunicator) -> Result<Transactions, TxnError> {
        Transactions::with_communicator(comm.duplicate())
    }

    /// Splits `comm`, which the library keeps (and frees when dropped), into the tiers.
    /// Collective over `comm`. The fan-in is rank 0's `TESSERA_TXN_FAN_IN` (default 256).
    pub fn with_communicator(comm: SimpleCommunicator) -> Result<Transactions, TxnError> {
        // Rank 0 decides, for all: tiers computed from different values would not match.
        let mut fan_in: u32 = 0;
        if comm.rank() == 0 {
            fan_in = match std::env::var(FAN_IN_VAR) {
                Ok(v) => v.parse::<u32>().ok().filter(|f| *f >= 2).unwrap_or(0),
                Err(_) => tessera_core::txn_tiers::FAN_IN,
            };
        }
        comm.process_at_rank(0).broadcast_into(&mut fan_in);
        if fan_in < 2 {
            return Err(TxnError::Invalid(format!(
                "{FAN_IN_VAR} on rank 0 is {:?}: the fan-in is a number of processes, at least 2",
                std::env::var(FAN_IN_VAR).unwrap_or_default()
            )));
        }
        Ok(Transactions {
            comms: Rc::new(TierComms::split(comm, fan_in)),
            fs: fs::Interposed::find().map(|i| Rc::new(i) as Rc<dyn fs::FileSystem>),
        })
    }

    /// Makes the transactions Tessera's through `fs` (by default, the interposer's connection
    /// when the interposer is loaded; otherwise the protocol runs alone). Every process must
    /// make the same choice.
    pub fn with_file_system(mut self, fs: Option<Rc<dyn fs::FileSystem>>) -> Transactions {
        self.fs = fs;
        self
    }

    /// Whether transactions reach Tessera.
    pub fn has_file_system(&self) -> bool {
        self.fs.is_some()
    }

    /// The tiers this library moves its phases through.
    pub fn tiers(&self) -> &tessera_core::txn_tiers::Tiers {
        &self.comms.tiers
    }

    pub fn rank(&self) -> u32 {
        self.comms.rank
    }

    /// Creates a transaction: the coordinator draws its id (opens it at its daemon, with
    /// Tessera beneath). Collective.
    pub fn create_transaction(&self) -> Result<Transaction, TxnError> {
        let mine = match (&self.fs, self.comms.rank) {
            (Some(fs), 0) => fs.open().map(|id| vec![Item::Id(id)]).map_err(|e| {
                TxnError::Invalid(format!("opening the transaction in Tessera failed: {e}"))
            }),
            (None, 0) => Ok(vec![Item::Id(rand::random::<TxnId>())]),
            _ => Ok(Vec::new()),
        };
        let all = collective(&self.comms, Call::Create, mine)?;
        let id = all
            .iter()
            .find_map(|i| match i {
                Item::Id(id) => Some(*id),
                _ => None,
            })
            .ok_or_else(|| TxnError::Disagree {
                what: "the transaction id",
                seen: "none".into(),
            })?;
        Ok(Transaction {
            comms: Rc::clone(&self.comms),
            state: TxnState::new(self.comms.rank, id),
            globals: 0,
            fs: self.fs.clone(),
            joined: false,
        })
    }

    /// Takes part in a collective call that this process cannot make (a bad argument seen by
    /// a C caller), so that every process fails it alike instead of waiting for this one.
    /// Returns the error `why` for this process.
    pub fn refuse_create(&self, why: TxnError) -> TxnError {
        match collective(&self.comms, Call::Create, Err(why)) {
            Err(e) => e,
            Ok(_) => unreachable!("a refused call fails"),
        }
    }
}

/// The collective calls of a transaction, for [`Transaction::refuse`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CollectiveCall {
    CreateSubTransactionAll,
    Begin,
    Vote,
    Commit,
    Abort,
}

/// One transaction, as this process takes part in it.
pub struct Transaction {
    comms: Rc<TierComms>,
    state: TxnState,
    /// Global sub-transactions created so far (tags their calls).
    globals: u32,
    fs: Option<Rc<dyn fs::FileSystem>>,
    /// Whether this process is a member of the transaction in Tessera.
    joined: bool,
}

fn strings(items: Vec<Item>, pick: fn(Item) -> Option<String>) -> Vec<String> {
    items.into_iter().filter_map(pick).collect()
}

impl Transaction {
    pub fn id(&self) -> TxnId {
        self.state.id()
    }

    pub fn phase(&self) -> &Phase {
        self.state.phase()
    }

    /// The sub-transactions this process knows (after begin: every process's singletons).
    pub fn sub_transactions(&self) -> Vec<(SubId, String)> {
        self.state
            .subs()
            .map(|(id, name)| (id, name.to_string()))
            .collect()
    }

    fn call(&self, which: CollectiveCall) -> Call {
        let txn = self.id();
        match which {
            CollectiveCall::CreateSubTransactionAll => Call::Global {
                txn,
                seq: self.globals,
            },
            CollectiveCall::Begin => Call::Begin { txn },
            CollectiveCall::Vote => Call::Vote { txn },
            CollectiveCall::Commit => Call::Commit { txn },
            CollectiveCall::Abort => Call::Abort { txn },
        }
    }

    /// Takes part in collective call `which` that this process cannot make (a bad argument
    /// seen by a C caller), so that every process fails it alike instead of waiting for this
    /// one. Returns the error `why` for this process.
    pub fn refuse(&mut self, which: CollectiveCall, why: TxnError) -> TxnError {
        match collective(&self.comms, self.call(which), Err(why)) {
            Err(e) => e,
            Ok(_) => unreachable!("a refused call fails"),
        }
    }

    /// A singleton sub-transaction of this process. Local; before begin.
    pub fn create_sub_transaction(&mut self, name: &str) -> Result<SubId, TxnError> {
        self.state.create_singleton(name)
    }

    /// A global sub-transaction; every process names it alike. Collective.
    pub fn create_sub_transaction_all(&mut self, name: &str) -> Result<SubId, TxnError> {
        let call = self.call(CollectiveCall::CreateSubTransactionAll);
        let items = self
            .state
            .global_items(name)
            .map(|v| v.into_iter().map(Item::Name).collect());
        let all = collective(&self.comms, call, items)?;
        self.globals += 1;
        let names = strings(all, |i| match i {
            Item::Name(n) => Some(n),
            _ => None,
        });
        self.state.create_global(names)
    }

    /// Begins: every process learns every singleton sub-transaction, and (with Tessera
    /// beneath) joins the transaction: what it publishes from now on is pending under it.
    /// Collective.
    pub fn begin_transaction(&mut self) -> Result<(), TxnError> {
        let call = self.call(CollectiveCall::Begin);
        let mut items = self.state.begin_items().map(|v| {
            v.into_iter()
                .map(|(id, name)| Item::Singleton(id, name))
                .collect()
        });
        if let (Ok(_), Some(fs)) = (&items, &self.fs) {
            match fs.join(Some(self.id())) {
                Ok(()) => self.joined = true,
                Err(e) => {
                    items = Err(TxnError::Invalid(format!(
                        "joining the transaction in Tessera failed: {e}"
                    )))
                }
            }
        }
        let all = match collective(&self.comms, call, items) {
            Ok(all) => all,
            Err(e) => {
                self.leave();
                return Err(e);
            }
        };
        let singletons = all
            .into_iter()
            .filter_map(|i| match i {
                Item::Singleton(id, name) => Some((id, name)),
                _ => None,
            })
            .collect();
        self.state.begin(singletons);
        Ok(())
    }

    /// Commits this process's part of `sub`. Local.
    pub fn commit_sub_transaction(&mut self, sub: SubId) -> Result<(), TxnError> {
        self.state.commit_sub(sub)
    }

    /// Votes (`ok` = false votes abort); returns the decision every process reaches. With
    /// Tessera beneath, a process publishes its writes first; one that cannot votes abort.
    /// Collective.
    pub fn vote_transaction(&mut self, ok: bool) -> Result<Decision, TxnError> {
        let call = self.call(CollectiveCall::Vote);
        let published = match (&self.fs, ok) {
            (Some(fs), true) => fs
                .publish()
                .map_err(|e| format!("rank {} could not publish its writes: {e}", self.comms.rank)),
            _ => Ok(()),
        };
        let items = self.state.vote_items(ok).map(|mut v| {
            v.extend(published.err());
            v.into_iter().map(Item::Reason).collect()
        });
        let all = collective(&self.comms, call, items)?;
        let reasons = strings(all, |i| match i {
            Item::Reason(r) => Some(r),
            _ => None,
        });
        Ok(self.state.vote(reasons))
    }

    /// Commits a transaction voted to commit: with Tessera beneath, the coordinator asks
    /// for the daemons' decision first, and every process leaves the transaction after.
    /// Collective.
    pub fn commit_transaction(&mut self) -> Result<(), TxnError> {
        let call = self.call(CollectiveCall::Commit);
        let items = self
            .state
            .check_commit()
            .map(|()| match (&self.fs, self.comms.rank) {
                (Some(fs), 0) => match fs.decide(self.id(), true, &[]) {
                    Ok(()) => Vec::new(),
                    Err(e) => vec![Item::Reason(format!("Tessera did not commit it: {e}"))],
                },
                _ => Vec::new(),
            });
        let all = collective(&self.comms, call, items)?;
        let failures = strings(all, |i| match i {
            Item::Reason(r) => Some(r),
            _ => None,
        });
        self.leave();
        self.state.commit(failures)
    }

    /// Aborts (any time before commit): with Tessera beneath, what the processes published
    /// under it is dropped. Collective.
    pub fn abort_transaction(&mut self) -> Result<(), TxnError> {
        let call = self.call(CollectiveCall::Abort);
        let items = self.state.check_abort().map(|()| Vec::new());
        if let (Ok(_), Some(fs), 0) = (&items, &self.fs, self.comms.rank) {
            let why = ["the application aborted it".to_string()];
            // Every process leaves and the transaction is dropped at its home anyway (its
            // processes end, or time out): a failure here changes nothing it could act on.
            let _ = fs.decide(self.id(), false, &why);
        }
        collective(&self.comms, call, items)?;
        self.leave();
        self.state.abort();
        Ok(())
    }

    /// Leaves the transaction in Tessera, if this process joined it. A process that cannot
    /// (its connection is gone) is no longer a member anyway.
    fn leave(&mut self) {
        if let (true, Some(fs)) = (self.joined, &self.fs) {
            let _ = fs.join(None);
            self.joined = false;
        }
    }

    /// Ends this process's part: what the transaction came to. Local.
    pub fn finalize(self) -> Phase {
        self.state.phase().clone()
    }
}
