//! Names that transactions create or remove, pending on one namespace shard. The entry of a
//! file a member creates is held here until its transaction completes, visible to its members
//! and to no one else (its inode exists from the start, unreachable without the entry); an
//! entry a member removes stays for everyone else and is gone for its members. At commit a
//! removed entry goes (its file with it) and a created one joins the namespace; at abort a
//! created file is destroyed and a removed entry simply stays. One path has at most one
//! transaction's pending changes. Nothing here waits or does I/O.
//!
//! A member's rename is a removal at the old name and a creation at the new one of the same
//! entry, tied by [`Moves`]: at commit the old name goes without its file (whose PFS copy
//! follows it to the new name), and at abort the file stays where it was.

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

/// How a pending name takes part in its transaction's renames (kept beside its
/// [`PendingName`], whose persisted form predates renames).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Moves {
    /// The created entry is the committed file of this path, renamed here.
    pub from: Option<String>,
    /// The removed entry's file was renamed to this path: at commit only the name goes, and
    /// the PFS copy follows the file.
    pub to: Option<String>,
}

impl Moves {
    fn is_empty(&self) -> bool {
        self.from.is_none() && self.to.is_none()
    }
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
    /// The name's part in renames (gone with its `Del`).
    Moves {
        txn: TxnId,
        parent: String,
        name: String,
        moves: Moves,
    },
}

/// One name a transaction changed, taken for its completion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Taken {
    pub parent: String,
    pub name: String,
    pub pending: PendingName,
    pub moves: Moves,
}

/// What a rename's new name held that the renamed entry replaces, for the member's eyes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Replaced {
    /// An entry the transaction created there (its file goes now, unless `moved_from`).
    pub created: Option<Dentry>,
    /// That entry was itself the committed file of this path, renamed there: its old name's
    /// removal becomes a plain one (the file goes at commit).
    pub moved_from: Option<String>,
}

/// The pending names of one shard.
#[derive(Default)]
pub struct PendingEntries {
    by_path: BTreeMap<(String, String), (TxnId, PendingName)>,
    /// Of those, the names renames tie together.
    moves: BTreeMap<(String, String), Moves>,
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
    /// The shard's pending names as persisted: (txn, parent, name, changes), and their parts
    /// in renames: (parent, name, moves).
    pub fn load(
        rows: impl IntoIterator<Item = (TxnId, String, String, PendingName)>,
        moves: impl IntoIterator<Item = (String, String, Moves)>,
    ) -> Self {
        let by_path: BTreeMap<_, _> = rows
            .into_iter()
            .map(|(t, parent, name, n)| ((parent, name), (t, n)))
            .collect();
        let moves = moves
            .into_iter()
            .map(|(parent, name, m)| ((parent, name), m))
            .filter(|(k, _)| by_path.contains_key(k))
            .collect();
        PendingEntries { by_path, moves }
    }

