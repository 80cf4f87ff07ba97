//! The report: `docs/benchmarks.md` and its plots, regenerated from the records in `results/`.
//!
//! For each configuration (workload, pattern and size, ranks) the newest record is used. The
//! report gives the machine, the exact commands, min/median/max tables, the targets with their
//! measured ratios (computed per repetition, then summarised, since the two sides of a ratio
//! were measured side by side in the same repetition), plots of bandwidth against ranks in the
//! style of the papers' figures, and the hand-written analysis.

use crate::args::{Shape, Workload};
use crate::results::{Metrics, RunRecord, metric_names, summary};
use anyhow::{Context, Result};
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

const FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

fn load(results: &Path) -> Result<Vec<RunRecord>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(results).with_context(|| format!("reading {}", results.display()))? {
        let p = e?.path();
        if p.extension().is_some_and(|x| x == "json") {
            let text = std::fs::read_to_string(&p)?;
            out.push(
                serde_json::from_str(&text).with_context(|| format!("parsing {}", p.display()))?,
            );
        }
    }
    out.sort_by_key(|r: &RunRecord| r.when);
    Ok(out)
}

/// Key of a configuration; the newest record of each key is reported.
fn key(r: &RunRecord) -> (String, u32) {
    let w = match r.workload {
        Workload::Consistency => format!(
            "consistency {} {}",
            r.params.pattern.name(),
            size_name(r.params.size)
        ),
        Workload::Scale => format!(
            "scale {} writers x {} {}",
            r.params.writers,
            r.params.writes,
            if r.params.random { "random" } else { "strided" }
        ),
        Workload::Meta if r.params.shape != Shape::Shared => {
            format!("meta {}", r.params.shape.name())
        }
        w => w.name().to_string(),
    };
    (w, r.params.ranks)
}

fn size_name(b: u64) -> String {
    if b >= 1 << 20 && b.is_multiple_of(1 << 20) {
        format!("{}MiB", b >> 20)
    } else if b >= 1 << 10 && b.is_multiple_of(1 << 10) {
        format!("{}KiB", b >> 10)
    } else {
        format!("{b}B")
    }
}

/// Ratio a/b computed per repetition.
fn ratio(reps: &[Metrics], a: &str, b: &str) -> Option<(f64, f64, f64)> {
    let v: Vec<Metrics> = reps
        .iter()
        .filter_map(|m| Some(Metrics::from([("r".to_string(), m.get(a)? / m.get(b)?)])))
        .collect();
    summary(&v, "r")
}

pub(crate) struct Target {
    pub what: String,
    pub measured: String,
    pub met: Option<bool>,
}

impl Target {
    /// A target on the median of a (min, median, max) summary, `None` when not measured:
    /// `holds` says whether the median meets it; values show with `decimals` and `unit`.
    pub(crate) fn on_median(
        what: String,
        measured: Option<(f64, f64, f64)>,
        decimals: usize,
        unit: &str,
        holds: impl Fn(f64) -> bool,
    ) -> Target {
        match measured {
            Some((lo, mid, hi)) => Target {
                what,
                measured: format!(
                    "{mid:.decimals$}{unit} (min {lo:.decimals$}, max {hi:.decimals$})"
                ),
                met: Some(holds(mid)),
            },
            None => Target {
                what,
                measured: "not measured".into(),
                met: None,
            },
        }
    }
}

