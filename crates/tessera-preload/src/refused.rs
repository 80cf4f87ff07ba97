//! Calls that cannot act on a Tessera path or descriptor: mounting, swapping, accounting,
//! changing the root, watching for changes (inotify, fanotify), file handles, and the file
//! actions of `posix_spawn` (glibc runs them in a child that shares its parent's memory, where
//! the interposer cannot serve them). Given a Tessera path, the kernel would answer `ENOENT`
//! for a file that exists; each of these answers `ENOTSUP` (`EPERM` for the privileged ones,
//! as the kernel would for a file system that cannot take part) with the reason, shown on
//! stderr only under `TESSERA_VERBOSE`. Anything else goes to libc unchanged.

use crate::state::desc;
use crate::{real, run_quiet_on, tessera_path};
use libc::{c_char, c_int, c_uint, c_ulong, c_void, mode_t, posix_spawn_file_actions_t};
use tessera_client::{Errno, FsError};

/// Answers a Tessera path given to `call` with `errno` and the reason; `-1`.
fn refuse(call: &str, path: Result<String, FsError>, errno: Errno, why: &str) -> c_int {
    run_quiet_on(&[errno], || {
        let p = path?;
        Err::<c_int, _>(FsError::new(errno, format!("{call} {p}: {why}")))
    })
}

/// Whether `path` (relative to the working directory) is Tessera's, and which it is.
///
/// # Safety
/// `path` is NULL or NUL-terminated.
unsafe fn ours(path: *const c_char) -> Option<Result<String, FsError>> {
    // SAFETY: this function's own contract.
    unsafe { tessera_path(libc::AT_FDCWD, path) }
}

const NOT_A_DEVICE: &str =
    "Tessera is no block device or mount point; the kernel cannot mount, swap or account there";

/// Defines libc's `$name`, whose first argument is a path: a Tessera path is refused with
/// `$errno` and `$why`, anything else goes to libc.
macro_rules! refuse_path_first {
    ($name:ident($path:ident $(, $arg:ident: $ty:ty)*), $errno:expr, $why:expr) => {
        #[doc = concat!("`", stringify!($name), "`: refused on a Tessera path (see the module).")]
        ///
        /// # Safety
        /// As libc's function of the same name.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name($path: *const c_char $(, $arg: $ty)*) -> c_int {
            // SAFETY: NUL-terminated or NULL by the call's contract.
            match unsafe { ours($path) } {
                Some(p) => refuse(stringify!($name), p, $errno, $why),
                // SAFETY: the caller's arguments, passed unchanged to the real `name`, whose contract the caller met in calling it.
                None => unsafe { real::$name($path $(, $arg)*) },
            }
        }
    };
}

refuse_path_first!(
    chroot(path),
    Errno::NotSup,
    "the kernel cannot make a Tessera directory the root (it does not see it); use a real directory"
);
refuse_path_first!(umount(target), Errno::Perm, NOT_A_DEVICE);
refuse_path_first!(umount2(target, flags: c_int), Errno::Perm, NOT_A_DEVICE);
refuse_path_first!(swapon(path, flags: c_int), Errno::Perm, NOT_A_DEVICE);
refuse_path_first!(swapoff(path), Errno::Perm, NOT_A_DEVICE);
refuse_path_first!(acct(path), Errno::Perm, NOT_A_DEVICE);

/// # Safety
/// As `mount(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mount(
    src: *const c_char,
    target: *const c_char,
    fstype: *const c_char,
    flags: c_ulong,
    data: *const c_void,
) -> c_int {
    // SAFETY: NUL-terminated or NULL by the call's contract.
    if let Some(p) = unsafe { ours(target) }.or_else(|| unsafe { ours(src) }) {
        return refuse("mount", p, Errno::Perm, NOT_A_DEVICE);
    }
    // SAFETY: the caller's arguments, passed unchanged to the real `mount`, whose contract the caller met in calling it.
    unsafe { real::mount(src, target, fstype, flags, data) }
}

/// # Safety
/// As `pivot_root(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pivot_root(new_root: *const c_char, put_old: *const c_char) -> c_int {
    // SAFETY: NUL-terminated or NULL by the call's contract.
    if let Some(p) = unsafe { ours(new_root) }.or_else(|| unsafe { ours(put_old) }) {
        return refuse("pivot_root", p, Errno::Perm, NOT_A_DEVICE);
    }
    // SAFETY: the caller's arguments, passed unchanged to the real `pivot_root`, whose contract the caller met in calling it.
    unsafe { real::pivot_root(new_root, put_old) }
}

/// # Safety
/// As `quotactl(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn quotactl(
    cmd: c_int,
    special: *const c_char,
    id: c_int,
    addr: *mut c_char,
) -> c_int {
    // SAFETY: NUL-terminated or NULL by the call's contract.
    match unsafe { ours(special) } {
        Some(p) => refuse(
            "quotactl",
            p,
            Errno::NotSup,
            "Tessera keeps no quotas; the burst buffer's capacity is its limit",
        ),
        // SAFETY: the caller's arguments, passed unchanged to the real `quotactl`, whose contract the caller met in calling it.
        None => unsafe { real::quotactl(cmd, special, id, addr) },
    }
}

const NO_WATCH: &str =
    "the kernel sees no changes in Tessera, so it cannot report them; poll with stat instead";

