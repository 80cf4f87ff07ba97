//! What a daemon counts for dashboards, in the Prometheus (OpenMetrics) text format: bytes
//! written and read by source, attaches, queries, locks, transactions, flushes, staging,
//! errors by errno, request latency per service, and the burst buffer's space.
//!
//! Two kinds of figure. Events are counted where they happen ([`Metrics`]'s methods, called
//! by the router and the services). State (space, clients, lock waiters, the client-reported
//! reads) is read when the endpoint is scraped ([`Sampled`]), so nothing is kept twice.
//! Labels never carry a path or a file name: a dashboard's series stay few, and the metrics
//! say nothing about what users named their files.

mod endpoint;
mod latency;
mod reports;
mod services;

pub use endpoint::{address_for, bind, serve};
pub use services::Service;

use latency::Latency;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use reports::{LOCAL_READ_BYTES, PFS_READ_BYTES, ReportTotals};
use std::sync::Mutex;
use std::time::Duration;
use tessera_core::Errno;
use tessera_proto::StageDirection;
use tessera_shm::RingReports;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    service: &'static str,
    /// `client` (this node's processes) or `peer` (other daemons, and `tessera` commands).
    from: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrnoLabel {
    errno: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabel {
    source: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DirectionLabel {
    direction: &'static str,
}

/// Where the bytes of a read came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadSource {
    /// Logs on this node.
    Local,
    /// Logs on other nodes, fetched by this node for its clients.
    Remote,
    /// The PFS copy.
    Pfs,
}

impl ReadSource {
    fn label(self) -> &'static str {
        match self {
            ReadSource::Local => "local",
            ReadSource::Remote => "remote",
            ReadSource::Pfs => "pfs",
        }
    }
}

/// What the daemon holds now, read when the endpoint is scraped.
#[derive(Clone, Debug, Default)]
pub struct Sampled {
    pub bb_used: u64,
    pub bb_reserved: u64,
    pub bb_capacity: u64,
    pub bb_device_free: u64,
    pub clients: u64,
    pub files_owned: u64,
    pub ownership_entries: u64,
    pub lock_waiters: u64,
    pub txns_open: u64,
    pub uptime: Duration,
    /// Locks (record and list) granted by this node's lock tables, and requests that had
    /// to wait there behind a conflicting holder, since start.
    pub locks_granted: u64,
    pub lock_waits: u64,
}

/// The counted events, the sampled state's gauges, and their registry.
pub struct Metrics {
    registry: Registry,
    /// The latency histograms of the family registered as `request_duration_seconds`, one
    /// per service and asker (client, peer), made at start: a request updates its own
    /// without looking it up in the family.
    latency: Vec<[Latency; 2]>,
    errors: Family<ErrnoLabel, Counter>,
    write_bytes: Counter,
    /// The counters of the family `read_bytes`, by [`ReadSource`] (made at start, as
    /// `latency`).
    read_bytes: [Counter; 3],
    peer_read_bytes: Counter,
    attaches: Counter,
    queries: Counter,
    txns: Family<OutcomeLabel, Counter>,
    flush_bytes: Counter,
    /// The counters of the family `stage_bytes`: in, out.
    stage_bytes: [Counter; 2],
    locks_granted: Counter,
    lock_waits: Counter,
    gauges: Gauges,
    /// What clients report in their rings; read (and the sampled counters brought up to
    /// date) one scrape at a time.
    scrape: Mutex<Scrape>,
    /// Where the endpoint listens, once it does.
    serving_at: std::sync::OnceLock<std::net::SocketAddr>,
}

struct Gauges {
    bb_used: Gauge,
    bb_reserved: Gauge,
    bb_capacity: Gauge,
    bb_device_free: Gauge,
    clients: Gauge,
    files_owned: Gauge,
    ownership_entries: Gauge,
    lock_waiters: Gauge,
    txns_open: Gauge,
    uptime: Gauge<f64, std::sync::atomic::AtomicU64>,
}

#[derive(Default)]
struct Scrape {
    reports: ReportTotals<RingReports>,
    /// The client-reported totals already added to the read counters.
    reported: [u64; reports::SLOTS],
}

