//! Temporary files from templates (`mkstemp` and its variants): glibc opens them through its
//! internal open, which the interposer does not see, so a template inside Tessera (git's
//! `.git/tXXXXXX`, editors' and compilers' temporaries beside their output) would be created
//! in the kernel's namespace, or fail there. Those inside Tessera are made here: the six
//! `X`s before the suffix replaced by random letters and digits, opened with `O_EXCL`, tried
//! again on a name already taken.

use crate::files::open_path;
use crate::{real, run, tessera_path};
use libc::{c_char, c_int};
use tessera_client::{Errno, FsError};

/// Tries before giving up with `EEXIST`, as glibc does.
const ATTEMPTS: usize = 238_328;

/// # Safety
/// `template` is a writable NUL-terminated string (mkostemps's contract).
unsafe fn mkostemps_impl(template: *mut c_char, suffixlen: c_int, flags: c_int) -> c_int {
    // SAFETY: NUL-terminated by the caller's contract.
    if unsafe { tessera_path(libc::AT_FDCWD, template) }.is_none() {
        // SAFETY: the caller's arguments, passed unchanged to the real `mkostemps64`, whose contract the caller met in calling it.
        return unsafe { real::mkostemps64(template, suffixlen, flags) };
    }
    let open_flags = libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | (flags & !libc::O_ACCMODE);
    // SAFETY: `template` is writable and NUL-terminated (our contract) and names a Tessera path
    // (checked just above), which `with_random_names` requires.
    unsafe { with_random_names(template, suffixlen, |p| open_path(p, open_flags, 0o600)) }
}

/// Makes something (`make`: a file, a directory) at the Tessera template's path with the six
/// `X`s before its `suffixlen`-byte suffix replaced by random letters and digits, trying again
/// on `EEXIST`; on success the template holds the name made. `make`'s result, or -1 with
/// errno set.
///
/// # Safety
/// `template` is a writable NUL-terminated string naming a Tessera path.
pub unsafe fn with_random_names(
    template: *mut c_char,
    suffixlen: c_int,
    mut make: impl FnMut(&str) -> tessera_client::FsResult<c_int>,
) -> c_int {
    // SAFETY: NUL-terminated by the caller's contract.
    let Some(p) = (unsafe { tessera_path(libc::AT_FDCWD, template) }) else {
        return -1;
    };
    run(|| {
        // SAFETY: NUL-terminated and writable by the caller's contract; its length is the
        // bytes before the NUL.
        let bytes = unsafe {
            let n = libc::strlen(template);
            std::slice::from_raw_parts_mut(template.cast::<u8>(), n)
        };
        let p = p?;
        let xs = x_range(bytes.len(), suffixlen)
            .filter(|r| bytes[r.clone()].iter().all(|b| *b == b'X'))
            .ok_or_else(|| {
                FsError::new(
                    Errno::Inval,
                    format!("template {p}: six X before a {suffixlen}-byte suffix expected"),
                )
            })?;
        // The normalised path ends as the template does (the same file name).
        let tail = bytes.len() - xs.start;
        let prefix = &p[..p.len().saturating_sub(tail)];
        let suffix = String::from_utf8_lossy(&bytes[xs.end..]).into_owned();
        for _ in 0..ATTEMPTS {
            let name = random_name();
            match make(&format!("{prefix}{name}{suffix}")) {
                Ok(made) => {
                    bytes[xs.clone()].copy_from_slice(name.as_bytes());
                    return Ok(made);
                }
                Err(e) if e.errno == Errno::Exist => continue,
                Err(e) => return Err(e),
            }
        }
        Err(FsError::new(
            Errno::Exist,
            format!("template {p}: every name tried exists"),
        ))
    })
}

/// Where the six `X`s are in a template of `len` bytes with a suffix of `suffixlen`.
fn x_range(len: usize, suffixlen: c_int) -> Option<std::ops::Range<usize>> {
    let suffix = usize::try_from(suffixlen).ok()?;
    let end = len.checked_sub(suffix)?;
    Some(end.checked_sub(6)?..end)
}

/// Six random letters and digits (from the kernel's generator).
fn random_name() -> String {
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut raw = [0u8; 6];
    // SAFETY: `raw` holds its length in writable bytes. A short or failed fill leaves zeros:
    // the name is then less random and an EEXIST retry draws again.
    unsafe { libc::getrandom(raw.as_mut_ptr().cast(), raw.len(), 0) };
    raw.iter()
        .map(|b| CHARS[usize::from(*b) % CHARS.len()] as char)
        .collect()
}

/// # Safety
/// As `mkstemp(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkstemp(template: *mut c_char) -> c_int {
    // SAFETY: `template` is a writable, NUL-terminated string per mkstemp(3), as `mkostemps_impl`
    // requires; no suffix, no flags.
    unsafe { mkostemps_impl(template, 0, 0) }
}
alias!(mkstemp64 => mkstemp(template: *mut c_char) -> c_int);

/// # Safety
/// As `mkostemp(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkostemp(template: *mut c_char, flags: c_int) -> c_int {
    // SAFETY: mkostemp(3)'s contract makes `template` a writable NUL-terminated string, which is
    // `mkostemps_impl`'s requirement.
    unsafe { mkostemps_impl(template, 0, flags) }
}
alias!(mkostemp64 => mkostemp(template: *mut c_char, flags: c_int) -> c_int);

/// # Safety
/// As `mkstemps(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkstemps(template: *mut c_char, suffixlen: c_int) -> c_int {
    // SAFETY: `template` is writable and NUL-terminated per mkstemps(3), with `suffixlen` bytes of
    // suffix, as `mkostemps_impl` needs.
    unsafe { mkostemps_impl(template, suffixlen, 0) }
}
alias!(mkstemps64 => mkstemps(template: *mut c_char, suffixlen: c_int) -> c_int);

/// # Safety
/// As `mkostemps(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkostemps(template: *mut c_char, suffixlen: c_int, flags: c_int) -> c_int {
    // SAFETY: `template` is a writable NUL-terminated string by mkostemps(3)'s contract, which
    // `mkostemps_impl` shares.
    unsafe { mkostemps_impl(template, suffixlen, flags) }
}
alias!(mkostemps64 => mkostemps(template: *mut c_char, suffixlen: c_int, flags: c_int) -> c_int);
