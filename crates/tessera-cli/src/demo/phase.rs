//! A demo phase: many ranks of one mode started together, timed from the first start to the
//! last end. Ranks run on this machine (spawned here, one daemon each by turn) or wherever
//! mpirun places them over a host file (each on its host's daemon).

use super::rank::RankMode;
use anyhow::{Context, Result, bail};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tessera_proto::InstanceLayout;

/// Result of one phase: bytes moved by all ranks, and the time from first start to last end.
#[derive(Debug)]
pub struct Phase {
    pub bytes: u64,
    pub secs: f64,
}

impl Phase {
    pub fn mibs(&self) -> f64 {
        self.bytes as f64 / (1u64 << 20) as f64 / self.secs
    }
}

/// Where a phase's ranks run.
#[derive(Clone, Copy, Debug)]
pub enum Placement<'a> {
    /// On this machine, without Tessera (direct I/O).
    Direct,
    /// On this machine, rank r on daemon r mod `daemons`.
    Local {
        layout: &'a InstanceLayout,
        daemons: u32,
    },
    /// Started by mpirun over the hosts of `hostfile`, host after host; each rank uses its
    /// host's daemon. The ranks meet in `barrier`, a directory on the shared file system.
    Mpirun {
        layout: &'a InstanceLayout,
        hostfile: &'a Path,
        barrier: &'a Path,
    },
}

/// What one rank reported: "done RANK T0 T1 BYTES".
fn parse_done(line: &str) -> Option<(u32, u128, u128, u64)> {
    let mut p = line.split_whitespace();
    if p.next()? != "done" {
        return None;
    }
    let out = (
        p.next()?.parse().ok()?,
        p.next()?.parse().ok()?,
        p.next()?.parse().ok()?,
        p.next()?.parse().ok()?,
    );
    p.next().is_none().then_some(out)
}

/// Folds the ranks' reports into a phase; every rank must have reported once.
fn phase_of(mode: RankMode, ranks: u32, done: &[(u32, u128, u128, u64)]) -> Result<Phase> {
    for r in 0..ranks {
        if !done.iter().any(|d| d.0 == r) {
            bail!("rank {r} of {mode:?} did not finish (see its message above)");
        }
    }
    let first = done.iter().map(|d| d.1).min().unwrap_or(0);
    let last = done.iter().map(|d| d.2).max().unwrap_or(0);
    Ok(Phase {
        bytes: done.iter().map(|d| d.3).sum(),
        secs: last.saturating_sub(first) as f64 / 1e9,
    })
}

/// Runs `ranks` demo ranks of one mode concurrently, with a start barrier.
pub fn run_phase(
    mode: RankMode,
    ranks: u32,
    xfer: u64,
    count: u64,
    target: &str,
    placement: Placement,
) -> Result<Phase> {
    let exe = std::env::current_exe()?;
    // Start every phase with no dirty pages pending, so no phase pays for another's writeback.
    // SAFETY: sync(2) has no preconditions.
    unsafe { libc::sync() };
    let rank_args = |cmd: &mut Command| {
        cmd.arg("demo-rank")
            .arg("--mode")
            .arg(
                clap::ValueEnum::to_possible_value(&mode)
                    .expect("named")
                    .get_name(),
            )
            .args(["--ranks", &ranks.to_string()])
            .args(["--xfer", &xfer.to_string(), "--count", &count.to_string()])
            .args(["--target", target]);
    };
    match placement {
        Placement::Mpirun {
            layout,
            hostfile,
            barrier,
        } => run_mpirun(mode, ranks, &exe, rank_args, layout, hostfile, barrier),
        Placement::Direct | Placement::Local { .. } => {
            let mut children = Vec::new();
            for r in 0..ranks {
                let mut cmd = Command::new(&exe);
                rank_args(&mut cmd);
                cmd.args(["--rank", &r.to_string()])
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::inherit());
                if let Placement::Local { layout, daemons } = placement {
                    cmd.env("TESSERA_INSTANCE", &layout.dir)
                        .env("TESSERA_NODE", (r % daemons).to_string());
                }
                children.push(cmd.spawn().context("spawning a demo rank")?);
            }
            let mut readers: Vec<BufReader<std::process::ChildStdout>> = children
                .iter_mut()
                .map(|c| BufReader::new(c.stdout.take().expect("piped")))
                .collect();
            let mut line = String::new();
            for (r, rd) in readers.iter_mut().enumerate() {
                line.clear();
                rd.read_line(&mut line)?;
                if line.trim() != "ready" {
                    bail!("rank {r} failed to get ready ({mode:?})");
                }
            }
            for c in children.iter_mut() {
                c.stdin.as_mut().expect("piped").write_all(b"go\n")?;
            }
            let mut done = Vec::new();
            for rd in readers.iter_mut() {
                line.clear();
                rd.read_line(&mut line)?;
                done.extend(parse_done(&line));
            }
            for (r, mut c) in children.into_iter().enumerate() {
                let st = c.wait()?;
                if !st.success() {
                    bail!("rank {r} of {mode:?} exited with {st}");
                }
            }
            phase_of(mode, ranks, &done)
        }
    }
}

