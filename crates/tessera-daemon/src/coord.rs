//! What a daemon does for a client of its node: turn one request into calls on the shards
//! that hold the answer (this daemon included) and combine the results.
//!
//! Placement decides every target: a path's entry lives on `path_shard(path)`, an inode on
//! `ino_shard(ino)`, the ownership of each stripe on `stripe_shard(ino, stripe)`. Independent
//! calls go out concurrently.

use crate::Node;
use crate::namespace::ROOT_INO;
use bytes::Bytes;
use std::collections::BTreeMap;
use tessera_core::placement::{
    ino_shard, path_shard, runs_by_stripe, split_by_stripe, stripe_shard,
};
use tessera_core::{Errno, FsError, FsResult, Owner, RangeMap, Run, path};
use tessera_proto::{
    Attr, Dentry, DirEntry, FileKind, NodeStatus, OpenFlags, OwnedExtent, Owners, PeerRequest,
    PeerResponse, Request, Response, SizeChange,
};

/// Remote reads are fetched in pieces of this size, in parallel.
const READ_PIECE: u64 = 2 << 20;

/// A query or detach spanning more stripes than this is answered by asking every daemon
/// for the whole file instead of one request per stripe.
const MAX_STRIPES_PER_REQUEST: u64 = 64;

fn unexpected(what: &str, r: PeerResponse) -> FsError {
    FsError::new(Errno::Proto, format!("unexpected answer to {what}: {r:?}"))
}

impl Node {
    /// Serves one client request; errors become `Response::Err`. A read's bytes come back
    /// beside the answer, to be written after it in the same frame.
    pub async fn handle_client(&self, client: u64, req: Request) -> (Response, Vec<Bytes>) {
        self.count_request();
        if let Request::Read { ino, parts } = req {
            return match self.read_parts(ino, parts).await {
                Ok(pieces) => {
                    let len = pieces.iter().map(|p| p.len() as u64).sum();
                    (Response::Data { len }, pieces)
                }
                Err(e) => (Response::Err(e), Vec::new()),
            };
        }
        match self.client_op(client, req).await {
            Ok(r) => (r, Vec::new()),
            Err(e) => (Response::Err(e), Vec::new()),
        }
    }

