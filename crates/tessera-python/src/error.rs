//! Tessera's errors as Python's: `OSError(errno, message)`, which Python turns into the
//! subclass the errno names (`FileNotFoundError`, `PermissionError`, ...).

use pyo3::PyErr;
use pyo3::exceptions::PyOSError;
use tessera_client::FsError;

/// The Python exception of a Tessera error.
pub fn to_py(e: FsError) -> PyErr {
    PyOSError::new_err((e.code(), e.to_string()))
}
