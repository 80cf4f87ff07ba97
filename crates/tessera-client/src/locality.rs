//! Locality answers (FusionFS and Swift): where the bytes of files live, by host, for schedulers.
//!
//! The daemon answers with node numbers; this side names each node's host (normalised as Slurm
//! and MPI name nodes) and address from the host table, and sums the bytes per host (a host
//! may run several daemons). Answers are advisory and carry the time they were assembled.

use crate::Client;
use serde::{Deserialize, Serialize};
use tessera_core::locality::Residence;
use tessera_core::{Errno, FsError, FsResult};
use tessera_proto::hosts::{HostTable, normalize_host};
use tessera_proto::{ForwardPing, Locate, LocateRange};

/// Extents listed per range unless asked otherwise.
pub const DEFAULT_MAX_EXTENTS: u32 = 4096;

/// Ranges per request (the daemon refuses more).
const MAX_RANGES: usize = 65_536;

/// Where one daemon runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostOf {
    pub node: u32,
    /// The host name, normalised (short, lower case).
    pub host: String,
    /// Where peers reach its daemon (`address:port`).
    pub addr: String,
}

/// One extent of a located range.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocatedExtent {
    pub start: u64,
    pub end: u64,
    /// The daemon whose burst buffer holds the bytes, if any.
    pub holder: Option<HostOf>,
    pub residence: Residence,
}

/// Bytes of a range held on one host.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostBytes {
    pub host: String,
    pub bytes: u64,
    /// The host's daemons that hold some, with their bytes, most first.
    pub nodes: Vec<(u32, u64)>,
}

/// Where the bytes of one range of one file live.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Location {
    /// The path as asked.
    pub path: String,
    pub ino: u64,
    pub size: u64,
    /// The range answered (the asked range cut at the size).
    pub start: u64,
    pub end: u64,
    pub extents: Vec<LocatedExtent>,
    /// Where the extent listing stopped, if it was cut at the bound (the totals are whole).
    pub more_from: Option<u64>,
    /// Bytes of the range each host's burst buffers hold, most first.
    pub bytes_by_host: Vec<HostBytes>,
    /// Bytes of the range only the PFS copy holds.
    pub pfs_only_bytes: u64,
    /// When the daemon assembled the answer (nanoseconds since the epoch).
    pub view_time_ns: i64,
}

impl Location {
    /// The host holding most of the range's bytes, if any host holds some.
    pub fn best_host(&self) -> Option<&str> {
        self.bytes_by_host.first().map(|h| h.host.as_str())
    }
}

/// One range to locate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeAsk {
    pub path: String,
    pub offset: u64,
    /// `None`: to the end of the file.
    pub len: Option<u64>,
}

impl RangeAsk {
    /// The whole file.
    pub fn file(path: impl Into<String>) -> RangeAsk {
        RangeAsk {
            path: path.into(),
            offset: 0,
            len: None,
        }
    }
}

impl Client {
    /// Where the bytes of `[offset, offset + len)` of `path` live (`len` `None`: to the end).
    pub fn locate(&self, path: &str, offset: u64, len: Option<u64>) -> FsResult<Location> {
        let ask = RangeAsk {
            path: path.to_string(),
            offset,
            len,
        };
        self.locate_many(&[ask], DEFAULT_MAX_EXTENTS)?
            .pop()
            .expect("one answer per range")
    }

    /// Where the bytes of many ranges live, in one request to the daemon (answered in a few
    /// batched rounds however many ranges); each range succeeds or fails on its own.
    pub fn locate_many(
        &self,
        asks: &[RangeAsk],
        max_extents: u32,
    ) -> FsResult<Vec<FsResult<Location>>> {
        let mut g = self.lock();
        let mut ranges = Vec::with_capacity(asks.len());
        let mut bad: Vec<Option<FsError>> = Vec::with_capacity(asks.len());
        for a in asks {
            match g.resolve(&a.path) {
                Ok(p) => {
                    ranges.push(LocateRange {
                        path: p,
                        start: a.offset,
                        len: a.len,
                    });
                    bad.push(None);
                }
                Err(e) => bad.push(Some(e)),
            }
        }
        // One request per `MAX_RANGES` (the daemon's bound), each in a few batched rounds.
        let mut files = Vec::with_capacity(ranges.len());
        for batch in ranges.chunks(MAX_RANGES) {
            let located = g.call(Locate {
                ranges: batch.to_vec(),
                max_extents,
            })?;
            let at = located.view_time_ns;
            files.extend(located.files.into_iter().map(|f| f.map(|f| (f, at))));
        }
        let table = host_table(&mut g)?;
        drop(g);
        let mut answers = files.into_iter();
        Ok(asks
            .iter()
            .zip(bad)
            .map(|(a, bad)| {
                if let Some(e) = bad {
                    return Err(e);
                }
                let f = answers.next().ok_or_else(|| {
                    FsError::new(Errno::Proto, "the daemon answered fewer ranges than asked")
                })??;
                let (f, at) = f;
                Ok(named(&table, &a.path, f, at))
            })
            .collect())
    }

    /// Asks the daemon of `node` for its number through this process's daemon: the no-op that
    /// takes a locate's forwarded path.
    pub fn forward_ping(&self, node: u32) -> FsResult<u32> {
        self.lock().call(ForwardPing { node })
    }
}

/// The host table, read again only when its file changed.
fn host_table(g: &mut crate::client::Inner) -> FsResult<HostTable> {
    let changed = std::fs::metadata(g.layout.hosts_path())
        .and_then(|m| m.modified())
        .ok();
    if let (Some(t), Some((seen, table))) = (changed, &g.hosts)
        && t == *seen
    {
        return Ok(table.clone());
    }
    let table = g.layout.load_hosts()?;
    if let Some(t) = changed {
        g.hosts = Some((t, table.clone()));
    }
    Ok(table)
}

/// Where a node's daemon runs, as the host table says (`?` for one not registered now).
fn host_of(table: &HostTable, node: u32) -> HostOf {
    match table.get(node) {
        Some(e) => HostOf {
            node,
            host: normalize_host(&e.host),
            addr: e.addr.clone(),
        },
        None => HostOf {
            node,
            host: "?".to_string(),
            addr: String::new(),
        },
    }
}

fn named(
    table: &HostTable,
    path: &str,
    f: tessera_proto::FileLocation,
    view_time_ns: i64,
) -> Location {
    let p = f.placement;
    let mut bytes_by_host: Vec<HostBytes> = Vec::new();
    for (node, bytes) in p.bytes_by_node {
        let h = host_of(table, node).host;
        match bytes_by_host.iter_mut().find(|x| x.host == h) {
            Some(x) => {
                x.nodes.push((node, bytes));
                x.bytes += bytes;
            }
            None => bytes_by_host.push(HostBytes {
                host: h,
                bytes,
                nodes: vec![(node, bytes)],
            }),
        }
    }
    bytes_by_host.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.host.cmp(&b.host)));
    Location {
        path: path.to_string(),
        ino: f.ino,
        size: f.size,
        start: p.start,
        end: p.end,
        extents: p
            .extents
            .into_iter()
            .map(|e| LocatedExtent {
                start: e.start,
                end: e.end,
                holder: e.node.map(|n| host_of(table, n)),
                residence: e.residence,
            })
            .collect(),
        more_from: p.more_from,
        bytes_by_host,
        pfs_only_bytes: p.pfs_only_bytes,
        view_time_ns,
    }
}
