//! Requests of the catalogue service (D2T's metadata service): named variables, the
//! chunks that hold them, and their versions, sharded over the daemons by name
//! (`tessera_core::placement::variable_shard`). A process inside a transaction makes its
//! changes pending under it (published when it commits); outside one, each change is
//! visible at once.

use crate::TxnView;
use serde::{Deserialize, Serialize};
pub use tessera_core::catalogue::{Chunk, Variable, VersionView};

/// A change to the catalogue.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum CatalogueOp {
    /// A new version of a variable (numbered at commit).
    Create(Variable),
    /// A chunk of the version being made (in a transaction) or of the newest one.
    AddChunk { name: String, chunk: Chunk },
    /// Every version of the variable goes.
    Delete { name: String },
}

impl CatalogueOp {
    /// The variable the change is about.
    pub fn name(&self) -> &str {
        match self {
            CatalogueOp::Create(v) => &v.name,
            CatalogueOp::AddChunk { name, .. } | CatalogueOp::Delete { name } => name,
        }
    }
}

/// Change the catalogue, in the connection's transaction if it is in one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CatChange {
    pub op: CatalogueOp,
}

/// Version `version` of the variable `name` (`None`: the newest), as the connection sees it
/// (its transaction's pending version first).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CatLookup {
    pub name: String,
    pub version: Option<u64>,
}

/// Every variable and its newest version, as the connection sees them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CatList {}

/// Wait until the variable `name` has a committed version of at least `version`, for at
/// most `timeout_ms`; the answer is the newest version then. `ETIMEDOUT` when the time runs
/// out first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CatWait {
    pub name: String,
    pub version: u64,
    pub timeout_ms: u64,
}

/// At the variable's shard: `op`, pending under `txn` (`None`: at once).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CatShardChange {
    pub txn: Option<u64>,
    pub op: CatalogueOp,
}

/// At the variable's shard: [`CatLookup`] as `view` sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CatShardLookup {
    pub name: String,
    pub version: Option<u64>,
    pub view: TxnView,
}

/// At one shard: its variables as `view` sees them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CatShardList {
    pub view: TxnView,
}

/// At the variable's shard: as [`CatWait`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CatShardWait {
    pub name: String,
    pub version: u64,
    pub timeout_ms: u64,
}
