//! Files created by transactions, pending on one namespace shard: the entry of a file a member
//! creates is held here until its transaction completes, visible to its members and to no one
//! else (its inode exists from the start, unreachable without the entry). At commit the entry
//! joins the namespace; at abort it goes and its file is destroyed. One path has at most one
//! pending entry, and none while a committed entry exists (the create found it instead).
//! Nothing here waits or does I/O.

use crate::meta::{Dentry, DirEntry};
use crate::txn_state::TxnId;
use crate::{Errno, FsError, FsResult, path};
use std::collections::BTreeMap;

/// A change to the persisted pending entries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntryChange {
    Put {
        txn: TxnId,
        parent: String,
        name: String,
        dentry: Dentry,
    },
    Del {
        txn: TxnId,
        parent: String,
        name: String,
    },
}

/// The pending entries of one shard.
#[derive(Default)]
pub struct PendingEntries {
    by_path: BTreeMap<(String, String), (TxnId, Dentry)>,
}

fn key(p: &str) -> FsResult<(String, String)> {
    let (parent, name) = path::split(p)
        .ok_or_else(|| FsError::new(Errno::Inval, "the root directory has no entry"))?;
    Ok((parent.to_string(), name.to_string()))
}

impl PendingEntries {
    /// The shard's pending entries as persisted: (txn, parent, name, entry).
    pub fn load(rows: impl IntoIterator<Item = (TxnId, String, String, Dentry)>) -> Self {
        PendingEntries {
            by_path: rows
                .into_iter()
                .map(|(t, parent, name, d)| ((parent, name), (t, d)))
                .collect(),
        }
    }

    /// The pending entry of `p` and its transaction.
    pub fn get(&self, p: &str) -> Option<(TxnId, Dentry)> {
        self.by_path.get(&key(p).ok()?).copied()
    }

    /// `txn` creates `p` as `dentry`. `EBUSY` if another transaction is creating it.
    pub fn add(&mut self, txn: TxnId, p: &str, dentry: Dentry) -> FsResult<Vec<EntryChange>> {
        let (parent, name) = key(p)?;
        if let Some((other, _)) = self.by_path.get(&(parent.clone(), name.clone())) {
            return Err(busy(p, *other));
        }
        self.by_path
            .insert((parent.clone(), name.clone()), (txn, dentry));
        Ok(vec![EntryChange::Put {
            txn,
            parent,
            name,
            dentry,
        }])
    }

    /// Drops the pending entry of `p` if it names `ino` (its creator removed it again).
    pub fn remove(&mut self, p: &str, ino: u64) -> FsResult<Vec<EntryChange>> {
        let k = key(p)?;
        match self.by_path.get(&k) {
            Some((txn, d)) if d.ino == ino => {
                let txn = *txn;
                self.by_path.remove(&k);
                let (parent, name) = k;
                Ok(vec![EntryChange::Del { txn, parent, name }])
            }
            _ => Ok(Vec::new()),
        }
    }

    /// The pending entries directly inside `dir` that `viewer` sees (its own).
    pub fn children(&self, dir: &str, viewer: Option<TxnId>) -> Vec<DirEntry> {
        self.inside(dir)
            .filter(|(_, (t, _))| Some(*t) == viewer)
            .map(|((_, name), (_, d))| DirEntry {
                name: name.clone(),
                ino: d.ino,
                kind: d.kind,
            })
            .collect()
    }

    /// The transactions with a pending entry directly inside `dir`.
    pub fn creating_in(&self, dir: &str) -> Vec<TxnId> {
        let mut out: Vec<TxnId> = self.inside(dir).map(|(_, (t, _))| *t).collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    fn inside<'a>(
        &'a self,
        dir: &'a str,
    ) -> impl Iterator<Item = (&'a (String, String), &'a (TxnId, Dentry))> + 'a {
        self.by_path
            .range((dir.to_string(), String::new())..)
            .take_while(move |((parent, _), _)| parent == dir)
    }

    /// The transactions with pending entries here.
    pub fn transactions(&self) -> Vec<TxnId> {
        let mut out: Vec<TxnId> = self.by_path.values().map(|(t, _)| *t).collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Ends `txn` here: its entries, (parent, name, entry), for the caller to put into the
    /// namespace (commit) or to destroy (abort). Their rows go with the transaction's.
    pub fn take(&mut self, txn: TxnId) -> Vec<(String, String, Dentry)> {
        let mine: Vec<(String, String)> = self
            .by_path
            .iter()
            .filter(|(_, (t, _))| *t == txn)
            .map(|(k, _)| k.clone())
            .collect();
        mine.into_iter()
            .filter_map(|k| {
                let (_, d) = self.by_path.remove(&k)?;
                Some((k.0, k.1, d))
            })
            .collect()
    }
}

