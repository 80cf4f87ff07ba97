//! Starting one daemon per node inside a job's allocation, through the job's own launcher.
//!
//! `tessera start` inside a Slurm allocation runs `srun --ntasks-per-node=1 --overlap` over
//! the allocation's nodes; with `--launcher mpirun --hostfile F` it runs Open MPI's `mpirun
//! --map-by ppr:1:node` over the hosts of F. Either way each daemon learns its node id from
//! the launcher's task rank, registers in the host table when it serves, and `tessera start`
//! returns once every node has, or fails naming the nodes that did not. The launcher keeps
//! running in the background for the daemons' lifetime; `tessera stop` ends the daemons (and
//! so the launcher) through authenticated requests.
//!
//! What to run is decided by pure functions ([`choose`], [`parse_hostfile`],
//! [`Launch::command`]) of the environment and the options, tested without a cluster.

use anyhow::{Context, Result, bail};
use std::collections::HashMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tessera_proto::InstanceLayout;

/// Which launcher starts the daemons.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LauncherKind {
    /// `srun` inside an allocation, `mpirun` with a host file, else this machine.
    Auto,
    /// Every daemon on this machine, started by `tessera start` itself.
    Local,
    /// Slurm's `srun`, one task per node of the allocation.
    Srun,
    /// Open MPI's `mpirun` over the hosts of `--hostfile`.
    Mpirun,
}

/// A launch across hosts, as decided from the options and the environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Launch {
    Srun { nodes: u32 },
    Mpirun { hostfile: PathBuf, nodes: u32 },
}

/// The hosts of an Open MPI host file, in order, each once (`host slots=N`, comments `#`).
pub fn parse_hostfile(text: &str) -> Vec<String> {
    let mut hosts: Vec<String> = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if let Some(host) = line.split_whitespace().next()
            && !hosts.iter().any(|h| h == host)
        {
            hosts.push(host.to_string());
        }
    }
    hosts
}

/// Decides how to launch, or `None` for daemons on this machine only. `env` is the process
/// environment; `hostfile_hosts` the hosts of `--hostfile`, if given.
pub fn choose(
    kind: LauncherKind,
    env: &HashMap<String, String>,
    hostfile: Option<(&Path, Vec<String>)>,
) -> Result<Option<Launch>> {
    let slurm_nodes = || -> Result<u32> {
        let v = env
            .get("SLURM_JOB_NUM_NODES")
            .or_else(|| env.get("SLURM_NNODES"))
            .context("not inside a Slurm allocation (SLURM_JOB_NUM_NODES is not set); run `tessera start` from a batch script or under salloc, or choose --launcher mpirun --hostfile FILE")?;
        v.parse()
            .with_context(|| format!("SLURM_JOB_NUM_NODES = '{v}' is not a number"))
    };
    let mpirun = |hf: Option<(&Path, Vec<String>)>| -> Result<Launch> {
        let Some((path, hosts)) = hf else {
            bail!("--launcher mpirun needs --hostfile FILE (one host per line)");
        };
        if hosts.is_empty() {
            bail!("host file {} names no host", path.display());
        }
        Ok(Launch::Mpirun {
            hostfile: path.to_path_buf(),
            nodes: hosts.len() as u32,
        })
    };
    Ok(match kind {
        LauncherKind::Local => None,
        LauncherKind::Srun => Some(Launch::Srun {
            nodes: slurm_nodes()?,
        }),
        LauncherKind::Mpirun => Some(mpirun(hostfile)?),
        LauncherKind::Auto => {
            if hostfile.is_some() {
                Some(mpirun(hostfile)?)
            } else if env.contains_key("SLURM_JOB_ID") {
                Some(Launch::Srun {
                    nodes: slurm_nodes()?,
                })
            } else {
                None
            }
        }
    })
}

impl Launch {
    pub fn nodes(&self) -> u32 {
        match self {
            Launch::Srun { nodes } | Launch::Mpirun { nodes, .. } => *nodes,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Launch::Srun { .. } => "srun",
            Launch::Mpirun { .. } => "mpirun",
        }
    }