    async fn client_op(&self, client: u64, req: Request) -> FsResult<Response> {
        let me = Owner {
            node: self.id,
            client,
        };
        if let Request::Attach { ino, .. }
        | Request::Detach { ino, .. }
        | Request::DetachFile { ino }
        | Request::Query { ino, .. }
        | Request::QueryFile { ino }
        | Request::Read { ino, .. }
        | Request::Lock { ino, .. }
        | Request::GetLock { ino, .. } = &req
        {
            self.check_ino(*ino)?;
        }
        Ok(match req {
            Request::Hello { .. } => {
                return Err(FsError::new(
                    Errno::Proto,
                    "hello sent twice on one connection",
                ));
            }
            Request::Open {
                path,
                flags,
                mode,
                want_owners,
            } => self.open(&path, flags, mode, want_owners).await?,
            Request::Stat { path } => {
                let p = path::normalize(&path)?;
                Response::Attr(self.lookup(&p).await?.ok_or_else(|| self.enoent(&p))?.1)
            }
            Request::Mkdir { path, mode } => self.mkdir(&path, mode).await?,
            Request::Rmdir { path } => self.rmdir(&path).await?,
            Request::Unlink { path } => self.unlink(&path).await?,
            Request::Readdir { path } => Response::Entries(self.readdir(&path).await?),
            Request::Rename { from, to } => self.rename(&from, &to).await?,
            Request::Truncate { path, size } => {
                tessera_core::run::end_within_limit(size, 0, "truncate")?;
                let p = path::normalize(&path)?;
                let (d, _) = self.lookup(&p).await?.ok_or_else(|| self.enoent(&p))?;
                match d.kind {
                    FileKind::Dir => return Err(self.eisdir(&p)),
                    FileKind::Symlink => return Err(self.no_change_through_link(&p, "truncate")),
                    FileKind::File => {}
                }
                Response::Attr(self.truncate_ino(&p, d.ino, size).await?)
            }
            Request::SetAttr { path, change } => {
                let p = path::normalize(&path)?;
                let (d, _) = self.lookup(&p).await?.ok_or_else(|| self.enoent(&p))?;
                if d.kind == FileKind::Symlink {
                    return Err(self.no_change_through_link(&p, "chmod or utimes"));
                }
                match self
                    .call(
                        ino_shard(d.ino),
                        PeerRequest::InodeSetAttr { ino: d.ino, change },
                    )
                    .await?
                {
                    PeerResponse::Attr(a) => Response::Attr(a),
                    other => return Err(unexpected("setattr", other)),
                }
            }
            Request::ReadLink { path } => {
                let p = path::normalize(&path)?;
                let (d, _) = self.lookup(&p).await?.ok_or_else(|| self.enoent(&p))?;
                if d.kind != FileKind::Symlink {
                    return Err(FsError::new(
                        Errno::Inval,
                        format!("{} is not a symbolic link", self.user_path(&p)),
                    ));
                }
                Response::Link {
                    target: self.pfs.read_link(&p)?,
                }
            }
            Request::Attach { ino, runs, upto } => {
                self.attach(ino, me, runs).await?;
                if let Some(pos) = upto {
                    // Kept in the state too: after a restart of this daemon, what it publishes
                    // for the client if it dies must still start there. Not waited for: it
                    // reaches the state log with the next group, in microseconds, and until
                    // then the journal's own marker and the attach stand in for it.
                    self.clients.note_published(client, ino, pos);
                    drop(self.store.submit(vec![crate::store::DbOp::PutPublished {
                        client,
                        ino,
                        pos,
                    }]));
                }
                Response::Ok
            }
            Request::Detach { ino, start, end } => {
                check_order(start, end, "detach")?;
                self.detach(ino, me, start, end).await?;
                Response::Ok
            }
            Request::DetachFile { ino } => {
                let reqs = (0..self.cfg.nodes)
                    .map(|n| (n, PeerRequest::OwnDetachFile { ino, owner: me }))
                    .collect();
                self.call_all(reqs).await?;
                Response::Ok
            }
            Request::Query { ino, start, end } => {
                check_order(start, end, "query")?;
                Response::Owners(self.query(ino, start, end).await?)
            }
            Request::QueryFile { ino } => Response::Owners(self.query_file(ino).await?),
            Request::Read { .. } => unreachable!("reads are served by handle_client"),
            Request::Flush { path, range } => {
                let p = path::normalize(&path)?;
                let (d, _) = self.lookup(&p).await?.ok_or_else(|| self.enoent(&p))?;
                match self
                    .call(ino_shard(d.ino), PeerRequest::Flush { path: p, range })
                    .await?
                {
                    PeerResponse::Flushed { bytes, nodes } => Response::Flushed { bytes, nodes },
                    other => return Err(unexpected("flush", other)),
                }
            }
            Request::Lock {
                ino,
                start,
                end,
                kind,
                wait,
                pid,
            } => {
                self.client_lock(client, pid, ino, (start, end), kind, wait)
                    .await?
            }
            Request::GetLock {
                ino,
                start,
                end,
                kind,
            } => {
                self.client_get_lock(client, ino, (start, end), kind)
                    .await?
            }
            Request::Reserve { bytes } => Response::Granted {
                bytes: tokio::task::block_in_place(|| self.logs.reserve(client, bytes))?,
            },
            Request::Release { bytes } => {
                self.logs.release(client, bytes)?;
                Response::Ok
            }
            Request::Writing { ino } => {
                self.check_ino(ino)?;
                self.clients.note_writing(client, ino);
                Response::Ok
            }
            Request::Status => Response::Status(self.status()),
            Request::Shutdown => {
                self.shutdown.notify_one();
                Response::Ok
            }
        })
    }

