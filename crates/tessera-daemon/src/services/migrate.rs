//! Migration (FusionFS's migrate-on-open): a reader's daemon hands it the owners of
//! a file's stripes with the version each was read at; the reader copies the remote bytes into
//! its own log and asks for a conditional attach, applied per stripe only where the stripe is
//! unchanged since that version (a writer's attach, detach or truncate in between, or a
//! transaction's state there, keeps the stripe as it is: the copy may be older). Ownership so
//! moves only where the owner is still the one copied from, under every consistency model.
//!
//! The logs copied from are released once nothing points at them: each source node keeps a
//! list of (log, due time) and, after `migrate_grace_ms` (readers that learned the old owner
//! just before the move may still read it until then) or at the next detach or flush of the
//! file on that node, whichever comes first, removes a log whose writer has ended
//! (neither connected nor expected back) and that owns no byte of the file any more. The logs
//! an aborted transaction wrote, and those a member that died left unpublished under its
//! transaction, are released the same way. The list is not kept across
//! restarts; a log left then goes with its file.
//!
//! The copies are never published for the migrating process: its journal marks them
//! published as they are appended, and its daemon records `upto` past them before any stripe
//! moves.

use crate::Node;
use crate::rpc::{ServeClient, ServePeer};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tessera_core::placement::{ino_shard, stripe_shard};
use tessera_core::{Errno, FsError, FsResult, Owner, Run};
use tessera_proto::{
    AttachIf, InodeGet, MigratePlan, OwnAttachIf, OwnQueryFile, OwnStripeAt, ReleaseLogs, StripeAt,
    TxnView,
};

/// Most stripes one plan covers (files larger than this many stripes are not migrated).
const MAX_PLAN_STRIPES: u64 = 1 << 16;
/// Most logs one release names.
const MAX_RELEASES: usize = 1 << 16;

impl ServeClient<MigratePlan> for Node {
    async fn serve_client(&self, _: u64, r: MigratePlan) -> FsResult<Vec<StripeAt>> {
        self.check_ino(r.ino)?;
        let size = self
            .call(ino_shard(r.ino), InodeGet { ino: r.ino })
            .await?
            .size;
        if size == 0 {
            return Ok(Vec::new());
        }
        let stripes = (size - 1) / self.cfg.stripe_size + 1;
        if stripes > MAX_PLAN_STRIPES {
            return Err(FsError::new(
                Errno::FBig,
                format!(
                    "a file of {stripes} stripes is too large to migrate at once (at most {MAX_PLAN_STRIPES})"
                ),
            ));
        }
        let n = self.cfg.nodes;
        let asks = (0..stripes).map(|stripe| {
            let at = OwnStripeAt { ino: r.ino, stripe };
            (stripe_shard(r.ino, stripe, n), at)
        });
        Ok(self
            .call_all(asks.collect::<Vec<_>>())
            .await?
            .into_iter()
            .flatten()
            .collect())
    }
}

impl ServeClient<AttachIf> for Node {
    async fn serve_client(&self, client: u64, r: AttachIf) -> FsResult<u64> {
        self.check_ino(r.ino)?;
        if self.txns.member(client).is_some() {
            return Err(FsError::new(
                Errno::NotSup,
                "migration inside a transaction is not supported: commit or abort it first",
            ));
        }
        let owner = Owner {
            node: self.id,
            client,
        };
        if r.stripes.len() as u64 > MAX_PLAN_STRIPES {
            return Err(FsError::new(
                Errno::Inval,
                format!(
                    "a conditional attach of {} stripes: at most {MAX_PLAN_STRIPES}",
                    r.stripes.len()
                ),
            ));
        }
        // Well formed and inside their stripes before anything walks them.
        for (stripe, _, runs) in &r.stripes {
            super::ownership_shard::check_runs(runs, *stripe, self.cfg.stripe_size)?;
        }
        let all: Vec<Run> = r
            .stripes
            .iter()
            .flat_map(|(_, _, runs)| runs.clone())
            .collect();
        // Ownership sends readers to this log: it must hold the bytes.
        self.logs.check_holds(r.ino, client, &all)?;
        if let Some(pos) = r.upto {
            // Before any stripe moves, and whether or not one does: the copies are never
            // published for this client if it dies (a copy of an old version would overwrite
            // what a writer attached since).
            self.note_published(client, r.ino, pos);
        }
        let n = self.cfg.nodes;
        let asks: Vec<(u32, OwnAttachIf)> = r
            .stripes
            .iter()
            .map(|(stripe, version, runs)| {
                let req = OwnAttachIf {
                    ino: r.ino,
                    stripe: *stripe,
                    owner,
                    runs: runs.clone(),
                    version: *version,
                };
                (stripe_shard(r.ino, *stripe, n), req)
            })
            .collect();
        let applied = self.call_all(asks).await?;
        let moved: u64 = r
            .stripes
            .iter()
            .zip(&applied)
            .filter(|(_, ok)| **ok)
            .flat_map(|((_, _, runs), _)| runs.iter().map(Run::bytes))
            .sum();
        if moved > 0 {
            let releases = release_requests(
                r.ino,
                r.from
                    .iter()
                    .copied()
                    .filter(|o| o.node != self.id || o.client != client),
            );
            // Best effort: a log not released stays until its file goes.
            if let Err(e) = self.call_all(releases).await {
                tracing::warn!(ino = r.ino, "releasing migrated logs: {}", e.message);
            }
        }
        Ok(moved)
    }
}

