//! MxN transactions over MPI: D2T's protocol for the processes of a communicator.
//!
//! [`Transactions::init`] splits the communicator into D2T's tiers (a coordinator,
//! sub-coordinators of at most 256 processes, at least two of them, and subordinates;
//! `tessera_core::txn_tiers`). A [`Transaction`] then follows D2T's calls: create,
//! sub-transactions (singleton: one process; global: all), begin, commit sub-transactions,
//! vote, commit or abort, finalize. Every collective call is one gather -> reduce to unique ->
//! broadcast through the tiers ([`tiers::TierComms::unique`]), so no process receives more
//! than its group's and the sub-coordinators' messages. What each process contributes and how
//! it reads the united result is the pure state machine `tessera_core::txn_state`.
//!
//! With Tessera beneath ([`fs`]), the transaction is the file system's too: the coordinator
//! opens it at its daemon; begin enrolls every process at once (the coordinator, with every
//! process's identity gathered, makes them all members in one call before the move goes back
//! down, handing each process its log id alone: a process receives the union and its own
//! id, not every process's); every process publishes before it votes, and the vote ends in
//! the daemons' two-phase commit (the coordinator asks for the decision with every vote
//! gathered, and the move brings it down), so what the processes published appears to
//! everyone else all at once, or never. After the vote, commit and abort only take up the
//! decision every process already has: no further move, no daemon call.
//!
//! MPI stays out of the file system crates: this crate is the only one of the file system's
//! libraries that links MPI.

pub mod fs;
pub mod tiers;

use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use serde::{Deserialize, Serialize};
use std::rc::Rc;
use tessera_core::txn_state::Declared;
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
    Abort { txn: TxnId },
}

impl Call {
    fn name(&self) -> &'static str {
        match self {
            Call::Create => "create_transaction",
            Call::Global { .. } => "create_sub_transaction_all",
            Call::Begin { .. } => "begin_transaction",
            Call::Vote { .. } => "vote_transaction",
            Call::Abort { .. } => "abort_transaction",
        }
    }
}

/// What a process says in a collective call.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
enum Item {
    /// Every process says it took part, even with nothing else to say.
    Present,
    /// A block of transaction ids the coordinator reserved: the first, and how many.
    Block(TxnId, u32),
    Name(String),
    Singleton(SubId, String),
    /// A reason to abort (vote), or a failure (commit).
    Reason(String),
    /// This process could not make the call (a bad argument, a call out of order): every
    /// process fails it alike.
    Refused(String),
    /// What the coordinator enrolls a process as in Tessera (its node and client id), and its
    /// rank, at begin. Only the coordinator needs them: they do not go back down.
    Member(u32, u32, u64),
    /// A process enrolled (node, client) and the log id it writes under as a member: handed
    /// to that process alone.
    Enrolled(u32, u64, u64),
    /// What a process declared of the global sub-transactions created before begin.
    Declared(Declared),
}

/// One move through the tiers of call `call`: this process's `items` (or why it cannot make
/// the call) go in; the items of every process come out, or the error every process gets.
fn collective(
    comms: &TierComms,
    call: Call,
    items: Result<Vec<Item>, TxnError>,
) -> Result<Vec<Item>, TxnError> {
    collective_with(comms, call, items, |_| Vec::new())
}

/// As [`collective`], and when every process makes the call and none refused it, the
/// coordinator adds `top`'s items (computed from every process's) before the move goes back
/// down.
fn collective_with(
    comms: &TierComms,
    call: Call,
    items: Result<Vec<Item>, TxnError>,
    top: impl FnOnce(&[Item]) -> Vec<Item>,
) -> Result<Vec<Item>, TxnError> {
    let (tagged, own_error) = tagged(comms, &call, items);
    let all = comms.unique_with(tagged, |all| {
        if agreed(all, &call) {
            let items: Vec<Item> = all.iter().map(|(_, i)| i.clone()).collect();
            all.extend(top(&items).into_iter().map(|i| (call.clone(), i)));
        }
    });
    united(all, &call, own_error)
}