    /// Reads ranges from the logs of several owners, in parallel, concatenated in order.
    async fn read_parts(
        &self,
        ino: u64,
        parts: Vec<(Owner, Vec<(u64, u64)>)>,
    ) -> FsResult<Vec<Bytes>> {
        self.check_ino(ino)?;
        for (_, ranges) in &parts {
            if let Some((s, e)) = ranges
                .iter()
                .find(|(s, e)| s >= e || *e > tessera_core::run::MAX_FILE_SIZE)
            {
                return Err(FsError::new(
                    Errno::Inval,
                    format!("read of empty, inverted or out-of-range [{s},{e})"),
                ));
            }
        }
        let limit = self.cfg.max_read_chunk();
        let total = parts
            .iter()
            .flat_map(|(_, r)| r.iter().map(|(s, e)| e.saturating_sub(*s)))
            .fold(0u64, u64::saturating_add);
        if total > limit {
            return Err(FsError::new(
                Errno::MsgSize,
                format!("read of {total} bytes in one request exceeds the limit of {limit}"),
            ));
        }
        // Large remote reads are cut into pieces fetched in parallel over separate
        // connections (see `tessera_core::read_plan`).
        let jobs = tessera_core::read_plan::split_read(parts, self.id, READ_PIECE);
        let fetches = jobs.into_iter().map(|(owner, ranges)| async move {
            if owner.node == self.id {
                Ok(Bytes::from(
                    self.read_local_log(ino, owner.client, ranges).await?,
                ))
            } else {
                let reply = self
                    .call_reply(
                        owner.node,
                        PeerRequest::ReadLog {
                            ino,
                            client: owner.client,
                            ranges,
                        },
                    )
                    .await?;
                match reply.resp {
                    PeerResponse::Data { .. } => Ok(reply.data),
                    other => Err(unexpected("read", other)),
                }
            }
        });
        futures::future::try_join_all(fetches).await
    }

    pub fn status(&self) -> NodeStatus {
        let (files_owned, extents_owned) = self.own.lock().expect("own").stats();
        let space = tokio::task::block_in_place(|| self.logs.space());
        let device = rustix::fs::statvfs(self.cfg.bb_dir(self.id)).ok();
        NodeStatus {
            node: self.id,
            pid: std::process::id(),
            uptime_ms: self.started.elapsed().as_millis() as u64,
            bb_dir: self.cfg.bb_dir(self.id).display().to_string(),
            bb_used: space.used,
            bb_reserved: space.reserved,
            bb_capacity: self.logs.capacity(),
            bb_device_total: device.as_ref().map_or(0, |d| d.f_blocks * d.f_frsize),
            bb_device_free: device.as_ref().map_or(0, |d| d.f_bavail * d.f_frsize),
            clients: self.connected.load(std::sync::atomic::Ordering::Relaxed),
            files_owned,
            extents_owned,
            requests: self.requests.load(std::sync::atomic::Ordering::Relaxed),
        }
    }

    fn enoent(&self, p: &str) -> FsError {
        FsError::new(
            Errno::NoEnt,
            format!("{}: no such file or directory", self.user_path(p)),
        )
    }

    /// The error for a change asked of a path whose last component is a PFS link.
    fn no_change_through_link(&self, p: &str, what: &str) -> FsError {
        FsError::new(
            Errno::Loop,
            format!(
                "{} is a symbolic link in the PFS directory; Tessera does not {what} through links (name the target instead)",
                self.user_path(p)
            ),
        )
    }

    fn eisdir(&self, p: &str) -> FsError {
        FsError::new(
            Errno::IsDir,
            format!("{} is a directory", self.user_path(p)),
        )
    }

    fn root_attr(&self) -> Attr {
        Attr {
            ino: ROOT_INO,
            kind: FileKind::Dir,
            mode: 0o755,
            uid: self.uid,
            gid: self.gid,
            size: 0,
            atime_ns: 0,
            mtime_ns: 0,
            ctime_ns: 0,
        }
    }

    async fn inode_get(&self, ino: u64) -> FsResult<Attr> {
        match self
            .call(ino_shard(ino), PeerRequest::InodeGet { ino })
            .await?
        {
            PeerResponse::Attr(a) => Ok(a),
            other => Err(unexpected("inode lookup", other)),
        }
    }

    /// Entry and attributes of a normalised path; `None` if it does not exist.
    pub async fn lookup(&self, p: &str) -> FsResult<Option<(Dentry, Attr)>> {
        if p == "/" {
            return Ok(Some((
                Dentry {
                    ino: ROOT_INO,
                    kind: FileKind::Dir,
                },
                self.root_attr(),
            )));
        }
        match self
            .call(
                path_shard(p, self.cfg.nodes),
                PeerRequest::DentryGet {
                    path: p.to_string(),
                },
            )
            .await?
        {
            PeerResponse::Found(None) => Ok(None),
            PeerResponse::Found(Some((d, Some(a)))) => Ok(Some((d, a))),
            PeerResponse::Found(Some((d, None))) => Ok(Some((d, self.inode_get(d.ino).await?))),
            other => Err(unexpected("lookup", other)),
        }
    }

