//! The ownership service, client side: attach and detach (a client's log becomes or stops
//! being where readers find a range) and queries (who holds a range).
//!
//! The map of each (file, stripe) lives on `stripe_shard(ino, stripe)`; the shards answer in
//! [`super::ownership_shard`]. Remote stripes are cached under leases (see
//! [`crate::state::cache`]).

use crate::Node;
use crate::rpc::ServeClient;
use std::sync::Mutex;
use tessera_core::placement::{ino_shard, runs_by_stripe, split_by_stripe, stripe_shard};
use tessera_core::txn_pending::Span;
use tessera_core::{Errno, FsError, FsResult, OwnedRun, Owner, Run, RunMap};
use tessera_proto::{
    Attach, Detach, DetachFile, InodeGetAs, InodeSetSize, OwnAttach, OwnDetach, OwnDetachFile,
    OwnFetchStripe, OwnQueryFile, Owners, Query, QueryFile, SizeChange, TxnView,
};

/// A query or detach spanning more stripes than this is answered by asking every daemon
/// for the whole file instead of one request per stripe.
const MAX_STRIPES_PER_REQUEST: u64 = 64;

impl ServeClient<Attach> for Node {
    async fn serve_client(&self, client: u64, r: Attach) -> FsResult<()> {
        self.check_ino(r.ino)?;
        self.check_fences(r.ino, &r.fences, true)?;
        let txn = self.txns.member(client);
        self.attach(r.ino, self.writing_owner(client), r.runs, &r.fences, txn)
            .await?;
        // A member's positions are in its transaction's log, which is never published for it.
        if let (Some(pos), None) = (r.upto, txn) {
            self.note_published(client, r.ino, pos);
        }
        Ok(())
    }
}

impl ServeClient<Detach> for Node {
    async fn serve_client(&self, client: u64, r: Detach) -> FsResult<()> {
        self.check_ino(r.ino)?;
        self.refuse_in_txn(client, "detach")?;
        check_order(r.start, r.end, "detach")?;
        self.detach(r.ino, self.owner(client), r.start, r.end)
            .await?;
        self.release_migrated_now(r.ino);
        Ok(())
    }
}

impl ServeClient<DetachFile> for Node {
    async fn serve_client(&self, client: u64, r: DetachFile) -> FsResult<()> {
        self.check_ino(r.ino)?;
        self.refuse_in_txn(client, "detach")?;
        let owner = self.owner(client);
        let ino = r.ino;
        self.call_all(self.every_node(|| OwnDetachFile { ino, owner }))
            .await?;
        self.release_migrated_now(ino);
        Ok(())
    }
}

impl ServeClient<Query> for Node {
    async fn serve_client(&self, client: u64, r: Query) -> FsResult<Owners> {
        self.check_ino(r.ino)?;
        check_order(r.start, r.end, "query")?;
        self.query_as(&self.view_of(client), r.ino, r.start, r.end)
            .await
    }
}

impl ServeClient<QueryFile> for Node {
    async fn serve_client(&self, client: u64, r: QueryFile) -> FsResult<Owners> {
        self.check_ino(r.ino)?;
        self.query_file_as(&self.view_of(client), r.ino, r.from)
            .await
    }
}

impl Node {
    /// The owner a client of this node is known as.
    fn owner(&self, client: u64) -> Owner {
        Owner {
            node: self.id,
            client,
        }
    }

    /// Refuses `what` to a member of a transaction (it would act on the committed map at
    /// once, outside the transaction).
    fn refuse_in_txn(&self, client: u64, what: &str) -> FsResult<()> {
        match self.txns.member(client) {
            Some(txn) => Err(FsError::new(
                Errno::NotSup,
                format!(
                    "{what} inside transaction {txn:016x} is not supported: commit or abort the transaction first"
                ),
            )),
            None => Ok(()),
        }
    }

    /// Records that `client` published every write of `ino` below log position `pos`: what
    /// this daemon publishes for it if it dies starts there. Kept in the state too, for after
    /// a restart; not waited for: it reaches the state log with the next group, in
    /// microseconds, and until then the journal's own marker stands in for it.
    pub(crate) fn note_published(&self, client: u64, ino: u64, pos: u64) {
        self.clients.note_published(client, ino, pos);
        drop(
            self.store
                .submit(vec![crate::store::DbOp::PutPublished { client, ino, pos }]),
        );
    }

