//! A daemon killed between any two steps of an operation on names that spans shards (rename,
//! link, unlink, rmdir) leaves, once it is restarted, the operation done or not done: never a
//! name more than its file's link count, every name leading to the file's bytes, and a retry
//! that converges. Each case kills the daemon of the file's inode (which drives the
//! operation) at one failpoint (`services/names.rs` lists them); the names live on the other
//! daemons, so every step but the inode's own crosses the network.

mod common;

use common::{Inst, eventually_ok};
use std::time::Duration;
use tessera_client::{Client, Errno, FsResult};
use tessera_core::placement::{ino_shard, path_shard};

const NODES: u32 = 3;

/// A fresh user path at the root whose entry lives on `shard`.
fn on_shard(shard: u32, stem: &str) -> String {
    (0..)
        .map(|i| format!("/{stem}{i}"))
        .find(|p| path_shard(p, NODES) == shard)
        .map(|p| format!("/tessera{p}"))
        .expect("some name lands on every shard")
}

/// Two fresh user paths for case `i`, each on its shard: (shard, stem) each.
fn two_names(i: usize, a: (u32, &str), b: (u32, &str)) -> (String, String) {
    (
        on_shard(a.0, &format!("{}{i}-", a.1)),
        on_shard(b.0, &format!("{}{i}-", b.1)),
    )
}

fn internal(p: &str) -> &str {
    p.strip_prefix("/tessera").expect("a Tessera path")
}

fn write(c: &Client, p: &str, bytes: &[u8]) {
    let mut f = c.create(p).unwrap();
    f.write_at(bytes, 0).unwrap();
    f.close().unwrap();
}

fn read(c: &Client, p: &str) -> FsResult<Vec<u8>> {
    let size = c.stat(p)?.size;
    let mut buf = vec![0u8; size as usize];
    c.open_read(p)?.read_exact_at(&mut buf, 0)?;
    Ok(buf)
}

/// A file with `bytes` whose inode is on node `inode` and whose one name is `name`.
fn file_on(c: &Client, inode: u32, name: &str, bytes: &[u8]) -> u64 {
    let made = on_shard(inode, &format!("{}-made", &internal(name)[1..]));
    write(c, &made, bytes);
    if made != name {
        c.rename(&made, name).unwrap();
    }
    let ino = c.stat(name).unwrap().ino;
    assert_eq!(ino_shard(ino), inode);
    ino
}

/// Waits until no daemon holds an operation on names that has not ended.
fn wait_intents_ended(inst: &Inst) {
    inst.wait_none_left("operations on names not ended", |s| s.name_intents);
}

/// Waits until every removed file's bytes were released on every node (in the background,
/// after the removal answered).
fn wait_dropped(inst: &Inst) {
    inst.wait_none_left("removed files not released", |s| s.files_to_drop);
}

/// A file whose one name is `name`, with its inode on node 0 and bytes on node 2 too.
fn one_name_bytes_on_two_nodes(inst: &Inst, name: &str) -> u64 {
    let ino = file_on(&inst.client(1), 0, name, b"one name");
    let mut w = inst
        .client(2)
        .open(name, tessera_client::OpenOptions::new().write(true))
        .unwrap();
    w.write_at(b"ONE", 0).unwrap();
    w.close().unwrap();
    ino
}

/// After a removal of its last name crashed at `point`: the name is gone, and once the
/// release ran, the file's bytes on every node.
fn removed_everywhere(inst: &Inst, name: &str, ino: u64, point: &str) {
    let c = inst.client(2);
    assert_eq!(c.stat(name).unwrap_err().errno, Errno::NoEnt, "{point}");
    wait_dropped(inst);
    for n in 0..NODES {
        assert!(!common::log_holds(inst, n, ino), "{point}: node {n}");
    }
    counts_match_names(&c);
}

/// Every name at the root leads to a file whose count is exactly its names.
fn counts_match_names(c: &Client) {
    let mut names: std::collections::BTreeMap<u64, Vec<String>> = Default::default();
    for e in c.readdir("/tessera").unwrap() {
        names
            .entry(e.ino)
            .or_default()
            .push(format!("/tessera/{}", e.name));
    }
    for (ino, paths) in names {
        let attr = c.stat(&paths[0]).unwrap();
        assert_eq!(
            attr.nlink as usize,
            paths.len(),
            "inode {ino:#x}: names {paths:?}, count {}",
            attr.nlink
        );
    }
}

