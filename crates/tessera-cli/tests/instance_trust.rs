//! The instance directory is its user's own: a directory or file there that others can write,
//! or a link planted in place of one, is refused by every command before anything in it is
//! used, with an error naming the path and what to do. (The cases that need another uid are in
//! `as_root.rs`.)

mod common;

use common::{fresh_instance, tessera_in};
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use tessera_proto::{InstanceLayout, instance_dir};

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Each way of making an instance directory untrustworthy, and what the refusal says.
type Tamper = fn(&InstanceLayout, &Path);

/// (what, how, what the refusal says, the path it names).
type Case = (
    &'static str,
    Tamper,
    &'static str,
    fn(&InstanceLayout) -> PathBuf,
);

fn cases() -> Vec<Case> {
    vec![
        (
            "group-writable directory",
            |l, _| chmod(&l.dir, 0o770),
            "can be written by others",
            |l| l.dir.clone(),
        ),
        (
            "world-writable instance.toml",
            |l, _| chmod(&l.config_path(), 0o666),
            "can be written by others",
            InstanceLayout::config_path,
        ),
        (
            "secret readable by the group",
            |l, _| chmod(&l.secret_path(), 0o640),
            "read or written by others",
            InstanceLayout::secret_path,
        ),
        (
            "instance.toml a link to a configuration elsewhere",
            |l, elsewhere| {
                let planted = elsewhere.join("planted.toml");
                std::fs::copy(l.config_path(), &planted).unwrap();
                std::fs::remove_file(l.config_path()).unwrap();
                symlink(&planted, l.config_path()).unwrap();
            },
            "symbolic link",
            InstanceLayout::config_path,
        ),
        (
            "secret a link to a secret elsewhere",
            |l, elsewhere| {
                let planted = elsewhere.join("known-secret");
                std::fs::write(&planted, "cd".repeat(32)).unwrap();
                chmod(&planted, 0o600);
                std::fs::remove_file(l.secret_path()).unwrap();
                symlink(&planted, l.secret_path()).unwrap();
            },
            "symbolic link",
            InstanceLayout::secret_path,
        ),
        (
            "hosts.toml a link",
            |l, elsewhere| symlink(elsewhere.join("hosts.toml"), l.hosts_path()).unwrap(),
            "symbolic link",
            InstanceLayout::hosts_path,
        ),
        (
            "logs/ writable by everyone",
            |l, _| {
                std::fs::create_dir(l.logs_dir()).unwrap();
                chmod(&l.logs_dir(), 0o777);
            },
            "can be written by others",
            InstanceLayout::logs_dir,
        ),
    ]
}

#[test]
fn an_untrustworthy_instance_directory_is_refused_by_every_command() {
    let root = tessera_cli::instance::temp_dir("tessera-trust").unwrap();
    // The control: untouched, the same instance starts and stops.
    let good = fresh_instance(&root.join("good"));
    let out = tessera_in(&good, &["start"]);
    let _ = tessera_in(&good, &["stop"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (i, (what, tamper, says, path)) in cases().into_iter().enumerate() {
        let dir = root.join(format!("case-{i}"));
        let layout = fresh_instance(&dir);
        tamper(&layout, &dir);
        for cmd in [
            &["start"][..],
            &["status"],
            &["stop"],
            &["stat", "/tessera"],
        ] {
            let out = tessera_in(&layout, cmd);
            let err = String::from_utf8_lossy(&out.stderr);
            let _ = tessera_in(&good, &["stop"]);
            assert!(!out.status.success(), "{what}: `tessera {cmd:?}` went on");
            let named = path(&layout).display().to_string();
            assert!(
                err.contains(&named) && err.contains(says) && err.contains("EACCES"),
                "{what}: `tessera {cmd:?}` said: {err}"
            );
        }
        // No daemon came up: it never registered.
        let hosts = std::fs::read_to_string(layout.hosts_path()).unwrap_or_default();
        assert!(!hosts.contains("[[node]]"), "{what}: {hosts}");
    }
    let _ = std::fs::remove_dir_all(&root);
}

/// A link planted where a daemon's log goes: the daemon's output would be appended to the
/// file it leads to (the user's `~/.bashrc`). The start is refused and the file untouched.
#[test]
fn a_daemon_log_never_follows_a_planted_link() {
    let root = tessera_cli::instance::temp_dir("tessera-trust").unwrap();
    let layout = fresh_instance(&root);
    let bashrc = root.join("bashrc");
    std::fs::write(&bashrc, b"alias ll='ls -l'\n").unwrap();
    instance_dir::make_dir(&layout.logs_dir()).unwrap();
    symlink(&bashrc, layout.log_file(0)).unwrap();
    let out = tessera_in(&layout, &["start"]);
    let _ = tessera_in(&layout, &["stop"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "started through a planted log link");
    assert!(
        err.contains(&layout.log_file(0).display().to_string()) && err.contains("symbolic link"),
        "{err}"
    );
    assert_eq!(std::fs::read(&bashrc).unwrap(), b"alias ll='ls -l'\n");
    // The daemon run by hand (`serve --log`) refuses it too.
    let out = tessera_in(&layout, &["serve", "--node", "0", "--log"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("symbolic link"));
    assert_eq!(std::fs::read(&bashrc).unwrap(), b"alias ll='ls -l'\n");
    let _ = std::fs::remove_dir_all(&root);
}
