//! Transactions across daemons (D2T): what members publish is pending, seen by them at
//! once and by everyone else only when the transaction commits, all of it at once; an abort,
//! or the end of every member process, leaves nothing; a reader racing commits never sees a
//! data set half old and half new, while the same checker does see a mix when the writers
//! publish without a transaction.

mod common;

use common::{Inst, eventually, eventually_ok};
use std::time::{Duration, Instant};
use tessera_cli::script::{Cmd, pattern_byte};
use tessera_client::{Client, Errno, FsResult, Model, OpenOptions};

/// Four stripes per node in a 32 KiB file: a data set spread over both daemons' shards.
const STRIPE: u64 = 4096;

fn start(extra: &[&str]) -> Inst {
    let mut args = vec!["--set", "stripe_size=4096"];
    args.extend_from_slice(extra);
    Inst::start_with(2, &args)
}

fn pattern(id: u32, off: u64, len: u64) -> Vec<u8> {
    (off..off + len).map(|o| pattern_byte(id, o)).collect()
}

/// A transaction opened at `home`'s daemon, with `members` joined.
fn open_joined(home: &Client, members: &[&Client]) -> u64 {
    let txn = home.txn_open().unwrap();
    for m in members {
        m.txn_join(Some(txn)).unwrap();
    }
    txn
}

/// Process `r` joins `txn` and writes pattern 2 over `[off, off + len)` of `path`, opened under
/// the commit model; nothing is published yet.
fn member_writes(r: &mut common::Rank, txn: u64, path: &str, off: u64, len: u64) {
    r.ok(&Cmd::TxnJoin { txn: Some(txn) });
    r.open(path, Model::Commit, true);
    r.ok(&Cmd::Write { off, len, id: 2 });
}

/// Writes pattern `id` over `[off, off + len)` of `path` and publishes it (close).
fn write(c: &Client, path: &str, id: u32, off: u64, len: u64) {
    let mut f = c
        .open(
            path,
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .model(Model::Commit),
        )
        .unwrap();
    f.write_at(&pattern(id, off, len), off).unwrap();
    f.close().unwrap();
}

/// The whole file as `c` sees it (a POSIX read: asked of the daemons each time).
fn read_all(c: &Client, path: &str) -> Vec<u8> {
    read_upto(c, path, 64 << 10)
}

/// The file's first `most` bytes as `c` sees them. A read of more than 64 stripes is answered
/// from every daemon's whole-file pages, a smaller one stripe by stripe.
fn read_upto(c: &Client, path: &str, most: usize) -> Vec<u8> {
    let mut f = c
        .open(path, OpenOptions::new().read(true).model(Model::Posix))
        .unwrap();
    let mut out = vec![0u8; most];
    let n = f.read_at(&mut out, 0).unwrap();
    out.truncate(n);
    out
}

/// Which pattern each `STRIPE`-sized block holds (`None`: neither of `ids`).
fn versions(bytes: &[u8], ids: &[u32]) -> Vec<Option<u32>> {
    bytes
        .chunks(STRIPE as usize)
        .enumerate()
        .map(|(i, block)| {
            let off = i as u64 * STRIPE;
            ids.iter()
                .copied()
                .find(|id| block == pattern(*id, off, block.len() as u64).as_slice())
        })
        .collect()
}

#[test]
fn members_see_their_writes_at_once_and_others_only_when_it_commits() {
    let inst = start(&[]);
    let (a, b, reader) = (inst.client(0), inst.client(1), inst.client(1));
    let path = "/tessera/ds";
    write(&reader, path, 1, 0, 8 * STRIPE);
    // An outsider that cached the size before the transaction began.
    let watcher = inst.client(0);
    watcher.stat(path).unwrap();
    assert_eq!(watcher.stat(path).unwrap().size, 8 * STRIPE);
    assert_eq!(watcher.stats().attr_hits, 1, "the size was not cached");
    let txn = open_joined(&a, &[&a, &b]);
    // Rank a overwrites the first half; rank b the second half and beyond (the file grows).
    write(&a, path, 2, 0, 4 * STRIPE);
    write(&b, path, 2, 4 * STRIPE, 8 * STRIPE);
    let old = read_all(&reader, path);
    assert_eq!(
        old.len() as u64,
        8 * STRIPE,
        "the size grew before the commit"
    );
    assert!(
        versions(&old, &[1, 2]).iter().all(|v| *v == Some(1)),
        "an outsider saw pending bytes: {:?}",
        versions(&old, &[1, 2])
    );
    assert_eq!(reader.stat(path).unwrap().size, 8 * STRIPE);
    // Members see the whole transaction: their own writes and each other's.
    for member in [&a, &b] {
        let seen = read_all(member, path);
        assert_eq!(seen.len() as u64, 12 * STRIPE);
        assert!(versions(&seen, &[1, 2]).iter().all(|v| *v == Some(2)));
        assert_eq!(member.stat(path).unwrap().size, 12 * STRIPE);
    }
    assert_eq!(watcher.stat(path).unwrap().size, 8 * STRIPE);
    a.txn_decide(txn, true, Vec::new()).unwrap();
    // The commit is acknowledged: no cached copy from before it answers.
    assert_eq!(watcher.stat(path).unwrap().size, 12 * STRIPE);
    assert_eq!(reader.stat(path).unwrap().size, 12 * STRIPE);
    let new = read_all(&reader, path);
    assert_eq!(new.len() as u64, 12 * STRIPE);
    assert!(
        versions(&new, &[1, 2]).iter().all(|v| *v == Some(2)),
        "{:?}",
        versions(&new, &[1, 2])
    );
    // Decided: a commit asked again answers the same; the transaction takes no new members
    // and no more writes.
    b.txn_decide(txn, true, Vec::new()).unwrap();
    let e = inst.client(0).txn_join(Some(txn)).unwrap_err();
    assert_eq!(e.errno, Errno::Inval, "{e}");
    a.txn_join(None).unwrap();
    write(&a, path, 3, 0, STRIPE);
    assert_eq!(versions(&read_all(&reader, path), &[3])[0], Some(3));
    let e = write_err(&b, path);
    assert!(e.message.contains("already decided"), "{e}");
    let e = b.txn_join(None).unwrap_err();
    assert_eq!(e.errno, Errno::Busy, "{e}");
}

/// A write under a decided transaction: its publication is refused.
fn write_err(c: &Client, path: &str) -> tessera_client::FsError {
    let mut f = c
        .open(
            path,
            OpenOptions::new()
                .read(true)
                .write(true)
                .model(Model::Commit),
        )
        .unwrap();
    f.write_at(b"late", 0).unwrap();
    f.close().unwrap_err()
}

