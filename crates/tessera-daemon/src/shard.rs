//! What a daemon does for a peer: operations on the shards it holds and the logs on its node.
//!
//! Each request touches only this node's state, so nothing here calls another daemon. State
//! changes are queued to the store while the shard lock is held and acknowledged once durable.

use crate::cache::Change;
use crate::namespace::{NewNode, now_ns};
use crate::peer::PeerReply;
use crate::{Node, flush};
use tessera_core::{Errno, FsError, FsResult, Run, path};
use tessera_proto::{Attr, Dentry, OwnedExtent, PeerRequest, PeerResponse};

impl Node {
    pub async fn handle_peer(&self, req: PeerRequest) -> FsResult<PeerReply> {
        self.count_request();
        use PeerRequest as P;
        let resp = match req {
            P::Ping => PeerResponse::Pong { node: self.id },
            P::Lock {
                ino,
                owner,
                start,
                end,
                kind,
                wait,
            } => {
                self.locks.lock(ino, owner, kind, start, end, wait).await?;
                PeerResponse::Ok
            }
            P::GetLock {
                ino,
                owner,
                start,
                end,
                kind,
            } => PeerResponse::Lock(self.locks.get_lock(ino, owner, kind, start, end)),
            P::ReleaseLocks { owner_id } => {
                self.locks.release_owner(owner_id);
                PeerResponse::Ok
            }
            P::Status => PeerResponse::Status(self.status()),
            P::Shutdown => {
                self.shutdown.notify_one();
                PeerResponse::Ok
            }
            P::DentryGet { path } => {
                let p = path::normalize(&path)?;
                PeerResponse::Found(self.dentry_get(&p).await?)
            }
            P::DentryCreate {
                path,
                kind,
                mode,
                uid,
                gid,
                exclusive,
            } => {
                let p = path::normalize(&path)?;
                let new = NewNode {
                    kind,
                    mode,
                    uid,
                    gid,
                    size: 0,
                    mtime_ns: now_ns(),
                };
                // An entry that exists only on the PFS counts as existing.
                if let Some((dentry, attr)) = self.dentry_get(&p).await? {
                    if exclusive {
                        return Err(FsError::new(
                            Errno::Exist,
                            format!("{} already exists", self.user_path(&p)),
                        ));
                    }
                    return Ok(PeerReply::msg(PeerResponse::Created {
                        dentry,
                        created: false,
                        attr,
                    }));
                }
                let (res, pending) = {
                    let mut ns = self.ns.lock().expect("ns");
                    match ns.create(&p, new, exclusive) {
                        Ok((dentry, created, ops)) => (
                            Ok((dentry, created, ns.attr(dentry.ino))),
                            self.store.submit(ops),
                        ),
                        Err(e) => (Err(e), self.store.submit(Vec::new())),
                    }
                };
                pending.durable().await?;
                let (dentry, created, attr) = res.map_err(|e| {
                    FsError::new(e.errno, format!("{} already exists", self.user_path(&p)))
                })?;
                PeerResponse::Created {
                    dentry,
                    created,
                    attr,
                }
            }
            P::DentryRemove { path, ino } => {
                let p = path::normalize(&path)?;
                let (removed, pending) = {
                    let mut ns = self.ns.lock().expect("ns");
                    let (removed, ops) = ns.remove(&p, ino)?;
                    (removed, self.store.submit(ops))
                };
                pending.durable().await?;
                PeerResponse::Bool(removed)
            }
            P::DentryPut { path, dentry } => {
                let p = path::normalize(&path)?;
                let (old, pending) = {
                    let mut ns = self.ns.lock().expect("ns");
                    let (old, ops) = ns.put(&p, dentry)?;
                    (old, self.store.submit(ops))
                };
                pending.durable().await?;
                PeerResponse::Dentry(old)
            }
            P::ListChildren { dir } => {
                let d = path::normalize(&dir)?;
                PeerResponse::Entries(self.ns.lock().expect("ns").children(&d))
            }
            P::HasChildren { dir } => {
                let d = path::normalize(&dir)?;
                PeerResponse::Bool(self.ns.lock().expect("ns").has_children(&d))
            }
            P::InodeGet { ino } => PeerResponse::Attr(self.inode(ino)?),
            P::InodeSetSize { ino, change } => {
                let (attr, pending) = {
                    let mut ns = self.ns.lock().expect("ns");
                    let (attr, ops) = ns.set_size(ino, change, now_ns())?;
                    (attr, self.store.submit(ops))
                };
                pending.durable().await?;
                PeerResponse::Attr(attr)
            }
            P::InodeSetAttr { ino, change } => {
                let (attr, pending) = {
                    let mut ns = self.ns.lock().expect("ns");
                    let (attr, ops) = ns.set_attr(ino, &change, now_ns())?;
                    (attr, self.store.submit(ops))
                };
                pending.durable().await?;
                PeerResponse::Attr(attr)
            }
            P::InodeRemove { ino } => {
                let pending = {
                    let mut ns = self.ns.lock().expect("ns");
                    self.store.submit(ns.remove_inode(ino))
                };
                pending.durable().await?;
                PeerResponse::Ok
            }
            P::OwnAttach {
                ino,
                stripe,
                owner,
                runs,
            } => {
                check_runs(&runs, stripe, self.cfg.stripe_size)?;
                let (pending, tell) = {
                    let mut own = self.own.lock().expect("own");
                    let ops = own.attach(ino, stripe, owner, &runs);
                    (self.store.submit(ops), self.changing([(ino, stripe)]))
                };
                pending.durable().await?;
                self.tell_holders(tell).await;
                PeerResponse::Ok
            }
            P::OwnDetach {
                ino,
                stripe,
                owner,
                start,
                end,
            } => {
                let (removed, pending, tell) = {
                    let mut own = self.own.lock().expect("own");
                    let (removed, ops) = own.detach(ino, stripe, owner, start, end);
                    (
                        removed,
                        self.store.submit(ops),
                        self.changing([(ino, stripe)]),
                    )
                };
                pending.durable().await?;
                self.tell_holders(tell).await;
                PeerResponse::Bytes(removed)
            }
            P::OwnFetchStripe { ino, stripe, from } => {
                let own = self.own.lock().expect("own");
                let extents = own.query(ino, stripe, 0, u64::MAX);
                let cached = from != self.id && extents.len() <= crate::cache::MAX_CACHED_EXTENTS;
                // Granted under the ownership lock: no change can slip between map and lease.
                let version = if cached {
                    self.callbacks
                        .lock()
                        .expect("callbacks")
                        .grant((ino, stripe), from)
                } else {
                    0
                };
                PeerResponse::Stripe {
                    extents,
                    version,
                    cached,
                }
            }
            P::Invalidate {
                ino,
                stripe,
                version,
            } => {
                self.stripe_cache
                    .lock()
                    .expect("stripe cache")
                    .invalidate((ino, stripe), version);
                PeerResponse::Ok
            }
            P::OwnQueryFile { ino, only } => {
                PeerResponse::Extents(self.own.lock().expect("own").query_file(ino, only))
            }
            P::OwnDetachFile { ino, owner } => {
                let (pending, tell) = {
                    let mut own = self.own.lock().expect("own");
                    let ops = own.detach_file(ino, owner);
                    (self.store.submit(ops), self.changing_file(ino))
                };
                pending.durable().await?;
                self.tell_holders(tell).await;
                PeerResponse::Ok
            }
            P::OwnTruncate { ino, size } => {
                let (pending, tell) = {
                    let mut own = self.own.lock().expect("own");
                    let ops = own.truncate(ino, size);
                    (self.store.submit(ops), self.changing_file(ino))
                };
                pending.durable().await?;
                self.tell_holders(tell).await;
                PeerResponse::Ok
            }
            P::DropFile { ino } => {
                let (pending, tell) = {
                    let mut own = self.own.lock().expect("own");
                    let ops = own.drop_file(ino);
                    (self.store.submit(ops), self.changing_file(ino))
                };
                pending.durable().await?;
                self.tell_holders(tell).await;
                self.logs.drop_file(ino)?;
                PeerResponse::Ok
            }
            P::ReadLog {
                ino,
                client,
                ranges,
            } => {
                let data = self.read_local_log(ino, client, ranges).await?;
                return Ok(PeerReply::data(data.into()));
            }
            P::Flush { path, range } => {
                let (bytes, nodes) = flush::flush(self, &path, range).await?;
                PeerResponse::Flushed { bytes, nodes }
            }
            P::FlushPart {
                ino,
                target,
                extents,
            } => PeerResponse::Bytes(flush::write_part(self, ino, target, extents).await?),
        };
        Ok(PeerReply::msg(resp))
    }

