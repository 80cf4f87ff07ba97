//! The in-memory state of a daemon's shards and caches, without I/O: each change returns the
//! store operations that make it durable, so the services decide when to wait for them.
//!
//! * the entries and inodes of this node's namespace shard are `tessera_core::namespace`, and
//!   the ownership maps of its stripes `tessera_core::ownership` (pure: their changes become
//!   store operations through `From` impls in [`crate::store`]);
//! * [`shards`]: the namespace and ownership shards and the stripe-copy callbacks, reached
//!   only inside closures, under locks taken in the order of [`ordered`];
//! * [`cache`]: leased copies of other nodes' stripes, and the leases granted on ours;
//! * [`clients`]: which client ids are bound to live connections, and how far they published;
//! * [`names`]: operations on names in flight (intents driven here, steps answered here);
//! * [`drops`]: removed files whose bytes are still to be released on every node;
//! * [`seals`]: directories an rmdir sealed against creates.

pub mod cache;
pub mod clients;
pub mod drops;
pub mod names;
pub mod ordered;
pub mod seals;
pub mod shards;
