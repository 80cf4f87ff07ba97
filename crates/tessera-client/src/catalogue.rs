//! The catalogue of variables and chunks (D2T's metadata service), from a process: in a
//! transaction (after `txn_join`) creates, chunks and deletes are pending until it commits and
//! seen meanwhile only by its members; outside one, each is visible at once. Lookups read a
//! committed version whole (a snapshot: version k's chunks stay the same while k + 1
//! commits).

use crate::Client;
use std::time::Duration;
use tessera_core::FsResult;
use tessera_core::catalogue::{Chunk, Variable, VersionView};
use tessera_proto::{CatChange, CatList, CatLookup, CatWait, CatalogueOp};

impl Client {
    /// Creates a new version of `variable` (numbered when it commits).
    pub fn cat_create(&self, variable: Variable) -> FsResult<()> {
        self.lock().call(CatChange {
            op: CatalogueOp::Create(variable),
        })
    }

    /// Adds `chunk` to the version of `name` this transaction creates (outside a
    /// transaction: to its newest version).
    pub fn cat_add_chunk(&self, name: &str, chunk: Chunk) -> FsResult<()> {
        self.lock().call(CatChange {
            op: CatalogueOp::AddChunk {
                name: name.to_string(),
                chunk,
            },
        })
    }

    /// Deletes every version of `name` (when the transaction commits).
    pub fn cat_delete(&self, name: &str) -> FsResult<()> {
        self.lock().call(CatChange {
            op: CatalogueOp::Delete {
                name: name.to_string(),
            },
        })
    }

    /// Version `version` of `name` (`None`: the newest; in a transaction that creates it,
    /// the pending one, numbered 0).
    pub fn cat_lookup(&self, name: &str, version: Option<u64>) -> FsResult<VersionView> {
        self.lock().call(CatLookup {
            name: name.to_string(),
            version,
        })
    }

    /// Every variable with its newest version.
    pub fn cat_list(&self) -> FsResult<Vec<(String, u64)>> {
        self.lock().call(CatList {})
    }

    /// Waits until `name` has a committed version of at least `version` (at most
    /// `timeout`): the newest version then, or `ETIMEDOUT`.
    pub fn cat_wait(&self, name: &str, version: u64, timeout: Duration) -> FsResult<u64> {
        self.lock().call(CatWait {
            name: name.to_string(),
            version,
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        })
    }
}
