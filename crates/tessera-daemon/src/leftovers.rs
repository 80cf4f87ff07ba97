//! Publishing what a process wrote and did not publish, when its connection ends.
//!
//! A process that is killed, or ends without closing a file, leaves writes that no one else
//! can see. Its daemon knows: the process's journals on this node hold every write that
//! returned (see `tessera_logstore`), and say what it already published (markers), as does
//! what the process attached through this daemon (`Clients::published`). The rest is
//! attached for it, as its close would have done.
//!
//! A member of a transaction not yet decided is the exception: what it did not publish
//! before its vote is part of nothing (the transaction cannot count on it, and nobody outside
//! may see it), so its logs under the transaction are released instead.

use crate::Node;
use tessera_core::index::{self, Entry};
use tessera_core::{Owner, Run};

/// How often the clients that were connected when the daemon stopped are checked: a process
/// that ended while its daemon was away never connects again, so nothing else tells.
const ABSENT_CHECK: std::time::Duration = std::time::Duration::from_millis(500);

/// One file's unpublished writes of one client.
struct Leftover {
    ino: u64,
    runs: Vec<Run>,
    lost: usize,
}

impl Node {
    /// Watches the clients without a connection whose processes still ran (connected when
    /// the daemon last stopped, or whose connection ended while the process went on): once
    /// such a process has ended, publishes what it left (its files found by scanning this
    /// node's logs, since after a restart the daemon no longer knows them).
    pub async fn watch_absent_clients(self: std::sync::Arc<Self>) {
        // Ends once the daemon stops: its state is closed, and a task that ran on past the
        // runtime's end (after `crate::blocking`) would panic at its next timer. What an ended
        // process left and was not published yet is published by the daemon's successor (the
        // process stays in the store's clients table until then).
        let mut had_absent = false;
        while !self.stopping() {
            if !self.clients.any_absent() && std::mem::take(&mut had_absent) {
                // Transaction logs were kept while a member might come back: look again.
                crate::blocking::blocking(|| {
                    for log in self.logs.log_ids() {
                        if let Err(e) = self
                            .logs
                            .delete_if_done(log, &|log, txn| self.log_in_use(log, txn))
                        {
                            tracing::warn!(log, "keeping a log: {e}");
                        }
                    }
                });
            }
            if self.clients.any_absent() {
                had_absent = true;
                for client in self.clients.take_ended() {
                    crate::blocking::blocking(|| {
                        self.hold_while_serving();
                        self.scan_writing(client)
                    });
                    if self.stopping() {
                        return;
                    }
                    self.publish_leftovers(client).await;
                    let _ = self
                        .store
                        .submit(vec![crate::store::DbOp::DelClient(client)])
                        .durable()
                        .await;
                    // Its log goes if every file in it was removed meanwhile.
                    let deleted = crate::blocking::blocking(|| {
                        self.logs
                            .delete_if_done(client, &|log, txn| self.log_in_use(log, txn))
                    });
                    if let Err(e) = deleted {
                        tracing::warn!(client, "keeping the log of a process that ended: {e}");
                    }
                }
            }
            if self.stopping() {
                return;
            }
            tokio::time::sleep(ABSENT_CHECK).await;
        }
    }

