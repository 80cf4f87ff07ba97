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
//! MPI stays out of the file system crates: this crate is the only one of the file system's
//! libraries that links MPI.

pub mod tiers;

use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::rc::Rc;
use tessera_core::txn_state::TxnState;
pub use tessera_core::txn_state::{Decision, Phase, SubId, TxnError, TxnId};
use tiers::TierComms;

/// Environment variable that sets the sub-coordinators' fan-in (default 256): small values
/// give small jobs all three tiers, for tests.
pub const FAN_IN_VAR: &str = "TESSERA_TXN_FAN_IN";

/// The transaction library of one communicator's processes.
pub struct Transactions {
    comms: Rc<TierComms>,
}

impl Transactions {
    /// Splits a copy of `comm` into the tiers. Collective over `comm`.
    pub fn init(comm: &SimpleCommunicator) -> Result<Transactions, TxnError> {
        Transactions::with_communicator(comm.duplicate())
    }

    /// Splits `comm`, which the library keeps (and frees when dropped), into the tiers.
    /// Collective over `comm`.
    pub fn with_communicator(comm: SimpleCommunicator) -> Result<Transactions, TxnError> {
        let fan_in = match std::env::var(FAN_IN_VAR) {
            Ok(v) => v.parse::<u32>().ok().filter(|f| *f >= 2).ok_or_else(|| {
                TxnError::Sub(format!(
                    "{FAN_IN_VAR}={v:?}: the fan-in is a number of processes, at least 2"
                ))
            })?,
            Err(_) => tessera_core::txn_tiers::FAN_IN,
        };
        Ok(Transactions {
            comms: Rc::new(TierComms::split(comm, fan_in)),
        })
    }

    /// The tiers this library moves its phases through.
    pub fn tiers(&self) -> &tessera_core::txn_tiers::Tiers {
        &self.comms.tiers
    }

    pub fn rank(&self) -> u32 {
        self.comms.rank
    }

    /// Creates a transaction: the coordinator draws its id. Collective.
    pub fn create_transaction(&self) -> Result<Transaction, TxnError> {
        let mine = if self.comms.rank == 0 {
            vec![rand::random::<TxnId>()]
        } else {
            Vec::new()
        };
        let ids = self.comms.unique(mine)?;
        let id = *ids.first().ok_or_else(|| TxnError::Disagree {
            what: "the transaction id",
            seen: "none".into(),
        })?;
        Ok(Transaction {
            comms: Rc::clone(&self.comms),
            state: TxnState::new(self.comms.rank, id),
        })
    }
}

/// One transaction, as this process takes part in it.
pub struct Transaction {
    comms: Rc<TierComms>,
    state: TxnState,
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

    /// A singleton sub-transaction of this process. Local; before begin.
    pub fn create_sub_transaction(&mut self, name: &str) -> Result<SubId, TxnError> {
        self.state.create_singleton(name)
    }

    /// A global sub-transaction; every process names it alike. Collective.
    pub fn create_sub_transaction_all(&mut self, name: &str) -> Result<SubId, TxnError> {
        let items = self.state.global_items(name)?;
        let names = self.comms.unique(items)?;
        self.state.create_global(names)
    }

    /// Begins: every process learns every singleton sub-transaction. Collective.
    pub fn begin_transaction(&mut self) -> Result<(), TxnError> {
        let items = self.state.begin_items()?;
        let all = self.comms.unique(items)?;
        self.state.begin(all);
        Ok(())
    }

    /// Commits this process's part of `sub`. Local.
    pub fn commit_sub_transaction(&mut self, sub: SubId) -> Result<(), TxnError> {
        self.state.commit_sub(sub)
    }

    /// Votes (`ok` = false votes abort); returns the decision every process reaches.
    /// Collective.
    pub fn vote_transaction(&mut self, ok: bool) -> Result<Decision, TxnError> {
        let items = self.state.vote_items(ok)?;
        let reasons = self.comms.unique(items)?;
        Ok(self.state.vote(reasons))
    }

    /// Commits a transaction voted to commit. Collective.
    pub fn commit_transaction(&mut self) -> Result<(), TxnError> {
        self.state.check_commit()?;
        let failures: Vec<String> = self.comms.unique(Vec::new())?;
        self.state.commit(failures)
    }

    /// Aborts (any time before commit). Collective.
    pub fn abort_transaction(&mut self) -> Result<(), TxnError> {
        self.state.check_abort()?;
        let _: Vec<String> = self.comms.unique(Vec::new())?;
        self.state.abort();
        Ok(())
    }

    /// Ends this process's part: what the transaction came to. Local.
    pub fn finalize(self) -> Phase {
        self.state.phase().clone()
    }
}
