//! `tessera mount` and `tessera umount`: the instance as a FUSE file system (see
//! `tessera_fuse`), for the programs the interposer does not reach.
//!
//! `mount` starts the mount's server in the background (its own process group, its output
//! in the instance's logs) and returns once the kernel shows the mount, or with the server's
//! own error. `umount` refuses while processes hold files or a working directory under the
//! mount, naming them as `fuser -m` would (found from /proc), unless `--lazy`.

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tessera_client::{Client, InstanceLayout, Model};

/// How long `mount` waits for the kernel to show the mount.
const MOUNT_WAIT: Duration = Duration::from_secs(20);

/// The options of `tessera mount`.
#[derive(clap::Args, Debug, Clone)]
pub struct MountArgs {
    /// An empty directory to mount the instance on (the interposer's prefix, `/tessera`,
    /// works too: static and dynamic programs then use the same paths).
    pub mountpoint: PathBuf,
    /// Consistency model of every open through the mount: session (close-to-open, the
    /// default: the kernel may keep a file's pages while it is open), posix, commit or
    /// mpiio (each with direct I/O: every read and write reaches Tessera).
    #[arg(long, default_value = "session")]
    pub model: Model,
    /// Threads answering the kernel's requests.
    #[arg(long, default_value_t = 4)]
    pub threads: usize,
    /// Let other users' processes use the mount (needs `user_allow_other` in
    /// /etc/fuse.conf unless run by root).
    #[arg(long)]
    pub allow_other: bool,
    /// Serve in the foreground (what `mount` runs in the background); ends at unmount.
    #[arg(long)]
    pub foreground: bool,
    /// The node whose daemon the mount talks to (default: this host's).
    #[arg(long)]
    pub node: Option<u32>,
}

/// A mount point as the kernel lists it, made absolute.
fn absolute(p: &Path) -> Result<PathBuf> {
    std::fs::canonicalize(p).with_context(|| {
        format!(
            "mount point {}: it must be an existing directory (mkdir it first)",
            p.display()
        )
    })
}

/// A mount as mountinfo lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mounted {
    pub point: PathBuf,
    /// The file system type (`fuse`, or `fuse.tessera` where the subtype is kept).
    pub kind: String,
    pub source: String,
}

impl Mounted {
    /// Whether it is a Tessera FUSE mount.
    pub fn is_tessera(&self) -> bool {
        self.kind == "fuse.tessera" || (self.kind == "fuse" && self.source == "tessera")
    }
}

/// The mounts of this process's namespace.
fn mounts() -> Result<Vec<Mounted>> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").context("reading mountinfo")?;
    Ok(parse_mountinfo(&text))
}

/// The mounts of a mountinfo text (octal escapes of the kernel undone).
pub fn parse_mountinfo(text: &str) -> Vec<Mounted> {
    text.lines()
        .filter_map(|l| {
            let fields: Vec<&str> = l.split(' ').collect();
            let point = fields.get(4)?;
            let dash = fields.iter().position(|f| *f == "-")?;
            Some(Mounted {
                point: PathBuf::from(unescape(point)),
                kind: fields.get(dash + 1)?.to_string(),
                source: unescape(fields.get(dash + 2)?),
            })
        })
        .collect()
}

fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether a Tessera mount is at `point`.
fn is_mounted(point: &Path) -> Result<bool> {
    Ok(mounts()?.iter().any(|m| m.point == point && m.is_tessera()))
}