    /// The owner a client's attaches install: its transaction's log while it is a member.
    fn writing_owner(&self, client: u64) -> Owner {
        self.owner(self.txns.log_of(client))
    }

    /// Makes `owner` the owner of `runs` of `ino`, then extends the file's size over them.
    /// Installs `owner` as the holder of `runs`; `fences`: the tokens of the list locks the
    /// writes were made under (see [`Node::check_fences`]); `txn`: the transaction they are
    /// pending under, if any.
    pub(crate) async fn attach(
        &self,
        ino: u64,
        owner: Owner,
        runs: Vec<Run>,
        fences: &[u64],
        txn: Option<u64>,
    ) -> FsResult<()> {
        let per_stripe = runs_by_stripe(&runs, self.cfg.stripe_size)?;
        // Ownership sends every reader of these bytes to this log: it must hold them.
        self.logs.check_holds(ino, owner.client, &runs)?;
        let Some(end) = runs.iter().map(Run::end).max() else {
            return Ok(());
        };
        let n = self.cfg.nodes;
        let attach_reqs: Vec<(u32, OwnAttach)> = per_stripe
            .iter()
            .map(|(stripe, runs)| {
                let req = OwnAttach {
                    ino,
                    stripe: *stripe,
                    owner,
                    runs: runs.clone(),
                    fences: fences.to_vec(),
                    txn,
                };
                (stripe_shard(ino, *stripe, n), req)
            })
            .collect();
        // Ownership first, then the size: a query reads the size before the extents (see
        // `query`), so a size that covers these bytes is never seen without their owners.
        self.call_all(attach_reqs).await?;
        let extend = InodeSetSize {
            ino,
            change: SizeChange::Extend(end),
            txn,
        };
        let extended = self.call(ino_shard(ino), extend).await;
        if txn.is_some() {
            // Pending ownership is dropped with its transaction, which fails to commit.
            return extended.map(drop);
        }
        if let Err(e) = extended {
            // The file is gone (unlinked while we wrote): take back what this attach installed
            // so no ownership outlives the inode.
            let undo = per_stripe
                .iter()
                .flat_map(|(stripe, runs)| runs.iter().map(move |r| (*stripe, r.start, r.end())))
                .map(|(stripe, start, end)| self.own_detach(ino, owner, stripe, start, end))
                .collect::<Vec<_>>();
            let _ = self.call_all(undo).await;
            return Err(e);
        }
        Ok(())
    }

    /// The request dropping `owner`'s ownership of `[start, end)` within one stripe, and the
    /// shard it goes to.
    fn own_detach(
        &self,
        ino: u64,
        owner: Owner,
        stripe: u64,
        start: u64,
        end: u64,
    ) -> (u32, OwnDetach) {
        let req = OwnDetach {
            ino,
            stripe,
            owner,
            start,
            end,
        };
        (stripe_shard(ino, stripe, self.cfg.nodes), req)
    }

    /// Inode numbers from the wire must name a node of this instance.
    pub(crate) fn check_ino(&self, ino: u64) -> FsResult<()> {
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
        let reqs: Vec<_> = if stripes > MAX_STRIPES_PER_REQUEST * u64::from(self.cfg.nodes) {
            // Detach only where the owner actually holds bytes.
            let probe = Probe::new(TxnView::default());
            let mine = self.query_file_only(&probe, ino, Some(owner)).await?;
            mine.into_iter()
                .flat_map(|r| r.run.clip(start, end))
                .flat_map(|r| split_by_stripe(r.start, r.end(), ss))
                .map(|(stripe, s, t)| self.own_detach(ino, owner, stripe, s, t))
                .collect()
        } else {
            split_by_stripe(start, end, ss)
                .map(|(stripe, s, t)| self.own_detach(ino, owner, stripe, s, t))
                .collect()
        };
        self.call_all(reqs).await?;
        Ok(())
    }

    /// Who holds `[start, end)`, as the committed state says (the view of no transaction).
    pub async fn query(&self, ino: u64, start: u64, end: u64) -> FsResult<Owners> {
        self.query_as(&TxnView::default(), ino, start, end).await
    }

