//! `scandir` and `scandirat` (and their 64 forms) on Tessera directories. glibc's open and
//! read the directory through internal calls the interposer never sees; here a Tessera
//! directory is read through the interposer's own streams with glibc's semantics: each entry
//! the filter keeps is copied into its own malloc'd `struct dirent`, the array is malloc'd,
//! and `compar` sorts it with `qsort` (the caller frees both, as with glibc's). Directories
//! elsewhere go to glibc's own functions.

use crate::{real, tessera_path};
use libc::{c_char, c_int, c_void, dirent64};

/// The filter argument: keep an entry when it returns nonzero (NULL: keep all).
pub type Filter = Option<unsafe extern "C" fn(*const dirent64) -> c_int>;
/// The comparison argument, given pointers to two entries of the array (NULL: no sort).
pub type Compar =
    Option<unsafe extern "C" fn(*const *const dirent64, *const *const dirent64) -> c_int>;

/// Reads the open stream `d` into a malloc'd array at `*list`, closing it; the count, or -1
/// with errno set.
///
/// # Safety
/// `d` is a stream the interposer opened; `list` is writable; `filter` and `compar` are
/// functions of the signatures above or NULL.
unsafe fn scan(
    d: *mut libc::DIR,
    list: *mut *mut *mut dirent64,
    filter: Filter,
    compar: Compar,
) -> c_int {
    let mut kept: Vec<*mut dirent64> = Vec::new();
    let free_all = |kept: &[*mut dirent64]| {
        for e in kept {
            // SAFETY: each was malloc'd below and not handed out.
            unsafe { libc::free(e.cast()) };
        }
    };
    loop {
        // SAFETY: `d` is an open stream of the interposer's.
        let e = unsafe { crate::dirs::readdir64(d) };
        if e.is_null() {
            break;
        }
        if let Some(keep) = filter {
            // SAFETY: the caller's filter, given a valid entry.
            if unsafe { keep(e) } == 0 {
                continue;
            }
        }
        // SAFETY: `e` is a whole `dirent64` whose name is NUL-terminated.
        let len = unsafe { libc::strlen((*e).d_name.as_ptr()) };
        let size = std::mem::offset_of!(dirent64, d_name) + len + 1;
        // SAFETY: a fresh allocation of `size` bytes for the caller to free.
        let copy = unsafe { libc::malloc(size) } as *mut dirent64;
        if copy.is_null() {
            free_all(&kept);
            // SAFETY: `d` is the directory this call opened and has not closed.
            unsafe { crate::dirs::closedir(d) };
            tessera_cabi::set_errno(libc::ENOMEM);
            return -1;
        }
        // SAFETY: `size` bytes lie within `*e` (a whole dirent64) and fit `copy`.
        unsafe {
            std::ptr::copy_nonoverlapping(e.cast::<u8>(), copy.cast::<u8>(), size);
            (*copy).d_reclen = size as u16;
        }
        kept.push(copy);
    }
    // SAFETY: `d` is open and closed once.
    unsafe { crate::dirs::closedir(d) };
    let n = kept.len();
    // SAFETY: an array of `n` pointers (at least one slot, so never a NULL for a count of 0).
    let array = unsafe { libc::malloc(n.max(1) * std::mem::size_of::<*mut dirent64>()) }
        as *mut *mut dirent64;
    if array.is_null() {
        free_all(&kept);
        tessera_cabi::set_errno(libc::ENOMEM);
        return -1;
    }
    // SAFETY: `array` holds `n` pointers.
    unsafe { std::ptr::copy_nonoverlapping(kept.as_ptr(), array, n) };
    if let Some(cmp) = compar {
        // SAFETY: qsort hands the comparator pointers to two elements of the array, which is
        // what scandir's `compar` takes (glibc calls it the same way).
        unsafe {
            let cmp: unsafe extern "C" fn(*const c_void, *const c_void) -> c_int =
                std::mem::transmute(cmp);
            libc::qsort(
                array.cast(),
                n,
                std::mem::size_of::<*mut dirent64>(),
                Some(cmp),
            );
        }
    }
    // SAFETY: `list` is writable (the caller's contract).
    unsafe { *list = array };
    n as c_int
}

/// # Safety
/// As `scandir(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scandir64(
    dir: *const c_char,
    list: *mut *mut *mut dirent64,
    filter: Filter,
    compar: Compar,
) -> c_int {
    crate::guarded(|| {
        // SAFETY: NUL-terminated or NULL by the caller's contract.
        if unsafe { tessera_path(libc::AT_FDCWD, dir) }.is_none() {
            // SAFETY: the caller's arguments, passed unchanged to the real `scandir64`, whose contract the caller met in calling it.
            return unsafe { real::scandir64(dir, list, filter, compar) };
        }
        // SAFETY: as above; the interposer's opendir serves the Tessera path.
        let d = unsafe { crate::dirs::opendir(dir) };
        if d.is_null() {
            return -1;
        }
        // SAFETY: an open stream of the interposer's and the caller's arguments.
        unsafe { scan(d, list, filter, compar) }
    })
}
alias!(scandir => scandir64(dir: *const c_char, list: *mut *mut *mut dirent64, filter: Filter, compar: Compar) -> c_int);

/// # Safety
/// As `scandirat(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scandirat64(
    dirfd: c_int,
    dir: *const c_char,
    list: *mut *mut *mut dirent64,
    filter: Filter,
    compar: Compar,
) -> c_int {
    crate::guarded(|| {
        // SAFETY: NUL-terminated or NULL by the caller's contract.
        if unsafe { tessera_path(dirfd, dir) }.is_none() {
            // SAFETY: the caller's arguments, passed unchanged to the real `scandirat64`, whose contract the caller met in calling it.
            return unsafe { real::scandirat64(dirfd, dir, list, filter, compar) };
        }
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
        // SAFETY: as above; the interposer's open serves the Tessera path.
        let fd = unsafe { crate::files::open_impl(dirfd, dir, flags, 0) };
        if fd < 0 {
            return -1;
        }
        // SAFETY: a Tessera directory descriptor just opened.
        let d = unsafe { crate::dirs::fdopendir(fd) };
        if d.is_null() {
            // SAFETY: closing the descriptor opened above.
            unsafe { crate::files::close(fd) };
            return -1;
        }
        // SAFETY: an open stream of the interposer's and the caller's arguments.
        unsafe { scan(d, list, filter, compar) }
    })
}
alias!(scandirat => scandirat64(dirfd: c_int, dir: *const c_char, list: *mut *mut *mut dirent64, filter: Filter, compar: Compar) -> c_int);
