//! The services of a daemon, one module per service. Each implements
//! [`crate::rpc::ServeClient`] for the client requests it answers and
//! [`crate::rpc::ServePeer`] for the shard requests it answers; the requests and their
//! reply types are defined per service in `tessera_proto::calls`.
//!
//! * [`namespace`] / [`namespace_shard`]: paths and inodes (client side / shard side);
//! * [`ownership`] / [`ownership_shard`]: which log holds each range, and leased copies;
//! * [`attr_cache`]: attributes clients cache under leases: granted by the shard, recalled
//!   when they change;
//! * [`read`]: bytes from the logs, local or remote;
//! * [`flush`]: atomic publication into the PFS;
//! * [`locks`]: byte-range (fcntl) locks and list locks;
//! * [`leases`]: lock leases, their renewal and expiry, and the fences of revoked list locks;
//! * [`space`]: burst-buffer reservations, and which files a client writes here;
//! * [`txn`] / [`txn_enroll`] / [`txn_home`] / [`txn_shard`]: transactions (D2T):
//!   joining one (one process, or all of the library's at once), its two-phase commit at its
//!   home, and the state every node holds back until the decision; [`txn_members`]: which
//!   transaction each client is a member of; [`txn_homes`]: the homes' table;
//!   [`txn_rename`]: renames by its members, pending between the two names' shards;
//! * [`catalogue`] / [`catalogue_shard`]: the catalogue of variables and chunks (D2T),
//!   pending under transactions like their writes;
//! * [`xattr`]: extended attributes, kept beside the inodes;
//! * [`links`]: hard links, counted beside the inodes;
//! * [`names`]: renames, links and removals outside transactions, driven by the file's inode
//!   shard from an intent that survives a crash between any two steps; [`names_check`]:
//!   names counted against link counts;
//! * [`locality`]: where the bytes of files live (FusionFS and Swift), for schedulers; [`migrate`]:
//!   moving them to a reader's node (FusionFS's migrate-on-open);
//! * [`drops`]: removed files' bytes released on every node in the background, in batches;
//! * [`client_logs`]: logs the daemon writes and reads for a process that works through it
//!   alone (a descriptor limit too low for its own);
//! * [`find`]: `tessera find`'s predicates tested on this node's shard;
//! * [`admin`]: liveness, status, shutdown.

pub mod admin;
pub mod attr_cache;
pub mod catalogue;
pub mod catalogue_shard;
pub mod client_logs;
pub mod drops;
pub mod find;
pub mod flush;
pub mod leases;
pub mod links;
pub mod locality;
pub mod locks;
pub mod migrate;
pub mod names;
pub mod names_check;
pub mod namespace;
pub mod namespace_shard;
pub mod ownership;
pub mod ownership_shard;
pub mod read;
pub mod space;
pub mod txn;
pub mod txn_enroll;
pub mod txn_home;
pub mod txn_homes;
pub mod txn_members;
pub mod txn_rename;
pub mod txn_shard;
pub mod xattr;
