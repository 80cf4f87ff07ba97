//! No lost data when a daemon restarts: `kill -9` a daemon in the middle of a workload,
//! restart it, and read back everything that had been attached.

mod common;

use common::Inst;
use std::collections::BTreeMap;
use tessera_cli::script::{Cmd, pattern_byte};
use tessera_client::Model;

const CHUNK: u64 = 4096;
const WRITERS: u64 = 3;

fn chunk_off(i: u64, w: u64) -> u64 {
    (i * WRITERS + w) * CHUNK
}

fn id_of(i: u64, w: u64) -> u32 {
    (i * WRITERS + w + 1) as u32
}

#[test]
fn killed_daemon_restarts_with_everything_attached() {
    // Small stripes spread the file's ownership over every daemon, the dead one included.
    let inst = Inst::start_with(3, &["--stripe-size", "16384"]);
    let path = "/tessera/restart";
    let mut writers: Vec<_> = (0..WRITERS as u32).map(|n| inst.rank(n)).collect();
    for w in writers.iter_mut() {
        w.ok(&Cmd::Open {
            path: path.into(),
            model: Model::Commit,
            read: true,
            write: true,
            create: true,
        });
    }
    // committed[w] = chunks whose commit was acknowledged.
    let mut committed: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    let mut pending: Vec<(u64, u64)> = Vec::new();
    for i in 0..40u64 {
        if i == 20 {
            // Mid-workload: the daemon of node 1 dies without warning.
            inst.kill9(1);
        }
        if i == 26 {
            inst.restart(1);
        }
        for (w, r) in writers.iter_mut().enumerate() {
            let w = w as u64;
            if (20..26).contains(&i) && r.node == 1 {
                // The writer of the dead node waits (its next call reconnects transparently).
                continue;
            }
            r.ok(&Cmd::Write {
                off: chunk_off(i, w),
                len: CHUNK,
                id: id_of(i, w),
            });
            let reply = r.run(&Cmd::Commit);
            if reply.ok {
                committed.entry(w).or_default().push(i);
                // A successful commit attaches everything not yet attached, earlier failures too.
                committed
                    .get_mut(&w)
                    .unwrap()
                    .extend(pending.iter().filter(|(pw, _)| *pw == w).map(|(_, c)| *c));
                pending.retain(|(pw, _)| *pw != w);
            } else {
                assert!(
                    (20..26).contains(&i),
                    "commit failed while every daemon was up: {reply:?}"
                );
                assert_eq!(reply.errno.as_deref(), Some("EHOSTDOWN"), "{reply:?}");
                pending.push((w, i));
            }
        }
    }
    assert!(
        pending.is_empty(),
        "commits after the restart must publish earlier failures: {pending:?}"
    );
    let total: usize = committed.values().map(Vec::len).sum();
    assert_eq!(
        total,
        40 * WRITERS as usize - 6,
        "every written chunk must end up committed"
    );
    drop(writers);

    // Fresh readers on every node read every chunk.
    for n in 0..3 {
        let mut reader = inst.rank(n);
        reader.ok(&Cmd::Open {
            path: path.into(),
            model: Model::Commit,
            read: true,
            write: false,
            create: false,
        });
        for (w, chunks) in &committed {
            for i in chunks {
                let off = chunk_off(*i, *w);
                let want: Vec<u8> = (off..off + CHUNK)
                    .map(|o| pattern_byte(id_of(*i, *w), o))
                    .collect();
                assert_eq!(
                    reader.read(off, CHUNK),
                    want,
                    "chunk {i} of writer {w} read on node {n}"
                );
            }
        }
    }
}

