//! The mount: each FUSE request answered through the client library, as the interposer
//! answers a program's calls (one client, so one consistency contract and one lock
//! service for both).
//!
//! **Caches.** The kernel keeps names and attributes for no time at all (a zero TTL): every
//! lookup and stat comes here, and is answered from the client's attribute cache while the
//! shard's lease on the entry holds, so a change anywhere is seen as the interposer sees it.
//! File pages stay in the kernel's cache only within one open under the session model
//! (close-to-open: an open drops them, a close publishes the writes); every other model
//! opens with direct I/O, so each read and write reaches the client and its model.

use crate::convert::{BLOCK_SIZE, errno, file_attr, file_type, ns_of};
use crate::handles::Handles;
use crate::inodes::{Names, child};
use crate::locks::Locks;
use fuser::{
    FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, KernelConfig, LockOwner,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyLock, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow,
    WriteFlags,
};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};
use tessera_client::{
    Attr, AttrChange, Client, Errno as TErrno, File, FsError, InstanceLayout, Model, OpenOptions,
    SetMode,
};

/// How long the kernel may keep a name or attributes without asking: not at all (see the
/// module's comment on caches).
const TTL: Duration = Duration::ZERO;

type Answer<T> = Result<T, fuser::Errno>;

/// An open file: the client's handle, and whether it appends.
pub struct Open {
    pub file: File,
    append: bool,
}

/// A directory listing taken at opendir: (node id, kind, name), `.` and `..` first.
type Listing = Vec<(u64, FileType, String)>;

/// The file system a mount serves.
pub struct TesseraFs {
    client: Client,
    /// The user path of the mount's root (the instance's prefix, `/tessera`).
    prefix: String,
    model: Model,
    names: Mutex<Names>,
    /// The last attributes seen of each node id the kernel holds, for a stat through a
    /// handle whose name was removed.
    last: Mutex<HashMap<u64, Attr>>,
    files: Handles<Open>,
    dirs: Handles<Listing>,
    locks: Locks,
}

fn name_of(name: &OsStr) -> Answer<&str> {
    name.to_str().ok_or(fuser::Errno::EILSEQ)
}

fn fail(e: FsError) -> fuser::Errno {
    tracing::debug!("{e}");
    errno(&e)
}

impl TesseraFs {
    /// Serves the instance at `layout` through `client` (connected to its node `node`),
    /// opening files under `model`.
    pub fn new(client: Client, layout: InstanceLayout, node: u32, model: Model) -> TesseraFs {
        let prefix = client.config().mount.trim_end_matches('/').to_string();
        TesseraFs {
            locks: Locks::new(layout, node),
            client,
            prefix,
            model,
            names: Mutex::default(),
            last: Mutex::default(),
            files: Handles::default(),
            dirs: Handles::default(),
        }
    }

    /// The user path (with the instance's prefix) of a path below the mount.
    fn user(&self, path: &str) -> String {
        format!("{}{path}", self.prefix)
    }

    fn path_of(&self, id: INodeNo) -> Answer<String> {
        let names = self.names.lock().expect("names");
        // A name removed meanwhile: the kernel's id is stale.
        names
            .path(id.0)
            .map(str::to_string)
            .ok_or(fuser::Errno::ESTALE)
    }

    fn child_of(&self, parent: INodeNo, name: &OsStr) -> Answer<String> {
        Ok(child(&self.path_of(parent)?, name_of(name)?))
    }

    fn stat(&self, path: &str) -> Answer<Attr> {
        let a = self.client.stat(&self.user(path)).map_err(fail)?;
        self.last.lock().expect("attrs").insert(a.ino, a.clone());
        Ok(a)
    }

    /// Looks `path` up for the kernel: its attributes, and one more lookup of its id.
    fn entry(&self, path: &str) -> Answer<Attr> {
        let a = self.stat(path)?;
        self.names.lock().expect("names").looked_up(path, a.ino);
        Ok(a)
    }

