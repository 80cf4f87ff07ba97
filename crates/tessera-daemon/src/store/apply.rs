//! Applying persisted changes to the state database: at a checkpoint, at replay, and in
//! salvage. Every table is opened once per transaction (`Tables`); each `DbOp` is one put or
//! delete, or a range delete for the rows that go with another.

use super::ops::DbOp;
use super::tables::Tables;
use redb::{Database, Durability};
use tessera_core::{Errno, FsError, FsResult};

/// Applies operations to the database in one durable transaction.
pub(crate) fn apply<'a>(db: &Database, ops: impl Iterator<Item = &'a DbOp>) -> FsResult<()> {
    let e = |x: redb::Error| FsError::new(Errno::Io, format!("state commit: {x}"));
    let mut txn = db.begin_write().map_err(|x| e(x.into()))?;
    txn.set_durability(Durability::Immediate)
        .map_err(|x| e(x.into()))?;
    {
        let mut tables = Tables::open(&txn).map_err(|x| e(x.into()))?;
        for op in ops {
            let r: Result<(), redb::StorageError> = match op {
                DbOp::PutDentry {
                    parent,
                    name,
                    dentry,
                } => tables
                    .dentries
                    .insert(
                        (parent.as_str(), name.as_str()),
                        tessera_proto::frame::encode(dentry).as_slice(),
                    )
                    .map(drop),
                DbOp::DelDentry { parent, name } => tables
                    .dentries
                    .remove((parent.as_str(), name.as_str()))
                    .map(drop),
                DbOp::PutInode(attr) => tables
                    .inodes
                    .insert(attr.ino, tessera_proto::frame::encode(attr).as_slice())
                    .map(drop),
                DbOp::DelInode(ino) => tables
                    .inodes
                    .remove(*ino)
                    .and_then(|_| tables.links.remove(*ino))
                    .map(drop)
                    .and_then(|()| {
                        tables
                            .xattrs
                            .retain_in((*ino, "")..(ino.saturating_add(1), ""), |_, _| false)
                    }),
                DbOp::PutLinks { ino, nlink: 1 } => tables.links.remove(*ino).map(drop),
                DbOp::PutLinks { ino, nlink } => tables.links.insert(*ino, *nlink).map(drop),
                DbOp::PutNameIntent(intent) => tables
                    .name_intents
                    .insert(intent.id, tessera_proto::frame::encode(intent).as_slice())
                    .map(drop),
                DbOp::DelNameIntent(id) => tables.name_intents.remove(*id).map(drop),
                DbOp::PutNameStep { key, outcome } => tables
                    .name_steps
                    .insert(
                        (key.node, key.intent, key.stage),
                        tessera_proto::frame::encode(outcome).as_slice(),
                    )
                    .map(drop),
                DbOp::DelNameStep(key) => tables
                    .name_steps
                    .remove((key.node, key.intent, key.stage))
                    .map(drop),
                DbOp::PutFilesToDrop(inos) => inos
                    .iter()
                    .try_for_each(|ino| tables.files_to_drop.insert(*ino, ()).map(drop)),
                DbOp::DelFilesToDrop(inos) => inos
                    .iter()
                    .try_for_each(|ino| tables.files_to_drop.remove(*ino).map(drop)),
                DbOp::PutXattr { ino, name, value } => tables
                    .xattrs
                    .insert((*ino, name.as_str()), value.as_slice())
                    .map(drop),
                DbOp::DelXattr { ino, name } => {
                    tables.xattrs.remove((*ino, name.as_str())).map(drop)
                }
                DbOp::PutOwner {
                    ino,
                    stripe,
                    run,
                    owner,
                } => tables
                    .owner_runs
                    .insert(
                        (*ino, *stripe, run.start),
                        (run.len, run.stride, run.count, owner.node, owner.client),
                    )
                    .map(drop),
                DbOp::DelOwner { ino, stripe, start } => {
                    tables.owner_runs.remove((*ino, *stripe, *start)).map(drop)
                }
                DbOp::SetMeta(key, v) => tables.meta.insert(key.name(), *v).map(drop),
                DbOp::PutFlushTemp(p) => tables.flush_temps.insert(p.as_str(), ()).map(drop),
                DbOp::DelFlushTemp(p) => tables.flush_temps.remove(p.as_str()).map(drop),
                DbOp::PutClient { id, pid, start } => {
                    tables.clients.insert(*id, (*pid, *start)).map(drop)
                }
                DbOp::DelClient(id) => tables.clients.remove(*id).map(drop).and_then(|()| {
                    tables
                        .published
                        .retain_in((*id, 0)..=(*id, u64::MAX), |_, _| false)
                }),
                DbOp::PutPublished { client, ino, pos } => {
                    tables.published.insert((*client, *ino), *pos).map(drop)
                }
                DbOp::PutPendingRun {
                    txn,
                    ino,
                    stripe,
                    run,
                    owner,
                } => tables
                    .pending_runs
                    .insert(
                        (*txn, *ino, *stripe, run.start),
                        (run.len, run.stride, run.count, owner.node, owner.client),
                    )
                    .map(drop),
                DbOp::DelPendingRun {
                    txn,
                    ino,
                    stripe,
                    start,
                } => tables
                    .pending_runs
                    .remove((*txn, *ino, *stripe, *start))
                    .map(drop),
                DbOp::PutPendingSize { txn, ino, end } => {
                    tables.pending_sizes.insert((*txn, *ino), *end).map(drop)
                }
                DbOp::PutPendingCut { txn, ino, cut } => tables
                    .pending_cuts
                    .insert(
                        (*txn, *ino),
                        (cut.at, cut.path.as_deref().unwrap_or_default()),
                    )
                    .map(drop),
                DbOp::PutPrepared(t) => tables.prepared.insert(*t, ()).map(drop),
                DbOp::ForgetPending(t) => tables
                    .pending_runs
                    .retain_in(
                        (*t, 0, 0, 0)..=(*t, u64::MAX, u64::MAX, u64::MAX),
                        |_, _| false,
                    )
                    .and_then(|()| {
                        tables
                            .pending_sizes
                            .retain_in((*t, 0)..=(*t, u64::MAX), |_, _| false)
                    })
                    .and_then(|()| {
                        tables
                            .pending_cuts
                            .retain_in((*t, 0)..=(*t, u64::MAX), |_, _| false)
                    })
                    .and_then(|()| tables.prepared.remove(*t).map(drop))
                    .and_then(|()| match t.checked_add(1) {
                        Some(after) => tables
                            .cat_pending
                            .retain_in((*t, "")..(after, ""), |_, _| false),
                        None => tables.cat_pending.retain_in((*t, "").., |_, _| false),
                    })
                    .and_then(|()| match t.checked_add(1) {
                        Some(after) => tables
                            .pending_dentries
                            .retain_in((*t, "", "")..(after, "", ""), |_, _| false),
                        None => tables
                            .pending_dentries
                            .retain_in((*t, "", "").., |_, _| false),
                    })
                    .and_then(|()| match t.checked_add(1) {
                        Some(after) => tables
                            .pending_moves
                            .retain_in((*t, "", "")..(after, "", ""), |_, _| false),
                        None => tables.pending_moves.retain_in((*t, "", "").., |_, _| false),
                    }),
                DbOp::PutHomeTxn { txn, state } => tables.home_txns.insert(*txn, *state).map(drop),
                DbOp::DelHomeTxn(t) => tables.home_txns.remove(*t).map(drop),
                DbOp::PutCatVersion(v) => tables
                    .cat_versions
                    .insert(
                        (v.variable.name.as_str(), v.version),
                        tessera_proto::frame::encode(v).as_slice(),
                    )
                    .map(drop),
                DbOp::DelCatName { name, next } => tables
                    .cat_versions
                    .retain_in((name.as_str(), 0)..=(name.as_str(), u64::MAX), |_, _| false)
                    .and_then(|()| tables.cat_next.insert(name.as_str(), *next).map(drop)),
                DbOp::PutPendingDentry {
                    txn,
                    parent,
                    name,
                    pending,
                } => tables
                    .pending_dentries
                    .insert(
                        (*txn, parent.as_str(), name.as_str()),
                        tessera_proto::frame::encode(pending).as_slice(),
                    )
                    .map(drop),
                DbOp::DelPendingDentry { txn, parent, name } => tables
                    .pending_dentries
                    .remove((*txn, parent.as_str(), name.as_str()))
                    .and_then(|_| {
                        tables
                            .pending_moves
                            .remove((*txn, parent.as_str(), name.as_str()))
                    })
                    .map(drop),
                DbOp::PutPendingMoves {
                    txn,
                    parent,
                    name,
                    moves,
                } => tables
                    .pending_moves
                    .insert(
                        (*txn, parent.as_str(), name.as_str()),
                        (
                            moves.from.as_deref().unwrap_or_default(),
                            moves.to.as_deref().unwrap_or_default(),
                        ),
                    )
                    .map(drop),
                DbOp::PutCatPending { txn, op } => tables
                    .cat_pending
                    .insert(
                        (*txn, op.name.as_str()),
                        tessera_proto::frame::encode(op).as_slice(),
                    )
                    .map(drop),
            };
            r.map_err(|x| e(x.into()))?;
        }
    }
    txn.commit().map_err(|x| e(x.into()))
}
