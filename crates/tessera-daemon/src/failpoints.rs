//! Failpoints for crash and stop tests: `TESSERA_FAILPOINT=<name>` in a daemon's environment
//! makes it end (or hold) at the point of that name, so that a test can check the state a
//! crash there leaves behind.

/// Whether the failpoint `name` is set.
pub fn failpoint_set(name: &str) -> bool {
    std::env::var("TESSERA_FAILPOINT").is_ok_and(|f| f == name)
}

/// Ends the daemon at once if the failpoint `name` is set.
pub fn failpoint(name: &str) {
    if failpoint_set(name) {
        tracing::error!("failpoint {name}: ending the daemon");
        std::process::exit(86);
    }
}
