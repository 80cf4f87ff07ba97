//! The catalogue of variables and chunks (D2T's metadata service), one shard's part.
//!
//! A variable is a named global array (element type, dimensions); a version of it is the set
//! of chunks that hold it: each chunk a hyperslab (offsets and counts per dimension) and where
//! its bytes are (file, offset, length). Versions are made in transactions: a transaction
//! creates a variable, adds chunks, or deletes one, pending until it commits; its members see
//! their pending version, everyone else the committed ones. At commit a created variable takes
//! the next version of its name (versions only grow, even across a delete and a new create), so
//! reading version k is a snapshot: exactly version k's chunks, even while k + 1 commits.
//! Names are placed on shards by hash; this is the state machine of one shard. Nothing here
//! waits or does I/O.

use crate::txn_state::TxnId;
use crate::{Errno, FsError, FsResult};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Most dimensions a variable may have.
pub const MAX_DIMS: usize = 16;
/// The id the operations made outside any transaction run under for an instant (no real
/// transaction has it: a transaction's number at its home starts at 1).
const NO_TXN: TxnId = 0;

/// Most chunks one version may have.
pub const MAX_CHUNKS: usize = 1 << 20;

/// A variable: its element type (a name such as `f64`, with its size in bytes) and its global
/// dimensions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Variable {
    pub name: String,
    pub elem_type: String,
    pub elem_size: u32,
    pub dims: Vec<u64>,
}

/// Where one process's hyperslab of a variable is: `offsets` and `counts` per dimension, and
/// its bytes, `len` of them at `offset` of the file `path`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Chunk {
    pub offsets: Vec<u64>,
    pub counts: Vec<u64>,
    pub path: String,
    pub offset: u64,
    pub len: u64,
}

/// One version of a variable, as a lookup answers it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionView {
    /// The version; 0 for a version still pending in the asker's own transaction.
    pub version: u64,
    pub variable: Variable,
    pub chunks: Vec<Chunk>,
}

/// A change to the persisted catalogue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CatalogueChange {
    /// A committed version (its whole content).
    Put(VersionView),
    /// Every committed version of the name goes; `next` is the version a new create takes.
    Delete { name: String, next: u64 },
    /// A transaction's pending operation on a name, in full.
    Pending { txn: TxnId, op: PendingOp },
    /// The transaction's pending operations go.
    Forget { txn: TxnId },
}

/// What a transaction will do to a name when it commits: delete its versions, then create a
/// new one (either or both).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingOp {
    pub name: String,
    pub delete: bool,
    pub create: Option<(Variable, Vec<Chunk>)>,
}

impl PendingOp {
    fn name(&self) -> &str {
        &self.name
    }
}

#[derive(Default)]
struct Name {
    versions: BTreeMap<u64, (Variable, Vec<Chunk>)>,
    /// The version the next create of this name takes.
    next: u64,
}

/// One shard of the catalogue.
#[derive(Default)]
pub struct Catalogue {
    names: BTreeMap<String, Name>,
    pending: BTreeMap<TxnId, BTreeMap<String, PendingOp>>,
}

fn inval(msg: String) -> FsError {
    FsError::new(Errno::Inval, msg)
}

fn not_created(name: &str) -> FsError {
    inval(format!(
        "variable {name:?} was not created in this transaction: chunks go to a version being made (create it first)"
    ))
}

fn not_found(name: &str) -> FsError {
    FsError::new(
        Errno::NoEnt,
        format!("no variable named {name:?} in the catalogue"),
    )
}

/// Checks a variable's description from the wire.
fn check_variable(v: &Variable) -> FsResult<()> {
    if v.name.is_empty() || v.name.len() > 4096 || v.name.contains('\0') {
        return Err(inval(format!(
            "variable name {:?}: give 1 to 4096 bytes without NUL",
            v.name
        )));
    }
    if v.dims.is_empty() || v.dims.len() > MAX_DIMS || v.dims.contains(&0) {
        return Err(inval(format!(
            "variable {:?}: dimensions {:?} must be 1 to {MAX_DIMS} sizes, none 0",
            v.name, v.dims
        )));
    }
    if v.elem_size == 0 || v.elem_type.is_empty() {
        return Err(inval(format!(
            "variable {:?}: element type {:?} of {} bytes: name the type and give its size",
            v.name, v.elem_type, v.elem_size
        )));
    }
    let mut elems: u64 = 1;
    for d in &v.dims {
        elems = elems.checked_mul(*d).ok_or_else(|| {
            inval(format!(
                "variable {:?}: dimensions {:?} hold more elements than 2^64",
                v.name, v.dims
            ))
        })?;
    }
    elems.checked_mul(u64::from(v.elem_size)).ok_or_else(|| {
        inval(format!(
            "variable {:?}: {elems} elements of {} bytes are more than 2^64 bytes",
            v.name, v.elem_size
        ))
    })?;
    Ok(())
}

