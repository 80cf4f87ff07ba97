//! Descriptor calls: open, close, read, write and their positional and vectored forms, lseek,
//! fsync, ftruncate, dup. Offsets live in the open file description, shared by `dup`s.

use crate::state::{self, Busy, Desc, DescRef, Object, client, desc};
use crate::{ebadf, fail, real, run, tessera_path};
use libc::{c_char, c_int, c_uint, c_void, iovec, off_t, size_t, ssize_t};
use std::sync::{Arc, Mutex};
use tessera_client::posix::{OpenIntent, seek_target};
use tessera_client::{Errno, FileKind, FsError, FsResult, OpenOptions};

/// Status flags reported by F_GETFL and changed by F_SETFL.
pub const STATUS_FLAGS: c_int = libc::O_ACCMODE | libc::O_APPEND | libc::O_NONBLOCK;

pub fn umask() -> u32 {
    // SAFETY: umask only swaps the process mask; it is restored at once.
    unsafe {
        let m = libc::umask(0o022);
        libc::umask(m);
        m
    }
}

/// Opens a Tessera path and returns the new descriptor.
pub fn open_path(path: &str, flags: c_int, mode: u32) -> FsResult<c_int> {
    let intent = OpenIntent::from_flags(flags)?;
    let c = client()?;
    let mut opened = path.to_string();
    let obj = if intent.directory || intent.path_only {
        let a = if flags & libc::O_NOFOLLOW != 0 {
            c.stat(path)?
        } else {
            // Where links lead: a directory is listed, and *at calls resolve, there.
            let (to, a) = c.follow(path)?;
            opened = to;
            a
        };
        match a.kind {
            FileKind::Dir => Object::Dir,
            FileKind::File | FileKind::Symlink if intent.directory => {
                return Err(FsError::new(
                    Errno::NotDir,
                    format!("{path} is not a directory"),
                ));
            }
            FileKind::File | FileKind::Symlink => Object::Path,
        }
    } else {
        let mut o = OpenOptions::from_intent(&intent, mode & !umask());
        o.model(state::model()?);
        if flags & libc::O_NOFOLLOW != 0 && c.stat(path).is_ok_and(|a| a.kind == FileKind::Symlink)
        {
            return Err(FsError::new(
                Errno::Loop,
                format!("{path} is a symbolic link and O_NOFOLLOW was given"),
            ));
        }
        match c.open(path, &o) {
            Ok(mut f) => {
                // Where PFS links led: fstat and the *at calls name the file itself.
                opened = f.user_path();
                if !intent.write && !intent.create && migrate_on_open() {
                    // An optimisation: a failed migration leaves the reads remote.
                    if let Err(e) = f.migrate_here() {
                        crate::report(&FsError::new(
                            e.errno,
                            format!(
                                "TESSERA_MIGRATE=open: {opened} stays where it is: {}",
                                e.message
                            ),
                        ));
                    }
                }
                Object::File(Box::new(f))
            }
            // Opening a directory read-only is how programs list it (opendir, fts).
            Err(e) if e.errno == Errno::IsDir && !intent.write && !intent.create => Object::Dir,
            Err(e) => return Err(e),
        }
    };
    let cloexec = flags & libc::O_CLOEXEC != 0;
    let (fd, placeholder) = match obj {
        Object::File(_) => state::file_placeholder(cloexec)?,
        _ => (state::placeholder(cloexec)?, None),
    };
    state::install(
        fd,
        Arc::new(Mutex::new(Desc {
            path: opened,
            obj,
            flags: flags & STATUS_FLAGS,
            pos: 0,
            shared: false,
            placeholder,
        })),
    );
    Ok(fd)
}

/// Whether opens for reading copy the file's remote bytes to this node first
/// (`TESSERA_MIGRATE=open`, FusionFS and Swift).
fn migrate_on_open() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| match std::env::var("TESSERA_MIGRATE") {
        Ok(v) if v == "open" => true,
        Ok(v) if v.is_empty() || v == "never" => false,
        Ok(v) => {
            // Said whatever TESSERA_VERBOSE says: a setting that does nothing is not routine.
            let _b = Busy::enter();
            eprintln!(
                "tessera: TESSERA_MIGRATE={v}: not a migration policy; use open (or never); files stay where they are"
            );
            false
        }
        Err(_) => false,
    })
}

