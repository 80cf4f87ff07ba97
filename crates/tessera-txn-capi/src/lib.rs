//! `libtessera_txn.so`: the C API of Tessera's MxN transactions, declared and documented in
//! `include/tessera_txn.h`.
//!
//! Each function is a thin, checked layer over `tessera_txn`: it validates the pointers it is
//! given, maps the result to the header's codes, and keeps the failure's message for
//! `tessera_txn_errmsg`. A panic never crosses into C: it becomes `TESSERA_TXN_EINTERNAL` with
//! a message. Handles are boxed `Transactions` and `Transaction`; a NULL handle or pointer is
//! `TESSERA_TXN_EINVAL`.

#![deny(clippy::undocumented_unsafe_blocks)]

use mpi::ffi::MPI_Comm;
use std::ffi::{c_char, c_int};
use tessera_txn::{CollectiveCall, Decision, SubId, Transaction, Transactions, TxnError};

const OK: c_int = 0;
const EINVAL: c_int = -1;
const EORDER: c_int = -2;
const EABORTED: c_int = -3;
const EDISAGREE: c_int = -4;
const ESUB: c_int = -5;
const EINTERNAL: c_int = -6;

/// `tessera_txn_lib`.
pub struct CLib(Transactions);

/// `tessera_txn`.
pub struct CTxn(Transaction);

/// `tessera_txn_sub`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CSub {
    pub owner: i32,
    pub seq: u32,
}

impl From<SubId> for CSub {
    fn from(s: SubId) -> CSub {
        CSub {
            owner: s.owner.map_or(-1, |r| r as i32),
            seq: s.seq,
        }
    }
}

/// A sub-transaction from C: an owner of -1 is global, another negative owner is invalid.
fn sub_id(s: CSub, func: &str) -> Result<SubId, Failure> {
    let owner = match s.owner {
        -1 => None,
        r if r >= 0 => Some(r as u32),
        r => {
            return Err(Failure(
                EINVAL,
                format!("{func}: owner {r} is neither a rank nor -1 (global)"),
            ));
        }
    };
    Ok(SubId { owner, seq: s.seq })
}

/// A bad argument of a collective call, as the error every process gets: the others learn it
/// through the call, instead of waiting for this process.
fn refused(t: &mut Transaction, which: CollectiveCall, f: Failure) -> Failure {
    Failure::from(t.refuse(which, TxnError::Invalid(f.1)))
}

/// A failure: its code and its message.
struct Failure(c_int, String);

impl From<TxnError> for Failure {
    fn from(e: TxnError) -> Failure {
        let code = match &e {
            TxnError::Order { .. } => EORDER,
            TxnError::Aborted(_) => EABORTED,
            TxnError::Disagree { .. } => EDISAGREE,
            TxnError::Sub(_) => ESUB,
            TxnError::Invalid(_) => EINVAL,
        };
        Failure(code, e.to_string())
    }
}

fn invalid(func: &str, what: &str) -> Failure {
    Failure(EINVAL, format!("{func}: {what} is NULL"))
}

/// Runs `f`, turning a failure (or a panic) into its code and message.
fn guard(f: impl FnOnce() -> Result<(), Failure>) -> c_int {
    let outcome = tessera_cabi::catch_panic("libtessera_txn", f)
        .unwrap_or_else(|msg| Err(Failure(EINTERNAL, msg)));
    match outcome {
        Ok(()) => OK,
        Err(Failure(code, msg)) => {
            tessera_cabi::set_message(&msg);
            code
        }
    }
}

/// A C string argument (a variable's name), as UTF-8; NULL or bytes that are not UTF-8 are
/// `TESSERA_TXN_EINVAL`.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that stays unchanged for `'a`.
unsafe fn text<'a>(p: *const c_char, func: &str) -> Result<&'a str, Failure> {
    // SAFETY: `p` is NULL or NUL-terminated and unchanged for `'a` by this fn's contract, the same
    // requirement `c_text` makes of it; the `&'a str` it returns borrows that string.
    unsafe { tessera_cabi::c_text(p, func, "name") }.map_err(|e| Failure(EINVAL, e.message))
}

/// The transaction behind a handle.
///
/// # Safety
/// `t` is NULL or a handle from `tessera_txn_create_transaction` not yet finalized, used by
/// one thread at a time.
unsafe fn txn<'a>(t: *mut CTxn, func: &str) -> Result<&'a mut Transaction, Failure> {
    // SAFETY: by this function's contract the pointer is NULL or a live, unaliased handle.
    unsafe { t.as_mut() }
        .map(|c| &mut c.0)
        .ok_or_else(|| invalid(func, "the transaction"))
}

