//! Test harness: real instances of real daemons, and scripted ranks as real processes.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;
use tessera_cli::script::{Cmd, Reply};
use tessera_client::{Client, InstanceLayout, LockKind, LockRun};
#[allow(unused_imports)]
pub use tessera_testkit::{eventually, eventually_ok, eventually_some, holds_within};

pub const TESSERA: &str = env!("CARGO_BIN_EXE_tessera");

/// A running instance in a temporary directory; stopped and removed on drop.
///
/// With `TESSERA_TEST_HOSTS=H` (root only) the instance runs on H emulated hosts
/// (`scripts/hosts.sh`): its daemons are launched by mpirun, one per host, and every rank,
/// interposed program and `tessera` command of the test runs on the host of its node.
pub struct Inst {
    pub root: PathBuf,
    pub layout: InstanceLayout,
    pub nodes: u32,
    /// On emulated hosts: the node-local directory (the same path on every host).
    pub hosts: Option<PathBuf>,
}

/// The emulated hosts' script.
pub fn hosts_script() -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/hosts.sh")
}

/// How many emulated hosts the tests run on (`TESSERA_TEST_HOSTS`), if any.
pub fn test_hosts() -> Option<u32> {
    let n: u32 = std::env::var("TESSERA_TEST_HOSTS").ok()?.parse().ok()?;
    (n > 0).then_some(n)
}

/// Brings the emulated hosts up (once per test process) and returns the environment that
/// points mpirun at them.
pub fn hosts_env() -> &'static Vec<(String, String)> {
    static ENV: std::sync::OnceLock<Vec<(String, String)>> = std::sync::OnceLock::new();
    ENV.get_or_init(|| {
        let n = test_hosts().expect("TESSERA_TEST_HOSTS");
        assert!(
            is_root(),
            "TESSERA_TEST_HOSTS needs root (emulated hosts are network and mount namespaces)"
        );
        let up = Command::new("bash")
            .arg(hosts_script())
            .args(["up", &n.to_string()])
            .output()
            .expect("run hosts.sh");
        assert!(
            up.status.success(),
            "hosts.sh up {n}: {}",
            String::from_utf8_lossy(&up.stderr)
        );
        let env = Command::new("bash")
            .arg(hosts_script())
            .arg("env")
            .output()
            .expect("run hosts.sh env");
        tessera_cli::emulated::parse_exports(&String::from_utf8_lossy(&env.stdout))
    })
}

/// A value of the emulated hosts' environment.
pub fn hosts_var(name: &str) -> String {
    hosts_env()
        .iter()
        .find(|(k, _)| k == name)
        .unwrap_or_else(|| panic!("hosts.sh env sets no {name}"))
        .1
        .clone()
}

impl Inst {
    pub fn start(nodes: u32) -> Inst {
        Inst::start_with(nodes, &[])
    }

