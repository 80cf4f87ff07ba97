//! What Tessera's tests share, so that each is written once:
//!
//! * [`eventually`], [`eventually_some`] and [`eventually_ok`]: wait until a condition on
//!   observable state holds (a counter, a file, a reply), failing the test after a generous
//!   bound with what was awaited and what was seen last. Tests wait on state, never on sleeps.
//!   [`holds_within`] is the same for clean-up, which goes on either way; [`eventually_busy`]
//!   looks without pausing, for a state that lasts a moment.
//! * [`mpirun`] and [`mpirun_mpich`]: the command lines that start MPI ranks on this machine
//!   (Open MPI as root, oversubscribed; MPICH's launcher beside it).
//! * [`damage_on_device`]: one byte flipped on the device, under the page cache, as a failing
//!   disk would return it.
//!
//! * [`instance::StartLine`]: the `tessera start` line of an instance kept under one scratch
//!   root; [`instance::succeeded`]: run a command that must succeed, showing its output if not.
//!
//! The harness that opens clients and scripted ranks on a running instance stays beside the
//! tests that use it, in `tessera-cli`'s tests: it needs that crate's binary and the client
//! library, and the kit depending on the client would make it a second copy of the log store
//! in the log store's own tests (a dev-dependency cycle).

#![forbid(unsafe_code)]

pub mod instance;

use std::fmt::Debug;
use std::process::Command;
use std::time::{Duration, Instant};

/// The first pause between two looks; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(1);

/// The longest pause between two looks: short beside every bound the tests give.
const MAX_PAUSE: Duration = Duration::from_millis(50);

