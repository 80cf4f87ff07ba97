//! The C boundary, written once for the three libraries C programs call into: `libtessera`
//! (tessera-capi), `libtessera_txn` (tessera-txn-capi) and the interposer (tessera-preload).
//!
//! * errno: [`set_errno`], [`errno`];
//! * the thread's last message, which a C caller reads back after a failure
//!   (`tessera_errmsg`): [`set_message`], [`message`];
//! * the panic guard, so that no panic unwinds into a C caller: [`catch_panic`], and
//!   [`guard`], which also turns an error into errno, the message and the call's failure value;
//! * the checks of what C passes in: a NULL pointer is `EFAULT`, as the kernel answers
//!   ([`null_argument`]); C strings ([`c_bytes`], [`c_text`]); result pointers ([`out_ref`]).

use std::cell::RefCell;
use std::ffi::{CStr, CString, c_char, c_int};
use tessera_core::{Errno, FsError, FsResult};

/// Sets the calling thread's `errno`.
pub fn set_errno(code: c_int) {
    // SAFETY: `__errno_location` returns the address of the calling thread's errno, valid
    // for as long as the thread lives; no other thread reads or writes it.
    unsafe { *libc::__errno_location() = code };
}

/// The calling thread's `errno`.
pub fn errno() -> c_int {
    // SAFETY: as in `set_errno`: the calling thread's own errno, live while the thread is.
    unsafe { *libc::__errno_location() }
}

thread_local! {
    static LAST_MESSAGE: RefCell<CString> = RefCell::new(CString::default());
}

/// Records `msg` as the calling thread's last message (a NUL in it becomes a space).
pub fn set_message(msg: &str) {
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    LAST_MESSAGE.with(|l| *l.borrow_mut() = c);
}

/// The calling thread's last message, NUL-terminated: valid until the thread records
/// another (its next failing call) or ends.
pub fn message() -> *const c_char {
    LAST_MESSAGE.with(|l| l.borrow().as_ptr())
}

/// Runs `f`; a panic in it becomes `Err` with the message that `component` met an internal
/// error and what the panic said, instead of unwinding into the C caller.
pub fn catch_panic<T>(component: &str, f: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|p| {
        let what = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown".into());
        format!("internal error in {component}: {what}; please report it")
    })
}

/// [`catch_panic`] for a call that fails with an [`FsError`]: a panic is `EIO`.
pub fn catch_fs_panic<T>(component: &str, f: impl FnOnce() -> FsResult<T>) -> FsResult<T> {
    catch_panic(component, f).unwrap_or_else(|msg| Err(FsError::new(Errno::Io, msg)))
}

/// Records a failure: `errno` and the message (`"reason (ENAME)"`).
pub fn set_error(e: &FsError) {
    set_message(&format!("{} ({})", e.message, e.errno.name()));
    set_errno(e.code());
}

/// Runs the body of an entry point of `component`: its value, or, when it fails or panics,
/// `on_err` with `errno` and the message set.
pub fn guard<T>(component: &str, on_err: T, f: impl FnOnce() -> FsResult<T>) -> T {
    match catch_fs_panic(component, f) {
        Ok(v) => v,
        Err(e) => {
            set_error(&e);
            on_err
        }
    }
}

/// The error for a NULL data pointer (a buffer, a string, a result): `EFAULT`, as the kernel
/// answers, naming the call and the argument.
pub fn null_argument(func: &str, what: &str) -> FsError {
    FsError::new(Errno::Fault, format!("{func}: {what} is NULL"))
}

/// The bytes of a C string, or `None` for NULL.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that stays unchanged for `'a`.
pub unsafe fn c_bytes<'a>(p: *const c_char) -> Option<&'a [u8]> {
    if p.is_null() {
        return None;
    }
    // SAFETY: non-null, NUL-terminated and unchanged for 'a by this function's contract.
    Some(unsafe { CStr::from_ptr(p) }.to_bytes())
}

