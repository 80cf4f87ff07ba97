//! The Tessera client library: what an application links to reach the file system.
//!
//! Synchronous and free of background threads, so it is safe inside MPI programs, across
//! `fork` (a child becomes a new client with its own logs) and under LD_PRELOAD. Writes go to
//! this process's logs on its node's burst buffer without a message; the synchronisation
//! primitives of the BaseFS of Wang, Mohror and Snir (attach, query, detach, flush) go to the node's daemon,
//! which routes them to the shards that hold the answer.
//!
//! ```no_run
//! use tessera_client::{Client, OpenOptions};
//! use tessera_core::Model;
//!
//! let fs = Client::from_env()?;
//! let mut f = fs.open("/tessera/ckpt", OpenOptions::new().write(true).create(true).model(Model::Commit))?;
//! f.write_at(b"state", 0)?;
//! f.commit()?; // now visible to every process that reads after this returns
//! f.close()?;
//! # Ok::<(), tessera_core::FsError>(())
//! ```
//!
//! Each handle has a consistency model (see `tessera_core::consistency`); the model decides
//! where attach and query run, the data path is the same for all.

#![forbid(unsafe_code)]

mod attr_cache;
mod catalogue;
mod client;
mod conn;
mod file;
mod links;
mod list_lock;
mod locality;
pub mod log_sink;
mod membership;
mod migrate;
mod read;
mod reconnect;
mod stat_ahead;
mod view_cache;
mod xattr;

pub use client::{Client, ReadSources, Space, Stats};
pub use file::{File, OpenOptions, Whence};
pub use list_lock::HeldList;
pub use locality::{DEFAULT_MAX_EXTENTS, HostBytes, HostOf, LocatedExtent, Location, RangeAsk};
pub use tessera_core::catalogue::{Chunk, Variable, VersionView};
pub use tessera_core::locality::Residence;
pub use tessera_core::lock_list::{LockList, LockRun};
pub use tessera_core::locks::{HeldLock, LockKind, LockOwner};
pub use tessera_core::path::DEFAULT_MOUNT;
pub use tessera_core::posix;
pub use tessera_core::xattrs::{SetMode, XattrOp, XattrReply};
pub use tessera_core::{Errno, FsError, FsResult, Model};
/// The descriptors the library holds, for the interposer's guard of the program's calls.
pub use tessera_logstore::library_fds;
pub use tessera_proto::StageDirection;
pub use tessera_proto::{
    Attr, AttrChange, DirEntry, FileKind, InstanceConfig, InstanceLayout, NodeStatus, OwnedExtent,
    OwnedRun, extents_of, sorted_extents,
};
