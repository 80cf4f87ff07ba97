//! How a transaction reaches Tessera: the file system side of its calls. The coordinator
//! opens the transaction at its daemon (the id every process then uses); at begin every
//! process names itself (its node and client id, once its writes are published), the
//! coordinator enrolls them all at once and each takes up the log id it was given (what it
//! publishes from then on is pending under the transaction); every process publishes before
//! it votes, the coordinator asks for the decision within the vote (or at an abort before
//! it), and every process leaves (its daemon learns it with the process's next request).
//!
//! Two ways in: [`Interposed`], the interposer's own connection, found in the process at run
//! time (a program whose files go through `LD_PRELOAD=libtessera_preload.so`); and [`Direct`],
//! a [`tessera_client::Client`] the program writes through itself.

use std::ffi::{CString, c_char, c_int};

/// A process as the coordinator enrolls it: its node and its client id there.
pub type Member = (u32, u64);

/// The file system calls of a transaction; `Err` carries the message to report.
pub trait FileSystem {
    /// Opens a transaction (at the coordinator): its id.
    fn open(&self) -> Result<u64, String>;
    /// Reserves `count` consecutive transaction ids (at the coordinator): the first. Each is
    /// opened when its members are enrolled.
    fn reserve(&self, count: u32) -> Result<u64, String>;
    /// Publishes this process's writes (before its vote).
    fn publish(&self) -> Result<(), String>;
    /// What this process is enrolled as, publishing its writes first.
    fn identity(&self) -> Result<Member, String>;
    /// Makes `members` members of `txn` (at the coordinator): each one's log id, in order.
    fn enroll(&self, txn: u64, members: &[Member]) -> Result<Vec<u64>, String>;
    /// Takes up membership of `txn` under `log`, as enrolled.
    fn enter(&self, txn: u64, log: u64) -> Result<(), String>;
    /// Leaves this process's transaction, publishing first; whether it `committed` (the
    /// logs of an aborted one are closed at once).
    fn leave(&self, committed: bool) -> Result<(), String>;
    /// Asks for the decision (at the coordinator).
    fn decide(&self, txn: u64, commit: bool, reasons: &[String]) -> Result<(), String>;
}

/// A program's own client.
pub struct Direct(pub tessera_client::Client);

impl FileSystem for Direct {
    fn open(&self) -> Result<u64, String> {
        self.0.txn_open().map_err(|e| e.to_string())
    }

    fn reserve(&self, count: u32) -> Result<u64, String> {
        self.0.txn_reserve(count).map_err(|e| e.to_string())
    }

    fn publish(&self) -> Result<(), String> {
        // A program on the client library publishes its files itself (close, sync, commit).
        Ok(())
    }

    fn identity(&self) -> Result<Member, String> {
        self.0.txn_identity().map_err(|e| e.to_string())
    }

    fn enroll(&self, txn: u64, members: &[Member]) -> Result<Vec<u64>, String> {
        self.0
            .txn_enroll(txn, members.to_vec())
            .map_err(|e| e.to_string())
    }

    fn enter(&self, txn: u64, log: u64) -> Result<(), String> {
        self.0.txn_enter(txn, log).map_err(|e| e.to_string())
    }

    fn leave(&self, committed: bool) -> Result<(), String> {
        self.0.txn_leave(committed).map_err(|e| e.to_string())
    }

    fn decide(&self, txn: u64, commit: bool, reasons: &[String]) -> Result<(), String> {
        self.0
            .txn_decide(txn, commit, reasons.to_vec())
            .map_err(|e| e.to_string())
    }
}

type OpenFn = unsafe extern "C" fn(*mut u64) -> c_int;
type ReserveFn = unsafe extern "C" fn(u32, *mut u64) -> c_int;
type PublishFn = extern "C" fn() -> c_int;
type IdentityFn = unsafe extern "C" fn(*mut u32, *mut u64) -> c_int;
type EnrollFn = unsafe extern "C" fn(u64, *const u32, *const u64, usize, *mut u64) -> c_int;
type EnterFn = extern "C" fn(u64, u64) -> c_int;
type LeaveFn = extern "C" fn(c_int) -> c_int;
type DecideFn = unsafe extern "C" fn(u64, c_int, *const c_char) -> c_int;
type ErrorFn = unsafe extern "C" fn(*mut c_char, usize) -> usize;

/// The interposer's transaction calls (`tessera_preload_txn_*`).
pub struct Interposed {
    open: OpenFn,
    reserve: ReserveFn,
    publish: PublishFn,
    identity: IdentityFn,
    enroll: EnrollFn,
    enter: EnterFn,
    leave: LeaveFn,
    decide: DecideFn,
    error: ErrorFn,
}