    pub fn start_with(nodes: u32, extra: &[&str]) -> Inst {
        let root = tessera_cli::instance::temp_dir("tessera-test").expect("temp dir");
        let line = tessera_testkit::instance::StartLine::new(TESSERA, &root);
        let layout = InstanceLayout::new(line.instance_dir());
        let hosts = test_hosts().map(|h| {
            assert!(
                nodes <= h,
                "the test needs {nodes} nodes, but TESSERA_TEST_HOSTS={h}"
            );
            let all = std::fs::read_to_string(hosts_var("TESSERA_HOSTFILE")).expect("hostfile");
            let hostfile = root.join("hostfile");
            let mine: Vec<&str> = all.lines().take(nodes as usize).collect();
            std::fs::write(&hostfile, mine.join("\n") + "\n").unwrap();
            let local = PathBuf::from(hosts_var("TESSERA_HOSTS_LOCAL"))
                .join(root.file_name().expect("name"));
            (hostfile, local)
        });
        let mut start = match &hosts {
            Some((hostfile, local)) => {
                let mut c = line
                    .bb_root(local)
                    .args([
                        "--hostfile",
                        hostfile.to_str().expect("a UTF-8 scratch path"),
                    ])
                    .command();
                c.envs(hosts_env().iter().map(|(k, v)| (k, v)));
                c
            }
            None => line.daemons(nodes).command(),
        };
        let out = start.args(extra).output().expect("run tessera start");
        assert!(
            out.status.success(),
            "tessera start failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let hosts = hosts.map(|(_, local)| local);
        Inst {
            root,
            layout,
            nodes,
            hosts,
        }
    }

    /// A command that runs `prog` where node `node`'s processes run: on its host when the
    /// instance is on emulated hosts, here otherwise.
    pub fn command_on(&self, node: u32, prog: impl AsRef<std::ffi::OsStr>) -> Command {
        match &self.hosts {
            None => Command::new(prog),
            Some(_) => {
                let mut c = Command::new("bash");
                c.arg(hosts_script())
                    .args(["exec", &self.host_entry(node).host])
                    .arg(prog);
                c
            }
        }
    }

    pub fn client(&self, node: u32) -> Client {
        assert!(
            self.hosts.is_none(),
            "an in-process client cannot reach the daemons of emulated hosts; use a rank"
        );
        Client::connect(self.layout.clone(), Some(node)).expect("connect client")
    }

    pub fn pfs(&self) -> PathBuf {
        self.root.join("pfs")
    }

    pub fn rank(&self, node: u32) -> Rank {
        let mut c = self.command_on(node, TESSERA);
        c.arg("--instance")
            .arg(&self.layout.dir)
            .args(["script", "--node", &node.to_string()]);
        Rank::spawn_cmd(c, node)
    }

    /// Runs `tessera` (on node 0's host when on emulated hosts).
    pub fn tessera(&self, args: &[&str]) -> std::process::Output {
        self.command_on(0, TESSERA)
            .arg("--instance")
            .arg(&self.layout.dir)
            .args(args)
            .output()
            .expect("run tessera")
    }

    /// The row of `node` in the host table.
    pub fn host_entry(&self, node: u32) -> tessera_proto::HostEntry {
        self.layout
            .load_hosts()
            .expect("host table")
            .get(node)
            .unwrap_or_else(|| panic!("node {node} is not registered"))
            .clone()
    }

    pub fn pid(&self, node: u32) -> i32 {
        self.host_entry(node).pid as i32
    }

    /// Where peers reach daemon `node`.
    pub fn addr(&self, node: u32) -> String {
        self.host_entry(node).addr
    }

    /// The client socket of daemon `node`.
    pub fn socket(&self, node: u32) -> PathBuf {
        self.layout.load_config().expect("config").socket_path(node)
    }

    /// Kills daemon `node` with SIGKILL and waits until it is gone.
    pub fn kill9(&self, node: u32) {
        let pid = self.pid(node);
        // SAFETY: signalling a daemon this test started.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        wait_gone(pid, Duration::from_secs(10), "(a daemon) survived SIGKILL");
    }

    /// Client connections daemon `node` serves now (asked over the network, from anywhere).
    pub fn clients(&self, node: u32) -> u64 {
        tessera_cli::admin::Admin::new(&self.layout)
            .expect("admin connection")
            .status(node)
            .expect("status")
            .clients
    }

    /// Waits until daemon `node` serves exactly `n` client connections: a process that ended
    /// has been noticed, and what its end releases is released.
    pub fn wait_clients(&self, node: u32, n: u64) {
        self.wait_clients_where(node, &format!("exactly {n}"), |now| now == n);
    }

    /// Waits until the number of client connections daemon `node` serves satisfies `ok`.
    pub fn wait_clients_where(&self, node: u32, what: &str, ok: impl Fn(u64) -> bool) {
        let admin = tessera_cli::admin::Admin::new(&self.layout).expect("admin connection");
        eventually_ok(
            Duration::from_secs(20),
            &format!("daemon {node} serves {what} clients"),
            || {
                let now = admin.status(node).expect("status").clients;
                if ok(now) {
                    Ok(())
                } else {
                    Err(format!("it serves {now}"))
                }
            },
        );
    }

    /// The log of daemon `node` once it has checked every log on its node (which it does in
    /// the background after it starts serving).
    pub fn log_after_check(&self, node: u32) -> String {
        self.log_once(node, "every log on this node checked")
    }

    /// The log of daemon `node` once it contains `line` (within 20 s).
    pub fn log_once(&self, node: u32, line: &str) -> String {
        eventually_some(
            Duration::from_secs(20),
            &format!("daemon {node} logs {line:?}"),
            || {
                let log = std::fs::read_to_string(self.layout.log_file(node)).unwrap_or_default();
                log.contains(line).then_some(log)
            },
        )
    }

    /// Restarts daemon `node` (on its own host).
    pub fn restart(&self, node: u32) {
        self.restart_with(node, &[]);
    }

    /// Restarts daemon `node` with extra environment (a failpoint).
    pub fn restart_with(&self, node: u32, env: &[(&str, &str)]) {
        let out = self
            .command_on(node, TESSERA)
            .envs(env.iter().copied())
            .arg("--instance")
            .arg(&self.layout.dir)
            .args(["start", "--node", &node.to_string()])
            .output()
            .expect("run tessera start");
        assert!(
            out.status.success(),
            "restart failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Inst {
    /// Lock requests waiting in the lock tables of all the instance's daemons now.
    /// Asked over the administrative connection, which reaches emulated hosts too.
    pub fn lock_waiters(&self) -> u64 {
        let admin = tessera_cli::admin::Admin::new(&self.layout).expect("admin connection");
        (0..self.nodes)
            .map(|n| admin.status(n).expect("status").lock_waiters)
            .sum()
    }

    /// Waits until exactly `n` lock requests wait in the instance's lock tables: a blocking
    /// request sent has reached its table and been queued there (and not granted).
    pub fn wait_lock_waiters(&self, n: u64) {
        eventually_ok(
            Duration::from_secs(20),
            &format!("{n} lock requests waiting"),
            || match self.lock_waiters() {
                now if now == n => Ok(()),
                now => Err(format!("{now} waiting")),
            },
        );
    }

    /// The bytes the burst buffers of all the instance's daemons hold.
    pub fn bb_used(&self) -> u64 {
        (0..self.nodes)
            .map(|n| self.client(n).status().unwrap().bb_used)
            .sum()
    }

    /// Waits until no daemon has a log listed for release or being checked for it (each
    /// released, or found still needed); fails the test after 30 s.
    pub fn wait_no_logs_to_release(&self) {
        self.wait_none_left("logs still listed for release", |s| s.logs_to_release);
    }

    /// Waits until `left` of every daemon's status is 0; fails the test after 30 s, saying
    /// what was still `what` on each node.
    pub fn wait_none_left(&self, what: &str, left: impl Fn(&tessera_proto::NodeStatus) -> u64) {
        eventually_ok(Duration::from_secs(30), &format!("no {what}"), || {
            let by_node: Vec<u64> = (0..self.nodes)
                .map(|n| left(&self.client(n).status().unwrap()))
                .collect();
            if by_node.iter().all(|l| *l == 0) {
                Ok(())
            } else {
                Err(format!("by node: {by_node:?}"))
            }
        });
    }

    /// Waits until the burst buffers hold at most `most` bytes; fails the test after 30 s,
    /// saying what still held them (`what`).
    pub fn wait_bb_used_at_most(&self, most: u64, what: &str) {
        eventually_ok(
            Duration::from_secs(30),
            &format!("the burst buffers hold at most {most} bytes ({what})"),
            || match self.bb_used() {
                used if used <= most => Ok(()),
                used => Err(format!("{used} bytes held in {:?}", self.log_files())),
            },
        );
    }

    /// The files in the logs directories of the instance's nodes (on this machine), with
    /// their sizes: what a failed wait on the burst buffers names.
    pub fn log_files(&self) -> Vec<(String, u64)> {
        (0..self.nodes)
            .flat_map(|n| {
                let dir = self.root.join(format!("bb/node-{n}/logs"));
                std::fs::read_dir(dir)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(move |e| {
                        let len = e.metadata().map_or(0, |m| m.len());
                        (format!("node-{n}/{}", e.file_name().to_string_lossy()), len)
                    })
            })
            .collect()
    }
}

/// Runs `tessera` on the instance of `layout` (started or not).
pub fn tessera_in(layout: &InstanceLayout, args: &[&str]) -> std::process::Output {
    Command::new(TESSERA)
        .arg("--instance")
        .arg(&layout.dir)
        .args(args)
        .output()
        .expect("run tessera")
}

/// A new instance of one daemon in `root/inst`, as `tessera start` writes it, not started.
pub fn fresh_instance(root: &std::path::Path) -> InstanceLayout {
    use tessera_proto::instance_dir;
    let layout = InstanceLayout::new(root.join("inst"));
    instance_dir::make_dir(&layout.dir).unwrap();
    std::fs::create_dir_all(root.join("pfs")).unwrap();
    let cfg = tessera_proto::InstanceConfig::new(1, root.join("pfs"), root.join("bb"));
    layout.save_config(&cfg).unwrap();
    let mut f = instance_dir::create_new(&layout.secret_path()).unwrap();
    Write::write_all(&mut f, "ab".repeat(32).as_bytes()).unwrap();
    layout
}

/// Waits until process `pid` has ended; fails the test, saying it `still`, after `within`.
pub fn wait_gone(pid: i32, within: Duration, still: &str) {
    eventually(within, &format!("process {pid} ends (it {still})"), || {
        !tessera_cli::instance::process_alive(pid)
    });
}

impl Inst {
    /// The panics the instance's daemons reported in their logs (every incarnation's), once
    /// the daemons in `pids` have ended: a daemon that panics, even while it stops, has a bug.
    fn daemon_panics(&self, pids: &[i32]) -> Vec<String> {
        // The logs are read either way: a daemon that did not end is reported by the caller.
        holds_within(Duration::from_secs(20), || {
            !pids
                .iter()
                .any(|p| tessera_cli::instance::process_alive(*p))
        });
        (0..self.nodes)
            .filter_map(|n| {
                let log = std::fs::read_to_string(self.layout.log_file(n)).ok()?;
                let at = log.find("panicked at")?;
                let from = log[..at].rfind('\n').map_or(0, |i| i + 1);
                let excerpt: String = log[from..].lines().take(12).collect::<Vec<_>>().join("\n");
                Some(format!("daemon {n}: {excerpt}"))
            })
            .collect()
    }
}

impl Drop for Inst {
    fn drop(&mut self) {
        let pids: Vec<i32> = self
            .layout
            .load_hosts()
            .map(|t| t.nodes.iter().map(|e| e.pid as i32).collect())
            .unwrap_or_default();
        let _ = Command::new(TESSERA)
            .arg("--instance")
            .arg(&self.layout.dir)
            .arg("stop")
            .output();
        let panics = self.daemon_panics(&pids);
        if let Some(local) = &self.hosts {
            for n in 0..self.nodes {
                let _ = Command::new("bash")
                    .arg(hosts_script())
                    .args(["exec", &format!("h{}", n + 1), "rm", "-rf"])
                    .arg(local)
                    .output();
            }
        }
        if !std::thread::panicking() && panics.is_empty() {
            let _ = std::fs::remove_dir_all(&self.root);
        } else {
            eprintln!("instance kept for inspection: {}", self.root.display());
        }
        if !std::thread::panicking() && !panics.is_empty() {
            panic!("a daemon panicked:\n{}", panics.join("\n"));
        }
    }
}

/// A `tessera script` process bound to one node.
pub struct Rank {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    pub node: u32,
}

impl Rank {
    pub fn spawn(layout: &InstanceLayout, node: u32) -> Rank {
        let mut c = Command::new(TESSERA);
        c.arg("--instance")
            .arg(&layout.dir)
            .args(["script", "--node", &node.to_string()]);
        Rank::spawn_cmd(c, node)
    }

    /// Starts a prepared `tessera script` command as a rank of `node`.
    pub fn spawn_cmd(mut c: Command, node: u32) -> Rank {
        let mut child = c
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn rank");
        let stdin = child.stdin.take().expect("piped");
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        let mut r = Rank {
            child,
            stdin,
            stdout,
            node,
        };
        let hello = r.recv();
        assert!(hello.ok, "rank failed to start: {hello:?}");
        r
    }

    /// Queues a command without waiting for its reply.
    pub fn send(&mut self, cmd: &Cmd) {
        writeln!(
            self.stdin,
            "{}",
            serde_json::to_string(cmd).expect("encode")
        )
        .expect("write to rank");
        self.stdin.flush().expect("flush rank stdin");
    }

    pub fn recv(&mut self) -> Reply {
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read from rank");
        assert!(!line.is_empty(), "rank on node {} exited", self.node);
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad reply {line:?}: {e}"))
    }

    /// Runs one command and returns its reply.
    pub fn run(&mut self, cmd: &Cmd) -> Reply {
        self.send(cmd);
        self.recv()
    }

    /// Runs one command that must succeed.
    pub fn ok(&mut self, cmd: &Cmd) -> Reply {
        let r = self.run(cmd);
        assert!(r.ok, "{cmd:?} failed on node {}: {r:?}", self.node);
        r
    }

    /// Whether a reply is waiting within `timeout` (for commands that may block).
    pub fn has_reply(&mut self, timeout: Duration) -> bool {
        use std::os::fd::AsRawFd;
        if !self.stdout.buffer().is_empty() {
            return true;
        }
        let mut pfd = libc::pollfd {
            fd: self.stdout.get_ref().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the duration of the call.
        unsafe { libc::poll(&mut pfd, 1, timeout.as_millis() as i32) > 0 }
    }

    /// Kills the rank's process with SIGKILL (a process dying without closing anything).
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Opens `path` under `model`: read-write and created if missing, or read-only.
    pub fn open(&mut self, path: &str, model: tessera_client::Model, write: bool) {
        self.ok(&Cmd::Open {
            path: path.into(),
            model,
            read: true,
            write,
            create: write,
        });
    }

    /// Reads and returns the bytes.
    pub fn read(&mut self, off: u64, len: u64) -> Vec<u8> {
        let r = self.ok(&Cmd::Read { off, len });
        decode_hex(r.data.as_deref().unwrap_or(""))
    }

    /// The rank's client statistics (requests, and where its reads came from).
    pub fn stats(&mut self) -> tessera_client::Stats {
        let r = self.ok(&Cmd::Stats);
        serde_json::from_slice(&decode_hex(r.data.as_deref().unwrap_or("")))
            .expect("statistics as JSON")
    }
}

impl Drop for Rank {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "{}", serde_json::to_string(&Cmd::Exit).unwrap());
        let _ = self.stdin.flush();
        if holds_within(Duration::from_secs(10), || {
            matches!(self.child.try_wait(), Ok(Some(_)))
        }) {
            return;
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn decode_hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// One strided run of a list lock: `count` pieces of `len` bytes every `stride` from `start`.
pub fn lock_run(start: u64, len: u64, stride: u64, count: u64, exclusive: bool) -> LockRun {
    LockRun {
        run: tessera_core::Run {
            start,
            len,
            stride,
            count,
        },
        kind: if exclusive {
            LockKind::Exclusive
        } else {
            LockKind::Shared
        },
    }
}

/// The fencing token a granted list lock replied with.
pub fn lock_token(reply: &Reply) -> u64 {
    String::from_utf8(decode_hex(reply.data.as_deref().expect("a token")))
        .unwrap()
        .parse()
        .unwrap()
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The interposer, built beside the `tessera` binary by the workspace build.
pub fn preload_lib() -> PathBuf {
    let p = std::path::Path::new(TESSERA)
        .parent()
        .expect("target dir")
        .join("libtessera_preload.so");
    assert!(
        p.exists(),
        "{} is missing: build it with `cargo build -p tessera-preload`",
        p.display()
    );
    p
}

/// A command run through the interposer, bound to daemon `node`.
pub fn under(inst: &Inst, node: u32, prog: &str, args: &[&str]) -> Command {
    let mut c = inst.command_on(node, prog);
    c.args(args)
        .env("LD_PRELOAD", preload_lib())
        .env("TESSERA_INSTANCE", &inst.layout.dir)
        .env("TESSERA_NODE", node.to_string())
        .stdin(Stdio::null());
    c
}

/// Runs a command through the interposer on daemon `node`; it must succeed.
pub fn ok_under(inst: &Inst, node: u32, prog: &str, args: &[&str]) -> std::process::Output {
    succeeded(&mut under(inst, node, prog, args))
}

pub use tessera_testkit::instance::succeeded;

/// A fresh local scratch directory for one test.
pub fn scratch(name: &str) -> PathBuf {
    // Unique per call: tests of one process run in parallel and may ask for the same name.
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("tessera-test-{}-{n}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Compiles `tests/c/NAME.c` with `compiler` (cc, mpicc, h5pcc) into a scratch directory.
pub fn build_c(compiler: &str, name: &str) -> PathBuf {
    build_program(compiler, name, "c", &[])
}

/// [`build_c`] with further compiler flags (`-D_FORTIFY_SOURCE=2`).
pub fn build_c_with(compiler: &str, name: &str, flags: &[&str]) -> PathBuf {
    build_program(compiler, name, "c", flags)
}

/// Compiles `tests/c/NAME.f90` with `compiler` (mpifort, mpifort.mpich).
pub fn build_fortran(compiler: &str, name: &str) -> PathBuf {
    build_program(compiler, name, "f90", &[])
}

/// Compiles `tests/c/NAME.EXT` with `compiler` into a scratch directory.
fn build_program(compiler: &str, name: &str, ext: &str, flags: &[&str]) -> PathBuf {
    let src =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/c/{name}.{ext}"));
    // One directory per compiler: the same program is built for Open MPI and for MPICH.
    let dir = scratch(&format!("cc-{}-{name}", compiler.replace('.', "-")));
    let exe = dir.join(name);
    // In the scratch directory: some compiler drivers (h5pcc) leave object files in the cwd.
    let out = Command::new(compiler)
        .current_dir(&dir)
        .args(["-O2", "-Wall"])
        .args(flags)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| {
            panic!("{compiler} is missing ({e}): scripts/test.sh installs it from Debian")
        });
    assert!(
        out.status.success(),
        "{compiler} {}: {}",
        src.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// A hand-driven client connection that sends any request, as a hostile or broken program
/// of the instance's user could.
pub struct RawClient {
    pub stream: std::os::unix::net::UnixStream,
    pub client: u64,
}

impl RawClient {
    /// Connects to daemon `node` and says hello (resuming `resume` if given).
    pub fn hello(inst: &Inst, node: u32, resume: Option<u64>) -> Result<RawClient, String> {
        let stream = std::os::unix::net::UnixStream::connect(inst.socket(node))
            .map_err(|e| e.to_string())?;
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let hello = tessera_proto::Hello {
            version: tessera_proto::PROTOCOL_VERSION,
            pid: std::process::id(),
            resume,
            ring: false,
        };
        let mut raw = RawClient { stream, client: 0 };
        match raw.call(hello)? {
            (Ok(bound), _) => {
                raw.client = bound.client;
                Ok(raw)
            }
            (Err(e), _) => Err(e.to_string()),
        }
    }

    /// Sends `req` and waits (at most 20 s) for its answer and the data trailer after it.
    #[allow(clippy::type_complexity)]
    pub fn call<R: tessera_proto::ClientCall>(
        &mut self,
        req: R,
    ) -> Result<(tessera_proto::Answer<R::Reply>, Vec<u8>), String> {
        let body = self.exchange(&tessera_proto::frame::encode(&req.into()))?;
        let (answer, rest) =
            tessera_proto::frame::split_message::<tessera_proto::Answer<R::Reply>>(&body)
                .map_err(|e| e.to_string())?;
        Ok((answer, rest.to_vec()))
    }

    /// Sends an encoded request and returns the body of the answer's frame.
    pub fn exchange(&mut self, request: &[u8]) -> Result<Vec<u8>, String> {
        tessera_proto::frame::write_frame(&mut self.stream, request)
            .map_err(|e| format!("sending: {e}"))?;
        tessera_proto::frame::read_frame(&mut self.stream, 64 << 20)
            .map_err(|e| format!("no answer within 20 s: {e}"))
    }
}

/// The lines the interposer appended to a `TESSERA_STATS` file (none if it does not exist).
pub fn stats_lines(file: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[allow(unused_imports)]
pub use tessera_testkit::damage_on_device;

/// Whether a log on `node` holds bytes of file `ino` that it has not let go (a removed file's
/// bytes, and a migrated-away one's, are let go; a log whose files all went is deleted).
pub fn log_holds(inst: &Inst, node: u32, ino: u64) -> bool {
    let dir = inst.root.join(format!("bb/node-{node}/logs"));
    std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "index"))
        .any(|index| {
            let data = index.with_extension("data");
            let held = tessera_logstore::read_entries(&tessera_logstore::journal_path(&data))
                .is_ok_and(|(_, parsed)| {
                    parsed
                        .of(ino)
                        .iter()
                        .any(|e| matches!(e, tessera_core::index::Entry::Write(_)))
                });
            held && !tessera_logstore::read_dead(&data).is_ok_and(|d| d.contains(&ino))
        })
}