/// Checks a chunk against its variable: inside the dimensions, and its length the bytes of its
/// hyperslab.
fn check_chunk(v: &Variable, c: &Chunk) -> FsResult<()> {
    if c.offsets.len() != v.dims.len() || c.counts.len() != v.dims.len() {
        return Err(inval(format!(
            "a chunk of {:?} has {} offsets and {} counts; the variable has {} dimensions",
            v.name,
            c.offsets.len(),
            c.counts.len(),
            v.dims.len()
        )));
    }
    let mut elems: u64 = 1;
    for ((o, n), d) in c.offsets.iter().zip(&c.counts).zip(&v.dims) {
        if *n == 0 || o.checked_add(*n).is_none_or(|end| end > *d) {
            return Err(inval(format!(
                "a chunk of {:?} at {:?} of {:?} reaches past the dimensions {:?} (or is empty)",
                v.name, c.offsets, c.counts, v.dims
            )));
        }
        elems = elems.saturating_mul(*n);
    }
    let want = elems.saturating_mul(u64::from(v.elem_size));
    if c.len != want {
        return Err(inval(format!(
            "a chunk of {:?} of {:?} elements holds {want} bytes, not {}",
            v.name, c.counts, c.len
        )));
    }
    if c.path.is_empty() || c.offset.checked_add(c.len).is_none() {
        return Err(inval(format!(
            "a chunk of {:?}: give the file and a byte range that fits in 64 bits",
            v.name
        )));
    }
    Ok(())
}

impl Catalogue {
    /// The shard as persisted.
    pub fn load(
        versions: Vec<VersionView>,
        next: &[(String, u64)],
        pending: Vec<(TxnId, PendingOp)>,
    ) -> Catalogue {
        let mut c = Catalogue::default();
        for v in versions {
            let n = c.names.entry(v.variable.name.clone()).or_default();
            n.next = n.next.max(v.version + 1);
            n.versions.insert(v.version, (v.variable, v.chunks));
        }
        for (name, next) in next {
            let n = c.names.entry(name.clone()).or_default();
            n.next = n.next.max(*next);
        }
        for (txn, op) in pending {
            c.pending
                .entry(txn)
                .or_default()
                .insert(op.name().to_string(), op);
        }
        c
    }

    /// The pending operation of `txn` on `name`, made if there is none.
    fn op(&mut self, txn: TxnId, name: &str) -> &mut PendingOp {
        self.pending
            .entry(txn)
            .or_default()
            .entry(name.to_string())
            .or_insert_with(|| PendingOp {
                name: name.to_string(),
                delete: false,
                create: None,
            })
    }

    /// Creates `variable` in `txn` (a new version of its name, numbered at commit).
    pub fn create(&mut self, txn: TxnId, variable: Variable) -> FsResult<Vec<CatalogueChange>> {
        check_variable(&variable)?;
        let op = self.op(txn, &variable.name);
        if op.create.is_some() {
            return Err(FsError::new(
                Errno::Exist,
                format!(
                    "variable {:?} is already created in this transaction; add chunks to it",
                    variable.name
                ),
            ));
        }
        op.create = Some((variable, Vec::new()));
        let op = op.clone();
        Ok(vec![CatalogueChange::Pending { txn, op }])
    }

    /// Adds `chunk` to the variable `name` that `txn` created.
    pub fn add_chunk(
        &mut self,
        txn: TxnId,
        name: &str,
        chunk: Chunk,
    ) -> FsResult<Vec<CatalogueChange>> {
        let Some(op) = self.pending.get_mut(&txn).and_then(|p| p.get_mut(name)) else {
            return Err(not_created(name));
        };
        let Some((variable, chunks)) = &mut op.create else {
            return Err(not_created(name));
        };
        check_chunk(variable, &chunk)?;
        if chunks.len() >= MAX_CHUNKS {
            return Err(inval(format!(
                "variable {name:?} has {MAX_CHUNKS} chunks, the most one version may have"
            )));
        }
        chunks.push(chunk);
        let op = op.clone();
        Ok(vec![CatalogueChange::Pending { txn, op }])
    }