#[test]
fn an_abort_leaves_nothing_and_names_why() {
    let inst = start(&[]);
    let (a, b, reader) = (inst.client(0), inst.client(1), inst.client(0));
    let path = "/tessera/aborted";
    write(&reader, path, 1, 0, 4 * STRIPE);
    let txn = open_joined(&b, &[&a, &b]);
    write(&a, path, 2, 0, 2 * STRIPE);
    write(&b, path, 2, 2 * STRIPE, 6 * STRIPE);
    a.txn_decide(
        txn,
        false,
        vec!["rank 1 voted to abort: out of memory".into()],
    )
    .unwrap();
    let e = b.txn_decide(txn, true, Vec::new()).unwrap_err();
    assert_eq!(e.errno, Errno::Canceled, "{e}");
    assert!(e.message.contains("rank 1 voted to abort"), "{e}");
    // Members leave: their own view of what they wrote goes with the transaction.
    a.txn_join(None).unwrap();
    b.txn_join(None).unwrap();
    for c in [&reader, &a, &b] {
        let seen = read_all(c, path);
        assert_eq!(seen.len() as u64, 4 * STRIPE);
        assert!(versions(&seen, &[1, 2]).iter().all(|v| *v == Some(1)));
    }
}

#[test]
fn two_transactions_cannot_write_the_same_bytes_at_once() {
    let inst = start(&[]);
    let (a, b) = (inst.client(0), inst.client(1));
    let path = "/tessera/contended";
    write(&a, path, 1, 0, STRIPE);
    let (t1, t2) = (a.txn_open().unwrap(), b.txn_open().unwrap());
    a.txn_join(Some(t1)).unwrap();
    b.txn_join(Some(t2)).unwrap();
    write(&a, path, 2, 0, STRIPE);
    let mut f = b
        .open(
            path,
            OpenOptions::new()
                .read(true)
                .write(true)
                .model(Model::Commit),
        )
        .unwrap();
    f.write_at(&pattern(3, 100, 10), 100).unwrap();
    let e = f.close().unwrap_err();
    assert_eq!(e.errno, Errno::Busy, "{e}");
    assert!(e.message.contains(&format!("{t1:016x}")), "{e}");
}

#[test]
fn a_transaction_whose_processes_all_end_aborts_after_the_timeout() {
    let timeout_ms = 500;
    let inst = start(&["--set", &format!("txn_timeout_ms={timeout_ms}")]);
    let reader = inst.client(0);
    let path = "/tessera/orphaned";
    write(&reader, path, 1, 0, 4 * STRIPE);
    let mut writers = [inst.rank(0), inst.rank(1)];
    let txn: u64 = {
        let r = writers[0].ok(&Cmd::TxnOpen);
        String::from_utf8(common::decode_hex(r.data.as_deref().unwrap()))
            .unwrap()
            .parse()
            .unwrap()
    };
    for (i, w) in writers.iter_mut().enumerate() {
        member_writes(w, txn, path, i as u64 * 2 * STRIPE, 2 * STRIPE);
        w.ok(&Cmd::Close);
    }
    let ended = Instant::now();
    for w in &mut writers {
        w.kill9();
    }
    // Aborted, and its pending state gone from both nodes.
    let (home, other) = (inst.client(0), inst.client(1));
    eventually_ok(
        Duration::from_secs(30),
        "the transaction gone after its processes ended",
        || {
            let (h, o) = (home.status().unwrap(), other.status().unwrap());
            if h.txns_at_home == 0 && h.txns_pending == 0 && o.txns_pending == 0 {
                Ok(())
            } else {
                Err(format!(
                    "{} at home, {} + {} pending",
                    h.txns_at_home, h.txns_pending, o.txns_pending
                ))
            }
        },
    );
    assert!(
        ended.elapsed() >= Duration::from_millis(timeout_ms),
        "aborted before the timeout"
    );
    let e = other.txn_join(Some(txn)).unwrap_err();
    assert!(e.message.contains("it was aborted"), "{e}");
    let seen = read_all(&reader, path);
    assert_eq!(seen.len() as u64, 4 * STRIPE);
    assert!(versions(&seen, &[1, 2]).iter().all(|v| *v == Some(1)));
}

/// Two writers on two daemons each rewrite half of a data set with a new version, round
/// after round, while a reader reads it whole over and over, until the reader has read it
/// `reads` times: how many of its reads saw two versions at once, of how many, over how many
/// rounds.
fn race(inst: &Inst, reads: u64, in_txn: bool) -> (u64, u64, u32) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
    let path = if in_txn {
        "/tessera/race-txn"
    } else {
        "/tessera/race-plain"
    };
    let half = 4 * STRIPE;
    let (a, b) = (inst.client(0), inst.client(1));
    write(&a, path, 1, 0, 2 * half);
    let stop = Arc::new(AtomicBool::new(false));
    let latest = Arc::new(AtomicU32::new(1));
    let done = Arc::new(AtomicU64::new(0));
    let reader = {
        let (stop, latest, done) = (stop.clone(), latest.clone(), done.clone());
        let c = inst.client(1);
        let path = path.to_string();
        std::thread::spawn(move || {
            let mut mixed = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let n = done.load(Ordering::Relaxed);
                let most = if n % 2 == 0 { 64 << 10 } else { 1 << 20 };
                // From the version before the one being written when the read starts, to the
                // one after the one being written when it ends.
                let first = latest.load(Ordering::Relaxed).saturating_sub(1).max(1);
                let bytes = read_upto(&c, &path, most);
                let ids: Vec<u32> = (first..=latest.load(Ordering::Relaxed) + 1).collect();
                let v = versions(&bytes, &ids);
                assert!(v.iter().all(Option::is_some), "a torn block: {v:?}");
                if v.windows(2).any(|w| w[0] != w[1]) {
                    mixed += 1;
                }
                done.fetch_add(1, Ordering::Relaxed);
            }
            mixed
        })
    };
    let mut rounds = 0u32;
    while done.load(Ordering::Relaxed) < reads {
        assert!(rounds < 100_000, "the reader is stuck");
        let id = rounds + 2;
        latest.store(id, Ordering::Relaxed);
        let txn = if in_txn {
            Some(open_joined(&a, &[&a, &b]))
        } else {
            None
        };
        write(&a, path, id, 0, half);
        write(&b, path, id, half, half);
        if let Some(t) = txn {
            a.txn_decide(t, true, Vec::new()).unwrap();
            a.txn_join(None).unwrap();
            b.txn_join(None).unwrap();
        }
        rounds += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let mixed = reader.join().unwrap();
    (mixed, done.load(Ordering::Relaxed), rounds)
}

#[test]
fn a_reader_racing_commits_never_sees_a_mixed_data_set() {
    let reads = if std::env::var_os("TESSERA_FULL").is_some() {
        400
    } else {
        60
    };
    let inst = start(&[]);
    let (mixed, reads, rounds) = race(&inst, reads, true);
    eprintln!("with transactions: {mixed} mixed of {reads} reads over {rounds} commits");
    assert_eq!(
        mixed, 0,
        "{mixed} of {reads} reads saw two versions at once"
    );
    // The same checker sees the mix when each writer publishes on its own.
    let (mixed, reads, rounds) = race(&inst, reads, false);
    eprintln!("without: {mixed} mixed of {reads} reads over {rounds} rounds");
    assert!(
        mixed > 0,
        "no mix seen in {reads} reads: the checker cannot tell"
    );
}

