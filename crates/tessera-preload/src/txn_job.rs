//! `TESSERA_TXN=job`: an unmodified MPI program's whole run is one transaction (D2T).
//!
//! `MPI_Init` (or `MPI_Init_thread`) opens it at rank 0's daemon and every rank joins it, so
//! everything the ranks publish under the prefix is pending from then on. `MPI_Finalize`
//! publishes every open Tessera file, votes (every rank must have published: an
//! allreduce), and rank 0 asks for the decision and broadcasts it; the ranks leave it before
//! MPI ends. A run that crashes or is killed never votes: its daemons drop what it published
//! once its processes are gone (`txn_timeout_ms` after the last). MPI is reached through the
//! PMPI entry points of whichever MPI the program loaded, handles as machine words (see
//! [`crate::mpiio`]).
//!
//! Both names of each call are wrapped: `MPI_Init` for C programs, `PMPI_Init` for Fortran's
//! (Open MPI's `mpi_init_` and the `mpi_f08` module's `MPI_Init` call `PMPI_Init` directly)
//! and for programs whose own profiling layer wraps `MPI_Init`. A call that passes through
//! both begins the transaction once, and ends it once.

use crate::mpiio::open_mpi;
use crate::state::{self, Busy};
use libc::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

type Handle = usize;

/// The job's transaction (0: none).
static JOB: AtomicU64 = AtomicU64::new(0);

/// Whether an init entry point has begun the job's transaction (or found it could not): the
/// others do nothing.
static BEGUN: AtomicBool = AtomicBool::new(false);

/// After an init entry point returned `rc`: begins the job's transaction, once.
fn after_init(rc: c_int) {
    if rc == 0 && job_mode() && !BEGUN.swap(true, Ordering::Relaxed) {
        crate::guarded(begin);
    }
}

/// Whether the run is to be one transaction.
fn job_mode() -> bool {
    std::env::var("TESSERA_TXN").is_ok_and(|v| v == "job")
}

/// The handles this module uses: `MPI_COMM_WORLD`, `MPI_BYTE`, `MPI_INT`, `MPI_MIN`.
struct Handles {
    world: Handle,
    byte: Handle,
    int: Handle,
    min: Handle,
}

/// Open MPI's handles are the addresses of its predefined objects; MPICH's are constants of
/// its `mpi.h`.
fn handles() -> Option<Handles> {
    if !open_mpi() {
        return Some(Handles {
            world: 0x4400_0000,
            byte: 0x4c00_010d,
            int: 0x4c00_0405,
            min: 0x5800_0002,
        });
    }
    let addr = crate::loaded::anywhere;
    Some(Handles {
        world: addr(c"ompi_mpi_comm_world")?,
        byte: addr(c"ompi_mpi_byte")?,
        int: addr(c"ompi_mpi_int")?,
        min: addr(c"ompi_mpi_op_min")?,
    })
}

fn rank(h: &Handles) -> c_int {
    let f = next!(PMPI_Comm_rank: fn(Handle, *mut c_int) -> c_int);
    let mut r = 0;
    // SAFETY: the world communicator and a place for the rank.
    unsafe { f(h.world, &mut r) };
    r
}

/// Broadcasts `len` bytes at `buf` from rank 0.
fn bcast(h: &Handles, buf: *mut c_void, len: c_int) {
    let f = next!(PMPI_Bcast: fn(*mut c_void, c_int, Handle, c_int, Handle) -> c_int);
    // SAFETY: `len` bytes at `buf`, the byte type, the world communicator.
    unsafe { f(buf, len, h.byte, 0, h.world) };
}

/// The least of every rank's `v`.
fn all_min(h: &Handles, v: c_int) -> c_int {
    let f = next!(PMPI_Allreduce: fn(*const c_void, *mut c_void, c_int, Handle, Handle, Handle) -> c_int);
    let mut out: c_int = 0;
    // SAFETY: one int in, one int out, MPI_INT, MPI_MIN, the world communicator.
    unsafe {
        f(
            (&v as *const c_int).cast(),
            (&mut out as *mut c_int).cast(),
            1,
            h.int,
            h.min,
            h.world,
        )
    };
    out
}

