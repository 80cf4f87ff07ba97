//! The `fts_*` functions (and their 64 forms) on trees with a root in Tessera. glibc's walk
//! stats and lists through internal calls the interposer never sees; a walk with a Tessera
//! root goes through the interposer's own `stat`, `lstat`, `opendir` and `readdir` instead,
//! with BSD fts's (and glibc's) rules: roots in the order given (or sorted by `compar`), each
//! directory reported before (`FTS_D`) and after (`FTS_DP`) its entries, which are read when
//! the walk enters it and sorted by `compar`; `FTS_PHYSICAL` reports links (`FTS_SL`),
//! `FTS_LOGICAL` follows them (`FTS_SLNONE` when dangling), `FTS_COMFOLLOW` follows roots;
//! `FTS_NOSTAT` gives `FTS_NSOK` for what the directory entry shows is no directory;
//! `FTS_SEEDOT` reports `.` and `..` (`FTS_DOT`); `FTS_XDEV` does not descend into another
//! device; a directory that is its own ancestor is `FTS_DC`; an unreadable one is reported
//! again as `FTS_DNR`, an empty one again as `FTS_DP`; `fts_set` takes `FTS_SKIP`,
//! `FTS_AGAIN` and `FTS_FOLLOW`; `fts_children` lists the entries of the directory just
//! reported (or the roots). Unlike glibc's, the walk never changes the working directory
//! (as with `FTS_NOCHDIR`): `fts_accpath` is the whole path, valid from where the walk
//! began. Each entry has its own `fts_path`; a directory's entries are freed once the walk
//! has moved past the directory's `FTS_DP`. Walks whose roots are all elsewhere go to
//! glibc's own functions.

use crate::{real, tessera_path};
use libc::{c_char, c_int, c_long, c_ushort, c_void};
use std::collections::HashMap;
use std::ffi::CStr;
use std::sync::Mutex;
use tessera_cabi::{errno, set_errno};

/// `FTSENT` (and `FTSENT64`, the same on 64-bit Linux) of `<fts.h>`.
#[repr(C)]
pub struct FtsEnt {
    pub fts_cycle: *mut FtsEnt,
    pub fts_parent: *mut FtsEnt,
    pub fts_link: *mut FtsEnt,
    pub fts_number: c_long,
    pub fts_pointer: *mut c_void,
    pub fts_accpath: *mut c_char,
    pub fts_path: *mut c_char,
    pub fts_errno: c_int,
    pub fts_symfd: c_int,
    pub fts_pathlen: c_ushort,
    pub fts_namelen: c_ushort,
    pub fts_ino: u64,
    pub fts_dev: u64,
    pub fts_nlink: libc::nlink_t,
    pub fts_level: i16,
    pub fts_info: c_ushort,
    pub fts_flags: c_ushort,
    pub fts_instr: c_ushort,
    pub fts_statp: *mut libc::stat64,
    pub fts_name: [c_char; 1],
}

/// `FTS` of `<fts.h>`: handed to the caller, who may read `fts_cur`.
#[repr(C)]
pub struct Fts {
    pub fts_cur: *mut FtsEnt,
    pub fts_child: *mut FtsEnt,
    pub fts_array: *mut *mut FtsEnt,
    pub fts_dev: u64,
    pub fts_path: *mut c_char,
    pub fts_rfd: c_int,
    pub fts_pathlen: c_int,
    pub fts_nitems: c_int,
    pub fts_compar: Compar,
    pub fts_options: c_int,
}

/// The comparison argument: given pointers to two entry pointers.
pub type Compar = Option<unsafe extern "C" fn(*const *const FtsEnt, *const *const FtsEnt) -> c_int>;