    /// Deletes the variable `name` (every committed version, and what `txn` created of it)
    /// when `txn` commits.
    pub fn delete(&mut self, txn: TxnId, name: &str) -> FsResult<Vec<CatalogueChange>> {
        let mine = self
            .pending
            .get(&txn)
            .and_then(|p| p.get(name))
            .is_some_and(|op| op.create.is_some());
        if self.names.get(name).is_none_or(|n| n.versions.is_empty()) && !mine {
            return Err(not_found(name));
        }
        let op = self.op(txn, name);
        op.delete = true;
        op.create = None;
        let op = op.clone();
        Ok(vec![CatalogueChange::Pending { txn, op }])
    }

    /// The newest committed version of `name`, 0 if none.
    pub fn latest(&self, name: &str) -> u64 {
        self.names
            .get(name)
            .and_then(|n| n.versions.keys().next_back().copied())
            .unwrap_or(0)
    }

    /// Version `version` of `name` (None: the newest) as `viewer` sees it: its own pending
    /// version or deletion first, then the committed ones.
    pub fn lookup(
        &self,
        name: &str,
        version: Option<u64>,
        viewer: Option<TxnId>,
    ) -> FsResult<VersionView> {
        if version.is_none()
            && let Some(op) = viewer.and_then(|t| self.pending.get(&t)?.get(name))
        {
            match &op.create {
                Some((variable, chunks)) => {
                    return Ok(VersionView {
                        version: 0,
                        variable: variable.clone(),
                        chunks: chunks.clone(),
                    });
                }
                None if op.delete => return Err(not_found(name)),
                None => {}
            }
        }
        let n = self.names.get(name).ok_or_else(|| not_found(name))?;
        let (v, (variable, chunks)) = match version {
            Some(k) => n.versions.get_key_value(&k).ok_or_else(|| {
                FsError::new(
                    Errno::NoEnt,
                    format!(
                        "variable {name:?} has no version {k} (versions: {:?})",
                        n.versions.keys().collect::<Vec<_>>()
                    ),
                )
            })?,
            None => n
                .versions
                .iter()
                .next_back()
                .ok_or_else(|| not_found(name))?,
        };
        Ok(VersionView {
            version: *v,
            variable: variable.clone(),
            chunks: chunks.clone(),
        })
    }

    /// The names with a committed version (and their newest), as `viewer` sees them.
    pub fn list(&self, viewer: Option<TxnId>) -> Vec<(String, u64)> {
        let mut out: BTreeMap<String, u64> = self
            .names
            .iter()
            .filter_map(|(name, n)| Some((name.clone(), *n.versions.keys().next_back()?)))
            .collect();
        if let Some(mine) = viewer.and_then(|t| self.pending.get(&t)) {
            for (name, op) in mine {
                if op.delete {
                    out.remove(name);
                }
                if op.create.is_some() {
                    out.entry(name.clone()).or_insert(0);
                }
            }
        }
        out.into_iter().collect()
    }

    /// Commits `txn`: on each name, its deletion, then its create, which takes the name's next
    /// version.
    pub fn commit(&mut self, txn: TxnId) -> Vec<CatalogueChange> {
        let Some(ops) = self.pending.remove(&txn) else {
            return Vec::new();
        };
        let mut changes = Vec::new();
        for (name, op) in ops {
            let n = self.names.entry(name.clone()).or_default();
            if op.delete {
                n.next = n
                    .next
                    .max(n.versions.keys().next_back().map_or(1, |v| v + 1));
                n.versions.clear();
                changes.push(CatalogueChange::Delete {
                    name: name.clone(),
                    next: n.next,
                });
            }
            if let Some((variable, chunks)) = op.create {
                let version = n
                    .next
                    .max(n.versions.keys().next_back().map_or(1, |v| v + 1));
                n.next = version + 1;
                n.versions
                    .insert(version, (variable.clone(), chunks.clone()));
                changes.push(CatalogueChange::Put(VersionView {
                    version,
                    variable,
                    chunks,
                }));
            }
        }
        changes.push(CatalogueChange::Forget { txn });
        changes
    }

    /// Aborts `txn`: its pending operations go.
    pub fn abort(&mut self, txn: TxnId) -> Vec<CatalogueChange> {
        match self.pending.remove(&txn) {
            Some(_) => vec![CatalogueChange::Forget { txn }],
            None => Vec::new(),
        }
    }

