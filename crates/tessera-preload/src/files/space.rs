//! Space and maps: `fallocate`, `posix_fallocate`, `mmap` (a private copy of a Tessera file),
//! `readahead`.

use super::*;
use crate::state::{self, Busy, DescRef, Object, client, desc};
use crate::{fail, real, run};
use libc::{c_int, c_void, off_t, size_t, ssize_t};
use tessera_client::{Errno, FsError, FsResult};

/// `fallocate(fd, mode, off, len)` on a Tessera descriptor: preallocation only (mode 0, or
/// `FALLOC_FL_KEEP_SIZE`). The bytes are reserved in the burst buffer, so later writes do not
/// fail for want of space, and unless KEEP_SIZE the file grows to cover them (reading as
/// zeros), as on a local file system.
pub(crate) fn allocate_desc(
    fd: c_int,
    d: &DescRef,
    mode: c_int,
    off: off_t,
    len: off_t,
) -> FsResult<()> {
    if mode & !libc::FALLOC_FL_KEEP_SIZE != 0 {
        return Err(FsError::new(
            Errno::NotSup,
            format!(
                "fallocate mode {mode:#x} on descriptor {fd}: Tessera files take preallocation only (mode 0 or FALLOC_FL_KEEP_SIZE), not punching, zeroing, collapsing or inserting ranges"
            ),
        ));
    }
    if off < 0 || len <= 0 {
        return Err(FsError::new(
            Errno::Inval,
            format!("fallocate of {len} bytes at {off}: give an offset >= 0 and a length > 0"),
        ));
    }
    let end = tessera_core::run::end_within_limit(off as u64, len as u64, "fallocate")?;
    let g = state::lock_desc(d);
    let Object::File(_) = &g.obj else {
        return Err(FsError::new(
            Errno::BadF,
            format!(
                "fallocate: descriptor {fd} ({}) is not a regular file",
                g.path
            ),
        ));
    };
    if g.flags & libc::O_ACCMODE == libc::O_RDONLY {
        return Err(FsError::new(
            Errno::BadF,
            format!("fallocate: {} is open read-only", g.path),
        ));
    }
    let c = client()?;
    c.preallocate(len as u64)?;
    if mode & libc::FALLOC_FL_KEEP_SIZE == 0 {
        let size = c.stat(&g.path)?.size;
        if end > size {
            c.truncate(&g.path, end)?;
        }
    }
    Ok(())
}

/// # Safety
/// As `posix_fallocate(3)` (returns the error number).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn posix_fallocate(fd: c_int, off: off_t, len: off_t) -> c_int {
    crate::guarded(|| {
        if let Some(d) = desc(fd) {
            let _b = Busy::enter();
            return match crate::caught(|| allocate_desc(fd, &d, 0, off, len)) {
                Ok(()) => 0,
                Err(e) => {
                    crate::report(&e);
                    e.code()
                }
            };
        }
        // SAFETY: the caller's arguments, passed unchanged to the real `posix_fallocate64`, whose contract the caller met in calling it.
        unsafe { real::posix_fallocate64(fd, off, len) }
    })
}
alias!(posix_fallocate64 => posix_fallocate(fd: c_int, off: off_t, len: off_t) -> c_int);
/// # Safety
/// As `fallocate(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fallocate(fd: c_int, mode: c_int, off: off_t, len: off_t) -> c_int {
    crate::guarded(|| {
        if let Some(d) = desc(fd) {
            return run(|| allocate_desc(fd, &d, mode, off, len).map(|()| 0));
        }
        // SAFETY: the caller's arguments, passed unchanged to the real `fallocate64`, whose contract the caller met in calling it.
        unsafe { real::fallocate64(fd, mode, off, len) }
    })
}
alias!(fallocate64 => fallocate(fd: c_int, mode: c_int, off: off_t, len: off_t) -> c_int);

