//! Instances on this machine: create one, start and stop its daemons, report their status.

use crate::admin::Admin;
use anyhow::{Context, Result, bail};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tessera_client::{Client, Model};
use tessera_proto::config::encode_hex;
use tessera_proto::{InstanceConfig, InstanceLayout, instance_dir};

/// How to create a new instance.
#[derive(Clone, Debug)]
pub struct CreateOptions {
    pub daemons: u32,
    pub pfs: PathBuf,
    pub bb_root: Option<PathBuf>,
    pub stripe_size: Option<u64>,
    pub bb_capacity: u64,
    pub model: Model,
    pub state_durability: tessera_proto::config::StateDurability,
    /// `NAME=VALUE` settings of instance.toml fields, applied last.
    pub set: Vec<String>,
}

/// Applies `NAME=VALUE` settings to a configuration: the value is read as TOML (a number, a
/// boolean, a quoted string) or else taken as a string; unknown names are refused with the
/// known ones listed.
pub fn apply_settings(cfg: &InstanceConfig, settings: &[String]) -> Result<InstanceConfig> {
    let mut table = toml::Value::try_from(cfg)?;
    let fields = table.as_table_mut().expect("a struct is a table");
    for s in settings {
        let Some((name, value)) = s.split_once('=') else {
            bail!("--set {s}: expected NAME=VALUE");
        };
        let name = name.trim();
        let optional = InstanceConfig::OPTIONAL_FIELDS;
        if !fields.contains_key(name) && !optional.contains(&name) {
            let mut known: Vec<&str> = fields.keys().map(String::as_str).collect();
            known.extend(optional);
            known.sort_unstable();
            bail!(
                "--set {s}: instance.toml has no field {name}; the fields are {}",
                known.join(", ")
            );
        }
        let parsed = toml::from_str::<toml::Table>(&format!("v = {value}"))
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| toml::Value::String(value.to_string()));
        fields.insert(name.to_string(), parsed);
    }
    let out: InstanceConfig = table
        .try_into()
        .map_err(|e| anyhow::anyhow!("--set: {e}"))?;
    out.validate()?;
    Ok(out)
}

/// Writes instance.toml and a fresh secret; the directory must not hold an instance yet.
/// The directory, made if missing, must be the user's own (see
/// `tessera_proto::instance_dir`): one another user made first is refused, not used.
pub fn create(layout: &InstanceLayout, o: &CreateOptions) -> Result<InstanceConfig> {
    instance_dir::make_dir(&layout.dir)?;
    if layout.config_path().symlink_metadata().is_ok() {
        bail!("{} already holds an instance", layout.dir.display());
    }
    instance_dir::make_dir(&layout.logs_dir())?;
    std::fs::create_dir_all(&o.pfs)
        .with_context(|| format!("creating PFS directory {}", o.pfs.display()))?;
    let pfs = std::fs::canonicalize(&o.pfs)?;
    let bb_root = match &o.bb_root {
        Some(b) => {
            std::fs::create_dir_all(b)?;
            std::fs::canonicalize(b)?
        }
        None => std::fs::canonicalize(&layout.dir)?.join("bb"),
    };
    let mut cfg = InstanceConfig::new(o.daemons, pfs, bb_root);
    if let Some(s) = o.stripe_size {
        cfg.stripe_size = s;
    }
    cfg.bb_capacity = o.bb_capacity;
    cfg.default_model = o.model;
    cfg.state_durability = o.state_durability;
    let cfg = apply_settings(&cfg, &o.set)?;
    tessera_daemon::check_security(&cfg)?;
    let secret: [u8; 32] = rand::random();
    let sp = layout.secret_path();
    instance_dir::create_new(&sp)?
        .write_all(encode_hex(&secret).as_bytes())
        .with_context(|| format!("writing {}", sp.display()))?;
    layout.save_config(&cfg)?;
    Ok(cfg)
}