    /// The launcher's command line that runs `exe serve` once per node.
    pub fn command(&self, exe: &Path, instance: &Path) -> Vec<String> {
        let mut argv: Vec<String> = match self {
            Launch::Srun { nodes } => vec![
                "srun".into(),
                format!("--nodes={nodes}"),
                format!("--ntasks={nodes}"),
                "--ntasks-per-node=1".into(),
                "--overlap".into(),
                "--kill-on-bad-exit=0".into(),
            ],
            Launch::Mpirun { hostfile, nodes } => vec![
                "mpirun".into(),
                "--hostfile".into(),
                hostfile.display().to_string(),
                "--map-by".into(),
                "ppr:1:node".into(),
                "-np".into(),
                nodes.to_string(),
                "-x".into(),
                "TESSERA_LOG".into(),
                // A daemon that dies (killed, its host lost) must not take the others down:
                // by default mpirun aborts the whole job. It is restarted with
                // `tessera start --node K`.
                "--mca".into(),
                "orte_enable_recovery".into(),
                "1".into(),
                "--mca".into(),
                "orte_abort_on_non_zero_status".into(),
                "0".into(),
            ],
        };
        argv.push(exe.display().to_string());
        argv.extend([
            "serve".into(),
            "--instance".into(),
            instance.display().to_string(),
            "--log".into(),
        ]);
        argv
    }
}

/// The node id of a daemon started by a launcher: its task rank.
pub fn rank_from_env(env: &HashMap<String, String>) -> Option<u32> {
    [
        "OMPI_COMM_WORLD_RANK",
        "PMIX_RANK",
        "PMI_RANK",
        "SLURM_PROCID",
    ]
    .iter()
    .find_map(|k| env.get(*k)?.parse().ok())
}