/// Runs the ranks through mpirun: they say they are ready with a file each in `barrier`, start
/// when `go` appears there, and print their reports, which mpirun forwards.
fn run_mpirun(
    mode: RankMode,
    ranks: u32,
    exe: &Path,
    rank_args: impl Fn(&mut Command),
    layout: &InstanceLayout,
    hostfile: &Path,
    barrier: &Path,
) -> Result<Phase> {
    let _ = std::fs::remove_dir_all(barrier);
    std::fs::create_dir_all(barrier)?;
    let mut cmd = Command::new("mpirun");
    cmd.arg("--hostfile")
        .arg(hostfile)
        .args([
            "--map-by",
            "node",
            "--oversubscribe",
            "-np",
            &ranks.to_string(),
        ])
        .arg("-x")
        .arg(format!("TESSERA_INSTANCE={}", layout.dir.display()))
        .arg(exe);
    rank_args(&mut cmd);
    cmd.arg("--barrier")
        .arg(barrier)
        .env_remove("TESSERA_NODE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = cmd
        .spawn()
        .context("running mpirun (is Open MPI installed?)")?;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let ready = (0..ranks)
            .filter(|r| barrier.join(format!("ready.{r}")).exists())
            .count();
        if ready == ranks as usize {
            break;
        }
        if let Some(st) = child.try_wait()? {
            bail!("mpirun exited ({st}) before every rank of {mode:?} was ready");
        }
        if Instant::now() > deadline {
            // Our own child, not reaped yet: its pid cannot have been reused.
            let _ = child.kill();
            let _ = child.wait();
            bail!("only {ready} of {ranks} ranks of {mode:?} got ready within 120 s");
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    std::fs::write(barrier.join("go"), b"")?;
    let out = child.wait_with_output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let done: Vec<_> = text.lines().filter_map(parse_done).collect();
    if !out.status.success() {
        bail!("the ranks of {mode:?} failed under mpirun ({})", out.status);
    }
    let _ = std::fs::remove_dir_all(barrier);
    phase_of(mode, ranks, &done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_are_parsed_and_every_rank_must_report() {
        assert_eq!(parse_done("done 2 10 30 5\n"), Some((2, 10, 30, 5)));
        assert_eq!(parse_done("done 2 10 30"), None);
        assert_eq!(parse_done("ready"), None);
        assert_eq!(parse_done("done 2 10 30 5 6"), None);
        let done = [(0, 10, 30, 5), (1, 12, 40, 5)];
        let p = phase_of(RankMode::TesseraWrite, 2, &done).unwrap();
        assert_eq!(p.bytes, 10);
        assert!((p.secs - 30e-9).abs() < 1e-12);
        let e = phase_of(RankMode::TesseraWrite, 3, &done).unwrap_err();
        assert!(e.to_string().contains("rank 2"), "{e}");
    }
}
