//! `tessera start`: its options, the policy that decides what it does (create the instance or
//! not, with how many daemons and which listen address; start one node, every node here, or
//! one per node through a launcher), kept apart from doing it so that it is unit-tested.

use crate::{instance, launch};
use anyhow::{Context, Result, bail};
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;
use tessera_client::Model;
use tessera_proto::InstanceLayout;

/// The options of `tessera start`.
#[derive(Debug, clap::Args)]
pub struct StartArgs {
    /// Number of daemons of a new instance on this machine (a launcher starts one per
    /// node of the allocation or host file).
    #[arg(long)]
    pub daemons: Option<u32>,
    /// How to start the daemons: srun inside a Slurm allocation, mpirun with --hostfile,
    /// else local (all on this machine).
    #[arg(long, value_enum, default_value = "auto")]
    pub launcher: launch::LauncherKind,
    /// Hosts to start one daemon each on, through mpirun (Open MPI host file; node K is
    /// the K-th host).
    #[arg(long)]
    pub hostfile: Option<PathBuf>,
    /// Where daemons listen for each other (new instance): a network in CIDR notation,
    /// an interface name, an address, or `auto` (first non-loopback address; the default
    /// with a launcher). Without a launcher daemons use 127.0.0.1.
    #[arg(long)]
    pub net: Option<String>,
    /// Seconds to wait for every node to register before giving up.
    #[arg(long, default_value_t = 60)]
    pub timeout: u64,
    /// PFS directory that flush writes to (new instance; default INSTANCE/pfs).
    #[arg(long)]
    pub pfs: Option<PathBuf>,
    /// Root of the node-local burst buffers (new instance; default INSTANCE/bb).
    #[arg(long)]
    pub bb_root: Option<PathBuf>,
    /// Stripe size for ownership placement, e.g. 64MiB (new instance).
    #[arg(long, value_parser = crate::size::parse_size)]
    pub stripe_size: Option<u64>,
    /// Burst-buffer space per node, e.g. 100GiB; 0 = until the device is full (new
    /// instance).
    #[arg(long, default_value = "0", value_parser = crate::size::parse_size)]
    pub bb_capacity: u64,
    /// Default consistency model: posix, commit, session or mpiio (new instance).
    #[arg(long, default_value = "session")]
    pub model: Model,
    /// What daemon state survives: process (a daemon crash) or machine (also a power cut;
    /// a device flush per group of changes) (new instance).
    #[arg(long, value_enum, default_value = "process")]
    pub state_durability: StateDurabilityArg,
    /// Start only this node (e.g. to restart a daemon that died).
    #[arg(long)]
    pub node: Option<u32>,
    /// Set any field of instance.toml for a new instance, e.g.
    /// `--set state_checkpoint_idle_ms=10000` (repeatable).
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,
}

/// `--state-durability`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum StateDurabilityArg {
    Process,
    Machine,
}

impl From<StateDurabilityArg> for tessera_proto::config::StateDurability {
    fn from(a: StateDurabilityArg) -> Self {
        match a {
            StateDurabilityArg::Process => Self::Process,
            StateDurabilityArg::Machine => Self::Machine,
        }
    }
}

/// Daemons of a new instance started without a launcher and without `--daemons`.
pub const DEFAULT_DAEMONS: u32 = 3;

/// What `tessera start` does.
#[derive(Debug, PartialEq, Eq)]
pub struct StartPlan {
    /// The instance to create first, if it does not exist.
    pub create: Option<NewInstance>,
    /// Which daemons to start.
    pub start: Starting,
}

/// A new instance's shape, as the start policy decides it.
#[derive(Debug, PartialEq, Eq)]
pub struct NewInstance {
    pub daemons: u32,
    /// `listen_host` of instance.toml, when the options decide it (else the default,
    /// 127.0.0.1).
    pub listen_host: Option<String>,
}

/// Which daemons `tessera start` starts.
#[derive(Debug, PartialEq, Eq)]
pub enum Starting {
    /// One node, here (a restart happens on the node's own host).
    Node(u32),
    /// One daemon per node of the allocation or host file, through the launcher.
    Launched(launch::Launch),
    /// Every node of the instance, on this machine.
    All,
}

/// Decides what `tessera start` does from its options, whether the instance exists, and the
/// launch the environment asks for (`None` without a launcher; ignored for `--node`).
pub fn plan(args: &StartArgs, exists: bool, launch: Option<launch::Launch>) -> Result<StartPlan> {
    let launch = if args.node.is_some() { None } else { launch };
    let create = if exists {
        None
    } else {
        if args.node.is_some() {
            bail!(
                "there is no instance to start a node of: run `tessera start` without --node first"
            );
        }
        let daemons = match (&launch, args.daemons) {
            (Some(l), Some(d)) if d != l.nodes() => bail!(
                "--daemons {d} disagrees with the {} nodes {} starts one daemon on; leave --daemons out",
                l.nodes(),
                l.name()
            ),
            (Some(l), _) => l.nodes(),
            (None, d) => d.unwrap_or(DEFAULT_DAEMONS),
        };
        if daemons == 0 {
            bail!("--daemons 0: an instance needs at least one daemon");
        }
        let listen_host = match (&args.net, &launch) {
            (Some(n), _) => Some(n.clone()),
            (None, Some(_)) => Some("auto".to_string()),
            (None, None) => None,
        };
        Some(NewInstance {
            daemons,
            listen_host,
        })
    };
    let start = match (args.node, launch) {
        (Some(n), _) => Starting::Node(n),
        (None, Some(l)) => Starting::Launched(l),
        (None, None) => Starting::All,
    };
    Ok(StartPlan { create, start })
}