/// Runs `op` through a client of node `via` while daemon `node` has `failpoint` set; the
/// daemon must end there. Then restarts it and waits until every operation on names ended.
fn crash_during<T: std::fmt::Debug>(
    inst: &Inst,
    node: u32,
    failpoint: &str,
    via: u32,
    op: impl FnOnce(&Client) -> FsResult<T>,
) -> FsResult<T> {
    inst.kill9(node);
    inst.restart_with(node, &[("TESSERA_FAILPOINT", failpoint)]);
    let pid = inst.pid(node);
    let answer = op(&inst.client(via));
    common::wait_gone(
        pid,
        Duration::from_secs(20),
        &format!("(daemon {node}) did not reach failpoint {failpoint}"),
    );
    inst.log_once(node, &format!("failpoint {failpoint}"));
    inst.restart(node);
    wait_intents_ended(inst);
    answer
}

fn host_down<T: std::fmt::Debug>(r: FsResult<T>, what: &str) {
    let e = r.expect_err(what);
    assert!(
        matches!(e.errno, Errno::HostDown | Errno::ConnRefused),
        "{what}: {e}"
    );
}

#[test]
fn a_rename_over_another_file_completes_after_a_crash_at_any_step() {
    let inst = Inst::start(NODES);
    // The renamed file's inode on node 0, its old name on node 1, its new name (and the
    // replaced file's inode) on node 2.
    for (i, point) in [
        "names-rename-start-begun",
        "names-rename-start-answered",
        "names-rename-placed-begun",
        "names-rename-placed-answered",
        "names-rename-moving-begun",
        "names-rename-moving-answered",
        "names-rename-releasing-begun",
        "names-rename-releasing-answered",
    ]
    .into_iter()
    .enumerate()
    {
        let c = inst.client(1);
        let (from, to) = two_names(i, (1, "from"), (2, "to"));
        let ino = file_on(&c, 0, &from, b"the renamed file");
        let replaced = file_on(&inst.client(2), 2, &to, b"the replaced file");
        assert!(common::log_holds(&inst, 2, replaced));
        let answer = crash_during(&inst, 0, point, 1, |c| c.rename(&from, &to));
        host_down(answer, point);
        // Done: the new name leads to the file, the old one is gone, and the replaced
        // file's bytes went with its last name.
        let c = inst.client(1);
        assert_eq!(read(&c, &to).unwrap(), b"the renamed file", "{point}");
        assert_eq!(c.stat(&to).unwrap().ino, ino, "{point}");
        assert_eq!(c.stat(&to).unwrap().nlink, 1, "{point}");
        assert_eq!(c.stat(&from).unwrap_err().errno, Errno::NoEnt, "{point}");
        wait_dropped(&inst);
        assert!(!common::log_holds(&inst, 2, replaced), "{point}");
        counts_match_names(&c);
        // A retry converges: the rename happened.
        assert_eq!(c.rename(&from, &to).unwrap_err().errno, Errno::NoEnt);
        assert_eq!(read(&c, &to).unwrap(), b"the renamed file", "{point}");
    }
}

#[test]
fn a_replaced_file_goes_whole_after_a_crash_of_its_own_daemon() {
    let inst = Inst::start(NODES);
    // The replaced file's inode is on node 2, which is told it lost its name (`lost`).
    for (i, point) in ["names-lost-dropping-begun", "names-lost-dropping-answered"]
        .into_iter()
        .enumerate()
    {
        let c = inst.client(1);
        let (from, to) = two_names(i, (1, "lfrom"), (0, "lto"));
        file_on(&c, 0, &from, b"new contents");
        let replaced = file_on(&inst.client(2), 2, &to, b"old contents");
        // The rename itself is done once the release is recorded; the replaced file's bytes
        // go after it, in the background, where the daemon ends.
        let _ = crash_during(&inst, 2, point, 1, |c| c.rename(&from, &to));
        let c = inst.client(0);
        assert_eq!(read(&c, &to).unwrap(), b"new contents", "{point}");
        wait_dropped(&inst);
        assert!(!common::log_holds(&inst, 2, replaced), "{point}");
        counts_match_names(&c);
    }
}