    /// The transactions with pending operations here.
    pub fn transactions(&self) -> Vec<TxnId> {
        self.pending.keys().copied().collect()
    }

    /// The transactions other than `viewer` with a pending operation on `name` (all names:
    /// `None`).
    pub fn pending_on(&self, name: Option<&str>, viewer: Option<TxnId>) -> Vec<TxnId> {
        self.pending
            .iter()
            .filter(|(t, ops)| Some(**t) != viewer && name.is_none_or(|n| ops.contains_key(n)))
            .map(|(t, _)| *t)
            .collect()
    }

    /// Creates `variable` outside any transaction: its new version is committed at once,
    /// with no chunks yet ([`Catalogue::append_chunk`] adds them, visibly one by one).
    pub fn create_now(&mut self, variable: Variable) -> FsResult<Vec<CatalogueChange>> {
        let mut changes = self.create(NO_TXN, variable)?;
        changes.extend(self.commit(NO_TXN));
        Ok(changes)
    }

    /// Adds `chunk` to the newest committed version of `name`, outside any transaction.
    pub fn append_chunk(&mut self, name: &str, chunk: Chunk) -> FsResult<Vec<CatalogueChange>> {
        let n = self.names.get_mut(name).ok_or_else(|| not_found(name))?;
        let (version, (variable, chunks)) = n
            .versions
            .iter_mut()
            .next_back()
            .ok_or_else(|| not_found(name))?;
        check_chunk(variable, &chunk)?;
        if chunks.len() >= MAX_CHUNKS {
            return Err(inval(format!(
                "variable {name:?} has {MAX_CHUNKS} chunks, the most one version may have"
            )));
        }
        chunks.push(chunk);
        Ok(vec![CatalogueChange::Put(VersionView {
            version: *version,
            variable: variable.clone(),
            chunks: chunks.clone(),
        })])
    }

