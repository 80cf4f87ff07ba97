//! Names that transactions create or remove, pending on one namespace shard. The entry of a
//! file a member creates is held here until its transaction completes, visible to its members
//! and to no one else (its inode exists from the start, unreachable without the entry); an
//! entry a member removes stays for everyone else and is gone for its members. At commit a
//! removed entry goes (its file with it) and a created one joins the namespace; at abort a
//! created file is destroyed and a removed entry simply stays. One path has at most one
//! transaction's pending changes. Nothing here waits or does I/O.

use crate::meta::{Dentry, DirEntry};
use crate::txn_state::TxnId;
use crate::{Errno, FsError, FsResult, path};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What one transaction does to one name: removes the committed entry, creates a new one,
/// or both (a file replaced).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingName {
    pub created: Option<Dentry>,
    pub removed: Option<Dentry>,
}

/// A change to the persisted pending names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntryChange {
    Put {
        txn: TxnId,
        parent: String,
        name: String,
        pending: PendingName,
    },
    Del {
        txn: TxnId,
        parent: String,
        name: String,
    },
}

/// The pending names of one shard.
#[derive(Default)]
pub struct PendingEntries {
    by_path: BTreeMap<(String, String), (TxnId, PendingName)>,
}

fn key(p: &str) -> FsResult<(String, String)> {
    let (parent, name) = path::split(p)
        .ok_or_else(|| FsError::new(Errno::Inval, "the root directory has no entry"))?;
    Ok((parent.to_string(), name.to_string()))
}

/// How a name with pending changes looks to a viewer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    /// As its transaction made it: this entry, or none.
    Pending(Option<Dentry>),
    /// As committed (the viewer is outside the transaction).
    Committed,
}

impl PendingEntries {
    /// The shard's pending names as persisted: (txn, parent, name, changes).
    pub fn load(rows: impl IntoIterator<Item = (TxnId, String, String, PendingName)>) -> Self {
        PendingEntries {
            by_path: rows
                .into_iter()
                .map(|(t, parent, name, n)| ((parent, name), (t, n)))
                .collect(),
        }
    }

    /// The transaction with pending changes to `p`, and what they are.
    pub fn get(&self, p: &str) -> Option<(TxnId, PendingName)> {
        self.by_path.get(&key(p).ok()?).copied()
    }

    /// How `p` looks to `viewer` (and to the transactions in `committed`, decided to commit):
    /// `None` when nothing is pending there.
    pub fn seen_by(&self, p: &str, viewer: Option<TxnId>, committed: &[TxnId]) -> Option<Seen> {
        let (txn, n) = self.get(p)?;
        if Some(txn) == viewer || committed.contains(&txn) {
            return Some(Seen::Pending(n.created));
        }
        // A name only being created does not exist yet; a removed one still does.
        Some(match n.removed {
            Some(_) => Seen::Committed,
            None => Seen::Pending(None),
        })
    }

    fn put(&mut self, txn: TxnId, k: (String, String), n: PendingName) -> Vec<EntryChange> {
        let (parent, name) = k.clone();
        if n.created.is_none() && n.removed.is_none() {
            self.by_path.remove(&k);
            return vec![EntryChange::Del { txn, parent, name }];
        }
        self.by_path.insert(k, (txn, n));
        vec![EntryChange::Put {
            txn,
            parent,
            name,
            pending: n,
        }]
    }

    /// Another transaction's changes to `p` are in the way of `txn`'s.
    fn check_free(&self, txn: TxnId, p: &str, k: &(String, String)) -> FsResult<PendingName> {
        match self.by_path.get(k) {
            Some((other, _)) if *other != txn => Err(busy(p, *other)),
            Some((_, n)) => Ok(*n),
            None => Ok(PendingName::default()),
        }
    }

    /// `txn` creates `p` as `dentry` (where it removed the committed entry, or where there is
    /// none). `EBUSY` if another transaction has changes there, `EEXIST` if `txn` created it
    /// already.
    pub fn add(&mut self, txn: TxnId, p: &str, dentry: Dentry) -> FsResult<Vec<EntryChange>> {
        let k = key(p)?;
        let mut n = self.check_free(txn, p, &k)?;
        if n.created.is_some() {
            return Err(FsError::new(Errno::Exist, format!("{p} already exists")));
        }
        n.created = Some(dentry);
        Ok(self.put(txn, k, n))
    }

    /// `txn` removes the committed entry `dentry` of `p`. `EBUSY` if another transaction has
    /// changes there.
    pub fn mark_removed(
        &mut self,
        txn: TxnId,
        p: &str,
        dentry: Dentry,
    ) -> FsResult<Vec<EntryChange>> {
        let k = key(p)?;
        let mut n = self.check_free(txn, p, &k)?;
        if n.removed.is_some() {
            return Ok(Vec::new());
        }
        n.removed = Some(dentry);
        Ok(self.put(txn, k, n))
    }