/// Both nodes hold no pending state and node 0 (the home) no transaction: resolved.
fn wait_resolved(inst: &Inst) {
    eventually_ok(
        Duration::from_secs(30),
        "resolved after the restart",
        || {
            let (h, o) = (inst.client(0).status(), inst.client(1).status());
            if let (Ok(h), Ok(o)) = (&h, &o)
                && h.txns_at_home == 0
                && h.txns_pending == 0
                && o.txns_pending == 0
            {
                return Ok(());
            }
            Err(format!("{h:?} {o:?}"))
        },
    );
}

/// A transaction with one member on each node, each writing half of a grown data set of
/// version 2 over version 1, published; returns it and its home client (node 0).
fn pending_on_both(inst: &Inst, path: &str) -> (u64, Client) {
    let (a, b) = (inst.client(0), inst.client(1));
    write(&a, path, 1, 0, 4 * STRIPE);
    let txn = open_joined(&a, &[&a, &b]);
    write(&a, path, 2, 0, 3 * STRIPE);
    write(&b, path, 2, 3 * STRIPE, 3 * STRIPE);
    (txn, a)
}

/// The data set as a fresh outsider on `node` sees it: all version `id` and its size.
fn all_of(inst: &Inst, path: &str, node: u32, id: u32, size: u64) {
    let seen = read_all(&inst.client(node), path);
    assert_eq!(seen.len() as u64, size);
    let v = versions(&seen, &[1, 2]);
    assert!(v.iter().all(|x| *x == Some(id)), "{v:?}");
}

/// Daemon `node` runs with `failpoint` while the home (node 0) commits a transaction pending
/// on both nodes; `decided` checks what the commit call returned. After its restart the
/// transaction resolves whole: to version 2 (`committed`) or back to version 1.
fn crash_at(node: u32, failpoint: &str, decided: impl FnOnce(FsResult<()>), committed: bool) {
    let inst = start(&[]);
    inst.kill9(node);
    inst.restart_with(node, &[("TESSERA_FAILPOINT", failpoint)]);
    let path = "/tessera/crashed";
    let (txn, a) = pending_on_both(&inst, path);
    decided(a.txn_decide(txn, true, Vec::new()));
    inst.restart(node);
    wait_resolved(&inst);
    let (id, size) = if committed {
        (2, 6 * STRIPE)
    } else {
        (1, 4 * STRIPE)
    };
    for n in [0, 1] {
        all_of(&inst, path, n, id, size);
    }
}

/// The commit call of a home that died under it: the connection was lost.
fn home_lost(r: FsResult<()>) {
    let e = r.unwrap_err();
    assert!(
        matches!(e.errno, Errno::HostDown | Errno::ConnRefused),
        "{e}"
    );
}

#[test]
fn a_node_that_dies_between_prepare_and_decision_aborts_the_transaction_whole() {
    let refused = |r: FsResult<()>| {
        let e = r.unwrap_err();
        assert_eq!(e.errno, Errno::Canceled, "{e}");
        assert!(e.message.contains("node 1 could not prepare"), "{e}");
    };
    crash_at(1, "shard-after-prepare", refused, false);
}

#[test]
fn a_node_that_dies_between_decision_and_completion_completes_after_its_restart() {
    crash_at(1, "shard-before-complete", |r| r.unwrap(), true);
}

#[test]
fn a_home_that_dies_before_deciding_aborts_after_its_restart() {
    crash_at(0, "home-before-decision", home_lost, false);
}

#[test]
fn a_home_that_dies_after_deciding_completes_after_its_restart() {
    crash_at(0, "home-after-decision", home_lost, true);
}

#[test]
fn a_member_that_dies_after_publishing_keeps_its_writes_in_the_transaction() {
    let inst = start(&["--set", "migrate_grace_ms=100"]);
    let path = "/tessera/survivor";
    let a = inst.client(0);
    write(&a, path, 1, 0, 4 * STRIPE);
    let txn = open_joined(&a, &[&a]);
    write(&a, path, 2, 0, 3 * STRIPE);
    let mut b = inst.rank(1);
    member_writes(&mut b, txn, path, 3 * STRIPE, 3 * STRIPE);
    b.ok(&Cmd::Close);
    b.kill9();
    inst.wait_clients(1, 0);
    a.txn_decide(txn, true, Vec::new()).unwrap();
    for node in [0, 1] {
        all_of(&inst, path, node, 2, 6 * STRIPE);
    }
    // Its log, listed for release when it died, is kept: the transaction owns its bytes.
    inst.wait_no_logs_to_release();
    for node in [0, 1] {
        all_of(&inst, path, node, 2, 6 * STRIPE);
    }
}

#[test]
fn a_member_cannot_detach_outside_its_transaction() {
    let inst = start(&[]);
    let a = inst.client(0);
    let path = "/tessera/detached";
    write(&a, path, 1, 0, STRIPE);
    let txn = open_joined(&a, &[&a]);
    let mut f = a
        .open(
            path,
            OpenOptions::new()
                .read(true)
                .write(true)
                .model(Model::Commit),
        )
        .unwrap();
    f.write_at(&pattern(2, 0, STRIPE), 0).unwrap();
    f.commit().unwrap();
    let e = f.detach(0, STRIPE).unwrap_err();
    assert_eq!(e.errno, Errno::NotSup, "{e}");
    assert!(e.message.contains(&format!("{txn:016x}")), "{e}");
    // Neither the committed bytes nor the transaction's are touched.
    assert_eq!(versions(&read_all(&inst.client(1), path), &[1])[0], Some(1));
}

#[test]
fn a_transaction_whose_member_node_dies_with_its_processes_aborts() {
    let timeout_ms = 500;
    let inst = start(&["--set", &format!("txn_timeout_ms={timeout_ms}")]);
    let path = "/tessera/lost-node";
    let home = inst.client(0);
    write(&home, path, 1, 0, 4 * STRIPE);
    let txn = home.txn_open().unwrap();
    let mut member = inst.rank(1);
    member_writes(&mut member, txn, path, 0, 2 * STRIPE);
    member.ok(&Cmd::Close);
    // The member's node goes, daemon and process: nothing tells the home they left.
    inst.kill9(1);
    member.kill9();
    let died = Instant::now();
    // Decided (to abort) at the home; its completion waits for node 1.
    eventually(
        Duration::from_secs(30),
        "the transaction decided after its member's node died",
        || home.status().unwrap().txns_open == 0,
    );
    assert!(died.elapsed() >= Duration::from_millis(timeout_ms));
    // Back, the node drops what it held by the home's word.
    inst.restart(1);
    wait_resolved(&inst);
    for node in [0, 1] {
        all_of(&inst, path, node, 1, 4 * STRIPE);
    }
}

