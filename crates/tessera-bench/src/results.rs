//! What a run produces: metrics per repetition, their medians, and the files they are kept in.

use crate::args::{Params, Workload};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Metrics of one repetition, by name.
pub type Metrics = BTreeMap<String, f64>;

/// Everything a run measured; written to `results/` and read back by the report.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunRecord {
    pub workload: Workload,
    pub params: Params,
    pub machine: Machine,
    /// The command that produced the record.
    pub command: String,
    /// Unix time of the run.
    pub when: u64,
    pub reps: Vec<Metrics>,
}

/// The machine a run was measured on.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Machine {
    pub host: String,
    pub cpus: usize,
    pub cpu_model: String,
    pub memory_gib: u64,
    pub disk: String,
    /// What the run changed of a virtual machine's free page reporting (see `page_reporting`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_reporting: Option<String>,
}

impl Machine {
    pub fn probe(dir: &std::path::Path) -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| {
                l.strip_prefix("model name")?
                    .split(':')
                    .nth(1)
                    .map(|s| s.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        let mem_kib: u64 = std::fs::read_to_string("/proc/meminfo")
            .unwrap_or_default()
            .lines()
            .find_map(|l| {
                l.strip_prefix("MemTotal:")?
                    .trim()
                    .strip_suffix("kB")?
                    .trim()
                    .parse()
                    .ok()
            })
            .unwrap_or(0);
        let disk = std::process::Command::new("df")
            .args(["--output=source,fstype,size"])
            .arg(dir)
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| {
                s.lines()
                    .nth(1)
                    .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            })
            .unwrap_or_else(|| "unknown".into());
        Machine {
            host: std::fs::read_to_string("/etc/hostname")
                .unwrap_or_default()
                .trim()
                .to_string(),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu_model,
            memory_gib: mem_kib >> 20,
            disk,
            page_reporting: None,
        }
    }
}

/// Min, median and max of one metric over the repetitions.
pub fn summary(reps: &[Metrics], name: &str) -> Option<(f64, f64, f64)> {
    let mut v: Vec<f64> = reps.iter().filter_map(|m| m.get(name).copied()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let median = if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    };
    Some((v[0], median, v[v.len() - 1]))
}

/// Names of the metrics in a record, in first-seen order.
pub fn metric_names(reps: &[Metrics]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for m in reps {
        for k in m.keys() {
            if !names.contains(k) {
                names.push(k.clone());
            }
        }
    }
    names
}

/// The repetitions of one rank count, in the records of the front ends that measure several
/// (`atomic`, `txn`).
#[derive(Deserialize)]
pub struct RanksRun {
    pub ranks: u32,
    pub reps: Vec<Metrics>,
}

/// The JSON records in `dir` (none if it does not exist), in the order of `when`.
pub fn load_records<T: serde::de::DeserializeOwned>(
    dir: &std::path::Path,
    when: impl Fn(&T) -> u64,
) -> anyhow::Result<Vec<T>> {
    use anyhow::Context;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(Vec::new());
    };
    let mut out: Vec<T> = Vec::new();
    for e in entries {
        let p = e?.path();
        if p.extension().is_some_and(|x| x == "json") {
            let text = std::fs::read_to_string(&p)?;
            out.push(
                serde_json::from_str(&text).with_context(|| format!("parsing {}", p.display()))?,
            );
        }
    }
    out.sort_by_key(|r| when(r));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even() {
        let reps: Vec<Metrics> = [3.0, 1.0, 2.0]
            .iter()
            .map(|v| Metrics::from([("x".into(), *v)]))
            .collect();
        assert_eq!(summary(&reps, "x"), Some((1.0, 2.0, 3.0)));
        let reps: Vec<Metrics> = [4.0, 1.0]
            .iter()
            .map(|v| Metrics::from([("x".into(), *v)]))
            .collect();
        assert_eq!(summary(&reps, "x"), Some((1.0, 2.5, 4.0)));
        assert_eq!(summary(&reps, "y"), None);
    }
}
