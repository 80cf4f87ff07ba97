//! Locality answers (FusionFS and Swift) on one machine with three daemons: `locate` names the node of
//! every range and whether it is in the burst buffer, the PFS copy or both; per-host totals
//! are ranked; a batch answers each path on its own and agrees with single calls; `tessera
//! where --json` carries the same. Placement on emulated hosts is tested in `hosts.rs`.

mod common;

use common::Inst;
use tessera_client::{Client, Errno, Model, OpenOptions, RangeAsk, Residence};

fn write_from(c: &Client, path: &str, off: u64, bytes: &[u8]) {
    let mut f = c
        .open(
            path,
            OpenOptions::new()
                .write(true)
                .create(true)
                .model(Model::Commit),
        )
        .unwrap();
    f.write_at(bytes, off).unwrap();
    f.commit().unwrap();
    f.close().unwrap();
}

/// (start, end, node, residence) of every extent.
fn shape(l: &tessera_client::Location) -> Vec<(u64, u64, Option<u32>, Residence)> {
    l.extents
        .iter()
        .map(|e| {
            (
                e.start,
                e.end,
                e.holder.as_ref().map(|h| h.node),
                e.residence,
            )
        })
        .collect()
}

#[test]
fn locate_names_the_node_of_every_range_and_whether_the_pfs_has_it() {
    let inst = Inst::start(3);
    let (a, b) = (inst.client(0), inst.client(2));
    // Node 0 writes 1 MiB, node 2 overwrites 64 KiB in the middle.
    write_from(&a, "/tessera/mixed", 0, &vec![1u8; 1 << 20]);
    write_from(&b, "/tessera/mixed", 256 << 10, &vec![2u8; 64 << 10]);
    let l = a.locate("/tessera/mixed", 0, None).unwrap();
    assert_eq!((l.start, l.end, l.size), (0, 1 << 20, 1 << 20));
    assert_eq!(
        shape(&l),
        vec![
            (0, 256 << 10, Some(0), Residence::BurstBuffer),
            (256 << 10, 320 << 10, Some(2), Residence::BurstBuffer),
            (320 << 10, 1 << 20, Some(0), Residence::BurstBuffer),
        ]
    );
    let e = &l.extents[1];
    let h = e.holder.as_ref().unwrap();
    assert_eq!(h.addr, inst.addr(2), "the holder's daemon address");
    assert_eq!(
        h.host,
        tessera_proto::hosts::normalize_host(&inst.host_entry(2).host)
    );
    // All daemons share this machine: one host, both nodes listed under it, most first.
    assert_eq!(l.bytes_by_host.len(), 1);
    assert_eq!(l.bytes_by_host[0].bytes, 1 << 20);
    assert_eq!(
        l.bytes_by_host[0].nodes,
        vec![(0, (1 << 20) - (64 << 10)), (2, 64 << 10)]
    );
    assert!(l.view_time_ns > 0);

    // A range is cut at the size; a range past the end is empty.
    let r = a
        .locate("/tessera/mixed", 300 << 10, Some(10 << 20))
        .unwrap();
    assert_eq!((r.start, r.end), (300 << 10, 1 << 20));
    assert_eq!(r.extents[0].holder.as_ref().unwrap().node, 2);
    let past = a.locate("/tessera/mixed", 2 << 20, Some(5)).unwrap();
    assert!(past.extents.is_empty() && past.start == past.end);

    // After a whole-file flush every byte is in both places, until the next write.
    let mut f = a.open_read("/tessera/mixed").unwrap();
    f.flush_file().unwrap();
    drop(f);
    let l = a.locate("/tessera/mixed", 0, None).unwrap();
    assert!(
        l.extents.iter().all(|e| e.residence == Residence::Both),
        "{:?}",
        shape(&l)
    );
    write_from(&b, "/tessera/mixed", 0, b"new");
    let l = a.locate("/tessera/mixed", 0, None).unwrap();
    assert!(
        l.extents
            .iter()
            .all(|e| e.residence == Residence::BurstBuffer),
        "a write after the flush: the PFS copy is no longer the whole story: {:?}",
        shape(&l)
    );

    // A file only the PFS directory holds: no node, PFS residence; a longer PFS copy than
    // the burst buffer's bytes shows both kinds.
    std::fs::write(inst.pfs().join("old"), vec![7u8; 5000]).unwrap();
    let l = a.locate("/tessera/old", 0, None).unwrap();
    assert_eq!(shape(&l), vec![(0, 5000, None, Residence::Pfs)]);
    assert_eq!(l.pfs_only_bytes, 5000);
    assert!(l.bytes_by_host.is_empty() && l.best_host().is_none());
    write_from(&b, "/tessera/old", 0, &[9u8; 1000]);
    let l = a.locate("/tessera/old", 0, None).unwrap();
    assert_eq!(
        shape(&l),
        vec![
            (0, 1000, Some(2), Residence::BurstBuffer),
            (1000, 5000, None, Residence::Pfs),
        ]
    );

    // Errors name the path and the reason.
    let e = a.locate("/tessera/none", 0, None).unwrap_err();
    assert_eq!(e.errno, Errno::NoEnt);
    assert!(e.message.contains("/tessera/none"), "{}", e.message);
    a.mkdir("/tessera/dir", 0o755).unwrap();
    let e = a.locate("/tessera/dir", 0, None).unwrap_err();
    assert_eq!(e.errno, Errno::IsDir);
    assert!(e.message.contains("directory"), "{}", e.message);
    let e = a
        .locate("/tessera/mixed", u64::MAX - 5, Some(100))
        .unwrap_err();
    assert_eq!(e.errno, Errno::FBig);
}

