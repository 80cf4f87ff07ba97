//! Attributes cached by clients under leases: a repeated stat costs no request, and a stat
//! that starts after a change was acknowledged anywhere never answers from a copy made
//! before it; a holder that died delays a change by at most its lease.

mod common;

use common::Inst;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tessera_client::{Client, Errno, Model, OpenOptions};
use tessera_core::placement::path_shard;
use tessera_proto::AttrChange;

const NODES: u32 = 3;

fn posix_write(c: &Client, path: &str, bytes: &[u8], at: u64) {
    let mut f = c
        .open(
            path,
            OpenOptions::new()
                .write(true)
                .create(true)
                .model(Model::Posix),
        )
        .unwrap();
    f.write_at(bytes, at).unwrap();
    f.close().unwrap();
}

/// Files `<prefix>000` to `<prefix><count - 1>`, file `i` of `i` bytes.
fn write_sized_by_index(c: &Client, prefix: &str, count: u64) {
    for i in 0..count {
        posix_write(c, &format!("{prefix}{i:03}"), &vec![5u8; i as usize], 0);
    }
}

/// Paths in `dir` whose entries live on each node in turn.
fn one_per_shard(dir: &str) -> Vec<String> {
    (0..NODES)
        .map(|shard| {
            (0..)
                .map(|i| format!("{dir}/f{i}"))
                .find(|p| path_shard(p.strip_prefix("/tessera").unwrap(), NODES) == shard)
                .unwrap()
        })
        .collect()
}

#[test]
fn a_repeated_stat_is_a_hit_until_the_entry_changes_anywhere() {
    let inst = Inst::start(NODES);
    let reader = inst.client(0);
    inst.client(0).mkdir("/tessera/d", 0o755).unwrap();
    for (i, path) in one_per_shard("/tessera/d").iter().enumerate() {
        let writer = inst.client(1 + (i as u32 % 2));
        posix_write(&writer, path, &[1u8; 100], 0);
        let before = reader.stats();
        assert_eq!(reader.stat(path).unwrap().size, 100);
        assert_eq!(reader.stat(path).unwrap().size, 100);
        let after = reader.stats();
        assert_eq!(after.attr_misses - before.attr_misses, 1, "{path}");
        assert_eq!(
            after.attr_hits - before.attr_hits,
            1,
            "{path}: second stat not a hit"
        );
        // Each change, acknowledged to another node's client, is seen by the very next stat.
        posix_write(&writer, path, &[2u8; 50], 100);
        assert_eq!(reader.stat(path).unwrap().size, 150, "{path}: a write");
        reader.stat(path).unwrap();
        writer.truncate(path, 10).unwrap();
        assert_eq!(reader.stat(path).unwrap().size, 10, "{path}: a truncate");
        let chmod = AttrChange {
            mode: Some(0o600),
            ..Default::default()
        };
        writer.set_attr(path, chmod).unwrap();
        assert_eq!(
            reader.stat(path).unwrap().mode & 0o777,
            0o600,
            "{path}: a chmod"
        );
        let moved = format!("{path}-moved");
        writer.rename(path, &moved).unwrap();
        let gone = reader.stat(path).unwrap_err();
        assert_eq!(gone.errno, Errno::NoEnt, "{path}: a rename away");
        posix_write(&writer, path, &[3u8; 7], 0);
        assert_eq!(reader.stat(path).unwrap().size, 7, "{path}: a new file");
        reader.stat(path).unwrap();
        writer.unlink(path).unwrap();
        let gone = reader.stat(path).unwrap_err();
        assert_eq!(gone.errno, Errno::NoEnt, "{path}: an unlink");
        // Its own change too.
        posix_write(&reader, &moved, &[4u8; 20], 0);
        assert_eq!(
            reader.stat(&moved).unwrap().size,
            20,
            "{path}: its own write"
        );
    }
    let s = reader.status().unwrap();
    assert!(s.stats_leased > 0, "{s:?}");
    let out = inst.tessera(&["status"]);
    let out = String::from_utf8_lossy(&out.stdout);
    assert!(out.contains("stats answered with a lease"), "{out}");
}

/// A writer on one node appends under POSIX consistency while a reader on another polls
/// stat: every stat that starts after a write returned reports a size at least that write's
/// end.
#[test]
fn a_polling_reader_never_sees_a_size_older_than_an_acknowledged_write() {
    let inst = Inst::start(NODES);
    for path in one_per_shard("/tessera") {
        posix_write(&inst.client(0), &path, b"", 0);
        let acked = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let reader = {
            let (c, acked, done, path) =
                (inst.client(2), acked.clone(), done.clone(), path.clone());
            std::thread::spawn(move || {
                let mut stats = 0u64;
                while !done.load(Ordering::SeqCst) {
                    let floor = acked.load(Ordering::SeqCst);
                    let size = c.stat(&path).unwrap().size;
                    assert!(
                        size >= floor,
                        "{path}: stat saw {size} after {floor} was written"
                    );
                    stats += 1;
                }
                (stats, c.stats())
            })
        };
        let w = inst.client(1);
        let mut f = w
            .open(&path, OpenOptions::new().write(true).model(Model::Posix))
            .unwrap();
        for i in 0..200u64 {
            f.write_at(&[9u8; 100], i * 100).unwrap();
            acked.store((i + 1) * 100, Ordering::SeqCst);
        }
        f.close().unwrap();
        // The reader saw the last write at least once before it stops.
        while inst.client(2).stat(&path).unwrap().size < 20_000 {}
        done.store(true, Ordering::SeqCst);
        let (stats, counts) = reader.join().unwrap();
        assert!(stats > 0);
        assert!(counts.attr_misses > 0, "{path}: {counts:?}");
    }
}

