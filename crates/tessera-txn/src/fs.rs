//! How a transaction reaches Tessera: the file system side of its calls. The coordinator
//! opens the transaction at its daemon (the id every process then uses), every process joins
//! it at begin (what it publishes from then on is pending under it), publishes before it
//! votes, the coordinator asks for the decision at commit or abort, and every process leaves.
//!
//! Two ways in: [`Interposed`], the interposer's own connection, found in the process at run
//! time (a program whose files go through `LD_PRELOAD=libtessera_preload.so`); and [`Direct`],
//! a [`tessera_client::Client`] the program writes through itself.

use std::ffi::{CString, c_char, c_int};

/// The file system calls of a transaction; `Err` carries the message to report.
pub trait FileSystem {
    /// Opens a transaction (at the coordinator): its id.
    fn open(&self) -> Result<u64, String>;
    /// Publishes this process's writes (before its vote).
    fn publish(&self) -> Result<(), String>;
    /// Joins `txn` (`None`: leaves), publishing first.
    fn join(&self, txn: Option<u64>) -> Result<(), String>;
    /// Asks for the decision (at the coordinator).
    fn decide(&self, txn: u64, commit: bool, reasons: &[String]) -> Result<(), String>;
}

/// A program's own client.
pub struct Direct(pub tessera_client::Client);

impl FileSystem for Direct {
    fn open(&self) -> Result<u64, String> {
        self.0.txn_open().map_err(|e| e.to_string())
    }

    fn publish(&self) -> Result<(), String> {
        // A program on the client library publishes its files itself (close, sync, commit).
        Ok(())
    }

    fn join(&self, txn: Option<u64>) -> Result<(), String> {
        self.0.txn_join(txn).map_err(|e| e.to_string())
    }

    fn decide(&self, txn: u64, commit: bool, reasons: &[String]) -> Result<(), String> {
        self.0
            .txn_decide(txn, commit, reasons.to_vec())
            .map_err(|e| e.to_string())
    }
}

type OpenFn = unsafe extern "C" fn(*mut u64) -> c_int;
type PublishFn = extern "C" fn() -> c_int;
type JoinFn = extern "C" fn(u64, c_int) -> c_int;
type DecideFn = unsafe extern "C" fn(u64, c_int, *const c_char) -> c_int;
type ErrorFn = unsafe extern "C" fn(*mut c_char, usize) -> usize;

/// The interposer's transaction calls (`tessera_preload_txn_*`).
pub struct Interposed {
    open: OpenFn,
    publish: PublishFn,
    join: JoinFn,
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
        let publish = symbol(c"tessera_preload_txn_publish")?;
        let join = symbol(c"tessera_preload_txn_join")?;
        let decide = symbol(c"tessera_preload_txn_decide")?;
        let error = symbol(c"tessera_preload_txn_error")?;
        // SAFETY: the interposer defines these symbols with exactly these signatures
        // (`tessera_preload::txn`).
        unsafe {
            Some(Interposed {
                open: std::mem::transmute::<*mut libc::c_void, OpenFn>(open),
                publish: std::mem::transmute::<*mut libc::c_void, PublishFn>(publish),
                join: std::mem::transmute::<*mut libc::c_void, JoinFn>(join),
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

    fn publish(&self) -> Result<(), String> {
        self.failed((self.publish)())
    }

    fn join(&self, txn: Option<u64>) -> Result<(), String> {
        self.failed((self.join)(txn.unwrap_or(0), c_int::from(txn.is_some())))
    }

    fn decide(&self, txn: u64, commit: bool, reasons: &[String]) -> Result<(), String> {
        let joined = CString::new(reasons.join("\n").replace('\0', " ")).expect("no NUL left");
        // SAFETY: a NUL-terminated string that outlives the call.
        let rc = unsafe { (self.decide)(txn, c_int::from(commit), joined.as_ptr()) };
        self.failed(rc)
    }
}