/// # Safety
/// As `inotify_add_watch(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn inotify_add_watch(fd: c_int, path: *const c_char, mask: u32) -> c_int {
    // SAFETY: NUL-terminated or NULL by the call's contract.
    match unsafe { ours(path) } {
        Some(p) => refuse("inotify_add_watch", p, Errno::NotSup, NO_WATCH),
        // SAFETY: the caller's arguments, passed unchanged to the real `inotify_add_watch`, whose contract the caller met in calling it.
        None => unsafe { real::inotify_add_watch(fd, path, mask) },
    }
}

/// # Safety
/// As `fanotify_mark(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fanotify_mark(
    fd: c_int,
    flags: c_uint,
    mask: u64,
    dirfd: c_int,
    path: *const c_char,
) -> c_int {
    // SAFETY: NUL-terminated or NULL by the call's contract.
    match unsafe { tessera_path(dirfd, path) } {
        Some(p) => refuse("fanotify_mark", p, Errno::NotSup, NO_WATCH),
        // SAFETY: the caller's arguments, passed unchanged to the real `fanotify_mark`, whose contract the caller met in calling it.
        None => unsafe { real::fanotify_mark(fd, flags, mask, dirfd, path) },
    }
}

/// # Safety
/// As `name_to_handle_at(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn name_to_handle_at(
    dirfd: c_int,
    path: *const c_char,
    handle: *mut c_void,
    mount_id: *mut c_int,
    flags: c_int,
) -> c_int {
    // SAFETY: NUL-terminated or NULL by the call's contract.
    match unsafe { tessera_path(dirfd, path) } {
        Some(p) => refuse(
            "name_to_handle_at",
            p,
            Errno::NotSup,
            "Tessera gives out no file handles (as a file system that cannot be exported)",
        ),
        // SAFETY: the caller's arguments, passed unchanged to the real `name_to_handle_at`, whose contract the caller met in calling it.
        None => unsafe { real::name_to_handle_at(dirfd, path, handle, mount_id, flags) },
    }
}

const SPAWN_ACTIONS: &str = "posix_spawn runs its file actions in a child that shares its parent's memory, where Tessera cannot be reached; open the file first and add a dup2 action, or change directory with `cd DIR && cmd`";

/// The error numbers `posix_spawn_file_actions_*` return (they return it, not -1).
fn returned(r: c_int) -> c_int {
    if r < 0 { tessera_cabi::errno() } else { r }
}

/// # Safety
/// As `posix_spawn_file_actions_addopen(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn posix_spawn_file_actions_addopen(
    actions: *mut posix_spawn_file_actions_t,
    fd: c_int,
    path: *const c_char,
    oflag: c_int,
    mode: mode_t,
) -> c_int {
    // SAFETY: NUL-terminated or NULL by the call's contract.
    match unsafe { ours(path) } {
        Some(p) => returned(refuse(
            "posix_spawn_file_actions_addopen",
            p,
            Errno::NotSup,
            SPAWN_ACTIONS,
        )),
        // SAFETY: the caller's arguments, passed unchanged to the real `posix_spawn_file_actions_addopen`, whose contract the caller met in calling it.
        None => unsafe { real::posix_spawn_file_actions_addopen(actions, fd, path, oflag, mode) },
    }
}

/// # Safety
/// As `posix_spawn_file_actions_addchdir_np(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn posix_spawn_file_actions_addchdir_np(
    actions: *mut posix_spawn_file_actions_t,
    path: *const c_char,
) -> c_int {
    // SAFETY: NUL-terminated or NULL by the call's contract.
    match unsafe { ours(path) } {
        Some(p) => returned(refuse(
            "posix_spawn_file_actions_addchdir_np",
            p,
            Errno::NotSup,
            SPAWN_ACTIONS,
        )),
        // SAFETY: the caller's arguments, passed unchanged to the real `posix_spawn_file_actions_addchdir_np`, whose contract the caller met in calling it.
        None => unsafe { real::posix_spawn_file_actions_addchdir_np(actions, path) },
    }
}

/// # Safety
/// As `posix_spawn_file_actions_addfchdir_np(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn posix_spawn_file_actions_addfchdir_np(
    actions: *mut posix_spawn_file_actions_t,
    fd: c_int,
) -> c_int {
    if let Some(d) = desc(fd) {
        let p = crate::state::lock_desc(&d).path.clone();
        return returned(refuse(
            "posix_spawn_file_actions_addfchdir_np",
            Ok(p),
            Errno::NotSup,
            SPAWN_ACTIONS,
        ));
    }
    // SAFETY: the caller's arguments, passed unchanged to the real `posix_spawn_file_actions_addfchdir_np`, whose contract the caller met in calling it.
    unsafe { real::posix_spawn_file_actions_addfchdir_np(actions, fd) }
}

/// # Safety
/// As `open_tree(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn open_tree(dirfd: c_int, path: *const c_char, flags: c_uint) -> c_int {
    // SAFETY: NUL-terminated or NULL by the call's contract.
    match unsafe { tessera_path(dirfd, path) } {
        Some(p) => refuse("open_tree", p, Errno::NotSup, NOT_A_DEVICE),
        // SAFETY: the caller's arguments, passed unchanged to the real `open_tree`, whose contract the caller met in calling it.
        None => unsafe { real::open_tree(dirfd, path, flags) },
    }
}
