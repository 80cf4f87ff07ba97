//! `tessera bench txn`: D2T's protocol timings. Under mpirun, every rank runs D2T's
//! sequence of transaction calls (create, create sub-transaction, create sub-transaction all
//! x3, begin, commit sub-transaction x4, vote, commit, finalize; its Figure 5), timing each
//! call as the slowest rank saw it, an 8-byte MPI_Allreduce, and D2T's workload on a
//! fresh Tessera instance with and without transactions (`txn_workload`), all in the same
//! run; repetitions interleave them. `--model` prints the message model instead
//! (`txn_model`).

use crate::results::{Metrics, summary};
use crate::txn_workload::Mode;
use anyhow::{Context, Result, bail};
use clap::Args;
use mpi::collective::SystemOperation;
use mpi::traits::*;
use std::process::Command;

#[derive(Clone, Debug, Args)]
pub struct TxnOpts {
    /// Rank counts of the protocol timings, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = vec![4u32, 16, 64])]
    pub ranks: Vec<u32>,
    /// Print the message model at these process counts instead (comma-separated; default
    /// D2T's 256 to 65,536 when given without values).
    #[arg(long, value_delimiter = ',', num_args = 0..)]
    pub model: Option<Vec<u32>>,
    /// Repetitions of the sequence per rank count.
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// Print one JSON object with the medians as the last line.
    #[arg(long)]
    pub json: bool,
    /// Where the per-repetition records go (the report reads them there).
    #[arg(long, default_value = "results/txn")]
    pub results: std::path::PathBuf,
    /// Daemons of the workload's instance.
    #[arg(long, default_value_t = 2)]
    pub daemons: u32,
    /// Directory on the disk of the workload's instance (its burst buffer and PFS).
    #[arg(long, default_value = "/tmp")]
    pub dir: std::path::PathBuf,
}

/// The timed calls, in the sequence's order, as metric names (`<operation>_s`).
pub const OPERATIONS: [&str; 8] = [
    "create_transaction",
    "create_sub_transaction",
    "create_sub_transaction_all",
    "begin_transaction",
    "commit_sub_transaction",
    "vote_transaction",
    "commit_transaction",
    "finalize",
];