/// A path in /tessera whose entry (and the inode of a file made there) lives on daemon `node`
/// of 2.
fn path_on(node: u32, stem: &str) -> String {
    (0..)
        .map(|i| format!("/tessera/{stem}{i}"))
        .find(|p| tessera_core::placement::path_shard(p, 2) == node)
        .expect("some path hashes to each node")
}

/// Whether `path` exists for `c` (its entry found).
fn exists(c: &Client, path: &str) -> bool {
    match c.stat(path) {
        Ok(_) => true,
        Err(e) if e.errno == Errno::NoEnt => false,
        Err(e) => panic!("stat {path}: {e}"),
    }
}

/// The names in `dir` as `c` lists them.
fn names(c: &Client, dir: &str) -> Vec<String> {
    c.readdir(dir)
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect()
}

#[test]
fn a_file_a_transaction_creates_appears_only_when_it_commits() {
    let inst = start(&[]);
    let (a, b, reader) = (inst.client(0), inst.client(1), inst.client(1));
    reader.mkdir("/tessera/out", 0o755).unwrap();
    let paths: Vec<String> = (0..6).map(|i| format!("/tessera/out/part{i}")).collect();
    let txn = open_joined(&a, &[&a, &b]);
    for (i, p) in paths.iter().enumerate() {
        let member = if i % 2 == 0 { &a } else { &b };
        write(member, p, 2, 0, STRIPE);
    }
    for p in &paths {
        assert!(
            !exists(&reader, p),
            "an outsider found {p} before the commit"
        );
        assert!(exists(&a, p) && exists(&b, p));
    }
    assert!(names(&reader, "/tessera/out").is_empty());
    assert_eq!(names(&b, "/tessera/out").len(), paths.len());
    // Someone else creating the same name waits for the transaction; a member renames a new
    // file (and back); the directory cannot go from under the files.
    let e = reader
        .open(&paths[0], OpenOptions::new().write(true).create(true))
        .err()
        .expect("an outsider created a file a transaction is creating");
    assert_eq!(e.errno, Errno::Busy, "{e}");
    assert!(e.message.contains(&format!("{txn:016x}")), "{e}");
    a.rename(&paths[0], "/tessera/out/renamed").unwrap();
    assert!(!exists(&b, &paths[0]) && exists(&b, "/tessera/out/renamed"));
    b.rename("/tessera/out/renamed", &paths[0]).unwrap();
    let e = reader.rmdir("/tessera/out").unwrap_err();
    assert_eq!(e.errno, Errno::NotEmpty, "{e}");
    // A member removes one of its new files again: it never appears.
    b.unlink(&paths[5]).unwrap();
    assert!(!exists(&a, &paths[5]));
    a.txn_decide(txn, true, Vec::new()).unwrap();
    for p in &paths[..5] {
        let seen = read_all(&reader, p);
        assert_eq!(versions(&seen, &[2]), vec![Some(2)], "{p}");
    }
    assert!(!exists(&reader, &paths[5]));
    assert_eq!(names(&reader, "/tessera/out").len(), 5);
}

#[test]
fn an_aborted_transaction_takes_its_new_files_and_their_space_with_it() {
    let inst = start(&[]);
    let (a, b, reader) = (inst.client(0), inst.client(1), inst.client(0));
    let used = || inst.bb_used();
    let before = used();
    let txn = open_joined(&a, &[&a, &b]);
    write(&a, "/tessera/new0", 2, 0, 64 * STRIPE);
    write(&b, "/tessera/new1", 2, 0, 64 * STRIPE);
    assert!(used() >= before + 128 * STRIPE, "the writes hold space");
    a.txn_decide(txn, false, vec!["the job failed".into()])
        .unwrap();
    for c in [&a, &b] {
        c.txn_join(None).unwrap();
    }
    for p in ["/tessera/new0", "/tessera/new1"] {
        assert!(
            !exists(&reader, p) && !exists(&a, p),
            "{p} survived the abort"
        );
    }
    // The bytes go with the files, on every node.
    inst.wait_bb_used_at_most(before + 128 * STRIPE - 1, "the aborted new files");
    // The names are free again.
    write(&reader, "/tessera/new0", 3, 0, STRIPE);
    assert_eq!(
        versions(&read_all(&b, "/tessera/new0"), &[3]),
        vec![Some(3)]
    );
}

#[test]
fn an_aborted_transaction_gives_back_the_space_of_its_writes_to_existing_files() {
    let inst = start(&["--set", "migrate_grace_ms=100"]);
    let (a, b, reader) = (inst.client(0), inst.client(1), inst.client(0));
    let used = || inst.bb_used();
    let path = "/tessera/kept";
    write(&reader, path, 1, 0, 8 * STRIPE);
    // A committed transaction's writes stay, with their space.
    let txn = open_joined(&a, &[&a, &b]);
    write(&a, path, 2, 0, 64 * STRIPE);
    write(&b, path, 2, 64 * STRIPE, 64 * STRIPE);
    a.txn_decide(txn, true, Vec::new()).unwrap();
    for c in [&a, &b] {
        c.txn_join(None).unwrap();
    }
    let committed = used();
    // An aborted one's go, on both nodes, and nothing committed goes with them.
    let txn = open_joined(&a, &[&a, &b]);
    write(&a, path, 3, 32 * STRIPE, 64 * STRIPE);
    write(&b, path, 3, 96 * STRIPE, 64 * STRIPE);
    assert!(used() >= committed + 128 * STRIPE, "the writes hold space");
    a.txn_decide(txn, false, vec!["the job failed".into()])
        .unwrap();
    for c in [&a, &b] {
        c.txn_join(None).unwrap();
    }
    inst.wait_bb_used_at_most(committed, "the aborted transaction's writes");
    let expected: Vec<u8> = pattern(2, 0, 128 * STRIPE);
    for c in [&reader, &a, &b, &inst.client(1)] {
        assert!(
            read_upto(c, path, 1 << 20) == expected,
            "the committed bytes changed"
        );
    }
}

#[test]
fn a_member_that_dies_before_publishing_gives_back_the_space_of_its_writes() {
    let inst = start(&["--set", "migrate_grace_ms=100"]);
    let (home, reader) = (inst.client(0), inst.client(1));
    let path = "/tessera/unpublished";
    write(&reader, path, 1, 0, 8 * STRIPE);
    let before = inst.bb_used();
    let txn = home.txn_open().unwrap();
    // Members on both nodes write and die before publishing anything: no shard ever hears
    // of their logs.
    let mut ranks: Vec<_> = [0, 1].iter().map(|n| inst.rank(*n)).collect();
    for (i, r) in ranks.iter_mut().enumerate() {
        member_writes(r, txn, path, i as u64 * 64 * STRIPE, 64 * STRIPE);
    }
    assert!(
        inst.bb_used() >= before + 128 * STRIPE,
        "the writes hold space"
    );
    for r in &mut ranks {
        r.kill9();
    }
    for node in [0, 1] {
        inst.wait_clients(node, 1);
    }
    home.txn_decide(txn, false, vec!["its members died".into()])
        .unwrap();
    inst.wait_bb_used_at_most(before, "the dead members' unpublished writes");
    inst.wait_no_logs_to_release();
    for c in [&reader, &home] {
        assert_eq!(
            read_upto(c, path, 1 << 20),
            pattern(1, 0, 8 * STRIPE),
            "the file changed"
        );
    }
}

