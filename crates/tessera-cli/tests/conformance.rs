//! Conformance of the four consistency models, after the formal framework of Wang, Mohror and Snir (§4).
//!
//! Random programs of several processes write and read overlapping ranges of one file. A
//! program runs in phases separated by a barrier (the test driver waits for every process:
//! a happens-before edge made of messages, outside the file system). Within a phase no two
//! processes conflict. Between phases, every conflict gets exactly the model's minimum
//! synchronisation construct (MSC):
//!
//! | model   | MSC between a write by p and a later conflicting access by q |
//! |---------|----------------------------------------------------------------|
//! | posix   | hb (the barrier)                                               |
//! | commit  | p: commit -> hb -> q                                           |
//! | session | p: session_close -> hb -> q: session_open                      |
//! | mpiio   | p: sync -> hb -> q: sync                                       |
//!
//! Every read must return the bytes of the happens-before-latest write, computed by a model
//! that replays the program in phase order. Processes are real `tessera script` processes
//! spread over 3 daemons (two share node 0, so same-node and remote reads both occur).
//!
//! `TESSERA_CONFORMANCE_PROGRAMS` sets the programs per model (default 200).

mod common;

use common::{Inst, Rank};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tessera_cli::script::{Cmd, pattern_byte};
use tessera_client::Model;

const PROCS: usize = 4;
const SPACE: u64 = 384;
const PHASES: usize = 6;
/// Programs run by one set of processes before fresh ones are spawned.
const PROGRAMS_PER_BATCH: usize = 25;

#[derive(Clone, Debug)]
enum Op {
    Write { off: u64, len: u64, id: u32 },
    Read { off: u64, len: u64 },
}

impl Op {
    fn range(&self) -> (u64, u64) {
        match *self {
            Op::Write { off, len, .. } | Op::Read { off, len } => (off, off + len),
        }
    }
    fn is_write(&self) -> bool {
        matches!(self, Op::Write { .. })
    }
}

/// What one process does in one phase, synchronisation included.
#[derive(Clone, Debug, Default)]
struct Step {
    /// Reader-side sync before the phase's operations (session_open / sync / reopen).
    reader_sync: Option<Cmd>,
    ops: Vec<Op>,
    /// Writer-side sync after them (commit / session_close / sync).
    writer_sync: Option<Cmd>,
}

#[derive(Debug)]
struct Program {
    /// phases[k][p]
    phases: Vec<Vec<Step>>,
}

fn overlaps(a: (u64, u64), b: (u64, u64)) -> bool {
    a.0 < b.1 && b.0 < a.1
}

/// Generates a program: random conflict-free phases, then the model's MSCs.
fn generate(rng: &mut StdRng, model: Model) -> Program {
    let mut next_id = 2; // id 1 is the initial contents
    let mut phases: Vec<Vec<Step>> = Vec::new();
    for _ in 0..PHASES {
        let mut steps: Vec<Step> = vec![Step::default(); PROCS];
        for (p, step) in steps.iter_mut().enumerate() {
            let _ = p;
            let n = rng.random_range(0..=3);
            for _ in 0..n {
                let off = rng.random_range(0..SPACE);
                let len = rng.random_range(1..=48.min(SPACE - off));
                let op = if rng.random_bool(0.5) {
                    next_id += 1;
                    Op::Write {
                        off,
                        len,
                        id: next_id,
                    }
                } else {
                    Op::Read { off, len }
                };
                step.ops.push(op);
            }
        }
        // Drop operations that conflict with another process's operation in the same phase.
        for p in 0..PROCS {
            let others: Vec<Op> = steps
                .iter()
                .enumerate()
                .filter(|(q, _)| *q < p)
                .flat_map(|(_, s)| s.ops.clone())
                .collect();
            steps[p].ops.retain(|op| {
                !others
                    .iter()
                    .any(|o| (o.is_write() || op.is_write()) && overlaps(o.range(), op.range()))
            });
        }
        phases.push(steps);
    }
    insert_mscs(&mut phases, model);
    Program { phases }
}