#[test]
fn a_link_is_made_or_not_after_a_crash_at_any_step() {
    let inst = Inst::start(NODES);
    for (i, point) in ["names-link-start-begun", "names-link-start-answered"]
        .into_iter()
        .enumerate()
    {
        let c = inst.client(1);
        let (a, b) = two_names(i, (1, "la"), (2, "lb"));
        let ino = file_on(&c, 0, &a, b"linked");
        host_down(crash_during(&inst, 0, point, 2, |c| c.link(&a, &b)), point);
        let c = inst.client(1);
        assert_eq!(c.stat(&b).unwrap().ino, ino, "{point}");
        assert_eq!(c.stat(&a).unwrap().nlink, 2, "{point}");
        counts_match_names(&c);
        assert_eq!(c.link(&a, &b).unwrap_err().errno, Errno::Exist);
        // Either name goes without the file.
        c.unlink(&a).unwrap();
        assert_eq!(read(&c, &b).unwrap(), b"linked", "{point}");
        assert_eq!(c.stat(&b).unwrap().nlink, 1, "{point}");
    }
}

#[test]
fn an_unlink_is_done_after_a_crash_at_any_step() {
    let inst = Inst::start(NODES);
    // One name of two: the count goes down, the file stays.
    for (i, point) in ["names-remove-start-begun", "names-remove-start-answered"]
        .into_iter()
        .enumerate()
    {
        let c = inst.client(1);
        let (a, b) = two_names(i, (1, "ua"), (2, "ub"));
        file_on(&c, 0, &a, b"two names");
        c.link(&a, &b).unwrap();
        host_down(crash_during(&inst, 0, point, 2, |c| c.unlink(&a)), point);
        let c = inst.client(2);
        assert_eq!(c.stat(&a).unwrap_err().errno, Errno::NoEnt, "{point}");
        assert_eq!(read(&c, &b).unwrap(), b"two names", "{point}");
        assert_eq!(c.stat(&b).unwrap().nlink, 1, "{point}");
        counts_match_names(&c);
        assert_eq!(c.unlink(&a).unwrap_err().errno, Errno::NoEnt);
    }
    // The last name: the file's bytes go on every node.
    for (i, point) in [
        "names-remove-start-begun",
        "names-remove-start-answered",
        "names-remove-dropping-begun",
        "names-remove-dropping-answered",
    ]
    .into_iter()
    .enumerate()
    {
        let a = on_shard(1, &format!("last{i}-"));
        let ino = one_name_bytes_on_two_nodes(&inst, &a);
        assert!(common::log_holds(&inst, 2, ino));
        host_down(crash_during(&inst, 0, point, 2, |c| c.unlink(&a)), point);
        removed_everywhere(&inst, &a, ino, point);
    }
}

#[test]
fn a_removal_on_one_shard_is_done_after_a_crash_at_any_step() {
    let inst = Inst::start(NODES);
    // Name and inode on node 0: the name, the count and the inode go in one write, and the
    // intent begins at its dropping stage.
    for (i, point) in [
        "names-remove-dropping-begun",
        "names-remove-dropping-answered",
    ]
    .into_iter()
    .enumerate()
    {
        let a = on_shard(0, &format!("here{i}-"));
        let ino = one_name_bytes_on_two_nodes(&inst, &a);
        inst.client(1).flush_path(&a).unwrap();
        let pfs_copy = inst.pfs().join(&internal(&a)[1..]);
        assert!(pfs_copy.exists());
        host_down(crash_during(&inst, 0, point, 2, |c| c.unlink(&a)), point);
        assert!(!pfs_copy.exists(), "{point}: the PFS copy stayed");
        removed_everywhere(&inst, &a, ino, point);
    }
}

#[test]
fn an_rmdir_is_done_after_a_crash_at_any_step() {
    let inst = Inst::start(NODES);
    for (i, point) in [
        "names-remove-start-begun",
        "names-remove-start-answered",
        "names-remove-dropping-begun",
        "names-remove-dropping-answered",
    ]
    .into_iter()
    .enumerate()
    {
        let c = inst.client(1);
        let made = on_shard(0, &format!("dmade{i}-"));
        let d = on_shard(1, &format!("dir{i}-"));
        c.mkdir(&made, 0o755).unwrap();
        c.rename(&made, &d).unwrap();
        assert_eq!(ino_shard(c.stat(&d).unwrap().ino), 0);
        host_down(crash_during(&inst, 0, point, 2, |c| c.rmdir(&d)), point);
        let c = inst.client(2);
        assert_eq!(c.stat(&d).unwrap_err().errno, Errno::NoEnt, "{point}");
        let listed = c.readdir("/tessera").unwrap();
        assert!(
            listed.iter().all(|e| format!("/tessera/{}", e.name) != d),
            "{point}"
        );
        // The name is free again.
        c.mkdir(&d, 0o755).unwrap();
    }
}

