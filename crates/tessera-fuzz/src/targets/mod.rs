//! The fuzz targets, one per reader of untrusted bytes, and the damage they apply.

pub mod damage;
pub mod feed;
pub mod frame;
pub mod index_records;
pub mod log_view;
pub mod peer_auth;
pub mod ring;
pub mod wal;