/// As [`collective_with`], and `top` also hands single processes items of their own (by
/// rank), which go down to that process alone; the processes' [`Item::Member`]s stay with the
/// coordinator. Returns the union and this process's own items. A scatter costs more than
/// a broadcast of a few hundred bytes (the protocol's begin took 1.1 ms against 0.7 at 16
/// ranks on 2 cores): only moves with items of their own take this way.
fn collective_with_own(
    comms: &TierComms,
    call: Call,
    items: Result<Vec<Item>, TxnError>,
    top: impl FnOnce(&[Item]) -> (Vec<Item>, Vec<(u32, Item)>),
) -> Result<Vec<Item>, TxnError> {
    let (tagged, own_error) = tagged(comms, &call, items);
    let (all, own) = comms.unique_with_own(tagged, |all| {
        let mut own = Vec::new();
        if agreed(all, &call) {
            let items: Vec<Item> = all.iter().map(|(_, i)| i.clone()).collect();
            let (common, theirs) = top(&items);
            all.extend(common.into_iter().map(|i| (call.clone(), i)));
            own = theirs
                .into_iter()
                .map(|(r, i)| (r, (call.clone(), i)))
                .collect();
        }
        all.retain(|(_, i)| !matches!(i, Item::Member(..)));
        own
    });
    let mut all = united(all, &call, own_error)?;
    all.extend(own.into_iter().map(|(_, i)| i));
    Ok(all)
}

/// This process's contribution to a move of `call`: its items (or why it cannot make the
/// call), tagged; and its own error, if any.
fn tagged(
    comms: &TierComms,
    call: &Call,
    items: Result<Vec<Item>, TxnError>,
) -> (Vec<(Call, Item)>, Option<TxnError>) {
    let (mine, own_error) = match items {
        Ok(v) => (v, None),
        Err(e) => (
            vec![Item::Refused(format!("rank {}: {e}", comms.rank))],
            Some(e),
        ),
    };
    let tagged = std::iter::once(Item::Present)
        .chain(mine)
        .map(|i| (call.clone(), i))
        .collect();
    (tagged, own_error)
}

/// Whether every process made `call` and none refused it (at the coordinator).
fn agreed(all: &[(Call, Item)], call: &Call) -> bool {
    all.iter()
        .all(|(c, i)| c == call && !matches!(i, Item::Refused(_)))
}

/// The items of every process once the move of `call` came back down, or the error every
/// process gets: the calls they made disagree, this process could not make it
/// (`own_error`), or another could not.
fn united(
    all: Vec<(Call, Item)>,
    call: &Call,
    own_error: Option<TxnError>,
) -> Result<Vec<Item>, TxnError> {
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
    /// The ids reserved and not used yet, `[next, end)`: the same on every process (each
    /// takes them in the same order), so a create that finds one takes it without a move.
    ids: std::cell::Cell<(TxnId, TxnId)>,
}

/// A duplicate of a communicator that a foreign caller hands over as its raw handle (a C
/// program's `MPI_Comm`, mpi4py's): the caller's stays its own (it is often
/// `MPI_COMM_WORLD`, which may not be wrapped as an owned communicator), and the duplicate
/// is freed when dropped. `Err` is MPI_Comm_dup's error code.
///
/// # Safety
/// `comm` is a live intra-communicator of the MPI this crate is built against, after
/// MPI_Init.
pub unsafe fn duplicate_raw(comm: mpi::ffi::MPI_Comm) -> Result<SimpleCommunicator, i32> {
    use mpi::raw::FromRaw;
    let mut dup = std::mem::MaybeUninit::<mpi::ffi::MPI_Comm>::uninit();
    // SAFETY: `comm` is live by this function's contract; `dup` is written by MPI_Comm_dup
    // before it is read.
    let rc = unsafe { mpi::ffi::MPI_Comm_dup(comm, dup.as_mut_ptr()) };
    if rc != 0 {
        return Err(rc);
    }
    // SAFETY: MPI_Comm_dup succeeded, so `dup` is a fresh intra-communicator that nothing
    // else holds.
    Ok(unsafe { SimpleCommunicator::from_raw(dup.assume_init()) })
}

