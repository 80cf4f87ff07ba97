//! Descriptor calls: open, close, read, write and their positional and vectored forms, lseek,
//! fsync, ftruncate, dup. Offsets live in the open file description, shared by `dup`s.
//!
//! One module per group of calls: [`mod@open`], [`data`] (read and write), [`vectored`],
//! [`position`] (lseek, sync, truncate), [`mod@dup`], [`copy`] (copy_file_range, sendfile,
//! fadvise) and [`space`] (fallocate, mmap, readahead).

use libc::c_int;

mod copy;
mod data;
mod dup;
mod open;
mod position;
mod space;
mod vectored;

pub use copy::*;
pub use data::*;
pub use dup::*;
pub use open::*;
pub use position::*;
pub use space::*;
pub use vectored::*;

/// Status flags reported by F_GETFL and changed by F_SETFL.
pub const STATUS_FLAGS: c_int = libc::O_ACCMODE | libc::O_APPEND | libc::O_NONBLOCK;
