//! Pooled buffers for the bytes a daemon reads from its logs for other nodes.
//!
//! A read piece is up to 2 MiB, and several are in flight at once; a fresh buffer for each
//! had the kernel fault in (and zero) every page of it again: a tenth of a daemon's CPU in
//! the rank-shifted checkpoint read across hosts. A buffer handed out here goes back to the
//! pool when the last [`Bytes`] of it is dropped (after the answer is written to the socket),
//! with its pages still mapped.

use bytes::Bytes;
use std::sync::{Arc, Mutex};

/// Buffers kept for reuse: enough for the pieces of several large reads in flight.
const KEEP: usize = 32;
/// Buffers larger than this are not kept (a read is at most 16 MiB; pieces are 2 MiB).
const LARGEST_KEPT: usize = 4 << 20;

/// Free buffers, shared by every reader of a daemon.
#[derive(Default)]
pub struct BufferPool {
    free: Mutex<Vec<Vec<u8>>>,
}

/// A buffer on loan from a pool; goes back when dropped.
struct Loan {
    buf: Vec<u8>,
    pool: Arc<BufferPool>,
}

impl AsRef<[u8]> for Loan {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Loan {
    fn drop(&mut self) {
        let buf = std::mem::take(&mut self.buf);
        if buf.capacity() <= LARGEST_KEPT {
            let mut free = self.pool.free.lock().expect("buffer pool");
            if free.len() < KEEP {
                free.push(buf);
            }
        }
    }
}

impl BufferPool {
    /// A buffer of `len` bytes (their values are whatever the buffer last held, or zeros),
    /// filled by `fill`, then frozen into `Bytes` that return it to the pool when dropped.
    pub fn filled<E>(
        self: &Arc<Self>,
        len: usize,
        fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
    ) -> Result<Bytes, E> {
        let mut buf = self
            .free
            .lock()
            .expect("buffer pool")
            .pop()
            .unwrap_or_default();
        // Growing zeroes only the new part; shrinking keeps the capacity (and its pages).
        buf.resize(len, 0);
        let mut loan = Loan {
            buf,
            pool: self.clone(),
        };
        // On failure the loan drops here and the buffer goes back.
        fill(&mut loan.buf)?;
        Ok(Bytes::from_owner(loan))
    }

    /// Buffers waiting for reuse.
    pub fn idle(&self) -> usize {
        self.free.lock().expect("buffer pool").len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_comes_back_when_its_last_bytes_go_and_keeps_its_memory() {
        let pool = Arc::new(BufferPool::default());
        let a = pool
            .filled(1 << 20, |b| {
                b.fill(7);
                Ok::<(), ()>(())
            })
            .unwrap();
        let ptr = a.as_ptr();
        let slice = a.slice(10..20);
        drop(a);
        assert_eq!(pool.idle(), 0, "returned while a slice of it lives");
        assert_eq!(&slice[..], &[7u8; 10]);
        drop(slice);
        assert_eq!(pool.idle(), 1);
        // The next loan reuses it: same memory, the new length, filled by the new reader.
        let b = pool
            .filled(4096, |b| {
                b.fill(9);
                Ok::<(), ()>(())
            })
            .unwrap();
        assert_eq!(b.as_ptr(), ptr);
        assert_eq!(b.len(), 4096);
        assert!(b.iter().all(|&x| x == 9));
        // A failed fill returns the buffer too.
        drop(b);
        assert!(pool.filled(10, |_| Err::<(), _>("no")).is_err());
        assert_eq!(pool.idle(), 1);
        // Too large to keep.
        drop(pool.filled(LARGEST_KEPT + 1, |_| Ok::<(), ()>(())).unwrap());
        assert_eq!(
            pool.idle(),
            0,
            "the pooled buffer was taken, the large one not kept"
        );
    }
}
