//! Whether a workload's configuration fits this machine, checked before anything starts: a
//! run that cannot fit is refused with what it needs, what there is, and what to change,
//! instead of exhausting memory or the disk half-way (`consistency --pattern CC-R --size 8MiB`
//! with 2000 accesses per writer once asked for 16 GiB per rank).

use crate::args::{Params, Workload};

/// What a run holds at its peak.
#[derive(Debug, PartialEq, Eq)]
pub struct Needs {
    /// In the ranks' memory (their data and read buffers).
    pub memory: u64,
    /// On the device of the run's directory (the burst buffer and the direct files).
    pub disk: u64,
}

/// What the consistency workload holds: every writing rank keeps its data in memory and the
/// readers their buffers; the file is written once per model (posix, commit and session into
/// logs, and the direct file).
pub fn needs(workload: Workload, p: &Params) -> Option<Needs> {
    if workload != Workload::Consistency {
        return None;
    }
    let ranks = u64::from(p.ranks);
    let writers = if p.pattern.reads() {
        (ranks / 2).max(1)
    } else {
        ranks
    };
    let written = writers.saturating_mul(p.accesses()).saturating_mul(p.size);
    let read = if p.pattern.reads() { written } else { 0 };
    Some(Needs {
        memory: written.saturating_add(read),
        disk: written.saturating_mul(4),
    })
}

/// Refuses `needs` that do not fit in `memory` and `disk` bytes available (half the memory:
/// the files' pages and the daemons need the rest); the message names the knobs.
pub fn check(needs: &Needs, memory: u64, disk: u64, p: &Params) -> Result<(), String> {
    let knobs = if p.ops == 0 {
        format!(
            "lower --size or --per-rank (now {}, the bytes each writing rank writes)",
            show(p.per_rank)
        )
    } else {
        "lower --ops or --size, or leave --ops out to size the run by --per-rank".to_string()
    };
    let what = format!(
        "{} ranks writing {} accesses of {} each",
        p.ranks,
        p.accesses(),
        show(p.size)
    );
    if needs.memory > memory / 2 {
        return Err(format!(
            "{what} hold {} in the ranks' memory, and {} is available (at most half of it is used): {knobs}",
            show(needs.memory),
            show(memory)
        ));
    }
    if needs.disk > disk {
        return Err(format!(
            "{what} write {} to the run's directory, which has {} free: {knobs}, or give --dir on a larger device",
            show(needs.disk),
            show(disk)
        ));
    }
    Ok(())
}

/// The machine's available memory (`MemAvailable`) in bytes.
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Free bytes on the device of `dir`.
pub fn free_space(dir: &std::path::Path) -> Option<u64> {
    let s = rustix::fs::statvfs(dir).ok()?;
    Some(s.f_bavail.saturating_mul(s.f_frsize))
}

/// Bytes for a message, in the largest binary unit that keeps a whole number before the point.
fn show(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::Pattern;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        p: Params,
    }

    fn params(args: &[&str]) -> Params {
        let mut all = vec!["bench"];
        all.extend_from_slice(args);
        Cli::parse_from(all).p
    }

    #[test]
    fn accesses_are_sized_by_bytes_unless_given() {
        assert_eq!(params(&[]).accesses(), 2000, "8 KiB: as before");
        assert_eq!(params(&["--size", "8MiB"]).accesses(), 10);
        assert_eq!(params(&["--size", "1MiB"]).accesses(), 64);
        assert_eq!(params(&["--size", "8MiB", "--ops", "3"]).accesses(), 3);
    }

    #[test]
    fn cc_r_of_8_mib_fits_by_default_and_is_refused_with_2000_accesses() {
        let p = params(&["--pattern", "CC-R", "--size", "8MiB"]);
        assert_eq!(p.pattern, Pattern::CcR);
        let n = needs(Workload::Consistency, &p).unwrap();
        // 2 writers x 10 x 8 MiB, held once by the writers and once by the readers.
        assert_eq!(n.memory, 2 * 2 * 10 * (8 << 20));
        assert!(check(&n, 8 << 30, 100 << 30, &p).is_ok());

        let p = params(&["--pattern", "CC-R", "--size", "8MiB", "--ops", "2000"]);
        let n = needs(Workload::Consistency, &p).unwrap();
        let e = check(&n, 8 << 30, 1 << 40, &p).unwrap_err();
        assert!(e.contains("62.5 GiB in the ranks' memory"), "{e}");
        assert!(e.contains("lower --ops or --size"), "{e}");
        let e = check(&n, 1 << 40, 10 << 30, &p).unwrap_err();
        assert!(e.contains("free"), "{e}");
    }

    #[test]
    fn other_workloads_are_not_checked() {
        assert_eq!(needs(Workload::Meta, &params(&[])), None);
    }
}
