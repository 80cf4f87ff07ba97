//! `tessera._native.File`: an open Tessera file with a position, read into the caller's
//! buffers in place through the buffer protocol.

use crate::error::to_py;
use crate::span::Span;
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::sync::Mutex;
use tessera_client::{File, Whence, sorted_extents};

/// An open file; its methods are those of `io.RawIOBase`, which `tessera.RawFile` wraps.
#[pyclass(name = "File", module = "tessera._native", frozen)]
pub struct PyFile {
    file: Mutex<Option<File>>,
    #[pyo3(get)]
    name: String,
    #[pyo3(get)]
    readable: bool,
    #[pyo3(get)]
    writable: bool,
}

impl PyFile {
    pub fn new(file: File, name: String, readable: bool, writable: bool) -> PyFile {
        PyFile {
            file: Mutex::new(Some(file)),
            name,
            readable,
            writable,
        }
    }

    /// Runs `f` on the open file with the interpreter's lock released.
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut File) -> tessera_client::FsResult<T> + Send,
    ) -> PyResult<T> {
        py.allow_threads(|| {
            let mut g = self.file.lock().unwrap_or_else(|p| p.into_inner());
            match g.as_mut() {
                Some(file) => f(file).map_err(to_py),
                None => Err(PyValueError::new_err("I/O operation on closed file")),
            }
        })
    }
}

#[pymethods]
impl PyFile {
    /// Reads into `buffer` (any writable contiguous buffer) at the position, in place;
    /// the count read (0 at the end of the file).
    fn readinto(&self, py: Python<'_>, buffer: PyBuffer<u8>) -> PyResult<usize> {
        let mut span = Span::of(&buffer, true)?;
        let n = self.with(py, move |f| {
            // SAFETY: `buffer` stays exported until this method returns, after this call.
            let dst = unsafe { span.as_mut() };
            let mut done = 0;
            while done < dst.len() {
                let n = f.read(&mut dst[done..])?;
                if n == 0 {
                    break;
                }
                done += n;
            }
            Ok(done)
        })?;
        drop(buffer);
        Ok(n)
    }

    /// Up to `size` bytes from the position (all to the end of the file if negative).
    #[pyo3(signature = (size=-1))]
    fn read<'py>(&self, py: Python<'py>, size: i64) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = self.with(py, |f| {
            let want = if size < 0 {
                f.len()?.saturating_sub(f.tell()) as usize
            } else {
                size as usize
            };
            let mut buf = vec![0u8; want];
            let mut done = 0;
            while done < want {
                let n = f.read(&mut buf[done..])?;
                if n == 0 {
                    break;
                }
                done += n;
            }
            buf.truncate(done);
            Ok(buf)
        })?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// Writes `data` (any contiguous buffer) at the position (at the end in append mode);
    /// the count written.
    fn write(&self, py: Python<'_>, data: PyBuffer<u8>) -> PyResult<usize> {
        let span = Span::of(&data, false)?;
        let n = self.with(py, move |f| {
            // SAFETY: `data` stays exported until this method returns, after this call.
            let src = unsafe { span.as_ref() };
            f.write(src)
        })?;
        drop(data);
        Ok(n)
    }

    /// Moves the position as `os.lseek` does (`whence` 0, 1 or 2); the new position.
    #[pyo3(signature = (offset, whence=0))]
    fn seek(&self, py: Python<'_>, offset: i64, whence: i32) -> PyResult<u64> {
        let to =
            match whence {
                0 => Whence::Start(u64::try_from(offset).map_err(|_| {
                    PyValueError::new_err(format!("negative seek position {offset}"))
                })?),
                1 => Whence::Current(offset),
                2 => Whence::End(offset),
                w => {
                    return Err(PyValueError::new_err(format!(
                        "whence {w} is not 0 (SEEK_SET), 1 (SEEK_CUR) or 2 (SEEK_END)"
                    )));
                }
            };
        self.with(py, |f| f.seek(to))
    }

    fn tell(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |f| Ok(f.tell()))
    }

    /// The file's size as this process sees it.
    fn size(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |f| f.len())
    }

    /// Makes this process's writes of `[offset, offset + length)` visible to every process
    /// (Wang, Mohror and Snir's attach); the whole file's when `length` is None.
    #[pyo3(signature = (offset=0, length=None))]
    fn attach(&self, py: Python<'_>, offset: u64, length: Option<u64>) -> PyResult<()> {
        self.with(py, |f| match length {
            Some(len) => f.attach(offset, len),
            None if offset == 0 => f.attach_file(),
            None => {
                let len = f.len()?.saturating_sub(offset);
                f.attach(offset, len)
            }
        })
    }

    /// Who holds the newest attached bytes of the range (the whole file when `length` is
    /// None): `(start, end, node, client)` extents, ascending.
    #[pyo3(signature = (offset=0, length=None))]
    fn query(
        &self,
        py: Python<'_>,
        offset: u64,
        length: Option<u64>,
    ) -> PyResult<Vec<(u64, u64, u32, u64)>> {
        let runs = self.with(py, |f| match length {
            Some(len) => f.query(offset, len),
            None if offset == 0 => f.query_file(),
            None => f.query(offset, u64::MAX - offset),
        })?;
        Ok(sorted_extents(&runs)
            .into_iter()
            .map(|e| (e.start, e.end, e.owner.node, e.owner.client))
            .collect())
    }

    /// Gives up this process's ownership of the range it attached (the whole file's when
    /// `length` is None); flush first to keep the bytes.
    #[pyo3(signature = (offset=0, length=None))]
    fn detach(&self, py: Python<'_>, offset: u64, length: Option<u64>) -> PyResult<()> {
        self.with(py, |f| match length {
            Some(len) => f.detach(offset, len),
            None if offset == 0 => f.detach_file(),
            None => f.detach(offset, u64::MAX - offset),
        })
    }

    /// Writes the range (the whole file when `length` is None) into the instance's PFS
    /// directory; the bytes written.
    #[pyo3(signature = (offset=0, length=None))]
    fn flush_to_pfs(&self, py: Python<'_>, offset: u64, length: Option<u64>) -> PyResult<u64> {
        self.with(py, |f| match length {
            Some(len) => f.flush(offset, len),
            None if offset == 0 => f.flush_file(),
            None => f.flush(offset, u64::MAX - offset),
        })
    }

    /// Publishes the writes and makes this process's logs of the file durable.
    fn fsync(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |f| f.fsync())
    }

    /// Publishes this process's writes to the file (what a close does) without closing it.
    fn commit(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |f| f.commit())
    }

    #[getter]
    fn closed(&self) -> bool {
        self.file
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_none()
    }

    /// Publishes the writes and closes; closing twice does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.allow_threads(|| {
            let file = self.file.lock().unwrap_or_else(|p| p.into_inner()).take();
            match file {
                Some(f) => f.close().map_err(to_py),
                None => Ok(()),
            }
        })
    }
}
