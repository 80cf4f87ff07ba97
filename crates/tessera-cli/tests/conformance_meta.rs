//! Conformance of stat and readdir under each consistency model: random programs of several
//! processes that extend their own files, create and remove names, stat each other's files
//! and list the directory (readdir-plus, which warms the attribute cache), in phases
//! separated by a barrier (the driver waits for every process).
//!
//! Each writer publishes at the end of every phase in which it wrote with its model's
//! construct (posix: nothing; commit: commit; session: session close; MPI-IO: sync). A
//! stat or a listing in a later phase must then report, for a file, a size at least the end
//! of every write published before the phase and at most the end of any write issued up to
//! it, and an mtime no older than the start of the last phase that wrote the file; a listing
//! must hold every name created and not removed before the phase, and none removed before it
//! or not yet created. Names created or removed by another process in the same phase may or
//! may not show. Processes are `tessera script` processes spread over 3 daemons, so stats
//! are answered by remote shards, from leased copies, and after listings.
//!
//! `TESSERA_CONFORMANCE_PROGRAMS` sets the programs per model (default 200; a quarter of
//! them here, since each phase lists and stats).

mod common;

use common::{Inst, Rank};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{SystemTime, UNIX_EPOCH};
use tessera_cli::script::Cmd;
use tessera_client::Model;

const PROCS: usize = 4;
const PHASES: usize = 6;
const PROGRAMS_PER_BATCH: usize = 10;

#[derive(Clone, Debug)]
enum Op {
    /// Writes `len` bytes at `off` of the process's own file.
    Write {
        off: u64,
        len: u64,
        id: u32,
    },
    /// Stats the file of process `of`.
    Stat {
        of: usize,
    },
    List,
    /// Creates the name `n<p>-<k>`.
    Touch {
        k: usize,
    },
    /// Removes the name `n<p>-<k>`.
    Unlink {
        k: usize,
    },
}

/// phases[m][p]: what process p does in phase m.
type Program = Vec<Vec<Vec<Op>>>;

fn generate(rng: &mut StdRng) -> Program {
    let mut id = 1;
    // Per process: the end of its file so far, the names it made, those still there.
    let mut ends = [0u64; PROCS];
    let mut made = [0usize; PROCS];
    let mut live: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); PROCS];
    let mut program = Vec::new();
    for _ in 0..PHASES {
        let mut phase = Vec::new();
        // Names made in this phase cannot be removed in it (the remover must know they are
        // there: made before the phase).
        let live_before = live.clone();
        for p in 0..PROCS {
            let mut ops = Vec::new();
            for _ in 0..rng.random_range(1..=4) {
                let op = match rng.random_range(0..10) {
                    0..=2 => {
                        let off = rng.random_range(0..=ends[p]);
                        let len = rng.random_range(1..=64);
                        ends[p] = ends[p].max(off + len);
                        id += 1;
                        Op::Write { off, len, id }
                    }
                    3..=5 => Op::Stat {
                        of: rng.random_range(0..PROCS),
                    },
                    6 => Op::List,
                    7 | 8 => {
                        made[p] += 1;
                        live[p].insert(made[p]);
                        Op::Touch { k: made[p] }
                    }
                    _ => match live_before[p].iter().find(|k| live[p].contains(k)) {
                        Some(&k) => {
                            live[p].remove(&k);
                            Op::Unlink { k }
                        }
                        None => Op::List,
                    },
                };
                ops.push(op);
            }
            phase.push(ops);
        }
        program.push(phase);
    }
    program
}

/// What the driver knows of the file system at a point of the program.
#[derive(Default)]
struct Known {
    /// Per process: the end of its writes published before the current phase.
    published_end: [u64; PROCS],
    /// Per process: the end of every write issued so far (up to the current phase's).
    issued_end: [u64; PROCS],
    /// Per process: the start (ns since the epoch) of the last phase it wrote in.
    wrote_at: [Option<i64>; PROCS],
    /// Names created before the current phase and not removed before it.
    names: BTreeSet<String>,
    /// Names removed before the current phase.
    gone: BTreeSet<String>,
}

fn name(p: usize, k: usize) -> String {
    format!("n{p}-{k}")
}

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after the epoch")
        .as_nanos() as i64
}

fn writer_sync(model: Model) -> Option<Cmd> {
    match model {
        Model::Posix => None,
        Model::Commit => Some(Cmd::Commit),
        Model::Session => Some(Cmd::SessionClose),
        Model::MpiIo => Some(Cmd::Sync),
    }
}