/// # Safety
/// `path` is null or NUL-terminated.
pub unsafe fn open_impl(dirfd: c_int, path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
    // SAFETY: forwarded contract.
    match unsafe { tessera_path(dirfd, path) } {
        Some(p) => run(|| {
            let p = p?;
            open_path(&p, flags, mode)
        }),
        None => {
            // SAFETY: NUL-terminated or NULL by the caller's contract.
            let k = unsafe { crate::kernel_at(dirfd, path) };
            // SAFETY: libc's own call, with the caller's arguments (the path rewritten where
            // it named a real place through Tessera).
            unsafe { real::openat(dirfd, crate::at(&k, path), flags, mode) }
        }
    }
}

/// # Safety
/// As `open(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn open(path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
    // SAFETY: forwarded under this function's own contract.
    unsafe { open_impl(libc::AT_FDCWD, path, flags, mode) }
}
/// # Safety
/// As `open(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn open64(path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
    // SAFETY: forwarded under this function's own contract.
    unsafe { open_impl(libc::AT_FDCWD, path, flags, mode) }
}
alias!(__open => open(path: *const c_char, flags: c_int, mode: c_uint) -> c_int);
alias!(__open64 => open(path: *const c_char, flags: c_int, mode: c_uint) -> c_int);
alias!(openat => open_impl(dirfd: c_int, path: *const c_char, flags: c_int, mode: c_uint) -> c_int);
alias!(openat64 => open_impl(dirfd: c_int, path: *const c_char, flags: c_int, mode: c_uint) -> c_int);
/// # Safety
/// As `creat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn creat(path: *const c_char, mode: c_uint) -> c_int {
    crate::guarded(|| {
        // SAFETY: forwarded under this function's own contract.
        unsafe {
            open_impl(
                libc::AT_FDCWD,
                path,
                libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC,
                mode,
            )
        }
    })
}
alias!(creat64 => creat(path: *const c_char, mode: c_uint) -> c_int);

/// Closes a Tessera descriptor: the last descriptor of a description closes the file
/// (publishing its writes); any close releases the process's locks on the file (POSIX).
pub fn close_tessera(fd: c_int, d: DescRef) -> FsResult<()> {
    state::uninstall(fd);
    // SAFETY: closing the placeholder this descriptor number held.
    unsafe { real::close(fd) };
    let unlocked = {
        let mut g = state::lock_desc(&d);
        match &mut g.obj {
            Object::File(f) if state::table().locked.remove(&f.ino()) => f.unlock(0, 0),
            _ => Ok(()),
        }
    };
    state::release(d).and(unlocked)
}

/// # Safety
/// As `close(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    if let Some(refused) = crate::library_fds::refuse(fd, "close") {
        return refused;
    }
    let r = match desc(fd) {
        Some(d) => run(|| close_tessera(fd, d).map(|()| 0)),
        // SAFETY: libc's close.
        None => unsafe { real::close(fd) },
    };
    // A failure always says why: never -1 with errno 0.
    // SAFETY: errno is thread-local.
    if r < 0 && unsafe { *libc::__errno_location() } == 0 {
        // SAFETY: as above.
        unsafe { *libc::__errno_location() = libc::EIO };
    }
    r
}