/// The address of `name` in the process, if some loaded library defines it.
fn symbol(name: &std::ffi::CStr) -> Option<*mut libc::c_void> {
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only looks the name up.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    (!p.is_null()).then_some(p)
}

impl Interposed {
    /// The interposer's calls, if it is loaded in this process.
    pub fn find() -> Option<Interposed> {
        let open = symbol(c"tessera_preload_txn_open")?;
        let reserve = symbol(c"tessera_preload_txn_reserve")?;
        let publish = symbol(c"tessera_preload_txn_publish")?;
        let identity = symbol(c"tessera_preload_txn_identity")?;
        let enroll = symbol(c"tessera_preload_txn_enroll")?;
        let enter = symbol(c"tessera_preload_txn_enter")?;
        let leave = symbol(c"tessera_preload_txn_leave")?;
        let decide = symbol(c"tessera_preload_txn_decide")?;
        let error = symbol(c"tessera_preload_txn_error")?;
        // SAFETY: the interposer defines these symbols with exactly these signatures
        // (`tessera_preload::txn`).
        unsafe {
            Some(Interposed {
                open: std::mem::transmute::<*mut libc::c_void, OpenFn>(open),
                reserve: std::mem::transmute::<*mut libc::c_void, ReserveFn>(reserve),
                publish: std::mem::transmute::<*mut libc::c_void, PublishFn>(publish),
                identity: std::mem::transmute::<*mut libc::c_void, IdentityFn>(identity),
                enroll: std::mem::transmute::<*mut libc::c_void, EnrollFn>(enroll),
                enter: std::mem::transmute::<*mut libc::c_void, EnterFn>(enter),
                leave: std::mem::transmute::<*mut libc::c_void, LeaveFn>(leave),
                decide: std::mem::transmute::<*mut libc::c_void, DecideFn>(decide),
                error: std::mem::transmute::<*mut libc::c_void, ErrorFn>(error),
            })
        }
    }

    /// The message of a failed call (`rc` < 0).
    fn failed(&self, rc: c_int) -> Result<(), String> {
        if rc == 0 {
            return Ok(());
        }
        let mut buf = vec![0u8; 1024];
        // SAFETY: `buf` holds `buf.len()` writable bytes.
        unsafe { (self.error)(buf.as_mut_ptr().cast(), buf.len()) };
        let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
        Err(String::from_utf8_lossy(&buf[..end]).into_owned())
    }
}

impl FileSystem for Interposed {
    fn open(&self) -> Result<u64, String> {
        let mut id = 0u64;
        // SAFETY: `id` is writable for one u64.
        let rc = unsafe { (self.open)(&mut id) };
        self.failed(rc).map(|()| id)
    }

    fn reserve(&self, count: u32) -> Result<u64, String> {
        let mut first = 0u64;
        // SAFETY: `first` is writable for one u64.
        let rc = unsafe { (self.reserve)(count, &mut first) };
        self.failed(rc).map(|()| first)
    }

    fn publish(&self) -> Result<(), String> {
        self.failed((self.publish)())
    }

    fn identity(&self) -> Result<Member, String> {
        let (mut node, mut client) = (0u32, 0u64);
        // SAFETY: both are writable for one value.
        let rc = unsafe { (self.identity)(&mut node, &mut client) };
        self.failed(rc).map(|()| (node, client))
    }

    fn enroll(&self, txn: u64, members: &[Member]) -> Result<Vec<u64>, String> {
        let nodes: Vec<u32> = members.iter().map(|m| m.0).collect();
        let clients: Vec<u64> = members.iter().map(|m| m.1).collect();
        let mut logs = vec![0u64; members.len()];
        // SAFETY: three buffers of `members.len()` values, the last writable.
        let rc = unsafe {
            (self.enroll)(
                txn,
                nodes.as_ptr(),
                clients.as_ptr(),
                members.len(),
                logs.as_mut_ptr(),
            )
        };
        self.failed(rc).map(|()| logs)
    }

    fn enter(&self, txn: u64, log: u64) -> Result<(), String> {
        self.failed((self.enter)(txn, log))
    }

    fn leave(&self, committed: bool) -> Result<(), String> {
        self.failed((self.leave)(c_int::from(committed)))
    }

    fn decide(&self, txn: u64, commit: bool, reasons: &[String]) -> Result<(), String> {
        let joined = CString::new(reasons.join("\n").replace('\0', " ")).expect("no NUL left");
        // SAFETY: a NUL-terminated string that outlives the call.
        let rc = unsafe { (self.decide)(txn, c_int::from(commit), joined.as_ptr()) };
        self.failed(rc)
    }
}