/// A counter registered in `registry` as `name` (`_total` is added).
fn counter(registry: &mut Registry, name: &str, help: &str) -> Counter {
    let c = Counter::default();
    registry.register(name, help, c.clone());
    c
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("tessera");
        let requests = Family::<RequestLabels, Latency>::default();
        registry.register(
            "request_duration_seconds",
            "Time to answer a request, by the service that answered it and who asked",
            requests.clone(),
        );
        let latency = Service::ALL
            .iter()
            .map(|s| {
                ["client", "peer"].map(|from| {
                    let labels = RequestLabels {
                        service: s.label(),
                        from,
                    };
                    requests.get_or_create(&labels).clone()
                })
            })
            .collect();
        let errors = Family::<ErrnoLabel, Counter>::default();
        registry.register(
            "errors",
            "Requests answered with an error, by errno",
            errors.clone(),
        );
        let write_bytes = counter(
            &mut registry,
            "write_bytes",
            "Bytes this node's clients attached (made visible) to files",
        );
        let read_family = Family::<SourceLabel, Counter>::default();
        registry.register(
            "read_bytes",
            "Bytes this node's clients read, by source: logs on this node (local), logs on other nodes (remote), the PFS copy (pfs)",
            read_family.clone(),
        );
        let read_bytes = [ReadSource::Local, ReadSource::Remote, ReadSource::Pfs].map(|source| {
            read_family
                .get_or_create(&SourceLabel {
                    source: source.label(),
                })
                .clone()
        });
        let peer_read_bytes = counter(
            &mut registry,
            "peer_read_bytes",
            "Bytes of this node's logs sent to other nodes for their clients' reads",
        );
        let attaches = counter(
            &mut registry,
            "attaches",
            "Attach requests of this node's clients",
        );
        let queries = counter(
            &mut registry,
            "queries",
            "Ownership queries of this node's clients",
        );
        let txns = Family::<OutcomeLabel, Counter>::default();
        registry.register(
            "transactions",
            "Transactions this node was home of, by decision (commit or abort)",
            txns.clone(),
        );
        let flush_bytes = counter(
            &mut registry,
            "flush_bytes",
            "Bytes this node wrote into the PFS directory by flush",
        );
        let locks_granted = counter(
            &mut registry,
            "locks_granted",
            "Byte-range and list locks granted by this node's lock tables",
        );
        let lock_waits = counter(
            &mut registry,
            "lock_waits",
            "Lock requests that waited in this node's lock tables behind a conflicting holder (once per 5 s slice of waiting)",
        );
        let stage_family = Family::<DirectionLabel, Counter>::default();
        registry.register(
            "stage_bytes",
            "Bytes staging workers copied through this node, by direction (in: into Tessera, out: out of it)",
            stage_family.clone(),
        );
        let stage_bytes = ["in", "out"].map(|direction| {
            stage_family
                .get_or_create(&DirectionLabel { direction })
                .clone()
        });
        let gauges = Gauges::register(&mut registry);
        Metrics {
            registry,
            latency,
            errors,
            write_bytes,
            read_bytes,
            peer_read_bytes,
            attaches,
            queries,
            txns,
            flush_bytes,
            stage_bytes,
            locks_granted,
            lock_waits,
            gauges,
            scrape: Mutex::new(Scrape::default()),
            serving_at: std::sync::OnceLock::new(),
        }
    }

    /// The endpoint listens at `at`.
    pub fn serving_at(&self, at: std::net::SocketAddr) {
        let _ = self.serving_at.set(at);
    }

    /// The endpoint's URL, if it listens.
    pub fn endpoint(&self) -> Option<String> {
        self.serving_at
            .get()
            .map(|at| format!("http://{at}/metrics"))
    }

    /// One request answered by `service` in `took`; `failed` with an errno if it failed.
    pub fn request(&self, service: Service, peer: bool, took: Duration, failed: Option<Errno>) {
        self.latency[service.index()][usize::from(peer)].observe(took);
        if let Some(errno) = failed {
            self.errors
                .get_or_create(&ErrnoLabel {
                    errno: errno.name(),
                })
                .inc();
        }
    }

    /// An attach of `bytes` by one of this node's clients.
    pub fn attached(&self, bytes: u64) {
        self.attaches.inc();
        self.write_bytes.inc_by(bytes);
    }

    /// An ownership query by one of this node's clients.
    pub fn queried(&self) {
        self.queries.inc();
    }

    /// Bytes read for one of this node's clients by the daemon.
    pub fn read(&self, source: ReadSource, bytes: u64) {
        self.read_bytes[source as usize].inc_by(bytes);
    }

    /// Bytes of this node's logs sent to another node.
    pub fn served_to_peer(&self, bytes: u64) {
        self.peer_read_bytes.inc_by(bytes);
    }

    /// A transaction this node is home of was decided.
    pub fn decided(&self, commit: bool) {
        let outcome = if commit { "commit" } else { "abort" };
        self.txns.get_or_create(&OutcomeLabel { outcome }).inc();
    }

    /// Bytes written into the PFS directory by a flush.
    pub fn flushed(&self, bytes: u64) {
        self.flush_bytes.inc_by(bytes);
    }

    /// Bytes a staging worker copied through this node.
    pub fn staged(&self, direction: StageDirection, bytes: u64) {
        self.stage_bytes[match direction {
            StageDirection::In => 0,
            StageDirection::Out => 1,
        }]
        .inc_by(bytes);
    }

    /// Counts what client `client` reports in its ring from now on.
    pub fn client_reports(&self, client: u64, reports: RingReports) {
        self.lock_scrape().reports.add(client, reports);
    }

    /// Client `client`'s connection ended: what it reported stays in the totals.
    pub fn client_gone(&self, client: u64) {
        self.lock_scrape().reports.remove(client);
    }

    /// The text a scrape answers: every figure, with the sampled ones as `sampled` says.
    pub fn render(&self, sampled: &Sampled) -> String {
        let mut scrape = self.lock_scrape();
        let totals = scrape.reports.totals();
        for (slot, source) in [
            (LOCAL_READ_BYTES, ReadSource::Local),
            (PFS_READ_BYTES, ReadSource::Pfs),
        ] {
            let grew = totals[slot].saturating_sub(scrape.reported[slot]);
            self.read(source, grew);
            scrape.reported[slot] = totals[slot];
        }
        catch_up(&self.locks_granted, sampled.locks_granted);
        catch_up(&self.lock_waits, sampled.lock_waits);
        self.gauges.set(sampled);
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }

    /// The figures of [`Metrics::render`] as (sample name with labels, value) pairs, for
    /// `tessera status`: counters and gauges (histograms as their count and sum).
    pub fn samples(&self, sampled: &Sampled) -> Vec<(String, f64)> {
        parse_samples(&self.render(sampled))
    }

    fn lock_scrape(&self) -> std::sync::MutexGuard<'_, Scrape> {
        // Only sums live under it: a panic elsewhere leaves nothing half-changed.
        self.scrape.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Brings a counter of a figure counted elsewhere up to it (never down).
