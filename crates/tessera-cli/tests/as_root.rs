//! What another user can do to an instance, tried as another user: these tests need root
//! (to switch uid and to give files to another owner), so they are ignored otherwise, and
//! `scripts/test.sh` runs them when it runs as root.

mod common;

use common::{Inst, TESSERA, scratch};
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;

const NOBODY: u32 = 65534;

fn chown(p: &Path, uid: u32) {
    std::os::unix::fs::lchown(p, Some(uid), Some(uid)).unwrap();
}

/// A copy of the `tessera` binary that another user can execute (the build directory may not
/// be reachable by them).
fn reachable_tessera(dir: &Path) -> PathBuf {
    let exe = dir.join("tessera");
    std::fs::copy(TESSERA, &exe).unwrap();
    for d in [dir, &exe] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    exe
}

fn run_as_nobody(exe: &Path, inst: &Inst, args: &[&str]) -> std::process::Output {
    use std::os::unix::process::CommandExt;
    Command::new(exe)
        .arg("--instance")
        .arg(&inst.layout.dir)
        .args(args)
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .expect("run as nobody")
}

#[test]
#[ignore = "needs root: switches to another uid"]
fn another_user_is_refused() {
    let inst = Inst::start(1);
    let exe = reachable_tessera(&scratch("as-root-exe"));
    // 1. The instance directory is private: the other user cannot even read its config.
    let out = run_as_nobody(&exe, &inst, &["stat", "/tessera"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("EACCES"), "{err}");
    // 2. Even if the directories are opened up by mistake, the client library refuses an
    //    instance directory that is not its user's own...
    for d in [
        &inst.root,
        &inst.layout.dir,
        &inst.root.join("bb"),
        &inst.root.join("bb/node-0"),
    ] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::set_permissions(inst.socket(0), std::fs::Permissions::from_mode(0o777)).unwrap();
    for f in [inst.layout.config_path(), inst.layout.hosts_path()] {
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let out = run_as_nobody(&exe, &inst, &["stat", "/tessera"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "another uid was served");
    assert!(
        err.contains("EACCES") && err.contains("belongs to uid 0"),
        "{err}"
    );
    // ...and the daemon checks the peer's uid of a process that speaks the protocol without
    // the library: it answers the connection with its refusal.
    use std::os::unix::process::CommandExt;
    let out = Command::new("python3")
        .args([
            "-c",
            "import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(10); sys.stdout.buffer.write(s.recv(65536))",
        ])
        .arg(inst.socket(0))
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .expect("python3");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("belongs to uid 0") && said.contains("uid 65534 must start its own"),
        "{said} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The owner is still served.
    assert!(inst.tessera(&["stat", "/tessera"]).status.success());
}

/// Another user who can write in a shared burst-buffer root plants the node directory, with
/// a state log that links to a file of the victim's: the daemon refuses to start and touches
/// nothing.
#[test]
#[ignore = "needs root: gives a directory to another uid"]
fn a_node_directory_planted_by_another_user_is_refused() {
    let shared = scratch("shared-bb");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let precious = scratch("precious").join("file");
    std::fs::write(&precious, b"precious bytes").unwrap();
    let planted = shared.join("node-0");
    std::fs::create_dir(&planted).unwrap();
    std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o777)).unwrap();
    symlink(&precious, planted.join("meta.wal")).unwrap();
    chown(&planted.join("meta.wal"), NOBODY);
    chown(&planted, NOBODY);

    let root = tessera_cli::instance::temp_dir("tessera-test").unwrap();
    let out = tessera_testkit::instance::StartLine::new(TESSERA, &root)
        .daemons(1)
        .bb_root(&shared)
        .command()
        .output()
        .unwrap();
    let log = std::fs::read_to_string(root.join("inst/logs/node-0.log")).unwrap_or_default();
    let said = format!("{}{log}", String::from_utf8_lossy(&out.stderr));
    let _ = Command::new(TESSERA)
        .arg("--instance")
        .arg(root.join("inst"))
        .arg("stop")
        .output();
    assert!(
        !out.status.success(),
        "started on a planted node directory: {said}"
    );
    assert!(
        said.contains("node-0") && said.contains(&format!("belongs to uid {NOBODY}")),
        "{said}"
    );
    assert_eq!(std::fs::read(&precious).unwrap(), b"precious bytes");
    let _ = std::fs::remove_dir_all(&root);
}

/// A log file that belongs to another user is not read (it could have been planted to feed
/// readers forged bytes).
#[test]
#[ignore = "needs root: gives a file to another uid"]
fn logs_of_another_user_are_not_read() {
    let inst = Inst::start(2);
    let c = inst.client(0);
    let mut f = c.create("/tessera/f").unwrap();
    f.write_at(b"genuine", 0).unwrap();
    f.close().unwrap();
    let dir = inst.root.join("bb/node-0/logs");
    let client = c.identity().1;
    for ext in ["data", "index"] {
        chown(&dir.join(format!("{client}.{ext}")), NOBODY);
    }
    // After a restart the daemon of node 0 opens the logs again, for a reader on node 1.
    inst.kill9(0);
    inst.restart(0);
    let mut r = inst.client(1).open_read("/tessera/f").unwrap();
    let mut buf = [0u8; 7];
    let e = r.read_exact_at(&mut buf, 0).unwrap_err();
    assert!(
        e.message.contains(&format!("belongs to uid {NOBODY}")),
        "{e}"
    );
}

/// Another user makes the instance directory first, in a directory everyone can write (as
/// `/tmp`), with a configuration and a secret of their choosing (their burst-buffer root and
/// PFS directory; a secret they know, with which they could act as a peer). Every command of
/// the victim refuses it, naming its owner, and no daemon starts on it.
#[test]
#[ignore = "needs root: gives a directory to another uid"]
fn an_instance_directory_another_user_made_first_is_refused() {
    let shared = scratch("squatted-tmp");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let layout = common::fresh_instance(&shared);
    for p in [
        layout.secret_path(),
        layout.config_path(),
        layout.dir.clone(),
    ] {
        chown(&p, NOBODY);
    }
    for args in [
        &["start", "--daemons", "1"][..],
        &["status"],
        &["stop"],
        &["stat", "/tessera"],
        &["serve", "--node", "0"],
    ] {
        let out = common::tessera_in(&layout, args);
        let err = String::from_utf8_lossy(&out.stderr);
        let _ = common::tessera_in(&layout, &["stop"]);
        assert!(!out.status.success(), "`tessera {args:?}` used it: {err}");
        assert!(
            err.contains(&layout.dir.display().to_string())
                && err.contains(&format!("belongs to uid {NOBODY}"))
                && err.contains("EACCES"),
            "`tessera {args:?}`: {err}"
        );
    }
    assert!(
        !layout.hosts_path().exists(),
        "a daemon registered on the squatted directory"
    );
}

/// Files of the victim's own instance directory that another user owns (made while the
/// directory was open to them, say) are refused the same way, whichever file it is.
#[test]
#[ignore = "needs root: gives files to another uid"]
fn files_of_another_user_in_an_instance_directory_are_refused() {
    let root = scratch("foreign-files");
    type PathOf = fn(&tessera_proto::InstanceLayout) -> PathBuf;
    let named: [(&str, PathOf); 5] = [
        ("instance.toml", |l| l.config_path()),
        ("secret", |l| l.secret_path()),
        ("hosts.toml", |l| l.hosts_path()),
        ("logs/", |l| l.logs_dir()),
        ("logs/node-0.log", |l| l.log_file(0)),
    ];
    for (i, (what, path)) in named.into_iter().enumerate() {
        let layout = common::fresh_instance(&root.join(format!("case-{i}")));
        let p = path(&layout);
        match what {
            "hosts.toml" => std::fs::write(&p, "version = 1\n").unwrap(),
            "logs/" => std::fs::create_dir(&p).unwrap(),
            "logs/node-0.log" => {
                std::fs::create_dir(layout.logs_dir()).unwrap();
                std::fs::write(&p, b"").unwrap();
            }
            _ => {}
        }
        chown(&p, NOBODY);
        let out = common::tessera_in(&layout, &["start"]);
        let err = String::from_utf8_lossy(&out.stderr);
        let _ = common::tessera_in(&layout, &["stop"]);
        assert!(!out.status.success(), "{what} of another user was used");
        assert!(
            err.contains(&p.display().to_string())
                && err.contains(&format!("belongs to uid {NOBODY}")),
            "{what}: {err}"
        );
        assert_eq!(std::fs::metadata(&p).unwrap().uid(), NOBODY);
    }
}
