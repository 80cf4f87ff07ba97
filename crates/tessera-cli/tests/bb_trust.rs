//! A burst-buffer root shared with other users is not trusted: node directories are private
//! (0700, ours), every log and state file is created `O_EXCL | O_NOFOLLOW` and reopened with
//! `O_NOFOLLOW` and an owner and type check, so a planted link never redirects a user's data
//! or truncates a file at daemon start. (Planting by another uid needs root: see as_root.rs.)

mod common;

use common::{Inst, scratch};
use std::os::unix::fs::{PermissionsExt, symlink};
use tessera_client::OpenOptions;

fn mode(p: &std::path::Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

#[test]
fn burst_buffer_files_are_private() {
    let inst = Inst::start(1);
    let c = inst.client(0);
    let mut f = c.create("/tessera/f").unwrap();
    f.write_at(b"data", 0).unwrap();
    f.commit().unwrap();
    let node = inst.root.join("bb/node-0");
    let logs = node.join("logs");
    let client = c.identity().1;
    assert_eq!(mode(&node), 0o700, "node directory");
    assert_eq!(mode(&logs), 0o700, "logs directory");
    for kind in ["data", "index", "journal", "sums"] {
        let file = format!("{client}.{kind}");
        assert_eq!(mode(&logs.join(&file)), 0o600, "{file}");
    }
    for file in ["meta.wal", "meta.redb"] {
        assert_eq!(mode(&node.join(file)), 0o600, "{file}");
    }
}

#[test]
fn a_planted_log_link_is_not_written_through() {
    let inst = Inst::start(1);
    let outside = scratch("bb-outside");
    std::fs::write(outside.join("target"), b"not yours").unwrap();
    let c = inst.client(0);
    let mut f = c
        .open(
            "/tessera/victim",
            OpenOptions::new().read(true).write(true).create(true),
        )
        .unwrap();
    let dir = inst.root.join("bb/node-0/logs");
    std::fs::create_dir_all(&dir).unwrap();
    let client = c.identity().1;
    symlink(outside.join("target"), dir.join(format!("{client}.data"))).unwrap();
    let err = f
        .write_at(b"a user's data", 0)
        .expect_err("a write through a planted data-log link");
    assert!(
        matches!(
            err.errno,
            tessera_client::Errno::Loop | tessera_client::Errno::Access
        ),
        "{err}"
    );
    assert!(err.message.contains(".data"), "{err}");
    assert_eq!(std::fs::read(outside.join("target")).unwrap(), b"not yours");
}

#[test]
fn a_planted_state_log_link_stops_the_daemon_before_it_touches_anything() {
    let inst = Inst::start(1);
    inst.client(0).mkdir("/tessera/d", 0o755).unwrap();
    assert!(inst.tessera(&["stop"]).status.success());
    let outside = scratch("bb-outside-wal");
    std::fs::write(outside.join("precious"), b"precious bytes").unwrap();
    let wal = inst.root.join("bb/node-0/meta.wal");
    let _ = std::fs::remove_file(&wal);
    symlink(outside.join("precious"), &wal).unwrap();
    let out = inst.tessera(&["start", "--node", "0"]);
    assert!(
        !out.status.success(),
        "the daemon started on a planted meta.wal link"
    );
    let log = std::fs::read_to_string(inst.layout.log_file(0)).unwrap_or_default();
    let said = format!("{}{log}", String::from_utf8_lossy(&out.stderr));
    assert!(said.contains("meta.wal"), "{said}");
    assert_eq!(
        std::fs::read(outside.join("precious")).unwrap(),
        b"precious bytes"
    );
}
