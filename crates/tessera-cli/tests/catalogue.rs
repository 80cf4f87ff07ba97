//! The catalogue of variables and chunks (D2T's metadata service) on the daemons: a
//! transaction's entries appear to others only when it commits, whole; versions only grow and
//! a committed version reads the same while the next one commits; a waiter wakes at the
//! commit; an abort leaves nothing; entries survive restarts, and a node that died between
//! the decision and its completion shows the decided version as soon as it is back; any
//! hyperslab reads back assembled from chunks written on both nodes.

mod common;

use common::Inst;
use std::time::{Duration, Instant};
use tessera_client::{Chunk, Client, Errno, Variable};
use tessera_core::hyperslab::Slab;
use tessera_core::placement::variable_shard;

fn start() -> Inst {
    Inst::start_with(2, &["--set", "txn_timeout_ms=2000"])
}

/// A variable name whose entries live on daemon `node` (of 2).
fn name_on(node: u32, stem: &str) -> String {
    (0..)
        .map(|i| format!("{stem}{i}"))
        .find(|n| variable_shard(n, 2) == node)
        .expect("some name hashes to each node")
}

/// A 3-D variable of doubles, 64 x 32 x 32: two processes hold a 32 x 32 x 32 half each.
fn variable(name: &str) -> Variable {
    Variable {
        name: name.into(),
        elem_type: "f64".into(),
        elem_size: 8,
        dims: vec![64, 32, 32],
    }
}

/// Process `rank`'s half of a variable, its bytes in `path`.
fn half(rank: u64, path: &str) -> Chunk {
    Chunk {
        offsets: vec![32 * rank, 0, 0],
        counts: vec![32, 32, 32],
        path: path.into(),
        offset: rank * 262_144,
        len: 262_144,
    }
}

/// A transaction opened at `home`'s daemon, with `members` joined.
fn open_joined(home: &Client, members: &[&Client]) -> u64 {
    let txn = home.txn_open().unwrap();
    for m in members {
        m.txn_join(Some(txn)).unwrap();
    }
    txn
}

/// Members `a` and `b` (on both nodes) make a new version of `name`, each adding its half.
fn make_version(a: &Client, b: &Client, name: &str, path: &str) -> u64 {
    let txn = open_joined(a, &[a, b]);
    a.cat_create(variable(name)).unwrap();
    a.cat_add_chunk(name, half(0, path)).unwrap();
    b.cat_add_chunk(name, half(1, path)).unwrap();
    txn
}

#[test]
fn a_variable_appears_to_others_only_when_its_transaction_commits() {
    let inst = start();
    let (a, b, reader) = (inst.client(0), inst.client(1), inst.client(1));
    for node in [0, 1] {
        let name = name_on(node, "temperature");
        let txn = make_version(&a, &b, &name, "/tessera/t.v1");
        let e = reader.cat_lookup(&name, None).unwrap_err();
        assert_eq!(
            e.errno,
            Errno::NoEnt,
            "an outsider saw a pending variable: {e}"
        );
        assert!(reader.cat_list().unwrap().iter().all(|(n, _)| *n != name));
        for m in [&a, &b] {
            let mine = m.cat_lookup(&name, None).unwrap();
            assert_eq!((mine.version, mine.chunks.len()), (0, 2));
            assert!(m.cat_list().unwrap().contains(&(name.clone(), 0)));
        }
        a.txn_decide(txn, true, Vec::new()).unwrap();
        for m in [&a, &b] {
            m.txn_join(None).unwrap();
        }
        let v1 = reader.cat_lookup(&name, None).unwrap();
        assert_eq!(v1.version, 1);
        assert_eq!(
            v1.chunks,
            vec![half(0, "/tessera/t.v1"), half(1, "/tessera/t.v1")]
        );
        assert_eq!(v1.variable, variable(&name));
        assert!(reader.cat_list().unwrap().contains(&(name.clone(), 1)));

        // Version 2 in the making: version 1 reads the same, for everyone.
        let txn = open_joined(&a, &[&a, &b]);
        a.cat_create(variable(&name)).unwrap();
        b.cat_add_chunk(&name, half(1, "/tessera/t.v2")).unwrap();
        assert_eq!(reader.cat_lookup(&name, None).unwrap(), v1);
        assert_eq!(a.cat_lookup(&name, Some(1)).unwrap(), v1);
        a.txn_decide(txn, true, Vec::new()).unwrap();
        for m in [&a, &b] {
            m.txn_join(None).unwrap();
        }
        let v2 = reader.cat_lookup(&name, None).unwrap();
        assert_eq!((v2.version, v2.chunks.len()), (2, 1));
        assert_eq!(reader.cat_lookup(&name, Some(1)).unwrap(), v1);

        // D2T's update step: delete the old variable and create the new one, in one
        // transaction; the versions go on growing.
        let txn = open_joined(&a, &[&a]);
        a.cat_delete(&name).unwrap();
        a.cat_create(variable(&name)).unwrap();
        a.cat_add_chunk(&name, half(0, "/tessera/t.v3")).unwrap();
        assert_eq!(reader.cat_lookup(&name, None).unwrap(), v2);
        a.txn_decide(txn, true, Vec::new()).unwrap();
        a.txn_join(None).unwrap();
        let v3 = reader.cat_lookup(&name, None).unwrap();
        assert_eq!((v3.version, v3.chunks.len()), (3, 1));
        let e = reader.cat_lookup(&name, Some(1)).unwrap_err();
        assert_eq!(e.errno, Errno::NoEnt, "{e}");
        assert!(e.message.contains("no version 1"), "{e}");
    }
}