#[test]
fn a_new_file_appears_when_its_node_comes_back_after_dying_before_completing() {
    let inst = start(&[]);
    // A path whose entry lives on node 1, which dies when the decision reaches it.
    let path = path_on(1, "late");
    inst.kill9(1);
    inst.restart_with(1, &[("TESSERA_FAILPOINT", "shard-before-complete")]);
    let (a, b) = (inst.client(0), inst.client(1));
    let txn = open_joined(&a, &[&a, &b]);
    write(&b, &path, 2, 0, 2 * STRIPE);
    a.txn_decide(txn, true, Vec::new()).unwrap();
    inst.restart(1);
    // Asked as soon as node 1 is back, the file is there whole.
    let reader = inst.client(0);
    assert_eq!(
        versions(&read_all(&reader, &path), &[2]),
        vec![Some(2), Some(2)]
    );
    assert!(names(&reader, "/tessera").contains(&path["/tessera/".len()..].to_string()));
}

/// A file (`stem` on node 1, pattern 1 over `[0, len)`) whose entry and inode live on node 1,
/// restarted to die when a decision reaches it.
fn on_a_node_dying_at_completion(inst: &Inst, stem: &str, len: u64) -> String {
    let path = path_on(1, stem);
    write(&inst.client(0), &path, 1, 0, len);
    inst.kill9(1);
    inst.restart_with(1, &[("TESSERA_FAILPOINT", "shard-before-complete")]);
    path
}

#[test]
fn a_truncate_after_the_decision_cuts_what_the_transaction_wrote() {
    let inst = start(&[]);
    let path = on_a_node_dying_at_completion(&inst, "cut", 2 * STRIPE);
    let (a, b) = (inst.client(0), inst.client(1));
    let txn = open_joined(&a, &[&a, &b]);
    write(&a, &path, 2, 0, 4 * STRIPE);
    write(&b, &path, 2, 4 * STRIPE, 4 * STRIPE);
    a.txn_decide(txn, true, Vec::new()).unwrap();
    inst.restart(1);
    // The truncate, made after the decision, comes after the transaction's writes: they are
    // cut, never laid back on top once the completion arrives (the shards complete a decided
    // transaction before a truncate or a removal, or the home's retried completion reaches
    // node 1 first: either way the end state is the same).
    let reader = inst.client(0);
    reader.truncate(&path, STRIPE).unwrap();
    wait_resolved(&inst);
    assert_eq!(reader.stat(&path).unwrap().size, STRIPE);
    assert_eq!(versions(&read_all(&reader, &path), &[1, 2]), vec![Some(2)]);
}

