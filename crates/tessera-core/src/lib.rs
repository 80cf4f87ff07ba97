//! Pure logic of Tessera: everything that decides, nothing that waits.
//!
//! No I/O, no threads, no runtime: extent maps, the index-log format, strided runs, placement
//! of shards, the consistency models' rules, paths and error codes. The daemon, the client
//! library and the tools all build on these, and each module is tested on its own, mostly by
//! property tests against naive models.

#![forbid(unsafe_code)]

pub mod attr_leases;
pub mod catalogue;
pub mod consistency;
pub mod datatype;
pub mod dir_page;
pub mod error;
pub mod file_view;
pub mod find;
pub mod hyperslab;
pub mod index;
pub mod inherited_fds;
pub mod locality;
pub mod lock_list;
pub mod lock_manager;
pub mod locks;
pub mod meta;
pub mod name_ops;
pub mod namespace;
pub mod ownership;
pub mod path;
pub mod placement;
pub mod posix;
pub mod range_map;
pub mod read_plan;
pub mod run;
pub mod run_map;
pub mod staging;
pub mod sums;
pub mod txn_entries;
pub mod txn_home;
pub mod txn_pending;
pub mod txn_reserved;
pub mod txn_state;
pub mod txn_tiers;
pub mod wal;
pub mod xattrs;

pub use consistency::Model;
pub use error::{Errno, FsError, FsResult};
pub use range_map::{Extent, RangeMap, RangeSet, Slice};
pub use run::Run;
pub use run_map::RunMap;

use serde::{Deserialize, Serialize};

/// Who holds the newest bytes of a range: one process's log on one node.
///
/// `client` is unique per node (the node's daemon hands the numbers out), so (node, client)
/// names a log pair `<bb>/<ino>/<client>.{data,index}` on that node's burst buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Owner {
    pub node: u32,
    pub client: u64,
}

/// Ownership does not shift when a range is split: every byte keeps its owner.
impl Slice for Owner {
    fn advance(&self, _by: u64) -> Self {
        *self
    }
}

/// A run of bytes and the log that holds its newest attached bytes: an entry of an ownership
/// map, and of a query's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnedRun {
    pub run: Run,
    pub owner: Owner,
}

impl From<(Run, Owner)> for OwnedRun {
    fn from((run, owner): (Run, Owner)) -> Self {
        OwnedRun { run, owner }
    }
}