#[test]
fn an_aborted_transaction_leaves_no_catalogue_entries() {
    let inst = start();
    let (a, b, reader) = (inst.client(0), inst.client(1), inst.client(0));
    let name = name_on(1, "pressure");
    let txn = make_version(&a, &b, &name, "/tessera/p");
    a.txn_decide(txn, false, vec!["rank 1 ran out of memory".into()])
        .unwrap();
    for m in [&a, &b] {
        m.txn_join(None).unwrap();
    }
    assert_eq!(
        reader.cat_lookup(&name, None).unwrap_err().errno,
        Errno::NoEnt
    );
    // The next version that commits is the first.
    let txn = make_version(&a, &b, &name, "/tessera/p");
    a.txn_decide(txn, true, Vec::new()).unwrap();
    assert_eq!(reader.cat_lookup(&name, None).unwrap().version, 1);
}

#[test]
fn a_waiter_wakes_when_the_version_it_waits_for_commits() {
    let inst = start();
    let (a, b) = (inst.client(0), inst.client(1));
    let name = name_on(1, "density");
    let waiter = {
        let c = inst.client(0);
        let name = name.clone();
        std::thread::spawn(move || c.cat_wait(&name, 1, Duration::from_secs(60)))
    };
    let txn = make_version(&a, &b, &name, "/tessera/d");
    let committed = Instant::now();
    a.txn_decide(txn, true, Vec::new()).unwrap();
    assert_eq!(waiter.join().unwrap().unwrap(), 1);
    assert!(
        committed.elapsed() < Duration::from_secs(10),
        "the waiter woke {:?} after the commit",
        committed.elapsed()
    );
    // A version already there answers at once; one that does not come times out.
    let reader = inst.client(1);
    assert_eq!(reader.cat_wait(&name, 1, Duration::ZERO).unwrap(), 1);
    let asked = Instant::now();
    let e = reader
        .cat_wait(&name, 5, Duration::from_millis(200))
        .unwrap_err();
    assert_eq!(e.errno, Errno::TimedOut, "{e}");
    assert!(e.message.contains("newest is 1"), "{e}");
    let waited = asked.elapsed();
    assert!(
        waited >= Duration::from_millis(200) && waited < Duration::from_secs(10),
        "{waited:?}"
    );
}

#[test]
fn outside_a_transaction_each_change_is_visible_at_once() {
    let inst = start();
    let (w, reader) = (inst.client(0), inst.client(1));
    let name = name_on(0, "plain");
    w.cat_create(variable(&name)).unwrap();
    assert_eq!(reader.cat_lookup(&name, None).unwrap().chunks.len(), 0);
    w.cat_add_chunk(&name, half(0, "/tessera/plain")).unwrap();
    let v = reader.cat_lookup(&name, None).unwrap();
    assert_eq!((v.version, v.chunks.len()), (1, 1));
    w.cat_delete(&name).unwrap();
    assert_eq!(
        reader.cat_lookup(&name, None).unwrap_err().errno,
        Errno::NoEnt
    );
    w.cat_create(variable(&name)).unwrap();
    assert_eq!(reader.cat_lookup(&name, None).unwrap().version, 2);
}

/// The value of element (i, j, k) of the 64 x 32 x 32 variable, as f64 bytes.
fn element(i: u64, j: u64, k: u64) -> [u8; 8] {
    (((i * 32 + j) * 32 + k) as f64).to_le_bytes()
}

