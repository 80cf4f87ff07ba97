//! The workloads. Each runs one repetition on every rank and returns its metrics (meaningful
//! on rank 0). Data written is a deterministic function of the file offset, and every read is
//! checked against it.

pub mod checkpoint;
pub mod consistency;
pub mod dl;
pub mod meta;
pub mod meta_poll;
pub mod ops;
pub mod scale;
pub mod scr;
pub mod tcp_stream;

use crate::rank::Ctx;
use tessera_cli::demo::{first_mismatch, pattern_at};

/// Aborts the job if `buf` differs from the pattern at logical offset `off`.
pub fn verify(cx: &Ctx, buf: &[u8], off: u64, what: &str) {
    let injected = cx.params.inject_fault && cx.rank == 0 && !buf.is_empty();
    let bad = if injected {
        Some(0)
    } else {
        first_mismatch(buf, off)
    };
    if let Some(k) = bad {
        cx.fail(format!(
            "{what}: verification failed at offset {}: got {:#04x}, expected {:#04x}",
            off + k as u64,
            buf[k] ^ if injected { 0xff } else { 0 },
            pattern_at(off + k as u64)
        ));
    }
}
