//! A daemon's life: when it started, the requests and clients it counts, whether it was asked
//! to stop, and whether it is stopping (its state being written and closed, its background
//! loops ending instead of changing it).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// The figures and flags of a running daemon; every field private, changed by its methods.
pub struct Lifecycle {
    started: Instant,
    requests: AtomicU64,
    connected: AtomicU64,
    shutdown: Notify,
    stopping: AtomicBool,
}

impl Default for Lifecycle {
    fn default() -> Self {
        Lifecycle {
            started: crate::clock::now(),
            requests: AtomicU64::new(0),
            connected: AtomicU64::new(0),
            shutdown: Notify::new(),
            stopping: AtomicBool::new(false),
        }
    }
}

impl Lifecycle {
    /// Counts one request answered.
    pub fn count_request(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    /// Requests answered since start.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// A client connected (`true`) or its connection ended (`false`).
    pub fn client(&self, connected: bool) {
        if connected {
            self.connected.fetch_add(1, Ordering::Relaxed);
        } else {
            self.connected.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Clients connected now.
    pub fn clients(&self) -> u64 {
        self.connected.load(Ordering::Relaxed)
    }

    /// How long the daemon has run.
    pub fn uptime(&self) -> Duration {
        crate::clock::since(self.started)
    }

    /// Asks the daemon to stop (a `Shutdown` request).
    pub fn ask_to_stop(&self) {
        self.shutdown.notify_one();
    }

    /// Returns once the daemon is asked to stop.
    pub async fn asked_to_stop(&self) {
        self.shutdown.notified().await
    }

    /// From now on the daemon is stopping.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
    }

    /// Whether the daemon is stopping.
    pub fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn counts_and_flags_follow_their_calls() {
        let l = Lifecycle::default();
        l.count_request();
        l.count_request();
        l.client(true);
        l.client(true);
        l.client(false);
        assert_eq!((l.requests(), l.clients()), (2, 1));
        tokio::time::advance(Duration::from_secs(5)).await;
        assert!(l.uptime() >= Duration::from_secs(5));
        assert!(!l.stopping());
        l.stop();
        assert!(l.stopping());
        // A request to stop made before anyone waits is not lost.
        l.ask_to_stop();
        l.asked_to_stop().await;
    }
}