pub fn run(o: TxnOpts) -> Result<()> {
    if let Some(scales) = &o.model {
        let scales = if scales.is_empty() {
            crate::txn_model::SEED_SCALES.to_vec()
        } else {
            scales.clone()
        };
        return crate::txn_model::run(&scales, o.json);
    }
    if o.reps == 0 || o.daemons == 0 || o.ranks.is_empty() || o.ranks.contains(&0) {
        bail!("--reps, --daemons and every --ranks value must be positive");
    }
    let exe = std::env::current_exe()?;
    let mut by_ranks = serde_json::Map::new();
    let mut records = Vec::new();
    let mut first = None;
    for &p in &o.ranks {
        let root = o
            .dir
            .join(format!("tessera-txn-{:08x}", rand::random::<u32>()));
        // The scratch directory goes whether the run succeeds or not.
        let out = ranks_on_instance(&o, p, &exe, &root);
        let _ = std::fs::remove_dir_all(&root);
        let out = out?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            bail!(
                "the ranks failed ({}):\n{stdout}{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let reps: Vec<Metrics> = stdout
            .lines()
            .filter_map(|l| l.strip_prefix("txn-rep "))
            .map(serde_json::from_str)
            .collect::<Result<_, _>>()
            .context("reading the ranks' repetitions")?;
        if reps.len() != o.reps {
            bail!(
                "the ranks reported {} repetitions, not {}:\n{stdout}",
                reps.len(),
                o.reps
            );
        }
        println!(
            "txn protocol, {p} ranks{:>22}{:>13}{:>13}",
            "min", "median", "max"
        );
        let mut medians = serde_json::Map::new();
        for name in crate::results::metric_names(&reps) {
            let (lo, mid, hi) = summary(&reps, &name).expect("name comes from the reps");
            println!("{name:<36}{lo:>13.6}{mid:>13.6}{hi:>13.6}");
            medians.insert(name, serde_json::json!(mid));
        }
        first.get_or_insert_with(|| medians.clone());
        by_ranks.insert(p.to_string(), serde_json::Value::Object(medians));
        records.push(serde_json::json!({ "ranks": p, "reps": reps }));
    }
    let when = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let command = format!(
        "tessera bench txn --ranks {} --reps {} --daemons {} --dir {}",
        o.ranks
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(","),
        o.reps,
        o.daemons,
        o.dir.display()
    );
    let record = serde_json::json!({
        "workload": "txn",
        "command": command,
        "machine": crate::results::Machine::probe(&o.dir),
        "when": when,
        "runs": records,
    });
    std::fs::create_dir_all(&o.results)?;
    let file = o.results.join(format!("txn-{when}.json"));
    std::fs::write(&file, serde_json::to_string_pretty(&record)?)?;
    eprintln!("full data: {}", file.display());
    if o.json {
        let out = serde_json::json!({
            "workload": "txn",
            "metrics": first.unwrap_or_default(),
            "by_ranks": by_ranks,
        });
        println!("{out}");
    }
    Ok(())
}

/// `p` ranks under mpirun, on a fresh instance of `o.daemons` daemons in `root` (the
/// workload's).
fn ranks_on_instance(
    o: &TxnOpts,
    p: u32,
    exe: &std::path::Path,
    root: &std::path::Path,
) -> Result<std::process::Output> {
    let layout = tessera_client::InstanceLayout::new(root.join("inst"));
    tessera_cli::instance::create(
        &layout,
        &tessera_cli::instance::CreateOptions {
            daemons: o.daemons,
            pfs: root.join("pfs"),
            bb_root: Some(root.join("bb")),
            stripe_size: None,
            bb_capacity: 0,
            model: tessera_client::Model::Commit,
            state_durability: Default::default(),
            set: Vec::new(),
        },
    )?;
    tessera_cli::instance::start_all(&layout)?;
    let out = crate::front::mpirun_args(&mut Command::new("mpirun"), p)
        .arg("-x")
        .arg(format!("TESSERA_INSTANCE={}", layout.dir.display()))
        .env_remove("TESSERA_NODE")
        .arg(exe)
        .args(["txn-rank", "--reps", &o.reps.to_string()])
        .output()
        .context("starting mpirun (apt-get install openmpi-bin)");
    let stopped = tessera_cli::instance::stop_all(&layout);
    let out = out?;
    stopped?;
    Ok(out)
}

/// One rank under mpirun: `reps` repetitions of the sequence, of an 8-byte allreduce and (on
/// the instance `TESSERA_INSTANCE` names) of the workload with and without transactions;
/// rank 0 prints one `txn-rep {json}` line per repetition.
pub fn rank(reps: usize) -> Result<()> {
    let universe =
        mpi::initialize().ok_or_else(|| anyhow::anyhow!("MPI is already initialised"))?;
    let world = universe.world();
    // A rank that failed alone would leave the others in a collective: end the job.
    if let Err(e) = sequence(&world, reps) {
        eprintln!("tessera-bench txn rank {}: {e:#}", world.rank());
        world.abort(2);
    }
    Ok(())
}

/// The process ids of the instance's daemons that run on this host (`TESSERA_INSTANCE`).
fn daemon_pids() -> Vec<u32> {
    let Some(dir) = std::env::var_os("TESSERA_INSTANCE") else {
        return Vec::new();
    };
    let here = tessera_proto::hosts::this_host();
    let Ok(table) = tessera_client::InstanceLayout::new(std::path::PathBuf::from(dir)).load_hosts()
    else {
        return Vec::new();
    };
    table
        .nodes_on(&here)
        .into_iter()
        .filter_map(|n| table.get(n).map(|e| e.pid))
        .collect()
}

/// The timed repetitions (see [`rank`]).
fn sequence(world: &mpi::topology::SimpleCommunicator, reps: usize) -> Result<()> {
    let txns = tessera_txn::Transactions::init(world)?;
    // The workload's client: ranks spread over the daemons.
    let on_tessera = match std::env::var_os("TESSERA_INSTANCE") {
        Some(dir) => {
            let layout = tessera_client::InstanceLayout::new(std::path::PathBuf::from(dir));
            let nodes = layout.load_config()?.nodes;
            let client =
                tessera_client::Client::connect(layout, Some(world.rank() as u32 % nodes))?;
            let fs = tessera_txn::fs::Direct(client.clone());
            let txns = tessera_txn::Transactions::init(world)?
                .with_file_system(Some(std::rc::Rc::new(fs)));
            let plain = tessera_txn::Transactions::init(world)?.with_file_system(None);
            if world.rank() == 0 {
                client.mkdir(crate::txn_workload::ROOT, 0o755)?;
            }
            Some((client, txns, plain))
        }
        None => None,
    };
    for rep in 0..reps {
        let mut m = Metrics::new();
        let mut times = [0f64; OPERATIONS.len()];
        let mut timed = |i: usize, f: &mut dyn FnMut() -> Result<()>| -> Result<()> {
            world.barrier();
            let t0 = mpi::time();
            f()?;
            times[i] += mpi::time() - t0;
            Ok(())
        };
        let mut t = None;
        timed(0, &mut || {
            t = Some(txns.create_transaction()?);
            Ok(())
        })?;
        let mut t = t.expect("created");
        let mut subs = Vec::new();
        timed(1, &mut || {
            subs.push(t.create_sub_transaction("mark")?);
            Ok(())
        })?;
        // One global sub-transaction before begin, two after (as in D2T).
        timed(2, &mut || {
            subs.push(t.create_sub_transaction_all("read")?);
            Ok(())
        })?;
        timed(3, &mut || Ok(t.begin_transaction()?))?;
        for name in ["write", "delete"] {
            timed(2, &mut || {
                subs.push(t.create_sub_transaction_all(name)?);
                Ok(())
            })?;
        }
        for s in subs.clone() {
            timed(4, &mut || Ok(t.commit_sub_transaction(s)?))?;
        }
        timed(5, &mut || {
            t.vote_transaction(true)?;
            Ok(())
        })?;
        timed(6, &mut || Ok(t.commit_transaction()?))?;
        let mut t = Some(t);
        timed(7, &mut || {
            t.take().expect("once").finalize();
            Ok(())
        })?;
        // The slowest rank's time of each call.
        let mut slowest = [0f64; OPERATIONS.len()];
        world.all_reduce_into(&times[..], &mut slowest[..], SystemOperation::max());
        for (name, s) in OPERATIONS.iter().zip(slowest) {
            m.insert(format!("{name}_s"), s);
        }
        m.insert("protocol_total_s".into(), slowest.iter().sum());
        // An 8-byte allreduce, the collective the protocol's phases are measured against.
        let rounds = 100;
        world.barrier();
        let t0 = mpi::time();
        let mut sum = 0u64;
        for i in 0..rounds {
            world.all_reduce_into(&(i as u64), &mut sum, SystemOperation::sum());
        }
        let mine = (mpi::time() - t0) / rounds as f64;
        let mut allreduce = 0f64;
        world.all_reduce_into(&mine, &mut allreduce, SystemOperation::max());
        m.insert("allreduce_s".into(), allreduce);
        // The target's ratio, per repetition (the sequence has about ten collective phases).
        m.insert(
            "protocol_over_allreduce".into(),
            slowest.iter().sum::<f64>() / allreduce,
        );
        if let Some((client, txns, plain)) = &on_tessera {
            let w = crate::txn_workload::Workload {
                world,
                client,
                txns,
                protocol_only: plain,
                parts: Default::default(),
                parts_cpu: Default::default(),
                daemons: daemon_pids(),
            };
            // Rotating which goes first, so none always finds the daemons warmer.
            let mut order = [Mode::Txn, Mode::Plain, Mode::ProtocolOnly];
            order.rotate_left(rep % 3);
            for mode in order {
                let tag = format!("{}{rep}", mode.metric());
                let timed = w.run(&tag, mode)?;
                let which = mode.metric();
                m.insert(format!("{which}_s"), timed.total);
                if world.rank() == 0 {
                    m.insert(format!("{which}_daemon_cpu_s"), timed.daemon_cpu);
                }
                m.insert(format!("{which}_rank_cpu_s"), timed.rank_cpu);
                // The parts each run has: opening, vote and commit with transactions, the
                // closing barrier without.
                for ((part, s), cpu) in crate::txn_workload::PARTS
                    .iter()
                    .zip(timed.parts)
                    .zip(timed.parts_cpu)
                {
                    let ran = match *part {
                        "body" => true,
                        "barrier" => mode == Mode::Plain,
                        _ => mode != Mode::Plain,
                    };
                    if ran {
                        m.insert(format!("{which}_{part}_s"), s);
                        m.insert(format!("{which}_{part}_rank_cpu_s"), cpu);
                    }
                }
            }
            m.insert(
                "with_over_without".into(),
                m["with_txn_s"] / m["without_txn_s"],
            );
            m.insert(
                "protocol_only_over_without".into(),
                m["protocol_only_s"] / m["without_txn_s"],
            );
        }
        if world.rank() == 0 {
            println!("txn-rep {}", serde_json::to_string(&m)?);
        }
    }
    Ok(())
}