    /// Drops the pending creation of `p` if it names `ino` (its creator removed it again).
    pub fn remove_created(&mut self, p: &str, ino: u64) -> FsResult<Vec<EntryChange>> {
        let k = key(p)?;
        match self.by_path.get(&k).copied() {
            Some((txn, mut n)) if n.created.is_some_and(|d| d.ino == ino) => {
                n.created = None;
                Ok(self.put(txn, k, n))
            }
            _ => Ok(Vec::new()),
        }
    }

    /// The entries directly inside `dir` as `viewer` sees them, given the committed ones:
    /// those it removed go, those it created come.
    pub fn children(
        &self,
        dir: &str,
        viewer: Option<TxnId>,
        committed: Vec<DirEntry>,
    ) -> Vec<DirEntry> {
        let mine: BTreeMap<&str, &PendingName> = self
            .inside(dir)
            .filter(|(_, (t, _))| Some(*t) == viewer)
            .map(|((_, name), (_, n))| (name.as_str(), n))
            .collect();
        let mut out: Vec<DirEntry> = committed
            .into_iter()
            .filter(|e| {
                mine.get(e.name.as_str())
                    .is_none_or(|n| n.removed.is_none())
            })
            .collect();
        out.extend(mine.iter().filter_map(|(name, n)| {
            let d = n.created?;
            Some(DirEntry {
                name: name.to_string(),
                ino: d.ino,
                kind: d.kind,
            })
        }));
        out
    }

    /// The transactions with pending changes directly inside `dir`.
    pub fn changing_in(&self, dir: &str) -> Vec<TxnId> {
        let mut out: Vec<TxnId> = self.inside(dir).map(|(_, (t, _))| *t).collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Whether some transaction creates a name directly inside `dir` (it cannot go then).
    pub fn creating_in(&self, dir: &str) -> bool {
        self.inside(dir).any(|(_, (_, n))| n.created.is_some())
    }

    fn inside<'a>(
        &'a self,
        dir: &'a str,
    ) -> impl Iterator<Item = (&'a (String, String), &'a (TxnId, PendingName))> + 'a {
        self.by_path
            .range((dir.to_string(), String::new())..)
            .take_while(move |((parent, _), _)| parent == dir)
    }

    /// The transactions with pending names here.
    pub fn transactions(&self) -> Vec<TxnId> {
        let mut out: Vec<TxnId> = self.by_path.values().map(|(t, _)| *t).collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Puts back names [`PendingEntries::take`] took, whose completion failed.
    pub fn restore(&mut self, txn: TxnId, names: Vec<(String, String, PendingName)>) {
        for (parent, name, n) in names {
            self.by_path.insert((parent, name), (txn, n));
        }
    }

    /// Ends `txn` here: its names, (parent, name, changes), for the caller to apply to the
    /// namespace (commit) or undo (abort). Their rows go with the transaction's.
    pub fn take(&mut self, txn: TxnId) -> Vec<(String, String, PendingName)> {
        let mine: Vec<(String, String)> = self
            .by_path
            .iter()
            .filter(|(_, (t, _))| *t == txn)
            .map(|(k, _)| k.clone())
            .collect();
        mine.into_iter()
            .filter_map(|k| {
                let (_, n) = self.by_path.remove(&k)?;
                Some((k.0, k.1, n))
            })
            .collect()
    }
}

