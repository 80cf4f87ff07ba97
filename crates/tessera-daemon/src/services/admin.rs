//! The admin service: liveness, status and shutdown, asked by clients, peers and the
//! `tessera` command (as the admin identity of the peer handshake).

use crate::Node;
use crate::rpc::{ServeClient, ServePeer};
use tessera_core::FsResult;
use tessera_proto::{NodeStatus, Ping, Shutdown, Status};

impl ServePeer<Ping> for Node {
    async fn serve_peer(&self, _: Ping) -> FsResult<u32> {
        Ok(self.id)
    }
}

// A client asking for status or shutdown is answered as a peer is.
impl ServeClient<Status> for Node {
    async fn serve_client(&self, _: u64, r: Status) -> FsResult<NodeStatus> {
        self.serve_peer(r).await
    }
}

impl ServePeer<Status> for Node {
    async fn serve_peer(&self, _: Status) -> FsResult<NodeStatus> {
        Ok(self.status())
    }
}

impl ServeClient<Shutdown> for Node {
    async fn serve_client(&self, _: u64, r: Shutdown) -> FsResult<()> {
        self.serve_peer(r).await
    }
}

impl ServePeer<Shutdown> for Node {
    async fn serve_peer(&self, _: Shutdown) -> FsResult<()> {
        self.life.ask_to_stop();
        Ok(())
    }
}

impl Node {
    /// What the metrics read of this node's state when they are scraped.
    pub fn sampled(&self) -> crate::metrics::Sampled {
        let (files_owned, ownership_entries) = self.shards.ownership(|own| own.stats());
        let space = crate::blocking::blocking(|| self.logs.space());
        let device = rustix::fs::statvfs(self.cfg.bb_dir(self.id)).ok();
        let (locks_granted, lock_waits) = self.locks.counts();
        crate::metrics::Sampled {
            bb_used: space.used,
            bb_reserved: space.reserved,
            bb_capacity: self.logs.capacity(),
            bb_device_free: device.as_ref().map_or(0, |d| d.f_bavail * d.f_frsize),
            clients: self.life.clients(),
            files_owned,
            ownership_entries,
            lock_waiters: self.locks.waiting(),
            txns_open: self.txns.homes.counts().1,
            uptime: self.life.uptime(),
            locks_granted,
            lock_waits,
        }
    }

    /// The metrics as a scrape answers them.
    pub fn metrics_text(&self) -> String {
        self.metrics.render(&self.sampled())
    }

    /// What this node holds and serves.
    pub fn status(&self) -> NodeStatus {
        let (files_owned, ownership_entries) = self.shards.ownership(|own| own.stats());
        let (stripe_copy_hits, stripe_copy_misses) = self.stripe_cache.counts();
        // Measures the device: off the async workers.
        let (grants, peak) = self.locks.figures();
        // One guard at a time: temporaries in the literal below would live to its end.
        let (txns_at_home, txns_open) = self.txns.homes.counts();
        let space = crate::blocking::blocking(|| self.logs.space());
        let (stats_leased, stats_unleased) = self.attrs.stats_counted();
        let device = rustix::fs::statvfs(self.cfg.bb_dir(self.id)).ok();
        NodeStatus {
            node: self.id,
            pid: std::process::id(),
            uptime_ms: self.life.uptime().as_millis() as u64,
            bb_dir: self.cfg.bb_dir(self.id).display().to_string(),
            bb_used: space.used,
            bb_reserved: space.reserved,
            bb_capacity: self.logs.capacity(),
            bb_device_total: device.as_ref().map_or(0, |d| d.f_blocks * d.f_frsize),
            bb_device_free: device.as_ref().map_or(0, |d| d.f_bavail * d.f_frsize),
            clients: self.life.clients(),
            files_owned,
            ownership_entries,
            requests: self.life.requests(),
            stripe_copy_hits,
            stripe_copy_misses,
            list_locks_granted: grants.granted,
            list_lock_runs: grants.runs,
            lock_peak_holders: peak as u64,
            txns_at_home,
            name_intents: self.names.count() as u64,
            files_to_drop: self.drops.count() as u64,
            attr_leases: self.attrs.leases_held() as u64,
            stats_leased,
            stats_unleased,
            txns_open,
            security: self.cfg.security,
            lock_waiters: self.locks.waiting(),
            txns_pending: self.txns.pending(|p| p.transactions().count()) as u64,
            logs_to_release: self.releases.count() as u64,
            metrics_endpoint: self.metrics.endpoint(),
            metrics: self.metrics.samples(&self.sampled()),
        }
    }
}