/// The logs of this node listed for release, and the listings this node sends to others.
#[derive(Default)]
pub struct Releases {
    list: Mutex<ReleaseList>,
    /// Logs to list for release on their nodes (this one too), sent by the release task: a
    /// completion does not wait on a node that may be down.
    out: Mutex<Vec<(u32, ReleaseLogs)>>,
}

#[derive(Default)]
struct ReleaseList {
    /// (due, ino, client): each looked at once due.
    listed: Vec<(Instant, u64, u64)>,
    /// Taken off `listed` by the release task and not decided on yet.
    checking: usize,
}

impl Releases {
    /// Lists the logs of `clients` for `ino`, to be looked at from `due` (a log listed again
    /// moves its due time on).
    fn list(&self, ino: u64, clients: impl IntoIterator<Item = u64>, due: Instant) {
        let mut list = self.list.lock().expect("releases");
        for c in clients {
            list.listed
                .retain(|(_, i, client)| (*i, *client) != (ino, c));
            list.listed.push((due, ino, c));
        }
    }

    /// Makes the listed logs of `ino` due at `now`.
    fn due_now(&self, ino: u64, now: Instant) {
        for e in self.list.lock().expect("releases").listed.iter_mut() {
            if e.1 == ino {
                e.0 = now;
            }
        }
    }

    /// Takes the logs due at `now` off the list: (ino, client), each counted as being checked
    /// until [`Releases::checked`].
    fn take_due(&self, now: Instant) -> Vec<(u64, u64)> {
        let mut list = self.list.lock().expect("releases");
        let (due, later): (Vec<_>, Vec<_>) = list.listed.drain(..).partition(|(t, _, _)| *t <= now);
        list.listed = later;
        list.checking = due.len();
        due.into_iter().map(|(_, ino, c)| (ino, c)).collect()
    }

    /// One log taken by [`Releases::take_due`] was decided on (released, kept, or listed
    /// again).
    fn checked(&self) {
        let mut list = self.list.lock().expect("releases");
        list.checking = list.checking.saturating_sub(1);
    }

    /// Logs listed or being checked: space that may still come back.
    pub fn count(&self) -> usize {
        let list = self.list.lock().expect("releases");
        list.listed.len() + list.checking
    }

    /// Listings for other nodes (or this one), sent by the release task.
    pub fn send(&self, requests: impl IntoIterator<Item = (u32, ReleaseLogs)>) {
        self.out.lock().expect("releases").extend(requests);
    }

    fn take_to_send(&self) -> Vec<(u32, ReleaseLogs)> {
        std::mem::take(&mut *self.out.lock().expect("releases"))
    }
}

/// The requests that list `owners`' logs of `ino` for release on their nodes: one per node
/// (and per [`MAX_RELEASES`] logs), each log once.
pub(crate) fn release_requests(
    ino: u64,
    owners: impl IntoIterator<Item = Owner>,
) -> Vec<(u32, ReleaseLogs)> {
    let mut by_node: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for o in owners {
        by_node.entry(o.node).or_default().push(o.client);
    }
    let mut out = Vec::new();
    for (node, mut clients) in by_node {
        clients.sort_unstable();
        clients.dedup();
        for part in clients.chunks(MAX_RELEASES) {
            let req = ReleaseLogs {
                ino,
                clients: part.to_vec(),
                now: false,
            };
            out.push((node, req));
        }
    }
    out
}

impl ServePeer<OwnStripeAt> for Node {
    async fn serve_peer(&self, r: OwnStripeAt) -> FsResult<Option<StripeAt>> {
        self.shards.ownership(|own| {
            if self.txns.pending(|p| p.touches_stripe(r.ino, r.stripe)) {
                return Ok(None);
            }
            let version = self.shards.callbacks(|cb| cb.current());
            Ok(Some(StripeAt {
                stripe: r.stripe,
                version,
                runs: own.query_stripe(r.ino, r.stripe),
            }))
        })
    }
}