/// The error of a change that meets another transaction's pending changes to a name.
pub fn busy(p: &str, txn: TxnId) -> FsError {
    FsError::new(
        Errno::Busy,
        format!(
            "{p} is being created or removed by transaction {txn:016x}; try again when that transaction ends"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::FileKind;
    use proptest::prelude::*;

    fn file(ino: u64) -> Dentry {
        Dentry {
            ino,
            kind: FileKind::File,
        }
    }

    fn entry(name: &str, ino: u64) -> DirEntry {
        DirEntry {
            name: name.into(),
            ino,
            kind: FileKind::File,
        }
    }

    #[test]
    fn members_see_their_changes_and_others_the_committed_names() {
        let mut p = PendingEntries::default();
        p.add(7, "/d/a", file(10)).unwrap();
        p.mark_removed(7, "/d/old", file(5)).unwrap();
        p.mark_removed(7, "/d/swap", file(6)).unwrap();
        p.add(7, "/d/swap", file(11)).unwrap();
        assert_eq!(p.add(8, "/d/a", file(13)).unwrap_err().errno, Errno::Busy);
        assert_eq!(
            p.mark_removed(8, "/d/old", file(5)).unwrap_err().errno,
            Errno::Busy
        );
        assert_eq!(
            p.seen_by("/d/a", Some(7), &[]),
            Some(Seen::Pending(Some(file(10))))
        );
        assert_eq!(p.seen_by("/d/a", None, &[]), Some(Seen::Pending(None)));
        assert_eq!(p.seen_by("/d/old", Some(7), &[]), Some(Seen::Pending(None)));
        assert_eq!(p.seen_by("/d/old", None, &[]), Some(Seen::Committed));
        assert_eq!(
            p.seen_by("/d/swap", None, &[7]),
            Some(Seen::Pending(Some(file(11))))
        );
        assert_eq!(p.seen_by("/d/none", Some(7), &[]), None);
        let committed = vec![entry("old", 5), entry("swap", 6), entry("z", 1)];
        let names = |v: Vec<DirEntry>| {
            let mut n: Vec<(String, u64)> = v.into_iter().map(|e| (e.name, e.ino)).collect();
            n.sort();
            n
        };
        assert_eq!(
            names(p.children("/d", Some(7), committed.clone())),
            [("a".into(), 10), ("swap".into(), 11), ("z".into(), 1)]
        );
        assert_eq!(
            names(p.children("/d", None, committed.clone())),
            names(committed)
        );
        assert!(p.creating_in("/d"));
        assert!(
            p.remove_created("/d/a", 99).unwrap().is_empty(),
            "another inode"
        );
        assert_eq!(p.remove_created("/d/a", 10).unwrap().len(), 1);
        assert_eq!(p.get("/d/a"), None);
        let taken = p.take(7);
        assert_eq!(taken.len(), 2);
        assert!(p.transactions().is_empty());
    }

    proptest! {
        /// Against a model (path -> (txn, created inode, removed inode)): changes refused
        /// exactly when another transaction holds the path, and the persisted changes rebuild
        /// the same table.
        #[test]
        fn pending_names_match_a_model(ops in proptest::collection::vec((0u8..4, 0u64..3, 0usize..4), 1..60)) {
            let paths = ["/a", "/b", "/d/c", "/d/e"];
            let mut p = PendingEntries::default();
            let mut model: BTreeMap<&str, (TxnId, Option<u64>, Option<u64>)> = BTreeMap::new();
            let mut rows: BTreeMap<(String, String), (TxnId, PendingName)> = BTreeMap::new();
            let mut next_ino = 100;
            for (op, txn, i) in ops {
                let path = paths[i];
                let held_by_other = model.get(path).is_some_and(|(t, _, _)| *t != txn);
                let changes = match op {
                    0 => {
                        next_ino += 1;
                        let r = p.add(txn, path, file(next_ino));
                        let mine_created = model.get(path).is_some_and(|(_, c, _)| c.is_some());
                        prop_assert_eq!(r.is_ok(), !held_by_other && !mine_created);
                        if r.is_ok() {
                            let e = model.entry(path).or_insert((txn, None, None));
                            e.1 = Some(next_ino);
                        }
                        r.unwrap_or_default()
                    }
                    1 => {
                        let r = p.mark_removed(txn, path, file(1));
                        prop_assert_eq!(r.is_ok(), !held_by_other);
                        if r.is_ok() {
                            let e = model.entry(path).or_insert((txn, None, None));
                            e.2.get_or_insert(1);
                        }
                        r.unwrap_or_default()
                    }
                    2 => {
                        let ino = model.get(path).and_then(|(_, c, _)| *c).unwrap_or(0);
                        if let Some(e) = model.get_mut(path) {
                            if e.1 == Some(ino) {
                                e.1 = None;
                            }
                            if e.1.is_none() && e.2.is_none() {
                                model.remove(path);
                            }
                        }
                        p.remove_created(path, ino).unwrap()
                    }
                    _ => {
                        let taken = p.take(txn);
                        let before = model.len();
                        model.retain(|_, (t, _, _)| *t != txn);
                        prop_assert_eq!(taken.len(), before - model.len());
                        rows.retain(|_, (t, _)| *t != txn);
                        Vec::new()
                    }
                };
                for c in changes {
                    match c {
                        EntryChange::Put { txn, parent, name, pending } => {
                            rows.insert((parent, name), (txn, pending));
                        }
                        EntryChange::Del { parent, name, .. } => {
                            rows.remove(&(parent, name));
                        }
                    }
                }
                for path in paths {
                    let got = p.get(path).map(|(t, n)| (t, n.created.map(|d| d.ino), n.removed.map(|d| d.ino)));
                    prop_assert_eq!(got, model.get(path).copied());
                }
            }
            let reloaded = PendingEntries::load(rows.into_iter().map(|((pa, n), (t, x))| (t, pa, n, x)));
            for path in paths {
                prop_assert_eq!(reloaded.get(path), p.get(path));
            }
        }
    }
}
