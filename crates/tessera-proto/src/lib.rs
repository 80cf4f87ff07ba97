//! What Tessera's processes say to each other, and how an instance is described.
//!
//! * [`msg`]: requests and responses between a client and its node's daemon (Unix socket) and
//!   between daemons (TCP), as serde types encoded with postcard;
//! * [`frame`]: length-prefixed framing with a maximum size, and the MAC (keyed BLAKE3) that authenticates
//!   every daemon-to-daemon frame with the instance secret;
//! * [`config`]: the instance description (`instance.toml`) and the layout of an instance
//!   directory.
//!
//! No runtime lives here: the daemon drives these types from tokio, the client from blocking
//! sockets.

pub mod config;
pub mod frame;
pub mod msg;

pub use config::{InstanceConfig, InstanceLayout};
pub use msg::*;