    /// Who holds `[start, end)` as `view` sees it, and the size if any byte of the range is
    /// unowned.
    ///
    /// All or nothing of each transaction: the parts of the answer (stripes, size) are given
    /// at different moments, so one may be given before a transaction's decision and another
    /// after its completion. Every part names the transactions with state there that it left
    /// out; those decided by now are included and the query asked again (see
    /// [`Node::decided_since`]). A part answered from a leased copy names none, so the copy
    /// must still be held, unchanged, once the answer is whole (a transaction's first write
    /// to a stripe drops the copies, before its decision can be taken); otherwise the query
    /// is asked again without copies.
    pub async fn query_as(
        &self,
        view: &TxnView,
        ino: u64,
        start: u64,
        end: u64,
    ) -> FsResult<Owners> {
        let mut probe = Probe::new(view.clone());
        loop {
            let owners = self.query_once(&probe, ino, start, end).await?;
            if self.settle(&mut probe, ino).await? {
                return Ok(owners);
            }
        }
    }

    /// Whether an answer gathered by `probe` is whole; if not, `probe` is set up to ask again.
    /// Fails when the decisions it depends on cannot be learned.
    async fn settle(&self, probe: &mut Probe, ino: u64) -> FsResult<bool> {
        let copies = std::mem::take(&mut *probe.copies.lock().expect("probe"));
        let excluded = std::mem::take(&mut *probe.excluded.lock().expect("probe"));
        let copies_held = copies.is_empty() || self.stripe_cache.all_still_held(&copies);
        if !copies_held {
            probe.use_cache = false;
        }
        // The common case, no transaction anywhere near: nothing to ask.
        if excluded.is_empty() {
            return Ok(copies_held);
        }
        match self.decided_since(&probe.view, &excluded).await {
            Some(newly) => {
                probe.view.committed.extend(&newly);
                Ok(copies_held && newly.is_empty())
            }
            None if crate::clock::since(probe.started) >= super::txn_shard::RESOLVE_WAIT => {
                Err(super::txn_shard::undecidable(ino))
            }
            None => {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                Ok(false)
            }
        }
    }

    /// One round of [`Node::query_as`].
    ///
    /// The size is read before the runs it is returned with. Attach installs ownership before
    /// it extends the size, so every byte below a size we return that an attach had published
    /// by then is owned in the answer: a reader never mistakes an appended, committed range
    /// for a hole. Runs asked for before the size are asked for again if they left a gap below
    /// it.
    async fn query_once(&self, probe: &Probe, ino: u64, start: u64, end: u64) -> FsResult<Owners> {
        let ss = self.cfg.stripe_size;
        if start >= end {
            let (size, pfs_upto) = self.size_as(probe, ino).await?;
            return Ok(Owners {
                size: Some(size),
                pfs_upto,
                runs: Vec::new(),
                next: None,
            });
        }
        let stripes = (end - 1) / ss - start / ss + 1;
        if stripes > MAX_STRIPES_PER_REQUEST {
            // From the whole file's pages: runs are cut at stripes, so none that starts before
            // the range's first stripe reaches into it. `next` continues with QueryFile.
            let (size, pfs_upto) = self.size_as(probe, ino).await?;
            let (runs, next) = self
                .query_file_page(probe, ino, None, start - start % ss)
                .await?;
            return Ok(Owners {
                size: Some(size),
                pfs_upto,
                runs: clip_runs(&runs, start, end),
                next: next.filter(|n| *n < end),
            });
        }
        let runs = self.range_owners(probe, ino, start, end).await?;
        // Only a range with unowned bytes needs the size (zeros below it, end of file above).
        let owned: u64 = runs.iter().map(|r| r.run.bytes()).sum();
        if owned == end - start {
            return Ok(Owners {
                size: None,
                pfs_upto: None,
                runs,
                next: None,
            });
        }
        let (size, pfs_upto) = self.size_as(probe, ino).await?;
        let below = end.min(size);
        let runs = if below > start && owned_below(&runs, below) < below - start {
            // A gap below the size: ask again, after the size.
            self.range_owners(probe, ino, start, end).await?
        } else {
            runs
        };
        Ok(Owners {
            size: Some(size),
            pfs_upto,
            runs,
            next: None,
        })
    }

