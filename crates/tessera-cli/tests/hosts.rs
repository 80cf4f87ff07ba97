//! Tessera across emulated hosts (`scripts/hosts.sh`: network, UTS and mount namespaces on a
//! bridge): daemons launched by mpirun register their hosts, clients find the daemon of their
//! own host, `stop` ends them without signals, a host whose link goes down fails the requests
//! that need it within the configured bound while the rest carries on, and loses its list
//! locks when their lease ends.
//!
//! Needs root; `scripts/test.sh` runs these with `TESSERA_TEST_HOSTS=3 ... --ignored`.

mod common;

use common::{
    Inst, TESSERA, eventually, eventually_ok, eventually_some, hosts_script, lock_run, lock_token,
    under,
};
use std::process::Command;
use std::time::{Duration, Instant};
use tessera_cli::script::{Cmd, Reply, pattern_byte};
use tessera_client::Model;

fn on_hosts(nodes: u32, extra: &[&str]) -> Inst {
    assert!(
        common::test_hosts().is_some(),
        "run with TESSERA_TEST_HOSTS=3 (as root): these tests need emulated hosts"
    );
    Inst::start_with(nodes, extra)
}

fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
#[ignore = "needs root: runs on emulated hosts (network namespaces); scripts/test.sh runs it as root with TESSERA_TEST_HOSTS=3"]
fn daemons_register_their_hosts_and_clients_find_their_own() {
    let inst = on_hosts(3, &[]);
    let table = inst.layout.load_hosts().unwrap();
    for n in 0..3u32 {
        let e = table.get(n).expect("registered");
        assert_eq!(e.host, format!("h{}", n + 1), "node {n} runs on its host");
        let ip: std::net::SocketAddr = e.addr.parse().unwrap();
        assert!(!ip.ip().is_loopback(), "node {n} registered {ip}");
    }
    let status = inst.tessera(&["status"]);
    assert!(status.status.success(), "{}", text(&status));
    let shown = text(&status);
    for h in ["h1", "h2", "h3"] {
        assert!(
            shown.lines().any(|l| l.contains(h) && l.contains(" up ")),
            "{shown}"
        );
    }
    // A process on h2, not told its node, writes through the daemon of h2 (node 1).
    let mut w = under(&inst, 1, "cp", &["/etc/hostname", "/tessera/from-h2"]);
    w.env_remove("TESSERA_NODE");
    let out = w.output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let where_ = inst.tessera(&["where", "/tessera/from-h2"]);
    assert!(
        text(&where_).contains("node 1"),
        "the writer on h2 holds its bytes on node 1: {}",
        text(&where_)
    );
    // A process on a host without a daemon (this machine) is told which hosts have one.
    let out = Command::new(TESSERA)
        .arg("--instance")
        .arg(&inst.layout.dir)
        .args(["stat", "/tessera"])
        .env_remove("TESSERA_NODE")
        .output()
        .unwrap();
    let err = text(&out);
    assert!(!out.status.success());
    assert!(
        err.contains("EHOSTDOWN") && err.contains("has no Tessera daemon"),
        "{err}"
    );
    assert!(err.contains("h1, h2, h3"), "{err}");
}

#[test]
#[ignore = "needs root: runs on emulated hosts (network namespaces); scripts/test.sh runs it as root with TESSERA_TEST_HOSTS=3"]
fn stop_ends_every_daemon_and_is_idempotent() {
    let inst = on_hosts(3, &[]);
    let pids: Vec<i32> = (0..3).map(|n| inst.pid(n)).collect();
    for _ in 0..2 {
        let out = Command::new(TESSERA)
            .arg("--instance")
            .arg(&inst.layout.dir)
            .arg("stop")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
    }
    assert!(inst.layout.load_hosts().unwrap().nodes.is_empty());
    eventually(
        Duration::from_secs(20),
        &format!("daemons {pids:?} end after stop"),
        || {
            !pids
                .iter()
                .any(|p| tessera_cli::instance::process_alive(*p))
        },
    );
}

const CHUNK: u64 = 16 << 10;
const WRITERS: u64 = 4;

fn chunk(i: u64, w: u64) -> u64 {
    (i * WRITERS + w) * CHUNK
}