struct Ctx<'a> {
    model: Model,
    seed: u64,
    prog: &'a Program,
    dir: String,
}

impl Ctx<'_> {
    fn fail(&self, k: usize, p: usize, what: String) -> ! {
        panic!(
            "seed {} {}: phase {k} process {p}: {what}\nprogram: {:#?}",
            self.seed, self.model, self.prog
        )
    }

    /// Checks a size (and mtime, when given) reported for process q's file.
    #[allow(clippy::too_many_arguments)]
    fn check_file(
        &self,
        known: &Known,
        own_end: Option<u64>,
        k: usize,
        p: usize,
        q: usize,
        size: u64,
        mtime: Option<i64>,
        how: &str,
    ) {
        let low = known.published_end[q].max(own_end.unwrap_or(0));
        let high = known.issued_end[q];
        if size < low || size > high {
            self.fail(
                k,
                p,
                format!(
                    "{how} of f{q} reported size {size}; published before: {low}, issued up to now: {high}"
                ),
            );
        }
        if let (Some(m), Some(at)) = (mtime, known.wrote_at[q])
            && m < at
        {
            self.fail(
                k,
                p,
                format!(
                    "{how} of f{q} reported an mtime {} ns older than the phase of its last write",
                    at - m
                ),
            );
        }
    }
}