#[test]
fn a_strided_checkpoint_ranks_its_writers_nodes_and_a_batch_agrees_with_single_calls() {
    let inst = Inst::start(3);
    let clients: Vec<Client> = (0..3).map(|n| inst.client(n)).collect();
    // Node n writes blocks n, n+3, n+6, ... of 4 KiB; node 0 writes two blocks more.
    let blocks = 3 * 40 + 2;
    for (n, c) in clients.iter().enumerate() {
        let mut f = c
            .open(
                "/tessera/ckpt",
                OpenOptions::new()
                    .write(true)
                    .create(true)
                    .model(Model::Commit),
            )
            .unwrap();
        for k in (n as u64..blocks).step_by(3) {
            f.write_at(&[n as u8; 4096], k * 4096).unwrap();
        }
        f.commit().unwrap();
        f.close().unwrap();
    }
    let l = clients[1].locate("/tessera/ckpt", 0, None).unwrap();
    assert_eq!(l.extents.len(), blocks as usize, "one extent per block");
    for (k, e) in l.extents.iter().enumerate() {
        assert_eq!(e.holder.as_ref().unwrap().node, (k % 3) as u32);
    }
    let nodes = &l.bytes_by_host[0].nodes;
    assert_eq!(nodes, &vec![(0, 41 * 4096), (1, 41 * 4096), (2, 40 * 4096)]);

    // Many files in one call: each answered as a single call answers it, a missing one
    // fails alone, and the order is kept.
    for i in 0..200u64 {
        write_from(
            &clients[(i % 3) as usize],
            &format!("/tessera/many-{i}"),
            0,
            &vec![i as u8; 1000 + i as usize],
        );
    }
    let mut asks: Vec<RangeAsk> = (0..200)
        .map(|i| RangeAsk::file(format!("/tessera/many-{i}")))
        .collect();
    asks.insert(50, RangeAsk::file("/tessera/missing"));
    asks.push(RangeAsk::file("/tessera/ckpt"));
    let got = clients[0].locate_many(&asks, 4096).unwrap();
    assert_eq!(got.len(), asks.len());
    for (ask, answer) in asks.iter().zip(&got) {
        if ask.path.ends_with("missing") {
            assert_eq!(answer.as_ref().unwrap_err().errno, Errno::NoEnt);
            continue;
        }
        let one = clients[2].locate(&ask.path, 0, None).unwrap();
        let batch = answer.as_ref().unwrap();
        assert_eq!(shape(batch), shape(&one), "{}", ask.path);
        assert_eq!(batch.bytes_by_host, one.bytes_by_host);
        assert_eq!(batch.path, ask.path);
    }
    let i = 7u64;
    let seventh = got[i as usize].as_ref().unwrap();
    assert_eq!(seventh.size, 1000 + i);
    assert_eq!(
        seventh.extents[0].holder.as_ref().unwrap().node,
        (i % 3) as u32
    );

    // A renamed file: its inode stays where it was made, its name moves.
    clients[0]
        .rename("/tessera/many-1", "/tessera/renamed-away")
        .unwrap();
    let l = clients[0].locate("/tessera/renamed-away", 0, None).unwrap();
    assert_eq!(l.size, 1001);
    assert_eq!(l.extents[0].holder.as_ref().unwrap().node, 1);

    // A listing bound: the totals stay whole.
    let cut = clients[0]
        .locate_many(&[RangeAsk::file("/tessera/ckpt")], 5)
        .unwrap()
        .pop()
        .unwrap()
        .unwrap();
    assert_eq!(cut.extents.len(), 5);
    assert_eq!(cut.more_from, Some(5 * 4096));
    assert_eq!(cut.bytes_by_host, l_hosts(&clients[0]));
}