/// Runs the launcher in the background and waits until every node has registered in the
/// host table; on a timeout or an early exit of the launcher, stops it and names the nodes
/// that did not register.
pub fn launch(layout: &InstanceLayout, how: &Launch, timeout: Duration) -> Result<()> {
    let exe = std::env::current_exe().context("locating the tessera executable")?;
    let argv = how.command(&exe, &layout.dir);
    let log_path = layout.logs_dir().join("launcher.log");
    let log = layout.open_log("launcher.log")?;
    // Always set: mpirun's `-x` refuses to forward an unset variable.
    let filter = std::env::var("TESSERA_LOG").unwrap_or_else(|_| "info".to_string());
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .env("TESSERA_LOG", filter)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0)
        .spawn()
        .with_context(|| format!("running {} (is it installed?)", argv[0]))?;
    eprintln!(
        "started {} daemons with {}: {}",
        how.nodes(),
        how.name(),
        argv.join(" ")
    );
    let deadline = Instant::now() + timeout;
    let mut last_missing = Vec::new();
    loop {
        let table = layout.load_hosts()?;
        let missing: Vec<u32> = (0..how.nodes())
            .filter(|n| table.get(*n).is_none())
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        if missing != last_missing {
            eprintln!(
                "  {} of {} nodes registered",
                how.nodes() as usize - missing.len(),
                how.nodes()
            );
            last_missing = missing.clone();
        }
        let exited = child.try_wait()?;
        if exited.is_some() || Instant::now() > deadline {
            // What the launcher was still running: which step of a launch hangs (the remote
            // agent, the launcher's daemon on a host, a daemon) is told apart by it.
            let running = if exited.is_none() {
                group_listing(child.id() as i32)
            } else {
                String::new()
            };
            if exited.is_none() {
                // Our own child, not reaped yet: its pid (and process group) cannot have
                // been reused.
                // SAFETY: plain signal delivery to our child's process group.
                unsafe { libc::kill(-(child.id() as i32), libc::SIGTERM) };
                let _ = child.wait();
            }
            let tail = std::fs::read_to_string(&log_path).unwrap_or_default();
            let tail: Vec<&str> = tail.lines().rev().take(8).collect();
            let names: Vec<String> = missing.iter().map(|n| format!("node {n}")).collect();
            bail!(
                "{} did not register {} (launcher {}); last lines of {}:\n{}{running}",
                names.join(", "),
                match exited {
                    Some(s) => format!("before {} exited ({s})", how.name()),
                    None => format!("within {timeout:?}"),
                },
                argv.join(" "),
                log_path.display(),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The processes of process group `pgid` (the launcher and what it started, on this host),
/// one line each with its state, for a launch that hangs; empty if none is left.
fn group_listing(pgid: i32) -> String {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return String::new();
    };
    let mut lines = Vec::new();
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp ...: the fields after the last ')'.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.get(2).and_then(|g| g.parse::<i32>().ok()) != Some(pgid) {
            continue;
        }
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|c| {
                String::from_utf8_lossy(&c)
                    .replace('\0', " ")
                    .trim()
                    .to_string()
            })
            .unwrap_or_default();
        lines.push(format!("  {pid} {} {cmd}", fields.first().unwrap_or(&"?")));
    }
    if lines.is_empty() {
        return String::new();
    }
    lines.sort();
    format!(
        "\nstill running in the launcher's process group (pid, state, command):\n{}",
        lines.join("\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_hanging_launch_lists_what_its_group_still_runs() {
        let mut sleeper = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = sleeper.id() as i32;
        // The child may still be inside exec when spawn returns: wait for its command line.
        tessera_testkit::eventually(Duration::from_secs(10), "sleep 30 runs", || {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c.starts_with(b"sleep"))
        });
        let listing = group_listing(pid);
        let _ = sleeper.kill();
        let _ = sleeper.wait();
        assert!(listing.contains(&format!("  {pid} ")), "{listing}");
        assert!(listing.contains("sleep 30"), "{listing}");
        assert_eq!(group_listing(i32::MAX), "");
    }

    #[test]
    fn hostfiles_list_each_host_once_in_order() {
        let hosts = parse_hostfile("h2 slots=4\n# comment\n\nh1\nh2 slots=1 # again\n  h3  \n");
        assert_eq!(hosts, ["h2", "h1", "h3"]);
    }

    #[test]
    fn an_allocation_is_detected_from_the_environment() {
        let slurm = env(&[("SLURM_JOB_ID", "42"), ("SLURM_JOB_NUM_NODES", "3")]);
        let got = choose(LauncherKind::Auto, &slurm, None).unwrap();
        assert_eq!(got, Some(Launch::Srun { nodes: 3 }));
        let argv = got
            .unwrap()
            .command(Path::new("/bin/tessera"), Path::new("/i"));
        assert!(argv.starts_with(&["srun".to_string(), "--nodes=3".to_string()]));
        assert!(argv.contains(&"--ntasks-per-node=1".to_string()));
        assert!(argv.contains(&"--overlap".to_string()));
        assert!(argv.ends_with(&["serve", "--instance", "/i", "--log"].map(String::from)));
        assert_eq!(choose(LauncherKind::Auto, &env(&[]), None).unwrap(), None);
        let e = choose(LauncherKind::Srun, &env(&[]), None).unwrap_err();
        assert!(format!("{e:#}").contains("not inside a Slurm allocation"));
    }

    #[test]
    fn a_hostfile_means_mpirun_one_daemon_per_host() {
        let hf = Path::new("/h");
        let got = choose(
            LauncherKind::Auto,
            &env(&[("SLURM_JOB_ID", "1")]),
            Some((hf, vec!["a".into(), "b".into()])),
        )
        .unwrap()
        .unwrap();
        assert_eq!(got.nodes(), 2);
        let argv = got.command(Path::new("/t"), Path::new("/i")).join(" ");
        assert!(
            argv.starts_with("mpirun --hostfile /h --map-by ppr:1:node -np 2"),
            "{argv}"
        );
        let e = choose(LauncherKind::Mpirun, &env(&[]), None).unwrap_err();
        assert!(format!("{e:#}").contains("needs --hostfile"));
        let e = choose(LauncherKind::Mpirun, &env(&[]), Some((hf, vec![]))).unwrap_err();
        assert!(format!("{e:#}").contains("names no host"));
    }

    #[test]
    fn a_daemon_takes_its_node_from_the_launchers_rank() {
        assert_eq!(
            rank_from_env(&env(&[("OMPI_COMM_WORLD_RANK", "2")])),
            Some(2)
        );
        assert_eq!(rank_from_env(&env(&[("SLURM_PROCID", "5")])), Some(5));
        assert_eq!(rank_from_env(&env(&[("SLURM_PROCID", "x")])), None);
    }
}
