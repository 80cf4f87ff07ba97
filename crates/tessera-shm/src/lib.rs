//! Shared memory between a Tessera daemon and the clients of its node.
//!
//! Every unsafe line that maps or reads a shared region lives in this crate, so that the
//! client library and the daemon share one audited implementation. Today it holds the
//! invalidation board ([`Board`]): the daemon publishes, in a region its clients map read-only,
//! one counter per slot of cached attributes, and a client trusts an attribute it cached only
//! while the counter of its slot has not moved. The layout and its version are in
//! docs/format.md ("The invalidation board").

mod board;

pub use board::{Board, BoardError, HEADER_BYTES, MAGIC, VERSION};

/// `CLOCK_MONOTONIC` in nanoseconds: one clock for every process of a host, so a daemon can
/// hand its clients lease ends they compare with their own reading.
pub fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (t.tv_sec as u64) * 1_000_000_000 + t.tv_nsec as u64
}
