//! Requests of the read service: bytes from the logs, wherever they are.

use serde::{Deserialize, Serialize};
use tessera_core::Owner;

/// Read logical ranges from other nodes' logs through the daemons: for each owner, its
/// ranges. The answer is every range's bytes, concatenated in request order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Read {
    pub ino: u64,
    pub parts: Vec<(Owner, Vec<(u64, u64)>)>,
}

/// Read logical ranges of the log (ino, client) stored on this node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReadLog {
    pub ino: u64,
    pub client: u64,
    pub ranges: Vec<(u64, u64)>,
}

/// Answer to a read: `len` bytes of file data follow this message in the frame.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Data {
    pub len: u64,
}
