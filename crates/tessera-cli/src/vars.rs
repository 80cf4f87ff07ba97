//! `tessera vars`: the catalogue of variables and chunks (D2T) from the shell, for the
//! stages of a workflow: list the variables, show one version's chunks, and wait until a
//! writer's transaction commits a version (a script's way to start analysis only on a whole
//! data set).

use crate::instance::human;
use anyhow::{Context, Result};
use std::time::{Duration, Instant};
use tessera_client::{Client, Errno, FsError};
use tessera_core::catalogue::VersionView;

/// Exit status of `tessera vars wait` when the version did not come in time (1 is any other
/// failure), so that a script can tell the two apart.
pub const TIMED_OUT: i32 = 124;

/// The longest single wait asked of the daemon; a longer (or unbounded) wait asks again.
const WAIT_SLICE: Duration = Duration::from_secs(3600);

/// Parses a duration for the command line: `30s`, `500ms`, `2m`, `1h 30m`; a bare number is
/// seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if let Ok(secs) = t.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    humantime::parse_duration(t).map_err(|e| {
        format!("'{text}' is not a duration ({e}): use a number of seconds or a unit (500ms, 30s, 2m, 1h)")
    })
}

/// `tessera vars list`: every variable with its newest committed version.
pub fn list(c: &Client, json: bool) -> Result<()> {
    let all = c.cat_list().context("listing the catalogue")?;
    if json {
        let rows: Vec<serde_json::Value> = all
            .iter()
            .map(|(name, version)| serde_json::json!({ "name": name, "version": version }))
            .collect();
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    if all.is_empty() {
        println!("no variables");
        return Ok(());
    }
    let width = all.iter().map(|(n, _)| n.len()).max().unwrap_or(0).max(4);
    println!("{:<width$}  VERSION", "NAME");
    for (name, version) in &all {
        println!("{name:<width$}  {version}");
    }
    Ok(())
}

/// `tessera vars show`: one version of a variable (the newest committed without `version`):
/// its type, dimensions and every chunk (hyperslab and where its bytes are).
pub fn show(c: &Client, name: &str, version: Option<u64>, json: bool) -> Result<()> {
    let v = c
        .cat_lookup(name, version)
        .map_err(|e| lookup_error(name, version, e))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    print!("{}", describe(&v));
    Ok(())
}

/// The text `show` prints.
pub fn describe(v: &VersionView) -> String {
    let var = &v.variable;
    let dims: Vec<String> = var.dims.iter().map(u64::to_string).collect();
    let bytes: u64 = v.chunks.iter().map(|c| c.len).sum();
    let mut out = format!(
        "{}  version {}  {} ({} bytes each)  dims {}  {} chunk(s), {}\n",
        var.name,
        v.version,
        var.elem_type,
        var.elem_size,
        dims.join("x"),
        v.chunks.len(),
        human(bytes)
    );
    let join = |xs: &[u64]| xs.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    let rows: Vec<[String; 5]> = v
        .chunks
        .iter()
        .map(|c| {
            [
                join(&c.offsets),
                join(&c.counts),
                c.path.clone(),
                c.offset.to_string(),
                c.len.to_string(),
            ]
        })
        .collect();
    let head = ["OFFSETS", "COUNTS", "FILE", "OFFSET", "LENGTH"];
    let mut width = head.map(str::len);
    for r in &rows {
        for (w, cell) in width.iter_mut().zip(r) {
            *w = (*w).max(cell.len());
        }
    }
    for r in std::iter::once(head.map(String::from)).chain(rows) {
        let line = format!(
            "  {:<w0$}  {:<w1$}  {:<w2$}  {:>w3$}  {:>w4$}",
            r[0],
            r[1],
            r[2],
            r[3],
            r[4],
            w0 = width[0],
            w1 = width[1],
            w2 = width[2],
            w3 = width[3],
            w4 = width[4]
        );
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// `tessera vars wait`: waits until `name` has a committed version of at least `version`
/// (at most `timeout`; `None`: as long as it takes), and prints the newest then. `Ok(false)`
/// when the time ran out (said on stderr).
pub fn wait(c: &Client, name: &str, version: u64, timeout: Option<Duration>) -> Result<bool> {
    let started = Instant::now();
    loop {
        let left = match timeout {
            Some(t) => t.saturating_sub(started.elapsed()),
            None => WAIT_SLICE,
        };
        match c.cat_wait(name, version, left.min(WAIT_SLICE)) {
            Ok(newest) => {
                println!("{name} {newest}");
                return Ok(true);
            }
            Err(e) if e.errno == Errno::TimedOut => {
                if timeout.is_some_and(|t| started.elapsed() >= t) {
                    eprintln!("tessera vars wait: {}", e.message);
                    return Ok(false);
                }
            }
            Err(e) => return Err(e).with_context(|| format!("waiting for {name:?}")),
        }
    }
}

/// A lookup's failure, saying what to do about the usual ones.
fn lookup_error(name: &str, version: Option<u64>, e: FsError) -> anyhow::Error {
    let hint = match (e.errno, version) {
        (Errno::NoEnt, None) => {
            "; `tessera vars list` shows the variables, `tessera vars wait` waits for one"
        }
        _ => "",
    };
    let what = match version {
        Some(v) => format!("version {v} of {name:?}"),
        None => format!("{name:?}"),
    };
    anyhow::anyhow!("looking up {what}: {}{hint}", e.message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::catalogue::{Chunk, Variable};

    #[test]
    fn durations_take_units_and_bare_seconds() {
        assert_eq!(parse_duration("30").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1h 30m").unwrap(), Duration::from_secs(5400));
        let e = parse_duration("soon").unwrap_err();
        assert!(e.contains("'soon' is not a duration"), "{e}");
        assert!(parse_duration("-3s").is_err());
    }

    #[test]
    fn a_version_is_described_chunk_by_chunk() {
        // Process `rank`'s half of a 64 x 32 variable of doubles.
        let half = |rank: u64| Chunk {
            offsets: vec![32 * rank, 0],
            counts: vec![32, 32],
            path: "/tessera/run/t.dat".into(),
            offset: 8192 * rank,
            len: 8192,
        };
        let v = VersionView {
            version: 3,
            variable: Variable {
                name: "temperature".into(),
                elem_type: "f64".into(),
                elem_size: 8,
                dims: vec![64, 32],
            },
            chunks: [0, 1].map(half).to_vec(),
        };
        let text = describe(&v);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "temperature  version 3  f64 (8 bytes each)  dims 64x32  2 chunk(s), 16.0 KiB"
        );
        assert_eq!(
            lines[1].split_whitespace().collect::<Vec<_>>(),
            ["OFFSETS", "COUNTS", "FILE", "OFFSET", "LENGTH"]
        );
        assert_eq!(
            lines[3].split_whitespace().collect::<Vec<_>>(),
            ["32,0", "32,32", "/tessera/run/t.dat", "8192", "8192"]
        );
        assert_eq!(lines.len(), 4);
    }
}
