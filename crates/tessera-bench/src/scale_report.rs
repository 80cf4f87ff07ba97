//! The scale part of the report: many writers of one file (`tessera-bench run scale`), as a
//! table over the writer and piece sweeps, two log-log plots against the writers, and the
//! targets at 10,000 writers.

use crate::args::Workload;
use crate::report::Target;
use crate::results::{RunRecord, summary};
use anyhow::Result;
use plotters::prelude::*;
use std::fmt::Write as _;
use std::path::Path;

/// Default stripe of an instance: a file spans `ceil(size / STRIPE)` stripes.
const STRIPE: u64 = 64 << 20;

/// The newest scale record of each (writers, pieces, random), in that order.
fn configs<'a>(records: &[&'a RunRecord]) -> Vec<&'a RunRecord> {
    let mut out: std::collections::BTreeMap<(bool, u64, u64), &RunRecord> = Default::default();
    for r in records.iter().filter(|r| r.workload == Workload::Scale) {
        let p = &r.params;
        out.insert((p.random, p.writes, p.writers), r);
    }
    out.into_values().collect()
}

fn median(r: &RunRecord, metric: &str) -> Option<f64> {
    summary(&r.reps, metric).map(|s| s.1)
}

/// Stripes the file of a run spans.
fn stripes(r: &RunRecord) -> u64 {
    (r.params.writers * r.params.writes * r.params.xfer).div_ceil(STRIPE)
}

pub fn targets(records: &[&RunRecord]) -> Vec<Target> {
    let at = configs(records)
        .into_iter()
        .find(|r| !r.params.random && r.params.writers == 10_000 && r.params.writes == 1000);
    let check = |what: &str, metric: &str, limit: f64| {
        let what = format!("scale, 10,000 strided writers x 1,000 pieces: {what}");
        let measured = at.and_then(|r| summary(&r.reps, metric));
        Target::on_median(what, measured, 1, "", |m| m <= limit)
    };
    let query_limit = 64.0 * at.map_or(1, stripes) as f64;
    vec![
        check(
            "rss_added_bytes_per_writer <= 2048",
            "rss_added_bytes_per_writer",
            2048.0,
        ),
        check(
            &format!("query_bytes_per_writer <= 64 per stripe ({query_limit})"),
            "query_bytes_per_writer",
            query_limit,
        ),
        check("open_ms <= 100", "open_ms", 100.0),
        check("restart_s <= 1", "restart_s", 1.0),
    ]
}

/// Writes the section (table and plots) if there are scale records.
pub fn section(md: &mut String, plots_dir: &Path, records: &[&RunRecord]) -> Result<()> {
    let runs = configs(records);
    if runs.is_empty() {
        return Ok(());
    }
    writeln!(md, "## Scale: many writers of one file\n")?;
    writeln!(
        md,
        "`tessera-bench run scale`, 16-byte pieces, 2 ranks hosting the writers, 3 daemons, 64 MiB stripes; medians of the repetitions (min-max in the per-run tables below).\n"
    )?;
    let cols = [
        "rss_added_bytes_per_writer",
        "shard_entries",
        "query_bytes_per_writer",
        "open_ms",
        "attach_s",
        "sample_read_p50_us",
        "restart_s",
    ];
    writeln!(
        md,
        "| pattern | writers | pieces each | stripes | {} |\n|---|---:|---:|---:|{}",
        cols.join(" | "),
        "---:|".repeat(cols.len())
    )?;
    for r in &runs {
        let p = &r.params;
        let cells: Vec<String> = cols
            .iter()
            .map(|c| median(r, c).map_or("-".into(), |v| format!("{v:.1}")))
            .collect();
        writeln!(
            md,
            "| {} | {} | {} | {} | {} |",
            if p.random { "random" } else { "strided" },
            p.writers,
            p.writes,
            stripes(r),
            cells.join(" | ")
        )?;
    }
    writeln!(md)?;
    for (file, title, metric, y) in [
        (
            "scale_memory.png",
            "Daemons' added memory per writer (1,000 pieces each)",
            "rss_added_bytes_per_writer",
            "bytes per writer",
        ),
        (
            "scale_query.png",
            "Whole-file query answer per writer (1,000 pieces each)",
            "query_bytes_per_writer",
            "bytes per writer",
        ),
    ] {
        let data: Vec<(String, Vec<(f64, f64)>)> = [false, true]
            .into_iter()
            .map(|random| {
                let pts = runs
                    .iter()
                    .filter(|r| r.params.random == random && r.params.writes == 1000)
                    .filter_map(|r| median(r, metric).map(|v| (r.params.writers as f64, v)))
                    .collect();
                let name = if random { "random" } else { "N-1 strided" };
                (name.to_string(), pts)
            })
            .filter(|(_, p): &(String, Vec<(f64, f64)>)| !p.is_empty())
            .collect();
        if plot(&plots_dir.join(file), title, y, &data)? {
            writeln!(md, "![{title}](bench/{file})\n")?;
        }
    }
    Ok(())
}

/// A log-log plot of lines against the number of writers.
fn plot(
    path: &Path,
    title: &str,
    y_desc: &str,
    data: &[(String, Vec<(f64, f64)>)],
) -> Result<bool> {
    let all = || data.iter().flat_map(|(_, p)| p.iter());
    let Some(max_x) = all().map(|p| p.0).reduce(f64::max) else {
        return Ok(false);
    };
    let min_x = all().map(|p| p.0).fold(f64::MAX, f64::min);
    let max_y = all().map(|p| p.1).fold(1.0, f64::max);
    let min_y = all().map(|p| p.1).fold(f64::MAX, f64::min).max(0.1);
    let root = BitMapBackend::new(path, (820, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(70)
        .build_cartesian_2d(
            (min_x * 0.7..max_x * 1.4).log_scale(),
            (min_y * 0.5..max_y * 2.0).log_scale(),
        )?;
    chart
        .configure_mesh()
        .x_desc("writers (log scale)")
        .y_desc(format!("{y_desc} (log scale)"))
        .label_style(("sans-serif", 15))
        .draw()?;
    crate::report::draw_lines(&mut chart, data, SeriesLabelPosition::UpperRight)?;
    root.present()?;
    Ok(true)
}
