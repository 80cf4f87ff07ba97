//! The figures a client reports to its daemon in its request ring (`tessera_shm::Ring`'s
//! report words): running totals of what it does without a request, which the daemon's
//! metrics count. Each constant is a slot of the ring's report area.

/// Bytes the client read from logs on its node itself (its own, and other processes').
pub const LOCAL_READ_BYTES: usize = 0;
/// Bytes the client read from the PFS copy itself.
pub const PFS_READ_BYTES: usize = 1;
/// Slots in use (at most `tessera_shm::REPORT_SLOTS`).
pub const SLOTS: usize = 2;