#[test]
fn a_change_waits_at_most_one_lease_for_a_holder_that_died() {
    let inst = Inst::start_with(NODES, &["--set", "attr_lease_ms=1500"]);
    let path = one_per_shard("/tessera")[0].clone();
    posix_write(&inst.client(1), &path, &[1u8; 10], 0);
    // Node 2 holds a lease on the entry (its shard is node 0) for its client, then dies.
    let holder = inst.client(2);
    holder.stat(&path).unwrap();
    holder.stat(&path).unwrap();
    assert_eq!(
        holder.stats().attr_hits,
        1,
        "node 2 did not cache the entry"
    );
    inst.kill9(2);
    // A change that needs only the entry's shard (a truncate would need every node).
    let chmod = |mode: u32| AttrChange {
        mode: Some(mode),
        ..Default::default()
    };
    let t0 = Instant::now();
    inst.client(1).set_attr(&path, chmod(0o600)).unwrap();
    let waited = t0.elapsed();
    assert!(
        waited < Duration::from_secs(10),
        "the chmod waited {waited:?} for a dead holder with a lease of 1.5 s"
    );
    assert_eq!(inst.client(0).stat(&path).unwrap().mode & 0o777, 0o600);
    // The holder's restarted daemon cannot confirm for its predecessor: nothing breaks, and
    // its new clients cache again.
    inst.restart(2);
    let again = inst.client(2);
    assert_eq!(again.stat(&path).unwrap().size, 10);
    assert_eq!(again.stat(&path).unwrap().size, 10);
    assert_eq!(again.stats().attr_hits, 1);
    inst.client(1).truncate(&path, 1).unwrap();
    assert_eq!(again.stat(&path).unwrap().size, 1);
}

#[test]
fn with_the_lease_at_zero_nothing_is_cached() {
    let inst = Inst::start_with(1, &["--set", "attr_lease_ms=0"]);
    let c = inst.client(0);
    posix_write(&c, "/tessera/f", b"abc", 0);
    for _ in 0..3 {
        assert_eq!(c.stat("/tessera/f").unwrap().size, 3);
    }
    let s = c.stats();
    assert_eq!((s.attr_hits, s.attr_misses), (0, 0), "{s:?}");
}

/// A listing brings the attributes with the names and warms the cache: `ls -l` then stats
/// every entry without a request, and a change made after the listing is still seen.
#[test]
fn a_listing_warms_the_cache_for_the_stats_that_follow() {
    let inst = Inst::start(NODES);
    let writer = inst.client(1);
    writer.mkdir("/tessera/big", 0o755).unwrap();
    write_sized_by_index(&writer, "/tessera/big/f", 300);
    let lister = inst.client(0);
    let entries = lister.readdir_plus("/tessera/big").unwrap();
    assert_eq!(entries.len(), 300);
    let before = lister.stats();
    for i in 0..300u64 {
        let a = lister.stat(&format!("/tessera/big/f{i:03}")).unwrap();
        assert_eq!(a.size, i);
    }
    let after = lister.stats();
    assert_eq!(after.attr_misses - before.attr_misses, 0, "{after:?}");
    assert_eq!(after.attr_hits - before.attr_hits, 300);
    writer.truncate("/tessera/big/f007", 1).unwrap();
    assert_eq!(lister.stat("/tessera/big/f007").unwrap().size, 1);
    writer.unlink("/tessera/big/f008").unwrap();
    assert_eq!(
        lister.stat("/tessera/big/f008").unwrap_err().errno,
        Errno::NoEnt
    );
}

#[test]
fn a_sweep_of_stats_lists_the_directory_ahead_and_still_sees_changes() {
    let inst = Inst::start(NODES);
    let writer = inst.client(1);
    writer.mkdir("/tessera/sweep", 0o755).unwrap();
    // Two writers' files, as in mdtest's shared directory: the sweep wants only the second's.
    for owner in 1..=2 {
        write_sized_by_index(&writer, &format!("/tessera/sweep/f.{owner}."), 300);
    }
    let sweeper = inst.client(0);
    let before = sweeper.stats();
    for i in 0..300u64 {
        let a = sweeper.stat(&format!("/tessera/sweep/f.2.{i:03}")).unwrap();
        assert_eq!(a.size, i, "f.2.{i:03}");
    }
    let after = sweeper.stats();
    let misses = after.attr_misses - before.attr_misses;
    // Misses until the listing starts, then a page's worth of hits for each.
    assert!(misses <= 40, "{misses} of 300 stats went to a shard");
    assert_eq!(after.attr_hits - before.attr_hits, 300 - misses);
    // What stat-ahead cached is still told of every change.
    writer.truncate("/tessera/sweep/f.2.250", 1).unwrap();
    assert_eq!(sweeper.stat("/tessera/sweep/f.2.250").unwrap().size, 1);
    writer.unlink("/tessera/sweep/f.2.260").unwrap();
    assert_eq!(
        sweeper.stat("/tessera/sweep/f.2.260").unwrap_err().errno,
        Errno::NoEnt
    );
    posix_write(&writer, "/tessera/sweep/f.2.270", &[1u8; 10], 270);
    assert_eq!(sweeper.stat("/tessera/sweep/f.2.270").unwrap().size, 280);

    // A few stats in a directory list nothing: each is one request.
    let few = inst.client(2);
    let before = few.stats();
    for i in 0..20u64 {
        few.stat(&format!("/tessera/sweep/f.1.{i:03}")).unwrap();
    }
    let after = few.stats();
    assert_eq!(after.attr_misses - before.attr_misses, 20);
    assert_eq!(after.requests - before.requests, 20, "{after:?}");
}
