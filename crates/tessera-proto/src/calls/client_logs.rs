//! Requests of a process that writes and reads through its daemon alone: under a descriptor
//! limit too low to keep its own logs out of the program's way, the process holds no
//! descriptor but its connection, and its daemon appends to the process's logs for it,
//! marks and syncs them, reads them back, and reads the PFS copies of files.

use serde::{Deserialize, Serialize};

/// Appends `data`, the bytes of logical offset `offset`, to the log `log` (the process's id,
/// or its transaction's log id) of file `ino`; answers their position in the data log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LogAppend {
    pub ino: u64,
    pub log: u64,
    pub offset: u64,
    pub data: Vec<u8>,
}

/// Makes the log's new records readable (its index synced, as before an attach); with
/// `durable`, on its device too (fsync).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LogSync {
    pub ino: u64,
    pub log: u64,
    pub durable: bool,
}

/// The lengths of a log the daemon writes for a process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogLens {
    /// Bytes of the data log.
    pub data: u64,
    /// Bytes of the index log (header included).
    pub index: u64,
}

/// What a process records in its log's journal (see `tessera_core::index::Entry`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LogMark {
    /// Everything written so far is published (a lazy marker).
    Published,
    /// `[start, end)` was published.
    PublishedRange { start: u64, end: u64 },
    /// The process truncated the file to `size`.
    Truncated { size: u64 },
}

/// Records `mark` in the log's journal.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LogMarkIt {
    pub ino: u64,
    pub log: u64,
    pub mark: LogMark,
}

/// Reads `len` bytes of the log's data at data-log position `pos` (the process's own
/// unpublished writes), checked against their checksums; the bytes follow the answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LogReadAt {
    pub ino: u64,
    pub log: u64,
    pub pos: u64,
    pub len: u64,
}

/// Reads ranges of the PFS copy of `path` (an internal path); answers how many bytes of each
/// range the copy held (a copy may be shorter, or missing: 0), and the bytes follow, each
/// range's read bytes in order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReadPfs {
    pub path: String,
    pub ranges: Vec<(u64, u64)>,
}