    /// Fails unless `dir` exists and is a directory.
    async fn require_dir(&self, dir: &str) -> FsResult<()> {
        match self.lookup(dir).await? {
            None => Err(FsError::new(
                Errno::NoEnt,
                format!(
                    "directory {} does not exist; create it first (mkdir)",
                    self.user_path(dir)
                ),
            )),
            Some((d, _)) if d.kind != FileKind::Dir => Err(FsError::new(
                Errno::NotDir,
                format!("{} is not a directory", self.user_path(dir)),
            )),
            Some(_) => Ok(()),
        }
    }

    async fn create_entry(
        &self,
        p: &str,
        kind: FileKind,
        mode: u32,
        exclusive: bool,
    ) -> FsResult<(Dentry, Attr)> {
        let (parent, _) = path::split(p).expect("not the root");
        self.require_dir(parent).await?;
        let req = PeerRequest::DentryCreate {
            path: p.to_string(),
            kind,
            mode: mode & 0o7777,
            uid: self.uid,
            gid: self.gid,
            exclusive,
        };
        match self.call(path_shard(p, self.cfg.nodes), req).await? {
            PeerResponse::Created {
                dentry,
                attr: Some(a),
                ..
            } => Ok((dentry, a)),
            PeerResponse::Created {
                dentry, attr: None, ..
            } => Ok((dentry, self.inode_get(dentry.ino).await?)),
            other => Err(unexpected("create", other)),
        }
    }

    async fn open(
        &self,
        path: &str,
        flags: OpenFlags,
        mode: u32,
        want_owners: bool,
    ) -> FsResult<Response> {
        let mut p = path::normalize(path)?;
        if p == "/" {
            return Err(self.eisdir(&p));
        }
        let (mut dentry, mut attr) = if flags.create {
            self.create_entry(&p, FileKind::File, mode, flags.exclusive)
                .await?
        } else {
            self.lookup(&p).await?.ok_or_else(|| self.enoent(&p))?
        };
        // A read follows PFS links, each to a target beneath the PFS root; a change never.
        let mut hops = 0;
        while dentry.kind == FileKind::Symlink {
            if flags.write || flags.truncate {
                return Err(self.no_change_through_link(&p, "write"));
            }
            hops += 1;
            if hops > path::MAX_LINK_HOPS {
                return Err(FsError::new(
                    Errno::Loop,
                    format!(
                        "{}: more than {} symbolic links in a row",
                        self.user_path(path),
                        path::MAX_LINK_HOPS
                    ),
                ));
            }
            let target = self.pfs.read_link(&p)?;
            p = path::link_target(&p, &target, &self.cfg.pfs_dir.display().to_string())?;
            (dentry, attr) = self.lookup(&p).await?.ok_or_else(|| self.enoent(&p))?;
        }
        if dentry.kind == FileKind::Dir {
            return Err(self.eisdir(&p));
        }
        if flags.truncate && attr.size > 0 {
            attr = self.truncate_ino(&p, dentry.ino, 0).await?;
        }
        let owners = if want_owners {
            Some(self.query_file(dentry.ino).await?)
        } else {
            None
        };
        Ok(Response::Opened {
            attr,
            owners,
            path: p,
        })
    }

    async fn mkdir(&self, path: &str, mode: u32) -> FsResult<Response> {
        let p = path::normalize(path)?;
        if p == "/" {
            return Err(FsError::new(
                Errno::Exist,
                format!("{} already exists", self.user_path(&p)),
            ));
        }
        let (_, attr) = self.create_entry(&p, FileKind::Dir, mode, true).await?;
        Ok(Response::Attr(attr))
    }

    /// Whether any shard (or the PFS copy) holds an entry inside `dir`.
    async fn has_children(&self, dir: &str) -> FsResult<bool> {
        let reqs = (0..self.cfg.nodes)
            .map(|n| {
                (
                    n,
                    PeerRequest::HasChildren {
                        dir: dir.to_string(),
                    },
                )
            })
            .collect();
        let any = self
            .call_all(reqs)
            .await?
            .into_iter()
            .any(|r| matches!(r, PeerResponse::Bool(true)));
        let pfs_any = self.pfs.has_entries(dir);
        Ok(any || pfs_any)
    }