/// Writes `v` through an out-pointer.
///
/// # Safety
/// `out` is NULL or aligned and writable for a `T` (its old contents are not read or
/// dropped).
unsafe fn put<T>(out: *mut T, v: T, func: &str, what: &str) -> Result<(), Failure> {
    if out.is_null() {
        return Err(invalid(func, what));
    }
    // SAFETY: non-null, aligned and writable by this function's contract.
    unsafe { out.write(v) };
    Ok(())
}

/// See `tessera_txn.h`.
#[unsafe(no_mangle)]
pub extern "C" fn tessera_txn_errmsg() -> *const c_char {
    tessera_cabi::message()
}

/// See `tessera_txn.h`.
///
/// # Safety
/// `comm` is a live intra-communicator of the Open MPI this library is built against, after
/// MPI_Init; `lib` is NULL or valid for a write of a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_txn_init(comm: MPI_Comm, lib: *mut *mut CLib) -> c_int {
    guard(|| {
        // SAFETY: `comm` is live by this function's contract.
        let owned = unsafe { tessera_txn::duplicate_raw(comm) }.map_err(|rc| {
            Failure(
                EINVAL,
                format!(
                    "tessera_txn_init: MPI_Comm_dup of the communicator failed ({rc}); pass a live intra-communicator after MPI_Init"
                ),
            )
        })?;
        // Collective: made even when `lib` is NULL, so the other processes do not wait.
        let t = Transactions::with_communicator(owned)?;
        if lib.is_null() {
            return Err(invalid("tessera_txn_init", "lib"));
        }
        // SAFETY: checked non-null above; writable by this function's contract.
        unsafe { lib.write(Box::into_raw(Box::new(CLib(t)))) };
        Ok(())
    })
}

/// See `tessera_txn.h`. Returns -1 for a NULL handle.
///
/// # Safety
/// `lib` is NULL or a live handle from `tessera_txn_init`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_txn_rank(lib: *const CLib) -> c_int {
    // SAFETY: NULL or live by this function's contract.
    unsafe { lib.as_ref() }.map_or(-1, |l| l.0.rank() as c_int)
}

/// See `tessera_txn.h`. Returns -1 for a NULL handle.
///
/// # Safety
/// `lib` is NULL or a live handle from `tessera_txn_init`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_txn_sub_coordinators(lib: *const CLib) -> c_int {
    // SAFETY: NULL or live by this function's contract.
    unsafe { lib.as_ref() }.map_or(-1, |l| l.0.tiers().groups() as c_int)
}

/// See `tessera_txn.h`.
///
/// # Safety
/// `lib` is NULL or a live handle from `tessera_txn_init`; `out` is NULL or valid for a write
/// of a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_txn_create_transaction(
    lib: *mut CLib,
    out: *mut *mut CTxn,
) -> c_int {
    guard(|| {
        const F: &str = "tessera_txn_create_transaction";
        // SAFETY: NULL or live by this function's contract.
        let lib = unsafe { lib.as_ref() }.ok_or_else(|| invalid(F, "lib"))?;
        if out.is_null() {
            let f = invalid(F, "txn");
            return Err(Failure::from(lib.0.refuse_create(TxnError::Invalid(f.1))));
        }
        let t = lib.0.create_transaction()?;
        // SAFETY: `out` checked non-null, writable by this function's contract.
        unsafe { put(out, Box::into_raw(Box::new(CTxn(t))), F, "txn") }
    })
}

/// See `tessera_txn.h`. Returns 0 for a NULL handle.
///
/// # Safety
/// `t` is NULL or a live transaction handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_txn_id(t: *const CTxn) -> u64 {
    // SAFETY: NULL or live by this function's contract.
    unsafe { t.as_ref() }.map_or(0, |t| t.0.id())
}

/// See `tessera_txn.h`.
///
/// # Safety
/// `t` is NULL or a live transaction handle; `name` NULL or a NUL-terminated string; `sub`
/// NULL or valid for a write of a `tessera_txn_sub`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_txn_create_sub_transaction(
    t: *mut CTxn,
    name: *const c_char,
    sub: *mut CSub,
) -> c_int {
    guard(|| {
        const F: &str = "tessera_txn_create_sub_transaction";
        // SAFETY: each pointer is as this function's contract states.
        unsafe {
            let t = txn(t, F)?;
            let name = text(name, F)?;
            if sub.is_null() {
                return Err(invalid(F, "sub"));
            }
            let id = t.create_sub_transaction(name)?;
            put(sub, id.into(), F, "sub")
        }
    })
}

