//! The atomic MPI-IO access a thread is running under a list lock (see `mpiio`): while it
//! runs, the record locks ROMIO takes over the access's extent are answered without locking
//! (they would serialise the ranks again; the list lock covers every byte the access
//! touches), and the thread's writes to Tessera files are clipped to the access's bytes.
//!
//! The clipping is what makes ROMIO's data sieving safe under list locks: a sieving write
//! reads the access's whole extent, fills in the access's bytes and writes the extent back,
//! holes included. The holes belong to other ranks, which may be writing them under their
//! own list locks at that moment; written back, they would carry stale bytes over those
//! writes. Dropping the hole bytes leaves exactly the write the program asked for.

use std::cell::RefCell;
use tessera_core::Run;

/// The running access: `Some(runs)` clips writes to them, `None` (bytes unknown) does not.
struct Scope {
    runs: Option<Vec<Run>>,
}

thread_local! {
    static SCOPE: RefCell<Option<Scope>> = const { RefCell::new(None) };
}

/// Runs `f` as the atomic access covering `runs` (see the module docs).
pub(crate) fn within<T>(runs: Option<Vec<Run>>, f: impl FnOnce() -> T) -> T {
    struct Reset(Option<Scope>);
    impl Drop for Reset {
        fn drop(&mut self) {
            let prev = self.0.take();
            SCOPE.with(|s| *s.borrow_mut() = prev);
        }
    }
    let prev = SCOPE.with(|s| s.borrow_mut().replace(Scope { runs }));
    let _reset = Reset(prev);
    f()
}

/// Whether this thread's record-lock requests are answered without locking.
pub(crate) fn record_locks_elided() -> bool {
    SCOPE.with(|s| s.borrow().is_some())
}

/// The parts of a write of `len` bytes at `off` that this thread may make, as `[start, end)`
/// ranges in order; `None` outside an access that clips (write everything).
pub(crate) fn clip_write(off: u64, len: u64) -> Option<Vec<(u64, u64)>> {
    SCOPE.with(|s| {
        let s = s.borrow();
        let runs = s.as_ref()?.runs.as_ref()?;
        let end = off.saturating_add(len);
        let mut parts: Vec<(u64, u64)> = runs
            .iter()
            .flat_map(|r| r.clip(off, end))
            .flat_map(|r| r.pieces().collect::<Vec<_>>())
            .collect();
        parts.sort_unstable();
        Some(parts)
    })
}