#[test]
fn members_creating_the_same_new_file_at_once_all_open_it() {
    let inst = start(&[]);
    let members: Vec<Client> = (0..8).map(|i| inst.client(i % 2)).collect();
    let txn = open_joined(&members[0], &members.iter().collect::<Vec<_>>());
    for round in 0..5 {
        let path = format!("/tessera/shared{round}");
        let start = std::sync::Barrier::new(members.len());
        let inos: Vec<u64> = std::thread::scope(|s| {
            let opened: Vec<_> = members
                .iter()
                .map(|m| {
                    let (start, path) = (&start, &path);
                    s.spawn(move || {
                        start.wait();
                        let f = m
                            .open(path, OpenOptions::new().write(true).create(true))
                            .unwrap_or_else(|e| panic!("a member's create of {path}: {e}"));
                        let ino = m.stat(path).unwrap().ino;
                        drop(f);
                        ino
                    })
                })
                .collect();
            opened.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(inos.iter().all(|i| *i == inos[0]), "{path}: {inos:?}");
    }
    members[0].txn_decide(txn, true, Vec::new()).unwrap();
    assert!(exists(&inst.client(1), "/tessera/shared4"));
}

#[test]
fn a_file_a_transaction_removes_or_replaces_changes_only_when_it_commits() {
    let inst = start(&[]);
    let (a, b, reader) = (inst.client(0), inst.client(1), inst.client(1));
    reader.mkdir("/tessera/rm", 0o755).unwrap();
    let (old, swap, kept) = ("/tessera/rm/old", "/tessera/rm/swap", "/tessera/rm/kept");
    for p in [old, swap, kept] {
        write(&reader, p, 1, 0, STRIPE);
    }
    // An abort keeps what its members removed.
    let txn = open_joined(&a, &[&a]);
    a.unlink(kept).unwrap();
    assert!(!exists(&a, kept) && exists(&reader, kept));
    a.txn_decide(txn, false, vec!["changed my mind".into()])
        .unwrap();
    a.txn_join(None).unwrap();
    assert_eq!(versions(&read_all(&a, kept), &[1]), vec![Some(1)]);

    let txn = open_joined(&a, &[&a, &b]);
    a.unlink(old).unwrap();
    b.unlink(swap).unwrap();
    write(&b, swap, 2, 0, STRIPE);
    for m in [&a, &b] {
        assert!(!exists(m, old), "a member still sees what it removed");
        assert_eq!(versions(&read_all(m, swap), &[1, 2]), vec![Some(2)]);
        let mut listed = names(m, "/tessera/rm");
        listed.sort();
        assert_eq!(listed, ["kept", "swap"]);
    }
    // Everyone else sees the committed files as they were, and may open them.
    assert_eq!(versions(&read_all(&reader, old), &[1]), vec![Some(1)]);
    assert_eq!(versions(&read_all(&reader, swap), &[1, 2]), vec![Some(1)]);
    assert_eq!(names(&reader, "/tessera/rm").len(), 3);
    reader
        .open(old, OpenOptions::new().write(true).create(true))
        .unwrap();
    let e = reader.unlink(old).unwrap_err();
    assert_eq!(e.errno, Errno::Busy, "{e}");
    a.txn_decide(txn, true, Vec::new()).unwrap();
    assert!(!exists(&reader, old));
    assert_eq!(versions(&read_all(&reader, swap), &[1, 2]), vec![Some(2)]);
    let mut listed = names(&reader, "/tessera/rm");
    listed.sort();
    assert_eq!(listed, ["kept", "swap"]);
}

#[test]
fn directories_a_transaction_makes_or_removes_change_only_when_it_commits() {
    let inst = start(&[]);
    let (a, b, reader) = (inst.client(0), inst.client(1), inst.client(0));
    reader.mkdir("/tessera/empty", 0o755).unwrap();
    let txn = open_joined(&a, &[&a, &b]);
    a.mkdir("/tessera/run", 0o755).unwrap();
    write(&b, "/tessera/run/out", 2, 0, STRIPE);
    b.rmdir("/tessera/empty").unwrap();
    for m in [&a, &b] {
        assert!(exists(m, "/tessera/run/out") && !exists(m, "/tessera/empty"));
        assert_eq!(names(m, "/tessera/run"), ["out"]);
    }
    assert!(!exists(&reader, "/tessera/run") && !exists(&reader, "/tessera/run/out"));
    assert!(exists(&reader, "/tessera/empty"));
    assert!(!names(&reader, "/tessera").contains(&"run".to_string()));
    a.txn_decide(txn, true, Vec::new()).unwrap();
    assert_eq!(names(&reader, "/tessera/run"), ["out"]);
    assert_eq!(
        versions(&read_all(&reader, "/tessera/run/out"), &[2]),
        vec![Some(2)]
    );
    assert!(!exists(&reader, "/tessera/empty"));
}

#[test]
fn a_members_second_thoughts_leave_the_committed_file_and_its_pfs_copy() {
    let inst = start(&[]);
    std::fs::write(inst.pfs().join("imported.txt"), b"from the PFS\n").unwrap();
    let (a, reader) = (inst.client(0), inst.client(1));
    let path = "/tessera/imported.txt";
    assert_eq!(read_all(&reader, path), b"from the PFS\n");
    let txn = open_joined(&a, &[&a]);
    // Replace it, then remove the replacement again: the committed file is untouched.
    a.unlink(path).unwrap();
    write(&a, path, 2, 0, STRIPE);
    a.unlink(path).unwrap();
    assert!(!exists(&a, path));
    a.txn_decide(txn, false, vec!["second thoughts".into()])
        .unwrap();
    assert_eq!(read_all(&reader, path), b"from the PFS\n");
    assert!(
        inst.pfs().join("imported.txt").exists(),
        "the PFS copy went with a file the transaction created"
    );
}

#[test]
fn a_truncate_in_a_transaction_changes_the_file_only_when_it_commits() {
    let inst = start(&[]);
    let (a, b, reader) = (inst.client(0), inst.client(1), inst.client(1));
    let path = "/tessera/cut.dat";
    let writer = inst.client(1);
    write(&writer, path, 1, 0, 8 * STRIPE);
    // Flushed: the PFS copy holds the old bytes too, and must not show through a hole.
    writer.flush_path(path).unwrap();
    let old = vec![Some(1); 8];

    // An abort leaves the file as it was.
    let txn = open_joined(&a, &[&a]);
    a.truncate(path, STRIPE).unwrap();
    assert_eq!(a.stat(path).unwrap().size, STRIPE);
    assert_eq!(reader.stat(path).unwrap().size, 8 * STRIPE);
    a.txn_decide(txn, false, vec!["changed my mind".into()])
        .unwrap();
    a.txn_join(None).unwrap();
    assert_eq!(versions(&read_all(&reader, path), &[1]), old);

    // Members empty it (O_TRUNC), rewrite its head, and write one stripe further on.
    let txn = open_joined(&a, &[&a, &b]);
    let mut f = a
        .open(
            path,
            OpenOptions::new()
                .write(true)
                .truncate(true)
                .model(Model::Commit),
        )
        .unwrap();
    f.write_at(&pattern(2, 0, 2 * STRIPE), 0).unwrap();
    f.close().unwrap();
    write(&b, path, 2, 5 * STRIPE, STRIPE);
    let new = |bytes: &[u8]| {
        assert_eq!(bytes.len() as u64, 6 * STRIPE);
        assert!(
            bytes[2 * STRIPE as usize..5 * STRIPE as usize]
                .iter()
                .all(|x| *x == 0),
            "the cut bytes show through"
        );
        versions(bytes, &[2])
    };
    let expected = vec![Some(2), Some(2), None, None, None, Some(2)];
    for m in [&a, &b] {
        assert_eq!(m.stat(path).unwrap().size, 6 * STRIPE);
        assert_eq!(new(&read_all(m, path))[..2], expected[..2]);
    }
    // Everyone else sees the file whole as it was; another transaction may not write past
    // the cut.
    assert_eq!(reader.stat(path).unwrap().size, 8 * STRIPE);
    assert_eq!(versions(&read_all(&reader, path), &[1]), old);
    let other = inst.client(0);
    other.txn_join(Some(other.txn_open().unwrap())).unwrap();
    assert_eq!(write_err(&other, path).errno, Errno::Busy);

    a.txn_decide(txn, true, Vec::new()).unwrap();
    assert_eq!(reader.stat(path).unwrap().size, 6 * STRIPE);
    assert_eq!(new(&read_all(&reader, path)), expected);
    // The process that wrote the old bytes sees the new size too (what it attached is the
    // daemons' to size).
    assert_eq!(writer.stat(path).unwrap().size, 6 * STRIPE);
    let pfs_len = std::fs::metadata(inst.pfs().join("cut.dat")).unwrap().len();
    assert!(pfs_len <= 2 * STRIPE, "the PFS copy kept {pfs_len} bytes");
}

#[test]
fn a_rename_in_a_transaction_changes_the_names_only_when_it_commits() {
    let inst = start(&[]);
    let (a, b, reader) = (inst.client(0), inst.client(1), inst.client(1));
    reader.mkdir("/tessera/mv", 0o755).unwrap();
    let at = |name: &str| format!("/tessera/mv/{name}");
    let writer = inst.client(0);
    for (name, id) in [
        ("ckpt.tmp", 1),
        ("ckpt", 3),
        ("a", 4),
        ("gone", 5),
        ("kept", 6),
    ] {
        write(&writer, &at(name), id, 0, STRIPE);
    }
    // Flushed: the old checkpoint's PFS copy goes with it at commit; a flushed file is not
    // renamed inside a transaction.
    writer.flush_path(&at("ckpt")).unwrap();
    writer.flush_path(&at("kept")).unwrap();
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };

    // An abort leaves every name as it was.
    let txn = open_joined(&a, &[&a]);
    a.rename(&at("a"), &at("b")).unwrap();
    assert!(!exists(&a, &at("a")) && exists(&a, &at("b")));
    assert!(exists(&reader, &at("a")) && !exists(&reader, &at("b")));
    a.txn_decide(txn, false, vec!["changed my mind".into()])
        .unwrap();
    a.txn_join(None).unwrap();
    assert!(exists(&reader, &at("a")) && !exists(&reader, &at("b")));
    assert_eq!(versions(&read_all(&reader, &at("a")), &[4]), vec![Some(4)]);

    let txn = open_joined(&a, &[&a, &b]);
    let e = a.rename(&at("kept"), &at("moved")).unwrap_err();
    assert_eq!(e.errno, Errno::XDev, "{e}");
    assert!(e.message.contains("PFS"), "{e}");
    // The checkpoint idiom: write aside, rename over the old one.
    a.rename(&at("ckpt.tmp"), &at("ckpt")).unwrap();
    // A file the transaction created, renamed (refused before renames were pending).
    write(&b, &at("new"), 2, 0, STRIPE);
    b.rename(&at("new"), &at("final")).unwrap();
    // A committed file renamed twice, and one renamed and then removed.
    a.rename(&at("a"), &at("a2")).unwrap();
    b.rename(&at("a2"), &at("a3")).unwrap();
    a.rename(&at("gone"), &at("gone2")).unwrap();
    a.unlink(&at("gone2")).unwrap();
    let after = ["a3", "ckpt", "final", "kept"];
    for m in [&a, &b] {
        assert_eq!(sorted(names(m, "/tessera/mv")), after);
        assert_eq!(versions(&read_all(m, &at("ckpt")), &[1]), vec![Some(1)]);
        assert_eq!(versions(&read_all(m, &at("a3")), &[4]), vec![Some(4)]);
    }
    // Everyone else sees the committed names, and cannot change the ones being renamed.
    assert_eq!(
        sorted(names(&reader, "/tessera/mv")),
        ["a", "ckpt", "ckpt.tmp", "gone", "kept"]
    );
    assert_eq!(
        versions(&read_all(&reader, &at("ckpt")), &[3]),
        vec![Some(3)]
    );
    assert_eq!(
        reader.unlink(&at("ckpt.tmp")).unwrap_err().errno,
        Errno::Busy
    );
    assert_eq!(
        reader.rename(&at("a"), &at("z")).unwrap_err().errno,
        Errno::Busy
    );

    a.txn_decide(txn, true, Vec::new()).unwrap();
    assert_eq!(sorted(names(&reader, "/tessera/mv")), after);
    assert_eq!(
        versions(&read_all(&reader, &at("ckpt")), &[1]),
        vec![Some(1)]
    );
    assert_eq!(
        versions(&read_all(&reader, &at("final")), &[2]),
        vec![Some(2)]
    );
    assert_eq!(versions(&read_all(&reader, &at("a3")), &[4]), vec![Some(4)]);
    assert!(!exists(&reader, &at("gone")) && !exists(&reader, &at("z")));
    wait_resolved(&inst);
    let pfs = inst.pfs().join("mv");
    assert!(
        !pfs.join("ckpt").exists(),
        "the replaced checkpoint's PFS copy stayed"
    );
    assert!(pfs.join("kept").exists());
}

#[test]
fn a_write_after_the_decision_is_not_cut_by_the_transactions_truncate() {
    let inst = start(&[]);
    let path = on_a_node_dying_at_completion(&inst, "grow", 4 * STRIPE);
    let a = inst.client(0);
    let txn = open_joined(&a, &[&a]);
    a.truncate(&path, STRIPE).unwrap();
    a.txn_decide(txn, true, Vec::new()).unwrap();
    inst.restart(1);
    // Made after the decision, the write extends the file the truncate cut: the size the
    // transaction set comes first, not over it.
    let c = inst.client(0);
    write(&c, &path, 3, 6 * STRIPE, STRIPE);
    wait_resolved(&inst);
    let reader = inst.client(1);
    assert_eq!(reader.stat(&path).unwrap().size, 7 * STRIPE);
    let bytes = read_all(&reader, &path);
    assert_eq!(
        versions(&bytes, &[1, 3]),
        vec![Some(1), None, None, None, None, None, Some(3)]
    );
    assert!(
        bytes[STRIPE as usize..6 * STRIPE as usize]
            .iter()
            .all(|x| *x == 0)
    );
}

#[test]
fn a_truncate_refused_by_one_daemon_aborts_its_transaction() {
    let inst = start(&[]);
    let (a, b, reader) = (inst.client(0), inst.client(1), inst.client(0));
    let path = "/tessera/split";
    write(&reader, path, 1, 0, 8 * STRIPE);
    // Another transaction holds one stripe beyond the cut, on one daemon's shard only.
    let other = open_joined(&b, &[&b]);
    write(&b, path, 2, 4 * STRIPE, STRIPE);
    let txn = open_joined(&a, &[&a]);
    let e = a.truncate(path, 0).unwrap_err();
    assert_eq!(e.errno, Errno::Busy, "{e}");
    // Cut on one daemon and refused on the other: the transaction cannot commit whole.
    let e = a.txn_decide(txn, true, Vec::new()).unwrap_err();
    assert_eq!(e.errno, Errno::Canceled, "{e}");
    assert!(e.message.contains("some daemons"), "{e}");
    a.txn_join(None).unwrap();
    b.txn_decide(other, true, Vec::new()).unwrap();
    assert_eq!(reader.stat(path).unwrap().size, 8 * STRIPE);
    let expected: Vec<Option<u32>> = (0..8).map(|i| Some(if i == 4 { 2 } else { 1 })).collect();
    assert_eq!(versions(&read_all(&reader, path), &[1, 2]), expected);
}

/// The transaction library's way in: the coordinator reserves ids ahead and, at begin,
/// enrolls every process at once; each takes up the log id it was given and writes as a
/// member. A bad enrollment is refused with the reason and makes no one a member; enrolling
/// again (a resent request) hands out the same log ids; a member that leaves without a round
/// trip is outside from its next request on.
#[test]
fn the_coordinator_enrolls_every_process_at_once() {
    let inst = start(&[]);
    let home = inst.client(0);
    let a = inst.client(0);
    let b = inst.client(1);
    let outsider = inst.client(1);
    let e = home.txn_reserve(0).unwrap_err();
    assert!(e.to_string().contains("give 1 to"), "{e}");
    let first = home.txn_reserve(4).unwrap();
    let members = vec![a.txn_identity().unwrap(), b.txn_identity().unwrap()];
    let refused = |txn: u64, who: Vec<(u32, u64)>, at: &Client, why: &str| {
        let e = at.txn_enroll(txn, who).unwrap_err();
        assert_eq!(e.errno, Errno::Inval, "{e}");
        assert!(e.to_string().contains(why), "{e}");
    };
    refused(first + 10, members.clone(), &home, "not open");
    refused(
        first,
        vec![members[0], (1, 999_999)],
        &home,
        "not connected",
    );
    refused(first, vec![members[0], (7, 1)], &home, "has 2 nodes");
    refused(first, vec![members[1], members[1]], &home, "named twice");
    refused(first, members.clone(), &b, "home on node 0");
    // None of those made a member: a's writes are still its own, visible at once.
    let plain = path_on(1, "plain");
    write(&a, &plain, 3, 0, STRIPE);
    assert_eq!(read_all(&outsider, &plain), pattern(3, 0, STRIPE));

    let logs = home.txn_enroll(first, members.clone()).unwrap();
    assert_eq!(logs.len(), 2);
    assert_ne!(
        logs[0], members[0].1,
        "a member writes under a log id of its own"
    );
    assert_eq!(home.txn_enroll(first, members.clone()).unwrap(), logs);
    a.txn_enter(first, logs[0]).unwrap();
    b.txn_enter(first, logs[1]).unwrap();
    let ds = "/tessera/enrolled";
    write(&a, ds, 1, 0, 4 * STRIPE);
    write(&b, ds, 1, 4 * STRIPE, 4 * STRIPE);
    assert!(!exists(&outsider, ds), "pending until the commit");
    assert_eq!(read_all(&b, ds), pattern(1, 0, 8 * STRIPE));
    home.txn_decide(first, true, Vec::new()).unwrap();
    assert_eq!(read_all(&outsider, ds), pattern(1, 0, 8 * STRIPE));
    refused(
        first,
        vec![outsider.txn_identity().unwrap()],
        &home,
        "committed",
    );

    a.txn_leave(true).unwrap();
    assert_eq!(a.txn_member(), None);
    let after = path_on(0, "after");
    write(&a, &after, 2, 0, STRIPE);
    assert_eq!(read_all(&outsider, &after), pattern(2, 0, STRIPE));
    // The next reserved id is opened by its own enrollment.
    let logs = home
        .txn_enroll(first + 1, vec![a.txn_identity().unwrap()])
        .unwrap();
    a.txn_enter(first + 1, logs[0]).unwrap();
    assert_eq!(a.txn_member(), Some(first + 1));
}

/// How many descriptors of this process are open on logs written under log id `log` in
/// `inst` (its writers, and the writers' checked readers).
fn open_logs(inst: &Inst, log: u64) -> usize {
    let prefix = format!("{log}.");
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter(|target| target.starts_with(&inst.root))
        .filter(|target| {
            target
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&prefix))
        })
        .count()
}