/// How many transaction ids the coordinator reserves at once: one create in this many is a
/// collective move (and, with Tessera beneath, a call at its daemon).
const RESERVE: u32 = 1024;

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
            ids: std::cell::Cell::new((0, 0)),
        })
    }

    /// Makes the transactions Tessera's through `fs` (by default, the interposer's connection
    /// when the interposer is loaded; otherwise the protocol runs alone). Every process must
    /// make the same choice.
    pub fn with_file_system(mut self, fs: Option<Rc<dyn fs::FileSystem>>) -> Transactions {
        self.fs = fs;
        self.ids.set((0, 0));
        self
    }

    /// The next reserved id, taken, if one is left.
    fn take_reserved(&self) -> Option<TxnId> {
        let (next, end) = self.ids.get();
        (next < end).then(|| {
            self.ids.set((next + 1, end));
            next
        })
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

    /// Creates a transaction. Its id is the next of a block the coordinator reserved (at its
    /// daemon, the transaction's home, with Tessera beneath; drawn at random without): every
    /// process takes the same next id, so only the create that finds the block used up is a
    /// collective move, in which the coordinator reserves the next block. Collective.
    pub fn create_transaction(&self) -> Result<Transaction, TxnError> {
        let id = match self.take_reserved() {
            Some(id) => id,
            None => {
                let mine = match (&self.fs, self.comms.rank) {
                    (Some(fs), 0) => fs
                        .reserve(RESERVE)
                        .map(|first| vec![Item::Block(first, RESERVE)])
                        .map_err(|e| {
                            TxnError::Invalid(format!(
                                "opening the transaction in Tessera failed: {e}"
                            ))
                        }),
                    (None, 0) => Ok(vec![Item::Block(rand::random::<TxnId>() >> 1, RESERVE)]),
                    _ => Ok(Vec::new()),
                };
                let all = collective(&self.comms, Call::Create, mine)?;
                let (first, count) = all
                    .iter()
                    .find_map(|i| match i {
                        Item::Block(first, count) => Some((*first, *count)),
                        _ => None,
                    })
                    .ok_or_else(|| TxnError::Disagree {
                        what: "the transaction id",
                        seen: "none".into(),
                    })?;
                self.ids.set((first + 1, first + u64::from(count)));
                first
            }
        };
        Ok(Transaction {
            comms: Rc::clone(&self.comms),
            state: TxnState::new(self.comms.rank, id),
            globals: 0,
            fs: self.fs.clone(),
            joined: false,
            refused_declaration: None,
        })
    }

    /// Takes part in a create this process cannot make (a bad argument seen by a C caller):
    /// in the move the others make, so that every process fails it alike instead of waiting
    /// for this one, or alone where they take a reserved id without one. Returns the error
    /// `why` for this process.
    pub fn refuse_create(&self, why: TxnError) -> TxnError {
        // Where the others take a reserved id without a move, so does this process (the ids
        // stay in step), and it fails alone.
        if self.take_reserved().is_some() {
            return why;
        }
        match collective(&self.comms, Call::Create, Err(why)) {
            Err(e) => e,
            Ok(_) => unreachable!("a refused call fails"),
        }
    }
}

/// The collective calls of a transaction, for [`Transaction::refuse`] (an abort is one before
/// the vote).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CollectiveCall {
    CreateSubTransactionAll,
    Begin,
    Vote,
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
    /// Why this process could not declare a global sub-transaction before begin: begin fails
    /// with it on every process.
    refused_declaration: Option<TxnError>,
}