/// Runs `cmd` and returns its reply, failing the test if none comes within `limit`.
fn bounded(r: &mut common::Rank, cmd: &Cmd, limit: Duration) -> (Reply, Duration) {
    let t = Instant::now();
    r.send(cmd);
    assert!(
        r.has_reply(limit),
        "{cmd:?} on node {} hung for {limit:?}",
        r.node
    );
    (r.recv(), t.elapsed())
}

/// Brings a host's link back when dropped, even if the test failed while it was down.
struct LinkDown(u32);

impl LinkDown {
    fn take(host: u32) -> LinkDown {
        link(host, "down");
        LinkDown(host)
    }
}

impl Drop for LinkDown {
    fn drop(&mut self) {
        link(self.0, "up");
    }
}

fn link(host: u32, state: &str) {
    let out = Command::new("bash")
        .arg(hosts_script())
        .args(["link", &host.to_string(), state])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
}

/// The link of h3 goes down in the middle of a 4-writer workload: what needs h3 fails with
/// EHOSTDOWN naming it within the bound, what does not keeps working, and once the link is
/// back the same processes carry on and commit.
#[test]
#[ignore = "needs root: runs on emulated hosts (network namespaces); scripts/test.sh runs it as root with TESSERA_TEST_HOSTS=3"]
fn a_lost_link_fails_what_needs_it_within_the_bound_and_heals() {
    let inst = on_hosts(
        3,
        &[
            "--stripe-size",
            "65536",
            "--set",
            "peer_timeout_ms=2000",
            "--set",
            "peer_handshake_timeout_ms=1000",
        ],
    );
    let path = "/tessera/linkdown";
    // Writers on h1, h2, h3, h1.
    let mut writers: Vec<_> = (0..WRITERS).map(|w| inst.rank((w % 3) as u32)).collect();
    for r in writers.iter_mut() {
        r.open(path, Model::Commit, true);
    }
    let write_round = |writers: &mut Vec<common::Rank>, i: u64| {
        for (w, r) in writers.iter_mut().enumerate() {
            r.ok(&Cmd::Write {
                off: chunk(i, w as u64),
                len: CHUNK,
                id: (i * WRITERS + w as u64 + 1) as u32,
            });
        }
    };
    for i in 0..8 {
        write_round(&mut writers, i);
    }
    for r in writers.iter_mut() {
        r.ok(&Cmd::Commit);
    }
    // A reader on h1 opens (session: owners cached at open) before the link goes.
    let mut reader = inst.rank(0);
    reader.open(path, Model::Session, false);

    let cut = LinkDown::take(3);
    let limit = Duration::from_secs(30);
    // Bytes of writer 2 live in the logs of h3: reading them fails, naming h3, in time.
    let (reply, took) = bounded(
        &mut reader,
        &Cmd::Read {
            off: chunk(0, 2),
            len: CHUNK,
        },
        limit,
    );
    assert!(
        !reply.ok,
        "read bytes held on an unreachable host: {reply:?}"
    );
    assert_eq!(reply.errno.as_deref(), Some("EHOSTDOWN"), "{reply:?}");
    assert!(
        reply.msg.as_deref().unwrap_or("").contains("h3"),
        "{reply:?}"
    );
    eprintln!("read needing h3 failed after {took:?}");
    // Bytes of writers 0, 1 and 3 (h1, h2) stay readable through the cached owners.
    for w in [0u64, 1, 3] {
        let (reply, _) = bounded(
            &mut reader,
            &Cmd::Read {
                off: chunk(1, w),
                len: CHUNK,
            },
            limit,
        );
        assert!(
            reply.ok,
            "writer {w}'s bytes on a reachable host: {reply:?}"
        );
        let got = common::decode_hex(reply.data.as_deref().unwrap_or(""));
        let id = (WRITERS + w + 1) as u32;
        assert!(
            got.iter()
                .enumerate()
                .all(|(k, b)| *b == pattern_byte(id, chunk(1, w) + k as u64)),
            "writer {w}'s bytes differ"
        );
    }
    // Every writer writes on and commits: each commit succeeds or fails with EHOSTDOWN in
    // time; nothing hangs.
    write_round(&mut writers, 8);
    for r in writers.iter_mut() {
        let (reply, took) = bounded(r, &Cmd::Commit, limit);
        if !reply.ok {
            assert_eq!(reply.errno.as_deref(), Some("EHOSTDOWN"), "{reply:?}");
            eprintln!("commit on node {} failed after {took:?}", r.node);
        }
    }

    drop(cut);
    // The same processes carry on: write, commit (retried until the link is usable again:
    // the first attempt may still find a connection the outage broke).
    write_round(&mut writers, 9);
    for r in writers.iter_mut() {
        let node = r.node;
        eventually_ok(
            limit,
            &format!("node {node} commits after the link came back"),
            || {
                let (reply, _) = bounded(r, &Cmd::Commit, limit);
                if reply.ok {
                    return Ok(());
                }
                assert_eq!(reply.errno.as_deref(), Some("EHOSTDOWN"), "{reply:?}");
                Err(reply)
            },
        );
    }
    // A new session on every host sees all ten rounds of every writer.
    for n in 0..3 {
        let mut r = inst.rank(n);
        r.open(path, Model::Session, false);
        let all = r.read(0, chunk(10, 0));
        for i in 0..10 {
            for w in 0..WRITERS {
                let id = (i * WRITERS + w + 1) as u32;
                let at = chunk(i, w);
                assert!(
                    (0..CHUNK).all(|k| all[(at + k) as usize] == pattern_byte(id, at + k)),
                    "host h{}: round {i} of writer {w} differs",
                    n + 1
                );
            }
        }
    }
}

