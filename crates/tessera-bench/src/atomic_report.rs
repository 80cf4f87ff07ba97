//! The atomic-mode part of the report (`tessera bench atomic`, Aarestad et al.): per pattern, the
//! seed's table beside Tessera's (locks per client, the most processes that could hold their
//! locks at once), bandwidth per strategy and rank count with a plot, and the targets.

use crate::report::{Series, Target, plot};
use crate::results::{Metrics, RanksRun, summary};
use anyhow::Result;
use serde::Deserialize;
use std::fmt::Write as _;
use std::path::Path;

const STRATEGIES: [&str; 4] = ["none", "whole", "extent", "list"];

/// One record of `tessera bench atomic`.
#[derive(Deserialize)]
pub struct AtomicRecord {
    pub pattern: String,
    pub command: String,
    pub when: u64,
    pub runs: Vec<RanksRun>,
}

/// The records in `dir` (none if it does not exist), oldest first.
pub fn load(dir: &Path) -> Result<Vec<AtomicRecord>> {
    crate::results::load_records(dir, |r: &AtomicRecord| r.when)
}

/// The newest record of `pattern`.
fn newest<'a>(records: &'a [AtomicRecord], pattern: &str) -> Option<&'a AtomicRecord> {
    records.iter().rev().find(|r| r.pattern == pattern)
}

fn med(reps: &[Metrics], name: &str) -> Option<f64> {
    summary(reps, name).map(|s| s.1)
}

/// min / median / max of `a / b`, computed per repetition (both measured side by side).
fn ratio(reps: &[Metrics], a: &str, b: &str) -> Option<(f64, f64, f64)> {
    let per: Vec<Metrics> = reps
        .iter()
        .filter_map(|m| Some(Metrics::from([("r".to_string(), m.get(a)? / m.get(b)?)])))
        .collect();
    summary(&per, "r")
}

pub fn targets(records: &[AtomicRecord]) -> Vec<Target> {
    let mut out = Vec::new();
    let block = newest(records, "block3d");
    let not_measured = |what: String| Target {
        what,
        measured: "not measured".into(),
        met: None,
    };
    for pattern in ["block3d", "flash"] {
        let what = format!(
            "atomic {pattern}: list_max_compatible = ranks, whole_max_compatible = 1 at every scale"
        );
        match newest(records, pattern) {
            Some(r) => {
                let cells: Vec<String> = r
                    .runs
                    .iter()
                    .map(|run| {
                        format!(
                            "{}: {:.0} / {:.0}",
                            run.ranks,
                            med(&run.reps, "list_max_compatible").unwrap_or(0.0),
                            med(&run.reps, "whole_max_compatible").unwrap_or(0.0)
                        )
                    })
                    .collect();
                let met = r.runs.iter().all(|run| {
                    med(&run.reps, "list_max_compatible") == Some(run.ranks as f64)
                        && med(&run.reps, "whole_max_compatible") == Some(1.0)
                });
                out.push(Target {
                    what,
                    measured: cells.join(", "),
                    met: Some(met),
                });
            }
            None => out.push(not_measured(what)),
        }
    }
    let at8 = block.and_then(|r| r.runs.iter().find(|run| run.ranks == 8));
    for (what, other, limit) in [
        (
            "atomic block3d, 8 ranks: list_mibs >= 0.8 x none_mibs",
            "none_mibs",
            0.8,
        ),
        (
            "atomic block3d, 8 ranks: list_mibs >= 1.5 x whole_mibs",
            "whole_mibs",
            1.5,
        ),
    ] {
        let measured = at8.and_then(|run| ratio(&run.reps, "list_mibs", other));
        out.push(Target::on_median(what.into(), measured, 2, "x", |m| {
            m >= limit
        }));
    }
    let what = "atomic: list lock request bytes per strided run <= 64".to_string();
    let worst = records
        .iter()
        .flat_map(|r| &r.runs)
        .filter_map(|run| med(&run.reps, "list_request_bytes_per_run"))
        .fold(None, |a: Option<f64>, b| Some(a.map_or(b, |a| a.max(b))));
    match worst {
        Some(w) => out.push(Target {
            what,
            measured: format!("{w:.1} (the largest median of any run)"),
            met: Some(w <= 64.0),
        }),
        None => out.push(not_measured(what)),
    }
    out
}