/// See `tessera_txn.h`.
///
/// # Safety
/// As `tessera_txn_create_sub_transaction`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_txn_create_sub_transaction_all(
    t: *mut CTxn,
    name: *const c_char,
    sub: *mut CSub,
) -> c_int {
    guard(|| {
        const F: &str = "tessera_txn_create_sub_transaction_all";
        const CALL: CollectiveCall = CollectiveCall::CreateSubTransactionAll;
        // SAFETY: each pointer is as this function's contract states.
        unsafe {
            let t = txn(t, F)?;
            let name = match text(name, F) {
                Ok(n) => n,
                Err(f) => return Err(refused(t, CALL, f)),
            };
            if sub.is_null() {
                return Err(refused(t, CALL, invalid(F, "sub")));
            }
            let id = t.create_sub_transaction_all(name)?;
            put(sub, id.into(), F, "sub")
        }
    })
}

/// See `tessera_txn.h`.
///
/// # Safety
/// `t` is NULL or a live transaction handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_txn_begin_transaction(t: *mut CTxn) -> c_int {
    guard(|| {
        // SAFETY: as this function's contract states.
        let t = unsafe { txn(t, "tessera_txn_begin_transaction") }?;
        Ok(t.begin_transaction()?)
    })
}

/// See `tessera_txn.h`. Returns -1 for a NULL handle.
///
/// # Safety
/// `t` is NULL or a live transaction handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_txn_sub_transactions(t: *const CTxn) -> c_int {
    // SAFETY: NULL or live by this function's contract.
    unsafe { t.as_ref() }.map_or(-1, |t| t.0.sub_transactions().len() as c_int)
}

/// See `tessera_txn.h`.
///
/// # Safety
/// `t` is NULL or a live transaction handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_txn_commit_sub_transaction(t: *mut CTxn, sub: CSub) -> c_int {
    guard(|| {
        const F: &str = "tessera_txn_commit_sub_transaction";
        // SAFETY: as this function's contract states.
        let t = unsafe { txn(t, F) }?;
        Ok(t.commit_sub_transaction(sub_id(sub, F)?)?)
    })
}

/// See `tessera_txn.h`.
///
/// # Safety
/// `t` is NULL or a live transaction handle; `commit` NULL or valid for a write of an int.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_txn_vote_transaction(
    t: *mut CTxn,
    ok: c_int,
    commit: *mut c_int,
) -> c_int {
    guard(|| {
        const F: &str = "tessera_txn_vote_transaction";
        // SAFETY: each pointer is as this function's contract states.
        unsafe {
            let t = txn(t, F)?;
            if commit.is_null() {
                return Err(refused(t, CollectiveCall::Vote, invalid(F, "commit")));
            }
            let decision = t.vote_transaction(ok != 0)?;
            if let Decision::Abort(reasons) = &decision {
                tessera_cabi::set_message(&format!("voted to abort: {}", reasons.join("; ")));
            }
            put(
                commit,
                c_int::from(decision == Decision::Commit),
                F,
                "commit",
            )
        }
    })
}

/// See `tessera_txn.h`.
///
/// # Safety
/// `t` is NULL or a live transaction handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_txn_commit_transaction(t: *mut CTxn) -> c_int {
    guard(|| {
        // SAFETY: as this function's contract states.
        let t = unsafe { txn(t, "tessera_txn_commit_transaction") }?;
        Ok(t.commit_transaction()?)
    })
}

/// See `tessera_txn.h`.
///
/// # Safety
/// `t` is NULL or a live transaction handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_txn_abort_transaction(t: *mut CTxn) -> c_int {
    guard(|| {
        // SAFETY: as this function's contract states.
        let t = unsafe { txn(t, "tessera_txn_abort_transaction") }?;
        Ok(t.abort_transaction()?)
    })
}

/// See `tessera_txn.h`.
///
/// # Safety
/// `t` is NULL or a handle from `tessera_txn_create_transaction` not yet finalized; it is not
/// used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_txn_finalize_txn(t: *mut CTxn) -> c_int {
    guard(|| {
        if !t.is_null() {
            // SAFETY: a live handle made by Box::into_raw, given back once.
            drop(unsafe { Box::from_raw(t) });
        }
        Ok(())
    })
}

/// See `tessera_txn.h`.
///
/// # Safety
/// `lib` is NULL or a handle from `tessera_txn_init` not yet finalized; it is not used
/// afterwards; MPI is not yet finalized.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_txn_finalize(lib: *mut CLib) -> c_int {
    guard(|| {
        if !lib.is_null() {
            // SAFETY: a live handle made by Box::into_raw, given back once.
            drop(unsafe { Box::from_raw(lib) });
        }
        Ok(())
    })
}
