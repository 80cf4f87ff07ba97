//! Path calls and attributes: the stat family (with the symbol names Debian 12's glibc binds
//! and the older `__xstat` ones), statx, access, unlink, mkdir, rmdir, rename, truncate,
//! statfs, and the calls Tessera answers without storing anything (modes, owners, times,
//! links). Extended attributes are in [`crate::xattrs`].
//!
//! One module per family: [`mod@stat`], [`mod@statfs`], [`mod@access`], [`names`], [`links`], [`attrs`]
//! (attributes Tessera does not store) and [`cwd`] (the working directory).

mod access;
mod attrs;
mod cwd;
mod links;
mod names;
mod stat;
mod statfs;

pub use access::*;
pub use attrs::*;
pub use cwd::*;
pub use links::*;
pub use names::*;
pub use stat::*;
pub use statfs::*;

/// `st_dev` of Tessera files ("TS").
pub const TESSERA_DEV: u64 = 0x5453;
/// `f_type` reported by statfs ("TESSERA" in leetspeak); MPI-IO libraries that do not know it
/// use their generic POSIX driver.
pub const TESSERA_MAGIC: i64 = 0x07E5_5E7A;
/// Preferred I/O size (`st_blksize`): large transfers are what the logs like.
pub const BLKSIZE: i64 = 4 << 20;