/// Whether an error says a daemon was not there to answer (it is being restarted).
fn unavailable(e: &tessera_client::FsError) -> bool {
    matches!(e.errno, Errno::HostDown | Errno::ConnRefused)
}

/// Renames file `i` (now at `names[i]`) to `to` until done, through daemons that are being
/// killed and restarted: a rename left unfinished is found done by a retry.
fn rename_through_kills(c: &Client, from: &str, to: &str) {
    let mut retried = false;
    eventually_ok(
        Duration::from_secs(60),
        &format!("the rename of {from} to {to} converges"),
        || match c.rename(from, to) {
            Ok(()) => Ok(()),
            Err(e) if unavailable(&e) || (retried && e.errno == Errno::NoEnt) => {
                retried = true;
                let gone = c.stat(from).map_err(|e| e.errno) == Err(Errno::NoEnt);
                if gone && c.stat(to).is_ok() {
                    return Ok(());
                }
                Err(e)
            }
            Err(e) => panic!("the rename of {from} to {to}: {e}"),
        },
    );
}

/// The probe that found the defect: a storm of renames across directories on 3 daemons (a
/// renamer on each), with daemons killed (SIGKILL) and restarted in the middle of it.
/// Afterwards every file is under exactly one name, with a count of 1, and holds its bytes;
/// removing the names removes exactly the files.
#[test]
fn a_rename_storm_with_daemons_killed_loses_no_file() {
    const FILES: usize = 30;
    const RENAMES: usize = 450;
    const KILLS: usize = 15;
    let inst = Inst::start(NODES);
    let c = inst.client(0);
    for d in 0..NODES {
        c.mkdir(&format!("/tessera/d{d}"), 0o755).unwrap();
    }
    let names: Vec<std::sync::Mutex<String>> = (0..FILES)
        .map(|i| std::sync::Mutex::new(format!("/tessera/d{}/f{i}", i as u32 % NODES)))
        .collect();
    for (i, n) in names.iter().enumerate() {
        write(&c, &n.lock().unwrap(), format!("file {i}").as_bytes());
    }
    let done = std::sync::atomic::AtomicUsize::new(0);
    let renamers = std::sync::atomic::AtomicUsize::new(NODES as usize);
    std::thread::scope(|s| {
        s.spawn(|| {
            for k in 0..KILLS {
                let at = (k + 1) * RENAMES / (KILLS + 1);
                while done.load(std::sync::atomic::Ordering::SeqCst) < at {
                    if renamers.load(std::sync::atomic::Ordering::SeqCst) == 0 {
                        return;
                    }
                    std::thread::sleep(Duration::from_micros(200));
                }
                let node = k as u32 % NODES;
                inst.kill9(node);
                inst.restart(node);
            }
        });
        // One renamer per daemon, each on its own files (file i belongs to renamer i % 3).
        for r in 0..NODES as usize {
            let (inst, names, done, renamers) = (&inst, &names, &done, &renamers);
            s.spawn(move || {
                struct Ended<'a>(&'a std::sync::atomic::AtomicUsize);
                impl Drop for Ended<'_> {
                    fn drop(&mut self) {
                        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                    }
                }
                let _ended = Ended(renamers);
                let c = inst.client(r as u32);
                for step in (r..RENAMES).step_by(NODES as usize) {
                    let i = (step / NODES as usize * NODES as usize + r) % FILES;
                    let mut name = names[i].lock().unwrap();
                    let to = format!("/tessera/d{}/f{i}-{step}", (step as u32 + 1) % NODES);
                    rename_through_kills(&c, &name, &to);
                    *name = to;
                    done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
            });
        }
    });
    wait_intents_ended(&inst);
    let c = inst.client(2);
    let mut by_file: std::collections::BTreeMap<u64, Vec<String>> = Default::default();
    for d in 0..NODES {
        for e in c.readdir(&format!("/tessera/d{d}")).unwrap() {
            by_file
                .entry(e.ino)
                .or_default()
                .push(format!("/tessera/d{d}/{}", e.name));
        }
    }
    for (ino, paths) in &by_file {
        let count = c.stat(&paths[0]).unwrap().nlink;
        assert_eq!(
            (count, paths.len()),
            (1, 1),
            "inode {ino:#x}: a count of {count} for the names {paths:?}"
        );
    }
    assert_eq!(by_file.len(), FILES, "every file is there");
    let names: Vec<String> = names.into_iter().map(|n| n.into_inner().unwrap()).collect();
    for (i, n) in names.iter().enumerate() {
        assert_eq!(read(&c, n).unwrap(), format!("file {i}").as_bytes(), "{n}");
    }
    for (i, n) in names.iter().enumerate() {
        c.unlink(n).unwrap();
        for m in &names[i + 1..] {
            assert!(c.stat(m).is_ok(), "removing {n} took {m} with it");
        }
    }
}

