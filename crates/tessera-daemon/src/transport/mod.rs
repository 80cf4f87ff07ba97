//! How requests reach a daemon and leave it.
//!
//! * [`client`]: the Unix socket of the node's clients (hello, then one request at a time);
//! * [`client_ring`]: the shared-memory request ring beside a client's socket;
//! * [`frame_codec`]: length-delimited frames that report a stream cut inside one;
//! * [`links`]: the control links between daemons behind one interface (TCP, in-process);
//! * [`peer`]: authenticated TCP between daemons, pooled connections, liveness;
//! * [`bulk`]: the path of file bytes between daemons, behind one interface (TCP, in-process);
//! * [`listen`]: the address the peers reach this daemon at.

pub mod bulk;
pub mod client;
pub mod client_ring;
pub mod frame_codec;
pub mod links;
pub mod listen;
pub mod peer;