fn run_program(ranks: &mut [Rank], inst_client: &tessera_client::Client, cx: &Ctx) {
    let dir = &cx.dir;
    inst_client.mkdir(dir, 0o755).expect("mkdir");
    let file = |q: usize| format!("{dir}/f{q}");
    for (p, r) in ranks.iter_mut().enumerate() {
        r.ok(&Cmd::Open {
            path: file(p),
            model: cx.model,
            read: true,
            write: true,
            create: true,
        });
    }
    let mut known = Known::default();
    for q in 0..PROCS {
        known.names.insert(format!("f{q}"));
    }
    for (k, phase) in cx.prog.iter().enumerate() {
        let started = now_ns();
        // This phase's writes, before anyone's reply is read: concurrent, so any of them may
        // show.
        for (p, ops) in phase.iter().enumerate() {
            for op in ops {
                if let Op::Write { off, len, .. } = *op {
                    known.issued_end[p] = known.issued_end[p].max(off + len);
                }
            }
        }
        let wrote: Vec<bool> = phase
            .iter()
            .map(|ops| ops.iter().any(|o| matches!(o, Op::Write { .. })))
            .collect();
        for (p, ops) in phase.iter().enumerate() {
            let r = &mut ranks[p];
            for op in ops {
                r.send(&match *op {
                    Op::Write { off, len, id } => Cmd::Write { off, len, id },
                    Op::Stat { of } => Cmd::StatPath { path: file(of) },
                    Op::List => Cmd::List { dir: dir.clone() },
                    Op::Touch { k } => Cmd::Touch {
                        path: format!("{dir}/{}", name(p, k)),
                    },
                    Op::Unlink { k } => Cmd::Unlink {
                        path: format!("{dir}/{}", name(p, k)),
                    },
                });
            }
            if wrote[p]
                && let Some(c) = writer_sync(cx.model)
            {
                r.send(&c);
            }
        }
        // Names another process makes or removes in this phase may or may not show.
        let in_flux: BTreeSet<String> = phase
            .iter()
            .enumerate()
            .flat_map(|(p, ops)| {
                ops.iter().filter_map(move |o| match *o {
                    Op::Touch { k } | Op::Unlink { k } => Some((p, name(p, k))),
                    _ => None,
                })
            })
            .map(|(_, n)| n)
            .collect();
        for (p, ops) in phase.iter().enumerate() {
            let r = &mut ranks[p];
            let mut own_end = None::<u64>;
            let mut own_names: BTreeMap<String, bool> = BTreeMap::new();
            for op in ops {
                let reply = r.recv();
                if !reply.ok {
                    cx.fail(k, p, format!("{op:?} failed: {reply:?}"));
                }
                let data =
                    String::from_utf8(common::decode_hex(reply.data.as_deref().unwrap_or("")))
                        .expect("text");
                match *op {
                    Op::Write { off, len, .. } => {
                        own_end = Some(own_end.unwrap_or(0).max(off + len));
                    }
                    Op::Stat { of } => {
                        let (size, mtime) = data.split_once(' ').expect("SIZE MTIME");
                        let own = (of == p).then_some(own_end).flatten();
                        cx.check_file(
                            &known,
                            own,
                            k,
                            p,
                            of,
                            size.parse().expect("size"),
                            Some(mtime.parse().expect("mtime")),
                            "stat",
                        );
                    }
                    Op::List => {
                        let listed: BTreeMap<&str, &str> = data
                            .lines()
                            .map(|l| l.split_once(' ').expect("NAME SIZE"))
                            .collect();
                        for n in &known.names {
                            let removed_by_me = own_names.get(n) == Some(&false);
                            // Another process may be making or removing it right now.
                            let uncertain = in_flux.contains(n) && !own_names.contains_key(n);
                            let must_show = !removed_by_me && !uncertain;
                            if must_show && !listed.contains_key(n.as_str()) {
                                cx.fail(k, p, format!("the listing lacks {n}: {listed:?}"));
                            }
                        }
                        for (n, size) in &listed {
                            let n = n.to_string();
                            let expected = known.names.contains(&n)
                                || own_names.get(&n) == Some(&true)
                                || in_flux.contains(&n);
                            if !expected || own_names.get(&n) == Some(&false) {
                                cx.fail(
                                    k,
                                    p,
                                    format!(
                                        "the listing holds {n}, which is not there: {listed:?}"
                                    ),
                                );
                            }
                            if let Some(q) =
                                n.strip_prefix('f').and_then(|q| q.parse::<usize>().ok())
                                && *size != "-"
                            {
                                let own = (q == p).then_some(own_end).flatten();
                                cx.check_file(
                                    &known,
                                    own,
                                    k,
                                    p,
                                    q,
                                    size.parse().expect("size"),
                                    None,
                                    "listing",
                                );
                            }
                        }
                        assert!(
                            known.gone.iter().all(|g| !listed.contains_key(g.as_str())),
                            "seed {}: a removed name is listed",
                            cx.seed
                        );
                    }
                    Op::Touch { k: n } => {
                        own_names.insert(name(p, n), true);
                    }
                    Op::Unlink { k: n } => {
                        own_names.insert(name(p, n), false);
                    }
                }
            }
            if wrote[p] && writer_sync(cx.model).is_some() {
                let reply = r.recv();
                if !reply.ok {
                    cx.fail(k, p, format!("the writer's sync failed: {reply:?}"));
                }
            }
        }
        // The barrier: this phase's effects are now everyone's.
        for (p, ops) in phase.iter().enumerate() {
            for op in ops {
                match *op {
                    Op::Touch { k } => {
                        known.names.insert(name(p, k));
                    }
                    Op::Unlink { k } => {
                        known.names.remove(&name(p, k));
                        known.gone.insert(name(p, k));
                    }
                    _ => {}
                }
            }
            if wrote[p] {
                known.published_end[p] = known.issued_end[p];
                known.wrote_at[p] = Some(started);
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
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(200)
        .div_ceil(4)
}

fn conformance(model: Model) {
    let inst = Inst::start(3);
    let driver = inst.client(0);
    let total = programs_per_model();
    let mut done = 0;
    let (mut stats, mut lists) = (0, 0);
    while done < total {
        let mut ranks: Vec<Rank> = (0..PROCS).map(|p| inst.rank((p % 3) as u32)).collect();
        for _ in 0..PROGRAMS_PER_BATCH.min(total - done) {
            let seed = 0x5ea7_d1a5 ^ ((model as u64) << 32) ^ done as u64;
            let prog = generate(&mut StdRng::seed_from_u64(seed));
            for op in prog.iter().flatten().flatten() {
                stats += usize::from(matches!(op, Op::Stat { .. }));
                lists += usize::from(matches!(op, Op::List));
            }
            let cx = Ctx {
                model,
                seed,
                prog: &prog,
                dir: format!("/tessera/meta-{model}-{done}"),
            };
            run_program(&mut ranks, &driver, &cx);
            done += 1;
        }
    }
    eprintln!("{model}: {done} programs, {stats} stats and {lists} listings checked");
    assert!(
        stats > 0 && lists > 0,
        "the generator made no stat or listing"
    );
}

#[test]
fn posix_stats_and_listings_see_every_earlier_change() {
    conformance(Model::Posix);
}

#[test]
fn commit_stats_and_listings_see_every_committed_change() {
    conformance(Model::Commit);
}

#[test]
fn session_stats_and_listings_see_every_closed_session() {
    conformance(Model::Session);
}

#[test]
fn mpiio_stats_and_listings_see_every_synced_change() {
    conformance(Model::MpiIo);
}
