//! `nftw` and `ftw` (and their 64 forms) on Tessera trees. glibc's walk stats and lists
//! through internal calls the interposer never sees; here a walk that starts under the prefix
//! (or relative to a Tessera working directory) goes through the interposer's own `stat`,
//! `lstat`, `opendir`, `readdir` and `chdir`, with glibc's rules: trailing slashes of the
//! start are dropped; entries in directory order; `FTW_PHYS` reports links (`FTW_SL`), without
//! it they are followed, a dangling one is `FTW_SLN` and a directory seen before is skipped;
//! `FTW_DEPTH` reports a directory after its entries (`FTW_DP`); `FTW_CHDIR` calls back from
//! within the entry's directory; `FTW_ACTIONRETVAL` honours `FTW_SKIP_SUBTREE`,
//! `FTW_SKIP_SIBLINGS` and `FTW_STOP`; an unreadable directory is `FTW_DNR`, a failed stat
//! `FTW_NS`. `ftw` is `nftw` with its older callback and types (`FTW_SL` as `FTW_F`, `FTW_SLN`
//! as `FTW_NS`). Walks that start elsewhere go to glibc's own functions.

use crate::{real, tessera_path};
use libc::{c_char, c_int};
use std::collections::HashSet;
use std::ffi::{CStr, CString};
use tessera_cabi::errno;

/// `struct FTW` of `<ftw.h>`: where the name starts in the path, and the depth.
#[repr(C)]
pub struct FtwBuf {
    pub base: c_int,
    pub level: c_int,
}

/// The callback of `nftw`.
pub type NftwFn =
    Option<unsafe extern "C" fn(*const c_char, *const libc::stat64, c_int, *mut FtwBuf) -> c_int>;
/// The callback of `ftw`.
pub type FtwFn = Option<unsafe extern "C" fn(*const c_char, *const libc::stat64, c_int) -> c_int>;

// The type flags and walk flags of <ftw.h>.
const FTW_F: c_int = 0;
const FTW_D: c_int = 1;
const FTW_DNR: c_int = 2;
const FTW_NS: c_int = 3;
const FTW_SL: c_int = 4;
const FTW_DP: c_int = 5;
const FTW_SLN: c_int = 6;
const FTW_PHYS: c_int = 1;
const FTW_CHDIR: c_int = 4;
const FTW_DEPTH: c_int = 8;
const FTW_ACTIONRETVAL: c_int = 16;
const FTW_SKIP_SUBTREE: c_int = 2;
const FTW_SKIP_SIBLINGS: c_int = 3;

/// Which callback the walk calls.
#[derive(Clone, Copy)]
enum Callback {
    Nftw(unsafe extern "C" fn(*const c_char, *const libc::stat64, c_int, *mut FtwBuf) -> c_int),
    Ftw(unsafe extern "C" fn(*const c_char, *const libc::stat64, c_int) -> c_int),
}

/// One walk: the path being visited (its bytes), the flags and the directories seen.
struct Walk {
    callback: Callback,
    flags: c_int,
    path: Vec<u8>,
    seen: HashSet<(u64, u64)>,
    /// The working directory to return to (`FTW_CHDIR`), as the walk began.
    start_cwd: Option<CString>,
}

impl Walk {
    fn flag(&self, f: c_int) -> bool {
        self.flags & f != 0
    }

    /// The current path as the callback gets it.
    fn c_path(&self) -> CString {
        CString::new(self.path.clone()).expect("built from C strings")
    }

    /// The current path for the walk's own calls: under `FTW_CHDIR` a relative one is taken
    /// against where the walk began, since the working directory moves.
    fn call_path(&self) -> CString {
        match (&self.start_cwd, self.path.first()) {
            (Some(cwd), Some(b)) if *b != b'/' => {
                let mut p = cwd.as_bytes().to_vec();
                p.push(b'/');
                p.extend_from_slice(&self.path);
                CString::new(p).expect("built from C strings")
            }
            _ => self.c_path(),
        }
    }

    /// Calls back for the current path.
    fn call(&self, st: &libc::stat64, kind: c_int, base: usize, level: usize) -> c_int {
        let p = self.c_path();
        match self.callback {
            Callback::Nftw(f) => {
                let mut buf = FtwBuf {
                    base: base as c_int,
                    level: level as c_int,
                };
                // SAFETY: the caller's callback, given a path, a stat and an FTW that live
                // through the call.
                unsafe { f(p.as_ptr(), st, kind, &mut buf) }
            }
            Callback::Ftw(f) => {
                let kind = match kind {
                    FTW_SL => FTW_F,
                    FTW_DP => FTW_D,
                    FTW_SLN => FTW_NS,
                    k => k,
                };
                // SAFETY: as above.
                unsafe { f(p.as_ptr(), st, kind) }
            }
        }
    }