/// What a crash between two steps of a rename of a build from before intents left: a second
/// entry for a file, its count still one. Planted here through the peer protocol (as the
/// administrative identity: `DentryPut`, the first step of that rename).
fn plant_second_name(inst: &Inst, path: &str, dentry: tessera_proto::Dentry) {
    let cfg = inst.layout.load_config().unwrap();
    let secret = inst.layout.load_secret().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let peers = tessera_daemon::peer::Peers::new(
        inst.layout.clone(),
        secret,
        tessera_proto::peer_auth::ADMIN_NODE,
        &cfg,
    );
    let put = tessera_proto::DentryPut {
        path: internal(path).to_string(),
        dentry,
    };
    let replaced = rt
        .block_on(peers.call(path_shard(internal(path), NODES), put))
        .unwrap();
    assert_eq!(replaced, None);
}

/// The defect's pair (two names on a count of one, where removing one name destroyed the
/// file the other led to) is found by the check of names against counts, run on demand
/// (`tessera check-names`) and at the first start on a state from before intents: the
/// count is raised, and either name then goes without the file.
#[test]
fn names_beyond_a_count_are_found_and_counted() {
    let inst = Inst::start(NODES);
    let c = inst.client(1);
    let mut pairs = Vec::new();
    for i in 0..2 {
        let (a, b) = two_names(i, (1, "pa"), (2, "pb"));
        let ino = file_on(&c, 0, &a, format!("kept {i}").as_bytes());
        let dentry = tessera_proto::Dentry {
            ino,
            kind: tessera_proto::FileKind::File,
        };
        plant_second_name(&inst, &b, dentry);
        assert_eq!(c.stat(&b).unwrap().ino, ino);
        assert_eq!(c.stat(&a).unwrap().nlink, 1, "the defect's state");
        pairs.push((a, b));
    }
    // On demand.
    let out = inst.tessera(&["check-names"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("2 counts raised"), "{said}");
    assert!(
        said.contains(internal(&pairs[0].0)) && said.contains(internal(&pairs[0].1)),
        "{said}"
    );
    for (a, _) in &pairs {
        assert_eq!(c.stat(a).unwrap().nlink, 2);
    }
    let (a, b) = &pairs[0];
    c.unlink(a).unwrap();
    assert_eq!(read(&c, b).unwrap(), b"kept 0");
    assert_eq!(c.stat(b).unwrap().nlink, 1);
    // At the first start on a state from before intents (marked as an upgrade marks it): a
    // new pair is counted without being asked.
    let (a, b) = (on_shard(1, "pc-"), on_shard(2, "pd-"));
    let ino = file_on(&c, 0, &a, b"kept at start");
    let dentry = tessera_proto::Dentry {
        ino,
        kind: tessera_proto::FileKind::File,
    };
    plant_second_name(&inst, &b, dentry);
    inst.kill9(0);
    {
        use tessera_daemon::store::{DbOp, MetaKey, Store, StoreOptions};
        // The killed daemon's threads may still be letting go of its files (its lock on
        // the database) after its main thread is gone: until they have, the store is busy.
        let (store, loaded) = eventually_ok(
            Duration::from_secs(20),
            "the killed daemon's store free to open",
            || {
                let opened = Store::open(
                    &inst.root.join("bb/node-0"),
                    StoreOptions {
                        durability: Default::default(),
                        checkpoint_idle: Duration::from_secs(1),
                        node: 0,
                    },
                );
                match opened {
                    Ok(s) => Ok(s),
                    Err(e) if e.message.contains("already open") => Err(e),
                    Err(e) => panic!("{e}"),
                }
            },
        );
        assert!(!loaded.names_unchecked);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(
            store
                .submit(vec![DbOp::SetMeta(MetaKey::NamesUnchecked, 1)])
                .durable(),
        )
        .unwrap();
        store.close();
    }
    inst.restart(0);
    let log = inst.log_once(0, "names checked against link counts");
    assert!(log.contains("raised to 2"), "{log}");
    assert_eq!(c.stat(&a).unwrap().nlink, 2);
    c.unlink(&b).unwrap();
    assert_eq!(read(&c, &a).unwrap(), b"kept at start");
}
