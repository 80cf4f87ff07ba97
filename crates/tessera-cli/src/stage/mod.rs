//! `tessera stage-in` and `tessera stage-out`: data sets copied in and out around a job, in
//! parallel over every node.
//!
//! The front end walks the sources, skips files whose destination has a completion record
//! matching the source (size and modification time; the record also keeps the CRC32C the
//! copy was checked with), shares the rest among the nodes by bytes
//! (`tessera_core::staging::shares`), writes the plan into the instance directory and
//! launches one worker per node on the node's host ([`worker`]), which copies its share
//! through its own daemon: a stage-in lands in that node's burst buffer. The front end
//! shows the workers' progress (a bar on a terminal: bytes, rate, time left) and ends with a
//! one-line summary. A run cut short (the command or a daemon killed) is run again as it
//! was: what finished is skipped and reported so.

pub mod plan;
pub mod worker;

use anyhow::{Context, Result, bail};
use plan::{Copy, Plan};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;
use tessera_client::{Client, InstanceLayout};
use worker::Event;

/// The options of `tessera stage-in` and `tessera stage-out`.
#[derive(clap::Args, Debug, Clone)]
pub struct StageArgs {
    /// SOURCE... DEST: files or trees, copied into directory DEST as `cp -r` would (for
    /// stage-out without DEST, into the instance's PFS directory).
    pub paths: Vec<String>,
    /// Lines of `SOURCE DESTINATION` (one file or tree each; `#` comments; quote paths with
    /// blanks), instead of or beside the paths.
    #[arg(long)]
    pub manifest: Option<PathBuf>,
    /// No progress bar, even on a terminal.
    #[arg(long)]
    pub quiet: bool,
}

/// Which way a run goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    In,
    Out,
}

/// The (source, destination) pairs a run was given; `mount` is the instance's prefix and
/// `pfs` its PFS directory (a stage-in source there, or a Tessera path, needs no DEST).
pub fn pairs(
    args: &StageArgs,
    direction: Direction,
    mount: &str,
    pfs: &Path,
) -> Result<Vec<(String, Option<String>)>> {
    let mut out = Vec::new();
    if let Some(m) = &args.manifest {
        let text = std::fs::read_to_string(m)
            .with_context(|| format!("reading the manifest {}", m.display()))?;
        for line in tessera_core::staging::parse_manifest(&text)? {
            out.push((line.source, Some(line.dest)));
        }
    }
    match (direction, args.paths.as_slice()) {
        (_, []) => {}
        (Direction::In, [only]) if plan::in_place(only, mount, pfs).is_some() => {
            out.push((only.clone(), None));
        }
        (Direction::In, [_]) => bail!(
            "stage-in needs SOURCE... DEST (the last path is the Tessera directory they go \
             into), or a SOURCE in the instance's PFS directory {} to bring into the burst \
             buffers in place",
            pfs.display()
        ),
        (Direction::In, [sources @ .., dest]) => {
            out.extend(sources.iter().map(|s| (s.clone(), Some(dest.clone()))));
        }
        (Direction::Out, paths) => {
            // Tessera paths only: into the PFS directory. A last path outside the instance
            // is a directory to copy them into.
            match paths.split_last() {
                Some((last, rest)) if !rest.is_empty() && !last.starts_with(mount) => {
                    out.extend(rest.iter().map(|s| (s.clone(), Some(last.clone()))));
                }
                _ => out.extend(paths.iter().map(|s| (s.clone(), None))),
            }
        }
    }
    if out.is_empty() {
        bail!("nothing to stage: give SOURCE... DEST, or --manifest FILE");
    }
    Ok(out)
}

/// The copies of a run, in order.
fn copies(
    c: &Client,
    direction: Direction,
    pairs: &[(String, Option<String>)],
) -> Result<Vec<Copy>> {
    let cfg = c.config();
    let mut out = Vec::new();
    for (source, dest) in pairs {
        match direction {
            Direction::In => match plan::in_place(source, &cfg.mount, &cfg.pfs_dir) {
                Some(at) => {
                    check_in_place(source, &at, dest.as_deref())?;
                    out.extend(plan::tessera_files(c, &at, plan::Target::InPlace)?);
                }
                None => {
                    let dest = dest.as_deref().context("stage-in needs SOURCE... DEST")?;
                    out.extend(plan::local_files(Path::new(source), dest)?);
                }
            },
            Direction::Out => out.extend(plan::tessera_files(
                c,
                source,
                match dest {
                    Some(d) => plan::Target::Local(Path::new(d)),
                    None => plan::Target::Pfs,
                },
            )?),
        }
    }
    Ok(out)
}

