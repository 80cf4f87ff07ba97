//! Finding a symbol in the libraries a program loaded privately.
//!
//! `dlsym(RTLD_NEXT)` and `dlsym(RTLD_DEFAULT)` search the global scope only. A library that a
//! module brought in with `RTLD_LOCAL` is outside it: Python loads its extension modules that
//! way, so mpi4py's `MPI.so` brings `libmpi.so` in privately. Its calls still reach the
//! interposer's MPI wrappers (the global scope, where `LD_PRELOAD` puts them, is searched
//! first), but the wrappers would not find the functions they forward to. So, when the global
//! scope has no definition, every loaded object is asked in load order, the interposer itself
//! skipped.

use std::ffi::{CStr, CString, c_void};

/// `name`'s address in the global scope (`RTLD_DEFAULT`), else in a privately loaded object.
pub fn anywhere(name: &CStr) -> Option<usize> {
    // SAFETY: looking up a NUL-terminated name.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    if !p.is_null() {
        return Some(p as usize);
    }
    private(name)
}

/// `name`'s address in the first loaded object other than the interposer that defines it
/// (load order), asking each object itself.
pub fn private(name: &CStr) -> Option<usize> {
    let me = object_of(private as *const c_void)?;
    for path in loaded_objects() {
        if path == me {
            continue;
        }
        // SAFETY: RTLD_NOLOAD only takes a reference to an object that is already loaded
        // (null if it is not); the path is NUL-terminated.
        let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
        if handle.is_null() {
            continue;
        }
        // SAFETY: a live handle and a NUL-terminated name.
        let p = unsafe { libc::dlsym(handle, name.as_ptr()) };
        // SAFETY: giving back the reference taken above; the object stays loaded by whoever
        // loaded it first.
        unsafe { libc::dlclose(handle) };
        // The handle's search covers the object's dependencies, which may be the interposer.
        if !p.is_null() && object_of(p).is_none_or(|o| o != me) {
            return Some(p as usize);
        }
    }
    None
}

/// The path of the object holding address `p`.
fn object_of(p: *const c_void) -> Option<CString> {
    // SAFETY: dladdr only reads the loader's tables; `info` is a plain out-parameter.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::dladdr(p, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr's file name is NUL-terminated and lives as long as the object.
    Some(unsafe { CStr::from_ptr(info.dli_fname) }.to_owned())
}

/// The paths of the loaded shared objects (the program itself left out), in load order.
/// Collected first: the loader's lock is held during the walk, so nothing may be opened then.
fn loaded_objects() -> Vec<CString> {
    /// Adds each object's name to the `Vec<CString>` behind `data`.
    ///
    /// # Safety
    /// `info` is the loader's description of one object; `data` is the `Vec` passed below.
    unsafe extern "C" fn add(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        data: *mut c_void,
    ) -> libc::c_int {
        // SAFETY: the walk passes a valid description and our `Vec`, one call at a time.
        let (info, out) = unsafe { (&*info, &mut *data.cast::<Vec<CString>>()) };
        if !info.dlpi_name.is_null() {
            // SAFETY: the loader's NUL-terminated name of the object.
            let name = unsafe { CStr::from_ptr(info.dlpi_name) };
            if !name.is_empty() {
                out.push(name.to_owned());
            }
        }
        0
    }
    let mut out: Vec<CString> = Vec::new();
    // SAFETY: `add` matches the callback's contract and `out` outlives the walk.
    unsafe { libc::dl_iterate_phdr(Some(add), (&mut out as *mut Vec<CString>).cast()) };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symbol_of_a_loaded_library_is_found_in_it() {
        let objects = loaded_objects();
        assert!(
            objects
                .iter()
                .any(|o| o.to_string_lossy().contains("libc.so")),
            "{objects:?}"
        );
        // libc is loaded in every process, and its functions are found by asking it.
        let p = private(c"getpid").expect("getpid in libc");
        let libc_of = object_of(p as *const c_void).unwrap();
        assert!(
            libc_of.to_string_lossy().contains("libc"),
            "getpid found in {libc_of:?}"
        );
        assert_eq!(anywhere(c"getpid"), Some(p));
        assert_eq!(private(c"no_such_function_anywhere"), None);
    }
}
