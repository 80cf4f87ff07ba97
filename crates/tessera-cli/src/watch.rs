//! `tessera status --watch`: each node's metrics (the figures its endpoint serves, asked
//! for over the admin connection, so it works with the endpoint off), as rates over the
//! last refresh, one line per node, redrawn in place on a terminal.

use crate::admin::Admin;
use crate::instance::human;
use anyhow::Result;
use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};
use tessera_proto::InstanceLayout;
use tessera_proto::metric_names as names;

/// One node's samples (name with labels -> value) at one moment.
pub type Samples = HashMap<String, f64>;

/// The columns: header, and how a cell is made from the samples before and now.
struct Column {
    head: &'static str,
    cell: fn(&Samples, &Samples, f64) -> String,
}

fn get(s: &Samples, name: &str) -> f64 {
    s.get(name).copied().unwrap_or(0.0)
}

/// The growth of counter `name` per second.
fn rate(before: &Samples, now: &Samples, secs: f64, name: &str) -> f64 {
    if secs <= 0.0 {
        return 0.0;
    }
    (get(now, name) - get(before, name)).max(0.0) / secs
}

fn bytes_rate(before: &Samples, now: &Samples, secs: f64, name: &str) -> String {
    format!("{}/s", human(rate(before, now, secs, name) as u64))
}

/// The sum over every series of a family whose sample names start with `prefix`.
fn family_sum(s: &Samples, prefix: &str) -> f64 {
    s.iter()
        .filter(|(k, _)| k.starts_with(prefix))
        .map(|(_, v)| v)
        .sum()
}

const COLUMNS: &[Column] = &[
    Column {
        head: "write",
        cell: |b, n, t| bytes_rate(b, n, t, names::WRITE_BYTES),
    },
    Column {
        head: "read local",
        cell: |b, n, t| bytes_rate(b, n, t, names::READ_LOCAL_BYTES),
    },
    Column {
        head: "read remote",
        cell: |b, n, t| bytes_rate(b, n, t, names::READ_REMOTE_BYTES),
    },
    Column {
        head: "read pfs",
        cell: |b, n, t| bytes_rate(b, n, t, names::READ_PFS_BYTES),
    },
    Column {
        head: "attach/s",
        cell: |b, n, t| format!("{:.0}", rate(b, n, t, names::ATTACHES)),
    },
    Column {
        head: "query/s",
        cell: |b, n, t| format!("{:.0}", rate(b, n, t, names::QUERIES)),
    },
    Column {
        head: "locks/s",
        cell: |b, n, t| format!("{:.0}", rate(b, n, t, names::LOCKS_GRANTED)),
    },
    Column {
        head: "waiting",
        cell: |_, n, _| format!("{:.0}", get(n, names::LOCK_WAITERS)),
    },
    Column {
        head: "txns",
        cell: |_, n, _| {
            format!(
                "{:.0}/{:.0}",
                get(n, names::TXN_COMMITS),
                get(n, names::TXN_ABORTS)
            )
        },
    },
    Column {
        head: "flush",
        cell: |b, n, t| bytes_rate(b, n, t, names::FLUSH_BYTES),
    },
    Column {
        head: "stage",
        cell: |b, n, t| {
            let secs = t.max(f64::MIN_POSITIVE);
            let grew = |name| (get(n, name) - get(b, name)).max(0.0);
            let bytes = grew(names::STAGE_IN_BYTES) + grew(names::STAGE_OUT_BYTES);
            format!("{}/s", human((bytes / secs) as u64))
        },
    },
    Column {
        head: "errors/s",
        cell: |b, n, t| {
            let secs = t.max(f64::MIN_POSITIVE);
            let grew = family_sum(n, names::ERRORS) - family_sum(b, names::ERRORS);
            format!("{:.0}", grew.max(0.0) / secs)
        },
    },
    Column {
        head: "clients",
        cell: |_, n, _| format!("{:.0}", get(n, names::CLIENTS)),
    },
    Column {
        head: "bb used",
        cell: |_, n, _| human(get(n, names::BB_USED_BYTES) as u64),
    },
];