    fn reply_entry(&self, path: Answer<String>, reply: ReplyEntry) {
        match path.and_then(|p| self.entry(&p)) {
            Ok(a) => reply.entry(&TTL, &file_attr(&a), Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn options(&self, flags: i32) -> (OpenOptions, bool) {
        let mut o = OpenOptions::new();
        let acc = flags & libc::O_ACCMODE;
        let append = flags & libc::O_APPEND != 0;
        o.read(acc != libc::O_WRONLY)
            .write(acc != libc::O_RDONLY)
            .truncate(flags & libc::O_TRUNC != 0)
            .append(append)
            .model(self.model);
        (o, append)
    }

    /// What the kernel may keep of an open file's pages (see the module's comment).
    fn open_flags(&self) -> FopenFlags {
        match self.model {
            Model::Session => FopenFlags::empty(),
            _ => FopenFlags::FOPEN_DIRECT_IO,
        }
    }

    fn with_file<T>(&self, fh: FileHandle, f: impl FnOnce(&mut Open) -> Answer<T>) -> Answer<T> {
        let open = self.files.get(fh.0).ok_or(fuser::Errno::EBADF)?;
        let mut open = open.lock().expect("file");
        f(&mut open)
    }

    fn change(&self, path: &str, change: AttrChange) -> Answer<()> {
        self.client
            .set_attr(&self.user(path), change)
            .map(drop)
            .map_err(fail)
    }
}

fn time_ns(t: TimeOrNow) -> i64 {
    match t {
        TimeOrNow::SpecificTime(t) => ns_of(t),
        TimeOrNow::Now => ns_of(SystemTime::now()),
    }
}

impl Filesystem for TesseraFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // Fewer, larger requests where the kernel allows them; a kernel that caps them
        // lower still works.
        let _ = config.set_max_write(1 << 20);
        let _ = config.set_max_readahead(1 << 20);
        // fcntl record locks and flock(2) locks come here, to Tessera's lock service,
        // instead of staying in this host's kernel. A flock arrives as a whole-file record
        // lock whose owner is the open file description, released at its last close.
        if config
            .add_capabilities(fuser::InitFlags::FUSE_POSIX_LOCKS)
            .is_err()
        {
            tracing::warn!(
                "this kernel does not hand fcntl locks to FUSE: they hold on this host only"
            );
        }
        if config
            .add_capabilities(fuser::InitFlags::FUSE_FLOCK_LOCKS)
            .is_err()
        {
            tracing::warn!(
                "this kernel does not hand flock locks to FUSE: they hold on this host only"
            );
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.reply_entry(self.child_of(parent, name), reply);
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        let mut names = self.names.lock().expect("names");
        names.forget(ino.0, nlookup);
        if names.path(ino.0).is_none() {
            self.last.lock().expect("attrs").remove(&ino.0);
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        let got = match self.path_of(ino) {
            Ok(p) => self.stat(&p),
            // A handle whose name was removed: the last attributes, with its size now.
            Err(e) => match (fh, self.last.lock().expect("attrs").get(&ino.0).cloned()) {
                (Some(fh), Some(mut a)) => {
                    self.with_file(fh, |o| o.file.len().map_err(fail))
                        .map(|size| {
                            a.size = size;
                            a
                        })
                }
                _ => Err(e),
            },
        };
        match got {
            Ok(a) => reply.attr(&TTL, &file_attr(&a)),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let done = (|| {
            let path = self.path_of(ino)?;
            let now = self.stat(&path)?;
            // Files belong to the instance's user: a change of owner is refused, as an
            // unprivileged chown is.
            if uid.is_some_and(|u| u != now.uid) || gid.is_some_and(|g| g != now.gid) {
                return Err(fuser::Errno::EPERM);
            }
            if let Some(size) = size {
                self.client
                    .truncate(&self.user(&path), size)
                    .map_err(fail)?;
            }
            let change = AttrChange {
                mode: mode.map(|m| m & 0o7777),
                atime_ns: atime.map(time_ns),
                mtime_ns: mtime.map(time_ns),
            };
            if change != AttrChange::default() {
                self.change(&path, change)?;
            }
            self.stat(&path)
        })();
        match done {
            Ok(a) => reply.attr(&TTL, &file_attr(&a)),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self
            .path_of(ino)
            .and_then(|p| self.client.readlink(&self.user(&p)).map_err(fail))
        {
            Ok(target) => reply.data(target.as_bytes()),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let made = self.child_of(parent, name).and_then(|p| {
            self.client
                .mkdir(&self.user(&p), mode & !umask & 0o7777)
                .map_err(fail)?;
            Ok(p)
        });
        self.reply_entry(made, reply);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let done = self.child_of(parent, name).and_then(|p| {
            self.client.unlink(&self.user(&p)).map_err(fail)?;
            self.names.lock().expect("names").removed(&p);
            Ok(())
        });
        match done {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let done = self.child_of(parent, name).and_then(|p| {
            self.client.rmdir(&self.user(&p)).map_err(fail)?;
            self.names.lock().expect("names").removed(&p);
            Ok(())
        });
        match done {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn symlink(
        &self,
        _req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let made = self.child_of(parent, link_name).and_then(|p| {
            let target = target.to_str().ok_or(fuser::Errno::EILSEQ)?;
            self.client.symlink(target, &self.user(&p)).map_err(fail)?;
            Ok(p)
        });
        self.reply_entry(made, reply);
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let done = (|| {
            let from = self.child_of(parent, name)?;
            let to = self.child_of(newparent, newname)?;
            if flags.contains(RenameFlags::RENAME_EXCHANGE)
                || flags.contains(RenameFlags::RENAME_WHITEOUT)
            {
                return Err(fuser::Errno::EINVAL);
            }
            if flags.contains(RenameFlags::RENAME_NOREPLACE) {
                match self.client.stat(&self.user(&to)) {
                    Ok(_) => return Err(fuser::Errno::EEXIST),
                    Err(e) if e.errno == TErrno::NoEnt => {}
                    Err(e) => return Err(fail(e)),
                }
            }
            self.client
                .rename(&self.user(&from), &self.user(&to))
                .map_err(fail)?;
            self.names.lock().expect("names").renamed(&from, &to);
            Ok(())
        })();
        match done {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let made = (|| {
            let from = self.path_of(ino)?;
            let to = self.child_of(newparent, newname)?;
            self.client
                .link(&self.user(&from), &self.user(&to))
                .map_err(fail)?;
            Ok(to)
        })();
        self.reply_entry(made, reply);
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let opened = self.path_of(ino).and_then(|p| {
            let (o, append) = self.options(flags.0);
            let file = self.client.open(&self.user(&p), &o).map_err(fail)?;
            Ok(self.files.insert(Open { file, append }))
        });
        match opened {
            Ok(fh) => reply.opened(FileHandle(fh), self.open_flags()),
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let created = (|| {
            let p = self.child_of(parent, name)?;
            let (mut o, append) = self.options(flags);
            o.create(true)
                .exclusive(flags & libc::O_EXCL != 0)
                .mode(mode & !umask & 0o7777);
            let file = self.client.open(&self.user(&p), &o).map_err(fail)?;
            let a = self.entry(&p)?;
            Ok((a, self.files.insert(Open { file, append })))
        })();
        match created {
            Ok((a, fh)) => reply.created(
                &TTL,
                &file_attr(&a),
                Generation(0),
                FileHandle(fh),
                self.open_flags(),
            ),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let read = self.with_file(fh, |o| {
            let mut buf = vec![0u8; size as usize];
            let mut done = 0;
            while done < buf.len() {
                match o.file.read_at(&mut buf[done..], offset + done as u64) {
                    Ok(0) => break,
                    Ok(n) => done += n,
                    Err(e) => return Err(fail(e)),
                }
            }
            buf.truncate(done);
            Ok(buf)
        });
        match read {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let wrote = self.with_file(fh, |o| {
            // An appending handle writes at the end of the file as Tessera knows it, which
            // may be past what the kernel knew.
            let n = if o.append {
                o.file.write(data)
            } else {
                o.file.write_at(data, offset)
            };
            n.map_err(fail)
        });
        match wrote {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // Each close(2): the writes are published before it returns (close-to-open, and
        // what every model does at close), and the closing process's record locks on the
        // file go, as POSIX says.
        let done = self.with_file(fh, |o| o.file.commit().map_err(fail));
        self.locks.release(ino.0, lock_owner.0, &self.files);
        match done {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        // The last close of an open file description that took flock(2) locks: they go.
        if let Some(owner) = lock_owner {
            self.locks.release(ino.0, owner.0, &self.files);
        }
        match self.files.remove(fh.0) {
            Some(open) => match open.file.close() {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(fail(e)),
            },
            None => reply.error(fuser::Errno::EBADF),
        }
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        // An MPI-IO sync as well as a commit: the writes are published and made durable, and
        // the handle re-learns the owners, so a reader's fsync sees what others synced.
        let synced = self.with_file(fh, |o| {
            o.file.sync().map_err(fail)?;
            o.file.fsync().map_err(fail)
        });
        match synced {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let listed = (|| {
            let path = self.path_of(ino)?;
            let entries = self.client.readdir(&self.user(&path)).map_err(fail)?;
            let mut listing: Listing = vec![
                (ino.0, FileType::Directory, ".".into()),
                (ino.0, FileType::Directory, "..".into()),
            ];
            listing.extend(
                entries
                    .into_iter()
                    .map(|e| (e.ino, file_type(e.kind), e.name)),
            );
            Ok(self.dirs.insert(listing))
        })();
        match listed {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let Some(listing) = self.dirs.get(fh.0) else {
            return reply.error(fuser::Errno::EBADF);
        };
        let listing = listing.lock().expect("listing");
        for (i, (id, kind, name)) in listing.iter().enumerate().skip(offset as usize) {
            // The offset given with an entry is where the next call resumes.
            if reply.add(INodeNo(*id), i as u64 + 1, *kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.dirs.remove(fh.0);
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        match self.client.space() {
            Ok(space) => {
                let bsize = 4096u64;
                reply.statfs(
                    space.total / bsize,
                    space.free / bsize,
                    space.free / bsize,
                    1 << 32,
                    1 << 32,
                    BLOCK_SIZE,
                    255,
                    bsize as u32,
                )
            }
            Err(e) => reply.error(fail(e)),
        }
    }

    fn setxattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        let done = (|| {
            let path = self.path_of(ino)?;
            let mode = match flags {
                0 => SetMode::Any,
                libc::XATTR_CREATE => SetMode::Create,
                libc::XATTR_REPLACE => SetMode::Replace,
                _ => return Err(fuser::Errno::EINVAL),
            };
            self.client
                .set_xattr(&self.user(&path), name_of(name)?, value, mode)
                .map_err(fail)
        })();
        match done {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let got = self.path_of(ino).and_then(|p| {
            self.client
                .get_xattr(&self.user(&p), name_of(name)?)
                .map_err(fail)
        });
        reply_xattr(got, size, reply);
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let got = self.path_of(ino).and_then(|p| {
            let names = self.client.list_xattrs(&self.user(&p)).map_err(fail)?;
            Ok(names
                .into_iter()
                .flat_map(|n| n.into_bytes().into_iter().chain([0]))
                .collect())
        });
        reply_xattr(got, size, reply);
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let done = self.path_of(ino).and_then(|p| {
            self.client
                .remove_xattr(&self.user(&p), name_of(name)?)
                .map_err(fail)
        });
        match done {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn getlk(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        _pid: u32,
        reply: ReplyLock,
    ) {
        let path = match self.path_of(ino) {
            Ok(p) => self.user(&p),
            Err(e) => return reply.error(e),
        };
        match self.locks.get(&path, lock_owner.0, start, end, typ) {
            Ok(None) => reply.locked(start, end, libc::F_UNLCK, 0),
            Ok(Some(held)) => reply.locked(held.start, held.end, held.typ, held.pid),
            Err(e) => reply.error(e),
        }
    }

    fn setlk(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        _pid: u32,
        sleep: bool,
        reply: ReplyEmpty,
    ) {
        let path = match self.path_of(ino) {
            Ok(p) => self.user(&p),
            Err(e) => return reply.error(e),
        };
        let request = crate::locks::Request {
            ino: ino.0,
            owner: lock_owner.0,
            start,
            end,
            typ,
            wait: sleep,
        };
        match self.locks.set(&path, request, &self.files) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }
}

fn reply_xattr(got: Answer<Vec<u8>>, size: u32, reply: ReplyXattr) {
    match got {
        Ok(v) if size == 0 => reply.size(v.len() as u32),
        Ok(v) if v.len() > size as usize => reply.error(fuser::Errno::ERANGE),
        Ok(v) => reply.data(&v),
        Err(e) => reply.error(e),
    }
}