// Options, kinds and instructions of <fts.h>.
const FTS_COMFOLLOW: c_int = 0x0001;
const FTS_LOGICAL: c_int = 0x0002;
const FTS_NOSTAT: c_int = 0x0008;
const FTS_SEEDOT: c_int = 0x0020;
const FTS_XDEV: c_int = 0x0040;
const FTS_OPTIONMASK: c_int = 0x00ff;
const FTS_D: c_ushort = 1;
const FTS_DC: c_ushort = 2;
const FTS_DEFAULT: c_ushort = 3;
const FTS_DNR: c_ushort = 4;
const FTS_DOT: c_ushort = 5;
const FTS_DP: c_ushort = 6;
const FTS_F: c_ushort = 8;
const FTS_NS: c_ushort = 10;
const FTS_NSOK: c_ushort = 11;
const FTS_SL: c_ushort = 12;
const FTS_SLNONE: c_ushort = 13;
const FTS_AGAIN: c_ushort = 1;
const FTS_FOLLOW: c_ushort = 2;
const FTS_NOINSTR: c_ushort = 3;
const FTS_SKIP: c_ushort = 4;
const FTS_SYMFOLLOW: c_ushort = 0x02;

/// A directory the walk is inside: its entry, its entries, and the next to report.
struct Frame {
    dir: *mut FtsEnt,
    entries: Vec<*mut FtsEnt>,
    next: usize,
}

/// One walk of the interposer's.
struct Walk {
    options: c_int,
    compar: Compar,
    /// The parent of the roots (level -1), as glibc gives one.
    root_parent: *mut FtsEnt,
    roots: Vec<*mut FtsEnt>,
    next_root: usize,
    frames: Vec<Frame>,
    /// Entries of a directory `fts_children` read, for the descent that follows.
    read_ahead: Option<(*mut FtsEnt, Vec<*mut FtsEnt>)>,
    /// The read-ahead entries handed to the step under way (see [`Walk::read`]).
    ahead_entries: Option<Vec<*mut FtsEnt>>,
    /// The device of the root the walk is in (`FTS_XDEV`).
    root_dev: u64,
    /// Entries to free at the next step (a directory's, once its `FTS_DP` was reported).
    finished: Vec<*mut FtsEnt>,
}

// SAFETY: the entries are the walk's own allocations, used by one caller at a time (fts is
// not thread-safe, and the table's lock serialises the interposer's own access).
unsafe impl Send for Walk {}

/// The interposer's walks, by the address of the `FTS` handed out.
static WALKS: Mutex<Option<HashMap<usize, Walk>>> = Mutex::new(None);

/// The interposer's walk behind `fts`, taken out of the table while it runs: the walk calls
/// the interposer (and the comparator, the caller's code) without the table's lock held.
/// `None`: a walk of glibc's.
fn take_walk(fts: *mut Fts) -> Option<Walk> {
    let mut g = WALKS.lock().unwrap_or_else(|p| p.into_inner());
    g.as_mut().and_then(|m| m.remove(&(fts as usize)))
}

/// Puts a walk (back) into the table under its `FTS`.
fn put_walk(fts: *mut Fts, walk: Walk) {
    WALKS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(fts as usize, walk);
}

/// A new entry for `name` at `path` (malloc'd, with its stat buffer and path), or NULL.
fn alloc_entry(name: &[u8], path: &[u8], parent: *mut FtsEnt, level: i16) -> *mut FtsEnt {
    let size = std::mem::offset_of!(FtsEnt, fts_name) + name.len() + 1;
    // SAFETY: fresh allocations of the sizes asked for, checked for NULL below.
    let (e, st, p) = unsafe {
        (
            libc::calloc(1, size.max(std::mem::size_of::<FtsEnt>())) as *mut FtsEnt,
            libc::calloc(1, std::mem::size_of::<libc::stat64>()) as *mut libc::stat64,
            libc::malloc(path.len() + 1) as *mut c_char,
        )
    };
    if e.is_null() || st.is_null() || p.is_null() {
        // SAFETY: free accepts NULL and the blocks just allocated.
        unsafe {
            libc::free(e.cast());
            libc::free(st.cast());
            libc::free(p.cast());
        }
        set_errno(libc::ENOMEM);
        return std::ptr::null_mut();
    }
    // SAFETY: `e` holds the header and `name.len() + 1` name bytes; `p` holds the path and
    // its NUL.
    unsafe {
        std::ptr::copy_nonoverlapping(name.as_ptr().cast(), (*e).fts_name.as_mut_ptr(), name.len());
        *(*e).fts_name.as_mut_ptr().add(name.len()) = 0;
        std::ptr::copy_nonoverlapping(path.as_ptr().cast(), p, path.len());
        *p.add(path.len()) = 0;
        (*e).fts_path = p;
        (*e).fts_accpath = p;
        (*e).fts_pathlen = path.len().min(u16::MAX as usize) as c_ushort;
        (*e).fts_namelen = name.len().min(u16::MAX as usize) as c_ushort;
        (*e).fts_parent = parent;
        (*e).fts_level = level;
        (*e).fts_statp = st;
        (*e).fts_instr = FTS_NOINSTR;
        (*e).fts_symfd = -1;
    }
    e
}

