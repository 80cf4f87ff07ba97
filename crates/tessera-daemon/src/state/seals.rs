//! Directories sealed against creates: the other half of an rmdir's check for children.
//!
//! An rmdir asks every node, under that node's namespace lock, whether it holds a child of
//! the directory, and seals the directory there if it holds none (`SealDir`). A create inserts
//! its entry under the same lock and is refused if its parent is sealed. So on each node
//! either the create came first (the rmdir sees the child: `ENOTEMPTY`) or the seal did (the
//! create finds no directory: `ENOENT`); a create cannot slip in between the check and the
//! removal, as it could when the parent check and the insert were separate requests.
//!
//! A seal names the directory's inode, so a directory made again under the same name is not
//! sealed. It is lifted when the rmdir fails, and otherwise outlives the removal by
//! [`SEAL_AFTER_REMOVAL`]: a create whose parent check came before the removal may still be
//! on its way, for at most the transport's request timeout.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a seal outlives the rmdir that made it: twice the longest a request to a peer may
/// take, so that no create checked before the removal arrives after it.
pub const SEAL_AFTER_REMOVAL: Duration = Duration::from_secs(600);

#[derive(Default)]
pub struct DirSeals {
    /// Directory path -> (its inode, when the seal lapses).
    seals: Mutex<HashMap<String, (u64, Instant)>>,
}

impl DirSeals {
    /// Seals `dir` (inode `ino`) until `until`.
    pub fn seal(&self, dir: &str, ino: u64, until: Instant) {
        let mut seals = self.seals.lock().expect("seals");
        // Lapsed seals go as new ones come: at most the directories removed in the last
        // SEAL_AFTER_REMOVAL stay.
        let now = crate::clock::now();
        if seals.len() >= 1024 {
            seals.retain(|_, (_, lapses)| *lapses > now);
        }
        seals.insert(dir.to_string(), (ino, until));
    }

    /// Lifts the seal of `dir` if it is `ino`'s.
    pub fn unseal(&self, dir: &str, ino: u64) {
        let mut seals = self.seals.lock().expect("seals");
        if seals.get(dir).is_some_and(|(i, _)| *i == ino) {
            seals.remove(dir);
        }
    }

    /// Whether creates in `dir`, whose inode a create's parent check found to be `ino`, are
    /// refused.
    pub fn sealed(&self, dir: &str, ino: u64) -> bool {
        self.seals
            .lock()
            .expect("seals")
            .get(dir)
            .is_some_and(|(i, lapses)| *i == ino && *lapses > crate::clock::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seal_holds_its_inode_until_it_lapses_or_is_lifted() {
        let s = DirSeals::default();
        let later = crate::clock::now() + Duration::from_secs(60);
        s.seal("/d", 7, later);
        assert!(s.sealed("/d", 7));
        // The directory made again under the name is another inode.
        assert!(!s.sealed("/d", 8));
        assert!(!s.sealed("/e", 7));
        s.unseal("/d", 8);
        assert!(s.sealed("/d", 7));
        s.unseal("/d", 7);
        assert!(!s.sealed("/d", 7));
        s.seal("/d", 7, crate::clock::now());
        assert!(!s.sealed("/d", 7), "a lapsed seal refuses nothing");
    }
}
