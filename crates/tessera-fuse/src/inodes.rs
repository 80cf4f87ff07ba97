//! The kernel's node ids and the paths they stand for.
//!
//! FUSE names files by node ids, Tessera's client by path. A node id here is the file's
//! Tessera inode number (which FUSE also reports as `st_ino`, so hard links show as one file
//! to `tar`, `cp -a` and `du`), except the root, whose id is FUSE's fixed 1. An id keeps the
//! names it was looked up by: an operation on it uses the first one still live, so removing
//! one link of a file leaves the id working through another. A rename moves the names below
//! it too, so an open directory or a working directory follows its name. The kernel counts
//! its lookups of an id and forgets them; an id and its names go once it forgot them all.

use std::collections::{BTreeMap, HashMap};

/// The node id of the mount's root (FUSE's fixed `FUSE_ROOT_ID`).
pub const ROOT: u64 = 1;

#[derive(Debug, Default)]
struct Held {
    /// Live names below the mount ("" for the root, else "/a/b"), the first used.
    paths: Vec<String>,
    /// Lookups the kernel has not forgotten yet.
    lookups: u64,
}

/// Node ids and paths, both ways.
#[derive(Debug)]
pub struct Names {
    by_id: HashMap<u64, Held>,
    /// Live names; ordered, so a rename finds a subtree as a range.
    by_path: BTreeMap<String, u64>,
}

impl Default for Names {
    fn default() -> Self {
        let root = Held {
            paths: vec![String::new()],
            lookups: 1,
        };
        Names {
            by_id: HashMap::from([(ROOT, root)]),
            by_path: BTreeMap::from([(String::new(), ROOT)]),
        }
    }
}

/// The path of `name` in the directory at `dir` ("" for the root).
pub fn child(dir: &str, name: &str) -> String {
    format!("{dir}/{name}")
}

impl Names {
    /// A path that id `id` stands for, if the kernel holds it and a name of it is live.
    pub fn path(&self, id: u64) -> Option<&str> {
        self.by_id
            .get(&id)
            .and_then(|h| h.paths.first())
            .map(String::as_str)
    }

    /// `path` was looked up and found to be file `id`: one more lookup the kernel holds.
    pub fn looked_up(&mut self, path: &str, id: u64) {
        if let Some(old) = self.by_path.insert(path.to_string(), id)
            && old != id
        {
            // Another file took the name meanwhile (through another client).
            if let Some(h) = self.by_id.get_mut(&old) {
                h.paths.retain(|p| p != path);
            }
        }
        let held = self.by_id.entry(id).or_default();
        if !held.paths.iter().any(|p| p == path) {
            held.paths.push(path.to_string());
        }
        held.lookups += 1;
    }

    /// The kernel forgot `n` lookups of `id`; the id and its names go once none is left
    /// (never the root).
    pub fn forget(&mut self, id: u64, n: u64) {
        if id == ROOT {
            return;
        }
        let Some(held) = self.by_id.get_mut(&id) else {
            return;
        };
        held.lookups = held.lookups.saturating_sub(n);
        if held.lookups == 0 {
            let held = self.by_id.remove(&id).expect("present");
            for p in held.paths {
                if self.by_path.get(&p) == Some(&id) {
                    self.by_path.remove(&p);
                }
            }
        }
    }

    /// `path` was removed: its file keeps its id (for the kernel's handles) and its other
    /// names.
    pub fn removed(&mut self, path: &str) {
        if let Some(id) = self.by_path.remove(path)
            && let Some(h) = self.by_id.get_mut(&id)
        {
            h.paths.retain(|p| p != path);
        }
    }

    /// `from` was renamed to `to`: the names `from` and everything below it move; whatever
    /// `to` named before was replaced.
    pub fn renamed(&mut self, from: &str, to: &str) {
        if from == to {
            return;
        }
        self.removed(to);
        let below = format!("{from}/");
        let moved: Vec<(String, u64)> = self
            .by_path
            .range(from.to_string()..)
            .take_while(|(p, _)| p.as_str() == from || p.starts_with(&below))
            .map(|(p, id)| (p.clone(), *id))
            .collect();
        for (old, id) in moved {
            self.by_path.remove(&old);
            let new = format!("{to}{}", &old[from.len()..]);
            if let Some(h) = self.by_id.get_mut(&id) {
                for p in h.paths.iter_mut().filter(|p| **p == old) {
                    *p = new.clone();
                }
            }
            self.by_path.insert(new, id);
        }
    }

