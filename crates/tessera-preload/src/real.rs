//! The next definition of each intercepted function (libc's, or the MPI library's), found once
//! with `dlsym(RTLD_NEXT)` (else in a privately loaded library, see [`crate::loaded`]) and
//! cached.

use libc::{c_char, c_int, c_void, mode_t, off_t, size_t, ssize_t};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Looks up `name` (NUL-terminated) in the objects after this one; aborts with a message if
/// none has it (nothing sensible can be done then).
pub fn lookup(slot: &AtomicUsize, name: &'static [u8]) -> usize {
    let p = slot.load(Ordering::Relaxed);
    if p != 0 {
        return p;
    }
    // SAFETY: `name` is NUL-terminated.
    let mut p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr().cast()) } as usize;
    if p == 0 {
        // A library loaded privately (libmpi under Python) is not after this one.
        p = std::ffi::CStr::from_bytes_with_nul(name)
            .ok()
            .and_then(crate::loaded::private)
            .unwrap_or(0);
    }
    if p == 0 {
        // Written piecewise without allocating: this may run inside malloc's callers.
        let name = &name[..name.len().saturating_sub(1)];
        let parts: [&[u8]; 3] = [
            b"tessera preload: ",
            name,
            b", a function it forwards to, is in no library loaded after it; unset LD_PRELOAD\n",
        ];
        for part in parts {
            // SAFETY: writing a static buffer to stderr.
            unsafe { libc::write(2, part.as_ptr().cast(), part.len()) };
        }
        // SAFETY: ending the process, which cannot go on without the function.
        unsafe { libc::abort() };
    }
    slot.store(p, Ordering::Relaxed);
    p
}

/// Declares `real::NAME(args)` calling the next definition of `NAME`.
macro_rules! real_fns {
    ($( fn $name:ident ( $($arg:ident : $ty:ty),* ) -> $ret:ty; )*) => {
        $(
            /// Calls libc's definition.
            ///
            /// # Safety
            /// As for the libc function of the same name.
            pub unsafe fn $name($($arg: $ty),*) -> $ret {
                static SLOT: AtomicUsize = AtomicUsize::new(0);
                let p = lookup(&SLOT, concat!(stringify!($name), "\0").as_bytes());
                // SAFETY: the symbol has this C signature.
                let f: unsafe extern "C" fn($($ty),*) -> $ret = unsafe { std::mem::transmute(p) };
                // SAFETY: libc's definition of this symbol, called with the caller's arguments.
                unsafe { f($($arg),*) }
            }
        )*
    };
}