    /// Deletes every version of `name` at once, outside any transaction.
    pub fn delete_now(&mut self, name: &str) -> FsResult<Vec<CatalogueChange>> {
        let mut changes = self.delete(NO_TXN, name)?;
        changes.extend(self.commit(NO_TXN));
        Ok(changes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn var(name: &str) -> Variable {
        Variable {
            name: name.into(),
            elem_type: "f64".into(),
            elem_size: 8,
            dims: vec![64, 64, 32],
        }
    }

    fn chunk(z: u64) -> Chunk {
        Chunk {
            offsets: vec![0, 0, z],
            counts: vec![64, 64, 16],
            path: "/tessera/vars".into(),
            offset: z << 20,
            len: 64 * 64 * 16 * 8,
        }
    }

    #[test]
    fn a_version_appears_at_commit_and_stays_readable_while_the_next_commits() {
        let mut c = Catalogue::default();
        c.create(1, var("temp")).unwrap();
        c.add_chunk(1, "temp", chunk(0)).unwrap();
        c.add_chunk(1, "temp", chunk(16)).unwrap();
        assert_eq!(
            c.lookup("temp", None, None).unwrap_err().errno,
            Errno::NoEnt
        );
        let mine = c.lookup("temp", None, Some(1)).unwrap();
        assert_eq!((mine.version, mine.chunks.len()), (0, 2));
        assert_eq!(c.list(None), vec![]);
        assert_eq!(c.list(Some(1)), vec![("temp".to_string(), 0)]);
        c.commit(1);
        assert_eq!(c.latest("temp"), 1);
        // Version 2 is being made: version 1 reads the same, for everyone.
        c.create(2, var("temp")).unwrap();
        c.add_chunk(2, "temp", chunk(0)).unwrap();
        assert_eq!(c.lookup("temp", None, None).unwrap().chunks.len(), 2);
        c.commit(2);
        assert_eq!(c.lookup("temp", Some(1), None).unwrap().chunks.len(), 2);
        assert_eq!(c.lookup("temp", None, None).unwrap().version, 2);
        assert_eq!(c.lookup("temp", None, None).unwrap().chunks.len(), 1);
        // Delete, then create again: versions keep growing.
        c.delete(3, "temp").unwrap();
        assert!(c.lookup("temp", None, Some(3)).is_err());
        assert_eq!(c.lookup("temp", None, None).unwrap().version, 2);
        c.commit(3);
        assert!(c.lookup("temp", Some(1), None).is_err());
        c.create(4, var("temp")).unwrap();
        c.commit(4);
        assert_eq!(c.latest("temp"), 3);
    }

    #[test]
    fn a_delete_then_a_create_in_one_transaction_replaces_the_variable() {
        let mut c = Catalogue::default();
        c.create(1, var("t")).unwrap();
        c.add_chunk(1, "t", chunk(0)).unwrap();
        c.commit(1);
        // The update step: delete the old variable, create the new one, in one transaction.
        c.delete(2, "t").unwrap();
        c.create(2, var("t")).unwrap();
        assert_eq!(c.lookup("t", None, Some(2)).unwrap().version, 0);
        assert_eq!(c.lookup("t", None, None).unwrap().version, 1);
        c.commit(2);
        assert_eq!(c.latest("t"), 2);
        assert_eq!(
            c.lookup("t", Some(1), None).unwrap_err().errno,
            Errno::NoEnt
        );
        assert!(c.lookup("t", Some(2), None).unwrap().chunks.is_empty());
        // A create, then a delete, in one transaction: nothing of it survives.
        c.create(3, var("u")).unwrap();
        c.delete(3, "u").unwrap();
        c.commit(3);
        assert_eq!(c.lookup("u", None, None).unwrap_err().errno, Errno::NoEnt);
    }

    #[test]
    fn bad_descriptions_are_named() {
        let mut c = Catalogue::default();
        let mut v = var("x");
        v.dims = vec![];
        assert!(c.create(1, v).unwrap_err().message.contains("dimensions"));
        let mut v = var("y");
        v.dims = vec![u64::MAX, 3];
        assert!(c.create(1, v).unwrap_err().message.contains("2^64"));
        c.create(1, var("z")).unwrap();
        let mut ch = chunk(20);
        assert!(
            c.add_chunk(1, "z", ch.clone())
                .unwrap_err()
                .message
                .contains("reaches past")
        );
        ch.offsets = vec![0, 0];
        assert!(
            c.add_chunk(1, "z", ch)
                .unwrap_err()
                .message
                .contains("2 offsets")
        );
        let mut ch = chunk(0);
        ch.len = 1;
        assert!(
            c.add_chunk(1, "z", ch)
                .unwrap_err()
                .message
                .contains("not 1")
        );
        assert!(
            c.add_chunk(2, "z", chunk(0))
                .unwrap_err()
                .message
                .contains("create it first")
        );
        assert_eq!(c.delete(2, "nothing").unwrap_err().errno, Errno::NoEnt);
        assert_eq!(c.create(1, var("z")).unwrap_err().errno, Errno::Exist);
    }

    #[test]
    fn outside_a_transaction_each_call_is_visible_at_once() {
        let mut c = Catalogue::default();
        assert_eq!(
            c.append_chunk("t", chunk(0)).unwrap_err().errno,
            Errno::NoEnt
        );
        c.create_now(var("t")).unwrap();
        assert_eq!(c.lookup("t", None, None).unwrap().chunks.len(), 0);
        let changes = c.append_chunk("t", chunk(0)).unwrap();
        assert!(matches!(&changes[..], [CatalogueChange::Put(v)] if v.chunks.len() == 1));
        assert_eq!(c.lookup("t", None, None).unwrap().chunks.len(), 1);
        assert!(c.append_chunk("t", chunk(40)).is_err());
        // A transaction's pending version does not take chunks appended outside it.
        c.create(5, var("t")).unwrap();
        assert_eq!(c.pending_on(Some("t"), None), vec![5]);
        assert_eq!(c.pending_on(Some("t"), Some(5)), Vec::<u64>::new());
        c.append_chunk("t", chunk(16)).unwrap();
        assert_eq!(c.lookup("t", None, Some(5)).unwrap().chunks.len(), 0);
        c.delete_now("t").unwrap();
        assert_eq!(c.lookup("t", None, None).unwrap_err().errno, Errno::NoEnt);
        c.commit(5);
        assert_eq!(c.latest("t"), 2);
        assert!(c.transactions().is_empty());
    }

    #[derive(Clone, Debug)]
    enum Op {
        Create(usize, usize),
        Chunk(usize, usize, u64),
        Delete(usize, usize),
        Commit(usize),
        Abort(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0usize..3, 0usize..3).prop_map(|(t, n)| Op::Create(t, n)),
            (0usize..3, 0usize..3, 0u64..2).prop_map(|(t, n, z)| Op::Chunk(t, n, z * 16)),
            (0usize..3, 0usize..3).prop_map(|(t, n)| Op::Delete(t, n)),
            (0usize..3).prop_map(Op::Commit),
            (0usize..3).prop_map(Op::Abort),
        ]
    }

    const NAMES: [&str; 3] = ["a", "b", "c"];

    proptest! {
        /// Against a model: committed versions only grow per name, a committed version reads
        /// the same until its name is deleted, outsiders never see pending work, and the
        /// persisted changes rebuild the same catalogue.
        #[test]
        fn the_catalogue_matches_a_model(ops in proptest::collection::vec(op(), 1..60)) {
            let mut c = Catalogue::default();
            // Committed versions seen so far: (name, version) -> chunk count.
            let mut seen: BTreeMap<(String, u64), usize> = BTreeMap::new();
            let mut latest: BTreeMap<String, u64> = BTreeMap::new();
            let mut persisted_versions: BTreeMap<(String, u64), VersionView> = BTreeMap::new();
            let mut persisted_next: BTreeMap<String, u64> = BTreeMap::new();
            let mut persisted_pending: BTreeMap<(TxnId, String), PendingOp> = BTreeMap::new();
            for o in ops {
                let changes = match o {
                    Op::Create(t, n) => c.create(t as u64, var(NAMES[n])).unwrap_or_default(),
                    Op::Chunk(t, n, z) => c.add_chunk(t as u64, NAMES[n], chunk(z)).unwrap_or_default(),
                    Op::Delete(t, n) => c.delete(t as u64, NAMES[n]).unwrap_or_default(),
                    Op::Commit(t) => c.commit(t as u64),
                    Op::Abort(t) => c.abort(t as u64),
                };
                for ch in changes {
                    match ch {
                        CatalogueChange::Put(v) => {
                            let name = v.variable.name.clone();
                            prop_assert!(v.version > latest.get(&name).copied().unwrap_or(0), "versions grow");
                            latest.insert(name.clone(), v.version);
                            seen.insert((name.clone(), v.version), v.chunks.len());
                            persisted_versions.insert((name, v.version), v);
                        }
                        CatalogueChange::Delete { name, next } => {
                            seen.retain(|(n, _), _| *n != name);
                            persisted_versions.retain(|(n, _), _| *n != name);
                            persisted_next.insert(name, next);
                        }
                        CatalogueChange::Pending { txn, op } => {
                            persisted_pending.insert((txn, op.name().to_string()), op);
                        }
                        CatalogueChange::Forget { txn } => {
                            persisted_pending.retain(|(t, _), _| *t != txn);
                        }
                    }
                }
                for name in NAMES {
                    for ((n, v), chunks) in &seen {
                        if n == name {
                            let got = c.lookup(name, Some(*v), None).unwrap();
                            prop_assert_eq!(got.chunks.len(), *chunks);
                        }
                    }
                    let newest = seen.keys().filter(|(n, _)| n == name).map(|(_, v)| *v).max();
                    prop_assert_eq!(c.lookup(name, None, None).ok().map(|v| v.version), newest);
                }
                let outside: Vec<(String, u64)> = c.list(None);
                let want: Vec<(String, u64)> = NAMES.iter().filter_map(|n| {
                    seen.keys().filter(|(m, _)| m == n).map(|(_, v)| *v).max().map(|v| (n.to_string(), v))
                }).collect();
                prop_assert_eq!(outside, want);
            }
            let mut reloaded = Catalogue::load(
                persisted_versions.into_values().collect(),
                &persisted_next.into_iter().collect::<Vec<_>>(),
                persisted_pending.into_iter().map(|((t, _), op)| (t, op)).collect(),
            );
            for name in NAMES {
                prop_assert_eq!(reloaded.lookup(name, None, None).ok(), c.lookup(name, None, None).ok());
                for t in 0..3u64 {
                    prop_assert_eq!(reloaded.lookup(name, None, Some(t)).ok(), c.lookup(name, None, Some(t)).ok());
                }
            }
            // The next create of every name takes the same version in both.
            for name in NAMES {
                c.create(99, var(name)).unwrap();
                reloaded.create(99, var(name)).unwrap();
            }
            c.commit(99);
            reloaded.commit(99);
            for name in NAMES {
                prop_assert_eq!(reloaded.latest(name), c.latest(name));
            }
        }
    }
}