/// A map of a Tessera file is a private copy: an anonymous mapping filled with the file's
/// bytes, then given the protection asked for. Read-only maps (shared or private) and private
/// writable ones behave as the kernel's, except that a read-only shared map is a snapshot (it
/// does not follow later writes); a shared writable map is refused (`ENODEV`), its changes
/// could never reach the file.
///
/// # Safety
/// As `mmap(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mmap(
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: off_t,
) -> *mut c_void {
    crate::guarded_or(libc::MAP_FAILED, || {
        if fd >= 0
            && let Some(d) = desc(fd)
        {
            let _b = Busy::enter();
            // SAFETY: the caller's arguments, under mmap's contract.
            return match unsafe { map_copy(&d, fd, addr, len, prot, flags, off) } {
                Ok(p) => p,
                Err(e) => {
                    fail(&e);
                    libc::MAP_FAILED
                }
            };
        }
        // SAFETY: the caller's arguments, passed unchanged to the real `mmap64`, whose contract the caller met in calling it.
        unsafe { real::mmap64(addr, len, prot, flags, fd, off) }
    })
}

/// The private copy [`mmap`] makes of a Tessera file.
///
/// # Safety
/// `addr`, `len` and `flags` as `mmap(2)` takes them (a `MAP_FIXED` address replaces what
/// the caller mapped there).
pub(crate) unsafe fn map_copy(
    d: &DescRef,
    fd: c_int,
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    off: off_t,
) -> FsResult<*mut c_void> {
    // The map type is a value, not bits: MAP_SHARED_VALIDATE is MAP_SHARED | MAP_PRIVATE.
    let kind = libc::MAP_SHARED | libc::MAP_PRIVATE | libc::MAP_SHARED_VALIDATE;
    let shared = matches!(flags & kind, libc::MAP_SHARED | libc::MAP_SHARED_VALIDATE);
    if shared && prot & libc::PROT_WRITE != 0 {
        return Err(FsError::new(
            Errno::NoDev,
            format!(
                "mmap of descriptor {fd}: a shared writable map of a Tessera file cannot carry its changes to the file; write with write(2) or pwrite(2) (read-only and private maps work)"
            ),
        ));
    }
    if len == 0 || off < 0 || off % 4096 != 0 {
        return Err(FsError::new(
            Errno::Inval,
            format!("mmap of descriptor {fd}: length {len} at offset {off}"),
        ));
    }
    let anon = (flags & !kind) | libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
    let rw = libc::PROT_READ | libc::PROT_WRITE;
    // SAFETY: an anonymous mapping, with the caller's address and flags (mmap's contract).
    let p = unsafe { real::mmap64(addr, len, rw, anon, -1, 0) };
    if p == libc::MAP_FAILED {
        return Err(FsError::io(
            format!("mmap of descriptor {fd}: the memory for its copy"),
            &std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: `p` is a fresh writable mapping of `len` bytes, private to this call.
    let buf = unsafe { std::slice::from_raw_parts_mut(p.cast::<u8>(), len) };
    let filled = with_file(fd, d, None, |f, _, _| {
        let mut done = 0;
        while done < len {
            let n = f.read_at(&mut buf[done..], off as u64 + done as u64)?;
            if n == 0 {
                break;
            }
            done += n;
        }
        Ok(())
    });
    // SAFETY: the mapping made above.
    let protected = filled.and_then(|()| match unsafe { libc::mprotect(p, len, prot) } {
        0 => Ok(()),
        _ => Err(FsError::io(
            format!("mmap of descriptor {fd}: protection {prot:#x}"),
            &std::io::Error::last_os_error(),
        )),
    });
    if let Err(e) = protected {
        // SAFETY: the mapping made above, not handed out.
        unsafe { libc::munmap(p, len) };
        return Err(e);
    }
    Ok(p)
}
alias!(mmap64 => mmap(addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off_t) -> *mut c_void);

/// `readahead(2)` on a Tessera descriptor: accepted, with nothing to do (reads come from the
/// logs, with no page cache to fill ahead).
///
/// # Safety
/// As `readahead(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn readahead(fd: c_int, off: off_t, count: size_t) -> ssize_t {
    if desc(fd).is_some() {
        return 0;
    }
    // SAFETY: the caller's arguments, passed unchanged to the real `readahead`, whose contract the caller met in calling it.
    unsafe { real::readahead(fd, off, count) }
}
