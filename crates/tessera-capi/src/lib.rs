//! `libtessera.so`: the C API of Tessera, declared and documented in `include/tessera.h`.
//!
//! Every function here is a thin, checked layer over the Rust client library
//! (`tessera_client`): it validates the pointers and numbers it is given, maps the result to
//! the C conventions (0 or a count on success, -1 or NULL with `errno` on failure), and keeps
//! the failure's message for `tessera_errmsg`. A panic never crosses into C: it becomes an
//! `EIO` failure with a message.
//!
//! Handles: `tessera_client` is a boxed [`Client`] (shared by threads, as the client is);
//! `tessera_file` a boxed [`CFile`], freed by `tessera_close`. A NULL handle is `EINVAL`; a
//! NULL buffer, string or result pointer is `EFAULT`, as the kernel answers.
//!
//! Every helper that dereferences a caller's pointer is an `unsafe fn` stating what the
//! pointer must be; every `unsafe` block says why that holds.
//!
//! Modules, in the order of `tessera.h`: [`errors`] (messages, versions, model names),
//! [`connect`], [`namespace`] (path calls), [`files`] (open files), [`locks`], [`locality`];
//! `boundary` holds what every entry point uses (the checks of handles, over the error
//! message, panic guard and pointer checks of `tessera_cabi`). The types C sees are defined here.

#![deny(clippy::undocumented_unsafe_blocks)]

use libc::{c_char, c_int, mode_t, size_t, ssize_t};
use std::ffi::CStr;
use tessera_client::{
    Attr, Client, Errno, File, FileKind, FsError, FsResult, InstanceLayout, LockKind, Model,
    OpenOptions, OwnedExtent, RangeAsk, Residence, Whence, posix::OpenIntent,
};

mod boundary;
pub mod connect;
pub mod errors;
pub mod files;
#[cfg(test)]
mod layout_test;
pub mod locality;
pub mod locks;
pub mod namespace;

/// The `TESSERA_VERSION` of `tessera.h`.
pub const VERSION: c_int = 100;

/// `tessera_client`.
pub struct CClient(Client);

/// `tessera_file`: an open file and the path it was opened with (for `tessera_fstat`).
pub struct CFile {
    file: File,
    client: Client,
    path: String,
}

/// `struct tessera_stat`.
#[repr(C)]
pub struct CStat {
    pub ino: u64,
    pub kind: u32,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub atime_ns: i64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
}

/// `struct tessera_extent`.
#[repr(C)]
pub struct CExtent {
    pub start: u64,
    pub end: u64,
    pub node: u32,
    pub client: u64,
}

/// `TESSERA_HOST_MAX`.
pub const HOST_MAX: usize = 64;

/// `struct tessera_location`.
#[repr(C)]
pub struct CLocation {
    pub start: u64,
    pub end: u64,
    pub node: i32,
    pub residence: u32,
    pub host: [c_char; HOST_MAX],
    pub addr: [c_char; HOST_MAX],
}

/// `struct tessera_placement`.
#[repr(C)]
pub struct CPlacement {
    pub error: i32,
    pub hosts: u32,
    pub size: u64,
    pub best_bytes: u64,
    pub view_time_ns: i64,
    pub best_host: [c_char; HOST_MAX],
}