/// Runs `f` on the open Tessera file behind descriptor `fd` (of description `d`), with the
/// file position to read and move. A write of `reserve` bytes at the position (not
/// `O_APPEND`) on a position shared with other processes takes its range from the kernel in
/// one step, as the kernel's own writes do, so two processes writing through one
/// description never write over each other.
fn with_file<T>(
    fd: c_int,
    d: &DescRef,
    reserve: Option<u64>,
    f: impl FnOnce(&mut tessera_client::File, &mut u64, c_int) -> FsResult<T>,
) -> FsResult<T> {
    let mut g = state::lock_desc(d);
    let reserved = match reserve {
        Some(len) if g.shared && g.flags & libc::O_APPEND == 0 => reserve_shared(fd, len),
        _ => None,
    };
    let mut pos = reserved.map_or_else(|| g.position(fd), |(start, _)| start);
    let before = pos;
    let Desc {
        obj, flags, path, ..
    } = &mut *g;
    let r = match obj {
        Object::File(file) => f(file, &mut pos, *flags),
        Object::Dir => Err(FsError::new(Errno::IsDir, format!("{path} is a directory"))),
        Object::Path => Err(FsError::new(
            Errno::BadF,
            format!("{path} was opened with O_PATH: it cannot be read or written"),
        )),
    };
    match reserved {
        // What the write did not use goes back (all of it, if it failed).
        Some((_, end)) if pos != end => {
            let back = pos as i64 - end as i64;
            // SAFETY: a plain call on the placeholder.
            unsafe { real::lseek64(fd, back, libc::SEEK_CUR) };
        }
        Some(_) => {}
        None if pos != before => g.set_position(fd, pos),
        None => {}
    }
    r
}

/// Takes `len` bytes from a shared position in one step: (where they start, where they end).
fn reserve_shared(fd: c_int, len: u64) -> Option<(u64, u64)> {
    let step = off_t::try_from(len).ok()?;
    // SAFETY: a plain call on the placeholder, which holds the shared position.
    let end = unsafe { real::lseek64(fd, step, libc::SEEK_CUR) };
    let end = u64::try_from(end).ok()?;
    Some((end - len, end))
}

/// The error for a NULL buffer with a nonzero length, as the kernel answers it.
pub fn efault(what: &str, n: size_t) -> FsError {
    FsError::new(
        Errno::Fault,
        format!("{what} is NULL but {n} bytes were asked for"),
    )
}

/// The caller's read buffer.
///
/// # Safety
/// `buf` is NULL or points to `n` writable bytes that outlive `'a`.
unsafe fn slice_mut<'a>(buf: *mut c_void, n: size_t) -> FsResult<&'a mut [u8]> {
    if n == 0 {
        return Ok(&mut []);
    }
    if buf.is_null() {
        return Err(efault("the buffer", n));
    }
    // SAFETY: non-null, so `n` writable bytes by this function's contract.
    Ok(unsafe { std::slice::from_raw_parts_mut(buf.cast(), n) })
}

/// The caller's write buffer.
///
/// # Safety
/// `buf` is NULL or points to `n` readable bytes that outlive `'a`.
unsafe fn slice<'a>(buf: *const c_void, n: size_t) -> FsResult<&'a [u8]> {
    if n == 0 {
        return Ok(&[]);
    }
    if buf.is_null() {
        return Err(efault("the buffer", n));
    }
    // SAFETY: non-null, so `n` readable bytes by this function's contract.
    Ok(unsafe { std::slice::from_raw_parts(buf.cast(), n) })
}

fn offset(off: off_t) -> FsResult<u64> {
    u64::try_from(off).map_err(|_| FsError::new(Errno::Inval, format!("negative offset {off}")))
}

fn write_desc(fd: c_int, d: &DescRef, buf: &[u8], at: Option<u64>) -> FsResult<ssize_t> {
    let reserve = at.is_none().then_some(buf.len() as u64);
    with_file(fd, d, reserve, |f, pos, flags| {
        let off = match at {
            Some(o) => o,
            None if flags & libc::O_APPEND != 0 => f.append_offset(buf.len() as u64)?,
            None => *pos,
        };
        let n = match crate::atomic_scope::clip_write(off, buf.len() as u64) {
            None => f.write_at(buf, off)?,
            // Inside an atomic MPI-IO access: only its own bytes (see `atomic_scope`).
            Some(parts) => {
                for (s, e) in parts {
                    let at = (s - off) as usize;
                    f.write_at(&buf[at..at + (e - s) as usize], s)?;
                }
                buf.len()
            }
        };
        if at.is_none() {
            *pos = off + n as u64;
        }
        Ok(n as ssize_t)
    })
}