#[test]
fn hyperslabs_are_read_across_chunks_written_on_both_nodes() {
    let inst = start();
    let (a, b, reader) = (inst.client(0), inst.client(1), inst.client(1));
    let name = name_on(0, "slabs");
    a.cat_create(variable(&name)).unwrap();
    // Each node's writer puts its half (32 planes) into its own file, at an offset.
    for (rank, w) in [(0u64, &a), (1, &b)] {
        let bytes: Vec<u8> = (32 * rank..32 * rank + 32)
            .flat_map(|i| (0..32).flat_map(move |j| (0..32).flat_map(move |k| element(i, j, k))))
            .collect();
        let slab = Slab {
            offsets: &[32 * rank, 0, 0],
            counts: &[32, 32, 32],
        };
        w.cat_put(&name, slab, &bytes, &format!("/tessera/slabs.{rank}"), 4096)
            .unwrap();
    }
    // A block across both halves, a column of each plane: a run per row, from both files.
    let (offsets, counts) = ([20u64, 3, 5], [24u64, 7, 2]);
    let mut buf = vec![0u8; 24 * 7 * 2 * 8];
    let view = reader
        .cat_get(
            &name,
            None,
            Slab {
                offsets: &offsets,
                counts: &counts,
            },
            &mut buf,
        )
        .unwrap();
    assert_eq!(view.version, 1);
    let want: Vec<u8> = (20..44)
        .flat_map(|i| (3..10).flat_map(move |j| (5..7).flat_map(move |k| element(i, j, k))))
        .collect();
    assert_eq!(buf, want);
    // A buffer of the wrong size, and a region past the dimensions, are refused.
    let region = Slab {
        offsets: &[0, 0, 0],
        counts: &[1, 1, 2],
    };
    let e = reader
        .cat_get(&name, None, region, &mut [0u8; 8])
        .unwrap_err();
    assert!(
        e.errno == Errno::Inval && e.message.contains("give 16 bytes"),
        "{e}"
    );
    let past = Slab {
        offsets: &[60, 0, 0],
        counts: &[5, 1, 1],
    };
    let e = reader
        .cat_get(&name, None, past, &mut [0u8; 40])
        .unwrap_err();
    assert!(
        e.errno == Errno::Inval && e.message.contains("reaches past"),
        "{e}"
    );
    // A version holding one half only: the other half's elements are missing, not zeros.
    let half_only = name_on(1, "half");
    a.cat_create(variable(&half_only)).unwrap();
    let chunk = Chunk {
        offset: 4096,
        ..half(0, "/tessera/slabs.0")
    };
    a.cat_add_chunk(&half_only, chunk).unwrap();
    let across = Slab {
        offsets: &[30, 0, 0],
        counts: &[4, 1, 1],
    };
    let e = reader
        .cat_get(&half_only, None, across, &mut [0u8; 32])
        .unwrap_err();
    assert!(
        e.errno == Errno::NoData && e.message.contains("holds 2 of the 4 elements"),
        "{e}"
    );
}

#[test]
fn bad_catalogue_calls_are_refused_naming_what_is_wrong() {
    let inst = start();
    let (a, b) = (inst.client(0), inst.client(1));
    let name = name_on(1, "bad");
    let txn = open_joined(&a, &[&a, &b]);
    // Chunks go to a version this transaction creates.
    let e = a.cat_add_chunk(&name, half(0, "/tessera/b")).unwrap_err();
    assert_eq!(e.errno, Errno::Inval);
    assert!(e.message.contains("create it first"), "{e}");
    let mut v = variable(&name);
    v.dims = vec![0, 4];
    let e = a.cat_create(v).unwrap_err();
    assert!(e.message.contains("none 0"), "{e}");
    let mut v = variable(&name);
    v.name = String::new();
    assert_eq!(a.cat_create(v).unwrap_err().errno, Errno::Inval);
    a.cat_create(variable(&name)).unwrap();
    let e = a.cat_create(variable(&name)).unwrap_err();
    assert_eq!(e.errno, Errno::Exist, "{e}");
    let mut outside = half(1, "/tessera/b");
    outside.offsets[0] = 40;
    let e = b.cat_add_chunk(&name, outside).unwrap_err();
    assert!(e.message.contains("reaches past"), "{e}");
    let mut short = half(1, "/tessera/b");
    short.len = 8;
    let e = b.cat_add_chunk(&name, short).unwrap_err();
    assert!(e.message.contains("not 8"), "{e}");
    let e = b.cat_delete(&name_on(0, "never")).unwrap_err();
    assert_eq!(e.errno, Errno::NoEnt, "{e}");
    a.txn_decide(txn, true, Vec::new()).unwrap();
    // After the decision the transaction takes no more entries.
    let e = b.cat_add_chunk(&name, half(1, "/tessera/b")).unwrap_err();
    assert!(e.message.contains("already decided"), "{e}");
    let e = inst.client(0).cat_lookup(&name, Some(7)).unwrap_err();
    assert!(e.message.contains("versions: [1]"), "{e}");
}

