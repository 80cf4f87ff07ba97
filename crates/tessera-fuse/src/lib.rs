//! A FUSE mount of a Tessera instance (`tessera mount`): the namespace, file bytes,
//! links, extended attributes and record locks of the client library, for programs the
//! interposer never sees (statically linked and Go programs, containers that bind a host
//! directory, file browsers and editors).
//!
//! * [`fs`]: each FUSE request answered through the client, and what the kernel may cache;
//! * [`inodes`]: the kernel's node ids and the paths they stand for;
//! * [`handles`]: open files and directories by handle number;
//! * [`locks`]: record locks, one lock-service owner per process on the mount;
//! * [`convert`]: attributes and errors in FUSE's terms.

#![forbid(unsafe_code)]

pub mod convert;
pub mod fs;
pub mod handles;
pub mod inodes;
pub mod locks;

pub use fs::TesseraFs;

use std::path::Path;
use tessera_client::{Client, InstanceLayout, Model};

/// How a mount is made.
#[derive(Clone, Debug)]
pub struct MountOptions {
    /// The consistency model of every open through the mount.
    pub model: Model,
    /// Threads answering the kernel's requests.
    pub threads: usize,
    /// Let other users' processes use the mount (FUSE's `allow_other`).
    pub allow_other: bool,
}

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            model: Model::Session,
            threads: 4,
            allow_other: false,
        }
    }
}

/// The mount's kernel options.
fn config(o: &MountOptions) -> fuser::Config {
    let mut cfg = fuser::Config::default();
    cfg.mount_options = vec![
        fuser::MountOption::FSName("tessera".into()),
        fuser::MountOption::Subtype("tessera".into()),
        // The kernel checks permission bits itself, from the attributes.
        fuser::MountOption::DefaultPermissions,
    ];
    if o.allow_other {
        cfg.acl = fuser::SessionACL::All;
    }
    cfg.n_threads = Some(o.threads.max(1));
    cfg.clone_fd = true;
    cfg
}

/// Mounts the instance at `layout` (reached through `client`) on `mountpoint` and serves it
/// until it is unmounted.
pub fn serve(
    client: Client,
    layout: InstanceLayout,
    mountpoint: &Path,
    options: &MountOptions,
) -> std::io::Result<()> {
    let node = client.identity().0;
    let fs = TesseraFs::new(client, layout, node, options.model);
    fuser::mount2(fs, mountpoint, &config(options))
}