fn catch_up(counter: &Counter, now: u64) {
    counter.inc_by(now.saturating_sub(counter.get()));
}

impl Gauges {
    fn register(registry: &mut Registry) -> Gauges {
        let mut gauge = |name: &str, help: &str| {
            let g = Gauge::default();
            registry.register(name, help, g.clone());
            g
        };
        let g = Gauges {
            bb_used: gauge(
                "bb_used_bytes",
                "Bytes the burst-buffer logs of this node hold",
            ),
            bb_reserved: gauge(
                "bb_reserved_bytes",
                "Burst-buffer bytes reserved by live clients and not written yet",
            ),
            bb_capacity: gauge(
                "bb_capacity_bytes",
                "The configured burst-buffer capacity (0: until the device is full)",
            ),
            bb_device_free: gauge(
                "bb_device_free_bytes",
                "Free bytes of the burst buffer's device",
            ),
            clients: gauge("clients", "Client processes connected to this node"),
            files_owned: gauge(
                "files_owned",
                "Files with ownership state on this node's shard",
            ),
            ownership_entries: gauge(
                "ownership_entries",
                "Entries of this node's ownership maps (one per run of one owner)",
            ),
            lock_waiters: gauge(
                "lock_waiters",
                "Lock requests waiting in this node's lock tables now",
            ),
            txns_open: gauge(
                "transactions_open",
                "Transactions this node is home of that are not decided yet",
            ),
            uptime: Gauge::default(),
        };
        registry.register(
            "uptime_seconds",
            "Seconds since this daemon started",
            g.uptime.clone(),
        );
        g
    }

    fn set(&self, s: &Sampled) {
        let clamp = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        self.bb_used.set(clamp(s.bb_used));
        self.bb_reserved.set(clamp(s.bb_reserved));
        self.bb_capacity.set(clamp(s.bb_capacity));
        self.bb_device_free.set(clamp(s.bb_device_free));
        self.clients.set(clamp(s.clients));
        self.files_owned.set(clamp(s.files_owned));
        self.ownership_entries.set(clamp(s.ownership_entries));
        self.lock_waiters.set(clamp(s.lock_waiters));
        self.txns_open.set(clamp(s.txns_open));
        self.uptime.set(s.uptime.as_secs_f64());
    }
}