/// `tessera start`: decides, creates the instance if it does not exist, starts the daemons
/// and prints their status.
pub fn run(layout: &InstanceLayout, args: StartArgs) -> Result<()> {
    let hostfile = match &args.hostfile {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("reading host file {}", p.display()))?;
            Some((p.as_path(), launch::parse_hostfile(&text)))
        }
        None => None,
    };
    let env: HashMap<String, String> = std::env::vars().collect();
    // A restart of one node needs no launcher (and no allocation).
    let launch = match args.node {
        Some(_) => None,
        None => launch::choose(args.launcher, &env, hostfile)?,
    };
    let exists = layout.config_path().exists();
    let plan = plan(&args, exists, launch)
        .with_context(|| format!("starting the instance at {}", layout.dir.display()))?;
    if let Some(new) = &plan.create {
        let mut set = args.set.clone();
        if let Some(host) = &new.listen_host {
            set.insert(0, format!("listen_host='{host}'"));
        }
        instance::create(
            layout,
            &instance::CreateOptions {
                daemons: new.daemons,
                pfs: args.pfs.clone().unwrap_or_else(|| layout.dir.join("pfs")),
                bb_root: args.bb_root.clone(),
                stripe_size: args.stripe_size,
                bb_capacity: args.bb_capacity,
                model: args.model,
                state_durability: args.state_durability.into(),
                set,
            },
        )?;
    }
    match &plan.start {
        Starting::Node(n) => instance::start_node(layout, *n)?,
        Starting::Launched(l) => {
            instance::start_launched(layout, l, Duration::from_secs(args.timeout))?
        }
        Starting::All => instance::start_all(layout)?,
    }
    instance::print_status(layout)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use launch::Launch;

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        args: StartArgs,
    }

    fn args(line: &[&str]) -> StartArgs {
        Cmd::try_parse_from(std::iter::once("start").chain(line.iter().copied()))
            .expect("options parse")
            .args
    }

    fn srun(nodes: u32) -> Option<Launch> {
        Some(Launch::Srun { nodes })
    }

    #[test]
    fn a_new_instance_without_a_launcher_has_three_daemons_on_loopback() {
        let p = plan(&args(&[]), false, None).unwrap();
        assert_eq!(
            p,
            StartPlan {
                create: Some(NewInstance {
                    daemons: DEFAULT_DAEMONS,
                    listen_host: None
                }),
                start: Starting::All,
            }
        );
        let p = plan(
            &args(&["--daemons", "5", "--net", "10.0.0.0/24"]),
            false,
            None,
        )
        .unwrap();
        assert_eq!(
            p.create,
            Some(NewInstance {
                daemons: 5,
                listen_host: Some("10.0.0.0/24".into())
            })
        );
    }

    #[test]
    fn a_launcher_sets_the_daemons_and_listens_on_a_routable_address() {
        let p = plan(&args(&[]), false, srun(4)).unwrap();
        assert_eq!(
            p.create,
            Some(NewInstance {
                daemons: 4,
                listen_host: Some("auto".into())
            })
        );
        assert_eq!(p.start, Starting::Launched(Launch::Srun { nodes: 4 }));
        // --net wins over the launcher's default; an agreeing --daemons is accepted.
        let p = plan(&args(&["--daemons", "4", "--net", "eth1"]), false, srun(4)).unwrap();
        assert_eq!(p.create.unwrap().listen_host.as_deref(), Some("eth1"));
    }

    #[test]
    fn daemons_that_disagree_with_the_launcher_are_refused_naming_both() {
        let e = plan(&args(&["--daemons", "3"]), false, srun(4)).unwrap_err();
        let text = format!("{e:#}");
        assert!(
            text.contains("--daemons 3") && text.contains("4 nodes srun"),
            "{text}"
        );
    }

    #[test]
    fn zero_daemons_are_refused() {
        let e = plan(&args(&["--daemons", "0"]), false, None).unwrap_err();
        assert!(format!("{e:#}").contains("at least one daemon"), "{e:#}");
    }

    #[test]
    fn an_existing_instance_is_started_not_created() {
        let p = plan(&args(&["--daemons", "7"]), true, None).unwrap();
        assert_eq!(
            p,
            StartPlan {
                create: None,
                start: Starting::All
            }
        );
        let p = plan(&args(&[]), true, srun(2)).unwrap();
        assert_eq!(p.start, Starting::Launched(Launch::Srun { nodes: 2 }));
    }

    #[test]
    fn a_node_restarts_here_without_the_launcher_and_only_in_an_existing_instance() {
        let p = plan(&args(&["--node", "1"]), true, srun(4)).unwrap();
        assert_eq!(
            p,
            StartPlan {
                create: None,
                start: Starting::Node(1)
            }
        );
        let e = plan(&args(&["--node", "1"]), false, None).unwrap_err();
        assert!(format!("{e:#}").contains("without --node"), "{e:#}");
    }
}