impl ServePeer<OwnAttachIf> for Node {
    async fn serve_peer(&self, r: OwnAttachIf) -> FsResult<bool> {
        super::ownership_shard::check_runs(&r.runs, r.stripe, self.cfg.stripe_size)?;
        let key = (r.ino, r.stripe);
        let still = |node: &Node| {
            node.shards
                .callbacks(|cb| cb.unchanged_since(key, r.version))
                && !node.txns.pending(|p| p.touches_stripe(r.ino, r.stripe))
        };
        // Refused here, without a change (which would count as one and make other
        // migrations of the stripe fail too); checked again under the change below.
        let unchanged = self.shards.ownership(|_| still(self));
        if !unchanged {
            return Ok(false);
        }
        self.change_ownership(
            super::ownership_shard::Stale::Stripe(r.ino, r.stripe),
            |own| {
                // Checked under the ownership lock that every change takes: nothing slips in.
                if !still(self) {
                    return (false, Vec::new());
                }
                (true, own.attach(r.ino, r.stripe, r.owner, &r.runs))
            },
        )
        .await
    }
}

impl ServePeer<ReleaseLogs> for Node {
    async fn serve_peer(&self, r: ReleaseLogs) -> FsResult<()> {
        if r.clients.len() > MAX_RELEASES {
            return Err(FsError::new(
                Errno::Inval,
                format!(
                    "{} logs to release at once: at most {MAX_RELEASES}",
                    r.clients.len()
                ),
            ));
        }
        if r.now {
            self.release_migrated_now(r.ino);
        }
        self.list_for_release(r.ino, r.clients);
        Ok(())
    }
}

impl Node {
    /// Lists the logs of `clients` for `ino` on this node for release one grace period from
    /// now (see [`Node::release_migrated`]).
    pub(crate) fn list_for_release(&self, ino: u64, clients: impl IntoIterator<Item = u64>) {
        let due = crate::clock::now() + Duration::from_millis(self.cfg.migrate_grace_ms);
        self.releases.list(ino, clients, due);
    }

    /// A detach or flush of `ino` on this node ends the grace of its migrated-away logs (the
    /// next round of [`Node::release_migrated`] looks at them).
    pub(crate) fn release_migrated_now(&self, ino: u64) {
        self.releases.due_now(ino, crate::clock::now());
    }

    /// Removes the logs migrations moved away from, once their grace period is over, their
    /// writer gone and no byte of the file owned by them.
    pub async fn release_migrated(self: Arc<Self>) {
        let tick = Duration::from_millis((self.cfg.migrate_grace_ms / 4).clamp(10, 1000));
        loop {
            tokio::time::sleep(tick).await;
            for (node, req) in self.releases.take_to_send() {
                let me = Arc::clone(&self);
                tokio::spawn(async move {
                    let ino = req.ino;
                    if let Err(e) = me.call(node, req).await {
                        // Best effort: a log not released stays until its file goes.
                        tracing::warn!(ino, node, "listing logs for release: {}", e.message);
                    }
                });
            }
            for (ino, client) in self.releases.take_due(crate::clock::now()) {
                match self.release_log(ino, client).await {
                    Ok(Some(freed)) => tracing::info!(ino, client, freed, "released a log"),
                    Ok(None) => {}
                    Err(e) => tracing::debug!(ino, client, "keeping a log: {}", e.message),
                }
                // Decided (or listed again): counted once more only if listed again.
                self.releases.checked();
            }
        }
    }

    /// Removes the log of `client` for `ino` if nothing needs it; the bytes freed, or `None`
    /// if it still owns bytes. A log whose writer is still connected is looked at again one
    /// grace period later.
    async fn release_log(&self, ino: u64, client: u64) -> FsResult<Option<u64>> {
        // A writer that may still come back (its connection dropped, or it was connected
        // when this daemon stopped) may still append to the log, or leave writes to publish.
        if self.clients.is_live(client) || self.clients.is_absent(client) {
            self.list_for_release(ino, [client]);
            return Ok(None);
        }
        let owner = Owner {
            node: self.id,
            client,
        };
        let pages = self
            .call_all(self.every_node(|| OwnQueryFile {
                ino,
                only: Some(owner),
                from: 0,
                max: 1,
                view: TxnView::default(),
            }))
            .await?;
        if pages.iter().any(|p| !p.runs.is_empty()) {
            return Ok(None);
        }
        if pages.iter().any(|p| !p.excluded.is_empty()) {
            // A transaction not resolved everywhere yet may still own bytes of it (or, aborted,
            // not have been dropped on every node): looked at again a grace period later.
            self.list_for_release(ino, [client]);
            return Ok(None);
        }
        crate::blocking::blocking(|| {
            self.logs
                .drop_log(ino, client, |log, txn| self.log_in_use(log, txn))
                .map(Some)
        })
    }
}