#[test]
fn switching_logs_keeps_committed_writers_closes_aborted_ones_and_reads_earlier_own_bytes() {
    let inst = start(&[]);
    let (home, a, outsider) = (inst.client(0), inst.client(1), inst.client(0));
    let first = home.txn_reserve(2).unwrap();
    let (kept, dropped) = (path_on(1, "kept"), path_on(1, "dropped"));

    // Committed: leaving does not close the writers (their files stay, part of the data
    // set); writing the file again, outside and in the next transaction, goes to new logs.
    let logs = home
        .txn_enroll(first, vec![a.txn_identity().unwrap()])
        .unwrap();
    a.txn_enter(first, logs[0]).unwrap();
    write(&a, &kept, 1, 0, 2 * STRIPE);
    home.txn_decide(first, true, Vec::new()).unwrap();
    a.txn_leave(true).unwrap();
    assert!(
        open_logs(&inst, logs[0]) > 0,
        "the committed transaction's writer was closed at once"
    );
    write(&a, &kept, 2, STRIPE, STRIPE);
    assert_eq!(
        versions(&read_all(&outsider, &kept), &[1, 2]),
        [Some(1), Some(2)]
    );

    // Aborted: its logs are deleted, so leaving closes them at once (an open descriptor
    // would keep their space allocated).
    let logs = home
        .txn_enroll(first + 1, vec![a.txn_identity().unwrap()])
        .unwrap();
    a.txn_enter(first + 1, logs[0]).unwrap();
    write(&a, &kept, 3, 0, STRIPE);
    write(&a, &dropped, 3, 0, STRIPE);
    assert!(
        open_logs(&inst, logs[0]) > 0,
        "the member writes its own logs"
    );
    home.txn_decide(first + 1, false, vec!["the test aborts it".into()])
        .unwrap();
    a.txn_leave(false).unwrap();
    assert_eq!(
        open_logs(&inst, logs[0]),
        0,
        "the aborted transaction's logs are still open"
    );
    assert!(!exists(&outsider, &dropped), "the aborted file appeared");
    // The member reads its own bytes of before the switch from its log, with a writer of
    // that log again (after writing more) and without one.
    let seen = |c: &Client| versions(&read_all(c, &kept), &[1, 2, 3, 4]);
    assert_eq!(seen(&a), [Some(1), Some(2)], "the abort changed the file");
    write(&a, &kept, 4, 2 * STRIPE, STRIPE);
    for c in [&a, &outsider] {
        assert_eq!(seen(c), [Some(1), Some(2), Some(4)]);
    }
}

