//! Renames inside a transaction (D2T): a member's rename is pending like its creates and
//! removals. The old name's shard marks the entry renamed away (`DentryMoveOut`), the new
//! name's shard marks it created there (`DentryMoveIn`); the pair is tied by
//! `tessera_core::txn_entries::Moves`, so that at commit the old name goes without its file
//! (whose PFS copy follows it to the new name) and at abort the file stays where it was. The
//! members see the new name at once, everyone else the committed names until the decision.
//!
//! A crash of the member's daemon between the two marks (failpoint `txn-rename-moved-out`)
//! leaves the old name marked renamed away and no new name: the transaction cannot commit
//! whole, and its decision makes both shards agree (see `transactions.rs`).

use crate::Node;
use crate::rpc::ServePeer;
use crate::store::DbOp;
use tessera_core::namespace::Namespace;
use tessera_core::placement::path_shard;
use tessera_core::txn_entries::{EntryChange, PendingEntries, busy};
use tessera_core::{Errno, FsError, FsResult, path};
use tessera_proto::{Dentry, DentryMoveIn, DentryMoveOut, MovedIn, MovedOut, TxnView};

/// `txn` renames the entry of `path` naming `ino` away to `to` (`None`: removes it after all).
pub(crate) fn move_out(txn: u64, path: &str, ino: u64, to: Option<&str>) -> DentryMoveOut {
    DentryMoveOut {
        path: path.to_string(),
        ino,
        txn,
        to: to.map(str::to_string),
    }
}

impl ServePeer<DentryMoveOut> for Node {
    async fn serve_peer(&self, r: DentryMoveOut) -> FsResult<MovedOut> {
        let p = path::normalize(&r.path)?;
        let to = r.to.as_deref().map(path::normalize).transpose()?;
        self.change_entries(&p, r.txn, |ns, entries| {
            match entries.get(&p) {
                Some((other, _)) if other != r.txn => Err(busy(&self.user_path(&p), other)),
                // One it created (or renamed) there: that creation goes.
                Some((_, n)) if n.created.is_some_and(|d| d.ino == r.ino) => {
                    let (changes, moved_from) = entries.take_created(&p, r.ino)?;
                    let out = MovedOut {
                        committed: false,
                        moved_from,
                    };
                    Ok((changes, out))
                }
                _ => match ns.get(&p).filter(|d| d.ino == r.ino) {
                    Some(dentry) => {
                        let changes = entries.move_away(r.txn, &p, dentry, to.as_deref())?;
                        let out = MovedOut {
                            committed: true,
                            moved_from: None,
                        };
                        Ok((changes, out))
                    }
                    None => Err(self.enoent(&p)),
                },
            }
        })
        .await
    }
}

impl ServePeer<DentryMoveIn> for Node {
    async fn serve_peer(&self, r: DentryMoveIn) -> FsResult<MovedIn> {
        let p = path::normalize(&r.path)?;
        let from = r.from.as_deref().map(path::normalize).transpose()?;
        self.change_entries(&p, r.txn, |ns, entries| {
            let (changes, replaced) =
                entries.move_in(r.txn, &p, r.dentry, from.as_deref(), ns.get(&p))?;
            let out = MovedIn {
                replaced: replaced.created,
                moved_from: replaced.moved_from,
            };
            Ok((changes, out))
        })
        .await
    }
}

impl Node {
    /// For `txn`'s change of the pending name `p`: settles another transaction's decided
    /// entry there, applies `change` under the namespace and entries locks (the completion
    /// marks a transaction done under them, so none slips between), and waits until its rows
    /// are durable.
    async fn change_entries<T>(
        &self,
        p: &str,
        txn: u64,
        change: impl FnOnce(&Namespace, &mut PendingEntries) -> FsResult<(Vec<EntryChange>, T)>,
    ) -> FsResult<T> {
        self.check_txn_id(txn)?;
        self.settle_entry(p, Some(txn)).await?;
        let (out, durable) = self.shards.namespace(|ns| {
            self.txns.entries(|entries| {
                self.check_not_done(txn)?;
                let (changes, out) = change(ns, entries)?;
                let ops: Vec<DbOp> = changes.into_iter().map(DbOp::from).collect();
                Ok((out, self.store.submit(ops)))
            })
        })?;
        durable.durable().await?;
        Ok(out)
    }