/// Frees an entry the walk made.
///
/// # Safety
/// `e` came from [`alloc_entry`] and is freed once.
unsafe fn free_entry(e: *mut FtsEnt) {
    if e.is_null() {
        return;
    }
    // SAFETY: the blocks `alloc_entry` allocated (this function's contract).
    unsafe {
        libc::free((*e).fts_statp.cast());
        libc::free((*e).fts_path.cast());
        libc::free(e.cast());
    }
}

impl Walk {
    fn set(&self, o: c_int) -> bool {
        self.options & o != 0
    }

    /// Stats `e` (following links when `follow`) and sets its kind, as glibc's `fts_stat`.
    fn stat(&self, e: *mut FtsEnt, follow: bool) -> c_ushort {
        // SAFETY: `e` is one of the walk's entries; its path is NUL-terminated and its stat
        // buffer writable.
        unsafe {
            let p = (*e).fts_accpath;
            let st = (*e).fts_statp;
            (*e).fts_errno = 0;
            let failed = if follow {
                if crate::meta::stat64(p, st) != 0 {
                    let e0 = errno();
                    if e0 == libc::ENOENT && crate::meta::lstat64(p, st) == 0 {
                        set_errno(0);
                        return FTS_SLNONE;
                    }
                    Some(e0)
                } else {
                    None
                }
            } else if crate::meta::lstat64(p, st) != 0 {
                Some(errno())
            } else {
                None
            };
            if let Some(err) = failed {
                (*e).fts_errno = err;
                std::ptr::write_bytes(st, 0, 1);
                return FTS_NS;
            }
            (*e).fts_ino = (*st).st_ino;
            (*e).fts_dev = (*st).st_dev;
            (*e).fts_nlink = (*st).st_nlink;
            match (*st).st_mode & libc::S_IFMT {
                libc::S_IFDIR => {
                    let name = CStr::from_ptr((*e).fts_name.as_ptr()).to_bytes();
                    if name == b"." || name == b".." {
                        return FTS_DOT;
                    }
                    // A directory that is its own ancestor: a cycle through links.
                    let mut up = (*e).fts_parent;
                    while !up.is_null() && (*up).fts_level >= 0 {
                        if (*up).fts_ino == (*st).st_ino && (*up).fts_dev == (*st).st_dev {
                            (*e).fts_cycle = up;
                            return FTS_DC;
                        }
                        up = (*up).fts_parent;
                    }
                    FTS_D
                }
                libc::S_IFLNK => FTS_SL,
                libc::S_IFREG => FTS_F,
                _ => FTS_DEFAULT,
            }
        }
    }