    /// The part `p`'s pending changes take in renames.
    pub fn moves(&self, p: &str) -> Moves {
        key(p)
            .ok()
            .and_then(|k| self.moves.get(&k).cloned())
            .unwrap_or_default()
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
            self.moves.remove(&k);
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

    fn put_moves(&mut self, txn: TxnId, k: (String, String), moves: Moves) -> Vec<EntryChange> {
        let (parent, name) = k.clone();
        if self.moves.get(&k).unwrap_or(&Moves::default()) == &moves {
            return Vec::new();
        }
        if moves.is_empty() {
            self.moves.remove(&k);
        } else {
            self.moves.insert(k, moves.clone());
        }
        vec![EntryChange::Moves {
            txn,
            parent,
            name,
            moves,
        }]
    }

    /// `txn` renames the committed entry `dentry` of `p` away to `to` (`None`: a removal
    /// after all, the file going at commit). `EBUSY` if another transaction has changes
    /// there.
    pub fn move_away(
        &mut self,
        txn: TxnId,
        p: &str,
        dentry: Dentry,
        to: Option<&str>,
    ) -> FsResult<Vec<EntryChange>> {
        let k = key(p)?;
        let mut changes = self.mark_removed(txn, p, dentry)?;
        let mut moves = self.moves.get(&k).cloned().unwrap_or_default();
        moves.to = to.map(str::to_string);
        changes.extend(self.put_moves(txn, k, moves));
        Ok(changes)
    }

    /// `txn` renames the entry it created at `p` (or renamed there) away: the creation goes.
    /// Returns the changes and, for a committed file renamed there before, its old name.
    pub fn take_created(
        &mut self,
        p: &str,
        ino: u64,
    ) -> FsResult<(Vec<EntryChange>, Option<String>)> {
        let k = key(p)?;
        let Some((txn, _)) = self.by_path.get(&k).copied() else {
            return Ok((Vec::new(), None));
        };
        let mut moves = self.moves.get(&k).cloned().unwrap_or_default();
        let from = moves.from.take();
        let mut changes = self.put_moves(txn, k, moves);
        changes.extend(self.remove_created(p, ino)?);
        Ok((changes, from))
    }

    /// `txn` renames `dentry` to `p`, from the committed name `from` (`None`: a file it
    /// created). What the member saw at `p` is replaced: a committed entry is removed (its
    /// file goes at commit), one it created goes now ([`Replaced`] says which). A file
    /// renamed back to its committed name is simply no longer renamed. `EBUSY` if another
    /// transaction has changes there.
    pub fn move_in(
        &mut self,
        txn: TxnId,
        p: &str,
        dentry: Dentry,
        from: Option<&str>,
        committed: Option<Dentry>,
    ) -> FsResult<(Vec<EntryChange>, Replaced)> {
        let k = key(p)?;
        let n = self.check_free(txn, p, &k)?;
        let mut changes = Vec::new();
        let mut replaced = Replaced::default();
        if let Some(c) = n.created {
            let (undo, moved_from) = self.take_created(p, c.ino)?;
            changes.extend(undo);
            replaced = Replaced {
                created: Some(c),
                moved_from,
            };
        }
        let n = self.check_free(txn, p, &k)?;
        if from == Some(p) && n.removed.is_some_and(|d| d.ino == dentry.ino) {
            // Home again: the committed entry stays as it is.
            let mut moves = self.moves.get(&k).cloned().unwrap_or_default();
            moves.to = None;
            changes.extend(self.put_moves(txn, k.clone(), moves));
            changes.extend(self.put(txn, k, PendingName::default()));
            return Ok((changes, replaced));
        }
        if let Some(c) = committed.filter(|_| n.removed.is_none()) {
            changes.extend(self.mark_removed(txn, p, c)?);
        }
        changes.extend(self.add(txn, p, dentry)?);
        let mut moves = self.moves.get(&k).cloned().unwrap_or_default();
        moves.from = from.map(str::to_string);
        changes.extend(self.put_moves(txn, k, moves));
        Ok((changes, replaced))
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

    /// `txn`'s names here whose committed file was renamed away: (path, the file's inode,
    /// where it went). Each must be matched, on the new name's shard, by the file's pending
    /// entry there ([`PendingEntries::moved_in`]), or the transaction would commit the old
    /// name's removal without the new name.
    pub fn moved_away(&self, txn: TxnId) -> Vec<(String, u64, String)> {
        self.by_path
            .iter()
            .filter(|(_, (t, _))| *t == txn)
            .filter_map(|((parent, name), (_, n))| {
                let removed = n.removed?;
                let to = self
                    .moves
                    .get(&(parent.clone(), name.clone()))?
                    .to
                    .clone()?;
                Some((crate::path::join(parent, name), removed.ino, to))
            })
            .collect()
    }

    /// Whether `txn` holds `p` here as the pending entry of file `ino` (a rename's new name).
    pub fn moved_in(&self, txn: TxnId, p: &str, ino: u64) -> bool {
        self.get(p)
            .is_some_and(|(t, n)| t == txn && n.created.is_some_and(|d| d.ino == ino))
    }

    /// The transactions with pending names here.
    pub fn transactions(&self) -> Vec<TxnId> {
        let mut out: Vec<TxnId> = self.by_path.values().map(|(t, _)| *t).collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Puts back names [`PendingEntries::take`] took, whose completion failed.
    pub fn restore(&mut self, txn: TxnId, names: Vec<Taken>) {
        for t in names {
            let k = (t.parent, t.name);
            if !t.moves.is_empty() {
                self.moves.insert(k.clone(), t.moves);
            }
            self.by_path.insert(k, (txn, t.pending));
        }
    }

    /// Ends `txn` here: its names, for the caller to apply to the namespace (commit) or undo
    /// (abort). Their rows go with the transaction's.
    pub fn take(&mut self, txn: TxnId) -> Vec<Taken> {
        let mine: Vec<(String, String)> = self
            .by_path
            .iter()
            .filter(|(_, (t, _))| *t == txn)
            .map(|(k, _)| k.clone())
            .collect();
        mine.into_iter()
            .filter_map(|k| {
                let (_, pending) = self.by_path.remove(&k)?;
                let moves = self.moves.remove(&k).unwrap_or_default();
                Some(Taken {
                    parent: k.0,
                    name: k.1,
                    pending,
                    moves,
                })
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

    #[test]
    fn a_rename_ties_the_old_name_to_the_new_one_until_it_ends() {
        let mut p = PendingEntries::default();
        // Committed /x (ino 5) renamed to /y over committed /y (ino 6), then on to /z.
        p.move_away(7, "/x", file(5), Some("/y")).unwrap();
        // Between the two marks (what a crash of the member's daemon leaves), the old name
        // points at a new one that does not hold the file: its prepare refuses.
        assert_eq!(p.moved_away(7), [("/x".to_string(), 5, "/y".to_string())]);
        assert!(!p.moved_in(7, "/y", 5));
        let (_, replaced) = p
            .move_in(7, "/y", file(5), Some("/x"), Some(file(6)))
            .unwrap();
        assert_eq!(replaced, Replaced::default());
        assert!(p.moved_in(7, "/y", 5) && !p.moved_in(8, "/y", 5) && !p.moved_in(7, "/y", 6));
        assert_eq!(p.seen_by("/x", Some(7), &[]), Some(Seen::Pending(None)));
        assert_eq!(
            p.seen_by("/y", Some(7), &[]),
            Some(Seen::Pending(Some(file(5))))
        );
        assert_eq!(p.seen_by("/y", None, &[]), Some(Seen::Committed));
        let (_, from) = p.take_created("/y", 5).unwrap();
        assert_eq!(from.as_deref(), Some("/x"));
        assert_eq!(p.seen_by("/y", Some(7), &[]), Some(Seen::Pending(None)));
        assert_eq!(p.moves("/y"), Moves::default(), "/y is only removed now");
        p.move_away(7, "/x", file(5), Some("/z")).unwrap();
        p.move_in(7, "/z", file(5), Some("/x"), None).unwrap();
        assert_eq!(p.moves("/x").to.as_deref(), Some("/z"));
        // A file it created, moved over /z: the moved file there goes now, its old name's
        // removal becoming a plain one.
        p.add(7, "/new", file(9)).unwrap();
        let (_, from) = p.take_created("/new", 9).unwrap();
        assert_eq!(from, None);
        let (_, replaced) = p.move_in(7, "/z", file(9), None, None).unwrap();
        assert_eq!(
            replaced,
            Replaced {
                created: Some(file(5)),
                moved_from: Some("/x".into())
            }
        );
        // Home again: /x renamed back to itself is no change at all.
        let mut q = PendingEntries::default();
        q.move_away(7, "/x", file(5), Some("/y")).unwrap();
        q.move_in(7, "/y", file(5), Some("/x"), None).unwrap();
        let (_, from) = q.take_created("/y", 5).unwrap();
        q.move_in(7, "/x", file(5), from.as_deref(), Some(file(5)))
            .unwrap();
        assert_eq!(q.get("/x"), None);
        assert_eq!(q.get("/y"), None);
        assert!(q.transactions().is_empty());
    }

    proptest! {
        /// Against a model (path -> (txn, created inode, removed inode)): changes refused
        /// exactly when another transaction holds the path, and the persisted changes rebuild
        /// the same table.
        #[test]
        fn pending_names_match_a_model(ops in proptest::collection::vec((0u8..6, 0u64..3, 0usize..4), 1..60)) {
            let paths = ["/a", "/b", "/d/c", "/d/e"];
            let mut p = PendingEntries::default();
            let mut model: BTreeMap<&str, (TxnId, Option<u64>, Option<u64>)> = BTreeMap::new();
            let mut rows: BTreeMap<(String, String), (TxnId, PendingName)> = BTreeMap::new();
            let mut move_rows: BTreeMap<(String, String), Moves> = BTreeMap::new();
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
                    // A rename away of the committed entry: a removal as far as the names go.
                    4 => {
                        let to = paths[(i + 1) % paths.len()];
                        let r = p.move_away(txn, path, file(1), Some(to));
                        prop_assert_eq!(r.is_ok(), !held_by_other);
                        if r.is_ok() {
                            let e = model.entry(path).or_insert((txn, None, None));
                            e.2.get_or_insert(1);
                            prop_assert_eq!(p.moves(path).to, Some(to.to_string()));
                        }
                        r.unwrap_or_default()
                    }
                    // A rename in, from the committed name of the next path.
                    5 => {
                        next_ino += 1;
                        let from = paths[(i + 1) % paths.len()];
                        let r = p.move_in(txn, path, file(next_ino), Some(from), Some(file(2)));
                        prop_assert_eq!(r.is_ok(), !held_by_other);
                        if r.is_ok() {
                            let e = model.entry(path).or_insert((txn, None, None));
                            e.1 = Some(next_ino);
                            e.2.get_or_insert(2);
                            prop_assert_eq!(p.moves(path).from, Some(from.to_string()));
                        }
                        r.map(|(c, _)| c).unwrap_or_default()
                    }
                    _ => {
                        let taken = p.take(txn);
                        let before = model.len();
                        model.retain(|_, (t, _, _)| *t != txn);
                        prop_assert_eq!(taken.len(), before - model.len());
                        rows.retain(|_, (t, _)| *t != txn);
                        move_rows.retain(|k, _| rows.contains_key(k));
                        Vec::new()
                    }
                };
                for c in changes {
                    match c {
                        EntryChange::Put { txn, parent, name, pending } => {
                            rows.insert((parent, name), (txn, pending));
                        }
                        EntryChange::Del { parent, name, .. } => {
                            move_rows.remove(&(parent.clone(), name.clone()));
                            rows.remove(&(parent, name));
                        }
                        EntryChange::Moves { parent, name, moves, .. } => {
                            move_rows.insert((parent, name), moves);
                        }
                    }
                }
                for path in paths {
                    let got = p.get(path).map(|(t, n)| (t, n.created.map(|d| d.ino), n.removed.map(|d| d.ino)));
                    prop_assert_eq!(got, model.get(path).copied());
                }
            }
            let reloaded = PendingEntries::load(
                rows.into_iter().map(|((pa, n), (t, x))| (t, pa, n, x)),
                move_rows.into_iter().map(|((pa, n), m)| (pa, n, m)),
            );
            for path in paths {
                prop_assert_eq!(reloaded.get(path), p.get(path));
                prop_assert_eq!(reloaded.moves(path), p.moves(path));
            }
        }
    }
}