fn read_desc(fd: c_int, d: &DescRef, buf: &mut [u8], at: Option<u64>) -> FsResult<ssize_t> {
    with_file(fd, d, None, |f, pos, _| {
        let off = at.unwrap_or(*pos);
        let n = f.read_at(buf, off)?;
        if at.is_none() {
            *pos = off + n as u64;
        }
        Ok(n as ssize_t)
    })
}

/// # Safety
/// As `read(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t {
    match desc(fd) {
        // SAFETY: `buf` holds `n` bytes (read(2)'s contract).
        Some(d) => run(|| read_desc(fd, &d, unsafe { slice_mut(buf, n) }?, None)),
        // SAFETY: libc's own call, with the caller's arguments under the same contract.
        None => unsafe { real::read(fd, buf, n) },
    }
}
/// # Safety
/// As `write(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t {
    match desc(fd) {
        // SAFETY: `buf` holds `n` bytes (write(2)'s contract).
        Some(d) => run(|| write_desc(fd, &d, unsafe { slice(buf, n) }?, None)),
        // SAFETY: libc's own call, with the caller's arguments under the same contract.
        None => unsafe { real::write(fd, buf, n) },
    }
}
/// # Safety
/// As `pread(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pread(fd: c_int, buf: *mut c_void, n: size_t, off: off_t) -> ssize_t {
    match desc(fd) {
        // SAFETY: `buf` holds `n` bytes (pread(2)'s contract).
        Some(d) => run(|| read_desc(fd, &d, unsafe { slice_mut(buf, n) }?, Some(offset(off)?))),
        // SAFETY: libc's own call, with the caller's arguments under the same contract.
        None => unsafe { real::pread64(fd, buf, n, off) },
    }
}
alias!(pread64 => pread(fd: c_int, buf: *mut c_void, n: size_t, off: off_t) -> ssize_t);
/// # Safety
/// As `pwrite(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pwrite(fd: c_int, buf: *const c_void, n: size_t, off: off_t) -> ssize_t {
    match desc(fd) {
        // SAFETY: `buf` holds `n` bytes (pwrite(2)'s contract).
        Some(d) => run(|| write_desc(fd, &d, unsafe { slice(buf, n) }?, Some(offset(off)?))),
        // SAFETY: libc's own call, with the caller's arguments under the same contract.
        None => unsafe { real::pwrite64(fd, buf, n, off) },
    }
}
alias!(pwrite64 => pwrite(fd: c_int, buf: *const c_void, n: size_t, off: off_t) -> ssize_t);

/// The caller's iovec array.
///
/// # Safety
/// `iov` is NULL or points to `n` iovecs that outlive `'a`.
unsafe fn iovecs<'a>(iov: *const iovec, n: c_int) -> FsResult<&'a [iovec]> {
    if !(0..=libc::UIO_MAXIOV).contains(&n) {
        return Err(FsError::new(
            Errno::Inval,
            format!("iovec count {n} is outside 0..={}", libc::UIO_MAXIOV),
        ));
    }
    if n == 0 {
        return Ok(&[]);
    }
    if iov.is_null() {
        return Err(FsError::new(
            Errno::Fault,
            format!("the iovec array is NULL but its count is {n}"),
        ));
    }
    // SAFETY: non-null, so `n` iovecs by this function's contract.
    Ok(unsafe { std::slice::from_raw_parts(iov, n as usize) })
}

/// Gathers the buffers into one write (one log append, one index record).
///
/// # Safety
/// `iov` is NULL or points to `n` iovecs, each NULL or pointing to `iov_len` readable bytes.
unsafe fn writev_desc(
    fd: c_int,
    d: &DescRef,
    iov: *const iovec,
    n: c_int,
    at: Option<u64>,
) -> FsResult<ssize_t> {
    // SAFETY: this function's contract.
    let v = unsafe { iovecs(iov, n) }?;
    let total: usize = v.iter().map(|i| i.iov_len).sum();
    let mut buf = Vec::with_capacity(total);
    for i in v {
        // SAFETY: each iovec is NULL or holds `iov_len` bytes (this function's contract).
        buf.extend_from_slice(unsafe { slice(i.iov_base, i.iov_len) }?);
    }
    write_desc(fd, d, &buf, at)
}

