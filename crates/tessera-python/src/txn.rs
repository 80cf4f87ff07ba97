//! `tessera._native.Transactions`: D2T's MxN transactions over the communicator of an
//! mpi4py program (built with the `mpi` feature). The protocol is `tessera_txn`'s, with this
//! client beneath: what the process writes and catalogues through it between begin and its
//! vote is pending, and appears to everyone else all at once, or never.
//!
//! The objects are bound to the interpreter's thread (they hold the MPI communicators, which
//! are not shared between threads), and the collective calls hold the interpreter's lock, as
//! mpi4py's own collectives do.

use crate::client::PyClient;
use mpi::ffi::MPI_Comm;
use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use std::rc::Rc;
use tessera_txn::fs::Direct;
use tessera_txn::{Decision, Phase, SubId, TxnError};

create_exception!(
    _native,
    TransactionError,
    PyRuntimeError,
    "A transaction call that failed: a call out of order, processes that disagree, or an abort."
);

fn to_py(e: TxnError) -> PyErr {
    TransactionError::new_err(e.to_string())
}

/// The transactions of one communicator's processes.
#[pyclass(name = "Transactions", module = "tessera._native", unsendable)]
pub struct PyTransactions {
    inner: tessera_txn::Transactions,
}

#[pymethods]
impl PyTransactions {
    /// Splits a duplicate of the communicator whose MPI handle is stored at `comm_address`
    /// (mpi4py's `MPI._addressof(comm)`) into D2T's tiers, with `client` beneath.
    /// Collective.
    #[new]
    fn new(comm_address: usize, client: &PyClient) -> PyResult<Self> {
        if comm_address == 0 || !comm_address.is_multiple_of(std::mem::align_of::<MPI_Comm>()) {
            return Err(PyValueError::new_err(
                "the communicator's address is not a handle's: pass MPI._addressof(comm) of a live intra-communicator",
            ));
        }
        // SAFETY: `comm_address` is where mpi4py keeps the handle of a live communicator of
        // the MPI this module is built against (it initialised MPI): the caller's contract,
        // as for any C library handed `MPI._addressof`; aligned and non-null (checked).
        // Reading it there works whatever the handle's type (Open MPI's pointer, MPICH's int).
        let comm = unsafe { (comm_address as *const MPI_Comm).read() };
        // SAFETY: `comm` is live (above); the library keeps a duplicate, freed with it.
        let owned = unsafe { tessera_txn::duplicate_raw(comm) }.map_err(|rc| {
            PyValueError::new_err(format!(
                "MPI_Comm_dup of the communicator failed ({rc}): pass a live intra-communicator"
            ))
        })?;
        let fs = Rc::new(Direct(client.inner.clone()));
        let inner = tessera_txn::Transactions::with_communicator(owned)
            .map_err(to_py)?
            .with_file_system(Some(fs));
        Ok(PyTransactions { inner })
    }

    /// This process's rank in the communicator.
    #[getter]
    fn rank(&self) -> u32 {
        self.inner.rank()
    }

    /// Creates a transaction. Collective.
    fn create(&self) -> PyResult<PyTransaction> {
        let t = self.inner.create_transaction().map_err(to_py)?;
        Ok(PyTransaction { inner: Some(t) })
    }
}

/// One transaction as this process takes part in it.
#[pyclass(name = "Transaction", module = "tessera._native", unsendable)]
pub struct PyTransaction {
    inner: Option<tessera_txn::Transaction>,
}

impl PyTransaction {
    fn t(&mut self) -> PyResult<&mut tessera_txn::Transaction> {
        self.inner.as_mut().ok_or_else(|| {
            TransactionError::new_err("the transaction was finalized: create a new one")
        })
    }
}

#[pymethods]
impl PyTransaction {
    #[getter]
    fn id(&mut self) -> PyResult<u64> {
        Ok(self.t()?.id())
    }

    /// `created`, `begun`, `voted-commit`, `voted-abort`, `committed` or `aborted`.
    #[getter]
    fn phase(&mut self) -> PyResult<&'static str> {
        Ok(match self.t()?.phase() {
            Phase::Created => "created",
            Phase::Begun => "begun",
            Phase::Voted(Decision::Commit) => "voted-commit",
            Phase::Voted(Decision::Abort(_)) => "voted-abort",
            Phase::Committed => "committed",
            Phase::Aborted => "aborted",
        })
    }

    /// A singleton sub-transaction of this process (before begin); its id, (owner rank,
    /// number).
    fn sub(&mut self, name: &str) -> PyResult<(Option<u32>, u32)> {
        let id = self.t()?.create_sub_transaction(name).map_err(to_py)?;
        Ok((id.owner, id.seq))
    }

    /// A global sub-transaction, named alike by every process; its id, (None, number).
    /// Collective.
    fn sub_all(&mut self, name: &str) -> PyResult<(Option<u32>, u32)> {
        let id = self.t()?.create_sub_transaction_all(name).map_err(to_py)?;
        Ok((id.owner, id.seq))
    }

    /// Commits this process's part of sub-transaction `sub` (an id `sub` or `sub_all` gave).
    fn commit_sub(&mut self, sub: (Option<u32>, u32)) -> PyResult<()> {
        let id = SubId {
            owner: sub.0,
            seq: sub.1,
        };
        self.t()?.commit_sub_transaction(id).map_err(to_py)
    }

    /// Begins: every process becomes a member in Tessera. Collective.
    fn begin(&mut self) -> PyResult<()> {
        self.t()?.begin_transaction().map_err(to_py)
    }

    /// Votes (`ok`: commit): `None` when every process voted to commit and Tessera
    /// committed, else the reasons it aborts. Collective; close the files written in the
    /// transaction first (a close publishes).
    fn vote(&mut self, ok: bool) -> PyResult<Option<Vec<String>>> {
        match self.t()?.vote_transaction(ok).map_err(to_py)? {
            Decision::Commit => Ok(None),
            Decision::Abort(reasons) => Ok(Some(reasons)),
        }
    }

    /// Takes up a decision to commit.
    fn commit(&mut self) -> PyResult<()> {
        self.t()?.commit_transaction().map_err(to_py)
    }

    /// Aborts: collective before the vote (what was written goes), local after a vote to
    /// abort.
    fn abort(&mut self) -> PyResult<()> {
        self.t()?.abort_transaction().map_err(to_py)
    }

    /// Ends this process's part; the phase it came to.
    fn finalize(&mut self) -> PyResult<&'static str> {
        let phase = self.phase()?;
        self.inner.take();
        Ok(phase)
    }
}