    /// Failpoint `leftovers-hold` (crash tests): holds the publication of what an ended
    /// process left until this daemon has stopped serving (it left the host table), as a
    /// publication too slow to finish before a stop would.
    fn hold_while_serving(&self) {
        if !self.failpoints.is_set("leftovers-hold") {
            return;
        }
        tracing::warn!("failpoint leftovers-hold: holding until the daemon stops");
        let me = std::process::id();
        let serving = || {
            self.layout
                .load_hosts()
                .is_ok_and(|t| t.get(self.id).is_some_and(|e| e.pid == me))
        };
        while !self.stopping() || serving() {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// Records every file that `client`'s journal on this node holds records of.
    fn scan_writing(&self, client: u64) {
        let (data, _) = self.cfg.log_paths(self.id, client);
        let journal = tessera_logstore::journal_path(&data);
        if !journal.exists() {
            return;
        }
        match tessera_logstore::read_entries(&journal) {
            Ok((_, parsed)) => {
                let inos: std::collections::HashSet<u64> = parsed
                    .entries
                    .iter()
                    .filter(|t| !matches!(t.entry, Entry::Lost { .. }))
                    .map(|t| t.ino)
                    .collect();
                for ino in inos {
                    self.clients.note_writing(client, ino);
                }
            }
            Err(e) => tracing::warn!("reading {}: {e}", journal.display()),
        }
    }

    /// Publishes the unpublished writes `client` left in its logs on this node.
    pub async fn publish_leftovers(&self, client: u64) {
        let found = crate::blocking::blocking(|| self.find_leftovers(client));
        if self.stopping() {
            // The state is closing: the daemon's successor publishes them (the process stays
            // in the store's clients table until then).
            return;
        }
        let owner = Owner {
            node: self.id,
            client,
        };
        for l in found {
            if l.lost > 0 {
                tracing::warn!(
                    client,
                    ino = format_args!("{:#x}", l.ino),
                    "{} damaged journal records: their writes cannot be published",
                    l.lost
                );
            }
            if l.runs.is_empty() {
                continue;
            }
            let bytes: u64 = l.runs.iter().map(Run::bytes).sum();
            match self.attach(l.ino, owner, l.runs, &[], None).await {
                Ok(()) => tracing::info!(
                    client,
                    ino = format_args!("{:#x}", l.ino),
                    bytes,
                    "published the writes of a process that ended without publishing them"
                ),
                // The file is gone, or the writes are no longer whole: nothing to publish.
                Err(e) => tracing::warn!(
                    client,
                    ino = format_args!("{:#x}", l.ino),
                    "could not publish the writes of a process that ended: {e}"
                ),
            }
        }
        self.clients.forget(client);
    }

    /// Gives back the space of what `client`, a member of a transaction still undecided here,
    /// wrote under the transaction's log id `log` on this node and had not published when
    /// its process ended. No shard names a log nothing was published from, so the
    /// transaction's abort would leave it. Each of its files' logs is released as a
    /// migrated-away log is: after the grace period, once nothing owns a byte of it (one the
    /// member published from is kept if the transaction commits).
    pub fn release_unpublished(&self, client: u64, log: u64) {
        let (data, index) = self.cfg.log_paths(self.id, log);
        if data.exists() {
            // Its index then describes every write it made, so that the release finds them.
            if let Err(e) = tessera_logstore::seal_logs(&data, &index) {
                tracing::warn!("sealing the logs of {}: {e}", data.display());
            }
            for ino in self.clients.writing(client) {
                self.list_for_release(ino, [log]);
            }
        }
        self.clients.forget(client);
    }

    /// Every file `client` said it writes on this node, and what it left unpublished in its
    /// log.
    fn find_leftovers(&self, client: u64) -> Vec<Leftover> {
        let writing = self.clients.writing(client);
        let (data, index) = self.cfg.log_paths(self.id, client);
        let path = tessera_logstore::journal_path(&data);
        if writing.is_empty() || !path.exists() {
            return Vec::new();
        }
        let (header, parsed) = match tessera_logstore::read_entries(&path) {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!("reading {}: {e}", path.display());
                return Vec::new();
            }
        };
        if header.log != client || header.node != self.id {
            tracing::warn!("{} names another log ({header:?}); skipped", path.display());
            return Vec::new();
        }
        // The process may have died before it synced its last writes.
        if let Err(e) = tessera_logstore::seal_logs(&data, &index) {
            tracing::warn!("sealing the logs of {}: {e}", path.display());
            return Vec::new();
        }
        writing
            .into_iter()
            .map(|ino| {
                let entries = parsed.of(ino);
                let lost = entries
                    .iter()
                    .filter(|e| matches!(e, Entry::Lost { .. }))
                    .count();
                let floor = self.clients.published(client, ino);
                Leftover {
                    ino,
                    runs: index::unpublished(&entries, floor),
                    lost,
                }
            })
            .collect()
    }
}
