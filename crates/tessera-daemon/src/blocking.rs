//! Blocking work inside a request (device reads, PFS copies, log removal): on the daemon's
//! multi-threaded runtime it runs with `block_in_place`, so the worker's other tasks move to
//! another worker meanwhile; on a single-threaded runtime (the in-process cluster of the
//! tests), where `block_in_place` is refused, it runs in place, which there is the same.

use tokio::runtime::{Handle, RuntimeFlavor};

/// Runs `f`, which blocks, without stalling the runtime's other tasks where it can.
pub fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_on_either_runtime_and_outside_one() {
        assert_eq!(blocking(|| 1), 1);
        let single = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        assert_eq!(single.block_on(async { blocking(|| 2) }), 2);
        let multi = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        assert_eq!(multi.block_on(async { blocking(|| 3) }), 3);
    }
}