/// Inserts the minimum synchronisation constructs of `model` for every cross-process conflict.
fn insert_mscs(phases: &mut [Vec<Step>], model: Model) {
    let (writer_cmd, reader_cmd) = match model {
        Model::Posix => return,
        Model::Commit => (Cmd::Commit, None),
        Model::Session => (Cmd::SessionClose, Some(Cmd::SessionOpen)),
        Model::MpiIo => (Cmd::Sync, Some(Cmd::Sync)),
    };
    let n = phases.len();
    // Writer side: p syncs after phase k if a byte it wrote there is accessed by another
    // process in a later phase.
    for k in 0..n {
        for p in 0..PROCS {
            let writes: Vec<(u64, u64)> = phases[k][p]
                .ops
                .iter()
                .filter(|o| o.is_write())
                .map(Op::range)
                .collect();
            let later_conflict = phases[k + 1..].iter().any(|ph| {
                ph.iter().enumerate().any(|(q, s)| {
                    q != p
                        && s.ops
                            .iter()
                            .any(|o| writes.iter().any(|w| overlaps(*w, o.range())))
                })
            });
            if later_conflict {
                phases[k][p].writer_sync = Some(writer_cmd.clone());
            }
        }
    }
    // Reader side: q syncs before phase m if it accesses a byte another process wrote in a
    // phase k with k >= the phase of q's last reader sync (its open counts as one before 0).
    let Some(reader_cmd) = reader_cmd else { return };
    for q in 0..PROCS {
        let mut last_sync: isize = -1;
        for m in 0..n {
            let needs = phases[m][q].ops.iter().any(|o| {
                (0..m).any(|k| {
                    k as isize >= last_sync
                        && phases[k].iter().enumerate().any(|(p, s)| {
                            p != q
                                && s.ops
                                    .iter()
                                    .any(|w| w.is_write() && overlaps(w.range(), o.range()))
                        })
                })
            });
            if needs {
                phases[m][q].reader_sync = Some(reader_cmd.clone());
                last_sync = m as isize;
            }
        }
    }
}

/// Runs a program on `ranks` against file `path` and checks every read against the model.
fn run_program(ranks: &mut [Rank], path: &str, prog: &Program, model: Model, seed: u64) {
    // Setup: process 0 writes the whole space (id 1) and publishes it; then everyone opens.
    let r0 = &mut ranks[0];
    r0.ok(&Cmd::Open {
        path: path.into(),
        model,
        read: true,
        write: true,
        create: true,
    });
    r0.ok(&Cmd::Write {
        off: 0,
        len: SPACE,
        id: 1,
    });
    r0.ok(&Cmd::Close);
    for r in ranks.iter_mut() {
        r.ok(&Cmd::Open {
            path: path.into(),
            model,
            read: true,
            write: true,
            create: false,
        });
    }
    let mut state: Vec<u8> = (0..SPACE).map(|o| pattern_byte(1, o)).collect();
    for (k, phase) in prog.phases.iter().enumerate() {
        // Send each process its whole step, so processes run concurrently...
        for (p, step) in phase.iter().enumerate() {
            let r = &mut ranks[p];
            if let Some(c) = &step.reader_sync {
                r.send(c);
            }
            for op in &step.ops {
                r.send(&match *op {
                    Op::Write { off, len, id } => Cmd::Write { off, len, id },
                    Op::Read { off, len } => Cmd::Read { off, len },
                });
            }
            if let Some(c) = &step.writer_sync {
                r.send(c);
            }
        }
        // ...then collect the replies (the barrier) and check the reads in model order.
        for (p, step) in phase.iter().enumerate() {
            let r = &mut ranks[p];
            let ctx = |what: &str, reply: &tessera_cli::script::Reply| {
                assert!(
                    reply.ok,
                    "seed {seed} {model}: phase {k} process {p}: {what} failed: {reply:?}\nprogram: {prog:#?}"
                );
            };
            if step.reader_sync.is_some() {
                ctx("reader sync", &r.recv());
            }
            for op in &step.ops {
                let reply = r.recv();
                ctx(&format!("{op:?}"), &reply);
                match *op {
                    Op::Write { off, len, id } => {
                        for o in off..off + len {
                            state[o as usize] = pattern_byte(id, o);
                        }
                    }
                    Op::Read { off, len } => {
                        let got = common::decode_hex(reply.data.as_deref().unwrap_or(""));
                        let want = &state[off as usize..(off + len) as usize];
                        if got != want {
                            let first = got
                                .iter()
                                .zip(want)
                                .position(|(a, b)| a != b)
                                .unwrap_or(got.len().min(want.len()));
                            panic!(
                                "seed {seed} {model}: phase {k} process {p} read [{off},{}) differs from the happens-before-latest write at byte {} (got {:?}, want {:#04x}; {} bytes returned)\nprogram: {prog:#?}",
                                off + len,
                                off + first as u64,
                                got.get(first),
                                want[first],
                                got.len()
                            );
                        }
                    }
                }
            }
            if step.writer_sync.is_some() {
                ctx("writer sync", &r.recv());
            }
        }
    }
    for r in ranks.iter_mut() {
        r.ok(&Cmd::Close);
    }
}