/// The samples of an exposition text: `name{labels} value` lines, without the bucket lines
/// of histograms and without comments.
pub fn parse_samples(text: &str) -> Vec<(String, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter(|l| !l.contains("_bucket{"))
        .filter_map(|l| {
            let (name, value) = l.rsplit_once(' ')?;
            Some((name.to_string(), value.parse().ok()?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(samples: &[(String, f64)], name: &str) -> Option<f64> {
        samples.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }

    #[test]
    fn counted_events_and_sampled_state_appear_under_conventional_names() {
        let m = Metrics::new();
        m.attached(4096);
        m.attached(100);
        m.queried();
        m.read(ReadSource::Remote, 512);
        m.decided(true);
        m.flushed(77);
        m.staged(StageDirection::In, 300);
        m.staged(StageDirection::In, 12);
        m.request(
            Service::Namespace,
            false,
            Duration::from_micros(30),
            Some(Errno::NoEnt),
        );
        let sampled = Sampled {
            bb_used: 1 << 20,
            clients: 3,
            locks_granted: 5,
            ..Sampled::default()
        };
        let text = m.render(&sampled);
        assert!(
            text.contains("# TYPE tessera_write_bytes counter"),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
        let s = parse_samples(&text);
        assert_eq!(value(&s, "tessera_write_bytes_total"), Some(4196.0));
        assert_eq!(value(&s, "tessera_attaches_total"), Some(2.0));
        assert_eq!(value(&s, "tessera_queries_total"), Some(1.0));
        assert_eq!(
            value(&s, "tessera_read_bytes_total{source=\"remote\"}"),
            Some(512.0)
        );
        assert_eq!(
            value(&s, "tessera_transactions_total{outcome=\"commit\"}"),
            Some(1.0)
        );
        assert_eq!(value(&s, "tessera_flush_bytes_total"), Some(77.0));
        assert_eq!(
            value(&s, "tessera_stage_bytes_total{direction=\"in\"}"),
            Some(312.0)
        );
        assert_eq!(
            value(&s, "tessera_stage_bytes_total{direction=\"out\"}"),
            Some(0.0)
        );
        assert_eq!(
            value(&s, "tessera_errors_total{errno=\"ENOENT\"}"),
            Some(1.0)
        );
        assert_eq!(
            value(
                &s,
                "tessera_request_duration_seconds_count{service=\"namespace\",from=\"client\"}"
            ),
            Some(1.0)
        );
        // Buckets are cumulative: the 30 µs request is counted from the 64 µs bound on.
        let bucket = |le: &str| {
            let line = format!(
                "tessera_request_duration_seconds_bucket{{le=\"{le}\",service=\"namespace\",from=\"client\"}} "
            );
            let at = text
                .find(&line)
                .unwrap_or_else(|| panic!("{line} in {text}"));
            text[at + line.len()..].lines().next().unwrap().to_string()
        };
        assert_eq!(bucket("0.000016"), "0");
        assert_eq!(bucket("0.000064"), "1");
        assert_eq!(bucket("+Inf"), "1");
        assert_eq!(value(&s, "tessera_bb_used_bytes"), Some(1048576.0));
        assert_eq!(value(&s, "tessera_clients"), Some(3.0));
        assert_eq!(value(&s, "tessera_locks_granted_total"), Some(5.0));
    }

    #[test]
    fn the_names_status_watch_reads_are_the_names_rendered() {
        let m = Metrics::new();
        m.request(
            Service::Admin,
            false,
            Duration::from_micros(1),
            Some(Errno::Io),
        );
        let s = m.samples(&Sampled::default());
        for name in tessera_proto::metric_names::ALWAYS_PRESENT {
            assert!(value(&s, name).is_some(), "{name} is not rendered");
        }
        let errors = tessera_proto::metric_names::ERRORS;
        assert!(s.iter().any(|(n, _)| n.starts_with(errors)), "{errors}");
    }

    #[test]
    fn a_sampled_counter_never_goes_down() {
        let m = Metrics::new();
        let at = |granted| {
            let s = m.samples(&Sampled {
                locks_granted: granted,
                ..Sampled::default()
            });
            value(&s, "tessera_locks_granted_total")
        };
        assert_eq!(at(7), Some(7.0));
        assert_eq!(at(3), Some(7.0), "a restarted count does not pull it down");
        assert_eq!(at(9), Some(9.0));
    }

    #[test]
    fn no_label_carries_a_path() {
        let m = Metrics::new();
        m.request(
            Service::Read,
            true,
            Duration::from_millis(2),
            Some(Errno::Io),
        );
        let text = m.render(&Sampled::default());
        assert!(!text.contains('/'), "{text}");
    }
}