real_fns! {
    fn open(path: *const c_char, flags: c_int, mode: mode_t) -> c_int;
    fn openat(dirfd: c_int, path: *const c_char, flags: c_int, mode: mode_t) -> c_int;
    fn close(fd: c_int) -> c_int;
    fn read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t;
    fn write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t;
    fn pread64(fd: c_int, buf: *mut c_void, n: size_t, off: off_t) -> ssize_t;
    fn pwrite64(fd: c_int, buf: *const c_void, n: size_t, off: off_t) -> ssize_t;
    fn readv(fd: c_int, iov: *const libc::iovec, n: c_int) -> ssize_t;
    fn writev(fd: c_int, iov: *const libc::iovec, n: c_int) -> ssize_t;
    fn preadv64(fd: c_int, iov: *const libc::iovec, n: c_int, off: off_t) -> ssize_t;
    fn pwritev64(fd: c_int, iov: *const libc::iovec, n: c_int, off: off_t) -> ssize_t;
    fn preadv64v2(fd: c_int, iov: *const libc::iovec, n: c_int, off: off_t, flags: c_int) -> ssize_t;
    fn pwritev64v2(fd: c_int, iov: *const libc::iovec, n: c_int, off: off_t, flags: c_int) -> ssize_t;
    fn lseek64(fd: c_int, off: off_t, whence: c_int) -> off_t;
    fn fsync(fd: c_int) -> c_int;
    fn fdatasync(fd: c_int) -> c_int;
    fn ftruncate64(fd: c_int, len: off_t) -> c_int;
    fn truncate64(path: *const c_char, len: off_t) -> c_int;
    fn fstatat64(dirfd: c_int, path: *const c_char, buf: *mut libc::stat64, flags: c_int) -> c_int;
    fn fstat64(fd: c_int, buf: *mut libc::stat64) -> c_int;
    fn statx(dirfd: c_int, path: *const c_char, flags: c_int, mask: libc::c_uint, buf: *mut libc::statx) -> c_int;
    fn faccessat(dirfd: c_int, path: *const c_char, mode: c_int, flags: c_int) -> c_int;
    fn unlinkat(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int;
    fn mkdirat(dirfd: c_int, path: *const c_char, mode: mode_t) -> c_int;
    fn mknodat(dirfd: c_int, path: *const c_char, mode: mode_t, dev: libc::dev_t) -> c_int;
    fn symlinkat(target: *const c_char, dirfd: c_int, path: *const c_char) -> c_int;
    fn linkat(olddirfd: c_int, old: *const c_char, newdirfd: c_int, new: *const c_char, flags: c_int) -> c_int;
    fn renameat2(od: c_int, old: *const c_char, nd: c_int, new: *const c_char, flags: libc::c_uint) -> c_int;
    fn opendir(path: *const c_char) -> *mut libc::DIR;
    fn fdopendir(fd: c_int) -> *mut libc::DIR;
    fn readdir64(d: *mut libc::DIR) -> *mut libc::dirent64;
    fn closedir(d: *mut libc::DIR) -> c_int;
    fn dirfd(d: *mut libc::DIR) -> c_int;
    fn rewinddir(d: *mut libc::DIR) -> ();
    fn telldir(d: *mut libc::DIR) -> libc::c_long;
    fn seekdir(d: *mut libc::DIR, pos: libc::c_long) -> ();
    fn statfs64(path: *const c_char, buf: *mut libc::statfs64) -> c_int;
    fn fstatfs64(fd: c_int, buf: *mut libc::statfs64) -> c_int;
    fn statvfs64(path: *const c_char, buf: *mut libc::statvfs64) -> c_int;
    fn fstatvfs64(fd: c_int, buf: *mut libc::statvfs64) -> c_int;
    fn dup(fd: c_int) -> c_int;
    fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int;
    fn fcntl(fd: c_int, cmd: c_int, arg: libc::c_ulong) -> c_int;
    fn ioctl(fd: c_int, req: libc::c_ulong, arg: *mut c_void) -> c_int;
    fn flock(fd: c_int, op: c_int) -> c_int;
    fn fopen64(path: *const c_char, mode: *const c_char) -> *mut libc::FILE;
    fn fdopen(fd: c_int, mode: *const c_char) -> *mut libc::FILE;
    fn fileno(f: *mut libc::FILE) -> c_int;
    fn fclose(f: *mut libc::FILE) -> c_int;
    fn copy_file_range(fi: c_int, oi: *mut i64, fo: c_int, oo: *mut i64, n: size_t, flags: libc::c_uint) -> ssize_t;
    fn sendfile64(out: c_int, inp: c_int, off: *mut i64, n: size_t) -> ssize_t;
    fn posix_fadvise64(fd: c_int, off: off_t, len: off_t, advice: c_int) -> c_int;
    fn posix_fallocate64(fd: c_int, off: off_t, len: off_t) -> c_int;
    fn fallocate64(fd: c_int, mode: c_int, off: off_t, len: off_t) -> c_int;
    fn fchmodat(dirfd: c_int, path: *const c_char, mode: mode_t, flags: c_int) -> c_int;
    fn fchmod(fd: c_int, mode: mode_t) -> c_int;
    fn fchownat(dirfd: c_int, path: *const c_char, uid: libc::uid_t, gid: libc::gid_t, flags: c_int) -> c_int;
    fn fchown(fd: c_int, uid: libc::uid_t, gid: libc::gid_t) -> c_int;
    fn utimensat(dirfd: c_int, path: *const c_char, times: *const libc::timespec, flags: c_int) -> c_int;
    fn futimens(fd: c_int, times: *const libc::timespec) -> c_int;
    fn getxattr(path: *const c_char, name: *const c_char, v: *mut c_void, n: size_t) -> ssize_t;
    fn lgetxattr(path: *const c_char, name: *const c_char, v: *mut c_void, n: size_t) -> ssize_t;
    fn fgetxattr(fd: c_int, name: *const c_char, v: *mut c_void, n: size_t) -> ssize_t;
    fn listxattr(path: *const c_char, list: *mut c_char, n: size_t) -> ssize_t;
    fn llistxattr(path: *const c_char, list: *mut c_char, n: size_t) -> ssize_t;
    fn flistxattr(fd: c_int, list: *mut c_char, n: size_t) -> ssize_t;
    fn setxattr(path: *const c_char, name: *const c_char, v: *const c_void, n: size_t, flags: c_int) -> c_int;
    fn lsetxattr(path: *const c_char, name: *const c_char, v: *const c_void, n: size_t, flags: c_int) -> c_int;
    fn fsetxattr(fd: c_int, name: *const c_char, v: *const c_void, n: size_t, flags: c_int) -> c_int;
    fn removexattr(path: *const c_char, name: *const c_char) -> c_int;
    fn lremovexattr(path: *const c_char, name: *const c_char) -> c_int;
    fn fremovexattr(fd: c_int, name: *const c_char) -> c_int;
    fn readlinkat(dirfd: c_int, path: *const c_char, buf: *mut c_char, n: size_t) -> ssize_t;
    fn chdir(path: *const c_char) -> c_int;
    fn fchdir(fd: c_int) -> c_int;
    fn getcwd(buf: *mut c_char, size: size_t) -> *mut c_char;
    fn execve(path: *const c_char, argv: *const *const c_char, envp: *const *const c_char) -> c_int;
    fn execvpe(file: *const c_char, argv: *const *const c_char, envp: *const *const c_char) -> c_int;
    fn fexecve(fd: c_int, argv: *const *const c_char, envp: *const *const c_char) -> c_int;
    fn system(command: *const c_char) -> c_int;
    fn popen(command: *const c_char, mode: *const c_char) -> *mut libc::FILE;
    fn posix_spawn(pid: *mut libc::pid_t, path: *const c_char, actions: *const libc::posix_spawn_file_actions_t, attr: *const libc::posix_spawnattr_t, argv: *const *mut c_char, envp: *const *mut c_char) -> c_int;
    fn posix_spawnp(pid: *mut libc::pid_t, file: *const c_char, actions: *const libc::posix_spawn_file_actions_t, attr: *const libc::posix_spawnattr_t, argv: *const *mut c_char, envp: *const *mut c_char) -> c_int;
    fn mmap64(addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off_t) -> *mut c_void;
    fn mkostemps64(template: *mut c_char, suffixlen: c_int, flags: c_int) -> c_int;
    fn __chk_fail() -> ();
    fn __read_chk(fd: c_int, buf: *mut c_void, n: size_t, buflen: size_t) -> ssize_t;
    fn __pread_chk(fd: c_int, buf: *mut c_void, n: size_t, off: off_t, buflen: size_t) -> ssize_t;
    fn __readlinkat_chk(dirfd: c_int, path: *const c_char, buf: *mut c_char, n: size_t, buflen: size_t) -> ssize_t;
    fn __open_2(path: *const c_char, flags: c_int) -> c_int;
    fn __openat_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int;
    fn realpath(path: *const c_char, resolved: *mut c_char) -> *mut c_char;
    fn scandir64(dir: *const c_char, list: *mut *mut *mut libc::dirent64, filter: crate::scandir::Filter, compar: crate::scandir::Compar) -> c_int;
    fn scandirat64(dirfd: c_int, dir: *const c_char, list: *mut *mut *mut libc::dirent64, filter: crate::scandir::Filter, compar: crate::scandir::Compar) -> c_int;
    fn glob64(pattern: *const c_char, flags: c_int, errfunc: crate::globbing::ErrFunc, pglob: *mut crate::globbing::Glob) -> c_int;
    fn nftw64(dir: *const c_char, f: crate::walk::NftwFn, nopenfd: c_int, flags: c_int) -> c_int;
    fn ftw64(dir: *const c_char, f: crate::walk::FtwFn, nopenfd: c_int) -> c_int;
    fn mkdtemp(template: *mut c_char) -> *mut c_char;
    fn get_current_dir_name() -> *mut c_char;
    fn lockf64(fd: c_int, cmd: c_int, len: off_t) -> c_int;
    fn pathconf(path: *const c_char, name: c_int) -> libc::c_long;
    fn fpathconf(fd: c_int, name: c_int) -> libc::c_long;
    fn syncfs(fd: c_int) -> c_int;
    fn sync_file_range(fd: c_int, off: off_t, n: off_t, flags: libc::c_uint) -> c_int;
    fn splice(fd_in: c_int, off_in: *mut i64, fd_out: c_int, off_out: *mut i64, len: size_t, flags: libc::c_uint) -> ssize_t;
    fn freopen64(path: *const c_char, mode: *const c_char, stream: *mut libc::FILE) -> *mut libc::FILE;
    fn readahead(fd: c_int, off: off_t, count: size_t) -> ssize_t;
    fn fts64_open(argv: *const *const c_char, options: c_int, compar: crate::fts::Compar) -> *mut crate::fts::Fts;
    fn fts64_read(fts: *mut crate::fts::Fts) -> *mut crate::fts::FtsEnt;
    fn fts64_children(fts: *mut crate::fts::Fts, options: c_int) -> *mut crate::fts::FtsEnt;
    fn fts64_set(fts: *mut crate::fts::Fts, e: *mut crate::fts::FtsEnt, instr: c_int) -> c_int;
    fn fts64_close(fts: *mut crate::fts::Fts) -> c_int;
    fn mktemp(template: *mut c_char) -> *mut c_char;
    fn ftok(path: *const c_char, id: c_int) -> libc::key_t;
    fn execveat(dirfd: c_int, path: *const c_char, argv: *const *const c_char, envp: *const *const c_char, flags: c_int) -> c_int;
    fn dlopen(path: *const c_char, flags: c_int) -> *mut c_void;
    fn dlmopen(lmid: libc::c_long, path: *const c_char, flags: c_int) -> *mut c_void;
    fn open_tree(dirfd: c_int, path: *const c_char, flags: libc::c_uint) -> c_int;
    fn chroot(path: *const c_char) -> c_int;
    fn mount(src: *const c_char, target: *const c_char, fstype: *const c_char, flags: libc::c_ulong, data: *const c_void) -> c_int;
    fn umount(target: *const c_char) -> c_int;
    fn umount2(target: *const c_char, flags: c_int) -> c_int;
    fn swapon(path: *const c_char, flags: c_int) -> c_int;
    fn swapoff(path: *const c_char) -> c_int;
    fn acct(path: *const c_char) -> c_int;
    fn pivot_root(new_root: *const c_char, put_old: *const c_char) -> c_int;
    fn quotactl(cmd: c_int, special: *const c_char, id: c_int, addr: *mut c_char) -> c_int;
    fn inotify_add_watch(fd: c_int, path: *const c_char, mask: u32) -> c_int;
    fn fanotify_mark(fd: c_int, flags: libc::c_uint, mask: u64, dirfd: c_int, path: *const c_char) -> c_int;
    fn name_to_handle_at(dirfd: c_int, path: *const c_char, handle: *mut c_void, mount_id: *mut c_int, flags: c_int) -> c_int;
    fn posix_spawn_file_actions_addopen(actions: *mut libc::posix_spawn_file_actions_t, fd: c_int, path: *const c_char, oflag: c_int, mode: mode_t) -> c_int;
    fn posix_spawn_file_actions_addchdir_np(actions: *mut libc::posix_spawn_file_actions_t, path: *const c_char) -> c_int;
    fn posix_spawn_file_actions_addfchdir_np(actions: *mut libc::posix_spawn_file_actions_t, fd: c_int) -> c_int;
}

real_fns! {
    fn aio_read(cb: *mut libc::aiocb) -> c_int;
    fn aio_write(cb: *mut libc::aiocb) -> c_int;
    fn aio_fsync(op: c_int, cb: *mut libc::aiocb) -> c_int;
    fn aio_error(cb: *const libc::aiocb) -> c_int;
    fn aio_return(cb: *mut libc::aiocb) -> ssize_t;
    fn aio_suspend(list: *const *const libc::aiocb, n: c_int, timeout: *const libc::timespec) -> c_int;
    fn aio_cancel(fd: c_int, cb: *mut libc::aiocb) -> c_int;
    fn lio_listio(mode: c_int, list: *const *mut libc::aiocb, n: c_int, ev: *mut libc::sigevent) -> c_int;
}

/// Calls libc's `_exit`.
///
/// # Safety
/// As `_exit(2)`.
pub unsafe fn _exit(status: c_int) -> ! {
    static SLOT: AtomicUsize = AtomicUsize::new(0);
    let p = lookup(&SLOT, b"_exit\0");
    // SAFETY: the symbol has this C signature.
    let f: unsafe extern "C" fn(c_int) -> ! = unsafe { std::mem::transmute(p) };
    // SAFETY: libc's definition of this symbol, called with the caller's argument.
    unsafe { f(status) }
}
