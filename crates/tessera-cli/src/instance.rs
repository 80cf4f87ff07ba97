//! Instances on this machine: create one, start and stop its daemons, report their status.

use anyhow::{Context, Result, bail};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tessera_client::{Client, Model};
use tessera_proto::config::encode_hex;
use tessera_proto::{InstanceConfig, InstanceLayout};

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
        if !fields.contains_key(name) {
            let known: Vec<&str> = fields.keys().map(String::as_str).collect();
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
pub fn create(layout: &InstanceLayout, o: &CreateOptions) -> Result<InstanceConfig> {
    if layout.config_path().exists() {
        bail!("{} already holds an instance", layout.dir.display());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&layout.dir)
        .with_context(|| format!("creating {}", layout.dir.display()))?;
    std::fs::create_dir_all(layout.dir.join("logs"))?;
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
    let secret: [u8; 32] = rand::random();
    let sp = layout.secret_path();
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&sp)
        .and_then(|mut f| std::io::Write::write_all(&mut f, encode_hex(&secret).as_bytes()))
        .with_context(|| format!("writing {}", sp.display()))?;
    layout.save_config(&cfg)?;
    Ok(cfg)
}

/// Runs daemon `node` in the foreground, logging to stderr (`TESSERA_LOG` filters). Every
/// executable that starts daemons with [`start_node`] offers this as `serve --instance DIR
/// --node K`, since [`start_node`] launches its own executable.
pub fn serve(layout: InstanceLayout, node: u32) -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TESSERA_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    tessera_daemon::run(layout, node)?;
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
    if is_up(layout, node) {
        bail!("node {node} of {} is already running", layout.dir.display());
    }
    let exe = std::env::current_exe().context("locating the tessera executable")?;
    let log_path = layout.log_file(node);
    std::fs::create_dir_all(log_path.parent().expect("logs dir"))?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)?;
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
        if is_up(layout, node) {
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
    let cfg = layout.load_config()?;
    for n in 0..cfg.nodes {
        if !is_up(layout, n) {
            start_node(layout, n)?;
        }
    }
    Ok(())
}

fn pid_of(layout: &InstanceLayout, node: u32) -> Option<i32> {
    std::fs::read_to_string(layout.pid_file(node))
        .ok()?
        .trim()
        .parse()
        .ok()
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

/// Stops every daemon: politely, then with SIGTERM, then SIGKILL.
pub fn stop_all(layout: &InstanceLayout) -> Result<u32> {
    let cfg = layout.load_config()?;
    let mut stopped = 0;
    for n in 0..cfg.nodes {
        let pid = pid_of(layout, n);
        let asked = Client::connect(layout.clone(), Some(n))
            .and_then(|c| c.shutdown_daemon())
            .is_ok();
        if let Some(pid) = pid {
            let deadline = Instant::now() + Duration::from_secs(10);
            if !asked && process_alive(pid) {
                // SAFETY: plain signal delivery to a pid we recorded.
                unsafe { libc::kill(pid, libc::SIGTERM) };
            }
            while process_alive(pid) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
                reap(pid);
            }
            if process_alive(pid) {
                // SAFETY: as above.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            stopped += 1;
        } else if asked {
            stopped += 1;
        }
        let _ = std::fs::remove_file(layout.pid_file(n));
    }
    Ok(stopped)
}

/// Collects a child that exited, if it is ours (daemons started by this process).
fn reap(pid: i32) {
    let mut status = 0;
    // SAFETY: WNOHANG never blocks; a pid that is not our child just returns an error.
    unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
}

/// Prints one line per daemon.
pub fn print_status(layout: &InstanceLayout) -> Result<bool> {
    let cfg = layout.load_config()?;
    println!(
        "instance {}  pfs {}  stripe {} MiB  default model {}",
        layout.dir.display(),
        cfg.pfs_dir.display(),
        cfg.stripe_size >> 20,
        cfg.default_model
    );
    println!(
        "{:>4}  {:>8}  {:>8}  {:>8}  {:>10}  {:>7}  {:>9}  burst buffer",
        "node", "state", "pid", "uptime", "bb used", "clients", "extents"
    );
    let mut all = true;
    for n in 0..cfg.nodes {
        match Client::connect(layout.clone(), Some(n)).and_then(|c| c.status()) {
            Ok(s) => println!(
                "{:>4}  {:>8}  {:>8}  {:>7}s  {:>10}  {:>7}  {:>9}  {}",
                n,
                "up",
                s.pid,
                s.uptime_ms / 1000,
                human(s.bb_used),
                s.clients.saturating_sub(1),
                s.extents_owned,
                s.bb_dir
            ),
            Err(e) => {
                all = false;
                println!("{n:>4}  {:>8}  {e}", "down");
            }
        }
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
