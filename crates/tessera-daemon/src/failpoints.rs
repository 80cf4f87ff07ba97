//! Failpoints for crash and stop tests: named points where a daemon ends (or holds), so that
//! a test can check the state a crash there leaves behind.
//!
//! A daemon reads the armed point from `TESSERA_FAILPOINT` in its environment and exits
//! there (status 86). A node of an in-process cluster (`crate::cluster`) is armed by its test
//! and *crashes* there instead: the harness is told, takes it off the network and stops its
//! tasks, and the request that reached the point fails as a connection to a dead process
//! does, so nothing after the point runs.

use std::sync::Mutex;
use tessera_core::{Errno, FsError, FsResult};

/// What reaching an armed crash point does.
enum Crash {
    /// End the process.
    Exit,
    /// Tell the in-process cluster, and fail the request.
    Report(Box<dyn Fn(&str) + Send + Sync>),
}

/// The armed failpoint of one node, and what a crash there does.
pub struct Failpoints {
    armed: Mutex<Option<String>>,
    crash: Crash,
}

impl Failpoints {
    /// A daemon's: armed by `TESSERA_FAILPOINT`; a crash ends the process.
    pub fn from_env() -> Failpoints {
        Failpoints {
            armed: Mutex::new(std::env::var("TESSERA_FAILPOINT").ok()),
            crash: Crash::Exit,
        }
    }

    /// An in-process node's: armed by its test; a crash calls `crashed` with the point's
    /// name and fails the request that reached it.
    pub fn reporting(crashed: impl Fn(&str) + Send + Sync + 'static) -> Failpoints {
        Failpoints {
            armed: Mutex::new(None),
            crash: Crash::Report(Box::new(crashed)),
        }
    }

    /// Arms `name` (`None`: disarms).
    pub fn arm(&self, name: Option<&str>) {
        *self.armed.lock().expect("failpoints") = name.map(str::to_string);
    }

    /// Whether the failpoint `name` is armed.
    pub fn is_set(&self, name: &str) -> bool {
        self.armed.lock().expect("failpoints").as_deref() == Some(name)
    }

    /// The node crashes here if `name` is armed: a daemon exits; an in-process node is
    /// reported crashed and the error returned ends the request (`?`), as a dead process
    /// would end it. Disarmed once reached, so that the restarted node runs on.
    pub fn crash_at(&self, name: &str) -> FsResult<()> {
        if !self.is_set(name) {
            return Ok(());
        }
        tracing::error!("failpoint {name}: ending the daemon");
        match &self.crash {
            Crash::Exit => std::process::exit(86),
            Crash::Report(crashed) => {
                self.arm(None);
                crashed(name);
                Err(FsError::new(
                    Errno::HostDown,
                    format!("the node crashed at failpoint {name}"),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn an_in_process_crash_reports_once_and_fails_the_request() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let f = Failpoints::reporting(move |name| log.lock().unwrap().push(name.to_string()));
        assert!(f.crash_at("shard-after-prepare").is_ok(), "not armed yet");
        f.arm(Some("shard-after-prepare"));
        assert!(f.crash_at("home-before-decision").is_ok(), "another point");
        let e = f.crash_at("shard-after-prepare").unwrap_err();
        assert_eq!(e.errno, Errno::HostDown);
        assert!(
            f.crash_at("shard-after-prepare").is_ok(),
            "disarmed once reached"
        );
        assert_eq!(*seen.lock().unwrap(), ["shard-after-prepare"]);
    }
}
