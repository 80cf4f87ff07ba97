//! The client's statistics, for the people and tools that ask where a process's reads were
//! served from (a locality-placed task should read its bytes from its own node).
//!
//! `TESSERA_STATS=FILE` appends one JSON line per process to FILE at exit (a local path, not a
//! Tessera one): `{"pid", "host", "node", "stats": {queries, attaches, requests, read: {...}}}`.
//! A long-lived process (a Dask worker, say) asks at any time through
//! [`tessera_preload_stats`], found with `dlsym` (Python: `ctypes.CDLL(None)`).

use libc::{c_char, size_t, ssize_t};

/// The process's statistics line, if it connected to Tessera.
fn stats_json() -> Option<String> {
    let c = crate::state::connected_client()?;
    let (node, _) = c.identity();
    let line = serde_json::json!({
        "pid": std::process::id(),
        "host": tessera_proto::hosts::this_host(),
        "node": node,
        "stats": c.stats(),
    });
    Some(line.to_string())
}

/// At exit: appends the line to `TESSERA_STATS`, if set (never waits for another thread).
pub fn write_at_exit() {
    let Some(path) = std::env::var_os("TESSERA_STATS") else {
        return;
    };
    let Some(c) = crate::state::connected_client() else {
        return;
    };
    if !c.idle_in_this_process() {
        return;
    }
    let Some(line) = stats_json() else { return };
    let wrote = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, format!("{line}\n").as_bytes()));
    if let Err(e) = wrote {
        eprintln!(
            "tessera: TESSERA_STATS={}: {e}",
            std::path::Path::new(&path).display()
        );
    }
}

/// Writes the statistics of this process as JSON (NUL-terminated) into `buf`; returns the
/// length without the NUL, or -1 if the process has not used Tessera yet. A `buf` too small
/// (or NULL with `len` 0) gets nothing written and the length needed back, as `snprintf`.
///
/// # Safety
/// `buf` is NULL or points to `len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_preload_stats(buf: *mut c_char, len: size_t) -> ssize_t {
    let Ok(Some(line)) = std::panic::catch_unwind(stats_json) else {
        return -1;
    };
    let bytes = line.as_bytes();
    if !buf.is_null() && len > bytes.len() {
        // SAFETY: `buf` holds `len` bytes (this function's contract), more than the line.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), bytes.len());
            *buf.add(bytes.len()) = 0;
        }
    }
    bytes.len() as ssize_t
}