/// `tessera mount`.
pub fn mount(layout: &InstanceLayout, args: &MountArgs) -> Result<()> {
    let point = absolute(&args.mountpoint)?;
    if !point.is_dir() {
        bail!("mount point {}: not a directory", point.display());
    }
    if mounts()?.iter().any(|m| m.point == point) {
        bail!(
            "{} is a mount point already (`tessera umount {0}` first, if it is a Tessera mount)",
            point.display()
        );
    }
    if !std::path::Path::new("/dev/fuse").exists() {
        bail!(
            "/dev/fuse is missing: load the fuse module (modprobe fuse), or ask the system's administrators for FUSE"
        );
    }
    if args.foreground {
        return serve(layout, args, &point);
    }
    let log_path = layout.logs_dir().join(format!(
        "mount-{}.log",
        point.to_string_lossy().trim_matches('/').replace('/', "_")
    ));
    let log = std::fs::File::create(&log_path)
        .with_context(|| format!("creating {}", log_path.display()))?;
    let mut cmd = Command::new(std::env::current_exe().context("the tessera binary")?);
    cmd.arg("--instance")
        .arg(&layout.dir)
        .arg("mount")
        .arg(&point)
        .arg("--foreground")
        .args(["--model", args.model.name()])
        .args(["--threads", &args.threads.to_string()]);
    if args.allow_other {
        cmd.arg("--allow-other");
    }
    if let Some(n) = args.node {
        cmd.args(["--node", &n.to_string()]);
    }
    use std::os::unix::process::CommandExt;
    let mut child = cmd
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        // Its own process group: a Ctrl-C of the shell that mounted does not end it.
        .process_group(0)
        .spawn()
        .context("starting the mount's server")?;
    let started = Instant::now();
    loop {
        if is_mounted(&point)? {
            println!(
                "mounted {} on {} (model {}, server pid {}, log {})",
                layout.dir.display(),
                point.display(),
                args.model,
                child.id(),
                log_path.display()
            );
            return Ok(());
        }
        if let Some(status) = child.try_wait()? {
            let text = std::fs::read_to_string(&log_path).unwrap_or_default();
            bail!(
                "the mount's server ended ({status}) before the mount appeared:\n{}",
                text.trim_end()
            );
        }
        if started.elapsed() > MOUNT_WAIT {
            let _ = child.kill();
            bail!(
                "the mount did not appear within {}s; see {}",
                MOUNT_WAIT.as_secs(),
                log_path.display()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn serve(layout: &InstanceLayout, args: &MountArgs, point: &Path) -> Result<()> {
    let client = Client::connect(layout.clone(), args.node)?;
    let options = tessera_fuse::MountOptions {
        model: args.model,
        threads: args.threads,
        allow_other: args.allow_other,
    };
    eprintln!(
        "serving {} on {} (model {})",
        layout.dir.display(),
        point.display(),
        args.model
    );
    tessera_fuse::serve(client, layout.clone(), point, &options)
        .with_context(|| format!("mounting on {}", point.display()))?;
    eprintln!("unmounted {}", point.display());
    Ok(())
}

/// A process that holds something under a mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub pid: u32,
    pub command: String,
    /// What it holds: `working directory`, `open file PATH`, `root`, `mapped PATH`.
    pub what: String,
}

/// Whether `p` is `point` or below it.
pub fn is_under(p: &Path, point: &Path) -> bool {
    p.starts_with(point)
}

/// The processes that hold a working directory, a root, an open file or a mapping under
/// `point` (as `fuser -m` finds them), except this one.
pub fn holders(point: &Path) -> Vec<Holder> {
    let me = std::process::id();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in procs.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let dir = entry.path();
        let command = std::fs::read_to_string(dir.join("comm"))
            .map(|c| c.trim_end().to_string())
            .unwrap_or_else(|_| "?".into());
        let mut found = |what: String| {
            out.push(Holder {
                pid,
                command: command.clone(),
                what,
            })
        };
        if std::fs::read_link(dir.join("cwd")).is_ok_and(|p| is_under(&p, point)) {
            found("working directory".into());
        }
        if std::fs::read_link(dir.join("root")).is_ok_and(|p| is_under(&p, point)) {
            found("root".into());
        }
        if let Ok(fds) = std::fs::read_dir(dir.join("fd")) {
            for fd in fds.flatten() {
                if let Ok(p) = std::fs::read_link(fd.path())
                    && is_under(&p, point)
                {
                    found(format!("open file {}", p.display()));
                    break;
                }
            }
        }
        if let Ok(maps) = std::fs::read_to_string(dir.join("maps"))
            && let Some(p) = maps
                .lines()
                .filter_map(|l| l.split_whitespace().nth(5))
                .map(Path::new)
                .find(|p| is_under(p, point))
        {
            found(format!("mapped {}", p.display()));
        }
    }
    out
}

/// `tessera umount`.
pub fn umount(point: &Path, lazy: bool) -> Result<()> {
    let point = absolute(point)?;
    if !is_mounted(&point)? {
        bail!("{} is not a Tessera mount", point.display());
    }
    if !lazy {
        let held = holders(&point);
        if !held.is_empty() {
            let list: Vec<String> = held
                .iter()
                .map(|h| format!("  pid {} ({}): {}", h.pid, h.command, h.what))
                .collect();
            bail!(
                "{}: busy (EBUSY); these processes use it:\n{}\nend them or leave the directory, or `tessera umount --lazy` to detach it now and let it go when they are done",
                point.display(),
                list.join("\n")
            );
        }
    }
    let mut cmd = Command::new("fusermount3");
    cmd.arg("-u");
    if lazy {
        cmd.arg("-z");
    }
    let out = cmd
        .arg(&point)
        .output()
        .context("running fusermount3 (Debian's fuse3)")?;
    if !out.status.success() {
        bail!(
            "fusermount3 -u {}: {}",
            point.display(),
            String::from_utf8_lossy(&out.stderr).trim_end()
        );
    }
    println!("unmounted {}", point.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_give_points_and_types_with_escapes_undone() {
        let text = "36 35 98:0 / /mnt/a\\040b rw,noatime master:1 - fuse.tessera tessera rw\n\
                    37 35 98:0 / / rw - ext4 /dev/vda rw\n";
        let m = parse_mountinfo(text);
        assert_eq!(m[0].point, PathBuf::from("/mnt/a b"));
        assert!(m[0].is_tessera());
        assert_eq!(m[1].point, PathBuf::from("/"));
        assert_eq!(
            (m[1].kind.as_str(), m[1].source.as_str()),
            ("ext4", "/dev/vda")
        );
        assert!(!m[1].is_tessera());
        let plain = parse_mountinfo("40 35 0:50 / /t rw - fuse tessera rw,user_id=0\n");
        assert!(plain[0].is_tessera(), "a mount whose subtype was dropped");
    }

    #[test]
    fn a_process_with_its_working_directory_below_is_a_holder() {
        let dir = std::env::temp_dir().join(format!("tessera-holders-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        let mut child = Command::new("sleep")
            .arg("30")
            .current_dir(dir.join("sub"))
            .spawn()
            .unwrap();
        let found = holders(&dir);
        child.kill().unwrap();
        child.wait().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            found.iter().any(|h| h.pid == child.id()
                && h.what == "working directory"
                && h.command == "sleep"),
            "{found:?}"
        );
        assert!(!is_under(Path::new("/tmp/ab"), Path::new("/tmp/a")));
        assert!(is_under(Path::new("/tmp/a/b"), Path::new("/tmp/a")));
    }
}