fn programs_per_model() -> usize {
    std::env::var("TESSERA_CONFORMANCE_PROGRAMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200)
}

fn conformance(model: Model) {
    let inst = Inst::start(3);
    conformance_of(model, programs_per_model(), &|p| inst.rank((p % 3) as u32));
}

/// Runs `total` programs of `model` on ranks made by `rank` (process `p` of a batch).
fn conformance_of(model: Model, total: usize, rank: &dyn Fn(usize) -> Rank) {
    let base_seed: u64 = std::env::var("TESSERA_CONFORMANCE_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x7e55e7a);
    let mut done = 0;
    let mut syncs = 0;
    let mut reads = 0;
    while done < total {
        let mut ranks: Vec<Rank> = (0..PROCS).map(rank).collect();
        for _ in 0..PROGRAMS_PER_BATCH.min(total - done) {
            let seed = base_seed ^ ((model as u64) << 32) ^ done as u64;
            let mut rng = StdRng::seed_from_u64(seed);
            let prog = generate(&mut rng, model);
            syncs += prog
                .phases
                .iter()
                .flatten()
                .map(|s| {
                    usize::from(s.reader_sync.is_some()) + usize::from(s.writer_sync.is_some())
                })
                .sum::<usize>();
            reads += prog
                .phases
                .iter()
                .flatten()
                .flat_map(|s| &s.ops)
                .filter(|o| !o.is_write())
                .count();
            run_program(
                &mut ranks,
                &format!("/tessera/{model}-{done}"),
                &prog,
                model,
                seed,
            );
            done += 1;
        }
    }
    eprintln!("{model}: {done} programs, {reads} reads checked, {syncs} synchronisations inserted");
    if model != Model::Posix {
        assert!(
            syncs > 0,
            "the generator never produced a conflict to synchronise"
        );
    }
}

#[test]
fn posix_programs_read_the_latest_write() {
    conformance(Model::Posix);
}

#[test]
fn commit_programs_read_the_latest_write() {
    conformance(Model::Commit);
}

#[test]
fn session_programs_read_the_latest_write() {
    conformance(Model::Session);
}

#[test]
fn mpiio_programs_read_the_latest_write() {
    conformance(Model::MpiIo);
}

/// The same programs through FUSE mounts of the model, one per node, each rank a process
/// making plain file calls on its node's mount (a commit or sync is fsync, a session close a
/// close). A quarter of the programs: each crosses the kernel twice per call.
fn conformance_through_mounts(model: Model) {
    let inst = Inst::start(3);
    let work = common::scratch(&format!("conformance-fuse-{model}"));
    let mounts: Vec<std::path::PathBuf> = (0..3)
        .map(|k| {
            let d = work.join(format!("node{k}"));
            std::fs::create_dir_all(&d).unwrap();
            let node = k.to_string();
            let out = inst.tessera(&[
                "mount",
                d.to_str().unwrap(),
                "--node",
                &node,
                "--model",
                model.name(),
            ]);
            assert!(
                out.status.success(),
                "tessera mount: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            d
        })
        .collect();
    struct Unmount<'a>(&'a Inst, &'a [std::path::PathBuf]);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            for m in self.1 {
                let _ = self.0.tessera(&["umount", "--lazy", m.to_str().unwrap()]);
            }
        }
    }
    let _unmount = Unmount(&inst, &mounts);
    let total = (programs_per_model() / 4).max(10);
    conformance_of(model, total, &|p| {
        let mut c = std::process::Command::new(common::TESSERA);
        c.arg("--instance")
            .arg(&inst.layout.dir)
            .arg("script")
            .arg("--posix-root")
            .arg(&mounts[p % 3]);
        Rank::spawn_cmd(c, (p % 3) as u32)
    });
}

#[test]
#[ignore = "needs root and /dev/fuse: scripts/test.sh runs it as root"]
fn fuse_posix_programs_read_the_latest_write() {
    conformance_through_mounts(Model::Posix);
}

#[test]
#[ignore = "needs root and /dev/fuse: scripts/test.sh runs it as root"]
fn fuse_commit_programs_read_the_latest_write() {
    conformance_through_mounts(Model::Commit);
}

#[test]
#[ignore = "needs root and /dev/fuse: scripts/test.sh runs it as root"]
fn fuse_session_programs_read_the_latest_write() {
    conformance_through_mounts(Model::Session);
}

#[test]
#[ignore = "needs root and /dev/fuse: scripts/test.sh runs it as root"]
fn fuse_mpiio_programs_read_the_latest_write() {
    conformance_through_mounts(Model::MpiIo);
}

