//! `tessera._native.Client`: a connection to a daemon of an instance, and the namespace calls.

use crate::error::to_py;
use crate::file::PyFile;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;
use tessera_client::{Attr, Client, FileKind, InstanceLayout, Model, OpenOptions};

/// A client of one daemon of an instance.
#[pyclass(name = "Client", module = "tessera._native", frozen)]
pub struct PyClient {
    pub(crate) inner: Client,
}

/// What `stat` returns: the fields of `os.stat_result` that Tessera keeps.
#[pyclass(name = "Stat", module = "tessera._native", frozen, get_all)]
pub struct PyStat {
    st_ino: u64,
    st_mode: u32,
    st_nlink: u32,
    st_uid: u32,
    st_gid: u32,
    st_size: u64,
    st_atime_ns: i64,
    st_mtime_ns: i64,
    st_ctime_ns: i64,
    /// `file`, `dir` or `symlink`.
    kind: &'static str,
}

impl From<Attr> for PyStat {
    fn from(a: Attr) -> PyStat {
        let (kind, type_bits) = match a.kind {
            FileKind::File => ("file", 0o100000),
            FileKind::Dir => ("dir", 0o040000),
            FileKind::Symlink => ("symlink", 0o120000),
        };
        PyStat {
            st_ino: a.ino,
            st_mode: type_bits | (a.mode & 0o7777),
            st_nlink: a.nlink,
            st_uid: a.uid,
            st_gid: a.gid,
            st_size: a.size,
            st_atime_ns: a.atime_ns,
            st_mtime_ns: a.mtime_ns,
            st_ctime_ns: a.ctime_ns,
            kind,
        }
    }
}

#[pymethods]
impl PyStat {
    fn __repr__(&self) -> String {
        format!(
            "Stat(kind={:?}, st_size={}, st_mode={:#o}, st_ino={})",
            self.kind, self.st_size, self.st_mode, self.st_ino
        )
    }
}

/// The model named by `name` (`posix`, `commit`, `session`, `mpiio`).
fn model_of(name: &str) -> PyResult<Model> {
    name.parse::<Model>()
        .map_err(|e| PyValueError::new_err(format!("model {name:?}: {e}")))
}

#[pymethods]
impl PyClient {
    /// Connects to the instance in directory `instance` (default: `TESSERA_INSTANCE`), to
    /// daemon `node` (default: the one on this host).
    #[new]
    #[pyo3(signature = (instance=None, node=None))]
    fn new(py: Python<'_>, instance: Option<PathBuf>, node: Option<u32>) -> PyResult<Self> {
        let layout = instance.map_or_else(InstanceLayout::from_env, InstanceLayout::new);
        let inner = py
            .allow_threads(|| Client::connect(layout, node))
            .map_err(to_py)?;
        Ok(PyClient { inner })
    }

    /// The instance's mount prefix (`/tessera` unless set otherwise).
    #[getter]
    fn prefix(&self) -> String {
        self.inner.config().mount
    }

    /// The node this client's daemon is.
    #[getter]
    fn node(&self) -> u32 {
        self.inner.identity().0
    }

    /// Opens `path`; the flags are `open(2)`'s, `model` one of the four consistency models
    /// (default: the instance's).
    #[pyo3(signature = (path, *, read=true, write=false, create=false, truncate=false, append=false, exclusive=false, model=None))]
    #[allow(clippy::too_many_arguments)]
    fn open(
        &self,
        py: Python<'_>,
        path: &str,
        read: bool,
        write: bool,
        create: bool,
        truncate: bool,
        append: bool,
        exclusive: bool,
        model: Option<&str>,
    ) -> PyResult<PyFile> {
        let mut o = OpenOptions::new();
        o.read(read)
            .write(write)
            .create(create)
            .truncate(truncate)
            .append(append)
            .exclusive(exclusive);
        if let Some(m) = model {
            o.model(model_of(m)?);
        }
        let file = py
            .allow_threads(|| self.inner.open(path, &o))
            .map_err(to_py)?;
        Ok(PyFile::new(file, path.to_string(), read, write))
    }