/// A restarted daemon keeps its namespace and hands out fresh client ids.
#[test]
fn namespace_survives_kill_and_restart() {
    let inst = Inst::start(2);
    let c = inst.client(0);
    c.mkdir("/tessera/d", 0o755).unwrap();
    for i in 0..20 {
        let mut f = c.create(&format!("/tessera/d/f{i}")).unwrap();
        f.write_at(&[i as u8; 10], 0).unwrap();
        f.close().unwrap();
    }
    let (_, id_before) = inst.client(1).identity();
    inst.kill9(0);
    inst.kill9(1);
    inst.restart(0);
    inst.restart(1);
    let c = inst.client(0);
    let names: Vec<String> = c
        .readdir("/tessera/d")
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names.len(), 20);
    for i in 0..20 {
        let mut f = c.open_read(&format!("/tessera/d/f{i}")).unwrap();
        let mut buf = [0u8; 10];
        f.read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(buf, [i as u8; 10]);
    }
    let (_, id_after) = inst.client(1).identity();
    assert!(
        id_after > id_before,
        "client ids must not be reused after a restart"
    );
}

/// A torn index tail left by a crash is reported by the daemon at startup and never used.
#[test]
fn torn_index_tail_is_reported_at_startup() {
    let inst = Inst::start(1);
    let c = inst.client(0);
    let mut f = c.create("/tessera/torn").unwrap();
    f.write_at(b"kept", 0).unwrap();
    f.close().unwrap();
    let (_, client) = c.identity();
    let cfg = c.config();
    let (_, index) = cfg.log_paths(0, client);
    drop(c);
    inst.kill9(0);
    // A crash mid-append leaves half a record behind.
    let mut bytes = std::fs::read(&index).unwrap();
    bytes.extend_from_slice(&[0xab; 20]);
    std::fs::write(&index, &bytes).unwrap();
    inst.restart(0);
    let log = inst.log_after_check(0);
    assert!(log.contains("torn tail of 20 bytes"), "{log}");
    let c = inst.client(0);
    let mut r = c.open_read("/tessera/torn").unwrap();
    let mut buf = [0u8; 4];
    r.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"kept");
}

/// A daemon holding leased copies dies: changes to those stripes wait for the leases to end
/// (not forever), and readers then see them.
#[test]
fn changes_wait_out_the_leases_of_a_dead_holder() {
    let inst = Inst::start_with(3, &["--stripe-size", "65536"]);
    let w = inst.client(2);
    let mut f = w
        .open(
            "/tessera/lease",
            tessera_client::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .model(Model::Commit),
        )
        .unwrap();
    f.write_at(&vec![1u8; 1 << 20], 0).unwrap();
    f.commit().unwrap();
    {
        // Node 0 caches remote stripes while this reader reads.
        let r = inst.client(0);
        let mut g = r
            .open(
                "/tessera/lease",
                tessera_client::OpenOptions::new()
                    .read(true)
                    .model(Model::Commit),
            )
            .unwrap();
        let mut buf = vec![0u8; 1 << 20];
        g.read_exact_at(&mut buf, 0).unwrap();
    }
    inst.kill9(0);
    let t = std::time::Instant::now();
    f.write_at(&vec![2u8; 1 << 20], 0).unwrap();
    let r = f.commit();
    let waited = t.elapsed();
    // Stripes on node 0 itself cannot be attached while it is down; the others complete
    // once node 0's leases have run out.
    assert!(
        waited < std::time::Duration::from_secs(10),
        "changes waited {waited:?}"
    );
    inst.restart(0);
    if let Err(e) = r {
        // Only the stripes held by the node that was down can have failed.
        assert!(
            matches!(
                e.errno,
                tessera_client::Errno::HostDown | tessera_client::Errno::ConnRefused
            ),
            "a commit while node 0 was down: {e}"
        );
        f.commit().unwrap();
    }
    let r = inst.client(1);
    let mut g = r
        .open(
            "/tessera/lease",
            tessera_client::OpenOptions::new()
                .read(true)
                .model(Model::Commit),
        )
        .unwrap();
    let mut buf = vec![0u8; 1 << 20];
    g.read_exact_at(&mut buf, 0).unwrap();
    assert!(buf.iter().all(|b| *b == 2));
}
