//! What Tessera's processes say to each other, and how an instance is described.
//!
//! * [`msg`]: requests and responses between a client and its node's daemon (Unix socket) and
//!   between daemons (TCP), as serde types encoded with postcard;
//! * [`frame`]: length-prefixed framing with a maximum size;
//! * [`peer_auth`]: the mutual handshake of daemons and the sealed frames between them (keyed
//!   BLAKE3 with the instance secret);
//! * [`config`]: the instance description (`instance.toml`) and the layout of an instance
//!   directory;
//! * [`hosts`]: the host table through which daemons find each other and clients find the
//!   daemon of their host.
//!
//! No runtime lives here: the daemon drives these types from tokio, the client from blocking
//! sockets.

pub mod config;
pub mod frame;
pub mod hosts;
pub mod msg;
pub mod peer_auth;

pub use config::{InstanceConfig, InstanceLayout};
pub use hosts::{HostEntry, HostTable};
pub use msg::*;