/// A list lock whose holder's host loses its link: the holder's daemon cannot renew its
/// lease, so when the lease ends the lock is revoked and a waiter on another host is granted;
/// once the link is back, the holder's unlock is refused with ESTALE and the writes it made
/// under the lock are never published.
#[test]
#[ignore = "needs root: runs on emulated hosts (network namespaces); scripts/test.sh runs it as root with TESSERA_TEST_HOSTS=3"]
fn a_list_lock_of_a_cut_off_host_is_revoked_when_its_lease_ends() {
    let lease_ms = 1000;
    let inst = on_hosts(
        3,
        &[
            "--set",
            &format!("lock_lease_ms={lease_ms}"),
            "--set",
            "peer_timeout_ms=1000",
            "--set",
            "peer_handshake_timeout_ms=500",
        ],
    );
    let path = "/tessera/cut-holder";
    let mut first = inst.rank(0);
    first.open(path, Model::Commit, true);
    // The lock table is on the inode's node; the holder on another host, the waiter and a
    // reader on the table's.
    let stat = text(&inst.tessera(&["stat", path]));
    let table: u32 = stat
        .split("attributes on node ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no inode node in {stat}"));
    let holder = (table + 1) % 3;
    let (mut a, mut b, mut reader) = (inst.rank(holder), inst.rank(table), inst.rank(table));
    for r in [&mut a, &mut b, &mut reader] {
        r.open(path, Model::Commit, true);
    }
    let bytes = vec![lock_run(0, 100, 100, 1, true)];
    let ta = lock_token(&a.ok(&Cmd::ListLock {
        runs: bytes.clone(),
        wait: false,
    }));
    a.ok(&Cmd::Write {
        off: 0,
        len: 100,
        id: 1,
    });
    let cut = LinkDown::take(holder + 1);
    let t0 = Instant::now();
    b.send(&Cmd::ListLock {
        runs: bytes.clone(),
        wait: true,
    });
    assert!(
        b.has_reply(Duration::from_millis(30 * lease_ms)),
        "the cut-off holder's lock was never revoked"
    );
    let tb = lock_token(&b.recv());
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_millis(lease_ms),
        "granted after {waited:?}, before the lease ended"
    );
    eprintln!("the waiter was granted {waited:?} after the link went down");
    drop(cut);
    // The holder's unlock publishes under a revoked lock: refused, naming why (retried while
    // the first attempts still find connections the outage broke).
    let refused = eventually_some(
        Duration::from_secs(30),
        "an answer to the unlock other than EHOSTDOWN",
        || {
            let (r, _) = bounded(
                &mut a,
                &Cmd::ListUnlock { token: ta },
                Duration::from_secs(30),
            );
            (r.errno.as_deref() != Some("EHOSTDOWN")).then_some(r)
        },
    );
    assert_eq!(refused.errno.as_deref(), Some("ESTALE"), "{refused:?}");
    assert!(refused.msg.unwrap().contains("revoked"));
    a.ok(&Cmd::Close);
    assert!(
        reader.read(0, 100).iter().all(|b| *b == 0),
        "a revoked holder's writes were published"
    );
    b.ok(&Cmd::Write {
        off: 0,
        len: 100,
        id: 2,
    });
    b.ok(&Cmd::ListUnlock { token: tb });
    assert_eq!(
        reader.read(0, 100),
        (0..100).map(|o| pattern_byte(2, o)).collect::<Vec<_>>()
    );
}