    /// The entries of directory `dir`, stat'ed and sorted; `None` when it cannot be read
    /// (its kind is then `FTS_DNR`, its errno set).
    fn entries_of(&self, dir: *mut FtsEnt) -> Option<Vec<*mut FtsEnt>> {
        // SAFETY: `dir` is one of the walk's entries, its path NUL-terminated.
        let (dpath, level) = unsafe {
            (
                CStr::from_ptr((*dir).fts_path).to_bytes().to_vec(),
                (*dir).fts_level,
            )
        };
        // SAFETY: the interposer's opendir, with a NUL-terminated path.
        let d = unsafe { crate::dirs::opendir((*dir).fts_accpath) };
        if d.is_null() {
            // SAFETY: as above.
            unsafe {
                (*dir).fts_errno = errno();
                (*dir).fts_info = FTS_DNR;
            }
            return None;
        }
        let mut out = Vec::new();
        loop {
            // SAFETY: an open stream of the interposer's.
            let de = unsafe { crate::dirs::readdir64(d) };
            if de.is_null() {
                break;
            }
            // SAFETY: a valid entry, its name NUL-terminated.
            let (name, dtype) = unsafe {
                (
                    CStr::from_ptr((*de).d_name.as_ptr()).to_bytes().to_vec(),
                    (*de).d_type,
                )
            };
            let dot = name == b"." || name == b"..";
            if dot && !self.set(FTS_SEEDOT) {
                continue;
            }
            let mut path = dpath.clone();
            if path.last() != Some(&b'/') {
                path.push(b'/');
            }
            path.extend_from_slice(&name);
            let e = alloc_entry(&name, &path, dir, level + 1);
            if e.is_null() {
                break;
            }
            let nostat = self.set(FTS_NOSTAT)
                && !self.set(FTS_LOGICAL)
                && !dot
                && dtype != libc::DT_DIR
                && dtype != libc::DT_UNKNOWN;
            // SAFETY: `e` was just allocated.
            unsafe {
                if nostat {
                    (*e).fts_info = FTS_NSOK;
                    (*(*e).fts_statp).st_mode = (u32::from(dtype) << 12) & libc::S_IFMT;
                } else {
                    (*e).fts_info = self.stat(e, self.set(FTS_LOGICAL));
                }
            }
            out.push(e);
        }
        // SAFETY: closing the stream opened above.
        unsafe { crate::dirs::closedir(d) };
        self.sort(&mut out);
        Some(out)
    }

    /// Sorts entries with the caller's `compar`, as glibc's (`qsort` on the pointers).
    fn sort(&self, entries: &mut [*mut FtsEnt]) {
        let Some(cmp) = self.compar else {
            return;
        };
        if entries.len() > 1 {
            // SAFETY: qsort hands the comparator pointers to two elements of the array,
            // which is what fts's `compar` takes.
            unsafe {
                let cmp: unsafe extern "C" fn(*const c_void, *const c_void) -> c_int =
                    std::mem::transmute(cmp);
                libc::qsort(
                    entries.as_mut_ptr().cast(),
                    entries.len(),
                    std::mem::size_of::<*mut FtsEnt>(),
                    Some(cmp),
                );
            }
        }
    }

    /// Links entries through `fts_link`, in order; the first.
    fn link(entries: &[*mut FtsEnt]) -> *mut FtsEnt {
        for pair in entries.windows(2) {
            // SAFETY: the walk's entries.
            unsafe { (*pair[0]).fts_link = pair[1] };
        }
        if let Some(last) = entries.last() {
            // SAFETY: as above.
            unsafe { (**last).fts_link = std::ptr::null_mut() };
        }
        entries.first().copied().unwrap_or(std::ptr::null_mut())
    }

    fn free_finished(&mut self) {
        for e in self.finished.drain(..) {
            // SAFETY: entries the walk made and no longer hands out.
            unsafe { free_entry(e) };
        }
    }

    /// The next entry of the walk, after `cur` (the one reported last, NULL at the start).
    fn read(&mut self, cur: *mut FtsEnt) -> *mut FtsEnt {
        self.free_finished();
        // Entries `fts_children` read serve only the descent into the directory they are of,
        // which can only be this step; whatever it does not use goes (freed at the next).
        match self.read_ahead.take() {
            Some((d, entries)) if d == cur => self.ahead_entries = Some(entries),
            Some((_, stale)) => self.finished.extend(stale),
            None => {}
        }
        let next = self.step(cur);
        if let Some(unused) = self.ahead_entries.take() {
            self.finished.extend(unused);
        }
        next
    }

