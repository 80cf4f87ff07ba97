//! The C API as a C programmer meets it: `scripts/install.sh` installs libtessera.so,
//! tessera.h and tessera.pc into a prefix; the example (crates/tessera-capi/examples/example.c)
//! and the test program (tests/c/capi.c) are compiled with `cc $(pkg-config --cflags --libs
//! tessera)` and run against 3 daemons: bad inputs, N-1 writes from 4 processes under each
//! consistency model read back by another process before the writers close, and locks.

mod common;

use common::{Inst, TESSERA, scratch};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// Installs into a fresh prefix from this build's target directory; returns the prefix.
fn install() -> PathBuf {
    let profile_dir = Path::new(TESSERA).parent().expect("target/<profile>");
    let profile = profile_dir.file_name().unwrap().to_str().unwrap();
    let target = profile_dir.parent().expect("target dir");
    let prefix = scratch("capi-prefix");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new("bash")
        .arg(root.join("scripts/install.sh"))
        .arg("--prefix")
        .arg(&prefix)
        .args(["--profile", profile, "--no-build"])
        .env("CARGO_TARGET_DIR", target)
        .output()
        .expect("bash");
    assert!(
        out.status.success(),
        "install.sh failed (build libtessera with `cargo build -p tessera-capi`): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for f in [
        "include/tessera.h",
        "lib/libtessera.so",
        "lib/libtessera.so.0",
        "lib/pkgconfig/tessera.pc",
        "lib/libtessera_preload.so",
        "bin/tessera",
    ] {
        assert!(prefix.join(f).exists(), "{f} was not installed");
    }
    prefix
}

/// Compiles `src` with the flags pkg-config gives for the installed tessera.pc.
fn compile(prefix: &Path, src: &Path, name: &str) -> PathBuf {
    let pc = Command::new("pkg-config")
        .args(["--cflags", "--libs", "tessera"])
        .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig"))
        .output()
        .expect("pkg-config is missing: scripts/test.sh installs it");
    assert!(
        pc.status.success(),
        "{}",
        String::from_utf8_lossy(&pc.stderr)
    );
    let flags = String::from_utf8(pc.stdout).unwrap();
    let exe = prefix.join(name);
    let out = Command::new("cc")
        .args(["-O2", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&exe)
        .arg(src)
        .args(flags.split_whitespace())
        .output()
        .expect("cc");
    assert!(
        out.status.success(),
        "cc {}: {}",
        src.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

fn run(inst: &Inst, node: u32, exe: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(exe);
    c.args(args)
        .env("TESSERA_INSTANCE", &inst.layout.dir)
        .env("TESSERA_NODE", node.to_string());
    c
}

fn ok(mut c: Command) -> String {
    let out = tessera_testkit::instance::succeeded(c.stdin(Stdio::null()));
    String::from_utf8(out.stdout).unwrap()
}

/// Starts a long-running process and waits for its first line on stdout.
fn start(mut c: Command, expect: &str) -> (Child, BufReader<std::process::ChildStdout>) {
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), expect, "{c:?}");
    (child, out)
}

/// Whether the process printed more within `ms` milliseconds.
fn has_output(out: &BufReader<std::process::ChildStdout>, ms: i32) -> bool {
    use std::os::fd::AsRawFd;
    if !out.buffer().is_empty() {
        return true;
    }
    let mut pfd = libc::pollfd {
        fd: out.get_ref().as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call.
    unsafe { libc::poll(&mut pfd, 1, ms) > 0 }
}

fn finish(mut child: Child) {
    drop(child.stdin.take());
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
}

#[test]
fn c_programs_built_with_pkg_config() {
    let prefix = install();
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let example = compile(
        &prefix,
        &here.join("../tessera-capi/examples/example.c"),
        "example",
    );
    let capi = compile(&prefix, &here.join("tests/c/capi.c"), "capi");
    let inst = Inst::start(3);

    // The example: strided writes, commit, query, read back, flush, a helpful error.
    let text = ok(run(&inst, 1, &example, &["/tessera/example"]));
    assert!(text.contains("extent [0, 262144) on node 1"), "{text}");
    assert!(text.contains("size 262144, model session"), "{text}");
    assert!(text.contains("verified 262144 bytes"), "{text}");
    assert!(text.contains("flushed 262144 bytes"), "{text}");
    assert!(
        text.contains(
            "expected error: /tessera/no/such/dir/file: no such file or directory (ENOENT)"
        ),
        "{text}"
    );
    let flushed = std::fs::read(inst.pfs().join("example/ckpt")).unwrap();
    assert_eq!(flushed.len(), 262144);
    assert!(
        flushed
            .iter()
            .enumerate()
            .all(|(i, &b)| b == ((i as u64 * 31 + 11) % 253) as u8),
        "the flushed file differs from what the example wrote"
    );

    // Bad inputs.
    inst.client(0).mkdir("/tessera/errs", 0o755).unwrap();
    let text = ok(run(&inst, 2, &capi, &["errors", "/tessera/errs"]));
    assert_eq!(text.trim(), "errors: ok");

    // N-1 from 4 processes on 3 daemons; another process reads every byte while the writers
    // still hold the file open, so only each model's own publication call can have shown it.
    for model in ["posix", "commit", "session", "mpiio"] {
        let file = format!("/tessera/n1-{model}");
        let writers: Vec<_> = (0..4u32)
            .map(|r| {
                let c = run(
                    &inst,
                    r % 3,
                    &capi,
                    &["write", &file, &r.to_string(), "4", model],
                );
                start(c, "written").0
            })
            .collect();
        let text = ok(run(&inst, 2, &capi, &["read", &file, "4", model]));
        assert_eq!(text.trim(), format!("verified {} bytes", 4 * 10007 * 12));
        writers.into_iter().for_each(finish);
    }

    // Locks: a holder, a refused non-blocking request, a blocking one that waits.
    let (holder, _) = start(run(&inst, 0, &capi, &["hold", "/tessera/lk"]), "locked");
    let pid = holder.id().to_string();
    let (waiter, mut out) = start(
        run(&inst, 2, &capi, &["trylock", "/tessera/lk", &pid]),
        "refused",
    );
    assert!(
        !has_output(&out, 500),
        "the blocking lock did not wait for the holder"
    );
    finish(holder);
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "waited");
    finish(waiter);
    let _ = std::fs::remove_dir_all(&prefix);
}