/// Looks until `look` gives `Ok`, pausing between looks (the pause doubles up to
/// [`MAX_PAUSE`]); gives the last `Err` once `within` has passed. Every wait below is this.
fn poll<T, E>(within: Duration, mut look: impl FnMut() -> Result<T, E>) -> Result<T, E> {
    let deadline = Instant::now() + within;
    let mut pause = FIRST_PAUSE;
    loop {
        match look() {
            Ok(v) => return Ok(v),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => {}
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(MAX_PAUSE);
    }
}

/// Waits until `condition` returns `Some`, and returns what it held. Fails the test after
/// `within`, saying `what` was awaited.
pub fn eventually_some<T>(
    within: Duration,
    what: &str,
    mut condition: impl FnMut() -> Option<T>,
) -> T {
    poll(within, || condition().ok_or(()))
        .unwrap_or_else(|()| panic!("not within {within:?}: {what}"))
}

/// Waits until `condition` holds or `within` has passed, and says which: for clean-up that
/// must not fail a test (a `Drop`), where the caller goes on either way.
pub fn holds_within(within: Duration, mut condition: impl FnMut() -> bool) -> bool {
    poll(within, || condition().then_some(()).ok_or(())).is_ok()
}

/// As [`eventually`], looking again at once (yielding the core) instead of pausing: for a
/// state that lasts only a moment, such as a temporary file a test must catch to kill its
/// writer while it exists.
pub fn eventually_busy(within: Duration, what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !condition() {
        assert!(Instant::now() < deadline, "not within {within:?}: {what}");
        std::thread::yield_now();
    }
}

/// Waits until `condition` holds. Fails the test after `within`, saying `what` was awaited.
pub fn eventually(within: Duration, what: &str, mut condition: impl FnMut() -> bool) {
    eventually_some(within, what, || condition().then_some(()));
}

/// Waits until `attempt` succeeds, and returns its value. Fails the test after `within`,
/// saying `what` was awaited and the last error.
pub fn eventually_ok<T, E: Debug>(
    within: Duration,
    what: &str,
    attempt: impl FnMut() -> Result<T, E>,
) -> T {
    poll(within, attempt)
        .unwrap_or_else(|last| panic!("not within {within:?}: {what} (last error: {last:?})"))
}

/// Open MPI's `mpirun` of `np` ranks on this machine: allowed as root, oversubscribed (CI has
/// 2 cores), not bound to cores (ranks and daemons share them). Add the program and its
/// arguments.
pub fn mpirun(np: u32) -> Command {
    let mut c = Command::new("mpirun");
    c.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .args(["--oversubscribe", "--bind-to", "none", "-np"])
        .arg(np.to_string());
    c
}

/// MPICH's `mpirun.mpich` of `np` ranks on this machine. Add `-genv` pairs, the program and
/// its arguments.
pub fn mpirun_mpich(np: u32) -> Command {
    let mut c = Command::new("mpirun.mpich");
    c.arg("-np").arg(np.to_string());
    c
}

/// `command` under `timeout SECS`: a hung launcher fails the test instead of holding it.
pub fn bounded(secs: u32, command: Command) -> Command {
    let mut c = Command::new("timeout");
    c.arg(secs.to_string()).arg(command.get_program());
    c.args(command.get_args());
    for (k, v) in command.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    if let Some(dir) = command.get_current_dir() {
        c.current_dir(dir);
    }
    c
}

/// Flips byte `at` of the file at `path` on the device: written and synced, then dropped from
/// the page cache, as damage the device returns would be (a read of cached pages is not
/// checked again). Fails where the cache cannot be dropped (tmpfs: the test directory must be
/// on a disk).
pub fn damage_on_device(path: &std::path::Path, at: u64) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap_or_else(|e| panic!("opening {} to damage it: {e}", path.display()));
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at).unwrap();
    f.write_all_at(&[b[0] ^ 1], at).unwrap();
    f.sync_all().unwrap();
    // A page the daemon is reading at that moment is not dropped: advise again until the
    // page has left the cache (never, on tmpfs).
    let page_cached = || {
        rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed).expect("posix_fadvise");
        let mut page = [0u8; 4096];
        rustix::io::preadv2(
            &f,
            &mut [std::io::IoSliceMut::new(&mut page)],
            at & !4095,
            rustix::io::ReadWriteFlags::NOWAIT,
        )
        .is_ok()
    };
    eventually(
        Duration::from_secs(10),
        &format!(
            "{} to leave the page cache (if it never does, the test directory is on tmpfs: run the tests with TMPDIR on a disk)",
            path.display()
        ),
        || !page_cached(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn eventually_returns_once_the_condition_holds() {
        let looks = Cell::new(0);
        let v = eventually_some(Duration::from_secs(5), "the third look", || {
            looks.set(looks.get() + 1);
            (looks.get() == 3).then_some(looks.get() * 10)
        });
        assert_eq!(v, 30);
        assert_eq!(looks.get(), 3);
    }

    #[test]
    fn holds_within_says_whether_the_condition_came_true() {
        let looks = Cell::new(0);
        assert!(holds_within(Duration::from_secs(5), || {
            looks.set(looks.get() + 1);
            looks.get() == 2
        }));
        assert!(!holds_within(Duration::from_millis(10), || false));
    }

    #[test]
    #[should_panic(expected = "not within 20ms: a condition that never holds")]
    fn eventually_fails_after_its_bound_naming_what_it_awaited() {
        eventually(
            Duration::from_millis(20),
            "a condition that never holds",
            || false,
        );
    }

    #[test]
    #[should_panic(expected = "last error: \"still 3\"")]
    fn eventually_ok_names_the_last_error() {
        eventually_ok(Duration::from_millis(20), "zero", || {
            Err::<(), _>("still 3")
        });
    }

    #[test]
    fn a_bounded_command_keeps_its_arguments_and_environment() {
        let mut inner = mpirun(4);
        inner.arg("prog").env_remove("TESSERA_NODE");
        let c = bounded(120, inner);
        assert_eq!(c.get_program(), "timeout");
        let args: Vec<_> = c
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            args,
            [
                "120",
                "mpirun",
                "--oversubscribe",
                "--bind-to",
                "none",
                "-np",
                "4",
                "prog"
            ]
        );
        let envs: Vec<_> = c.get_envs().collect();
        assert!(envs.contains(&("OMPI_ALLOW_RUN_AS_ROOT".as_ref(), Some("1".as_ref()))));
        assert!(envs.contains(&("TESSERA_NODE".as_ref(), None)));
    }

    #[test]
    fn damage_flips_one_byte_on_the_device() {
        let dir = std::env::temp_dir().join(format!("tessera-testkit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("f");
        std::fs::write(&p, vec![7u8; 8192]).unwrap();
        damage_on_device(&p, 5000);
        let back = std::fs::read(&p).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(back[5000], 7 ^ 1);
        assert_eq!(back.iter().filter(|b| **b != 7).count(), 1);
    }
}
