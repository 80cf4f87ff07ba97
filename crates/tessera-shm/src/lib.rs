//! Shared memory between a Tessera daemon and the clients of its node.
//!
//! Every unsafe line that maps or reads a shared region lives in this crate, so that the
//! client library and the daemon share one audited implementation (one module maps a memfd
//! and touches it only through atomics). It holds two regions:
//!
//! * the invalidation board ([`Board`]): the daemon publishes, in a region its clients map
//!   read-only, one counter per slot of cached attributes, and a client trusts an attribute
//!   it cached only while the counter of its slot has not moved;
//! * the request ring ([`Ring`]): one per client connection, carrying a small request to the
//!   daemon and its answer back without a system call while both sides run.
//!
//! The layouts and their versions are in docs/format.md ("Shared memory").

mod board;
mod region;
mod ring;

pub use board::{Board, BoardError, HEADER_BYTES, MAGIC, VERSION};
pub use region::ShmError;
pub use ring::{
    ANSWER_CAPACITY, Place, Posted, REPORT_SLOTS, REQUEST_CAPACITY, RING_HEADER_BYTES, RING_MAGIC,
    RING_VERSION, Ring, RingReports, SPIN,
};

/// `CLOCK_MONOTONIC` in nanoseconds: one clock for every process of a host, so a daemon can
/// hand its clients lease ends they compare with their own reading.
pub fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (t.tv_sec as u64) * 1_000_000_000 + t.tv_nsec as u64
}