/// A source Tessera already has at `at` is staged in place: a DEST, if given, must be
/// where it is.
fn check_in_place(source: &str, at: &str, dest: Option<&str>) -> Result<()> {
    let Some(dest) = dest else { return Ok(()) };
    let parent = at.rsplit_once('/').map_or("/", |(p, _)| p);
    if dest.trim_end_matches('/') != parent.trim_end_matches('/') {
        bail!(
            "{source} is already {at} in Tessera (the instance's PFS directory is imported in \
             place): stage-in brings its bytes into the burst buffers where it is; give it \
             without DEST, or with DEST {parent}"
        );
    }
    Ok(())
}

/// What the run did, for the summary and the exit status.
#[derive(Debug, Default)]
pub struct Outcome {
    pub copied_files: u64,
    pub copied_bytes: u64,
    pub skipped_files: u64,
    pub skipped_bytes: u64,
    /// (destination, error)
    pub failed: Vec<(String, String)>,
    /// Bytes each node's worker copied.
    pub by_node: Vec<u64>,
    pub seconds: f64,
}

/// `tessera stage-in` or `tessera stage-out`.
pub fn run(layout: &InstanceLayout, args: &StageArgs, direction: Direction) -> Result<Outcome> {
    let c = Client::connect(layout.clone(), None)?;
    let cfg = layout.load_config()?;
    let pairs = pairs(args, direction, &cfg.mount, &cfg.pfs_dir)?;
    let copies = copies(&c, direction, &pairs)?;
    let sizes: Vec<u64> = copies.iter().map(|c| c.size).collect();
    let shares = tessera_core::staging::shares(&sizes, cfg.nodes);
    let plan = Plan { copies, shares };
    let dir = layout.dir.join("stage");
    std::fs::create_dir_all(&dir)?;
    let plan_path = dir.join(format!("plan-{:08x}.json", rand::random::<u32>()));
    std::fs::write(&plan_path, serde_json::to_vec(&plan)?)?;
    let outcome = launch(layout, &plan, &plan_path, args.quiet);
    let _ = std::fs::remove_file(&plan_path);
    let outcome = outcome?;
    let verb = match direction {
        Direction::In => "staged in",
        Direction::Out => "staged out",
    };
    let rate = outcome.copied_bytes as f64 / outcome.seconds.max(1e-9);
    println!(
        "{verb} {} files, {} in {:.1} s ({}/s); skipped {} files, {} already staged; {} failed; per node: {}",
        outcome.copied_files,
        crate::instance::human(outcome.copied_bytes),
        outcome.seconds,
        crate::instance::human(rate as u64),
        outcome.skipped_files,
        crate::instance::human(outcome.skipped_bytes),
        outcome.failed.len(),
        outcome
            .by_node
            .iter()
            .enumerate()
            .map(|(n, b)| format!("{n}:{}", crate::instance::human(*b)))
            .collect::<Vec<_>>()
            .join(" ")
    );
    for (dest, e) in &outcome.failed {
        eprintln!("tessera: {dest}: {e}");
    }
    Ok(outcome)
}

