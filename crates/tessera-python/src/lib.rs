//! Python bindings of the client library (PyO3): the `tessera._native` extension module,
//! which the pure-Python package `tessera` (python/tessera) wraps into file objects of the
//! `io` module's kinds.
//!
//! Each call releases the interpreter's lock while it waits for Tessera, so other Python
//! threads run. Errors become `OSError` carrying errno and Tessera's message; Python picks
//! the subclass (`FileNotFoundError` for ENOENT, ...), as for its own file calls.

mod catalogue;
mod client;
mod error;
mod file;
mod span;
#[cfg(feature = "mpi")]
mod txn;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<client::PyClient>()?;
    m.add_class::<client::PyStat>()?;
    m.add_class::<file::PyFile>()?;
    m.add_class::<catalogue::PyCatalogue>()?;
    #[cfg(feature = "mpi")]
    {
        m.add_class::<txn::PyTransactions>()?;
        m.add_class::<txn::PyTransaction>()?;
        m.add(
            "TransactionError",
            m.py().get_type::<txn::TransactionError>(),
        )?;
    }
    m.add("HAS_MPI", cfg!(feature = "mpi"))?;
    Ok(())
}
