//! The daemons' metrics: scraped from their endpoints during a workload, each counter
//! moves by what was done; the endpoint is off unless asked for; `tessera status` names it
//! and `--watch` shows the same figures.

mod common;

use common::{Inst, eventually_ok};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::time::Duration;
use tessera_client::{Errno, LockKind, Model, OpenOptions};

const MIB: u64 = 1 << 20;

/// An HTTP/1.1 GET of `path` at `endpoint` (`http://ADDR:PORT/metrics`): status and body.
fn http_get(endpoint: &str, path: &str) -> (u32, String) {
    let addr = endpoint
        .strip_prefix("http://")
        .and_then(|r| r.split('/').next())
        .expect("an http:// endpoint");
    let mut s = std::net::TcpStream::connect(addr).expect("connect to the metrics endpoint");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("a response");
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, body.to_string())
}

/// The samples of an exposition text (name with labels -> value).
fn samples(text: &str) -> HashMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| {
            let (k, v) = l.rsplit_once(' ')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

struct Scraper {
    endpoints: Vec<String>,
}

impl Scraper {
    fn of(inst: &Inst) -> Scraper {
        let admin = tessera_cli::admin::Admin::new(&inst.layout).unwrap();
        let endpoints = (0..inst.nodes)
            .map(|n| {
                admin
                    .status(n)
                    .unwrap()
                    .metrics_endpoint
                    .expect("metrics_port is set: every node serves metrics")
            })
            .collect();
        Scraper { endpoints }
    }

    fn node(&self, n: usize) -> HashMap<String, f64> {
        let (status, body) = http_get(&self.endpoints[n], "/metrics");
        assert_eq!(status, 200, "{body}");
        assert!(body.ends_with("# EOF\n"), "an OpenMetrics text: {body}");
        samples(&body)
    }

    fn all(&self) -> Vec<HashMap<String, f64>> {
        (0..self.endpoints.len()).map(|n| self.node(n)).collect()
    }
}

fn get(s: &HashMap<String, f64>, name: &str) -> f64 {
    s.get(name).copied().unwrap_or(0.0)
}

/// How much `name` grew on node `n` between two scrapes of every node.
fn grew(
    before: &[HashMap<String, f64>],
    after: &[HashMap<String, f64>],
    n: usize,
    name: &str,
) -> f64 {
    get(&after[n], name) - get(&before[n], name)
}

/// How much `name` grew summed over every node.
fn grew_all(before: &[HashMap<String, f64>], after: &[HashMap<String, f64>], name: &str) -> f64 {
    (0..after.len()).map(|n| grew(before, after, n, name)).sum()
}

#[test]
fn each_counter_moves_by_what_the_workload_did() {
    let inst = Inst::start_with(2, &["--set", "metrics_port=0"]);
    let scrape = Scraper::of(&inst);
    let (writer, reader) = (inst.client(0), inst.client(1));
    let posix = |w: bool| {
        let mut o = OpenOptions::new();
        o.read(true).write(w).create(w).model(Model::Posix);
        o
    };
    // A first request through the ring, so each client's reports are counted.
    writer.stat("/tessera").unwrap();
    reader.stat("/tessera").unwrap();
    let before = scrape.all();

    // Writes: 1 MiB from node 0, attached by a POSIX handle.
    let data: Vec<u8> = (0..MIB).map(|i| (i % 251) as u8).collect();
    let mut f = writer.open("/tessera/m", &posix(true)).unwrap();
    f.write_at(&data, 0).unwrap();
    f.close().unwrap();
    // Local reads: node 0's client reads its own bytes; remote: node 1's client reads them.
    let mut back = vec![0u8; MIB as usize];
    let mut f = writer.open("/tessera/m", &posix(false)).unwrap();
    f.read_exact_at(&mut back, 0).unwrap();
    f.close().unwrap();
    assert_eq!(back, data);
    let mut f = reader.open("/tessera/m", &posix(false)).unwrap();
    back.fill(0);
    f.read_exact_at(&mut back, 0).unwrap();
    f.close().unwrap();
    assert_eq!(back, data);
    // An error: a stat of a missing name.
    assert_eq!(
        writer.stat("/tessera/missing").unwrap_err().errno,
        Errno::NoEnt
    );
    // Locks: one held, one that waits for it.
    let mut holder = writer.open("/tessera/m", &posix(true)).unwrap();
    holder.lock(0, 0, LockKind::Exclusive, true).unwrap();
    let waiter = std::thread::spawn({
        let reader = reader.clone();
        move || {
            let mut w = reader.open("/tessera/m", &posix(true)).unwrap();
            w.lock(0, 0, LockKind::Exclusive, true).unwrap();
            w.unlock(0, 0).unwrap();
        }
    });
    inst.wait_lock_waiters(1);
    let during = scrape.all();
    assert_eq!(
        (0..2)
            .map(|n| get(&during[n], "tessera_lock_waiters"))
            .sum::<f64>(),
        1.0,
        "the waiting request is a gauge while it waits"
    );
    holder.unlock(0, 0).unwrap();
    waiter.join().unwrap();
    holder.close().unwrap();
    // A flush of the file, and a committed transaction.
    let mut f = writer.open("/tessera/m", &posix(false)).unwrap();
    assert_eq!(f.flush_file().unwrap(), MIB);
    f.close().unwrap();
    let txn = writer.txn_open().unwrap();
    writer.txn_join(Some(txn)).unwrap();
    writer.txn_decide(txn, true, Vec::new()).unwrap();
    writer.txn_join(None).unwrap();

    let after = scrape.all();
    let read_local = "tessera_read_bytes_total{source=\"local\"}";
    let read_remote = "tessera_read_bytes_total{source=\"remote\"}";
    assert_eq!(
        grew(&before, &after, 0, "tessera_write_bytes_total"),
        MIB as f64
    );
    assert_eq!(grew(&before, &after, 1, "tessera_write_bytes_total"), 0.0);
    assert!(grew(&before, &after, 0, "tessera_attaches_total") >= 1.0);
    assert_eq!(grew(&before, &after, 0, read_local), MIB as f64);
    assert_eq!(grew(&before, &after, 1, read_remote), MIB as f64);
    assert_eq!(grew(&before, &after, 0, read_remote), 0.0);
    assert_eq!(
        grew(&before, &after, 0, "tessera_peer_read_bytes_total"),
        MIB as f64,
        "node 0 sent node 1 the bytes"
    );
    assert!(grew(&before, &after, 1, "tessera_queries_total") >= 1.0);
    assert!(grew(&before, &after, 0, "tessera_errors_total{errno=\"ENOENT\"}") >= 1.0);
    assert_eq!(
        grew_all(&before, &after, "tessera_locks_granted_total"),
        2.0
    );
    assert_eq!(grew_all(&before, &after, "tessera_lock_waits_total"), 1.0);
    assert_eq!(
        grew_all(&before, &after, "tessera_flush_bytes_total"),
        MIB as f64
    );
    assert_eq!(
        grew_all(
            &before,
            &after,
            "tessera_transactions_total{outcome=\"commit\"}"
        ),
        1.0
    );
    assert!(
        grew(
            &before,
            &after,
            0,
            "tessera_request_duration_seconds_count{service=\"ownership\",from=\"client\"}"
        ) >= 1.0
    );
    assert!(get(&after[0], "tessera_bb_used_bytes") >= MIB as f64);
    assert_eq!(get(&after[0], "tessera_clients"), 1.0);
    assert!(
        after[0].keys().all(|k| !k.contains("/tessera")),
        "no label carries a path"
    );
}

#[test]
fn staging_counts_its_bytes_where_the_workers_copied_them() {
    let inst = Inst::start_with(2, &["--set", "metrics_port=0"]);
    let scrape = Scraper::of(&inst);
    let work = common::scratch("metrics-stage");
    let src = work.join("set");
    std::fs::create_dir_all(&src).unwrap();
    let sizes = [300_000u64, 200_000, 100_000, 50_000];
    for (i, size) in sizes.iter().enumerate() {
        std::fs::write(src.join(format!("f{i}")), vec![i as u8; *size as usize]).unwrap();
    }
    let total: u64 = sizes.iter().sum();
    let before = scrape.all();
    let run = |args: &[&str]| {
        let out = inst.tessera(args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(&["stage-in", src.to_str().unwrap(), "/tessera/in"]);
    let staged_in = scrape.all();
    let stage_in = "tessera_stage_bytes_total{direction=\"in\"}";
    let stage_out = "tessera_stage_bytes_total{direction=\"out\"}";
    assert_eq!(grew_all(&before, &staged_in, stage_in), total as f64);
    for n in 0..2 {
        assert!(
            grew(&before, &staged_in, n, stage_in) > 0.0,
            "node {n}'s worker staged a share through its daemon"
        );
    }
    assert_eq!(grew_all(&before, &staged_in, stage_out), 0.0);
    run(&[
        "stage-out",
        "/tessera/in/set",
        work.join("out").to_str().unwrap(),
    ]);
    let staged_out = scrape.all();
    assert_eq!(grew_all(&staged_in, &staged_out, stage_out), total as f64);
    assert_eq!(grew_all(&staged_in, &staged_out, stage_in), 0.0);
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn the_endpoint_answers_only_its_path_and_status_names_it() {
    let inst = Inst::start_with(2, &["--set", "metrics_port=0"]);
    let scrape = Scraper::of(&inst);
    let (status, body) = http_get(&scrape.endpoints[1], "/");
    assert_eq!(status, 404);
    assert!(body.contains("/metrics"), "{body}");
    assert!(scrape.endpoints[0].starts_with("http://127.0.0.1:"));
    let out = inst.tessera(&["status"]);
    let text = String::from_utf8_lossy(&out.stdout);
    for (n, e) in scrape.endpoints.iter().enumerate() {
        assert!(text.contains(&format!("metrics: node {n} {e}")), "{text}");
    }
    // --watch shows a line per node, once per refresh.
    inst.client(0)
        .open("/tessera/w", OpenOptions::new().write(true).create(true))
        .unwrap()
        .close()
        .unwrap();
    let out = inst.tessera(&["status", "--watch", "--interval", "50ms", "--count", "2"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.matches("bb used").count(), 2, "{text}");
    for n in 0..2 {
        assert_eq!(
            text.lines()
                .filter(|l| l.trim_start().starts_with(&format!("{n} ")))
                .count(),
            2,
            "{text}"
        );
    }
}

#[test]
fn no_endpoint_unless_a_port_is_set() {
    let inst = Inst::start(1);
    let admin = tessera_cli::admin::Admin::new(&inst.layout).unwrap();
    let status = admin.status(0).unwrap();
    assert_eq!(status.metrics_endpoint, None);
    // The figures still reach `tessera status --watch`.
    assert!(status.metrics.iter().any(|(k, _)| k == "tessera_clients"));
    let out = inst.tessera(&["status"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("metrics: off"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn a_port_in_use_stops_the_daemon_with_a_message_naming_the_setting() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let root = tessera_cli::instance::temp_dir("tessera-test").unwrap();
    let line = tessera_testkit::instance::StartLine::new(common::TESSERA, &root);
    let out = line
        .daemons(1)
        .command()
        .args(["--set", &format!("metrics_port={port}")])
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&root);
    assert!(!out.status.success());
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("metrics_port"), "{text}");
    drop(taken);
}

/// A scrape during load is answered promptly (the endpoint does not wait on the services).
#[test]
fn a_scrape_answers_while_clients_work() {
    let inst = Inst::start_with(1, &["--set", "metrics_port=0"]);
    let scrape = Scraper::of(&inst);
    let c = inst.client(0);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let worker = std::thread::spawn({
        let stop = stop.clone();
        move || {
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = c.stat("/tessera/nothing-here");
                n += 1;
            }
            n
        }
    });
    eventually_ok(
        Duration::from_secs(20),
        "errors counted during load",
        || {
            let s = scrape.node(0);
            match get(&s, "tessera_errors_total{errno=\"ENOENT\"}") {
                v if v >= 100.0 => Ok(()),
                v => Err(format!("{v} so far")),
            }
        },
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(worker.join().unwrap() >= 100);
}

/// Garbage, a request that never ends its headers, and a huge header do not stop the
/// endpoint: each costs its own connection only.
#[test]
fn hostile_connections_cost_only_themselves() {
    let inst = Inst::start_with(1, &["--set", "metrics_port=0"]);
    let scrape = Scraper::of(&inst);
    let addr = scrape.endpoints[0]
        .strip_prefix("http://")
        .and_then(|r| r.split('/').next())
        .unwrap()
        .to_string();
    let mut garbage = std::net::TcpStream::connect(&addr).unwrap();
    garbage
        .write_all(b"\x00\x01\x02 not http at all\r\n\r\n")
        .unwrap();
    let mut answer = Vec::new();
    // Refused (a 400, or the connection closed), never left hanging.
    garbage
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let _ = garbage.read_to_end(&mut answer);
    assert!(
        answer.is_empty() || String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 4"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    let mut huge = std::net::TcpStream::connect(&addr).unwrap();
    let header = format!(
        "GET /metrics HTTP/1.1\r\nX-Big: {}\r\n\r\n",
        "a".repeat(1 << 20)
    );
    let _ = huge.write_all(header.as_bytes());
    let mut answer = Vec::new();
    huge.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let _ = huge.read_to_end(&mut answer);
    assert!(
        !String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"),
        "a 1 MiB header is refused"
    );
    // A connection that sends half a request stays open beside a normal scrape.
    let mut half = std::net::TcpStream::connect(&addr).unwrap();
    half.write_all(b"GET /metr").unwrap();
    let s = scrape.node(0);
    assert!(s.contains_key("tessera_clients"));
    drop(half);
}