/// The paper's own tables (Aarestad et al.): (strategy, ranks, locks per client,
/// maximum concurrent processes).
fn seed_table(pattern: &str) -> &'static [(&'static str, u32, &'static str, u32)] {
    match pattern {
        "block3d" => &[
            ("whole", 8, "1", 1),
            ("whole", 27, "1", 1),
            ("whole", 64, "1", 1),
            ("extent", 8, "1", 4),
            ("extent", 27, "1", 9),
            ("extent", 64, "1", 16),
            ("list", 8, "25", 8),
            ("list", 27, "12", 27),
            ("list", 64, "64", 64),
        ],
        // Verbatim: the paper lists 64 concurrent processes for list locks at 32 ranks.
        "flash" => &[
            ("whole", 8, "1", 1),
            ("whole", 16, "1", 1),
            ("whole", 32, "1", 1),
            ("extent", 8, "1", 1),
            ("extent", 16, "1", 1),
            ("extent", 32, "1", 1),
            ("list", 8, "64", 8),
            ("list", 16, "64", 16),
            ("list", 32, "64", 64),
        ],
        "tile" => &[
            ("whole", 6, "1 per file", 1),
            ("extent", 6, "1 per file", 2),
            ("list", 6, "64 per file", 2),
        ],
        _ => &[],
    }
}

pub fn section(md: &mut String, plots: &Path, records: &[AtomicRecord]) -> Result<()> {
    if records.is_empty() {
        return Ok(());
    }
    writeln!(
        md,
        "## MPI-IO atomic mode: lock strategies (Aarestad et al.)\n"
    )?;
    writeln!(
        md,
        "`tessera bench atomic`: each strategy runs the same MPI-IO program in atomic mode through the interposer, in a fresh instance, strategies rotating with the repetition. `none` takes no lock (not atomic: the ceiling), `whole` an exclusive record lock of the file, `extent` an exclusive record lock over each access's extent (ROMIO's way, the paper's byte-range locking), `list` a list lock of exactly the bytes (shared for reads). *Compatible* is the largest set of ranks whose lock requests for the same step are mutually compatible under the lock table's conflict rule (the paper's maximum concurrent processes, independent of timing); *granted* is the most holders the daemons actually granted at once. *Ranges* are byte ranges per lock request, *runs* the strided runs that carry them.\n"
    )?;
    for pattern in ["block3d", "flash", "tile"] {
        let Some(r) = newest(records, pattern) else {
            continue;
        };
        writeln!(md, "### {pattern}\n\n```\n{}\n```\n", r.command)?;
        writeln!(
            md,
            "| ranks | strategy | MiB/s min / median / max | compatible | granted | ranges per request | runs per request | lock wait s per rank | seed: locks per client | seed: max concurrent |\n|---:|---|---|---:|---:|---:|---:|---:|---:|---:|"
        )?;
        for run in &r.runs {
            for s in STRATEGIES {
                let Some((lo, mid, hi)) = summary(&run.reps, &format!("{s}_mibs")) else {
                    continue;
                };
                let m = |name: &str| med(&run.reps, &format!("{s}_{name}"));
                let fmt = |v: Option<f64>, digits: usize| {
                    v.map_or("-".to_string(), |v| format!("{v:.digits$}"))
                };
                let runs = if s == "list" {
                    fmt(med(&run.reps, "list_runs_per_client"), 0)
                } else {
                    "-".into()
                };
                let seed = seed_table(pattern)
                    .iter()
                    .find(|(st, n, _, _)| *st == s && *n == run.ranks);
                writeln!(
                    md,
                    "| {} | {s} | {lo:.1} / {mid:.1} / {hi:.1} | {} | {} | {} | {runs} | {} | {} | {} |",
                    run.ranks,
                    fmt(m("max_compatible"), 0),
                    fmt(m("max_granted"), 0),
                    fmt(m("locks_per_client"), 0),
                    fmt(m("lock_wait_s"), 3),
                    seed.map_or("-", |t| t.2),
                    seed.map_or("-".to_string(), |t| t.3.to_string()),
                )?;
            }
        }
        writeln!(md)?;
        if r.runs.len() > 1 {
            let data: Series = STRATEGIES
                .iter()
                .map(|s| {
                    let points = r
                        .runs
                        .iter()
                        .filter_map(|run| Some((run.ranks, med(&run.reps, &format!("{s}_mibs"))?)))
                        .collect();
                    (s.to_string(), points)
                })
                .collect();
            let file = format!("atomic_{pattern}.png");
            let title = format!("atomic mode, {pattern}: bandwidth per lock strategy");
            if plot(&plots.join(&file), &title, &data)? {
                writeln!(md, "![{title}](bench/{file})\n")?;
            }
        }
    }
    Ok(())
}
