//! Reading the state database back at start: every row of every table, decoded and checked
//! (a row that does not decode, or an ownership run that is not well formed, is damage and
//! stops the start with the row named).

use super::ops::{MetaKey, StoredAttr};
use super::tables::*;
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use std::collections::HashMap;
use tessera_core::catalogue::{PendingOp, VersionView};
use tessera_core::name_ops::{Intent, Outcome, StepKey};
use tessera_core::txn_entries::{Moves, PendingName};
use tessera_core::{Errno, FsError, FsResult, Owner, Run};
use tessera_proto::{Attr, Dentry};

/// Everything the state held at startup.
#[derive(Default, Debug)]
pub struct Loaded {
    pub dentries: Vec<(String, String, Dentry)>,
    pub inodes: Vec<Attr>,
    pub owners: Vec<(u64, u64, Run, Owner)>,
    pub next_ino: u64,
    pub next_client: u64,
    /// Flush temporaries that were being built when the daemon stopped.
    pub flush_temps: Vec<String>,
    /// Clients that were connected when the daemon stopped: (id, pid, process start time).
    pub clients: Vec<(u64, u32, u64)>,
    /// Their publication positions: (client, ino, position).
    pub published: Vec<(u64, u64, u64)>,
    /// Torn or corrupt log records found (and ignored) at startup.
    pub wal_problems: Vec<String>,
    /// Transactions' pending attaches: (txn, ino, stripe, run, owner).
    pub pending_runs: Vec<(u64, u64, u64, Run, Owner)>,
    /// Transactions' pending sizes: (txn, ino, end).
    pub pending_sizes: Vec<(u64, u64, u64)>,
    /// Transactions' cuts: (txn, ino, cut).
    pub pending_cuts: Vec<(u64, u64, tessera_core::txn_pending::Cut)>,
    pub prepared: Vec<u64>,
    /// The transactions this node is the home of, with their record (0 open, 1 commit,
    /// 2 abort).
    pub home_txns: Vec<(u64, u8)>,
    pub next_txn: u64,
    /// The catalogue shard: committed versions, names' next versions, pending operations.
    pub cat_versions: Vec<VersionView>,
    pub cat_next: Vec<(String, u64)>,
    pub cat_pending: Vec<(u64, PendingOp)>,
    /// Names transactions create or remove: (txn, parent, name, changes).
    pub pending_dentries: Vec<(u64, String, String, PendingName)>,
    /// Their parts in renames: (parent, name, moves).
    pub pending_moves: Vec<(String, String, Moves)>,
    /// Extended attributes: (ino, name, value).
    pub xattrs: Vec<(u64, String, Vec<u8>)>,
    /// Operations on names of files held here, not ended.
    pub name_intents: Vec<Intent>,
    /// Answers of steps carried out for other nodes' intents.
    pub name_steps: Vec<(StepKey, Outcome)>,
    /// Removed files whose bytes are still to be released on every node.
    pub files_to_drop: Vec<u64>,
    /// Whether the names of this shard's files are to be checked against their counts (a
    /// database from before schema 7).
    pub names_unchecked: bool,
}

fn load_err(what: &str) -> impl Fn(redb::Error) -> FsError + '_ {
    move |x| FsError::new(Errno::Io, format!("loading {what}: {x}"))
}

/// Calls `f` with each row of `table`, in key order.
fn each_row<K: redb::Key + 'static, V: redb::Value + 'static>(
    txn: &redb::ReadTransaction,
    table: TableDefinition<K, V>,
    what: &str,
    mut f: impl FnMut(redb::AccessGuard<'_, K>, redb::AccessGuard<'_, V>) -> FsResult<()>,
) -> FsResult<()> {
    let e = load_err(what);
    let t = txn.open_table(table).map_err(|x| e(x.into()))?;
    for row in t.iter().map_err(|x| e(x.into()))? {
        let (k, v) = row.map_err(|x| e(x.into()))?;
        f(k, v)?;
    }
    Ok(())
}

/// The run and owner of an ownership row starting at `start`; a run that is not well formed
/// is damage, reported with the row `which` names.
fn owner_row(
    start: u64,
    (len, stride, count, node, client): OwnerRow,
    which: impl FnOnce() -> String,
) -> FsResult<(Run, Owner)> {
    let run = Run {
        start,
        len,
        stride,
        count,
    };
    if !run.is_valid() {
        return Err(FsError::new(
            Errno::Io,
            format!("{} holds an invalid run {run:?}", which()),
        ));
    }
    Ok((run, Owner { node, client }))
}