    async fn rmdir(&self, path: &str) -> FsResult<Response> {
        let p = path::normalize(path)?;
        if p == "/" {
            return Err(FsError::new(
                Errno::Inval,
                "the root directory cannot be removed",
            ));
        }
        let (d, _) = self.lookup(&p).await?.ok_or_else(|| self.enoent(&p))?;
        if d.kind != FileKind::Dir {
            return Err(FsError::new(
                Errno::NotDir,
                format!("{} is not a directory; use unlink", self.user_path(&p)),
            ));
        }
        if self.has_children(&p).await? {
            return Err(FsError::new(
                Errno::NotEmpty,
                format!("directory {} is not empty", self.user_path(&p)),
            ));
        }
        self.call(
            path_shard(&p, self.cfg.nodes),
            PeerRequest::DentryRemove {
                path: p.clone(),
                ino: d.ino,
            },
        )
        .await?;
        self.call(ino_shard(d.ino), PeerRequest::InodeRemove { ino: d.ino })
            .await?;
        if let Err(e) = self.pfs.remove_dir(&p) {
            tracing::warn!("rmdir {}: the PFS directory stays: {e}", self.user_path(&p));
        }
        Ok(Response::Ok)
    }

    /// Forgets a file everywhere: inode, ownership, logs on every node.
    async fn destroy_file(&self, ino: u64) -> FsResult<()> {
        self.call(ino_shard(ino), PeerRequest::InodeRemove { ino })
            .await?;
        let reqs = (0..self.cfg.nodes)
            .map(|n| (n, PeerRequest::DropFile { ino }))
            .collect();
        self.call_all(reqs).await?;
        Ok(())
    }

    async fn unlink(&self, path: &str) -> FsResult<Response> {
        let p = path::normalize(path)?;
        let (d, _) = self.lookup(&p).await?.ok_or_else(|| self.enoent(&p))?;
        if d.kind == FileKind::Dir {
            return Err(FsError::new(
                Errno::IsDir,
                format!("{} is a directory; use rmdir", self.user_path(&p)),
            ));
        }
        self.call(
            path_shard(&p, self.cfg.nodes),
            PeerRequest::DentryRemove {
                path: p.clone(),
                ino: d.ino,
            },
        )
        .await?;
        self.destroy_file(d.ino).await?;
        self.pfs.remove_file(&p)?;
        Ok(Response::Ok)
    }

    async fn readdir(&self, path: &str) -> FsResult<Vec<DirEntry>> {
        let p = path::normalize(path)?;
        let (d, _) = self.lookup(&p).await?.ok_or_else(|| self.enoent(&p))?;
        if d.kind != FileKind::Dir {
            return Err(FsError::new(
                Errno::NotDir,
                format!("{} is not a directory", self.user_path(&p)),
            ));
        }
        let reqs = (0..self.cfg.nodes)
            .map(|n| (n, PeerRequest::ListChildren { dir: p.clone() }))
            .collect();
        let mut all: BTreeMap<String, DirEntry> = BTreeMap::new();
        for r in self.call_all(reqs).await? {
            match r {
                PeerResponse::Entries(es) => {
                    all.extend(es.into_iter().map(|e| (e.name.clone(), e)))
                }
                other => return Err(unexpected("readdir", other)),
            }
        }
        // Entries that exist only on the PFS appear too (and are imported on the way).
        for (name, _) in self.pfs.list(&p)? {
            if all.contains_key(&name) {
                continue;
            }
            if let Some((d, _)) = self.lookup(&path::join(&p, &name)).await? {
                all.insert(
                    name.clone(),
                    DirEntry {
                        name,
                        ino: d.ino,
                        kind: d.kind,
                    },
                );
            }
        }
        Ok(all.into_values().collect())
    }

