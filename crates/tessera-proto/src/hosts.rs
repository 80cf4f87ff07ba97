//! The host table: where each node's daemon runs, as the daemons registered themselves.
//!
//! A node is a job-stable id (0..N-1: the launcher's task rank, or the order of a host file),
//! never a host name; the host name and the address are recorded beside it. Each daemon, once
//! it serves, writes its row into `<instance>/hosts.toml` (the shared instance directory), and
//! removes it when it stops; a restarted daemon replaces its row. Writers take an exclusive
//! `flock` on `hosts.lock` around read-modify-write and replace the file by rename, so readers
//! (peers looking up an address, clients looking for their host's daemon) never lock and
//! always see a whole table.
//!
//! This module holds the table and its rules (pure); [`crate::InstanceLayout`] reads and writes
//! it.

use serde::{Deserialize, Serialize};
use tessera_core::{Errno, FsError};

/// Format version of `hosts.toml`, written into the file.
pub const HOST_TABLE_VERSION: u32 = 1;

/// One registered daemon.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostEntry {
    pub node: u32,
    /// The host name of the machine the daemon runs on (`uname -n`).
    pub host: String,
    /// Where peers reach it: `address:port`.
    pub addr: String,
    /// The daemon's process id on its host (for people and tests; nothing signals it).
    pub pid: u32,
    /// A random number drawn at each start: a daemon removes only the row it wrote, never the
    /// row of a newer incarnation of its node. At most `i64::MAX` (a TOML integer).
    pub incarnation: u64,
}

/// The whole table, kept sorted by node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostTable {
    pub version: u32,
    #[serde(default, rename = "node")]
    pub nodes: Vec<HostEntry>,
}

impl HostTable {
    /// Parses `hosts.toml`; an empty text is an empty table.
    pub fn parse(text: &str) -> Result<HostTable, FsError> {
        if text.trim().is_empty() {
            return Ok(HostTable::default());
        }
        let t: HostTable = toml::from_str(text)
            .map_err(|e| FsError::new(Errno::Inval, format!("hosts.toml: {e}")))?;
        if t.version != HOST_TABLE_VERSION {
            return Err(FsError::new(
                Errno::Inval,
                format!(
                    "hosts.toml has version {}, this Tessera reads version {HOST_TABLE_VERSION}",
                    t.version
                ),
            ));
        }
        Ok(t)
    }

    pub fn to_text(&self) -> Result<String, FsError> {
        let mut t = self.clone();
        t.version = HOST_TABLE_VERSION;
        toml::to_string_pretty(&t)
            .map_err(|e| FsError::new(Errno::Inval, format!("writing hosts.toml: {e}")))
    }

    /// Records `entry`, replacing any row of the same node.
    pub fn register(&mut self, entry: HostEntry) {
        self.nodes.retain(|e| e.node != entry.node);
        let at = self.nodes.partition_point(|e| e.node < entry.node);
        self.nodes.insert(at, entry);
    }

    /// Removes the row of `node` if it is still the one of `incarnation`.
    pub fn unregister(&mut self, node: u32, incarnation: u64) -> bool {
        let before = self.nodes.len();
        self.nodes
            .retain(|e| !(e.node == node && e.incarnation == incarnation));
        self.nodes.len() != before
    }

    pub fn get(&self, node: u32) -> Option<&HostEntry> {
        self.nodes.iter().find(|e| e.node == node)
    }

    /// The nodes registered for `host`, in node order.
    pub fn nodes_on(&self, host: &str) -> Vec<u32> {
        self.nodes
            .iter()
            .filter(|e| e.host == host)
            .map(|e| e.node)
            .collect()
    }

    /// The daemon a process on `host` talks to: one of that host's nodes, spread by `rank`.
    /// A host without a daemon is an error naming the hosts that have one.
    pub fn node_for(&self, host: &str, rank: u64) -> Result<u32, FsError> {
        let local = self.nodes_on(host);
        if self.nodes.is_empty() {
            return Err(FsError::new(
                Errno::ConnRefused,
                "no Tessera daemon is registered in the host table: the instance is not running; start it with `tessera start`",
            ));
        }
        if local.is_empty() {
            let mut hosts: Vec<&str> = self.nodes.iter().map(|e| e.host.as_str()).collect();
            hosts.sort_unstable();
            hosts.dedup();
            return Err(FsError::new(
                Errno::HostDown,
                format!(
                    "host {host} has no Tessera daemon (daemons run on {}); run the process on one of those hosts, start a daemon here with `tessera start --node K`, or choose a node with TESSERA_NODE",
                    hosts.join(", ")
                ),
            ));
        }
        Ok(local[(rank % local.len() as u64) as usize])
    }
}

