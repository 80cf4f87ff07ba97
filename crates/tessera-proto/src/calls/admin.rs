//! Requests of the admin service: connecting, liveness, status and shutdown.

use serde::{Deserialize, Serialize};

/// First message of a client connection. `resume` re-binds a client id after a reconnect, so
/// the process keeps appending to the same logs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    pub version: u32,
    pub pid: u32,
    pub resume: Option<u64>,
}

/// Answer to [`Hello`]: the client id bound to the connection, and where the daemon sits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bound {
    pub client: u64,
    pub node: u32,
    pub nodes: u32,
    /// The daemon's invalidation board, for caching attributes; `None` without one.
    pub board: Option<BoardAt>,
}

/// Where a client opens its daemon's invalidation board: `/proc/<pid>/fd/<fd>`, read-only
/// (see the tessera-shm crate).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoardAt {
    pub pid: u32,
    pub fd: i32,
}

/// Is the peer there? Answered with its node number.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ping;

/// What a daemon holds and serves (asked by its clients and by `tessera status`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Status;

/// Stop the daemon (asked by `tessera stop`): it answers, then leaves the host table and
/// exits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Shutdown;