    async fn rename(&self, from: &str, to: &str) -> FsResult<Response> {
        let from = path::normalize(from)?;
        let to = path::normalize(to)?;
        if from == "/" || to == "/" {
            return Err(FsError::new(
                Errno::Inval,
                "the root directory cannot be renamed or replaced",
            ));
        }
        let (src, _) = self
            .lookup(&from)
            .await?
            .ok_or_else(|| self.enoent(&from))?;
        if from == to {
            return Ok(Response::Ok);
        }
        if path::is_within(&to, &from) {
            return Err(FsError::new(
                Errno::Inval,
                format!("cannot move {} into itself", self.user_path(&from)),
            ));
        }
        if src.kind == FileKind::Dir && self.has_children(&from).await? {
            return Err(FsError::new(
                Errno::XDev,
                format!(
                    "renaming the non-empty directory {} is not supported yet; copy it instead (mv does so by itself)",
                    self.user_path(&from)
                ),
            ));
        }
        let (to_parent, _) = path::split(&to).expect("not the root");
        self.require_dir(to_parent).await?;
        if self.pfs.lstat(&from)?.is_some() {
            // The PFS copy will move there: fail before the namespace changes if it cannot.
            tokio::task::block_in_place(|| self.pfs.make_dirs(to_parent))?;
        }
        if let Some((dst, _)) = self.lookup(&to).await? {
            match (src.kind, dst.kind) {
                (FileKind::File | FileKind::Symlink, FileKind::Dir) => {
                    return Err(self.eisdir(&to));
                }
                (FileKind::Dir, FileKind::File | FileKind::Symlink) => {
                    return Err(FsError::new(
                        Errno::NotDir,
                        format!("{} is not a directory", self.user_path(&to)),
                    ));
                }
                (FileKind::Dir, FileKind::Dir) if self.has_children(&to).await? => {
                    return Err(FsError::new(
                        Errno::NotEmpty,
                        format!("directory {} is not empty", self.user_path(&to)),
                    ));
                }
                _ => {}
            }
        }
        let replaced = match self
            .call(
                path_shard(&to, self.cfg.nodes),
                PeerRequest::DentryPut {
                    path: to.clone(),
                    dentry: src,
                },
            )
            .await?
        {
            PeerResponse::Dentry(old) => old,
            other => return Err(unexpected("rename", other)),
        };
        if let Some(old) = replaced.filter(|o| o.ino != src.ino) {
            self.destroy_file(old.ino).await?;
        }
        self.call(
            path_shard(&from, self.cfg.nodes),
            PeerRequest::DentryRemove {
                path: from.clone(),
                ino: src.ino,
            },
        )
        .await?;
        // The PFS copy moves with the file (a link moves as a link); a replaced file's copy
        // goes.
        if !self.pfs.rename(&from, &to)? {
            match self.pfs.lstat(&to)?.map(|m| m.kind) {
                Some(FileKind::Dir) => self.pfs.remove_dir(&to)?,
                Some(_) => self.pfs.remove_file(&to)?,
                None => {}
            }
        }
        Ok(Response::Ok)
    }

    async fn truncate_ino(&self, p: &str, ino: u64, size: u64) -> FsResult<Attr> {
        let attr = match self
            .call(
                ino_shard(ino),
                PeerRequest::InodeSetSize {
                    ino,
                    change: SizeChange::Set(size),
                },
            )
            .await?
        {
            PeerResponse::Attr(a) => a,
            other => return Err(unexpected("truncate", other)),
        };
        let reqs = (0..self.cfg.nodes)
            .map(|n| (n, PeerRequest::OwnTruncate { ino, size }))
            .collect();
        self.call_all(reqs).await?;
        self.pfs.truncate(p, size)?;
        Ok(attr)
    }

    pub(crate) async fn attach(&self, ino: u64, owner: Owner, runs: Vec<Run>) -> FsResult<()> {
        let per_stripe = runs_by_stripe(&runs, self.cfg.stripe_size)?;
        // Ownership sends every reader of these bytes to this log: it must hold them.
        self.logs.check_holds(ino, owner.client, &runs)?;
        let Some(end) = runs.iter().map(Run::end).max() else {
            return Ok(());
        };
        let n = self.cfg.nodes;
        let attach_reqs: Vec<(u32, PeerRequest)> = per_stripe
            .iter()
            .map(|(stripe, runs)| {
                (
                    stripe_shard(ino, *stripe, n),
                    PeerRequest::OwnAttach {
                        ino,
                        stripe: *stripe,
                        owner,
                        runs: runs.clone(),
                    },
                )
            })
            .collect();
        // Ownership first, then the size: a query reads the size before the extents (see
        // `query`), so a size that covers these bytes is never seen without their owners.
        self.call_all(attach_reqs).await?;
        let size = self
            .call(
                ino_shard(ino),
                PeerRequest::InodeSetSize {
                    ino,
                    change: SizeChange::Extend(end),
                },
            )
            .await;
        if let Err(e) = size {
            // The file is gone (unlinked while we wrote): take back what this attach installed
            // so no ownership outlives the inode.
            let undo = per_stripe
                .iter()
                .flat_map(|(stripe, runs)| runs.iter().map(move |r| (*stripe, r.start, r.end())))
                .map(|(stripe, s, t)| {
                    (
                        stripe_shard(ino, stripe, n),
                        PeerRequest::OwnDetach {
                            ino,
                            stripe,
                            owner,
                            start: s,
                            end: t,
                        },
                    )
                })
                .collect();
            let _ = self.call_all(undo).await;
            return Err(e);
        }
        Ok(())
    }