    /// Ids the kernel holds now (the root included).
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Whether only the root is held.
    pub fn is_empty(&self) -> bool {
        self.by_id.len() <= 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[test]
    fn a_rename_moves_the_names_below_and_replaces_the_target() {
        let mut n = Names::default();
        n.looked_up("/d", 10);
        n.looked_up("/d/f", 11);
        n.looked_up("/d/sub/g", 12);
        n.looked_up("/dx", 13);
        n.looked_up("/e", 14);
        n.renamed("/d", "/e");
        assert_eq!(n.path(10), Some("/e"));
        assert_eq!(n.path(11), Some("/e/f"));
        assert_eq!(n.path(12), Some("/e/sub/g"));
        assert_eq!(n.path(13), Some("/dx"), "a sibling sharing a prefix stays");
        assert_eq!(n.path(14), None, "the replaced file has no name left");
        n.forget(14, 1);
        assert_eq!(n.len(), 5);
    }

    #[test]
    fn a_link_keeps_working_through_its_other_name() {
        let mut n = Names::default();
        n.looked_up("/a", 7);
        n.looked_up("/b", 7);
        assert_eq!(n.path(7), Some("/a"));
        n.removed("/a");
        assert_eq!(n.path(7), Some("/b"));
        n.forget(7, 2);
        assert_eq!(n.path(7), None);
        n.forget(ROOT, 100);
        assert_eq!(n.path(ROOT), Some(""));
    }

    #[derive(Clone, Debug)]
    enum Op {
        Lookup(usize, u64),
        Forget(u64),
        Remove(usize),
        Rename(usize, usize),
    }

    const PATHS: [&str; 7] = ["/a", "/a/b", "/a/b/c", "/ab", "/x", "/x/y", "/z"];

    fn op() -> impl Strategy<Value = Op> {
        let p = 0..PATHS.len();
        let id = 2u64..6;
        prop_oneof![
            (p.clone(), id.clone()).prop_map(|(p, i)| Op::Lookup(p, i)),
            id.prop_map(Op::Forget),
            p.clone().prop_map(Op::Remove),
            (p.clone(), p).prop_map(|(a, b)| Op::Rename(a, b)),
        ]
    }

    proptest! {
        /// Against a model of each held id's live names and lookups: an id's path is one
        /// of its live names, and an id with none has no path.
        #[test]
        fn ids_follow_their_names_as_a_model_says(ops in proptest::collection::vec(op(), 0..80)) {
            let mut names = Names::default();
            let mut model: HashMap<u64, (BTreeSet<String>, u64)> = HashMap::new();
            for op in ops {
                match op {
                    Op::Lookup(i, id) => {
                        let p = PATHS[i].to_string();
                        for (other, e) in model.iter_mut() {
                            if *other != id { e.0.remove(&p); }
                        }
                        let e = model.entry(id).or_default();
                        e.0.insert(p.clone());
                        e.1 += 1;
                        names.looked_up(&p, id);
                    }
                    Op::Forget(id) => {
                        names.forget(id, 1);
                        if let Some(e) = model.get_mut(&id) {
                            e.1 -= 1;
                            if e.1 == 0 { model.remove(&id); }
                        }
                    }
                    Op::Remove(i) => {
                        names.removed(PATHS[i]);
                        for e in model.values_mut() { e.0.remove(PATHS[i]); }
                    }
                    Op::Rename(a, b) => {
                        let (from, to) = (PATHS[a], PATHS[b]);
                        let from_below = format!("{from}/");
                        let to_below = format!("{to}/");
                        // The file system refuses a rename into its own subtree, or onto a
                        // directory that is not empty.
                        let busy = model.values().any(|e| e.0.iter().any(|p| p.starts_with(&to_below)));
                        if to.starts_with(&from_below) || from.starts_with(&to_below) || busy {
                            continue;
                        }
                        names.renamed(from, to);
                        if from != to {
                            for e in model.values_mut() { e.0.remove(to); }
                            for e in model.values_mut() {
                                e.0 = e.0.iter().map(|p| {
                                    if p == from {
                                        to.to_string()
                                    } else if let Some(rest) = p.strip_prefix(&from_below) {
                                        format!("{to}/{rest}")
                                    } else {
                                        p.clone()
                                    }
                                }).collect();
                            }
                        }
                    }
                }
                for (id, (paths, _)) in &model {
                    match names.path(*id) {
                        Some(p) => prop_assert!(paths.contains(p), "{} not among {:?}", p, paths),
                        None => prop_assert!(paths.is_empty(), "{} has {:?}", id, paths),
                    }
                }
                prop_assert_eq!(names.len(), model.len() + 1);
            }
        }
    }
}
