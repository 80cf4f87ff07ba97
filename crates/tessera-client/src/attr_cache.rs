//! Attributes this process keeps under its daemon's leases: a stat answered from here costs
//! no message.
//!
//! An entry is used only while the lease its daemon handed out holds: before its end (on
//! `CLOCK_MONOTONIC`, which the daemon shares), while the daemon's invalidation board keeps
//! its generation, and while the entry's slot keeps the epoch it had when the daemon asked
//! the shard. The shard moves the slot (through the daemon) before it acknowledges any
//! change of the entry, so a stat that starts after a change was acknowledged anywhere never
//! answers from a copy made before it. The rules, and why the lease is the daemon's, are in
//! the daemon's `services::attr_cache`.

use std::collections::HashMap;
use tessera_proto::{Attr, AttrLease, RegionAt};
use tessera_shm::Board;

/// Entries kept at most; past it the cache starts over (a copy is worth one request).
const MAX_ENTRIES: usize = 1 << 16;

pub(crate) struct AttrCache {
    board: Option<Board>,
    entries: HashMap<String, (Attr, AttrLease)>,
}

impl AttrCache {
    /// A cache that keeps nothing.
    pub fn off() -> AttrCache {
        AttrCache {
            board: None,
            entries: HashMap::new(),
        }
    }

    /// The cache of a new connection: its daemon's board, opened read-only. A board that
    /// cannot be opened (another PID namespace, say) leaves the cache off.
    pub fn open(at: Option<RegionAt>) -> AttrCache {
        let board = at.and_then(|at| {
            let path = format!("/proc/{}/fd/{}", at.pid, at.fd);
            Board::open(std::path::Path::new(&path)).ok()
        });
        AttrCache {
            board,
            entries: HashMap::new(),
        }
    }

    pub fn enabled(&self) -> bool {
        self.board.is_some()
    }

    /// The attributes of `path` if a lease on them still holds.
    pub fn get(&mut self, path: &str) -> Option<Attr> {
        let board = self.board.as_ref()?;
        let (attr, lease) = self.entries.get(path)?;
        let valid = tessera_shm::monotonic_ns() < lease.expires_ns
            && board.generation() == lease.generation
            && board.epoch(lease.slot) == lease.epoch;
        if valid {
            return Some(attr.clone());
        }
        self.entries.remove(path);
        None
    }

    pub fn put(&mut self, path: String, attr: Attr, lease: AttrLease) {
        if self.board.is_none() {
            return;
        }
        if self.entries.len() >= MAX_ENTRIES {
            self.entries.clear();
        }
        self.entries.insert(path, (attr, lease));
    }

    pub fn clear(&mut self) {
        self.entries.clear();
    }
}
