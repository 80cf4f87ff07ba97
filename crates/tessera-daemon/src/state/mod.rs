//! The in-memory state of a daemon's shards and caches, without I/O: each change returns the
//! store operations that make it durable, so the services decide when to wait for them.
//!
//! * [`namespace`]: the entries and inodes of this node's shard;
//! * the ownership maps of this node's stripes are `tessera_core::ownership` (pure: its changes
//!   become store operations in `services::ownership_shard`);
//! * [`cache`]: leased copies of other nodes' stripes, and the leases granted on ours;
//! * [`clients`]: which client ids are bound to live connections, and how far they published.

pub mod cache;
pub mod clients;
pub mod namespace;