/// Runs one worker per node with a share, and follows their progress.
fn launch(layout: &InstanceLayout, plan: &Plan, plan_path: &Path, quiet: bool) -> Result<Outcome> {
    let total: u64 = plan.copies.iter().map(|c| c.size).sum();
    let bar = progress_bar(total, quiet);
    let table = layout.load_hosts()?;
    let exe = std::env::current_exe().context("the tessera binary")?;
    let started = Instant::now();
    let (events, received) = std::sync::mpsc::channel::<(usize, Event)>();
    let mut children = Vec::new();
    for (node, share) in plan.shares.iter().enumerate() {
        if share.is_empty() {
            continue;
        }
        let host = table
            .get(node as u32)
            .map(|e| e.host.clone())
            .with_context(|| format!("node {node} is not registered: start the instance first"))?;
        let line = format!(
            "{} --instance {} stage-worker --plan {} --share {node} --node {node}",
            crate::run_tasks::shell_quote(&exe.display().to_string()),
            crate::run_tasks::shell_quote(&layout.dir.display().to_string()),
            crate::run_tasks::shell_quote(&plan_path.display().to_string()),
        );
        let mut cmd = crate::run_tasks::command_on_host(&host, node as u32, &line, &layout.dir);
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("starting the worker of node {node}"))?;
        let stdout = child.stdout.take().expect("piped");
        let tx = events.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(e) = serde_json::from_str::<Event>(&line) {
                    let _ = tx.send((node, e));
                }
            }
        });
        children.push((node, child));
    }
    drop(events);
    let mut outcome = Outcome {
        by_node: vec![0; plan.shares.len()],
        ..Outcome::default()
    };
    let mut settled = std::collections::HashSet::new();
    for (node, e) in received {
        match e {
            Event::Bytes(n) => {
                outcome.by_node[node] += n;
                if let Some(b) = &bar {
                    b.inc(n);
                }
            }
            Event::Done { copy, bytes } => {
                settled.insert(copy);
                outcome.copied_files += 1;
                outcome.copied_bytes += bytes;
            }
            Event::Skipped { copy, bytes } => {
                settled.insert(copy);
                outcome.skipped_files += 1;
                outcome.skipped_bytes += bytes;
                if let Some(b) = &bar {
                    b.inc(bytes);
                }
            }
            Event::Failed { copy, error } => {
                settled.insert(copy);
                outcome.failed.push((plan.copies[copy].dest.clone(), error));
            }
        }
    }
    for (node, mut child) in children {
        let status = child.wait()?;
        if !status.success() {
            outcome.failed.push((
                format!("node {node}'s worker"),
                format!("ended with {status}"),
            ));
        }
    }
    // A worker that ended early leaves files it never reported.
    for (i, copy) in plan.copies.iter().enumerate() {
        if !settled.contains(&i) && !outcome.failed.iter().any(|(d, _)| *d == copy.dest) {
            outcome.failed.push((
                copy.dest.clone(),
                "not copied: its worker ended first".into(),
            ));
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    outcome.seconds = started.elapsed().as_secs_f64();
    Ok(outcome)
}

/// A bar of bytes, rate and time left, on a terminal only.
fn progress_bar(total: u64, quiet: bool) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if quiet || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new(total);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{bar:40} {bytes}/{total_bytes} {binary_bytes_per_sec} {eta} left",
        )
        .expect("a valid template"),
    );
    Some(bar)
}

/// Whether the run copied everything it had to.
pub fn succeeded(o: &Outcome) -> bool {
    o.failed.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(paths: &[&str]) -> StageArgs {
        StageArgs {
            paths: paths.iter().map(|p| p.to_string()).collect(),
            manifest: None,
            quiet: true,
        }
    }

    #[test]
    fn paths_become_pairs_as_cp_takes_them() {
        let p = pairs(
            &args(&["/in/a", "/in/b", "/tessera/run"]),
            Direction::In,
            "/tessera",
            Path::new("/pfs"),
        )
        .unwrap();
        assert_eq!(
            p,
            [
                ("/in/a".to_string(), Some("/tessera/run".to_string())),
                ("/in/b".to_string(), Some("/tessera/run".to_string()))
            ]
        );
        let e = pairs(
            &args(&["/in/a"]),
            Direction::In,
            "/tessera",
            Path::new("/pfs"),
        )
        .unwrap_err();
        assert!(e.to_string().contains("SOURCE... DEST"), "{e}");
        // A Tessera path alone is staged in place.
        let p = pairs(
            &args(&["/tessera/data"]),
            Direction::In,
            "/tessera",
            Path::new("/pfs"),
        )
        .unwrap();
        assert_eq!(p, [("/tessera/data".to_string(), None)]);
        // Stage-out: Tessera paths into the PFS directory, or into a directory outside.
        let p = pairs(
            &args(&["/tessera/a", "/tessera/b"]),
            Direction::Out,
            "/tessera",
            Path::new("/pfs"),
        )
        .unwrap();
        assert!(p.iter().all(|(_, d)| d.is_none()));
        let p = pairs(
            &args(&["/tessera/a", "/scratch/out"]),
            Direction::Out,
            "/tessera",
            Path::new("/pfs"),
        )
        .unwrap();
        assert_eq!(
            p,
            [("/tessera/a".to_string(), Some("/scratch/out".to_string()))]
        );
        assert!(pairs(&args(&[]), Direction::Out, "/tessera", Path::new("/pfs")).is_err());
    }

    #[test]
    fn an_in_place_source_takes_no_other_destination() {
        assert!(check_in_place("/pfs/run/a", "/tessera/run/a", None).is_ok());
        assert!(check_in_place("/pfs/run/a", "/tessera/run/a", Some("/tessera/run/")).is_ok());
        let e = check_in_place("/pfs/run/a", "/tessera/run/a", Some("/tessera/else"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("already /tessera/run/a") && e.contains("DEST /tessera/run"),
            "{e}"
        );
    }
}