/// Reads into the buffers in order.
///
/// # Safety
/// `iov` is NULL or points to `n` iovecs, each NULL or pointing to `iov_len` writable bytes.
unsafe fn readv_desc(
    fd: c_int,
    d: &DescRef,
    iov: *const iovec,
    n: c_int,
    at: Option<u64>,
) -> FsResult<ssize_t> {
    // SAFETY: this function's contract.
    let v = unsafe { iovecs(iov, n) }?;
    if let Some(i) = v.iter().find(|i| i.iov_base.is_null() && i.iov_len > 0) {
        return Err(efault("an iovec's base", i.iov_len));
    }
    let total: usize = v.iter().map(|i| i.iov_len).sum();
    let mut buf = vec![0u8; total];
    let got = read_desc(fd, d, &mut buf, at)? as usize;
    let mut done = 0;
    for i in v {
        if done >= got {
            break;
        }
        let k = i.iov_len.min(got - done);
        // SAFETY: non-null (checked above), so `iov_len >= k` writable bytes (the contract).
        unsafe { slice_mut(i.iov_base, k) }?.copy_from_slice(&buf[done..done + k]);
        done += k;
    }
    Ok(got as ssize_t)
}

/// # Safety
/// As `writev(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t {
    match desc(fd) {
        // SAFETY: `iov` holds `n` iovecs of valid buffers (the call's contract).
        Some(d) => run(|| unsafe { writev_desc(fd, &d, iov, n, None) }),
        // SAFETY: libc's own call, with the caller's arguments under the same contract.
        None => unsafe { real::writev(fd, iov, n) },
    }
}
/// # Safety
/// As `readv(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t {
    match desc(fd) {
        // SAFETY: `iov` holds `n` iovecs of valid buffers (the call's contract).
        Some(d) => run(|| unsafe { readv_desc(fd, &d, iov, n, None) }),
        // SAFETY: libc's own call, with the caller's arguments under the same contract.
        None => unsafe { real::readv(fd, iov, n) },
    }
}
/// # Safety
/// As `pwritev(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pwritev(fd: c_int, iov: *const iovec, n: c_int, off: off_t) -> ssize_t {
    match desc(fd) {
        // SAFETY: `iov` holds `n` iovecs of valid buffers (the call's contract).
        Some(d) => run(|| unsafe { writev_desc(fd, &d, iov, n, Some(offset(off)?)) }),
        // SAFETY: libc's own call, with the caller's arguments under the same contract.
        None => unsafe { real::pwritev64(fd, iov, n, off) },
    }
}
alias!(pwritev64 => pwritev(fd: c_int, iov: *const iovec, n: c_int, off: off_t) -> ssize_t);
/// # Safety
/// As `preadv(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preadv(fd: c_int, iov: *const iovec, n: c_int, off: off_t) -> ssize_t {
    match desc(fd) {
        // SAFETY: `iov` holds `n` iovecs of valid buffers (the call's contract).
        Some(d) => run(|| unsafe { readv_desc(fd, &d, iov, n, Some(offset(off)?)) }),
        // SAFETY: libc's own call, with the caller's arguments under the same contract.
        None => unsafe { real::preadv64(fd, iov, n, off) },
    }
}
alias!(preadv64 => preadv(fd: c_int, iov: *const iovec, n: c_int, off: off_t) -> ssize_t);
/// `pwritev2`: offset -1 means the current position; the flags (RWF_*) are hints.
///
/// # Safety
/// As `pwritev2(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pwritev2(
    fd: c_int,
    iov: *const iovec,
    n: c_int,
    off: off_t,
    flags: c_int,
) -> ssize_t {
    match desc(fd) {
        // SAFETY: `iov` holds `n` iovecs of valid buffers (the call's contract).
        Some(d) => run(|| unsafe {
            writev_desc(
                fd,
                &d,
                iov,
                n,
                (off != -1).then(|| offset(off)).transpose()?,
            )
        }),
        // SAFETY: libc's own call, with the caller's arguments under the same contract.
        None => unsafe { real::pwritev64v2(fd, iov, n, off, flags) },
    }
}
alias!(pwritev64v2 => pwritev2(fd: c_int, iov: *const iovec, n: c_int, off: off_t, flags: c_int) -> ssize_t);
/// # Safety
/// As `preadv2(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preadv2(
    fd: c_int,
    iov: *const iovec,
    n: c_int,
    off: off_t,
    flags: c_int,
) -> ssize_t {
    match desc(fd) {
        // SAFETY: `iov` holds `n` iovecs of valid buffers (the call's contract).
        Some(d) => {
            // SAFETY: forwarded under this function's own contract.
            run(|| unsafe {
                readv_desc(
                    fd,
                    &d,
                    iov,
                    n,
                    (off != -1).then(|| offset(off)).transpose()?,
                )
            })
        }
        // SAFETY: libc's own call, with the caller's arguments under the same contract.
        None => unsafe { real::preadv64v2(fd, iov, n, off, flags) },
    }
}
alias!(preadv64v2 => preadv2(fd: c_int, iov: *const iovec, n: c_int, off: off_t, flags: c_int) -> ssize_t);