    /// The size of `ino` as the probe's view sees it.
    async fn size_as(&self, probe: &Probe, ino: u64) -> FsResult<(u64, Option<u64>)> {
        let shard = ino_shard(ino);
        let got = self
            .call(
                shard,
                InodeGetAs {
                    ino,
                    view: probe.view.clone(),
                },
            )
            .await?;
        probe.left_out(got.excluded);
        Ok((got.attr.size, got.pfs_upto))
    }

    /// The owners of `[start, end)`, stripe by stripe, ascending by start within each.
    async fn range_owners(
        &self,
        probe: &Probe,
        ino: u64,
        start: u64,
        end: u64,
    ) -> FsResult<Vec<OwnedRun>> {
        let per_stripe = split_by_stripe(start, end, self.cfg.stripe_size)
            .map(|(stripe, s, t)| self.stripe_owners(probe, ino, stripe, s, t));
        Ok(futures::future::try_join_all(per_stripe)
            .await?
            .into_iter()
            .flatten()
            .collect())
    }

    /// The committed owners of `[s, t)` within one stripe, as a query finds them (leased copies
    /// used and filled); for advisory answers (locality), which need no settled view.
    pub(crate) async fn committed_stripe_owners(
        &self,
        ino: u64,
        stripe: u64,
        s: u64,
        t: u64,
    ) -> FsResult<Vec<OwnedRun>> {
        let probe = Probe::new(TxnView::default());
        self.stripe_owners(&probe, ino, stripe, s, t).await
    }

    /// The owners of `[s, t)` within one stripe: from this node's shard, from a leased copy of
    /// a remote stripe, or by fetching (and caching) the remote stripe.
    async fn stripe_owners(
        &self,
        probe: &Probe,
        ino: u64,
        stripe: u64,
        s: u64,
        t: u64,
    ) -> FsResult<Vec<OwnedRun>> {
        let shard = stripe_shard(ino, stripe, self.cfg.nodes);
        if shard == self.id {
            return self.shards.ownership(|own| {
                self.txns.pending(|pending| {
                    let span = Span {
                        ino,
                        stripe,
                        start: s,
                        end: t,
                    };
                    let (runs, excluded) =
                        super::ownership_shard::view_query(pending, own, span, &probe.view);
                    probe.left_out(excluded);
                    Ok(runs)
                })
            });
        }
        let plain = probe.view == TxnView::default();
        if plain
            && probe.use_cache
            && let Some((runs, version)) = self.stripe_cache.runs_within((ino, stripe), s, t)
        {
            probe
                .copies
                .lock()
                .expect("probe")
                .push(((ino, stripe), version));
            return Ok(runs);
        }
        let asked = crate::clock::now();
        let fetch = OwnFetchStripe {
            ino,
            stripe,
            from: self.id,
            view: probe.view.clone(),
        };
        let got = self.call(shard, fetch).await?;
        probe.left_out(got.excluded);
        if got.cached {
            let mut map = RunMap::new();
            for r in &got.runs {
                map.restore(r.run, r.owner);
            }
            self.stripe_cache
                .put((ino, stripe), map, got.version, asked);
        }
        Ok(clip_runs(&got.runs, s, t))
    }

    /// Who holds the bytes of the file from the runs that start at `from` on, as many as fit in
    /// one answer (`next`: where the rest begins), and its size (read first: see
    /// [`Node::query_once`]), as `view` sees them (all or nothing of each transaction, as
    /// [`Node::query_as`]).
    pub async fn query_file_as(&self, view: &TxnView, ino: u64, from: u64) -> FsResult<Owners> {
        let mut probe = Probe::new(view.clone());
        loop {
            let (size, pfs_upto) = self.size_as(&probe, ino).await?;
            let (runs, next) = self.query_file_page(&probe, ino, None, from).await?;
            if self.settle(&mut probe, ino).await? {
                return Ok(Owners {
                    size: Some(size),
                    pfs_upto,
                    runs,
                    next,
                });
            }
        }
    }

    /// Who holds every byte of the file as committed (for this daemon's own use: not bounded
    /// by a frame).
    pub async fn query_file_whole(&self, ino: u64) -> FsResult<Owners> {
        let mut probe = Probe::new(TxnView::default());
        loop {
            let (size, pfs_upto) = self.size_as(&probe, ino).await?;
            let runs = self.query_file_only(&probe, ino, None).await?;
            if self.settle(&mut probe, ino).await? {
                return Ok(Owners {
                    size: Some(size),
                    pfs_upto,
                    runs,
                    next: None,
                });
            }
        }
    }