    /// Stats the current path as the walk's flags say; `None` with errno set on failure.
    fn stat(&self, follow: bool) -> Option<libc::stat64> {
        let p = self.call_path();
        // SAFETY: plain data, filled by the call.
        let mut st: libc::stat64 = unsafe { std::mem::zeroed() };
        // SAFETY: the interposer's own stat calls, with a NUL-terminated path and a buffer.
        let r = unsafe {
            if follow {
                crate::meta::stat64(p.as_ptr(), &mut st)
            } else {
                crate::meta::lstat64(p.as_ptr(), &mut st)
            }
        };
        (r == 0).then_some(st)
    }

    /// Visits the current path (an entry at `level` whose name starts at `base`).
    fn entry(&mut self, base: usize, level: usize) -> c_int {
        let phys = self.flag(FTW_PHYS);
        let (st, kind) = match self.stat(!phys) {
            Some(st) => {
                let kind = match st.st_mode & libc::S_IFMT {
                    libc::S_IFDIR => FTW_D,
                    libc::S_IFLNK => FTW_SL,
                    _ => FTW_F,
                };
                (st, kind)
            }
            None => {
                let e = errno();
                if e != libc::EACCES && e != libc::ENOENT {
                    return -1;
                }
                match (phys, self.stat(false)) {
                    (false, Some(st)) if st.st_mode & libc::S_IFMT == libc::S_IFLNK => {
                        (st, FTW_SLN)
                    }
                    // SAFETY: plain data: a zeroed stat for FTW_NS, as nothing is known.
                    _ => (unsafe { std::mem::zeroed() }, FTW_NS),
                }
            }
        };
        let r = if kind == FTW_D {
            if !phys && !self.seen.insert((st.st_dev, st.st_ino)) {
                return 0;
            }
            self.directory(&st, base, level)
        } else {
            self.call(&st, kind, base, level)
        };
        if self.flag(FTW_ACTIONRETVAL) && r == FTW_SKIP_SUBTREE {
            0
        } else {
            r
        }
    }

    /// Enters the working directory `dir` (relative paths against where the walk began).
    fn enter(&self, dir: &[u8]) -> bool {
        let target = match (&self.start_cwd, dir.first()) {
            (Some(cwd), Some(b)) if *b != b'/' => {
                let mut t = cwd.as_bytes().to_vec();
                t.push(b'/');
                t.extend_from_slice(dir);
                t
            }
            _ => dir.to_vec(),
        };
        let Ok(c) = CString::new(target) else {
            return false;
        };
        // SAFETY: the interposer's chdir with a NUL-terminated path.
        unsafe { crate::meta::chdir(c.as_ptr()) == 0 }
    }

    /// Visits the directory at the current path: itself, then its entries.
    fn directory(&mut self, st: &libc::stat64, base: usize, level: usize) -> c_int {
        let p = self.call_path();
        // SAFETY: the interposer's opendir with a NUL-terminated path.
        let d = unsafe { crate::dirs::opendir(p.as_ptr()) };
        if d.is_null() {
            return if errno() == libc::EACCES {
                self.call(st, FTW_DNR, base, level)
            } else {
                -1
            };
        }
        // Reported once open, before its entries are read (as glibc's walk does).
        if !self.flag(FTW_DEPTH) {
            let r = self.call(st, FTW_D, base, level);
            if r != 0 {
                // SAFETY: closing the stream opened above.
                unsafe { crate::dirs::closedir(d) };
                return r;
            }
        }
        let mut names: Vec<Vec<u8>> = Vec::new();
        loop {
            // SAFETY: an open stream of the interposer's.
            let e = unsafe { crate::dirs::readdir64(d) };
            if e.is_null() {
                break;
            }
            // SAFETY: a valid entry whose name is NUL-terminated.
            let name = unsafe { CStr::from_ptr((*e).d_name.as_ptr()) }.to_bytes();
            if name != b"." && name != b".." {
                names.push(name.to_vec());
            }
        }
        // SAFETY: closing the stream opened above.
        unsafe { crate::dirs::closedir(d) };
        let here = self.path.clone();
        let chdir = self.flag(FTW_CHDIR);
        if chdir && !self.enter(&here) {
            return -1;
        }
        let mut r = 0;
        for name in names {
            self.path.truncate(here.len());
            if self.path.last() != Some(&b'/') {
                self.path.push(b'/');
            }
            let child_base = self.path.len();
            self.path.extend_from_slice(&name);
            // A directory among them returns the working directory here when it is done.
            r = self.entry(child_base, level + 1);
            if r != 0 {
                break;
            }
        }
        self.path = here;
        // Siblings skipped: the directory itself is still reported after its entries.
        if self.flag(FTW_ACTIONRETVAL) && r == FTW_SKIP_SIBLINGS {
            r = 0;
        }
        // After its entries, from inside it (as glibc's walk), then back to its parent. What
        // this callback answers goes up as it is: `FTW_SKIP_SIBLINGS` skips the directory's
        // own siblings.
        if r == 0 && self.flag(FTW_DEPTH) {
            r = self.call(st, FTW_DP, base, level);
        }
        if chdir {
            let parent = match self.path.iter().rposition(|&b| b == b'/') {
                Some(0) => b"/".to_vec(),
                Some(i) => self.path[..i].to_vec(),
                None => b".".to_vec(),
            };
            if !self.enter(&parent) {
                return -1;
            }
        }
        r
    }
}