/// Reads every table of `db` into memory.
pub(super) fn load(db: &Database) -> FsResult<Loaded> {
    let txn = db.begin_read().map_err(|x| load_err("state")(x.into()))?;
    let mut out = Loaded::default();
    each_row(&txn, DENTRIES, "dentries", |k, v| {
        let (parent, name) = k.value();
        let dentry: Dentry = tessera_proto::frame::decode(v.value())?;
        out.dentries
            .push((parent.to_string(), name.to_string(), dentry));
        Ok(())
    })?;
    let mut links = HashMap::new();
    each_row(&txn, LINKS, "links", |k, v| {
        links.insert(k.value(), v.value());
        Ok(())
    })?;
    each_row(&txn, INODES, "inodes", |_, v| {
        let stored: StoredAttr = tessera_proto::frame::decode(v.value())?;
        let nlink = links.get(&stored.ino).copied().unwrap_or(1);
        out.inodes.push(stored.with_links(nlink));
        Ok(())
    })?;
    each_row(&txn, OWNERS, "owners", |k, v| {
        let (ino, stripe, start) = k.value();
        let (run, owner) = owner_row(start, v.value(), || {
            format!("ownership row ({ino:#x}, {stripe}, {start})")
        })?;
        out.owners.push((ino, stripe, run, owner));
        Ok(())
    })?;
    let e = load_err("meta");
    let t = txn.open_table(META).map_err(|x| e(x.into()))?;
    let get = |key: MetaKey| -> FsResult<u64> {
        Ok(t.get(key.name())
            .map_err(|x| e(x.into()))?
            .map(|v| v.value())
            .unwrap_or(0))
    };
    out.next_ino = get(MetaKey::NextIno)?;
    out.next_client = get(MetaKey::NextClient)?;
    out.next_txn = get(MetaKey::NextTxn)?;
    out.names_unchecked = get(MetaKey::NamesUnchecked)? == 1;
    each_row(&txn, FLUSH_TEMPS, "flush temporaries", |k, _| {
        out.flush_temps.push(k.value().to_string());
        Ok(())
    })?;
    each_row(&txn, CLIENTS, "clients", |k, v| {
        let (pid, start) = v.value();
        out.clients.push((k.value(), pid, start));
        Ok(())
    })?;
    each_row(&txn, PUBLISHED, "published", |k, v| {
        let (client, ino) = k.value();
        out.published.push((client, ino, v.value()));
        Ok(())
    })?;
    each_row(&txn, PENDING_RUNS, "pending runs", |k, v| {
        let (t, ino, stripe, start) = k.value();
        let (run, owner) = owner_row(start, v.value(), || {
            format!("pending row ({t:#x}, {ino:#x}, {stripe}, {start})")
        })?;
        out.pending_runs.push((t, ino, stripe, run, owner));
        Ok(())
    })?;
    each_row(&txn, PENDING_SIZES, "pending sizes", |k, v| {
        let (t, ino) = k.value();
        out.pending_sizes.push((t, ino, v.value()));
        Ok(())
    })?;
    each_row(&txn, PENDING_CUTS, "pending cuts", |k, v| {
        let (t, ino) = k.value();
        let (at, path) = v.value();
        let path = (!path.is_empty()).then(|| path.to_string());
        out.pending_cuts
            .push((t, ino, tessera_core::txn_pending::Cut { at, path }));
        Ok(())
    })?;
    each_row(&txn, PREPARED, "prepared transactions", |k, _| {
        out.prepared.push(k.value());
        Ok(())
    })?;
    each_row(&txn, HOME_TXNS, "home transactions", |k, v| {
        out.home_txns.push((k.value(), v.value()));
        Ok(())
    })?;
    each_row(&txn, CAT_VERSIONS, "catalogue versions", |_, v| {
        out.cat_versions
            .push(tessera_proto::frame::decode(v.value())?);
        Ok(())
    })?;
    each_row(&txn, CAT_NEXT, "catalogue next versions", |k, v| {
        out.cat_next.push((k.value().to_string(), v.value()));
        Ok(())
    })?;
    each_row(&txn, PENDING_DENTRIES, "pending entries", |k, v| {
        let (t, parent, name) = k.value();
        out.pending_dentries.push((
            t,
            parent.to_string(),
            name.to_string(),
            tessera_proto::frame::decode(v.value())?,
        ));
        Ok(())
    })?;
    each_row(&txn, NAME_INTENTS, "name intents", |_, v| {
        out.name_intents
            .push(tessera_proto::frame::decode(v.value())?);
        Ok(())
    })?;
    each_row(&txn, NAME_STEPS, "name steps", |k, v| {
        let (node, intent, stage) = k.value();
        out.name_steps.push((
            StepKey {
                node,
                intent,
                stage,
            },
            tessera_proto::frame::decode(v.value())?,
        ));
        Ok(())
    })?;
    each_row(&txn, FILES_TO_DROP, "files to drop", |k, _| {
        out.files_to_drop.push(k.value());
        Ok(())
    })?;
    each_row(&txn, XATTRS, "extended attributes", |k, v| {
        let (ino, name) = k.value();
        out.xattrs.push((ino, name.to_string(), v.value().to_vec()));
        Ok(())
    })?;
    each_row(&txn, PENDING_MOVES, "pending moves", |k, v| {
        let (_, parent, name) = k.value();
        let (from, to) = v.value();
        let named = |p: &str| (!p.is_empty()).then(|| p.to_string());
        out.pending_moves.push((
            parent.to_string(),
            name.to_string(),
            Moves {
                from: named(from),
                to: named(to),
            },
        ));
        Ok(())
    })?;
    each_row(&txn, CAT_PENDING, "catalogue pending", |k, v| {
        let (t, _) = k.value();
        out.cat_pending
            .push((t, tessera_proto::frame::decode(v.value())?));
        Ok(())
    })?;
    Ok(out)
}
