//! Runs on emulated hosts (`scripts/hosts.sh`), for the demo and the benchmarks: which hosts,
//! where their node-local storage is, and the steps that must run on a host (flush, index
//! sizes, cleanup), all launched through mpirun as a job on a cluster would launch them.

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;
use tessera_proto::InstanceLayout;

/// The variables of `scripts/hosts.sh env` output (`export NAME=VALUE` lines).
pub fn parse_exports(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("export ")?.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The first `count` emulated hosts, as one run uses them.
pub struct EmulatedHosts {
    pub count: u32,
    /// The first `count` hosts of the emulated hosts' host file, one per line.
    pub hostfile: PathBuf,
    /// The burst-buffer root: this demo's directory in every host's node-local storage.
    pub bb_root: PathBuf,
}

fn var(name: &str) -> Result<String> {
    std::env::var(name).with_context(|| {
        format!(
            "{name} is not set: --hosts needs emulated hosts; as root, run `scripts/hosts.sh up N && eval \"$(scripts/hosts.sh env)\"` first (scripts/demo.sh --hosts N does it for the demo)"
        )
    })
}

impl EmulatedHosts {
    /// Picks the first `count` hosts (written to `dir/hostfile`) and a burst-buffer root
    /// named after `dir` in their node-local storage.
    pub fn prepare(count: u32, dir: &Path) -> Result<EmulatedHosts> {
        let all = var("TESSERA_HOSTFILE")?;
        let text = std::fs::read_to_string(&all).with_context(|| format!("reading {all}"))?;
        let hosts = crate::launch::parse_hostfile(&text);
        if hosts.len() < count as usize {
            bail!(
                "--hosts {count}: only {} emulated hosts are up ({}); run `scripts/hosts.sh up {count}`",
                hosts.len(),
                hosts.join(", ")
            );
        }
        let hostfile = dir.join("hostfile");
        std::fs::write(&hostfile, hosts[..count as usize].join("\n") + "\n")?;
        let local = PathBuf::from(var("TESSERA_HOSTS_LOCAL")?);
        let name = dir.file_name().context("the demo directory has no name")?;
        Ok(EmulatedHosts {
            count,
            hostfile,
            bb_root: local.join(name),
        })
    }

    /// Starts one daemon per host through mpirun and waits until every one has registered.
    pub fn start_daemons(&self, layout: &InstanceLayout) -> Result<()> {
        crate::instance::start_launched(
            layout,
            &crate::launch::Launch::Mpirun {
                hostfile: self.hostfile.clone(),
                nodes: self.count,
            },
            std::time::Duration::from_secs(60),
        )
    }

    /// Runs `argv` through mpirun, once on the first host (`per_host` false) or once on
    /// every host; returns what it printed.
    pub fn mpirun(&self, per_host: bool, argv: &[&str]) -> Result<String> {
        let np = if per_host { self.count } else { 1 };
        let out = Command::new("mpirun")
            .arg("--hostfile")
            .arg(&self.hostfile)
            .args(["--map-by", "ppr:1:node", "-np", &np.to_string()])
            .args(argv)
            .env_remove("TESSERA_NODE")
            .output()
            .context("running mpirun")?;
        if !out.status.success() {
            bail!(
                "mpirun {}: {}{}",
                argv.join(" "),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Flushes `path` from the first host.
    pub fn flush(&self, layout: &InstanceLayout, path: &str) -> Result<()> {
        let exe = std::env::current_exe()?;
        let exe = exe.display().to_string();
        let inst = layout.dir.display().to_string();
        self.mpirun(false, &[&exe, "--instance", &inst, "flush", path])?;
        Ok(())
    }

    /// Bytes of every index log on every host.
    pub fn index_bytes(&self) -> Result<u64> {
        let root = self.bb_root.display().to_string();
        let sizes = self.mpirun(
            true,
            &["find", &root, "-name", "*.index", "-printf", "%s\\n"],
        )?;
        Ok(sizes
            .lines()
            .filter_map(|l| l.trim().parse::<u64>().ok())
            .sum())
    }

    /// Removes the demo's burst buffers from every host.
    pub fn remove_bb(&self) {
        let root = self.bb_root.display().to_string();
        if let Err(e) = self.mpirun(true, &["rm", "-rf", &root]) {
            eprintln!("could not remove the burst buffers {root}: {e:#}");
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn exports_are_read_and_other_lines_ignored() {
        let got = super::parse_exports("export A=1\n# note\n  export B=x=y\nC=2\n");
        assert_eq!(got, [("A".into(), "1".into()), ("B".into(), "x=y".into())]);
    }
}
