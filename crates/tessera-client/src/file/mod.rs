//! Open files: the data path (write, read, seek) and the synchronisation primitives (attach,
//! query, detach, flush), placed by the file's consistency model.
//!
//! A write appends to this process's data log and records the range in the process's local
//! extent map; no message is sent unless the model attaches per write. A read is assembled
//! from up to four sources, newest first:
//!
//! 1. this process's own unattached writes (in a properly synchronised program nothing newer
//!    can exist: another process's newer write would need our commit/close first);
//! 2. the owners from the last query: our own log, another process's log on this node (read
//!    straight from its files), or a log on another node (through the daemons);
//! 3. the PFS copy of the file for ranges no one owns;
//! 4. zeros (holes) up to the file size.
//!
//! This module holds [`File`] and opening; the rest is split by concern: [`options`]
//! ([`OpenOptions`]), [`data`] (the data path), [`primitives`] (attach, query, detach,
//! flush), [`locks`] (byte-range locks), [`sync`] (commit, session, close).

mod data;
mod locks;
mod options;
mod primitives;
mod sync;

pub use options::OpenOptions;

use crate::client::{Client, Inner};
use crate::read::{Ahead, Pattern};
use tessera_core::{Errno, FsError, FsResult, Model, Owner, RunMap};
use tessera_proto::{Open, OpenFlags, OwnedRun, Owners, Query, QueryFile};

/// Bytes of upcoming pattern accesses considered for read-ahead at each remote miss.
const AHEAD_BUDGET: u64 = 8 << 20;

/// Where `seek` moves from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Whence {
    Start(u64),
    Current(i64),
    End(i64),
}

/// An open Tessera file.
pub struct File {
    pub(crate) client: Client,
    pub(crate) ino: u64,
    path: String,
    model: Model,
    readable: bool,
    writable: bool,
    append: bool,
    pos: u64,
    /// Size known from the namespace at the last open/query/stat.
    size: u64,
    /// Owners from the last whole-file query (session and MPI-IO models).
    owners: Option<RunMap<Owner>>,
    /// Where the PFS copy stops counting, from the last answer with a size (a transaction
    /// this process sees cut the file there).
    pfs_upto: Option<u64>,
    /// The file's `view_epoch` when `owners` was learned.
    view_epoch: u64,
    /// This handle's access pattern and the bytes read ahead for it (with cached owners).
    pattern: Pattern,
    ahead: Ahead,
    /// Whether this handle took byte-range locks (released at close, as POSIX does).
    locked: bool,
    closed: bool,
}

/// A query's answer as a map (its runs are disjoint, as the shards keep them).
fn owners_map(o: &Owners) -> RunMap<Owner> {
    let mut m = RunMap::new();
    for r in &o.runs {
        m.restore(r.run, r.owner);
    }
    m
}

impl File {
    pub(crate) fn open(client: &Client, user_path: &str, o: &OpenOptions) -> FsResult<File> {
        let mut g = client.lock();
        let path = g.resolve(user_path)?;
        if !o.read && !o.write {
            return Err(FsError::new(
                Errno::Inval,
                format!("open of {}: choose read, write or both", g.user_path(&path)),
            ));
        }
        if (o.truncate || o.append) && !o.write {
            return Err(FsError::new(
                Errno::Inval,
                format!(
                    "open of {}: truncate and append need write access",
                    g.user_path(&path)
                ),
            ));
        }
        let model = o.model.unwrap_or(g.cfg.default_model);
        let want_owners = model.policy().query_on_open && o.read;
        let req = Open {
            path: path.clone(),
            flags: OpenFlags {
                create: o.create,
                exclusive: o.exclusive,
                truncate: o.truncate,
                write: o.write,
            },
            mode: o.mode,
            want_owners,
        };
        // `path` becomes where PFS links led (a read open follows them).
        let tessera_proto::Opened {
            attr,
            mut owners,
            path,
        } = g.call(req)?;
        if want_owners {
            g.stats.queries += 1;
            g.query_gen += 1;
        }
        if let Some(o) = owners.as_mut() {
            rest_of_file(&mut g, attr.ino, o)?;
        }
        if o.truncate {
            g.truncate_local(attr.ino, 0)?;
        }
        let view_epoch = g.files.entry(attr.ino).or_default().view_epoch;
        Ok(File {
            client: client.clone(),
            ino: attr.ino,
            path,
            model,
            readable: o.read,
            writable: o.write,
            append: o.append,
            pos: 0,
            // The query's size was read after the open's and before its extents.
            size: owners.as_ref().and_then(|o| o.size).unwrap_or(attr.size),
            owners: owners.as_ref().map(owners_map),
            pfs_upto: owners.as_ref().and_then(|o| o.pfs_upto),
            view_epoch,
            pattern: Pattern::default(),
            ahead: Ahead::default(),
            locked: false,
            closed: false,
        })
    }

    pub fn model(&self) -> Model {
        self.model
    }

    /// Inode number of the file.
    pub fn ino(&self) -> u64 {
        self.ino
    }

    /// Path inside the file system (without the mount prefix): the file opened, after any
    /// PFS link was followed.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The path as the user writes it (with the mount prefix).
    pub fn user_path(&self) -> String {
        self.client.lock().user_path(&self.path)
    }

    pub(crate) fn check_open(&self) -> FsResult<()> {
        if self.closed {
            return Err(FsError::new(
                Errno::BadF,
                format!("{} is closed", self.path),
            ));
        }
        Ok(())
    }
}

impl Drop for File {
    fn drop(&mut self) {
        let _ = self.close_inner();
    }
}

/// A lock's byte range: `len == 0` reaches to end of file, now and after growth.
fn lock_range(offset: u64, len: u64) -> FsResult<(u64, u64)> {
    if len == 0 {
        return Ok((offset, u64::MAX));
    }
    offset
        .checked_add(len)
        .map(|end| (offset, end))
        .ok_or_else(|| {
            FsError::new(
                Errno::Inval,
                format!("lock range {offset} + {len} overflows the file offset"),
            )
        })
}

fn query(g: &mut Inner, ino: u64, start: u64, end: u64) -> FsResult<Owners> {
    g.stats.queries += 1;
    g.query_gen += 1;
    let mut o: Owners = g.call(Query { ino, start, end })?;
    if o.next.is_some() {
        // A range over many stripes of a file of many runs: the rest comes in whole-file pages.
        while let Some(from) = o.next.take() {
            let page: Owners = g.call(QueryFile { ino, from })?;
            for r in page.runs {
                let clipped = r.run.clip(start, end);
                o.runs
                    .extend(clipped.into_iter().map(|run| OwnedRun { run, ..r }));
            }
            o.next = page.next.filter(|n| *n < end);
        }
        o.runs.sort_by_key(|r| r.run.start);
    }
    Ok(o)
}

fn query_file(g: &mut Inner, ino: u64) -> FsResult<Owners> {
    g.stats.queries += 1;
    g.query_gen += 1;
    let mut o = g.call(QueryFile { ino, from: 0 })?;
    rest_of_file(g, ino, &mut o)?;
    Ok(o)
}

/// Completes a whole-file answer that did not fit in one frame, page after page.
fn rest_of_file(g: &mut Inner, ino: u64, o: &mut Owners) -> FsResult<()> {
    while let Some(from) = o.next.take() {
        let page: Owners = g.call(QueryFile { ino, from })?;
        o.runs.extend(page.runs);
        o.next = page.next;
    }
    Ok(())
}