/// After MPI is up: rank 0 opens the transaction, every rank joins it (all or none).
fn begin() {
    let _b = Busy::enter();
    let Some(h) = handles() else {
        eprintln!(
            "tessera: TESSERA_TXN=job: this MPI's predefined handles were not found; the run is not a transaction"
        );
        return;
    };
    let me = rank(&h);
    let mut id: u64 = 0;
    if me == 0 {
        match state::client().and_then(|c| c.txn_open()) {
            Ok(t) => id = t,
            Err(e) => {
                eprintln!("tessera: TESSERA_TXN=job: opening the job's transaction failed: {e}")
            }
        }
    }
    bcast(&h, (&mut id as *mut u64).cast(), 8);
    if id == 0 {
        return;
    }
    let joined = match state::client().and_then(|c| c.txn_join(Some(id))) {
        Ok(()) => 1,
        Err(e) => {
            eprintln!(
                "tessera: TESSERA_TXN=job: rank {me} could not join the job's transaction: {e}"
            );
            0
        }
    };
    if all_min(&h, joined) == 0 {
        // One rank outside would publish as it goes: nobody is in, and rank 0 drops it.
        let _ = state::client().and_then(|c| c.txn_join(None));
        if me == 0 {
            let _ = state::client().and_then(|c| {
                c.txn_decide(
                    id,
                    false,
                    vec!["a rank could not join the job's transaction".into()],
                )
            });
            eprintln!(
                "tessera: TESSERA_TXN=job: the run is not a transaction (a rank could not join)"
            );
        }
        return;
    }
    JOB.store(id, Ordering::Relaxed);
}

/// Before MPI ends: publish, vote, decide at rank 0, broadcast, leave.
fn end() {
    let id = JOB.swap(0, Ordering::Relaxed);
    if id == 0 {
        return;
    }
    let Some(h) = handles() else { return };
    let _b = Busy::enter();
    let me = rank(&h);
    let published = match crate::exit::publish_open_files_or_fail() {
        Ok(()) => 1,
        Err(e) => {
            eprintln!("tessera: TESSERA_TXN=job: rank {me} could not publish its writes: {e}");
            0
        }
    };
    let commit = all_min(&h, published) == 1;
    let mut committed: c_int = 0;
    if me == 0 {
        let reasons = if commit {
            Vec::new()
        } else {
            vec!["a rank could not publish its writes".into()]
        };
        match state::client().and_then(|c| c.txn_decide(id, commit, reasons)) {
            Ok(()) => committed = c_int::from(commit),
            Err(e) => eprintln!(
                "tessera: TESSERA_TXN=job: the job's transaction {id:016x} did not commit: {e}"
            ),
        }
        if !commit {
            eprintln!(
                "tessera: TESSERA_TXN=job: the job's transaction {id:016x} was aborted: nothing it wrote is visible"
            );
        }
    }
    bcast(&h, (&mut committed as *mut c_int).cast(), 4);
    let _ = state::client().and_then(|c| c.txn_join(None));
}

/// Defines the MPI_ and PMPI_ names of an entry point: `$before` runs before the call is
/// forwarded, `$after` with its return code.
macro_rules! both_names {
    ($name:ident, $pname:ident, ($($arg:ident : $ty:ty),*), $before:expr, $after:expr, $doc:literal) => {
        both_names!(@one $name, ($($arg: $ty),*), $before, $after, $doc);
        both_names!(@one $pname, ($($arg: $ty),*), $before, $after, $doc);
    };
    (@one $sym:ident, ($($arg:ident : $ty:ty),*), $before:expr, $after:expr, $doc:literal) => {
        #[doc = concat!("`", stringify!($sym), "`: ", $doc)]
        ///
        /// # Safety
        /// As the MPI function.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $sym($($arg: $ty),*) -> c_int {
            $before();
            let f = next!($sym: fn($($ty),*) -> c_int);
            // SAFETY: forwarding the caller's arguments.
            let rc = unsafe { f($($arg),*) };
            $after(rc);
            rc
        }
    };
}

both_names!(MPI_Init, PMPI_Init, (argc: *mut c_int, argv: *mut *mut *mut c_char),
    || {}, after_init,
    "then the job's transaction begins under `TESSERA_TXN=job`.");
both_names!(MPI_Init_thread, PMPI_Init_thread,
    (argc: *mut c_int, argv: *mut *mut *mut c_char, required: c_int, provided: *mut c_int),
    || {}, after_init,
    "then the job's transaction begins under `TESSERA_TXN=job`.");
both_names!(
    MPI_Finalize,
    PMPI_Finalize,
    (),
    || crate::guarded(end),
    |_| {},
    "the job's transaction ends first (vote and decision; once: `end` takes it)."
);
