//! `tessera._native.Catalogue`: the catalogue of variables (D2T) of one client, with
//! hyperslabs written from and read into the caller's buffers in place.

use crate::client::PyClient;
use crate::error::to_py;
use crate::span::Span;
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyDict};
use std::time::Duration;
use tessera_client::Client;
use tessera_core::catalogue::{Variable, VersionView};
use tessera_core::hyperslab::Slab;

/// The catalogue as one client reaches it: in a transaction it has joined, what it creates,
/// adds and deletes is pending until the transaction commits.
#[pyclass(name = "Catalogue", module = "tessera._native", frozen)]
pub struct PyCatalogue {
    client: Client,
}

/// A version as a dict: `version`, `name`, `elem_type`, `elem_size`, `dims`, and `chunks`
/// as (offsets, counts, path, offset, length) tuples.
fn view_dict<'py>(py: Python<'py>, v: &VersionView) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("version", v.version)?;
    d.set_item("name", &v.variable.name)?;
    d.set_item("elem_type", &v.variable.elem_type)?;
    d.set_item("elem_size", v.variable.elem_size)?;
    d.set_item("dims", &v.variable.dims)?;
    let chunks: Vec<_> = v
        .chunks
        .iter()
        .map(|c| {
            (
                c.offsets.clone(),
                c.counts.clone(),
                c.path.clone(),
                c.offset,
                c.len,
            )
        })
        .collect();
    d.set_item("chunks", chunks)?;
    Ok(d)
}

#[pymethods]
impl PyCatalogue {
    #[new]
    fn new(client: &PyClient) -> Self {
        PyCatalogue {
            client: client.inner.clone(),
        }
    }

    /// Creates a new version of variable `name`: elements of type `elem_type` (a name such
    /// as `f64`) of `elem_size` bytes, global dimensions `dims`.
    fn create(
        &self,
        py: Python<'_>,
        name: String,
        elem_type: String,
        elem_size: u32,
        dims: Vec<u64>,
    ) -> PyResult<()> {
        let v = Variable {
            name,
            elem_type,
            elem_size,
            dims,
        };
        py.allow_threads(|| self.client.cat_create(v))
            .map_err(to_py)
    }

    /// Writes `data` (the hyperslab at `offsets` of `counts`, C order) at `offset` of file
    /// `path` and adds it as a chunk of `name`.
    #[allow(clippy::too_many_arguments)] // Python keyword arguments, not a Rust call site.
    fn put(
        &self,
        py: Python<'_>,
        name: &str,
        offsets: Vec<u64>,
        counts: Vec<u64>,
        data: PyBuffer<u8>,
        path: &str,
        offset: u64,
    ) -> PyResult<()> {
        let span = Span::of(&data, false)?;
        py.allow_threads(move || {
            // SAFETY: `data` stays exported until this method returns, after this call.
            let bytes = unsafe { span.as_ref() };
            let slab = Slab {
                offsets: &offsets,
                counts: &counts,
            };
            self.client.cat_put(name, slab, bytes, path, offset)
        })
        .map_err(to_py)?;
        drop(data);
        Ok(())
    }

    /// Reads the hyperslab at `offsets` of `counts` of version `version` (None: the newest)
    /// into `out` in C order, in place; the version read, as `lookup` describes it.
    #[pyo3(signature = (name, offsets, counts, out, version=None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        offsets: Vec<u64>,
        counts: Vec<u64>,
        out: PyBuffer<u8>,
        version: Option<u64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let mut span = Span::of(&out, true)?;
        let view = py
            .allow_threads(move || {
                // SAFETY: `out` stays exported until this method returns, after this call.
                let buf = unsafe { span.as_mut() };
                let want = Slab {
                    offsets: &offsets,
                    counts: &counts,
                };
                self.client.cat_get(name, version, want, buf)
            })
            .map_err(to_py)?;
        drop(out);
        view_dict(py, &view)
    }

    /// The hyperslab at `offsets` of `counts` (None: from the start, and to the end of each
    /// dimension) of version `version` as a new bytearray, in C order, with the version as
    /// `lookup` describes it plus the `counts` read: one lookup, where sizing an array
    /// before `get` would take two.
    #[pyo3(signature = (name, offsets=None, counts=None, version=None))]
    fn get_new<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        offsets: Option<Vec<u64>>,
        counts: Option<Vec<u64>>,
        version: Option<u64>,
    ) -> PyResult<(Bound<'py, PyByteArray>, Bound<'py, PyDict>)> {
        let view = py
            .allow_threads(|| self.client.cat_lookup(name, version))
            .map_err(to_py)?;
        let dims = &view.variable.dims;
        let offsets = offsets.unwrap_or_else(|| vec![0; dims.len()]);
        let counts = counts.unwrap_or_else(|| {
            dims.iter()
                .zip(&offsets)
                .map(|(d, o)| d.saturating_sub(*o))
                .collect()
        });
        // A region outside the variable gets no buffer: the read refuses it, naming why.
        let inside = offsets.len() == dims.len()
            && counts.len() == dims.len()
            && offsets
                .iter()
                .zip(&counts)
                .zip(dims)
                .all(|((o, n), d)| o.checked_add(*n).is_some_and(|end| end <= *d));
        let len = if inside {
            let elems: u64 = counts.iter().product();
            usize::try_from(elems * u64::from(view.variable.elem_size)).map_err(|_| {
                PyValueError::new_err(format!("a region of {counts:?} does not fit in memory"))
            })?
        } else {
            0
        };
        let data = PyByteArray::new_with(py, len, |_| Ok(()))?;
        let buffer = PyBuffer::<u8>::get(&data)?;
        let mut span = Span::of(&buffer, true)?;
        py.allow_threads(|| {
            // SAFETY: `buffer` keeps the new bytearray exported (not resized or freed) until
            // this method returns, after this call; no other code has it yet.
            let buf = unsafe { span.as_mut() };
            let want = Slab {
                offsets: &offsets,
                counts: &counts,
            };
            self.client.cat_read(&view, want, buf)
        })
        .map_err(to_py)?;
        drop(buffer);
        let d = view_dict(py, &view)?;
        d.set_item("counts", counts)?;
        Ok((data, d))
    }

    /// Version `version` of `name` (None: the newest; in a transaction creating it, the
    /// pending one, numbered 0).
    #[pyo3(signature = (name, version=None))]
    fn lookup<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        version: Option<u64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let view = py
            .allow_threads(|| self.client.cat_lookup(name, version))
            .map_err(to_py)?;
        view_dict(py, &view)
    }

    /// Every variable with its newest version.
    fn list(&self, py: Python<'_>) -> PyResult<Vec<(String, u64)>> {
        py.allow_threads(|| self.client.cat_list()).map_err(to_py)
    }

    /// Deletes every version of `name`.
    fn delete(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        py.allow_threads(|| self.client.cat_delete(name))
            .map_err(to_py)
    }

    /// Waits until `name` has a committed version of at least `version`, at most `timeout`
    /// seconds: the newest version then (`TimeoutError` when it does not come).
    fn wait(&self, py: Python<'_>, name: &str, version: u64, timeout: f64) -> PyResult<u64> {
        let t = Duration::try_from_secs_f64(timeout.max(0.0)).unwrap_or(Duration::MAX);
        py.allow_threads(|| self.client.cat_wait(name, version, t))
            .map_err(to_py)
    }
}
