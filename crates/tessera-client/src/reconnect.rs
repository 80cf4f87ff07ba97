//! When a client whose connection to its daemon broke tries again, and when it gives up: a
//! process that had a client id (its daemon restarted) keeps trying for
//! `TESSERA_RECONNECT_SECS` while the daemon refuses connections (not up yet) or is busy
//! (still cleaning up the id's previous connection), waiting 20 ms, then twice as long each
//! time, at most 500 ms; a process connecting for the first time, or any other error, gives
//! up at once. Pure: the caller reads the clock and sleeps.

use std::time::{Duration, Instant};
use tessera_core::Errno;

const FIRST_WAIT: Duration = Duration::from_millis(20);
const LONGEST_WAIT: Duration = Duration::from_millis(500);

/// The attempts of one reconnection.
#[derive(Clone, Debug)]
pub struct Reconnect {
    deadline: Instant,
    wait: Duration,
}

/// What to do after a failed attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Sleep this long, then try again.
    RetryAfter(Duration),
    /// Fail with the attempt's error.
    GiveUp,
}

impl Reconnect {
    /// Attempts starting at `now`; `resuming`: the process had a client id (its daemon went
    /// away under it), so it keeps trying for `patience`.
    pub fn start(now: Instant, resuming: bool, patience: Duration) -> Reconnect {
        Reconnect {
            deadline: now + if resuming { patience } else { Duration::ZERO },
            wait: FIRST_WAIT,
        }
    }

    /// An attempt failed with `errno` at `now`.
    pub fn failed(&mut self, errno: Errno, now: Instant) -> Next {
        let daemon_not_ready = matches!(errno, Errno::ConnRefused | Errno::Busy);
        if now >= self.deadline || !daemon_not_ready {
            return Next::GiveUp;
        }
        let wait = self.wait;
        self.wait = (self.wait * 2).min(LONGEST_WAIT);
        Next::RetryAfter(wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restarting_daemon_is_waited_for_with_growing_pauses_until_the_deadline() {
        let t0 = Instant::now();
        let mut r = Reconnect::start(t0, true, Duration::from_secs(2));
        let mut now = t0;
        let mut waits = Vec::new();
        while let Next::RetryAfter(w) = r.failed(Errno::ConnRefused, now) {
            waits.push(w.as_millis());
            now += w;
        }
        assert_eq!(&waits[..6], [20, 40, 80, 160, 320, 500]);
        assert!(waits[6..].iter().all(|w| *w == 500));
        let waited = now - t0;
        assert!(
            waited >= Duration::from_secs(2) && waited < Duration::from_millis(2500),
            "{waited:?}"
        );
    }

    #[test]
    fn a_first_connection_and_other_errors_give_up_at_once() {
        let t0 = Instant::now();
        let mut first = Reconnect::start(t0, false, Duration::from_secs(30));
        assert_eq!(first.failed(Errno::ConnRefused, t0), Next::GiveUp);
        let mut resuming = Reconnect::start(t0, true, Duration::from_secs(30));
        assert_eq!(resuming.failed(Errno::Access, t0), Next::GiveUp);
        assert_eq!(resuming.failed(Errno::Proto, t0), Next::GiveUp);
        assert_eq!(
            resuming.failed(Errno::Busy, t0),
            Next::RetryAfter(FIRST_WAIT),
            "busy: the daemon still cleans up the id's previous connection"
        );
    }
}