/// The demo with its daemons and ranks on 3 hosts, launched through mpirun: it verifies every
/// byte read and the flushed file, and names each host with its address.
#[test]
#[ignore = "needs root: runs on emulated hosts (network namespaces); scripts/test.sh runs it as root with TESSERA_TEST_HOSTS=3"]
fn the_demo_runs_across_hosts() {
    assert!(common::test_hosts().is_some_and(|h| h >= 3));
    let out = Command::new(TESSERA)
        .args(["demo", "--hosts", "3", "--per-rank", "4MiB"])
        .envs(common::hosts_env().iter().map(|(k, v)| (k, v)))
        .env_remove("TESSERA_NODE")
        .output()
        .unwrap();
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    for (k, h) in ["h1", "h2", "h3"].iter().enumerate() {
        let line = format!("node {k}: host {h}, address ");
        let addr = shown
            .lines()
            .find_map(|l| l.trim().strip_prefix(&line))
            .unwrap_or_else(|| panic!("no line '{line}' in:\n{shown}"));
        let addr: std::net::SocketAddr = addr.parse().expect("an address");
        assert!(!addr.ip().is_loopback(), "{shown}");
    }
    assert!(shown.contains("read and verified every byte"), "{shown}");
    assert!(
        shown.contains("equals the expected N-1 file byte for byte"),
        "{shown}"
    );
}

/// The Slurm path on a real resource manager: slurmctld here, one slurmd per emulated host
/// (`scripts/slurm.sh`), and the documented batch script (`examples/slurm-job.sh`) starting
/// Tessera through srun, running an MPI job on it, flushing its output and stopping.
#[test]
#[ignore = "needs root: runs on emulated hosts (network namespaces) with a Slurm cluster; scripts/test.sh runs it as root with TESSERA_TEST_HOSTS=3"]
fn a_slurm_batch_job_starts_uses_flushes_and_stops_tessera() {
    assert!(common::test_hosts().is_some_and(|h| h >= 3));
    let env = common::hosts_env();
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let up = Command::new("bash")
        .arg(repo.join("scripts/slurm.sh"))
        .arg("up")
        .output()
        .unwrap();
    assert!(up.status.success(), "slurm.sh up: {}", text(&up));
    let strided = common::build_c("cc", "strided");
    let root = tessera_cli::instance::temp_dir("tessera-slurm").unwrap();
    let bin = std::path::Path::new(TESSERA).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let local = std::path::Path::new(&common::hosts_var("TESSERA_HOSTS_LOCAL"))
        .join(root.file_name().unwrap());
    let job = format!(
        "{} write /tessera/out $OMPI_COMM_WORLD_RANK $OMPI_COMM_WORLD_SIZE 47001 20",
        strided.display()
    );
    let out = Command::new("sbatch")
        .args(["--wait", "--nodes=3", "--ntasks-per-node=2"])
        .arg(format!("--chdir={}", root.display()))
        .arg(format!("--output={}", root.join("job.out").display()))
        .arg(repo.join("examples/slurm-job.sh"))
        .args(["sh", "-c", &job])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("PATH", path)
        .env("TESSERA_INSTANCE", root.join("inst"))
        .env("TESSERA_BB", &local)
        .env("TESSERA_PFS", root.join("pfs"))
        .env("TESSERA_OUTPUT", "/tessera/out")
        .env_remove("TESSERA_NODE")
        .output()
        .unwrap();
    let log = std::fs::read_to_string(root.join("job.out")).unwrap_or_default();
    assert!(out.status.success(), "{}\njob output:\n{log}", text(&out));
    // The daemons ran one per node of the allocation, and stopped at the end.
    for h in ["h1", "h2", "h3"] {
        assert!(
            log.lines().any(|l| l.contains(h) && l.contains(" up ")),
            "{log}"
        );
    }
    let inst = tessera_proto::InstanceLayout::new(root.join("inst"));
    assert!(inst.load_hosts().unwrap().nodes.is_empty(), "{log}");
    // 6 ranks wrote an N-1 strided file; the flushed copy has every byte.
    let verify = Command::new(&strided)
        .arg("verify")
        .arg(root.join("pfs/out"))
        .args(["6", "47001", "20"])
        .output()
        .unwrap();
    assert!(verify.status.success(), "{}\n{log}", text(&verify));
    // The follow-up task ran where most of the output's bytes are and read all of them.
    assert!(
        log.contains("1 ran where most of their input bytes are"),
        "{log}"
    );
    assert!(log.lines().any(|l| l.trim() == "5640120"), "{log}");
    let _ = std::fs::remove_dir_all(&root);
}