    /// Inode numbers from the wire must name a node of this instance.
    fn check_ino(&self, ino: u64) -> FsResult<()> {
        if ino_shard(ino) >= self.cfg.nodes {
            return Err(FsError::new(
                Errno::NoEnt,
                format!("inode {ino:#x} does not exist in this instance"),
            ));
        }
        Ok(())
    }

    async fn detach(&self, ino: u64, owner: Owner, start: u64, end: u64) -> FsResult<()> {
        let ss = self.cfg.stripe_size;
        if start >= end {
            return Ok(());
        }
        let stripes = (end - 1) / ss - start / ss + 1;
        if stripes > MAX_STRIPES_PER_REQUEST * u64::from(self.cfg.nodes) {
            // Detach only where the owner actually holds bytes.
            let mine = self.query_file_only(ino, Some(owner)).await?;
            let mut reqs = Vec::new();
            for e in mine.into_iter().filter(|e| e.start < end && e.end > start) {
                for (stripe, s, t) in split_by_stripe(e.start.max(start), e.end.min(end), ss) {
                    reqs.push((
                        stripe_shard(ino, stripe, self.cfg.nodes),
                        PeerRequest::OwnDetach {
                            ino,
                            stripe,
                            owner,
                            start: s,
                            end: t,
                        },
                    ));
                }
            }
            self.call_all(reqs).await?;
            return Ok(());
        }
        let reqs = split_by_stripe(start, end, ss)
            .map(|(stripe, s, t)| {
                (
                    stripe_shard(ino, stripe, self.cfg.nodes),
                    PeerRequest::OwnDetach {
                        ino,
                        stripe,
                        owner,
                        start: s,
                        end: t,
                    },
                )
            })
            .collect();
        self.call_all(reqs).await?;
        Ok(())
    }

    /// Who holds `[start, end)`, and the size if any byte of the range is unowned.
    ///
    /// The size is read before the extents it is returned with. Attach installs ownership
    /// before it extends the size, so every byte below a size we return that an attach had
    /// published by then is owned in the answer: a reader never mistakes an appended, committed
    /// range for a hole. Extents asked for before the size are asked for again where they
    /// left a gap below it.
    pub async fn query(&self, ino: u64, start: u64, end: u64) -> FsResult<Owners> {
        let ss = self.cfg.stripe_size;
        if start >= end {
            return Ok(Owners {
                size: Some(self.inode_get(ino).await?.size),
                extents: Vec::new(),
            });
        }
        let stripes = (end - 1) / ss - start / ss + 1;
        if stripes > MAX_STRIPES_PER_REQUEST {
            let mut all = self.query_file(ino).await?;
            all.extents.retain(|e| e.start < end && e.end > start);
            for e in &mut all.extents {
                e.start = e.start.max(start);
                e.end = e.end.min(end);
            }
            return Ok(all);
        }
        let mut extents = self.range_owners(ino, start, end).await?;
        // Only a range with unowned bytes needs the size (zeros below it, end of file above).
        let gaps = uncovered(&extents, start, end);
        if gaps.is_empty() {
            return Ok(Owners {
                size: None,
                extents,
            });
        }
        let size = self.inode_get(ino).await?.size;
        for (s, t) in gaps {
            if s < size {
                extents.extend(self.range_owners(ino, s, t.min(size)).await?);
            }
        }
        extents.sort_by_key(|e| e.start);
        Ok(Owners {
            size: Some(size),
            extents,
        })
    }

    /// The owners of `[start, end)`, stripe by stripe, ascending.
    async fn range_owners(&self, ino: u64, start: u64, end: u64) -> FsResult<Vec<OwnedExtent>> {
        let per_stripe = split_by_stripe(start, end, self.cfg.stripe_size)
            .map(|(stripe, s, t)| self.stripe_owners(ino, stripe, s, t));
        Ok(futures::future::try_join_all(per_stripe)
            .await?
            .into_iter()
            .flatten()
            .collect())
    }