    /// Records a change to `keys` (call under the ownership lock): the holders to tell.
    fn changing(&self, keys: impl IntoIterator<Item = (u64, u64)>) -> Change {
        self.callbacks.lock().expect("callbacks").change(keys)
    }

    /// Records a change to every stripe of `ino` held here.
    fn changing_file(&self, ino: u64) -> Change {
        let mut cb = self.callbacks.lock().expect("callbacks");
        let keys = cb.held_stripes(ino);
        cb.change(keys)
    }

    /// Tells the holders of changed stripes to drop their copies before the change is
    /// acknowledged; a holder that cannot be reached is waited out until its lease ends. After
    /// a restart, changes first wait until every lease granted before it has ended.
    async fn tell_holders(&self, change: Change) {
        let quiet = self.callbacks.lock().expect("callbacks").quiet_for();
        if !quiet.is_zero() {
            tokio::time::sleep(quiet).await;
        }
        let version = change.version;
        let calls = change.holders.into_iter().map(|h| async move {
            let (ino, stripe) = h.key;
            let told = self
                .call(
                    h.node,
                    PeerRequest::Invalidate {
                        ino,
                        stripe,
                        version,
                    },
                )
                .await;
            match told {
                Ok(_) => self
                    .callbacks
                    .lock()
                    .expect("callbacks")
                    .dropped(h.key, h.node, version),
                // Unreachable: its copy is dead when its lease ends.
                Err(_) => tokio::time::sleep_until(h.expires.into()).await,
            }
        });
        futures::future::join_all(calls).await;
    }

