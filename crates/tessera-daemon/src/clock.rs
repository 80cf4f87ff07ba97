//! The daemon's clock: every timer of its services (lock leases, stripe-copy leases,
//! attribute leases, transaction timeouts, migration grace, directory seals) reads the time
//! here and sleeps with tokio's timers, so that both follow tokio's clock. A test that pauses
//! it (`tokio::time::pause`, or `start_paused` on an in-process cluster) moves every timer
//! of every node at once with `tokio::time::advance`, and a lease expires in microseconds of
//! real time. Outside a runtime, and in a running daemon, it is the monotonic clock.
//!
//! The time is a `std::time::Instant`, so that the pure rules of `tessera_core` (lease
//! tables) take it as they are.

use std::time::Instant;

/// Now, on tokio's clock (paused and advanced by tests).
pub fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// The time since `earlier` (a time read from [`now`]); zero if it is later.
pub fn since(earlier: Instant) -> std::time::Duration {
    now().saturating_duration_since(earlier)
}

/// Sleeps until `deadline` (a time read from [`now`]).
pub async fn sleep_until(deadline: Instant) {
    tokio::time::sleep_until(tokio::time::Instant::from_std(deadline)).await
}
