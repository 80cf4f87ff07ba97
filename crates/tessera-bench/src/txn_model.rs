//! `tessera bench txn --model P`: the messages of D2T's tiered protocol at P
//! processes, computed by the protocol's own grouping (`tessera_core::txn_tiers`), beside a
//! flat two-phase commit where the coordinator hears from every process.

use anyhow::{Result, bail};
use tessera_core::txn_tiers::{FAN_IN, Tiers, flat_phase};

/// D2T's scales (its Table 1), 256 to 65,536 processes.
pub const SEED_SCALES: [u32; 8] = [256, 512, 1024, 2048, 8192, 16384, 32768, 65536];

/// The model's metrics at `p` processes, named as the scripts read them.
pub fn metrics(p: u32) -> serde_json::Map<String, serde_json::Value> {
    let tiers = Tiers::new(p);
    let phase = tiers.phase();
    let flat = flat_phase(p);
    let mut m = serde_json::Map::new();
    m.insert("processes".into(), p.into());
    m.insert("sub_coordinators".into(), tiers.groups().into());
    m.insert(
        "max_msgs_per_process_per_phase".into(),
        phase.max_received.into(),
    );
    m.insert("critical_path_msgs".into(), phase.critical_path.into());
    m.insert("msgs_per_phase".into(), phase.total.into());
    m.insert("flat_2pc_max_msgs".into(), flat.max_received.into());
    m.insert(
        "flat_2pc_critical_path_msgs".into(),
        flat.critical_path.into(),
    );
    m
}

/// Prints the model's table for `scales` (or, with `json`, one JSON object: the metrics of the
/// first scale, and every scale by its process count).
pub fn run(scales: &[u32], json: bool) -> Result<()> {
    if scales.is_empty() || scales.contains(&0) {
        bail!("--model takes process counts, each at least 1 (for example --model 256,65536)");
    }
    if json {
        let by: serde_json::Map<String, serde_json::Value> = scales
            .iter()
            .map(|p| (p.to_string(), serde_json::Value::Object(metrics(*p))))
            .collect();
        let out = serde_json::json!({
            "workload": "txn-model",
            "metrics": metrics(scales[0]),
            "by_processes": by,
        });
        println!("{out}");
        return Ok(());
    }
    print!("{}", table(scales));
    Ok(())
}

/// The model as a markdown table.
pub fn table(scales: &[u32]) -> String {
    let mut s = format!(
        "| processes | sub-coordinators | max msgs received per process per phase (bound {FAN_IN} + subs) | critical path msgs | flat 2PC: coordinator receives |\n|---:|---:|---:|---:|---:|\n"
    );
    for p in scales {
        let m = metrics(*p);
        s += &format!(
            "| {p} | {} | {} | {} | {} |\n",
            m["sub_coordinators"],
            m["max_msgs_per_process_per_phase"],
            m["critical_path_msgs"],
            m["flat_2pc_max_msgs"]
        );
    }
    s
}