    /// The next entry after `cur`.
    fn step(&mut self, cur: *mut FtsEnt) -> *mut FtsEnt {
        if cur.is_null() {
            return self.next_root();
        }
        // SAFETY: `cur` is the walk's entry reported last.
        let (instr, info) = unsafe { ((*cur).fts_instr, (*cur).fts_info) };
        // SAFETY: as above.
        unsafe { (*cur).fts_instr = FTS_NOINSTR };
        if instr == FTS_AGAIN {
            // SAFETY: as above.
            unsafe { (*cur).fts_info = self.stat(cur, self.set(FTS_LOGICAL)) };
            return cur;
        }
        if instr == FTS_FOLLOW && (info == FTS_SL || info == FTS_SLNONE) {
            // SAFETY: as above.
            unsafe {
                (*cur).fts_info = self.stat(cur, true);
                if (*cur).fts_info == FTS_D {
                    (*cur).fts_flags |= FTS_SYMFOLLOW;
                }
            }
            return cur;
        }
        if info == FTS_D {
            // SAFETY: as above.
            let skip = instr == FTS_SKIP
                || (self.set(FTS_XDEV) && unsafe { (*cur).fts_dev } != self.root_dev);
            let entries = if skip {
                None
            } else if let Some(read) = self.ahead_entries.take() {
                Some(read)
            } else {
                self.entries_of(cur)
            };
            match entries {
                Some(entries) if !entries.is_empty() => {
                    Self::link(&entries);
                    let first = entries[0];
                    self.frames.push(Frame {
                        dir: cur,
                        entries,
                        next: 1,
                    });
                    return first;
                }
                Some(_) | None => {
                    // Skipped or empty: reported again after (as `FTS_DP`); unreadable:
                    // again as `FTS_DNR` (set by `entries_of`).
                    // SAFETY: as above.
                    unsafe {
                        if (*cur).fts_info == FTS_D {
                            (*cur).fts_info = FTS_DP;
                        }
                    }
                    return cur;
                }
            }
        }
        self.next_after(cur)
    }

    /// `e` as the walk is to report it, after the caller's instruction for it: `None` for
    /// `FTS_SKIP` (passed over), a link followed for `FTS_FOLLOW`.
    fn instructed(&self, e: *mut FtsEnt) -> Option<*mut FtsEnt> {
        // SAFETY: an entry of the walk.
        unsafe {
            let instr = (*e).fts_instr;
            (*e).fts_instr = FTS_NOINSTR;
            match instr {
                FTS_SKIP => None,
                FTS_FOLLOW if matches!((*e).fts_info, FTS_SL | FTS_SLNONE) => {
                    (*e).fts_info = self.stat(e, true);
                    if (*e).fts_info == FTS_D {
                        (*e).fts_flags |= FTS_SYMFOLLOW;
                    }
                    Some(e)
                }
                _ => Some(e),
            }
        }
    }

    /// The entry after `cur` when `cur` is not descended into: its next sibling, else its
    /// directory again (`FTS_DP`), else the next root.
    fn next_after(&mut self, _cur: *mut FtsEnt) -> *mut FtsEnt {
        loop {
            let Some(frame) = self.frames.last_mut() else {
                return self.next_root();
            };
            let Some(&e) = frame.entries.get(frame.next) else {
                break;
            };
            frame.next += 1;
            if let Some(e) = self.instructed(e) {
                return e;
            }
        }
        let frame = self.frames.pop().expect("checked above");
        // The directory's entries go once the walk has moved past its `FTS_DP`.
        self.finished.extend(frame.entries);
        // SAFETY: the directory's entry belongs to the walk.
        unsafe { (*frame.dir).fts_info = FTS_DP };
        frame.dir
    }

    fn next_root(&mut self) -> *mut FtsEnt {
        while let Some(&r) = self.roots.get(self.next_root) {
            self.next_root += 1;
            if let Some(r) = self.instructed(r) {
                // `FTS_XDEV` keeps a walk on the device of the root it is in.
                // SAFETY: a root entry of the walk.
                self.root_dev = unsafe { (*r).fts_dev };
                return r;
            }
        }
        set_errno(0);
        std::ptr::null_mut()
    }
}

/// Whether any of the roots is a Tessera path.
///
/// # Safety
/// `argv` is a NULL-terminated array of NUL-terminated strings.
unsafe fn any_tessera(argv: *const *const c_char) -> bool {
    if argv.is_null() {
        return false;
    }
    let mut p = argv;
    loop {
        // SAFETY: within the NULL-terminated array (this function's contract).
        let s = unsafe { *p };
        if s.is_null() {
            return false;
        }
        // SAFETY: NUL-terminated (this function's contract).
        if unsafe { tessera_path(libc::AT_FDCWD, s) }.is_some() {
            return true;
        }
        // SAFETY: the array goes on to its NULL.
        p = unsafe { p.add(1) };
    }
}