/// The declarations of globals among `items`.
fn declared(items: &[Item]) -> Vec<Declared> {
    items
        .iter()
        .filter_map(|i| match i {
            Item::Declared(d) => Some(d.clone()),
            _ => None,
        })
        .collect()
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
            CollectiveCall::Abort => Call::Abort { txn },
        }
    }

    /// Takes part in collective call `which` that this process cannot make (a bad argument
    /// seen by a C caller), so that every process fails it alike instead of waiting for this
    /// one. Returns the error `why` for this process.
    pub fn refuse(&mut self, which: CollectiveCall, why: TxnError) -> TxnError {
        if which == CollectiveCall::CreateSubTransactionAll && *self.state.phase() == Phase::Created
        {
            // Declared before begin, without a move: begin fails with it on every process.
            self.refused_declaration.get_or_insert(why.clone());
            return why;
        }
        match collective(&self.comms, self.call(which), Err(why)) {
            Err(e) => e,
            Ok(_) => unreachable!("a refused call fails"),
        }
    }

    /// A singleton sub-transaction of this process. Local; before begin.
    pub fn create_sub_transaction(&mut self, name: &str) -> Result<SubId, TxnError> {
        self.state.create_singleton(name)
    }

    /// A global sub-transaction; every process names it alike. Collective: before begin it
    /// is declared (as singletons are) and begin's move checks that every process declared
    /// the same ones; after begin it is a move of its own.
    pub fn create_sub_transaction_all(&mut self, name: &str) -> Result<SubId, TxnError> {
        if *self.state.phase() == Phase::Created {
            return self.state.declare_global(name);
        }
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
    /// beneath) becomes a member of the transaction: every process names itself, the
    /// coordinator enrolls them all in one call, and each takes up the log id it was given,
    /// so what it publishes from now on is pending under the transaction. Collective.
    pub fn begin_transaction(&mut self) -> Result<(), TxnError> {
        let call = self.call(CollectiveCall::Begin);
        let mut items: Result<Vec<Item>, TxnError> = self.state.begin_items().map(|v| {
            v.into_iter()
                .map(|(id, name)| Item::Singleton(id, name))
                .chain(self.state.declared_items().into_iter().map(Item::Declared))
                .collect()
        });
        if let (Ok(_), Some(why)) = (&items, self.refused_declaration.take()) {
            items = Err(why);
        }
        let mut me = None;
        if let (Ok(v), Some(fs)) = (&mut items, &self.fs) {
            match fs.identity() {
                Ok(m) => {
                    v.push(Item::Member(self.comms.rank, m.0, m.1));
                    me = Some(m);
                }
                Err(e) => {
                    items = Err(TxnError::Invalid(format!(
                        "joining the transaction in Tessera failed: {e}"
                    )))
                }
            }
        }
        let (fs, txn) = (self.fs.clone(), self.id());
        // Every process makes the same choice of file system, so of the way down.
        let Some(fs) = fs else {
            let all = collective(&self.comms, call, items)?;
            TxnState::agree_declared(&declared(&all))?;
            return self.begun(all, None);
        };
        let all = collective_with_own(&self.comms, call, items, |all| {
            if TxnState::agree_declared(&declared(all)).is_err() {
                // Every process fails begin on it: none is enrolled.
                return (Vec::new(), Vec::new());
            }
            let (ranks, members): (Vec<u32>, Vec<fs::Member>) = all
                .iter()
                .filter_map(|i| match i {
                    Item::Member(rank, node, client) => Some((*rank, (*node, *client))),
                    _ => None,
                })
                .unzip();
            match fs.enroll(txn, &members) {
                // Each process is handed its own log id only.
                Ok(logs) => (
                    Vec::new(),
                    ranks
                        .into_iter()
                        .zip(members)
                        .zip(logs)
                        .map(|((rank, (node, client)), log)| {
                            (rank, Item::Enrolled(node, client, log))
                        })
                        .collect(),
                ),
                Err(e) => (
                    vec![Item::Refused(format!(
                        "enrolling the processes in Tessera failed: {e}"
                    ))],
                    Vec::new(),
                ),
            }
        })?;
        TxnState::agree_declared(&declared(&all))?;
        self.begun(all, me)
    }

    /// Takes up what begin's move brought down (`all`): every singleton, and this process's
    /// log id if it is enrolled (as `me`) in Tessera.
    fn begun(&mut self, all: Vec<Item>, me: Option<fs::Member>) -> Result<(), TxnError> {
        let txn = self.id();
        let mut singletons = Vec::new();
        let mut mine = None;
        for i in all {
            match i {
                Item::Singleton(id, name) => singletons.push((id, name)),
                Item::Enrolled(node, client, log) if Some((node, client)) == me => mine = Some(log),
                _ => {}
            }
        }
        if let (Some(fs), Some(_)) = (&self.fs, me) {
            let log = mine.ok_or_else(|| {
                TxnError::Invalid(format!(
                    "rank {} was not enrolled in the transaction in Tessera",
                    self.comms.rank
                ))
            })?;
            fs.enter(txn, log).map_err(|e| {
                TxnError::Invalid(format!("joining the transaction in Tessera failed: {e}"))
            })?;
            self.joined = true;
        }
        self.state.begin(singletons);
        Ok(())
    }

    /// Commits this process's part of `sub`. Local.
    pub fn commit_sub_transaction(&mut self, sub: SubId) -> Result<(), TxnError> {
        self.state.commit_sub(sub)
    }

    /// Votes (`ok` = false votes abort); returns the decision every process reaches, which
    /// is final: with every vote gathered the coordinator decides (with Tessera beneath, asks
    /// the daemons for their decision, durable before the move goes back down). With Tessera
    /// beneath, a process publishes its writes first (one that cannot votes abort), and
    /// leaves the transaction once it knows the decision. Collective.
    ///
    /// A process voting abort publishes too: its writes are then pending under the
    /// transaction, and go with it (space included); left unpublished, they would keep it
    /// from leaving, and so from joining the next transaction.
    pub fn vote_transaction(&mut self, ok: bool) -> Result<Decision, TxnError> {
        let call = self.call(CollectiveCall::Vote);
        let published = match (&self.fs, ok) {
            (Some(fs), true) => fs
                .publish()
                .map_err(|e| format!("rank {} could not publish its writes: {e}", self.comms.rank)),
            // Its vote is abort already: a failure adds nothing to act on.
            (Some(fs), false) => {
                let _ = fs.publish();
                Ok(())
            }
            (None, _) => Ok(()),
        };
        let items = self.state.vote_items(ok).map(|mut v| {
            v.extend(published.err());
            v.into_iter().map(Item::Reason).collect()
        });
        let (fs, txn) = (self.fs.clone(), self.id());
        let all = collective_with(&self.comms, call, items, |all| {
            let Some(fs) = fs else {
                return Vec::new();
            };
            let reasons: Vec<String> = all
                .iter()
                .filter_map(|i| match i {
                    Item::Reason(r) => Some(r.clone()),
                    _ => None,
                })
                .collect();
            if !reasons.is_empty() {
                // Every process leaves and the transaction is dropped at its home anyway
                // (its processes end, or time out): a failure here changes nothing it could
                // act on.
                let _ = fs.decide(txn, false, &reasons);
                return Vec::new();
            }
            match fs.decide(txn, true, &[]) {
                Ok(()) => Vec::new(),
                Err(e) => vec![Item::Reason(format!("Tessera did not commit it: {e}"))],
            }
        })?;
        let reasons = strings(all, |i| match i {
            Item::Reason(r) => Some(r),
            _ => None,
        });
        let decision = self.state.vote(reasons);
        self.leave(decision == Decision::Commit);
        Ok(decision)
    }

    /// Commits a transaction voted to commit: the vote decided it on every process (and in
    /// Tessera), so this only takes the decision up. Local.
    pub fn commit_transaction(&mut self) -> Result<(), TxnError> {
        self.state.check_commit()?;
        self.state.commit(Vec::new())
    }

    /// Aborts: before the vote, a collective call (with Tessera beneath, every process
    /// publishes what it wrote under the transaction, and all of it is dropped with its space);
    /// after a vote to abort, local (the vote decided it); after a vote to commit, refused (the
    /// decision stands).
    pub fn abort_transaction(&mut self) -> Result<(), TxnError> {
        self.state.check_abort()?;
        if matches!(self.state.phase(), Phase::Voted(_)) {
            self.state.abort();
            return Ok(());
        }
        let call = self.call(CollectiveCall::Abort);
        if let Some(fs) = &self.fs {
            // As for a vote to abort: what this process wrote goes with the transaction, and
            // it can leave. A failure changes nothing the abort does not.
            let _ = fs.publish();
        }
        let (fs, txn) = (self.fs.clone(), self.id());
        // Decided at the top of the move, once every process has published: a publication
        // after the decision would be refused and stay unpublished.
        collective_with(&self.comms, call, Ok(Vec::new()), |_| {
            if let Some(fs) = fs {
                let why = ["the application aborted it".to_string()];
                // Every process leaves and the transaction is dropped at its home anyway (its
                // processes end, or time out): a failure here changes nothing it could act on.
                let _ = fs.decide(txn, false, &why);
            }
            Vec::new()
        })?;
        self.leave(false);
        self.state.abort();
        Ok(())
    }

    /// Leaves the transaction in Tessera, if this process joined it (its daemon learns it
    /// with the process's next request). A process that cannot (its connection is gone) is no
    /// longer a member anyway.
    fn leave(&mut self, committed: bool) {
        if let (true, Some(fs)) = (self.joined, &self.fs) {
            let _ = fs.leave(committed);
            self.joined = false;
        }
    }

    /// Ends this process's part: what the transaction came to. Local.
    pub fn finalize(self) -> Phase {
        self.state.phase().clone()
    }
}
