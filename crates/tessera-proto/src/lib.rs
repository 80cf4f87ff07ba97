//! What Tessera's processes say to each other, and how an instance is described.
//!
//! * [`calls`]: the typed requests between a client and its node's daemon (Unix socket) and
//!   between daemons (TCP), each naming its reply type, grouped by service;
//! * [`msg`]: the data they carry, as serde types encoded with postcard;
//! * [`frame`]: length-prefixed framing with a maximum size;
//! * [`peer_auth`]: the mutual handshake of daemons and the sealed frames between them (keyed
//!   BLAKE3 with the instance secret);
//! * [`config`]: the instance description (`instance.toml`) and the layout of an instance
//!   directory;
//! * [`instance_dir`]: the checks that the instance directory and its files are the user's
//!   own before anything in them is trusted;
//! * [`hosts`]: the host table through which daemons find each other and clients find the
//!   daemon of their host.
//!
//! No runtime lives here: the daemon drives these types from tokio, the client from blocking
//! sockets.

#![forbid(unsafe_code)]

pub mod calls;
pub mod config;
pub mod frame;
pub mod hosts;
pub mod instance_dir;
pub mod metric_names;
pub mod msg;
pub mod peer_auth;
pub mod reports;

pub use calls::*;
pub use config::{InstanceConfig, InstanceLayout};
pub use hosts::{HostEntry, HostTable};
pub use msg::*;