/// Walks the Tessera tree at `dir`.
///
/// # Safety
/// `dir` is NUL-terminated.
unsafe fn walk(dir: *const c_char, callback: Callback, flags: c_int) -> c_int {
    // SAFETY: NUL-terminated (this function's contract).
    let mut path = unsafe { CStr::from_ptr(dir) }.to_bytes().to_vec();
    if path.is_empty() {
        tessera_cabi::set_errno(libc::ENOENT);
        return -1;
    }
    while path.len() > 1 && path.last() == Some(&b'/') {
        path.pop();
    }
    let base = path.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1);
    let start_cwd = (flags & FTW_CHDIR != 0).then(|| {
        let mut buf = vec![0u8; libc::PATH_MAX as usize];
        // SAFETY: the interposer's getcwd into a buffer of PATH_MAX bytes.
        let r = unsafe { crate::meta::getcwd(buf.as_mut_ptr().cast(), buf.len()) };
        if r.is_null() {
            return None;
        }
        let len = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        buf.truncate(len);
        CString::new(buf).ok()
    });
    let start_cwd = match start_cwd {
        Some(None) => return -1,
        Some(Some(c)) => Some(c),
        None => None,
    };
    let mut w = Walk {
        callback,
        flags,
        path,
        seen: HashSet::new(),
        start_cwd,
    };
    let phys = w.flag(FTW_PHYS);
    let mut r = match w.stat(!phys) {
        Some(st) if st.st_mode & libc::S_IFMT == libc::S_IFDIR => {
            if !phys {
                w.seen.insert((st.st_dev, st.st_ino));
            }
            w.directory(&st, base, 0)
        }
        Some(st) => {
            let kind = if st.st_mode & libc::S_IFMT == libc::S_IFLNK {
                FTW_SL
            } else {
                FTW_F
            };
            w.call(&st, kind, base, 0)
        }
        None if !phys && errno() == libc::ENOENT => match w.stat(false) {
            Some(st) if st.st_mode & libc::S_IFMT == libc::S_IFLNK => w.call(&st, FTW_SLN, base, 0),
            _ => -1,
        },
        None => -1,
    };
    if let Some(cwd) = &w.start_cwd {
        let saved = errno();
        // SAFETY: the interposer's chdir, back to where the walk began.
        unsafe { crate::meta::chdir(cwd.as_ptr()) };
        tessera_cabi::set_errno(saved);
    }
    if w.flag(FTW_ACTIONRETVAL) && (r == FTW_SKIP_SUBTREE || r == FTW_SKIP_SIBLINGS) {
        r = 0;
    }
    r
}

/// # Safety
/// As `nftw(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nftw64(
    dir: *const c_char,
    f: NftwFn,
    nopenfd: c_int,
    flags: c_int,
) -> c_int {
    crate::guarded(|| {
        // SAFETY: NUL-terminated or NULL by the caller's contract.
        match (unsafe { tessera_path(libc::AT_FDCWD, dir) }, f) {
            // SAFETY: a Tessera path, NUL-terminated.
            (Some(_), Some(f)) => unsafe { walk(dir, Callback::Nftw(f), flags) },
            // SAFETY: the caller's arguments, passed unchanged to the real `nftw64`, whose contract the caller met in calling it.
            _ => unsafe { real::nftw64(dir, f, nopenfd, flags) },
        }
    })
}
alias!(nftw => nftw64(dir: *const c_char, f: NftwFn, nopenfd: c_int, flags: c_int) -> c_int);

/// # Safety
/// As `ftw(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ftw64(dir: *const c_char, f: FtwFn, nopenfd: c_int) -> c_int {
    crate::guarded(|| {
        // SAFETY: NUL-terminated or NULL by the caller's contract.
        match (unsafe { tessera_path(libc::AT_FDCWD, dir) }, f) {
            // SAFETY: a Tessera path, NUL-terminated.
            (Some(_), Some(f)) => unsafe { walk(dir, Callback::Ftw(f), 0) },
            // SAFETY: the caller's arguments, passed unchanged to the real `ftw64`, whose contract the caller met in calling it.
            _ => unsafe { real::ftw64(dir, f, nopenfd) },
        }
    })
}
alias!(ftw => ftw64(dir: *const c_char, f: FtwFn, nopenfd: c_int) -> c_int);