/// Readers polling a file that committers keep extending (write, commit, repeat) see, below
/// the size they are told, only bytes that were committed: never a hole where a commit's bytes
/// already are. The size and the ownership of an append are published by different shards,
/// so a query must never return a size that covers bytes whose owners it did not return.
fn readers_race_appending_committers(model: Model) {
    const CHUNK: u64 = 4096;
    const APPENDS: u64 = 240;
    // Small stripes: appends move from shard to shard, the inode's node is another one.
    let inst = Inst::start_with(3, &["--stripe-size", "16384"]);
    let path = format!("/tessera/append-{model}");
    let open = |r: &mut Rank, create: bool| {
        r.ok(&Cmd::Open {
            path: path.clone(),
            model,
            read: true,
            write: true,
            create,
        })
    };
    let mut writer = inst.rank(1);
    open(&mut writer, true);
    let mut readers: Vec<Rank> = vec![inst.rank(0), inst.rank(2), inst.rank(1)];
    for r in readers.iter_mut() {
        open(r, false);
    }
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader_threads: Vec<_> = readers
        .into_iter()
        .map(|mut r| {
            let done = done.clone();
            std::thread::spawn(move || {
                let (mut known, mut reads, mut nonempty) = (0u64, 0u64, 0u64);
                while !done.load(std::sync::atomic::Ordering::Acquire) || reads < 20 {
                    // A window around the end this reader knows of, where appends land.
                    let off = known.saturating_sub(CHUNK);
                    let got = r.read(off, 4 * CHUNK);
                    reads += 1;
                    for (k, b) in got.iter().enumerate() {
                        let o = off + k as u64;
                        let want = pattern_byte((o / CHUNK + 1) as u32, o);
                        assert_eq!(
                            *b, want,
                            "{model}: node {} read byte {o} as {b:#04x} (want {want:#04x}) after {reads} reads; the size covered it, its commit had not (or its owners were not returned)",
                            r.node
                        );
                    }
                    nonempty += u64::from(!got.is_empty());
                    known = known.max(off + got.len() as u64);
                }
                (reads, nonempty, known)
            })
        })
        .collect();
    for i in 0..APPENDS {
        writer.ok(&Cmd::Write {
            off: i * CHUNK,
            len: CHUNK,
            id: (i + 1) as u32,
        });
        if model != Model::Posix {
            writer.ok(&Cmd::Commit);
        }
    }
    done.store(true, std::sync::atomic::Ordering::Release);
    for t in reader_threads {
        let (reads, nonempty, known) = t.join().expect("reader");
        assert!(
            nonempty > 0 && known > 0,
            "{model}: a reader never saw the file grow ({reads} reads)"
        );
    }
}

#[test]
fn commit_readers_race_appending_committers() {
    readers_race_appending_committers(Model::Commit);
}

#[test]
fn posix_readers_race_appending_writers() {
    readers_race_appending_committers(Model::Posix);
}

/// The generator's MSC placement follows the table above.
#[test]
fn msc_placement_matches_the_models() {
    let w = |off, len, id| Op::Write { off, len, id };
    let r = |off, len| Op::Read { off, len };
    let mk = || {
        let mut phases = vec![vec![Step::default(); PROCS]; 2];
        phases[0][1].ops.push(w(10, 5, 2));
        phases[1][2].ops.push(r(12, 1));
        phases[1][3].ops.push(r(100, 1)); // no conflict: no sync for process 3
        phases
    };
    let mut p = mk();
    insert_mscs(&mut p, Model::Posix);
    assert!(
        p.iter()
            .flatten()
            .all(|s| s.reader_sync.is_none() && s.writer_sync.is_none())
    );
    let mut p = mk();
    insert_mscs(&mut p, Model::Commit);
    assert_eq!(p[0][1].writer_sync, Some(Cmd::Commit));
    assert!(p[1][2].reader_sync.is_none());
    let mut p = mk();
    insert_mscs(&mut p, Model::Session);
    assert_eq!(p[0][1].writer_sync, Some(Cmd::SessionClose));
    assert_eq!(p[1][2].reader_sync, Some(Cmd::SessionOpen));
    assert!(p[1][3].reader_sync.is_none());
    let mut p = mk();
    insert_mscs(&mut p, Model::MpiIo);
    assert_eq!(
        (p[0][1].writer_sync.clone(), p[1][2].reader_sync.clone()),
        (Some(Cmd::Sync), Some(Cmd::Sync))
    );
}