    /// Reads from a log on this node, off the async workers.
    pub async fn read_local_log(
        &self,
        ino: u64,
        client: u64,
        ranges: Vec<(u64, u64)>,
    ) -> FsResult<Vec<u8>> {
        // Log reads are page-cache or NVMe reads of bounded size; doing them inline keeps the
        // common small read free of a thread hop, large ones go to the blocking pool.
        let total: u64 = ranges
            .iter()
            .map(|(s, e)| e.saturating_sub(*s))
            .fold(0, u64::saturating_add);
        if total <= 256 << 10 {
            return self.logs.read(ino, client, &ranges);
        }
        let logs = &self.logs;
        tokio::task::block_in_place(|| logs.read(ino, client, &ranges))
    }

    pub fn inode(&self, ino: u64) -> FsResult<Attr> {
        self.ns.lock().expect("ns").attr(ino).ok_or_else(|| {
            FsError::new(
                Errno::NoEnt,
                format!("inode {ino:#x} does not exist (the file was removed)"),
            )
        })
    }

    /// The entry of `p`; on a miss, a file or directory already on the PFS is imported.
    async fn dentry_get(&self, p: &str) -> FsResult<Option<(Dentry, Option<Attr>)>> {
        if p == "/" {
            return Err(FsError::new(
                Errno::Inval,
                "the root has no directory entry",
            ));
        }
        let found = {
            let ns = self.ns.lock().expect("ns");
            ns.get(p).map(|d| (d, ns.attr(d.ino)))
        };
        if found.is_some() {
            return Ok(found);
        }
        // Entries already on the PFS appear in Tessera, links as links; a path through a
        // link, and the temporaries of flushes, do not exist.
        if path::split(p).is_some_and(|(_, name)| name.starts_with(crate::pfs::TMP_MARKER)) {
            return Ok(None);
        }
        let Some(new) = self.pfs.lstat(p)? else {
            return Ok(None);
        };
        let (res, pending) = {
            let mut ns = self.ns.lock().expect("ns");
            let (dentry, _, ops) = ns.create(p, new, false)?;
            ((dentry, ns.attr(dentry.ino)), self.store.submit(ops))
        };
        pending.durable().await?;
        tracing::debug!(path = p, "imported from the PFS");
        Ok(Some(res))
    }
}

/// Runs from the wire must be well formed and inside the stripe they were sent for.
fn check_runs(runs: &[Run], stripe: u64, stripe_size: u64) -> FsResult<()> {
    let lo = stripe.saturating_mul(stripe_size);
    let hi = lo.saturating_add(stripe_size);
    for r in runs {
        if !r.is_valid() || r.start < lo || r.end() > hi {
            return Err(FsError::new(
                Errno::Inval,
                format!("attach run {r:?} is malformed or outside stripe {stripe} [{lo},{hi})"),
            ));
        }
    }
    Ok(())
}

/// Sorts and checks extents received for a flush.
pub fn check_extents(extents: &mut [OwnedExtent]) -> FsResult<()> {
    extents.sort_by_key(|e| e.start);
    for e in extents.iter() {
        if e.start >= e.end {
            return Err(FsError::new(
                Errno::Inval,
                format!("empty extent [{},{})", e.start, e.end),
            ));
        }
    }
    Ok(())
}