/// A user path whose entry lives on `shard` of the 2 nodes.
fn on_shard(shard: u32, stem: &str) -> String {
    (0..)
        .map(|i| format!("/{stem}{i}"))
        .find(|p| tessera_core::placement::path_shard(p, 2) == shard)
        .map(|p| format!("/tessera{p}"))
        .expect("some name lands on every shard")
}

/// A member's daemon killed between the two shards of a rename inside a transaction (the old
/// name marked renamed away, the new one not yet marked): after its restart the transaction
/// resolves whole, either with the rename done or with every name as it was, never the file
/// without a name or with two, and its bytes under the name it has.
#[test]
fn a_rename_in_a_transaction_is_whole_after_a_crash_between_its_shards() {
    let inst = start(&["--set", "txn_timeout_ms=1000"]);
    let (from, to) = (on_shard(0, "tfrom"), on_shard(1, "tto"));
    write(&inst.client(0), &from, 7, 0, STRIPE);
    inst.kill9(1);
    inst.restart_with(1, &[("TESSERA_FAILPOINT", "txn-rename-moved-out")]);
    let pid = inst.pid(1);
    let (h, a) = (inst.client(0), inst.client(1));
    let txn = open_joined(&h, &[&h, &a]);
    // The daemon comes back as soon as it is gone: the member's client reconnects to it.
    let e = std::thread::scope(|s| {
        s.spawn(|| {
            common::wait_gone(
                pid,
                Duration::from_secs(20),
                "(node 1) passed the failpoint",
            );
            inst.restart(1);
        });
        a.rename(&from, &to).unwrap_err()
    });
    assert!(
        matches!(e.errno, Errno::HostDown | Errno::ConnRefused),
        "{e}"
    );
    let decided = h.txn_decide(txn, true, Vec::new());
    wait_resolved(&inst);
    let outsider = inst.client(0);
    let (old, new) = (exists(&outsider, &from), exists(&outsider, &to));
    let kept = match (old, new) {
        (true, false) => &from,
        (false, true) => &to,
        other => panic!("names after the crash: {other:?} (decision: {decided:?})"),
    };
    assert_eq!(outsider.stat(kept).unwrap().nlink, 1);
    assert_eq!(
        versions(&read_all(&outsider, kept), &[7]),
        vec![Some(7)],
        "decision: {decided:?}"
    );
    // The names are usable again outside the transaction (a member of an aborted one is
    // told so when it leaves).
    let _ = a.txn_join(None);
    a.rename(kept, &format!("{kept}-after")).unwrap();
    assert!(exists(&outsider, &format!("{kept}-after")));
}