    /// Every run of `ino`, or only `only`'s, ascending by start, page after page.
    async fn query_file_only(
        &self,
        probe: &Probe,
        ino: u64,
        only: Option<Owner>,
    ) -> FsResult<Vec<OwnedRun>> {
        let mut out = Vec::new();
        let mut from = Some(0);
        while let Some(at) = from {
            let (runs, next) = self.query_file_page(probe, ino, only, at).await?;
            out.extend(runs);
            from = next;
        }
        Ok(out)
    }

    /// The runs of `ino` (or only `only`'s) that start at or after `from`, ascending, as many
    /// as one frame holds, and where the rest begins. Every node answers a page of its own;
    /// the answer stops where the first node stopped, so that no run before that point is
    /// missing.
    async fn query_file_page(
        &self,
        probe: &Probe,
        ino: u64,
        only: Option<Owner>,
        from: u64,
    ) -> FsResult<(Vec<OwnedRun>, Option<u64>)> {
        // An owned run encodes in at most about 45 bytes.
        let max = (self.cfg.max_frame / 64).max(1);
        let pages = self
            .call_all(self.every_node(|| OwnQueryFile {
                ino,
                only,
                from,
                max,
                view: probe.view.clone(),
            }))
            .await?;
        let mut cut = pages.iter().filter_map(|p| p.resume).min();
        let mut runs: Vec<OwnedRun> = Vec::new();
        for p in pages {
            probe.left_out(p.excluded);
            runs.extend(
                p.runs
                    .into_iter()
                    .filter(|r| cut.is_none_or(|c| r.run.start < c)),
            );
        }
        runs.sort_by_key(|r| r.run.start);
        if runs.len() > max as usize {
            cut = Some(runs[max as usize].run.start);
            runs.truncate(max as usize);
        }
        Ok((runs, cut))
    }
}

/// What one query gathers beside its answer: the view it asks with, the transactions its
/// parts left out, and the leased copies it read.
struct Probe {
    view: TxnView,
    excluded: Mutex<Vec<u64>>,
    copies: Mutex<Vec<((u64, u64), u64)>>,
    use_cache: bool,
    started: std::time::Instant,
}

impl Probe {
    fn new(view: TxnView) -> Probe {
        Probe {
            view,
            excluded: Mutex::new(Vec::new()),
            copies: Mutex::new(Vec::new()),
            use_cache: true,
            started: crate::clock::now(),
        }
    }

    fn left_out(&self, txns: Vec<u64>) {
        if !txns.is_empty() {
            self.excluded.lock().expect("probe").extend(txns);
        }
    }
}

/// The parts of `runs` within `[start, end)`, ascending by start.
fn clip_runs(runs: &[OwnedRun], start: u64, end: u64) -> Vec<OwnedRun> {
    let mut out: Vec<OwnedRun> = runs
        .iter()
        .flat_map(|r| {
            r.run
                .clip(start, end)
                .into_iter()
                .map(move |run| OwnedRun { run, ..*r })
        })
        .collect();
    out.sort_by_key(|r| r.run.start);
    out
}

/// How many bytes of `runs` (disjoint) lie below `end`.
fn owned_below(runs: &[OwnedRun], end: u64) -> u64 {
    runs.iter()
        .flat_map(|r| r.run.clip(0, end))
        .map(|r| r.bytes())
        .sum()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_clipped_and_counted_below_an_end() {
        let owner = Owner { node: 0, client: 1 };
        let a = OwnedRun {
            run: Run {
                start: 0,
                len: 4,
                stride: 10,
                count: 5,
            },
            owner,
        };
        let b = OwnedRun {
            run: Run::single(4, 3),
            owner,
        };
        let clipped = clip_runs(&[a, b], 2, 22);
        let starts: Vec<u64> = clipped.iter().map(|r| r.run.start).collect();
        assert_eq!(starts, vec![2, 4, 10, 20]);
        assert_eq!(owned_below(&clipped, 22), 2 + 3 + 4 + 2);
        assert_eq!(owned_below(&[a], 12), 4 + 2);
    }
}