fn lseek_desc(fd: c_int, d: &DescRef, off: off_t, whence: c_int) -> FsResult<off_t> {
    let mut g = state::lock_desc(d);
    let pos = g.position(fd);
    let size = match &mut g.obj {
        Object::File(f) if matches!(whence, libc::SEEK_END | libc::SEEK_DATA | libc::SEEK_HOLE) => {
            f.len()?
        }
        _ => 0,
    };
    let new = seek_target(pos, size, off, whence)?;
    let new_off = off_t::try_from(new)
        .map_err(|_| FsError::new(Errno::Inval, format!("offset {new} does not fit off_t")))?;
    g.set_position(fd, new);
    Ok(new_off)
}

/// # Safety
/// As `lseek(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lseek(fd: c_int, off: off_t, whence: c_int) -> off_t {
    match desc(fd) {
        Some(d) => run(|| lseek_desc(fd, &d, off, whence)),
        // SAFETY: libc's own call, with the caller's arguments under the same contract.
        None => unsafe { real::lseek64(fd, off, whence) },
    }
}
alias!(lseek64 => lseek(fd: c_int, off: off_t, whence: c_int) -> off_t);

fn fsync_desc(d: &DescRef) -> FsResult<c_int> {
    let mut g = state::lock_desc(d);
    match &mut g.obj {
        Object::File(f) => {
            f.fsync()?;
            f.refresh();
            Ok(0)
        }
        _ => Ok(0),
    }
}

/// `fsync`: commit (the writes become visible to every later open or read), make this
/// process's logs of the file durable, and refresh what the process sees of the file. The
/// refresh makes MPI-IO's sync-barrier-sync construct (`MPI_File_sync` is `fsync` in ROMIO and
/// ompio) show the other ranks' writes under the session model too, at one query at the next
/// read (none if the process does not read the file again).
///
/// # Safety
/// As `fsync(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fsync(fd: c_int) -> c_int {
    match desc(fd) {
        Some(d) => run(|| fsync_desc(&d)),
        // SAFETY: libc's own call, with the caller's arguments under the same contract.
        None => unsafe { real::fsync(fd) },
    }
}
/// # Safety
/// As `fdatasync(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fdatasync(fd: c_int) -> c_int {
    match desc(fd) {
        Some(d) => run(|| fsync_desc(&d)),
        // SAFETY: libc's own call, with the caller's arguments under the same contract.
        None => unsafe { real::fdatasync(fd) },
    }
}

fn ftruncate_desc(d: &DescRef, len: off_t) -> FsResult<c_int> {
    let len = offset(len)?;
    let g = state::lock_desc(d);
    if let Object::File(_) = g.obj {
        if g.flags & libc::O_ACCMODE == libc::O_RDONLY {
            return Err(FsError::new(
                Errno::Inval,
                format!("ftruncate: {} is open read-only", g.path),
            ));
        }
        client()?.truncate(&g.path, len)?;
        return Ok(0);
    }
    Err(FsError::new(
        Errno::IsDir,
        format!("{} is a directory", g.path),
    ))
}

