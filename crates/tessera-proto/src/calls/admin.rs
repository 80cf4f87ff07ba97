//! Requests of the admin service: connecting, liveness, status and shutdown.

use serde::{Deserialize, Serialize};

/// First message of a client connection. `resume` re-binds a client id after a reconnect, so
/// the process keeps appending to the same logs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    pub version: u32,
    pub pid: u32,
    pub resume: Option<u64>,
    /// Whether the client wants a request ring (shared memory) beside the socket.
    pub ring: bool,
}

/// Answer to [`Hello`]: the client id bound to the connection, and where the daemon sits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bound {
    pub client: u64,
    pub node: u32,
    pub nodes: u32,
    /// The daemon's invalidation board, for caching attributes; `None` without one.
    pub board: Option<RegionAt>,
    /// The connection's request ring, mapped read-write by the client; `None` if it asked
    /// for none or the daemon makes none (`client_ring = false`).
    pub ring: Option<RegionAt>,
}

/// Where a client opens one of its daemon's shared regions (see the tessera-shm crate):
/// `/proc/<pid>/fd/<fd>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegionAt {
    pub pid: u32,
    pub fd: i32,
}

/// Nothing: answered at once, to measure the way from a client to its daemon and back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Nop;

/// Which way staged bytes went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum StageDirection {
    /// Into Tessera (`tessera stage-in`).
    In,
    /// Out of Tessera (`tessera stage-out`).
    Out,
}

/// A staging worker copied `bytes` through this daemon (counted in its metrics as
/// `tessera_stage_bytes_total`); the bytes themselves went by the usual requests.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Staged {
    pub direction: StageDirection,
    pub bytes: u64,
}

/// The process is done with this connection and its client id: it will not resume it, so
/// the daemon deals with what the id left (publishes it, deletes a log it no longer needs) as
/// for a process that ended. Sent when the client library lets go of its connection.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Goodbye;

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