    /// The owners of `[s, t)` within one stripe: from this node's shard, from a leased copy of
    /// a remote stripe, or by fetching (and caching) the remote stripe.
    async fn stripe_owners(
        &self,
        ino: u64,
        stripe: u64,
        s: u64,
        t: u64,
    ) -> FsResult<Vec<OwnedExtent>> {
        let clip = |es: Vec<OwnedExtent>| -> Vec<OwnedExtent> {
            es.into_iter()
                .filter(|e| e.start < t && e.end > s)
                .map(|e| OwnedExtent {
                    start: e.start.max(s),
                    end: e.end.min(t),
                    owner: e.owner,
                })
                .collect()
        };
        let shard = stripe_shard(ino, stripe, self.cfg.nodes);
        if shard == self.id {
            return Ok(self.own.lock().expect("own").query(ino, stripe, s, t));
        }
        if let Some(map) = self
            .stripe_cache
            .lock()
            .expect("stripe cache")
            .get((ino, stripe))
        {
            return Ok(map
                .overlapping(s, t)
                .into_iter()
                .map(|e| OwnedExtent {
                    start: e.start,
                    end: e.end,
                    owner: e.value,
                })
                .collect());
        }
        let asked = std::time::Instant::now();
        match self
            .call(
                shard,
                PeerRequest::OwnFetchStripe {
                    ino,
                    stripe,
                    from: self.id,
                },
            )
            .await?
        {
            PeerResponse::Stripe {
                extents,
                version,
                cached,
            } => {
                if cached {
                    let mut map = RangeMap::new();
                    for e in &extents {
                        map.insert(e.start, e.end, e.owner);
                    }
                    self.stripe_cache.lock().expect("stripe cache").put(
                        (ino, stripe),
                        map,
                        version,
                        asked,
                    );
                }
                Ok(clip(extents))
            }
            other => Err(unexpected("query", other)),
        }
    }

    /// Who holds every byte of the file, and its size (read first: see [`Node::query`]).
    pub async fn query_file(&self, ino: u64) -> FsResult<Owners> {
        let size = self.inode_get(ino).await?.size;
        let mut owners = collect_owners(
            self.call_all(
                (0..self.cfg.nodes)
                    .map(|n| (n, PeerRequest::OwnQueryFile { ino, only: None }))
                    .collect(),
            )
            .await?,
        )?;
        owners.size = Some(size);
        Ok(owners)
    }

    async fn query_file_only(&self, ino: u64, only: Option<Owner>) -> FsResult<Vec<OwnedExtent>> {
        let reqs = (0..self.cfg.nodes)
            .map(|n| (n, PeerRequest::OwnQueryFile { ino, only }))
            .collect();
        let mut out = Vec::new();
        for r in self.call_all(reqs).await? {
            match r {
                PeerResponse::Extents(es) => out.extend(es),
                other => return Err(unexpected("query", other)),
            }
        }
        out.sort_by_key(|e| e.start);
        Ok(out)
    }
}

/// The parts of `[start, end)` that no extent of `extents` (ascending, disjoint) covers.
fn uncovered(extents: &[OwnedExtent], start: u64, end: u64) -> Vec<(u64, u64)> {
    let mut gaps = Vec::new();
    let mut at = start;
    for e in extents {
        if e.start > at {
            gaps.push((at, e.start.min(end)));
        }
        at = at.max(e.end);
        if at >= end {
            break;
        }
    }
    if at < end {
        gaps.push((at, end));
    }
    gaps
}

/// A range from the wire must not be inverted (an empty one is a no-op).
fn check_order(start: u64, end: u64, what: &str) -> FsResult<()> {
    if start > end {
        return Err(FsError::new(
            Errno::Inval,
            format!("{what} of the inverted range [{start}, {end})"),
        ));
    }
    Ok(())
}

/// Combines an inode answer and extent answers into one ascending ownership list.
fn collect_owners(responses: Vec<PeerResponse>) -> FsResult<Owners> {
    let mut owners = Owners::default();
    for r in responses {
        match r {
            PeerResponse::Attr(a) => owners.size = Some(a.size),
            PeerResponse::Extents(es) => owners.extents.extend(es),
            other => return Err(unexpected("query", other)),
        }
    }
    owners.extents.sort_by_key(|e| e.start);
    Ok(owners)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uncovered_lists_the_gaps_between_ascending_extents() {
        let o = Owner { node: 0, client: 1 };
        let e = |start, end| OwnedExtent {
            start,
            end,
            owner: o,
        };
        assert_eq!(uncovered(&[], 5, 9), vec![(5, 9)]);
        assert_eq!(uncovered(&[e(5, 9)], 5, 9), vec![]);
        assert_eq!(uncovered(&[e(6, 7), e(8, 20)], 5, 10), vec![(5, 6), (7, 8)]);
        assert_eq!(uncovered(&[e(0, 3)], 2, 6), vec![(3, 6)]);
    }
}
