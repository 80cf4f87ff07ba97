//! The locality part of the report (`tessera bench locality`, FusionFS and Swift): read bandwidth placed
//! by the locality query, blind, with migrate-on-open and direct, against hosts and against
//! tasks per host (plots), beside the link's ceiling; the cost of `locate`; the targets.

use crate::locality::METRICS;
use crate::report::{Series, Target, plot_against};
use crate::results::{Metrics, summary};
use anyhow::Result;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// One record of `tessera bench locality`.
#[derive(Deserialize)]
pub struct LocalityRecord {
    pub command: String,
    pub when: u64,
    pub hosts: u32,
    pub tasks_per_host: usize,
    pub reps: Vec<Metrics>,
}

/// The records in `dir`, oldest first.
pub fn load(dir: &Path) -> Result<Vec<LocalityRecord>> {
    crate::results::load_records(dir, |r: &LocalityRecord| r.when)
}

/// The newest record per (hosts, tasks per host).
fn latest(records: &[LocalityRecord]) -> BTreeMap<(u32, usize), &LocalityRecord> {
    let mut m = BTreeMap::new();
    for r in records {
        m.insert((r.hosts, r.tasks_per_host), r);
    }
    m
}

const READS: [(&str, &str); 4] = [
    ("placed (locality query)", "placed_read_mibs"),
    ("blind (round robin)", "blind_read_mibs"),
    ("migrate on open", "migrate_read_mibs"),
    ("direct local files", "direct_read_mibs"),
];

pub fn targets(records: &[LocalityRecord]) -> Vec<Target> {
    let latest = latest(records);
    // The largest host count measured with one task per host stands for the targets.
    let r = latest
        .iter()
        .filter(|((_, t), _)| *t == 1)
        .max_by_key(|((h, _), _)| *h)
        .map(|(_, r)| *r);
    let median_of = |metric: &str| r.and_then(|r| summary(&r.reps, metric));
    let hosts = r.map_or(String::new(), |r| format!(", {} hosts", r.hosts));
    // Placed against direct holds at every configuration measured: the one with the lowest
    // median stands for them all.
    let lowest = latest
        .iter()
        .filter_map(|((h, t), r)| summary(&r.reps, "placed_over_direct").map(|s| (s, *h, *t)))
        .min_by(|a, b| a.0.1.total_cmp(&b.0.1));
    let placed = match lowest {
        Some((s, h, t)) => Target::on_median(
            format!(
                "locality, every configuration measured: placed reads >= 0.8 x direct local reads (lowest: {h} hosts x {t} tasks)"
            ),
            Some(s),
            2,
            "x",
            |m| m >= 0.8,
        ),
        None => Target::on_median(
            "locality: placed reads >= 0.8 x direct local reads".into(),
            None,
            2,
            "x",
            |m| m >= 0.8,
        ),
    };
    vec![
        placed,
        Target::on_median(
            format!("locality{hosts}: locate p50 <= 2 x forward_ping p50"),
            median_of("locate_over_ping"),
            2,
            "x",
            |m| m <= 2.0,
        ),
        Target::on_median(
            format!("locality{hosts}: a batch of 1,000 paths <= 0.1 x 1,000 single calls"),
            median_of("batch_over_single"),
            3,
            "x",
            |m| m <= 0.1,
        ),
    ]
}

pub fn section(md: &mut String, plots_dir: &Path, records: &[LocalityRecord]) -> Result<()> {
    writeln!(
        md,
        "## Locality: reads where the bytes are (FusionFS and Swift)\n"
    )?;
    writeln!(
        md,
        "`tessera bench locality --hosts N`: F files of S bytes, each written by a task on a random emulated host, read back by tasks placed where `tessera where --json` says the bytes are, round robin without it, round robin with migrate-on-open (a fresh copy each repetition), and direct reads of the same bytes from plain files on the readers' own storage (placed layout). MiB/s over the span of the tasks' own I/O (launch excluded, reported apart); `link_mibs` is one TCP stream between two hosts in the same run. Min / median / max over the repetitions.\n"
    )?;
    let latest = latest(records);
    if latest.is_empty() {
        writeln!(md, "No records yet.\n")?;
        return Ok(());
    }
    // Against hosts (one task per host), and against tasks per host (at the largest count).
    let by_hosts: Series = READS
        .iter()
        .map(|(label, metric)| {
            let pts = latest
                .iter()
                .filter(|((_, t), _)| *t == 1)
                .filter_map(|((h, _), r)| summary(&r.reps, metric).map(|s| (*h, s.1)))
                .collect();
            (label.to_string(), pts)
        })
        .filter(|(_, p): &(String, Vec<(u32, f64)>)| !p.is_empty())
        .collect();
    let title = "Locality: aggregate read MiB/s against hosts (1 task per host)";
    if plot_against(
        &plots_dir.join("locality_hosts.png"),
        title,
        "emulated hosts",
        &by_hosts,
    )? {
        writeln!(md, "![{title}](bench/locality_hosts.png)\n")?;
    }
    // The host count measured at the most task counts.
    let mut counts: BTreeMap<u32, usize> = BTreeMap::new();
    for (h, _) in latest.keys() {
        *counts.entry(*h).or_default() += 1;
    }
    if let Some(most) = counts
        .iter()
        .max_by_key(|(h, n)| (**n, **h))
        .map(|(h, _)| *h)
    {
        let by_tasks: Series = READS
            .iter()
            .map(|(label, metric)| {
                let pts = latest
                    .iter()
                    .filter(|((h, _), _)| *h == most)
                    .filter_map(|((_, t), r)| summary(&r.reps, metric).map(|s| (*t as u32, s.1)))
                    .collect();
                (label.to_string(), pts)
            })
            .filter(|(_, p): &(String, Vec<(u32, f64)>)| p.len() > 1)
            .collect();
        let title = format!("Locality: aggregate read MiB/s against tasks per host ({most} hosts)");
        let png = plots_dir.join("locality_tasks.png");
        if plot_against(&png, &title, "reading tasks per host", &by_tasks)? {
            writeln!(md, "![{title}](bench/locality_tasks.png)\n")?;
        }
    }
    writeln!(
        md,
        "| hosts x tasks | placed | blind | migrate | direct | placed / blind | link | launch s | locate p50 us | forward ping p50 us | 1,000 single s | batch of 1,000 s |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )?;
    for ((h, t), r) in &latest {
        let cell = |m: &str, d: usize| match summary(&r.reps, m) {
            Some((lo, mid, hi)) => format!("{mid:.d$} ({lo:.d$}-{hi:.d$})"),
            None => "-".into(),
        };
        writeln!(
            md,
            "| {h} x {t} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            cell("placed_read_mibs", 0),
            cell("blind_read_mibs", 0),
            cell("migrate_read_mibs", 0),
            cell("direct_read_mibs", 0),
            cell("placed_over_blind", 2),
            cell("link_mibs", 0),
            cell("launch_s", 2),
            cell("locate_p50_us", 0),
            cell("forward_ping_p50_us", 0),
            cell("locate_single_1000_s", 3),
            cell("locate_batch_1000_s", 4),
        )?;
    }
    if let Some(r) = latest.values().last() {
        writeln!(
            md,
            "\nNewest command: `{}`; metrics recorded: {}.\n",
            r.command,
            METRICS.join(", ")
        )?;
    }
    Ok(())
}