/// The error of a create, rename or lookup that meets another transaction's pending file.
pub fn busy(p: &str, txn: TxnId) -> FsError {
    FsError::new(
        Errno::Busy,
        format!(
            "{p} is being created by transaction {txn:016x}; it appears (or not) when that transaction ends"
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

    #[test]
    fn an_entry_is_seen_by_its_transaction_only_and_ends_with_it() {
        let mut p = PendingEntries::default();
        p.add(7, "/d/a", file(10)).unwrap();
        p.add(7, "/d/b", file(11)).unwrap();
        p.add(8, "/d/c", file(12)).unwrap();
        assert_eq!(p.add(8, "/d/a", file(13)).unwrap_err().errno, Errno::Busy);
        let names = |v: Vec<DirEntry>| v.into_iter().map(|e| e.name).collect::<Vec<_>>();
        assert_eq!(names(p.children("/d", Some(7))), ["a", "b"]);
        assert_eq!(names(p.children("/d", None)), Vec::<String>::new());
        assert_eq!(p.creating_in("/d"), vec![7, 8]);
        assert!(p.remove("/d/b", 99).unwrap().is_empty(), "another inode");
        assert_eq!(p.remove("/d/b", 11).unwrap().len(), 1);
        assert_eq!(
            p.take(7),
            vec![("/d".to_string(), "a".to_string(), file(10))]
        );
        assert_eq!(p.transactions(), vec![8]);
        assert_eq!(p.get("/d/c"), Some((8, file(12))));
    }

    proptest! {
        /// Against a model (a map of path -> (txn, inode)): adds refused exactly when the path
        /// is taken, removes and takes drop exactly their entries, and the persisted changes
        /// rebuild the same table.
        #[test]
        fn pending_entries_match_a_model(ops in proptest::collection::vec((0u8..3, 0u64..3, 0usize..4), 1..60)) {
            let paths = ["/a", "/b", "/d/c", "/d/e"];
            let mut p = PendingEntries::default();
            let mut model: BTreeMap<&str, (TxnId, u64)> = BTreeMap::new();
            let mut rows: BTreeMap<(String, String), (TxnId, Dentry)> = BTreeMap::new();
            let mut next_ino = 100;
            for (op, txn, i) in ops {
                let path = paths[i];
                let changes = match op {
                    0 => {
                        next_ino += 1;
                        let r = p.add(txn, path, file(next_ino));
                        prop_assert_eq!(r.is_ok(), !model.contains_key(path));
                        if r.is_ok() {
                            model.insert(path, (txn, next_ino));
                        }
                        r.unwrap_or_default()
                    }
                    1 => {
                        let ino = model.get(path).map_or(0, |(_, ino)| *ino);
                        model.remove(path);
                        p.remove(path, ino).unwrap()
                    }
                    _ => {
                        let taken = p.take(txn);
                        let before = model.len();
                        model.retain(|_, (t, _)| *t != txn);
                        prop_assert_eq!(taken.len(), before - model.len());
                        rows.retain(|_, (t, _)| *t != txn);
                        Vec::new()
                    }
                };
                for c in changes {
                    match c {
                        EntryChange::Put { txn, parent, name, dentry } => {
                            rows.insert((parent, name), (txn, dentry));
                        }
                        EntryChange::Del { parent, name, .. } => {
                            rows.remove(&(parent, name));
                        }
                    }
                }
                for path in paths {
                    prop_assert_eq!(p.get(path).map(|(t, d)| (t, d.ino)), model.get(path).copied());
                }
            }
            let reloaded = PendingEntries::load(rows.into_iter().map(|((pa, n), (t, d))| (t, pa, n, d)));
            for path in paths {
                prop_assert_eq!(reloaded.get(path), p.get(path));
            }
        }
    }
}
