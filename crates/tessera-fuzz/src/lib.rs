//! Fuzzing on stable Rust for the code that reads bytes Tessera did not write itself: frames
//! and messages from sockets, the request ring a client shares with its daemon, the peer
//! authenticator, the state log, index records and the log view over damaged files.
//!
//! Each target is a function of a byte string that panics when a property is broken. It
//! turns the bytes into structured input with `arbitrary` (as cargo-fuzz targets do), builds
//! what a writer would have written, damages it as the input says, and checks the reader
//! against a simple model: no panic, no hang, nothing accepted that was forged or damaged,
//! nothing lost that was intact. [`harness`] runs a target over its committed corpus and
//! then over fresh random inputs; the test suite does both for every target.

pub mod harness;
pub mod targets;

pub use harness::{TARGETS, Target};