/// Runs daemon `node` in the foreground (`None`: the node is the launcher's task rank),
/// logging to stderr or, with `to_file`, to `<instance>/logs/node-K.log` (`TESSERA_LOG`
/// filters). Every executable that starts daemons with [`start_node`] offers this as `serve
/// --instance DIR --node K`, since [`start_node`] launches its own executable.
pub fn serve(layout: InstanceLayout, node: Option<u32>, to_file: bool) -> Result<()> {
    layout.check_trusted()?;
    let env: std::collections::HashMap<String, String> = std::env::vars().collect();
    let node = match node.or_else(|| crate::launch::rank_from_env(&env)) {
        Some(n) => n,
        None => bail!(
            "which node is this daemon? give --node K, or start it through a launcher (srun, mpirun) that sets the task rank"
        ),
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("TESSERA_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let fmt = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false);
    if to_file {
        let file = layout.open_log(&InstanceLayout::log_name(node))?;
        fmt.with_writer(std::sync::Mutex::new(file)).init();
    } else {
        fmt.with_writer(std::io::stderr).init();
    }
    if let Err(e) = tessera_daemon::run(layout, node) {
        tracing::error!("{e}");
        return Err(e.into());
    }
    Ok(())
}

/// Whether daemon `node` answers on its socket.
pub fn is_up(layout: &InstanceLayout, node: u32) -> bool {
    Client::connect(layout.clone(), Some(node))
        .and_then(|c| c.status())
        .is_ok()
}

/// Starts daemon `node` in the background and waits until it serves.
pub fn start_node(layout: &InstanceLayout, node: u32) -> Result<()> {
    layout.check_trusted()?;
    if is_up(layout, node) {
        bail!("node {node} of {} is already running", layout.dir.display());
    }
    let exe = std::env::current_exe().context("locating the tessera executable")?;
    let log_path = layout.log_file(node);
    let log = layout.open_log(&InstanceLayout::log_name(node))?;
    let mut child = Command::new(exe)
        .args(["serve", "--instance"])
        .arg(&layout.dir)
        .args(["--node", &node.to_string()])
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0)
        .spawn()
        .context("spawning the daemon")?;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait()? {
            let tail = std::fs::read_to_string(&log_path).unwrap_or_default();
            let tail: Vec<&str> = tail.lines().rev().take(5).collect();
            bail!(
                "daemon of node {node} exited ({status}) during start; last lines of {}:\n{}",
                log_path.display(),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        // Serving its socket and registered (clients find it through the host table).
        let registered = layout
            .load_hosts()
            .is_ok_and(|t| t.get(node).is_some_and(|e| e.pid == child.id()));
        if registered && is_up(layout, node) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "daemon of node {node} did not come up within 20 s; see {}",
                log_path.display()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts every daemon of the instance that is not running.
pub fn start_all(layout: &InstanceLayout) -> Result<()> {
    layout.check_trusted()?;
    let cfg = layout.load_config()?;
    for n in 0..cfg.nodes {
        if !is_up(layout, n) {
            start_node(layout, n)?;
        }
    }
    Ok(())
}

/// Starts one daemon per node through a launcher (see [`crate::launch`]). Rows a previous
/// run left in the host table are cleared first; a node still answering is an error.
pub fn start_launched(
    layout: &InstanceLayout,
    how: &crate::launch::Launch,
    timeout: Duration,
) -> Result<()> {
    layout.check_trusted()?;
    let cfg = layout.load_config()?;
    if cfg.nodes != how.nodes() {
        bail!(
            "the instance in {} has {} nodes, but {} would start {}; use a fresh --instance directory",
            layout.dir.display(),
            cfg.nodes,
            how.name(),
            how.nodes()
        );
    }
    let table = layout.load_hosts()?;
    if !table.nodes.is_empty() {
        let admin = Admin::new(layout)?;
        if let Some(e) = table.nodes.iter().find(|e| admin.status(e.node).is_ok()) {
            bail!(
                "node {} of {} is already running on {}; stop the instance first (`tessera stop`)",
                e.node,
                layout.dir.display(),
                e.host
            );
        }
        layout.update_hosts(|t| t.nodes.clear())?;
    }
    crate::launch::launch(layout, how, timeout)
}

/// Whether process `pid` is still running. A zombie (exited, not yet reaped by its parent,
/// which for a daemon is init) counts as gone.
pub fn process_alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    if unsafe { libc::kill(pid, 0) } != 0 {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_none_or(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => false,
    }
}

/// Stops every registered daemon through an authenticated request (never a signal), waits
/// until each has left the host table, and returns how many stopped. A row whose port no
/// longer answers (a daemon that was killed) is removed. Stopping a stopped instance does
/// nothing.
pub fn stop_all(layout: &InstanceLayout) -> Result<u32> {
    layout.check_trusted()?;
    let table = layout.load_hosts()?;
    if table.nodes.is_empty() {
        return Ok(0);
    }
    let admin = Admin::new(layout)?;
    let mut asked = Vec::new();
    let mut failed = Vec::new();
    for e in &table.nodes {
        match admin.shutdown(e.node) {
            Ok(()) => asked.push(e.clone()),
            Err(err) if refused(&err) => {
                layout.update_hosts(|t| t.unregister(e.node, e.incarnation))?;
            }
            Err(err) => failed.push(format!("node {} on {}: {}", e.node, e.host, err.message)),
        }
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut stopped = 0;
    for e in &asked {
        loop {
            let gone = layout
                .load_hosts()?
                .get(e.node)
                .is_none_or(|now| now.incarnation != e.incarnation);
            // A daemon leaves the table once its state is written and its files closed.
            if gone {
                stopped += 1;
                break;
            }
            if Instant::now() > deadline {
                failed.push(format!(
                    "node {} on {} was asked to stop but is still registered after 20 s",
                    e.node, e.host
                ));
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    if !failed.is_empty() {
        bail!(
            "stopped {stopped} daemon(s); these could not be stopped:\n  {}",
            failed.join("\n  ")
        );
    }
    Ok(stopped)
}

/// Whether an error says nothing listens at the node's address any more.
fn refused(e: &tessera_core::FsError) -> bool {
    e.message.contains("Connection refused") || e.message.contains("not registered")
}

/// Prints one line per node; returns whether all are up.
pub fn print_status(layout: &InstanceLayout) -> Result<bool> {
    layout.check_trusted()?;
    let cfg = layout.load_config()?;
    let table = layout.load_hosts()?;
    let admin = Admin::new(layout)?;
    println!(
        "instance {}  pfs {}  stripe {} MiB  default model {}",
        layout.dir.display(),
        cfg.pfs_dir.display(),
        cfg.stripe_size >> 20,
        cfg.default_model
    );
    println!(
        "{:>4}  {:<12}  {:<21}  {:>5}  {:>8}  {:>7}  {:>10}  {:>7}  {:>9}  {:>10}  burst buffer",
        "node",
        "host",
        "address",
        "state",
        "pid",
        "uptime",
        "bb used",
        "clients",
        "extents",
        "list locks"
    );
    let mut all = true;
    let mut endpoints = Vec::new();
    let mut levels = std::collections::BTreeSet::new();
    let mut to_drop = 0;
    let (mut leases, mut leased, mut asked) = (0, 0, 0);
    for n in 0..cfg.nodes {
        let Some(e) = table.get(n) else {
            all = false;
            println!(
                "{n:>4}  {:<12}  {:<21}  {:>5}  not registered",
                "-", "-", "down"
            );
            continue;
        };
        match admin.status(n) {
            Ok(s) => {
                if let Some(url) = &s.metrics_endpoint {
                    endpoints.push(format!("node {n} {url}"));
                }
                to_drop += s.files_to_drop;
                levels.insert(s.security);
                leases += s.attr_leases;
                leased += s.stats_leased;
                asked += s.stats_leased + s.stats_unleased;
                println!(
                    "{:>4}  {:<12}  {:<21}  {:>5}  {:>8}  {:>6}s  {:>10}  {:>7}  {:>9}  {:>10}  {}",
                    n,
                    e.host,
                    e.addr,
                    "up",
                    s.pid,
                    s.uptime_ms / 1000,
                    human(s.bb_used),
                    s.clients,
                    s.ownership_entries,
                    s.list_locks_granted,
                    s.bb_dir
                )
            }
            Err(err) => {
                all = false;
                println!(
                    "{n:>4}  {:<12}  {:<21}  {:>5}  {}",
                    e.host, e.addr, "down", err.message
                );
            }
        }
    }
    match levels.len() {
        0 => {}
        1 => println!("peer security: {}", levels.first().expect("one level")),
        _ => {
            all = false;
            println!(
                "peer security: daemons disagree ({}); stop the instance and start it again",
                levels
                    .iter()
                    .map(|l| l.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    if cfg.metrics_port.is_none() {
        println!(
            "metrics: off (set metrics_port in instance.toml, or `tessera start --set metrics_port=9400`)"
        );
    }
    for e in &endpoints {
        println!("metrics: {e}");
    }
    if asked > 0 {
        println!(
            "attribute cache: {leased} of {asked} stats answered with a lease ({leases} leases held now)"
        );
    }
    if to_drop > 0 {
        // Removals answer before every node released the bytes.
        println!("{to_drop} removed files are still being released; `bb used` falls as they go");
    }
    Ok(all)
}

pub fn human(b: u64) -> String {
    match b {
        b if b >= 1 << 30 => format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

/// A short temporary directory (Unix socket paths must stay under 108 bytes).
pub fn temp_dir(prefix: &str) -> Result<PathBuf> {
    let base = Path::new("/tmp");
    for _ in 0..100 {
        let d = base.join(format!("{prefix}-{:08x}", rand::random::<u32>()));
        if std::fs::DirBuilder::new().mode(0o700).create(&d).is_ok() {
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700))?;
            return Ok(d);
        }
    }
    bail!("could not create a temporary directory in /tmp")
}