/// # Safety
/// As `ftruncate(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ftruncate(fd: c_int, len: off_t) -> c_int {
    match desc(fd) {
        Some(d) => run(|| ftruncate_desc(&d, len)),
        // SAFETY: libc's own call, with the caller's arguments under the same contract.
        None => unsafe { real::ftruncate64(fd, len) },
    }
}
alias!(ftruncate64 => ftruncate(fd: c_int, len: off_t) -> c_int);

/// Makes `new` (a fresh kernel descriptor) another descriptor of `d`.
fn dup_into(new: c_int, d: DescRef) -> c_int {
    if new >= 0 {
        state::install(new, d);
    }
    new
}

/// # Safety
/// As `dup(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dup(fd: c_int) -> c_int {
    crate::guarded(|| {
        if let Some(refused) = crate::library_fds::refuse(fd, "dup") {
            return refused;
        }
        match desc(fd) {
            Some(d) => {
                let _b = Busy::enter();
                // SAFETY: libc's own call, with the caller's arguments under the same contract.
                dup_into(unsafe { real::dup(fd) }, d)
            }
            // SAFETY: libc's own call, with the caller's arguments under the same contract.
            None => unsafe { real::dup(fd) },
        }
    })
}

/// dup2/dup3: if `new` was a Tessera descriptor it is closed first, as the kernel does; if it
/// is one of the library's own, that one moves away first.
unsafe fn dup_to(old: c_int, new: c_int, flags: c_int, dup2: bool) -> c_int {
    if let Some(refused) = crate::library_fds::refuse(old, if dup2 { "dup2" } else { "dup3" }) {
        return refused;
    }
    // The library's descriptor moves only for a call that will succeed: a dup2 from a
    // number that is not open fails without touching `new`.
    if old != new
        && crate::library_fds::named_by_program(new)
        // SAFETY: F_GETFD reads a descriptor's flags and touches no memory.
        && unsafe { real::fcntl(old, libc::F_GETFD, 0) } >= 0
        && let Err(e) = crate::library_fds::make_room(new)
    {
        return fail(&e);
    }
    let (from, to) = (desc(old), desc(new));
    if from.is_none() && to.is_none() {
        // SAFETY: libc's own calls, with the caller's arguments under the same contract.
        return unsafe {
            if dup2 {
                if old == new {
                    // dup2(fd, fd) only checks that fd is open.
                    return if real::fcntl(old, libc::F_GETFD, 0) < 0 {
                        -1
                    } else {
                        new
                    };
                }
                real::dup3(old, new, 0)
            } else {
                real::dup3(old, new, flags)
            }
        };
    }
    if old != new {
        // Before the thread is busy: a stream of ours writes out through the interposer.
        crate::std_streams::before_change(new);
    }
    let _b = Busy::enter();
    if old == new {
        return if dup2 {
            new
        } else {
            fail(&FsError::new(
                Errno::Inval,
                "dup3: old and new descriptors are equal",
            ))
        };
    }
    // SAFETY: plain descriptor numbers.
    let r = unsafe { real::dup3(old, new, flags) };
    if r < 0 {
        return r;
    }
    if let Some(prev) = to.and_then(|_| state::uninstall(new))
        && let Err(e) = state::release(prev)
    {
        fail(&e);
    }
    let tessera = from.is_some();
    let r = match from {
        Some(d) => dup_into(new, d),
        None => new,
    };
    crate::std_streams::after_change(new, tessera);
    r
}

/// # Safety
/// As `dup2(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    // SAFETY: forwarded under this function's own contract.
    unsafe { dup_to(old, new, 0, true) }
}
/// # Safety
/// As `dup3(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    // SAFETY: forwarded under this function's own contract.
    unsafe { dup_to(old, new, flags, false) }
}

