//! Removals that answer before every node released the file's bytes: the name is gone at
//! once everywhere, the bytes go in the background (after a crash too), nothing is leaked,
//! and a file created under the same name right after is never touched by the release.

mod common;

use common::Inst;
use tessera_client::{Client, Errno, OpenOptions};
use tessera_core::placement::ino_shard;

const NODES: u32 = 3;

fn write(c: &Client, path: &str, bytes: &[u8]) {
    let mut f = c
        .open(path, OpenOptions::new().write(true).create(true))
        .unwrap();
    f.write_at(bytes, 0).unwrap();
    f.close().unwrap();
}

fn read(c: &Client, path: &str) -> Vec<u8> {
    let mut f = c.open_read(path).unwrap();
    let mut buf = vec![0u8; 4096];
    let n = f.read_at(&mut buf, 0).unwrap();
    buf.truncate(n);
    buf
}

/// The node whose daemon holds `path`'s inode.
fn inode_node(inst: &Inst, path: &str) -> (u64, u32) {
    let ino = inst.client(0).stat(path).unwrap().ino;
    (ino, ino_shard(ino))
}

/// Holds the releases of daemon `node` (it keeps its list of files to drop) until
/// [`let_go`].
fn hold_releases(inst: &Inst, node: u32) {
    inst.kill9(node);
    inst.restart_with(node, &[("TESSERA_FAILPOINT", "drops-hold")]);
}

/// Kills daemon `node` (with what it holds) and starts it again without the failpoint.
fn let_go(inst: &Inst, node: u32) {
    inst.kill9(node);
    inst.restart(node);
}

fn files_to_drop(inst: &Inst, node: u32) -> u64 {
    inst.client(node).status().unwrap().files_to_drop
}

#[test]
fn a_removal_answers_at_once_and_its_bytes_go_after_a_crash() {
    let inst = Inst::start(NODES);
    let before = inst.bb_used();
    let path = "/tessera/removed";
    write(&inst.client(0), path, &[7u8; 3000]);
    // Bytes of the file on every node.
    for n in 1..NODES {
        let mut f = inst
            .client(n)
            .open(path, OpenOptions::new().write(true))
            .unwrap();
        f.write_at(&[n as u8; 100], 4000 * n as u64).unwrap();
        f.close().unwrap();
    }
    let (ino, shard) = inode_node(&inst, path);
    hold_releases(&inst, shard);
    for n in 0..NODES {
        assert!(common::log_holds(&inst, n, ino), "node {n}");
    }
    inst.client((shard + 1) % NODES).unlink(path).unwrap();
    // The name is gone on every node at once, while the bytes are still listed to go.
    for n in 0..NODES {
        let c = inst.client(n);
        assert_eq!(c.stat(path).unwrap_err().errno, Errno::NoEnt, "node {n}");
        let open = c.open_read(path).map(|_| ());
        assert_eq!(open.unwrap_err().errno, Errno::NoEnt, "node {n}");
    }
    assert_eq!(files_to_drop(&inst, shard), 1);
    assert!(common::log_holds(&inst, 0, ino));
    let status = common::tessera_in(&inst.layout, &["status"]);
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.contains("1 removed files are still being released"),
        "{status}"
    );
    // The list survives kill -9; the restarted daemon finishes it.
    let_go(&inst, shard);
    inst.wait_none_left("removed files not released", |s| s.files_to_drop);
    for n in 0..NODES {
        assert!(!common::log_holds(&inst, n, ino), "node {n}");
    }
    inst.wait_bb_used_at_most(before, "the removed file's logs");
}

#[test]
fn a_new_file_of_the_same_name_is_never_touched_by_the_release() {
    let inst = Inst::start(NODES);
    let path = "/tessera/again";
    let c = inst.client(1);
    write(&c, path, b"the first file, flushed");
    c.flush_path(path).unwrap();
    let pfs_copy = inst.pfs().join("again");
    assert_eq!(
        std::fs::read(&pfs_copy).unwrap(),
        b"the first file, flushed"
    );
    let (old, shard) = inode_node(&inst, path);
    hold_releases(&inst, shard);
    let c = inst.client(1);
    c.unlink(path).unwrap();
    // Its PFS copy went before the removal answered.
    assert!(!pfs_copy.exists());
    write(&c, path, b"the second");
    c.flush_path(path).unwrap();
    let new = c.stat(path).unwrap().ino;
    assert_ne!(new, old);
    assert_eq!(files_to_drop(&inst, shard), 1);
    let_go(&inst, shard);
    inst.wait_none_left("removed files not released", |s| s.files_to_drop);
    for n in 0..NODES {
        assert!(!common::log_holds(&inst, n, old), "node {n}");
        assert_eq!(read(&inst.client(n), path), b"the second", "node {n}");
    }
    assert_eq!(std::fs::read(&pfs_copy).unwrap(), b"the second");
}

#[test]
fn removing_many_files_gives_their_space_back() {
    let inst = Inst::start(NODES);
    let before = inst.bb_used();
    let c = inst.client(2);
    c.mkdir("/tessera/many", 0o755).unwrap();
    let files = 300;
    for i in 0..files {
        write(&c, &format!("/tessera/many/f{i}"), &[i as u8; 3901]);
    }
    assert!(inst.bb_used() >= before + files * 3901);
    for i in 0..files {
        c.unlink(&format!("/tessera/many/f{i}")).unwrap();
    }
    c.rmdir("/tessera/many").unwrap();
    // The writer's log goes with it: a log is deleted once its files went and its writer did.
    drop(c);
    inst.wait_none_left("removed files not released", |s| s.files_to_drop);
    inst.wait_bb_used_at_most(before, "the removed files' logs");
    let logs: Vec<_> = (0..NODES)
        .flat_map(|n| std::fs::read_dir(inst.root.join(format!("bb/node-{n}/logs"))).unwrap())
        .collect();
    assert!(logs.is_empty(), "logs left: {logs:?}");
}
