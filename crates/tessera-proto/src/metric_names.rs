//! The names of the metric samples `tessera status --watch` reads from `NodeStatus.metrics`,
//! as the daemon's metrics render them (name, then labels): the one place both sides take
//! them from, checked against the daemon's rendering by its tests.

pub const WRITE_BYTES: &str = "tessera_write_bytes_total";
pub const READ_LOCAL_BYTES: &str = "tessera_read_bytes_total{source=\"local\"}";
pub const READ_REMOTE_BYTES: &str = "tessera_read_bytes_total{source=\"remote\"}";
pub const READ_PFS_BYTES: &str = "tessera_read_bytes_total{source=\"pfs\"}";
pub const ATTACHES: &str = "tessera_attaches_total";
pub const QUERIES: &str = "tessera_queries_total";
pub const LOCKS_GRANTED: &str = "tessera_locks_granted_total";
pub const LOCK_WAITERS: &str = "tessera_lock_waiters";
pub const TXN_COMMITS: &str = "tessera_transactions_total{outcome=\"commit\"}";
pub const TXN_ABORTS: &str = "tessera_transactions_total{outcome=\"abort\"}";
pub const FLUSH_BYTES: &str = "tessera_flush_bytes_total";
pub const STAGE_IN_BYTES: &str = "tessera_stage_bytes_total{direction=\"in\"}";
pub const STAGE_OUT_BYTES: &str = "tessera_stage_bytes_total{direction=\"out\"}";
/// A family: its samples' names start with this.
pub const ERRORS: &str = "tessera_errors_total";
pub const CLIENTS: &str = "tessera_clients";
pub const BB_USED_BYTES: &str = "tessera_bb_used_bytes";

/// Every name above whose sample is always present (the errors family has a sample only
/// once an error was counted).
pub const ALWAYS_PRESENT: &[&str] = &[
    WRITE_BYTES,
    READ_LOCAL_BYTES,
    READ_REMOTE_BYTES,
    READ_PFS_BYTES,
    ATTACHES,
    QUERIES,
    LOCKS_GRANTED,
    LOCK_WAITERS,
    FLUSH_BYTES,
    STAGE_IN_BYTES,
    STAGE_OUT_BYTES,
    CLIENTS,
    BB_USED_BYTES,
];
