//! A Python buffer's bytes carried into code that runs with the interpreter's lock released
//! (the buffer protocol's in-place reads and writes).

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

/// Bytes of a Python buffer, held exported by the caller (so neither moved nor freed) while
/// the interpreter's lock is released.
pub(crate) struct Span {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: a Span only carries the address of a buffer that its `PyBuffer` keeps exported for
// the whole call it is used in; no other Rust code touches that memory meanwhile.
unsafe impl Send for Span {}

impl Span {
    /// The bytes of `buf`, which must be C-contiguous (checked); writable ones if `write`.
    pub(crate) fn of(buf: &PyBuffer<u8>, write: bool) -> PyResult<Span> {
        if write && buf.readonly() {
            return Err(PyTypeError::new_err(
                "reading needs a writable buffer (a bytearray, memoryview or NumPy array), not a read-only one",
            ));
        }
        if !buf.is_c_contiguous() {
            return Err(PyValueError::new_err(
                "the buffer is not contiguous: pass a contiguous array or a bytearray",
            ));
        }
        Ok(Span {
            ptr: buf.buf_ptr().cast::<u8>(),
            len: buf.len_bytes(),
        })
    }

    /// # Safety
    /// The buffer `self` was made from is still exported, and nothing else reads or writes
    /// it while the slice lives.
    pub(crate) unsafe fn as_mut(&mut self) -> &mut [u8] {
        if self.len == 0 {
            return &mut [];
        }
        // SAFETY: ptr and len describe one contiguous, writable, live allocation (Span::of
        // and the caller's contract).
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    /// # Safety
    /// As [`Span::as_mut`], for reading.
    pub(crate) unsafe fn as_ref(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: ptr and len describe one contiguous, live allocation (Span::of and the
        // caller's contract).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}