/// # Safety
/// As `fts_open(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fts64_open(
    argv: *const *const c_char,
    options: c_int,
    compar: Compar,
) -> *mut Fts {
    crate::guarded(|| {
        // SAFETY: the caller's NULL-terminated array (fts_open's contract).
        if !unsafe { any_tessera(argv) } {
            // SAFETY: the caller's arguments, passed unchanged to the real `fts64_open`, whose contract the caller met in calling it.
            return unsafe { real::fts64_open(argv, options, compar) };
        }
        if options & !FTS_OPTIONMASK != 0 {
            set_errno(libc::EINVAL);
            return std::ptr::null_mut();
        }
        let mut walk = Walk {
            options,
            compar,
            root_parent: alloc_entry(b"", b"", std::ptr::null_mut(), -1),
            roots: Vec::new(),
            next_root: 0,
            frames: Vec::new(),
            read_ahead: None,
            ahead_entries: None,
            root_dev: 0,
            finished: Vec::new(),
        };
        let mut p = argv;
        loop {
            // SAFETY: within the NULL-terminated array.
            let s = unsafe { *p };
            if s.is_null() {
                break;
            }
            // SAFETY: NUL-terminated.
            let name = unsafe { CStr::from_ptr(s) }.to_bytes();
            if name.is_empty() {
                for r in walk.roots.drain(..).chain([walk.root_parent]) {
                    // SAFETY: the entries just made.
                    unsafe { free_entry(r) };
                }
                set_errno(libc::ENOENT);
                return std::ptr::null_mut();
            }
            let e = alloc_entry(name, name, walk.root_parent, 0);
            if e.is_null() {
                return std::ptr::null_mut();
            }
            let follow = options & (FTS_COMFOLLOW | FTS_LOGICAL) != 0;
            // SAFETY: the entry just made. A root named "." or ".." is a real directory.
            unsafe {
                (*e).fts_info = match walk.stat(e, follow) {
                    FTS_DOT => FTS_D,
                    kind => kind,
                }
            };
            walk.roots.push(e);
            // SAFETY: the array goes on to its NULL.
            p = unsafe { p.add(1) };
        }
        // Sorted by the names as given; then a root's name is its last component (its path
        // stays as given), as glibc's.
        let mut roots = walk.roots.clone();
        walk.sort(&mut roots);
        walk.roots = roots;
        for &r in &walk.roots {
            // SAFETY: a root entry just made; its name is NUL-terminated, and the last
            // component is moved to its start, within its bytes.
            unsafe {
                let name = (*r).fts_name.as_mut_ptr();
                let whole = CStr::from_ptr(name).to_bytes().to_vec();
                let end = whole
                    .iter()
                    .rposition(|&b| b != b'/')
                    .map_or(whole.len(), |e| e + 1);
                let start = whole[..end]
                    .iter()
                    .rposition(|&b| b == b'/')
                    .map_or(0, |i| i + 1);
                if start > 0 && start < end {
                    let base = &whole[start..end];
                    std::ptr::copy_nonoverlapping(base.as_ptr().cast(), name, base.len());
                    *name.add(base.len()) = 0;
                    (*r).fts_namelen = base.len() as c_ushort;
                }
            }
        }
        Walk::link(&walk.roots);
        // SAFETY: a zeroed FTS for the caller, freed at fts_close.
        let fts = unsafe { libc::calloc(1, std::mem::size_of::<Fts>()) } as *mut Fts;
        if fts.is_null() {
            set_errno(libc::ENOMEM);
            return fts;
        }
        // SAFETY: just allocated.
        unsafe {
            (*fts).fts_options = options;
            (*fts).fts_compar = compar;
        }
        put_walk(fts, walk);
        fts
    })
}
alias!(fts_open => fts64_open(argv: *const *const c_char, options: c_int, compar: Compar) -> *mut Fts);