/// `F_DUPFD` and `F_DUPFD_CLOEXEC` on a Tessera descriptor.
pub fn dupfd(fd: c_int, d: DescRef, cmd: c_int, min: libc::c_ulong) -> c_int {
    // SAFETY: duplicating the placeholder.
    let new = unsafe { real::fcntl(fd, cmd, min) };
    dup_into(new, d)
}

fn no_copy(fd: c_int) -> FsError {
    FsError::new(
        Errno::XDev,
        format!(
            "descriptor {fd} is a Tessera file: in-kernel copies do not reach it (programs fall back to read and write)"
        ),
    )
}

/// # Safety
/// As `copy_file_range(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn copy_file_range(
    fi: c_int,
    oi: *mut i64,
    fo: c_int,
    oo: *mut i64,
    n: size_t,
    flags: c_uint,
) -> ssize_t {
    crate::guarded(|| {
        for fd in [fi, fo] {
            if desc(fd).is_some() {
                let _b = Busy::enter();
                // EXDEV is the answer a program expects between file systems.
                return fail(&no_copy(fd)) as ssize_t;
            }
        }
        // SAFETY: libc's own call, with the caller's arguments under the same contract.
        unsafe { real::copy_file_range(fi, oi, fo, oo, n, flags) }
    })
}

/// # Safety
/// As `sendfile(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sendfile(out: c_int, inp: c_int, off: *mut i64, n: size_t) -> ssize_t {
    crate::guarded(|| {
        for fd in [out, inp] {
            if desc(fd).is_some() {
                let _b = Busy::enter();
                let e = FsError::new(
                    Errno::Inval,
                    format!("sendfile: descriptor {fd} is a Tessera file; use read and write"),
                );
                return fail(&e) as ssize_t;
            }
        }
        // SAFETY: libc's own call, with the caller's arguments under the same contract.
        unsafe { real::sendfile64(out, inp, off, n) }
    })
}
alias!(sendfile64 => sendfile(out: c_int, inp: c_int, off: *mut i64, n: size_t) -> ssize_t);

/// Advice is accepted and ignored on Tessera files (returns 0, as for any file system that
/// has no use for it).
///
/// # Safety
/// As `posix_fadvise(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn posix_fadvise(fd: c_int, off: off_t, len: off_t, advice: c_int) -> c_int {
    crate::guarded(|| {
        if desc(fd).is_some() {
            return 0;
        }
        // SAFETY: libc's own call, with the caller's arguments under the same contract.
        unsafe { real::posix_fadvise64(fd, off, len, advice) }
    })
}
alias!(posix_fadvise64 => posix_fadvise(fd: c_int, off: off_t, len: off_t, advice: c_int) -> c_int);

/// `fallocate(fd, mode, off, len)` on a Tessera descriptor: preallocation only (mode 0, or
/// `FALLOC_FL_KEEP_SIZE`). The bytes are reserved in the burst buffer, so later writes do not
/// fail for want of space, and unless KEEP_SIZE the file grows to cover them (reading as
/// zeros), as on a local file system.
fn allocate_desc(fd: c_int, d: &DescRef, mode: c_int, off: off_t, len: off_t) -> FsResult<()> {
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
        // SAFETY: libc's own call, with the caller's arguments under the same contract.
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
        // SAFETY: libc's own call, with the caller's arguments under the same contract.
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
        // SAFETY: libc's own call, with the caller's arguments under the same contract.
        unsafe { real::mmap64(addr, len, prot, flags, fd, off) }
    })
}

/// The private copy [`mmap`] makes of a Tessera file.
///
/// # Safety
/// `addr`, `len` and `flags` as `mmap(2)` takes them (a `MAP_FIXED` address replaces what
/// the caller mapped there).
unsafe fn map_copy(
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

/// The description of a Tessera descriptor or EBADF (for calls that need one).
pub fn require(fd: c_int) -> FsResult<DescRef> {
    desc(fd).ok_or_else(|| ebadf(fd))
}

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
    // SAFETY: libc's own call, with the caller's arguments.
    unsafe { real::readahead(fd, off, count) }
}
