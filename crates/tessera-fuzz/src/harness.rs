//! Running a target: every input of its committed corpus, then fresh random inputs.
//!
//! Fresh inputs come from proptest, which shrinks a failing input before reporting it. The
//! shrunk input is written into the target's corpus directory as `failed-<hash>`, so the fix
//! is committed together with the input that shows it, and every later run replays it.
//! `TESSERA_FUZZ_CASES` sets how many fresh inputs a run tries (default [`DEFAULT_CASES`]).

use crate::targets;
use proptest::collection::vec;
use proptest::prelude::any;
use proptest::test_runner::{Config, TestError, TestRunner};
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::Once;

/// Fresh inputs per target and run of the test suite, unless `TESSERA_FUZZ_CASES` says.
pub const DEFAULT_CASES: u32 = 10_000;

/// A fuzz target.
pub struct Target {
    pub name: &'static str,
    /// Panics when the input breaks a property.
    pub run: fn(&[u8]),
    /// The structured input a byte string stands for, for reports.
    pub describe: fn(&[u8]) -> String,
    /// Longest fresh input tried.
    pub max_len: usize,
}

/// Every target.
pub const TARGETS: &[Target] = &[
    Target {
        name: "frame",
        run: targets::frame::run,
        describe: targets::frame::describe,
        max_len: 2048,
    },
    Target {
        name: "peer_auth",
        run: targets::peer_auth::run,
        describe: targets::peer_auth::describe,
        max_len: 2048,
    },
    Target {
        name: "wal",
        run: targets::wal::run,
        describe: targets::wal::describe,
        max_len: 2048,
    },
    Target {
        name: "index_records",
        run: targets::index_records::run,
        describe: targets::index_records::describe,
        max_len: 2048,
    },
    Target {
        name: "ring",
        run: targets::ring::run,
        describe: targets::ring::describe,
        max_len: 2048,
    },
    Target {
        name: "log_view",
        run: targets::log_view::run,
        describe: targets::log_view::describe,
        max_len: 1024,
    },
];

/// The target of this name.
pub fn target(name: &str) -> &'static Target {
    TARGETS
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no fuzz target named {name}"))
}

/// Where a target's corpus lives.
pub fn corpus_dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(name)
}

/// Fresh inputs per run: `TESSERA_FUZZ_CASES`, or [`DEFAULT_CASES`].
pub fn cases() -> u32 {
    match std::env::var("TESSERA_FUZZ_CASES") {
        Ok(s) => s
            .parse()
            .unwrap_or_else(|_| panic!("TESSERA_FUZZ_CASES={s:?} is not a number of cases")),
        Err(_) => DEFAULT_CASES,
    }
}

thread_local! {
    /// Whether panics on this thread are expected (shrinking) and not to be printed.
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

/// Silences the panic messages of a thread that is fuzzing: proptest provokes hundreds while
/// it shrinks, and the harness reports the one that matters.
fn quiet_panics_while_fuzzing() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(Cell::get) {
                previous(info);
            }
        }));
    });
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic without a message".into())
}

/// Runs `t` on `input`; the panic message if it broke a property.
pub fn check(t: &Target, input: &[u8]) -> Result<(), String> {
    quiet_panics_while_fuzzing();
    QUIET.with(|q| q.set(true));
    let outcome = catch_unwind(AssertUnwindSafe(|| (t.run)(input)));
    QUIET.with(|q| q.set(false));
    outcome.map_err(|p| panic_message(&*p))
}

/// Runs every input of the target's corpus; returns how many there were. Panics naming each
/// input that breaks a property.
pub fn replay(t: &Target) -> usize {
    let dir = corpus_dir(t.name);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading the corpus {}: {e}", dir.display()))
        .map(|e| e.expect("a corpus entry").path())
        .collect();
    files.sort();
    let failures: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let input = std::fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            check(t, &input)
                .err()
                .map(|why| format!("{}: {why}\n{}", f.display(), (t.describe)(&input)))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} corpus input(s) of {} fail:\n{}",
        failures.len(),
        t.name,
        failures.join("\n")
    );
    files.len()
}

/// Runs `cases` fresh random inputs. A failing input is shrunk, saved into the corpus and
/// reported.
pub fn fresh(t: &Target, cases: u32) {
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let outcome = runner.run(&vec(any::<u8>(), 0..t.max_len), |input| {
        check(t, &input).map_err(proptest::test_runner::TestCaseError::fail)
    });
    match outcome {
        Ok(()) => {}
        Err(TestError::Fail(why, input)) => {
            let saved = save_failure(t, &input);
            panic!(
                "fuzz target {} fails on {} ({} bytes, saved as {}): {why}\nthe input stands for {}",
                t.name,
                hex(&input),
                input.len(),
                saved.display(),
                (t.describe)(&input)
            );
        }
        Err(e) => panic!("fuzz target {}: {e}", t.name),
    }
}

/// Writes a failing input into the target's corpus, named by its hash.
fn save_failure(t: &Target, input: &[u8]) -> PathBuf {
    let hash = blake3::hash(input).to_hex();
    let path = corpus_dir(t.name).join(format!("failed-{}", &hash[..16]));
    if let Err(e) = std::fs::write(&path, input) {
        eprintln!(
            "could not save the failing input as {}: {e}",
            path.display()
        );
    }
    path
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