    /// Where the bytes of `[offset, offset + length)` of `path` live (FusionFS-style
    /// locality, for schedulers): a dict with `size`, `extents` (start, end, host or None,
    /// node or None, residence), `bytes_by_host`, `pfs_only_bytes` and `best_host`.
    #[pyo3(signature = (path, offset=0, length=None))]
    fn locate<'py>(
        &self,
        py: Python<'py>,
        path: &str,
        offset: u64,
        length: Option<u64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let loc = py
            .allow_threads(|| self.inner.locate(path, offset, length))
            .map_err(to_py)?;
        let d = PyDict::new(py);
        d.set_item("path", &loc.path)?;
        d.set_item("size", loc.size)?;
        d.set_item("start", loc.start)?;
        d.set_item("end", loc.end)?;
        let extents: Vec<_> = loc
            .extents
            .iter()
            .map(|x| {
                (
                    x.start,
                    x.end,
                    x.holder.as_ref().map(|h| h.host.clone()),
                    x.holder.as_ref().map(|h| h.node),
                    x.residence.name(),
                )
            })
            .collect();
        d.set_item("extents", extents)?;
        let by_host = PyDict::new(py);
        for h in &loc.bytes_by_host {
            by_host.set_item(&h.host, h.bytes)?;
        }
        d.set_item("bytes_by_host", by_host)?;
        d.set_item("pfs_only_bytes", loc.pfs_only_bytes)?;
        d.set_item("best_host", loc.best_host())?;
        d.set_item("more_from", loc.more_from)?;
        Ok(d)
    }

    /// What this client has read, in bytes by where they came from (`own_unattached`,
    /// `own_log`, `node_logs`: this node's logs; `remote`, `read_ahead_hits`,
    /// `read_ahead_fetched`: other nodes'; `pfs`; `holes`), and its `requests`.
    fn read_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.inner.stats();
        let r = s.read;
        let d = PyDict::new(py);
        for (k, v) in [
            ("own_unattached", r.own_unattached),
            ("own_log", r.own_log),
            ("node_logs", r.node_logs),
            ("remote", r.remote),
            ("read_ahead_hits", r.read_ahead_hits),
            ("read_ahead_fetched", r.read_ahead_fetched),
            ("pfs", r.pfs),
            ("holes", r.holes),
            ("requests", s.requests),
        ] {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    /// Writes file `path` into the instance's PFS directory (atomically); the bytes written.
    fn flush(&self, py: Python<'_>, path: &str) -> PyResult<u64> {
        py.allow_threads(|| self.inner.flush_path(path))
            .map_err(to_py)
    }

    fn stat(&self, py: Python<'_>, path: &str) -> PyResult<PyStat> {
        let a = py.allow_threads(|| self.inner.stat(path)).map_err(to_py)?;
        Ok(a.into())
    }

    /// The names in directory `path`, sorted.
    fn listdir(&self, py: Python<'_>, path: &str) -> PyResult<Vec<String>> {
        let mut names: Vec<String> = py
            .allow_threads(|| self.inner.readdir(path))
            .map_err(to_py)?
            .into_iter()
            .map(|e| e.name)
            .collect();
        names.sort();
        Ok(names)
    }

    #[pyo3(signature = (path, mode=0o777))]
    fn mkdir(&self, py: Python<'_>, path: &str, mode: u32) -> PyResult<()> {
        py.allow_threads(|| self.inner.mkdir(path, mode))
            .map_err(to_py)
    }

    fn unlink(&self, py: Python<'_>, path: &str) -> PyResult<()> {
        py.allow_threads(|| self.inner.unlink(path)).map_err(to_py)
    }

    fn rmdir(&self, py: Python<'_>, path: &str) -> PyResult<()> {
        py.allow_threads(|| self.inner.rmdir(path)).map_err(to_py)
    }

    fn rename(&self, py: Python<'_>, src: &str, dst: &str) -> PyResult<()> {
        py.allow_threads(|| self.inner.rename(src, dst))
            .map_err(to_py)
    }
}