#[test]
fn entries_survive_a_restart_and_a_decision_reaches_a_node_that_died_before_completing() {
    let inst = start();
    let name = name_on(1, "kept");
    let (a, b) = (inst.client(0), inst.client(1));
    let txn = make_version(&a, &b, &name, "/tessera/k.v1");
    a.txn_decide(txn, true, Vec::new()).unwrap();
    drop((a, b));
    // Node 1 holds the variable; it dies when the decision of the next version arrives.
    inst.kill9(1);
    inst.restart_with(1, &[("TESSERA_FAILPOINT", "shard-before-complete")]);
    let v1 = inst.client(0).cat_lookup(&name, None).unwrap();
    assert_eq!((v1.version, v1.chunks.len()), (1, 2));
    let (a, b) = (inst.client(0), inst.client(1));
    let txn = open_joined(&a, &[&a, &b]);
    b.cat_create(variable(&name)).unwrap();
    b.cat_add_chunk(&name, half(1, "/tessera/k.v2")).unwrap();
    // The decision is durable at the home before node 1 dies on its completion.
    a.txn_decide(txn, true, Vec::new()).unwrap();
    inst.restart(1);
    // Asked as soon as node 1 is back, the catalogue shows the decided version whole.
    let reader = inst.client(0);
    let v2 = reader.cat_lookup(&name, None).unwrap();
    assert_eq!((v2.version, v2.chunks), (2, vec![half(1, "/tessera/k.v2")]));
    assert_eq!(reader.cat_lookup(&name, Some(1)).unwrap(), v1);
}

#[test]
fn the_vars_command_lists_shows_and_waits_for_committed_versions() {
    let inst = start();
    let (a, b) = (inst.client(0), inst.client(1));
    let name = name_on(1, "pressure");
    let text = |o: &std::process::Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    std::thread::scope(|s| {
        // A workflow's next stage waits for the first version before it starts.
        let waiter = s.spawn(|| inst.tessera(&["vars", "wait", &name, "--timeout", "60s"]));
        let txn = make_version(&a, &b, &name, "/tessera/p.v1");
        a.txn_decide(txn, true, Vec::new()).unwrap();
        let out = waiter.join().unwrap();
        assert!(out.status.success(), "{}", text(&out));
        assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{name} 1\n"));
    });
    let out = inst.tessera(&["vars", "list"]);
    assert!(out.status.success(), "{}", text(&out));
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        listed
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == [name.as_str(), "1"]),
        "{listed}"
    );
    // The next version commits; the first still shows exactly its own chunks.
    let txn = open_joined(&a, &[&a, &b]);
    b.cat_create(variable(&name)).unwrap();
    b.cat_add_chunk(&name, half(1, "/tessera/p.v2")).unwrap();
    a.txn_decide(txn, true, Vec::new()).unwrap();
    let out = inst.tessera(&["vars", "show", &name]);
    assert!(out.status.success(), "{}", text(&out));
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.starts_with(&format!(
            "{name}  version 2  f64 (8 bytes each)  dims 64x32x32  1 chunk(s), 256.0 KiB\n"
        )),
        "{shown}"
    );
    assert!(shown.contains("/tessera/p.v2"), "{shown}");
    let out = inst.tessera(&["vars", "show", &name, "--version", "1", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let v1: tessera_client::VersionView = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (v1.version, v1.chunks),
        (1, vec![half(0, "/tessera/p.v1"), half(1, "/tessera/p.v1")])
    );
    let out = inst.tessera(&["vars", "list", "--json"]);
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        rows.as_array()
            .unwrap()
            .contains(&serde_json::json!({ "name": name, "version": 2 })),
        "{rows}"
    );
    // A version that does not come: exit status 124, saying how far the variable got.
    let asked = Instant::now();
    let out = inst.tessera(&[
        "vars",
        "wait",
        &name,
        "--version",
        "5",
        "--timeout",
        "300ms",
    ]);
    assert_eq!(out.status.code(), Some(124), "{}", text(&out));
    assert!(text(&out).contains("newest is 2"), "{}", text(&out));
    assert!(asked.elapsed() >= Duration::from_millis(300));
    // Bad calls name what is wrong.
    let out = inst.tessera(&["vars", "show", "no-such-variable"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("tessera vars list"), "{}", text(&out));
    let out = inst.tessera(&["vars", "wait", &name, "--timeout", "soon"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("'soon' is not a duration"),
        "{}",
        text(&out)
    );
}