fn targets(latest: &BTreeMap<(String, u32), &RunRecord>) -> Vec<Target> {
    let mut out = Vec::new();
    let get = |w: &str, ranks: u32| latest.get(&(w.to_string(), ranks)).copied();
    let mut ratio_target =
        |rec: Option<&RunRecord>, what: &str, a: &str, b: &str, at_least: f64| {
            let measured = rec.and_then(|r| ratio(&r.reps, a, b));
            out.push(Target::on_median(what.to_string(), measured, 2, "", |m| {
                m >= at_least
            }));
        };
    let ck = get("checkpoint", 4);
    ratio_target(
        ck,
        "checkpoint 4 ranks: tessera_write / direct_nn_write >= 0.9",
        "tessera_write_mibs",
        "direct_nn_write_mibs",
        0.9,
    );
    ratio_target(
        ck,
        "checkpoint 4 ranks: tessera_write / direct_n1_write >= 2",
        "tessera_write_mibs",
        "direct_n1_write_mibs",
        2.0,
    );
    ratio_target(
        ck,
        "checkpoint 4 ranks: tessera_read / direct_nn_read >= 0.8",
        "tessera_read_mibs",
        "direct_nn_read_mibs",
        0.8,
    );
    ratio_target(
        ck,
        "checkpoint 4 ranks, warm: tessera_read_warm / direct_nn_read_warm >= 0.8",
        "tessera_read_warm_mibs",
        "direct_nn_read_warm_mibs",
        0.8,
    );
    let csr = get("consistency CS-R 8KiB", 8);
    ratio_target(
        csr,
        "CS-R 8 KiB, 8 ranks: session_read / direct_read >= 0.7",
        "session_read_mibs",
        "direct_read_mibs",
        0.7,
    );
    ratio_target(
        csr,
        "CS-R 8 KiB, 8 ranks: session_read / commit_read >= 5",
        "session_read_mibs",
        "commit_read_mibs",
        5.0,
    );
    let ops = get("ops", 4);
    // query_rtt <= 2 x ping  <=>  ping / query >= 0.5
    ratio_target(
        ops,
        "ops: query_rtt_p50 <= 2 x ping_rtt_p50 (shown: ping / query, >= 0.5)",
        "ping_rtt_p50_us",
        "query_rtt_p50_us",
        0.5,
    );
    // daemon_rtt <= 0.5 x the same request on the socket  <=>  socket / ring >= 2
    ratio_target(
        ops,
        "ops: daemon_rtt_p50 <= 0.5 x daemon_socket_rtt_p50 (shown: socket / ring, >= 2)",
        "daemon_socket_rtt_p50_us",
        "daemon_rtt_p50_us",
        2.0,
    );
    // Metadata beside the local file system of the same device, per shape.
    for (shape, phase, at_least) in [
        ("easy", "create", 1.0),
        ("easy", "stat", 0.2),
        ("easy", "remove", 0.2),
        ("hard", "create", 0.5),
        ("hard", "stat", 0.2),
        ("hard", "read", 0.2),
        ("hard", "remove", 0.3),
        ("hard", "readdir", 0.3),
    ] {
        ratio_target(
            get(&format!("meta {shape}"), 4),
            &format!("meta {shape} 4 ranks: {phase}_per_s / direct_{phase}_per_s >= {at_least}"),
            &format!("{phase}_per_s"),
            &format!("direct_{phase}_per_s"),
            at_least,
        );
    }
    let mut exact = |what: &str, v: Option<bool>, measured: String| {
        out.push(Target {
            what: what.into(),
            measured,
            met: v,
        })
    };
    match ck.and_then(|r| summary(&r.reps, "index_bytes_per_write")) {
        Some((_, mid, hi)) => exact(
            "checkpoint: index_bytes_per_write <= 1",
            Some(hi <= 1.0),
            format!("{mid:.3} (max {hi:.3})"),
        ),
        None => exact(
            "checkpoint: index_bytes_per_write <= 1",
            None,
            "not measured".into(),
        ),
    }
    match csr {
        Some(r) => {
            let every = |f: &dyn Fn(&Metrics) -> bool| r.reps.iter().all(f);
            let commit_ok = every(&|m| m.get("commit_queries") == m.get("reads"));
            let session_ok = every(&|m| m.get("session_queries") == m.get("read_opens"));
            let m = &r.reps[0];
            exact(
                "CS-R: commit sends exactly one query per read",
                Some(commit_ok),
                format!(
                    "{} queries for {} reads",
                    m.get("commit_queries").unwrap_or(&0.0),
                    m.get("reads").unwrap_or(&0.0)
                ),
            );
            exact(
                "CS-R: session sends one query per open",
                Some(session_ok),
                format!(
                    "{} queries for {} read opens",
                    m.get("session_queries").unwrap_or(&0.0),
                    m.get("read_opens").unwrap_or(&0.0)
                ),
            );
        }
        None => exact(
            "CS-R: one query per read (commit), per open (session)",
            None,
            "not measured".into(),
        ),
    }
    // CC-R 8 MiB: all models within 10% of each other (medians), reads and writes.
    let ccr = latest
        .iter()
        .filter(|((w, _), _)| w == "consistency CC-R 8MiB")
        .max_by_key(|((_, n), _)| *n);
    match ccr {
        Some(((_, n), r)) => {
            for dir in ["read", "write"] {
                let meds: Vec<f64> = ["posix", "commit", "session"]
                    .iter()
                    .filter_map(|m| summary(&r.reps, &format!("{m}_{dir}_mibs")).map(|s| s.1))
                    .collect();
                let spread = meds.iter().cloned().fold(f64::MIN, f64::max)
                    / meds.iter().cloned().fold(f64::MAX, f64::min);
                exact(
                    &format!("CC-R 8 MiB, {n} ranks: {dir} bandwidth of all models within 10%"),
                    Some(spread <= 1.10),
                    format!(
                        "max/min = {spread:.2} (posix, commit, session: {})",
                        meds.iter()
                            .map(|v| format!("{v:.0}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                );
            }
        }
        None => exact(
            "CC-R 8 MiB: all models within 10%",
            None,
            "not measured".into(),
        ),
    }
    out
}

/// A plot: file, title, workload key, and (label, metric) per line.
type PlotSpec<'a> = (&'a str, &'a str, &'a str, Vec<(&'a str, &'a str)>);

/// One line per series: (label, points (ranks, MiB/s)).
pub(crate) type Series = Vec<(String, Vec<(u32, f64)>)>;

fn series(
    latest: &BTreeMap<(String, u32), &RunRecord>,
    workload: &str,
    metrics: &[(&str, &str)],
) -> Series {
    metrics
        .iter()
        .map(|(label, metric)| {
            let pts = latest
                .iter()
                .filter(|((w, _), _)| w == workload)
                .filter_map(|((_, n), r)| summary(&r.reps, metric).map(|s| (*n, s.1)))
                .collect();
            (label.to_string(), pts)
        })
        .filter(|(_, p): &(String, Vec<(u32, f64)>)| !p.is_empty())
        .collect()
}

pub(crate) fn plot(path: &Path, title: &str, data: &Series) -> Result<bool> {
    plot_against(path, title, "MPI ranks", data)
}

/// As [`plot`], with its own name for the x axis.
pub(crate) fn plot_against(path: &Path, title: &str, x: &str, data: &Series) -> Result<bool> {
    if data.is_empty() {
        return Ok(false);
    }
    let max_x = data
        .iter()
        .flat_map(|(_, p)| p.iter().map(|x| x.0))
        .max()
        .unwrap_or(1);
    let max_y = data
        .iter()
        .flat_map(|(_, p)| p.iter().map(|x| x.1))
        .fold(1.0, f64::max);
    let min_y = data
        .iter()
        .flat_map(|(_, p)| p.iter().map(|x| x.1))
        .fold(f64::MAX, f64::min)
        .max(0.1);
    let root = BitMapBackend::new(path, (820, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(70)
        .build_cartesian_2d(0u32..max_x + 1, (min_y * 0.5..max_y * 2.0).log_scale())?;
    chart
        .configure_mesh()
        .x_desc(x)
        .y_desc("MiB/s (log scale)")
        .label_style(("sans-serif", 15))
        .draw()?;
    draw_lines(&mut chart, data, SeriesLabelPosition::UpperLeft)?;
    root.present()?;
    Ok(true)
}

/// One series of a plot: its label and its points.
pub(crate) type Line<X, Y> = (String, Vec<(X, Y)>);

/// Draws each series as a line with dots, ascending in x, and the legend.
pub(crate) fn draw_lines<'a, X, Y>(
    chart: &mut ChartContext<'a, BitMapBackend<'a>, Cartesian2d<X, Y>>,
    data: &[Line<X::ValueType, Y::ValueType>],
    legend: SeriesLabelPosition,
) -> Result<()>
where
    X: Ranged,
    Y: Ranged,
    X::ValueType: Copy + PartialOrd + 'static,
    Y::ValueType: Copy + 'static,
{
    let colors = [RED, BLUE, GREEN, MAGENTA, BLACK, CYAN];
    for (i, (label, pts)) in data.iter().enumerate() {
        let c = colors[i % colors.len()];
        let mut pts = pts.clone();
        pts.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap_or(std::cmp::Ordering::Equal));
        chart
            .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))?
            .label(label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        chart.draw_series(pts.iter().map(|p| Circle::new(*p, 4, c.filled())))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .position(legend)
        .draw()?;
    Ok(())
}

pub fn run(results: &Path, out: &Path, analysis: &Path) -> Result<()> {
    let font = std::fs::read(FONT)
        .with_context(|| format!("reading {FONT} (apt-get install fonts-dejavu-core)"))?;
    plotters::style::register_font(
        "sans-serif",
        FontStyle::Normal,
        Box::leak(font.into_boxed_slice()),
    )
    .map_err(|_| anyhow::anyhow!("{FONT} is not a usable font"))?;
    let records = load(results)?;
    anyhow::ensure!(
        !records.is_empty(),
        "no records in {}: run `bash scripts/bench.sh` first",
        results.display()
    );
    let mut latest: BTreeMap<(String, u32), &RunRecord> = BTreeMap::new();
    for r in &records {
        latest.insert(key(r), r);
    }
    let plots_dir = out.parent().unwrap_or(Path::new(".")).join("bench");
    std::fs::create_dir_all(&plots_dir)?;

    let mut md = String::new();
    let newest = records.last().expect("not empty");
    let m = &newest.machine;
    writeln!(md, "# Tessera benchmarks\n")?;
    writeln!(
        md,
        "Generated by `tessera-bench report` from {} records in `results/` (the newest per configuration); do not edit by hand.\nRegenerate everything with `bash scripts/bench.sh` (runs every workload, then this report).\n",
        records.len()
    )?;
    writeln!(md, "## Machine\n")?;
    writeln!(
        md,
        "- host `{}`: {} CPUs ({}), {} GiB memory\n- disk under test: {}\n- every comparison below was measured side by side in the same run (same disk, same repetition); ratios are computed per repetition\n",
        m.host, m.cpus, m.cpu_model, m.memory_gib, m.disk
    )?;

    writeln!(md, "## Targets\n")?;
    writeln!(
        md,
        "| target | measured (median over repetitions) | |\n|---|---|---|"
    )?;
    let all: Vec<&RunRecord> = records.iter().collect();
    let atomic = crate::atomic_report::load(&results.join("atomic"))?;
    let txn = crate::txn_report::load(&results.join("txn"))?;
    let locality = crate::locality_report::load(&results.join("locality"))?;
    for t in targets(&latest)
        .into_iter()
        .chain(crate::scale_report::targets(&all))
        .chain(crate::atomic_report::targets(&atomic))
        .chain(crate::txn_report::targets(&txn))
        .chain(crate::locality_report::targets(&locality))
    {
        let mark = match t.met {
            Some(true) => "met",
            Some(false) => "**missed** (see analysis)",
            None => "not measured",
        };
        writeln!(md, "| {} | {} | {} |", t.what, t.measured, mark)?;
    }
    writeln!(md)?;

    writeln!(md, "## Plots\n")?;
    let plots: Vec<PlotSpec> = vec![
        (
            "checkpoint_write.png",
            "N-1 strided checkpoint, 47001-byte writes: write",
            "checkpoint",
            vec![
                ("Tessera N-1", "tessera_write_mibs"),
                ("direct N-N", "direct_nn_write_mibs"),
                ("direct N-1", "direct_n1_write_mibs"),
            ],
        ),
        (
            "checkpoint_read.png",
            "N-1 strided checkpoint: rank-shifted read",
            "checkpoint",
            vec![
                ("Tessera N-1", "tessera_read_mibs"),
                ("direct N-N", "direct_nn_read_mibs"),
                ("direct N-1", "direct_n1_read_mibs"),
            ],
        ),
        (
            "csr_8k_read.png",
            "CS-R, 8 KiB accesses: read",
            "consistency CS-R 8KiB",
            vec![
                ("session", "session_read_mibs"),
                ("commit", "commit_read_mibs"),
                ("posix", "posix_read_mibs"),
                ("direct", "direct_read_mibs"),
            ],
        ),
        (
            "ccr_8m_read.png",
            "CC-R, 8 MiB accesses: read",
            "consistency CC-R 8MiB",
            vec![
                ("session", "session_read_mibs"),
                ("commit", "commit_read_mibs"),
                ("posix", "posix_read_mibs"),
                ("direct", "direct_read_mibs"),
            ],
        ),
    ];
    for (file, title, workload, metrics) in plots {
        if plot(
            &plots_dir.join(file),
            title,
            &series(&latest, workload, &metrics),
        )? {
            writeln!(md, "![{title}](bench/{file})\n")?;
        }
    }

    crate::scale_report::section(&mut md, &plots_dir, &all)?;
    crate::atomic_report::section(&mut md, &plots_dir, &atomic)?;
    crate::txn_report::section(&mut md, &txn)?;
    crate::locality_report::section(&mut md, &plots_dir, &locality)?;

    writeln!(md, "## Results\n")?;
    for ((w, n), r) in &latest {
        writeln!(md, "### {w}, {n} ranks\n")?;
        writeln!(md, "```\n{}\n```\n", r.command)?;
        writeln!(md, "| metric | min | median | max |\n|---|---:|---:|---:|")?;
        for name in metric_names(&r.reps) {
            let (lo, mid, hi) = summary(&r.reps, &name).expect("present");
            writeln!(md, "| {name} | {lo:.1} | {mid:.1} | {hi:.1} |")?;
        }
        writeln!(md)?;
    }
    if let Ok(text) = std::fs::read_to_string(analysis) {
        writeln!(md, "{}", text.trim_end())?;
    }
    std::fs::write(out, md)?;
    println!(
        "wrote {} and plots in {}",
        out.display(),
        plots_dir.display()
    );
    Ok(())
}