/// # Safety
/// As `fts_read(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fts64_read(fts: *mut Fts) -> *mut FtsEnt {
    crate::guarded(|| {
        if fts.is_null() {
            set_errno(libc::EINVAL);
            return std::ptr::null_mut();
        }
        let taken = take_walk(fts);
        let Some(mut walk) = taken else {
            // SAFETY: glibc's own call on its own walk.
            return unsafe { real::fts64_read(fts) };
        };
        // SAFETY: our FTS, allocated at open.
        let cur = unsafe { (*fts).fts_cur };
        let next = walk.read(cur);
        // SAFETY: as above.
        unsafe { (*fts).fts_cur = next };
        put_walk(fts, walk);
        next
    })
}
alias!(fts_read => fts64_read(fts: *mut Fts) -> *mut FtsEnt);

/// # Safety
/// As `fts_children(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fts64_children(fts: *mut Fts, options: c_int) -> *mut FtsEnt {
    crate::guarded(|| {
        let taken = take_walk(fts);
        let Some(mut walk) = taken else {
            // SAFETY: glibc's own call on its own walk.
            return unsafe { real::fts64_children(fts, options) };
        };
        // SAFETY: our FTS, allocated at open.
        let cur = unsafe { (*fts).fts_cur };
        let out = if options != 0 && options != 0x0100 {
            set_errno(libc::EINVAL);
            std::ptr::null_mut()
        } else if cur.is_null() {
            set_errno(0);
            walk.roots.first().copied().unwrap_or(std::ptr::null_mut())
        } else if {
            // SAFETY: the walk's entry reported last.
            unsafe { (*cur).fts_info }
        } != FTS_D
        {
            set_errno(0);
            std::ptr::null_mut()
        } else {
            if let Some((_, stale)) = walk.read_ahead.take() {
                walk.finished.extend(stale);
            }
            match walk.entries_of(cur) {
                Some(entries) => {
                    let first = Walk::link(&entries);
                    walk.read_ahead = Some((cur, entries));
                    set_errno(0);
                    first
                }
                None => std::ptr::null_mut(),
            }
        };
        put_walk(fts, walk);
        out
    })
}
alias!(fts_children => fts64_children(fts: *mut Fts, options: c_int) -> *mut FtsEnt);

/// # Safety
/// As `fts_set(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fts64_set(fts: *mut Fts, e: *mut FtsEnt, instr: c_int) -> c_int {
    let ours = {
        let g = WALKS.lock().unwrap_or_else(|p| p.into_inner());
        g.as_ref().is_some_and(|m| m.contains_key(&(fts as usize)))
    };
    if !ours {
        // SAFETY: glibc's own call on its own walk.
        return unsafe { real::fts64_set(fts, e, instr) };
    }
    let valid = [0, FTS_AGAIN, FTS_FOLLOW, FTS_NOINSTR, FTS_SKIP];
    if e.is_null() || !valid.iter().any(|v| c_int::from(*v) == instr) {
        set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: an entry of the caller's walk (fts_set's contract).
    unsafe { (*e).fts_instr = instr as c_ushort };
    0
}
alias!(fts_set => fts64_set(fts: *mut Fts, e: *mut FtsEnt, instr: c_int) -> c_int);

/// # Safety
/// As `fts_close(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fts64_close(fts: *mut Fts) -> c_int {
    let taken = take_walk(fts);
    let Some(mut walk) = taken else {
        // SAFETY: glibc's own call on its own walk.
        return unsafe { real::fts64_close(fts) };
    };
    walk.free_finished();
    let mut all: Vec<*mut FtsEnt> = walk.roots.drain(..).collect();
    all.push(walk.root_parent);
    for f in walk.frames.drain(..) {
        all.extend(f.entries);
    }
    if let Some((_, entries)) = walk.read_ahead.take() {
        all.extend(entries);
    }
    for e in all {
        // SAFETY: every entry the walk still holds, each once.
        unsafe { free_entry(e) };
    }
    // SAFETY: our FTS, allocated at open, freed once.
    unsafe { libc::free(fts.cast()) };
    0
}
alias!(fts_close => fts64_close(fts: *mut Fts) -> c_int);