fn l_hosts(c: &Client) -> Vec<tessera_client::HostBytes> {
    c.locate("/tessera/ckpt", 0, None).unwrap().bytes_by_host
}

#[test]
fn where_json_answers_schedulers_and_fails_only_the_missing_paths() {
    let inst = Inst::start(2);
    write_from(&inst.client(1), "/tessera/a", 0, &vec![3u8; 70_000]);
    write_from(&inst.client(0), "/tessera/b", 0, &[4u8; 10]);
    let out = inst.tessera(&[
        "where",
        "--json",
        "/tessera/a",
        "/tessera/nope",
        "/tessera/b",
    ]);
    assert!(!out.status.success(), "a missing path fails the command");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("1 of 3 paths"), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let files = v["files"].as_array().unwrap();
    assert_eq!(files.len(), 3);
    assert_eq!(files[0]["path"], "/tessera/a");
    assert_eq!(files[0]["size"], 70_000);
    assert_eq!(files[0]["extents"][0]["holder"]["node"], 1);
    assert_eq!(files[0]["extents"][0]["residence"], "burst_buffer");
    assert_eq!(files[0]["bytes_by_host"][0]["bytes"], 70_000);
    assert!(files[0]["view_time_ns"].as_i64().unwrap() > 0);
    assert_eq!(files[1]["error"]["errno"], "ENOENT");
    assert_eq!(files[2]["extents"][0]["holder"]["node"], 0);
    // A range, with size suffixes.
    let out = inst.tessera(&["where", "--offset", "64k", "--length", "1k", "/tessera/a"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("bytes 65536..66560"), "{text}");
    assert!(text.contains("node 1 on"), "{text}");
    // The forwarded no-op a locate is measured against.
    let c = inst.client(0);
    assert_eq!(c.forward_ping(1).unwrap(), 1);
    assert_eq!(c.forward_ping(7).unwrap_err().errno, Errno::Inval);
}

#[test]
fn run_places_each_task_on_the_node_of_its_input_and_collects_exit_codes() {
    let inst = Inst::start(3);
    for n in 0..3u32 {
        write_from(
            &inst.client(n),
            &format!("/tessera/in{n}"),
            0,
            &vec![n as u8; 100_000 * (n as usize + 1)],
        );
    }
    let dir = common::scratch("run");
    let stats = dir.join("stats.jsonl");
    let report = dir.join("report.json");
    // `cat` runs under the interposer and records where its reads came from; the last task
    // fails on purpose.
    let out = std::process::Command::new(common::TESSERA)
        .arg("--instance")
        .arg(&inst.layout.dir)
        .args(["run", "--per-host", "2", "--report"])
        .arg(&report)
        .arg("cat {} | wc -c; test {} != /tessera/in2")
        .args(["/tessera/in0", "/tessera/in1", "/tessera/in2"])
        .env("TESSERA_STATS", &stats)
        .env_remove("TESSERA_NODE")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "one task failed: {stderr}");
    assert!(stderr.contains("3 tasks"), "{stderr}");
    assert!(stderr.contains("3/3 done"), "a progress line: {stderr}");
    assert!(
        stderr.contains("task 3 on") && stderr.contains("exit code 1"),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    for n in 0..3 {
        assert!(
            stdout.contains(&format!("{}\n", 100_000 * (n + 1))),
            "{stdout}"
        );
    }
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(r["launcher"], "local");
    assert_eq!(r["failed"], 1);
    for (n, t) in r["tasks"].as_array().unwrap().iter().enumerate() {
        assert_eq!(t["preferred_node"], n, "{t}");
        assert_eq!(t["node"], n, "{t}");
        assert_eq!(t["on_preferred"], true);
        assert_eq!(t["exit_code"], if n == 2 { 1 } else { 0 });
    }
    // Every cat read its file from its own node's logs, none through a daemon.
    let lines = common::stats_lines(&stats);
    let cats: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| l["stats"]["read"]["node_logs"].as_u64() > Some(0))
        .collect();
    assert_eq!(cats.len(), 3, "{lines:?}");
    for l in cats {
        let node = l["node"].as_u64().unwrap();
        assert_eq!(
            l["stats"]["read"]["node_logs"].as_u64().unwrap(),
            100_000 * (node + 1)
        );
        assert_eq!(l["stats"]["read"]["remote"], 0, "{l}");
    }

    // A task file; an input that does not exist places nothing and its task still runs.
    let tasks = dir.join("tasks");
    std::fs::write(
        &tasks,
        "# inputs :: command\n/tessera/in1 /tessera/in2 :: cat {} > /dev/null\n/tessera/later :: true\n",
    )
    .unwrap();
    let out = inst.tessera(&[
        "run",
        "--hard",
        "--tasks",
        tasks.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("/tessera/later"), "{stderr}");
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(r["tasks"][0]["node"], 2, "in2 has more bytes than in1");
    assert_eq!(r["tasks"][1]["preferred_node"], serde_json::Value::Null);
    // Misuse is named.
    let out = inst.tessera(&["run"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing to run"));
}

/// Migration racing a writer, under every model: the writer keeps overwriting every block of
/// a file (same process, so the owner never changes) and publishing; fresh readers on another
/// node keep migrating it. Ownership must move only where a stripe is exactly as copied, so
/// in the end every block holds the last round, now on the migrating node.
#[test]
fn migration_racing_a_writer_never_brings_back_old_bytes() {
    const BLOCK: usize = 4096;
    const BLOCKS: u64 = 48;
    const ROUNDS: u8 = 30;
    for model in [Model::Posix, Model::Commit, Model::Session, Model::MpiIo] {
        let inst = Inst::start_with(3, &["--stripe-size", "16384"]);
        let path = "/tessera/raced";
        let writer = inst.client(0);
        let mut w = writer
            .open(
                path,
                OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .model(model),
            )
            .unwrap();
        let write_round = |w: &mut tessera_client::File, r: u8| {
            for b in 0..BLOCKS {
                w.write_at(&[r; BLOCK], b * BLOCK as u64).unwrap();
            }
            w.commit().unwrap();
        };
        write_round(&mut w, 1);
        let moved_total = std::sync::atomic::AtomicU64::new(0);
        std::thread::scope(|s| {
            s.spawn(|| {
                for r in 2..=ROUNDS {
                    write_round(&mut w, r);
                }
            });
            s.spawn(|| {
                for _ in 0..15 {
                    let reader = inst.client(2);
                    let mut f = reader
                        .open(path, OpenOptions::new().read(true).model(model))
                        .unwrap();
                    let moved = f.migrate_here().unwrap();
                    moved_total.fetch_add(moved, std::sync::atomic::Ordering::Relaxed);
                }
            });
        });
        // Nothing changes any more: a last migration moves whatever the racing ones left.
        let last = inst.client(2);
        let mut f = last
            .open(path, OpenOptions::new().read(true).model(model))
            .unwrap();
        let moved = f.migrate_here().unwrap() + moved_total.into_inner();
        assert!(
            moved >= BLOCKS * BLOCK as u64,
            "{model:?}: {moved} bytes moved in all"
        );
        let fresh = inst.client(1);
        let mut r = fresh
            .open(path, OpenOptions::new().read(true).model(model))
            .unwrap();
        let mut buf = vec![0u8; BLOCK * BLOCKS as usize];
        r.read_exact_at(&mut buf, 0).unwrap();
        for (b, block) in buf.chunks(BLOCK).enumerate() {
            assert!(
                block.iter().all(|&x| x == ROUNDS),
                "{model:?}: block {b} holds round {} after the migrations",
                block[0]
            );
        }
        let l = fresh.locate(path, 0, None).unwrap();
        assert!(
            l.extents
                .iter()
                .all(|e| e.holder.as_ref().unwrap().node == 2),
            "{model:?}: every byte now on node 2"
        );
        drop(w);
    }
}

/// The log a migration moved every byte away from is removed after the grace period once its
/// writer is gone; the migrated copy keeps the bytes; `tessera migrate` says what moved.
#[test]
fn a_migrated_away_log_is_released_after_the_grace_period() {
    let inst = Inst::start_with(2, &["--set", "migrate_grace_ms=200"]);
    let bytes: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    // Written by a process that then ends (a writer still running might write again).
    let src = common::scratch("moving").join("src");
    std::fs::write(&src, &bytes).unwrap();
    common::ok_under(&inst, 0, "cp", &[src.to_str().unwrap(), "/tessera/moving"]);
    // The writer (`cp`) wrote this file only: its log on node 0 goes with it.
    let log_dir = inst.layout.load_config().unwrap().logs_dir(0);
    let logs = || std::fs::read_dir(&log_dir).map(|d| d.count()).unwrap_or(0);
    assert!(logs() > 0, "the writer's log is on node 0");
    let out = std::process::Command::new(common::TESSERA)
        .arg("--instance")
        .arg(&inst.layout.dir)
        .args(["migrate", "/tessera/moving"])
        .env("TESSERA_NODE", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("moved to node 1"), "{text}");
    tessera_testkit::eventually_ok(
        std::time::Duration::from_secs(20),
        "the log on node 0 released",
        || match logs() {
            0 => Ok(()),
            _ => Err(std::fs::read_dir(&log_dir)
                .map(|d| d.flatten().map(|e| e.file_name()).collect::<Vec<_>>())),
        },
    );
    let c = inst.client(0);
    let mut f = c.open_read("/tessera/moving").unwrap();
    let mut got = vec![0u8; bytes.len()];
    f.read_exact_at(&mut got, 0).unwrap();
    assert!(got == bytes, "the migrated copy holds the bytes");
    assert_eq!(
        c.stats().read.remote,
        bytes.len() as u64,
        "read from node 1 now"
    );
}

/// A flush of the file ends the grace of the logs a migration moved it away from: with a grace
/// of ten minutes, the old log still goes right after the flush.
#[test]
fn a_flush_ends_the_grace_of_migrated_away_logs() {
    let inst = Inst::start_with(2, &["--set", "migrate_grace_ms=600000"]);
    let src = common::scratch("flushed-away").join("src");
    std::fs::write(&src, vec![5u8; 200_000]).unwrap();
    common::ok_under(&inst, 0, "cp", &[src.to_str().unwrap(), "/tessera/flushed"]);
    let c = inst.client(1);
    let log_dir = inst.layout.load_config().unwrap().logs_dir(0);
    let logs = || std::fs::read_dir(&log_dir).map(|d| d.count()).unwrap_or(0);
    let mut f = c.open_read("/tessera/flushed").unwrap();
    assert_eq!(f.migrate_here().unwrap(), 200_000);
    assert!(logs() > 0, "kept for the grace period");
    f.flush_file().unwrap();
    tessera_testkit::eventually(
        std::time::Duration::from_secs(20),
        "the flush ends the grace of node 0's log",
        || logs() == 0,
    );
    assert_eq!(
        std::fs::read(inst.pfs().join("flushed")).unwrap(),
        vec![5u8; 200_000]
    );
}

/// `TESSERA_MIGRATE=open` through the interposer: an unmodified `cat` on node 1 of a file node 0
/// wrote copies its bytes to node 1 as it opens it, prints them whole, and `locate` then names
/// node 1 for every range. Opens for writing stay where they are; a policy the interposer does
/// not know is named in the message and changes nothing.
#[test]
fn an_unmodified_reader_migrates_the_file_it_opens() {
    let inst = Inst::start(2);
    let bytes: Vec<u8> = (0..200_000u32).map(|i| (i % 241) as u8).collect();
    let src = common::scratch("migrate-open").join("src");
    std::fs::write(&src, &bytes).unwrap();
    common::ok_under(&inst, 0, "cp", &[src.to_str().unwrap(), "/tessera/opened"]);
    let c = inst.client(0);
    let nodes = |c: &Client| -> Vec<Option<u32>> {
        let l = c.locate("/tessera/opened", 0, None).unwrap();
        l.extents
            .iter()
            .map(|e| e.holder.as_ref().map(|h| h.node))
            .collect()
    };
    assert_eq!(nodes(&c), vec![Some(0)], "written on node 0");

    // An unknown policy: said so, and the bytes stay on node 0.
    let out = common::under(&inst, 1, "cat", &["/tessera/opened"])
        .env("TESSERA_MIGRATE", "eager")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(out.stdout == bytes, "cat printed the file");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("TESSERA_MIGRATE=eager") && err.contains("use open"),
        "{err}"
    );
    assert_eq!(nodes(&c), vec![Some(0)], "an unknown policy moves nothing");

    // Runs a command on node 1 with migration on open; it must succeed.
    let migrating = |prog: &str, args: &[&str]| {
        common::succeeded(common::under(&inst, 1, prog, args).env("TESSERA_MIGRATE", "open"))
    };
    // A write open on node 1 does not migrate either.
    migrating("sh", &["-c", "echo >> /tessera/opened"]);
    let l = c.locate("/tessera/opened", 0, None).unwrap();
    assert_eq!(
        shape(&l),
        vec![
            (0, 200_000, Some(0), Residence::BurstBuffer),
            (200_000, 200_001, Some(1), Residence::BurstBuffer),
        ],
        "only the appended byte is on node 1"
    );

    let out = migrating("cat", &["/tessera/opened"]);
    assert!(out.stdout[..bytes.len()] == bytes[..] && out.stdout[bytes.len()..] == *b"\n");
    assert_eq!(
        nodes(&c),
        vec![Some(1)],
        "every range is on the reader's node now"
    );
    let here = inst.client(1);
    let mut f = here.open_read("/tessera/opened").unwrap();
    let mut got = vec![0u8; bytes.len()];
    f.read_exact_at(&mut got, 0).unwrap();
    assert!(got == bytes);
    assert_eq!(here.stats().read.remote, 0, "read locally");
}