/// A host name as resource managers name nodes: Slurm's `NodeName` and MPI's host lists use
/// the short name, so the domain is dropped (unless the name is an IP address) and letters are
/// lowered (DNS names are case-insensitive).
pub fn normalize_host(name: &str) -> String {
    let name = name.trim().trim_end_matches('.');
    if name.parse::<std::net::IpAddr>().is_ok() {
        return name.to_string();
    }
    name.split('.').next().unwrap_or(name).to_ascii_lowercase()
}

/// This machine's host name (its UTS node name), as daemons register it and clients look for
/// it.
pub fn this_host() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn entry(node: u32, host: &str, incarnation: u64) -> HostEntry {
        HostEntry {
            node,
            host: host.to_string(),
            addr: format!("10.0.0.{node}:4000"),
            pid: 100 + node,
            incarnation,
        }
    }

    #[test]
    fn host_names_are_normalised_as_slurm_and_mpi_name_nodes() {
        assert_eq!(normalize_host("h3"), "h3");
        assert_eq!(normalize_host("Node-12.cluster.example.org"), "node-12");
        assert_eq!(normalize_host("h1.local."), "h1");
        assert_eq!(normalize_host("10.213.7.2"), "10.213.7.2");
        assert_eq!(normalize_host("fe80::1"), "fe80::1");
    }

    #[test]
    fn round_trips_through_toml() {
        let mut t = HostTable::default();
        t.register(entry(1, "h2", 7));
        t.register(entry(0, "h1", 8));
        t.register(entry(2, "h3", i64::MAX as u64));
        let text = t.to_text().unwrap();
        assert!(text.contains("[[node]]"), "{text}");
        let back = HostTable::parse(&text).unwrap();
        assert_eq!(back.nodes, t.nodes);
        assert_eq!(back.version, HOST_TABLE_VERSION);
        assert!(HostTable::parse("").unwrap().nodes.is_empty());
        assert!(
            HostTable::parse("version = 99\n")
                .unwrap_err()
                .message
                .contains("version 99")
        );
    }

    #[test]
    fn a_host_without_a_daemon_is_named_with_the_hosts_that_have_one() {
        let mut t = HostTable::default();
        t.register(entry(0, "h1", 1));
        t.register(entry(1, "h2", 1));
        let e = t.node_for("login", 0).unwrap_err();
        assert_eq!(e.errno, Errno::HostDown);
        assert!(e.message.contains("host login"), "{}", e.message);
        assert!(e.message.contains("h1, h2"), "{}", e.message);
        let e = HostTable::default().node_for("h1", 0).unwrap_err();
        assert_eq!(e.errno, Errno::ConnRefused);
        assert!(e.message.contains("tessera start"), "{}", e.message);
    }

    #[test]
    fn only_the_registering_incarnation_unregisters() {
        let mut t = HostTable::default();
        t.register(entry(0, "h1", 1));
        t.register(entry(0, "h1", 2));
        assert!(!t.unregister(0, 1));
        assert_eq!(t.get(0).unwrap().incarnation, 2);
        assert!(t.unregister(0, 2));
        assert!(t.get(0).is_none());
    }

    proptest! {
        /// Against a map from node to its newest row: one row per node, in node order, and
        /// every process lands on a daemon of its own host.
        #[test]
        fn table_matches_a_map_of_newest_rows(
            ops in proptest::collection::vec((0u32..6, 0u8..3, 0u64..4, any::<bool>()), 0..40),
            rank in any::<u64>(),
        ) {
            let mut t = HostTable::default();
            let mut model = std::collections::BTreeMap::new();
            for (node, host, inc, add) in ops {
                let host = format!("h{host}");
                if add {
                    t.register(entry(node, &host, inc));
                    model.insert(node, (host, inc));
                } else {
                    let removed = t.unregister(node, inc);
                    let expect = model.get(&node).is_some_and(|(_, i)| *i == inc);
                    prop_assert_eq!(removed, expect);
                    if expect {
                        model.remove(&node);
                    }
                }
            }
            let got: Vec<(u32, String, u64)> =
                t.nodes.iter().map(|e| (e.node, e.host.clone(), e.incarnation)).collect();
            let want: Vec<(u32, String, u64)> =
                model.iter().map(|(n, (h, i))| (*n, h.clone(), *i)).collect();
            prop_assert_eq!(got, want);
            for h in ["h0", "h1", "h2"] {
                match t.node_for(h, rank) {
                    Ok(n) => prop_assert_eq!(&t.get(n).unwrap().host, h),
                    Err(_) => prop_assert!(t.nodes_on(h).is_empty()),
                }
            }
        }
    }
}