/// A required C string argument, as UTF-8: NULL is `EFAULT`, bytes that are not UTF-8 are
/// `EINVAL`, each naming the call and the argument.
///
/// # Safety
/// As [`c_bytes`].
pub unsafe fn c_text<'a>(p: *const c_char, func: &str, what: &str) -> FsResult<&'a str> {
    // SAFETY: `p` is NULL or NUL-terminated and unchanged for `'a` (our contract, stated as
    // `c_bytes`'s), so `c_bytes` may borrow it for `'a`.
    let bytes = unsafe { c_bytes(p) }.ok_or_else(|| null_argument(func, what))?;
    std::str::from_utf8(bytes)
        .map_err(|_| FsError::new(Errno::Inval, format!("{func}: {what} is not valid UTF-8")))
}

/// A result pointer, as a reference: NULL is `EFAULT`.
///
/// # Safety
/// `p` is NULL or points to an aligned `T` that no one else reads or writes for `'a`. `T`
/// is plain data (integers, and structs of them, with no `Drop`), for which any bits are a
/// valid value, so storage a C caller declared without initialising it may be written through
/// the reference.
pub unsafe fn out_ref<'a, T>(p: *mut T, func: &str, what: &str) -> FsResult<&'a mut T> {
    // SAFETY: NULL or aligned, exclusive storage for a `T` by this function's contract.
    unsafe { p.as_mut() }.ok_or_else(|| null_argument(func, what))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panics_become_messages_naming_the_component_and_the_panic() {
        let quiet = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let e =
            catch_fs_panic::<()>("libtessera", || panic!("index {} out of range", 3)).unwrap_err();
        let s = catch_panic("the interposer", || panic!("a static message")).unwrap_err();
        std::panic::set_hook(quiet);
        assert_eq!(e.errno, Errno::Io);
        assert_eq!(
            e.message,
            "internal error in libtessera: index 3 out of range; please report it"
        );
        assert!(s.contains("the interposer: a static message"), "{s}");
        assert_eq!(catch_fs_panic("x", || Ok(5)), Ok(5));
        let err = FsError::new(Errno::NoEnt, "gone");
        assert_eq!(catch_fs_panic::<()>("x", || Err(err.clone())), Err(err));
    }

    #[test]
    fn a_failed_guard_sets_errno_and_the_message_of_this_thread_only() {
        let got = guard("t", -1, || {
            Err::<i32, _>(FsError::new(Errno::NoEnt, "no /x"))
        });
        assert_eq!(got, -1);
        assert_eq!(errno(), libc::ENOENT);
        // SAFETY: `message` returns this thread's NUL-terminated message.
        let text = unsafe { CStr::from_ptr(message()) }
            .to_str()
            .unwrap()
            .to_string();
        assert_eq!(text, "no /x (ENOENT)");
        std::thread::spawn(|| {
            // SAFETY: as above, on the new thread.
            let other = unsafe { CStr::from_ptr(message()) };
            assert!(other.is_empty(), "another thread's message leaked");
        })
        .join()
        .unwrap();
        assert_eq!(guard("t", -1, || Ok(7)), 7);
    }

    #[test]
    fn null_and_bad_arguments_are_named() {
        let p: *const c_char = std::ptr::null();
        // SAFETY: NULL is allowed.
        let e = unsafe { c_text(p, "tessera_open", "path") }.unwrap_err();
        assert_eq!(
            (e.errno, e.message.as_str()),
            (Errno::Fault, "tessera_open: path is NULL")
        );
        let bad = c"\xff\xfe".as_ptr();
        // SAFETY: a NUL-terminated literal.
        let e = unsafe { c_text(bad, "tessera_open", "path") }.unwrap_err();
        assert_eq!(e.errno, Errno::Inval);
        assert!(e.message.contains("not valid UTF-8"), "{e}");
        // SAFETY: a NUL-terminated literal.
        assert_eq!(unsafe { c_text(c"/a".as_ptr(), "f", "p") }, Ok("/a"));
        let mut slot = 0u64;
        // SAFETY: a live, exclusive local.
        *unsafe { out_ref(&mut slot, "f", "out") }.unwrap() = 9;
        assert_eq!(slot, 9);
        // SAFETY: NULL is allowed.
        let e = unsafe { out_ref::<u64>(std::ptr::null_mut(), "f", "out") }.unwrap_err();
        assert_eq!(e.errno, Errno::Fault);
    }
}