    /// A member may rename a committed file only while it has no PFS copy (it lives in the
    /// burst buffer alone): a copy would have to move at commit, one name's shard at a time,
    /// and the members' reads of its bytes there would look under the new name meanwhile.
    /// Files the transaction wrote qualify; a flushed or imported one is refused with `EXDEV`
    /// (which `mv` answers by copying, itself pending).
    pub(crate) async fn check_movable_in_txn(
        &self,
        from: &str,
        to: &str,
        src: Dentry,
    ) -> FsResult<()> {
        let committed = self.lookup(&TxnView::default(), from).await?;
        if committed.is_none_or(|(d, _)| d.ino != src.ino) {
            // Made (or renamed here) by the transaction: no copy of its own.
            return Ok(());
        }
        if self.on_pfs(from, |pfs, p| pfs.lstat(p)).await?.is_some() {
            return Err(FsError::new(
                Errno::XDev,
                format!(
                    "{} has a copy in the PFS directory (it was flushed or imported): a transaction renames only files that live in the burst buffer alone; copy it to {} instead (mv does so by itself), or rename it outside the transaction",
                    self.user_path(from),
                    self.user_path(to)
                ),
            ));
        }
        Ok(())
    }

    /// A member of `txn` renames `src` from `from` to `to` (both normalised, checked as a
    /// rename outside a transaction is): pending until the transaction ends. A failure after
    /// the first shard changed, other than the new name's refusal (undone), aborts the
    /// transaction: its names could no longer commit whole.
    pub(crate) async fn rename_in_txn(
        &self,
        txn: u64,
        from: &str,
        to: &str,
        src: Dentry,
    ) -> FsResult<()> {
        let nodes = self.cfg.nodes;
        let out = self
            .call(
                path_shard(from, nodes),
                move_out(txn, from, src.ino, Some(to)),
            )
            .await?;
        self.failpoints.crash_at("txn-rename-moved-out")?;
        // The committed name the file has outside the transaction, if it has one.
        let origin = if out.committed {
            Some(from.to_string())
        } else {
            out.moved_from.clone()
        };
        let move_in = |path: &str| DentryMoveIn {
            path: path.to_string(),
            dentry: src,
            txn,
            from: origin.clone(),
        };
        let moved_in = match self.call(path_shard(to, nodes), move_in(to)).await {
            Ok(m) => m,
            Err(e) => {
                // Back where it was: renamed from there to there is no rename at all.
                if let Err(back) = self.call(path_shard(from, nodes), move_in(from)).await {
                    self.doom(txn, &back).await;
                }
                return Err(e);
            }
        };
        let done = self
            .finish_rename(txn, to, src, out.moved_from, moved_in)
            .await;
        if let Err(e) = &done {
            self.doom(txn, e).await;
        }
        done
    }

    /// The rest of [`Node::rename_in_txn`] once both names are marked: the committed name of
    /// a file renamed twice, and what the new name held.
    async fn finish_rename(
        &self,
        txn: u64,
        to: &str,
        src: Dentry,
        moved_from: Option<String>,
        moved_in: MovedIn,
    ) -> FsResult<()> {
        let nodes = self.cfg.nodes;
        // A file renamed twice: its committed name now leads to the new one (unless it went
        // home, which the new name's shard settled).
        if let Some(orig) = moved_from.filter(|o| o != to) {
            self.call(
                path_shard(&orig, nodes),
                move_out(txn, &orig, src.ino, Some(to)),
            )
            .await?;
        }
        // What the member saw at the new name is gone for it: a file the transaction made
        // goes now; a committed file it had renamed there goes at commit, from its own name.
        if let Some(old) = moved_in.replaced {
            match moved_in.moved_from {
                Some(orig) => {
                    self.call(
                        path_shard(&orig, nodes),
                        move_out(txn, &orig, old.ino, None),
                    )
                    .await?;
                }
                None => drop(self.drop_name(old.ino).await?),
            }
        }
        Ok(())
    }
}