/// Locality across hosts (FusionFS and Swift): `where --json` names the host of each file as the
/// resource manager does, and `tessera run` launches each task through mpirun on that host,
/// where the interposer's statistics show it read its bytes from its own node; `--hard` keeps
/// tasks on their host, soft placement spills to free hosts.
#[test]
#[ignore = "needs root: runs on emulated hosts (network namespaces); scripts/test.sh runs it as root with TESSERA_TEST_HOSTS=3"]
fn tasks_run_on_the_hosts_holding_their_inputs() {
    let inst = on_hosts(3, &[]);
    for k in 0..3u32 {
        let of = format!("of=/tessera/in{k}");
        let out = under(
            &inst,
            k,
            "dd",
            &["if=/dev/zero", &of, "bs=64k", "count=8", "status=none"],
        )
        .output()
        .unwrap();
        assert!(out.status.success(), "{}", text(&out));
    }
    let out = inst.tessera(&[
        "where",
        "--json",
        "/tessera/in0",
        "/tessera/in1",
        "/tessera/in2",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for k in 0..3 {
        let f = &v["files"][k];
        assert_eq!(f["bytes_by_host"][0]["host"], format!("h{}", k + 1), "{f}");
        let holder = &f["extents"][0]["holder"];
        let addr: std::net::SocketAddr = holder["addr"].as_str().unwrap().parse().unwrap();
        assert_eq!(addr.to_string(), inst.addr(k as u32));
    }

    let dir = common::scratch("run-hosts");
    let stats = dir.join("stats.jsonl");
    let report = dir.join("report.json");
    let run = |args: &[&str]| {
        // Run from h1, as a job's first node would: tasks for h1 run there directly, the
        // others through mpirun.
        let out = inst
            .command_on(0, TESSERA)
            .arg("--instance")
            .arg(&inst.layout.dir)
            .arg("run")
            .args(["--report", report.to_str().unwrap()])
            .args(args)
            .envs(common::hosts_env().iter().map(|(k, v)| (k, v)))
            .env("TESSERA_STATS", &stats)
            .env_remove("TESSERA_NODE")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        let r: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
        r
    };
    let r = run(&[
        "uname -n; cat {} > /dev/null",
        "/tessera/in0",
        "/tessera/in1",
        "/tessera/in2",
    ]);
    assert_eq!(r["launcher"], "local+mpirun", "{r}");
    for (k, t) in r["tasks"].as_array().unwrap().iter().enumerate() {
        assert_eq!(t["host"], format!("h{}", k + 1), "{t}");
        assert_eq!(t["on_preferred"], true, "{t}");
    }
    let lines = common::stats_lines(&stats);
    let readers: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| l["stats"]["read"]["node_logs"].as_u64() > Some(0))
        .collect();
    assert_eq!(readers.len(), 3, "{lines:?}");
    for l in readers {
        let host = l["host"].as_str().unwrap();
        assert_eq!(
            l["node"].as_u64().unwrap() + 1,
            host[1..].parse::<u64>().unwrap()
        );
        assert_eq!(l["stats"]["read"]["node_logs"], 8 * 65536, "{l}");
        assert_eq!(l["stats"]["read"]["remote"], 0, "{l}");
    }

    // Four tasks whose inputs are all on h1, one slot per host: hard keeps them there, soft
    // sends the ones that find h1 busy elsewhere.
    let inputs = ["/tessera/in0"; 4];
    let mut args = vec!["--per-host", "1", "--hard", "cat {} > /dev/null"];
    args.extend(inputs);
    let r = run(&args);
    assert!(
        r["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["host"] == "h1"),
        "{r}"
    );
    args.remove(2);
    let r = run(&args);
    let hosts: std::collections::BTreeSet<&str> = r["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["host"].as_str().unwrap())
        .collect();
    assert!(hosts.len() >= 2, "soft placement spills: {r}");
}

/// Kills a background process when the test ends, however it ends.
struct Background(std::process::Child);

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An external workflow tool using the locality query: Dask distributed (from PyPI) with one
/// worker per emulated host, under the interposer; reads are submitted with `workers=` from
/// `tessera where --json`, and each ran on the host locate named and read its bytes from its
/// own node's logs, as the worker's interposer statistics say.
#[test]
#[ignore = "needs root: runs on emulated hosts (network namespaces); scripts/test.sh runs it as root with TESSERA_TEST_HOSTS=3"]
fn dask_submits_reads_to_the_workers_locate_names() {
    let inst = on_hosts(3, &[]);
    let mut paths = Vec::new();
    for k in 0..6u32 {
        let path = format!("/tessera/dask-{k}");
        let of = format!("of={path}");
        let out = under(
            &inst,
            k % 3,
            "dd",
            &["if=/dev/zero", &of, "bs=64k", "count=4", "status=none"],
        )
        .output()
        .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        paths.push(path);
    }
    let ip = inst
        .host_entry(0)
        .addr
        .rsplit_once(':')
        .unwrap()
        .0
        .to_string();
    let port = 20_000 + std::process::id() % 20_000;
    let scheduler = format!("tcp://{ip}:{port}");
    let quiet = |mut c: Command| {
        c.stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        Background(
            c.spawn()
                .expect("dask (from PyPI: scripts/lib.sh installs it)"),
        )
    };
    let mut sched = inst.command_on(0, "dask");
    sched.args([
        "scheduler",
        "--host",
        &ip,
        "--port",
        &port.to_string(),
        "--no-dashboard",
    ]);
    let _sched = quiet(sched);
    let _workers: Vec<Background> = (0..3u32)
        .map(|k| {
            let mut w = inst.command_on(k, "dask");
            w.args(["worker", &scheduler, "--name", &format!("h{}", k + 1)])
                .args(["--nthreads", "1", "--nworkers", "1", "--no-nanny"])
                .args(["--no-dashboard", "--death-timeout", "120"])
                .env("LD_PRELOAD", common::preload_lib())
                .env("TESSERA_INSTANCE", &inst.layout.dir)
                .env_remove("TESSERA_NODE");
            quiet(w)
        })
        .collect();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/dask_locality.py");
    let inst_dir = inst.layout.dir.display().to_string();
    let mut args = vec![script, &scheduler, TESSERA, &inst_dir, "3"];
    args.extend(paths.iter().map(String::as_str));
    let out = inst
        .command_on(0, "python3")
        .args(&args)
        .env_remove("TESSERA_NODE")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 6, "{}", text(&out));
    for (k, r) in lines.iter().enumerate() {
        assert_eq!(r["located"], format!("h{}", k % 3 + 1), "{r}");
        assert_eq!(r["ran_on"], r["located"], "{r}");
        assert_eq!(r["bytes"], 4 * 65536, "{r}");
        assert_eq!(
            r["node_logs"],
            4 * 65536,
            "read from its own node's logs: {r}"
        );
        assert_eq!(r["remote"], 0, "{r}");
    }
}

/// A FUSE mount on every host, beside interposed processes: what a process on one host
/// closed, through either interface, a plain (not interposed) reader on another host's mount
/// sees, and the other way round.
#[test]
#[ignore = "needs root: runs on emulated hosts (network namespaces); scripts/test.sh runs it as root with TESSERA_TEST_HOSTS=3"]
fn a_mount_on_each_host_sees_what_other_hosts_closed() {
    let inst = on_hosts(3, &[]);
    let point = inst.hosts.clone().expect("node-local storage").join("mnt");
    let p = point.to_str().unwrap().to_string();
    let run_on = |k: u32, prog: &str, args: &[&str]| {
        let out = inst.command_on(k, prog).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "host of node {k}: {prog} {args:?}: {}",
            text(&out)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    for k in 0..3u32 {
        run_on(k, "mkdir", &["-p", &p]);
        let node = k.to_string();
        let dir = inst.layout.dir.to_str().unwrap().to_string();
        run_on(
            k,
            TESSERA,
            &["--instance", &dir, "mount", &p, "--node", &node],
        );
    }
    // An interposed writer on h2 closes its file; plain readers on h1's and h3's mounts see it.
    let out = under(&inst, 1, "sh", &["-c", "echo from-h2 > /tessera/by-h2"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    for k in [0u32, 2] {
        assert_eq!(run_on(k, "cat", &[&format!("{p}/by-h2")]), "from-h2\n");
    }
    // A statically linked writer on h3's mount; an interposed reader on h1 and h1's mount.
    run_on(
        2,
        "/bin/busybox",
        &["sh", "-c", &format!("echo from-h3-mount > {p}/by-h3")],
    );
    let out = under(&inst, 0, "cat", &["/tessera/by-h3"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "from-h3-mount\n",
        "{}",
        text(&out)
    );
    assert_eq!(
        run_on(0, "cat", &[&format!("{p}/by-h3")]),
        "from-h3-mount\n"
    );
    // A listing on h2's mount shows both.
    let listed = run_on(1, "ls", &[&p]);
    assert!(
        listed.contains("by-h2") && listed.contains("by-h3"),
        "{listed}"
    );
    let dir = inst.layout.dir.to_str().unwrap().to_string();
    for k in 0..3u32 {
        run_on(k, TESSERA, &["--instance", &dir, "umount", &p]);
    }
}

/// Stage-in across hosts: the worker of each node runs on that node's host (launched as
/// `tessera run` launches tasks) and writes its share into that host's burst buffer.
#[test]
#[ignore = "needs root: runs on emulated hosts (network namespaces); scripts/test.sh runs it as root with TESSERA_TEST_HOSTS=3"]
fn stage_in_spreads_a_tree_over_the_hosts_burst_buffers() {
    let inst = on_hosts(3, &[]);
    let src = common::scratch("stage-hosts").join("set");
    std::fs::create_dir_all(&src).unwrap();
    for i in 0..9u64 {
        std::fs::write(src.join(format!("f{i}")), vec![(i + 1) as u8; 300_000]).unwrap();
    }
    let stage = || {
        let out = inst
            .command_on(0, TESSERA)
            .arg("--instance")
            .arg(&inst.layout.dir)
            .args(["stage-in", src.to_str().unwrap(), "/tessera/staged"])
            .envs(common::hosts_env().iter().map(|(k, v)| (k, v)))
            .env_remove("TESSERA_NODE")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let summary = stage();
    assert!(summary.starts_with("staged in 9 files"), "{summary}");
    let out = inst.tessera(&[
        "where",
        "--json",
        "/tessera/staged/set/f0",
        "/tessera/staged/set/f1",
        "/tessera/staged/set/f2",
        "/tessera/staged/set/f3",
        "/tessera/staged/set/f4",
        "/tessera/staged/set/f5",
        "/tessera/staged/set/f6",
        "/tessera/staged/set/f7",
        "/tessera/staged/set/f8",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let hosts: std::collections::BTreeSet<String> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["bytes_by_host"][0]["host"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(hosts.len(), 3, "the set landed on {hosts:?}: {v}");
    // The bytes read back right from every host.
    for k in 0..3u32 {
        let out = under(
            &inst,
            k,
            "cmp",
            &["/tessera/staged/set/f4", src.join("f4").to_str().unwrap()],
        )
        .output()
        .unwrap();
        assert!(out.status.success(), "{}", text(&out));
    }
    assert!(
        stage().contains("skipped 9 files"),
        "a rerun copies nothing"
    );
}
