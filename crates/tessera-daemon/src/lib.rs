//! The Tessera daemon: one per node, for the life of a job.
//!
//! A daemon holds a shard of the namespace (entries placed by a hash of their path, inodes on
//! the node that created them), a shard of the ownership maps (each (file, stripe) placed by
//! hash), the read service for the logs on its node, byte-range lock tables, and flush to the
//! PFS. Clients of its node talk to it over a Unix socket, daemons to each other over
//! authenticated TCP ([`transport`]); every request is routed ([`router`]) to the service
//! that answers it ([`services`]), which calls the shards that hold the data, itself included,
//! with typed calls ([`rpc`]). State that must survive a restart is written through [`store`]
//! before it is acknowledged.
//!
//! Where is X decided? (see also docs/architecture.md)
//! * [`rpc`]: how a request type is answered and how a shard is called;
//! * [`router`]: which service answers each request (nothing else);
//! * [`services`]: one module per service, client side and shard side (namespace, ownership,
//!   attribute leases, read, flush, locks and leases, space, transactions, catalogue, extended
//!   attributes, links and names, locality and migration, drops, client logs, find, admin:
//!   the list with a line each is in [`services`]);
//! * [`state`]: the in-memory shard structures and caches (no I/O);
//! * [`transport`]: the client socket, the peer connections, the listen address;
//! * [`store`]: durable state: its tables (one list), schema history, operations, load and
//!   apply; [`store::committer`] writes the state log in place or in groups and checkpoints
//!   it, [`store::state_log`] replays and salvages it;
//! * [`logs`]: reading the logs on this node and burst-buffer accounting; [`buffers`]: the
//!   pooled buffers those reads fill for other nodes; [`blocking`]: blocking work inside a
//!   request, off the other tasks' way;
//! * [`metrics`]: what the daemon counts for dashboards and the endpoint that serves it;
//! * [`leftovers`]: publishing what a process that ended had not;
//! * [`pfs`]: every access to the PFS directory, never through a link planted there;
//! * [`node`]: the wiring of one running daemon; [`client_ids`]: the ids it hands out; [`lifecycle`]: its start, counts and stop;
//!   [`startup`]: starting and stopping it;
//! * [`failpoints`]: where crash and stop tests make a daemon end or hold; [`clock`]: the
//!   time every timer of the services reads (tokio's, which tests pause and advance);
//! * `cluster` (tests only): N nodes' services in one test process, linked in memory, on a
//!   paused clock, with crashes at failpoints, restarts and cut links.

pub mod blocking;
pub mod buffers;
pub mod client_ids;
pub mod clock;
#[cfg(test)]
mod cluster;
pub mod failpoints;
pub mod leftovers;
pub mod lifecycle;
pub mod logs;
pub mod metrics;
pub mod node;
pub mod pfs;
pub mod router;
pub mod rpc;
pub mod services;
pub mod startup;
pub mod state;
pub mod store;
pub mod transport;

pub use node::{Node, blocking_failed};
pub use startup::run;
pub use transport::{listen, peer};

/// Refuses a security level this build may not run: `none` exists only in builds made with
/// the `insecure-bench` feature, for measuring what the other levels cost.
pub fn check_security(cfg: &tessera_proto::InstanceConfig) -> tessera_core::FsResult<()> {
    if cfg.security == tessera_proto::peer_auth::Security::None && !cfg!(feature = "insecure-bench")
    {
        return Err(tessera_core::FsError::new(
            tessera_core::Errno::Inval,
            "instance.toml: security = \"none\" turns off the checks of frames between daemons and is accepted only by a daemon built with `--features insecure-bench` (for benchmarks); use \"auth\" (the default), \"integrity\" or \"privacy\"",
        ));
    }
    Ok(())
}