/// The table of one refresh: a line per node, rates over `secs` since `before` (a node
/// missing from `now` is shown as down).
pub fn render(before: &[Option<Samples>], now: &[Option<Samples>], secs: f64) -> String {
    let mut out = format!("{:>4}", "node");
    for c in COLUMNS {
        out += &format!("  {:>12}", c.head);
    }
    out.push('\n');
    let empty = Samples::new();
    for (node, sampled) in now.iter().enumerate() {
        out += &format!("{node:>4}");
        match sampled {
            None => out += "  down",
            Some(n) => {
                let b = before.get(node).and_then(|b| b.as_ref()).unwrap_or(&empty);
                // A node seen for the first time shows no rate yet.
                let t = if b.is_empty() { 0.0 } else { secs };
                for c in COLUMNS {
                    out += &format!("  {:>12}", (c.cell)(b, n, t));
                }
            }
        }
        out.push('\n');
    }
    out
}

/// Redraws the table every `every` until interrupted (or `count` times, when given).
pub fn run(layout: &InstanceLayout, every: Duration, count: Option<u64>) -> Result<()> {
    layout.check_trusted()?;
    let cfg = layout.load_config()?;
    let admin = Admin::new(layout)?;
    let terminal = std::io::stdout().is_terminal();
    let mut before: Vec<Option<Samples>> = vec![None; cfg.nodes as usize];
    let mut at = Instant::now();
    let mut shown = 0u64;
    loop {
        let now: Vec<Option<Samples>> = (0..cfg.nodes)
            .map(|n| {
                admin
                    .status(n)
                    .ok()
                    .map(|s| s.metrics.into_iter().collect())
            })
            .collect();
        let secs = at.elapsed().as_secs_f64();
        at = Instant::now();
        let table = render(&before, &now, secs);
        let mut out = std::io::stdout().lock();
        if terminal {
            // Home and clear: the table redrawn in place.
            write!(out, "\x1b[H\x1b[2J")?;
        }
        writeln!(
            out,
            "{}  every {}  (txns: committed/aborted at their home)",
            layout.dir.display(),
            humantime::format_duration(every)
        )?;
        write!(out, "{table}")?;
        if !terminal {
            writeln!(out)?;
        }
        out.flush()?;
        drop(out);
        before = now;
        shown += 1;
        if count.is_some_and(|c| shown >= c) {
            return Ok(());
        }
        std::thread::sleep(every);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(pairs: &[(&str, f64)]) -> Samples {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn rates_are_growth_over_the_refresh_and_a_down_node_says_so() {
        let before = vec![
            Some(samples(&[
                ("tessera_write_bytes_total", 0.0),
                ("tessera_errors_total{errno=\"ENOENT\"}", 1.0),
            ])),
            None,
        ];
        let now = vec![
            Some(samples(&[
                ("tessera_write_bytes_total", 4.0 * 1048576.0),
                ("tessera_attaches_total", 10.0),
                ("tessera_errors_total{errno=\"ENOENT\"}", 3.0),
                ("tessera_errors_total{errno=\"EIO\"}", 2.0),
                ("tessera_clients", 7.0),
            ])),
            None,
        ];
        let table = render(&before, &now, 2.0);
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].contains("write") && lines[0].contains("bb used"));
        let node0: Vec<&str> = lines[1]
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        assert_eq!(node0[0], "0");
        assert_eq!(node0[1], "2.0 MiB/s", "{table}");
        // Errors: 1 -> 5 over all errnos, in 2 s.
        assert!(lines[1].contains("  2  "), "{table}");
        assert!(lines[2].ends_with("down"), "{table}");
    }

    #[test]
    fn a_node_seen_for_the_first_time_shows_no_rate() {
        let now = vec![Some(samples(&[("tessera_write_bytes_total", 1e9)]))];
        let table = render(&[None], &now, 1.0);
        assert!(table.lines().nth(1).unwrap().contains("0 B/s"), "{table}");
    }
}
