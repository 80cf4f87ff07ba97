//! The connection to the daemon: calls (by the ring or the socket), reconnecting after a
//! lost connection or a fork, and paths as the user writes them.

use super::*;
use crate::attr_cache::AttrCache;
use crate::conn::{Conn, Way, is_disconnect};
use crate::membership::OnConnect;
use crate::reconnect::{Next, Reconnect};
use std::time::Instant;
use tessera_core::{Errno, FsError, FsResult, path};
use tessera_proto::{Attr, ClientCall, Request, TxnJoin, Writing};

impl Inner {
    /// Counts this process's own unattached writes of the file towards the size it is shown;
    /// attached ones are in the daemon's size already, and may have been cut since by another
    /// process's truncate.
    pub(super) fn count_own_writes(&self, a: &mut Attr) {
        if let Some(fs) = self.files.get(&a.ino) {
            let unattached_end = fs.dirty.ranges().map(|(_, end)| end).max().unwrap_or(0);
            a.size = a.size.max(unattached_end);
        }
    }

    /// Bytes this process read itself (from logs on its node, or from the PFS copy), for
    /// its daemon's metrics: see `tessera_proto::reports`.
    pub(crate) fn report_read(&mut self, slot: usize, bytes: u64) {
        if let Some(conn) = &mut self.conn {
            conn.report(slot, bytes);
        }
    }

    /// After `fork`, the child must not share the parent's connection or logs: it becomes a
    /// new client with its own logs. Its unattached view of the parent's writes is dropped;
    /// it sees what the parent attached, by the parent's model.
    pub(super) fn after_fork(&mut self) {
        let pid = std::process::id();
        if pid == self.pid {
            return;
        }
        self.pid = pid;
        self.conn = None;
        self.client_id = 0;
        self.grant = 0;
        self.files.clear();
        self.log = None;
        self.retired = None;
        self.written.clear();
        self.foreign.clear();
        // The parent's copies stay the parent's; the child's next connection brings its own.
        self.attrs = AttrCache::off();
        self.membership.forked();
    }

    pub fn resolve(&self, user_path: &str) -> FsResult<String> {
        path::resolve(user_path, &self.cfg.mount)
    }

    /// A path for messages, as the user writes it.
    pub fn user_path(&self, p: &str) -> String {
        if p == "/" {
            self.cfg.mount.clone()
        } else {
            format!("{}{p}", self.cfg.mount.trim_end_matches('/'))
        }
    }

    pub(super) fn reconnect(&mut self) -> FsResult<()> {
        let resume = (self.client_id != 0).then_some(self.client_id);
        let mut attempts = Reconnect::start(Instant::now(), resume.is_some(), self.reconnect_for);
        loop {
            match Conn::connect(
                &self.cfg.socket_path(self.node),
                &self.layout.dir,
                self.cfg.max_frame as usize,
                resume,
            ) {
                Ok((mut conn, bound)) => {
                    let id = bound.client;
                    // Copies under the previous daemon's leases go with it.
                    self.attrs = AttrCache::open(bound.board);
                    match self.membership.on_connect() {
                        OnConnect::Nothing => {}
                        OnConnect::Rejoin { txn, log } => {
                            let again = TxnJoin {
                                txn: Some(txn),
                                log: Some(log),
                            };
                            if let Err(e) = conn.call(again) {
                                // No longer a member (the transaction ended meanwhile): the
                                // call that reconnected fails with why; the process is outside
                                // it now.
                                self.membership.rejoin_refused();
                                self.conn = Some(conn);
                                self.client_id = id;
                                return Err(e);
                            }
                        }
                        OnConnect::JoinAfterFork { txn } => {
                            let join = TxnJoin {
                                txn: Some(txn),
                                log: None,
                            };
                            match conn.call(join) {
                                Ok(log) => self.membership.joined(Some((txn, log))),
                                // The transaction is over: the child writes outside it, as its
                                // parent does now.
                                Err(e) if e.errno == Errno::Inval => {}
                                // Its home cannot be reached: the child must not write outside
                                // the transaction unnoticed, so its calls fail until it can join.
                                Err(e) => {
                                    self.membership.fork_join_failed(txn);
                                    return Err(e);
                                }
                            }
                        }
                    }
                    if resume == Some(id) {
                        // A restarted daemon learns again which files this process writes.
                        for (ino, fs) in &self.files {
                            if fs.writing {
                                conn.call(Writing { ino: *ino })?;
                            }
                        }
                    }
                    self.conn = Some(conn);
                    self.client_id = id;
                    return Ok(());
                }
                Err(e) => match attempts.failed(e.errno, Instant::now()) {
                    Next::RetryAfter(wait) => std::thread::sleep(wait),
                    Next::GiveUp => return Err(e),
                },
            }
        }
    }

    /// Sends a request to this process's daemon. If the daemon restarted, the client
    /// reconnects under the same client id (within `TESSERA_RECONNECT_SECS`) and resends.
    pub fn call<R: ClientCall>(&mut self, req: R) -> FsResult<R::Reply> {
        let req: Request = req.into();
        let way = way_of(&req);
        self.call_by::<R>(req, way)
    }

    /// [`Inner::call`], the request taking `way` (the socket, or the ring when it fits).
    pub(super) fn call_by<R: ClientCall>(&mut self, req: Request, way: Way) -> FsResult<R::Reply> {
        if !matches!(req, Request::TxnJoin(_)) && self.membership.take_leave_to_tell() {
            // The daemon must know this process left before it handles anything else.
            if let Err(e) = self.call(TxnJoin {
                txn: None,
                log: None,
            }) {
                let connected = self.conn.is_some();
                self.membership.leave_not_told(connected);
                return Err(e);
            }
        }
        self.stats.requests += 1;
        if self.conn.is_none() {
            self.reconnect()?;
        }
        let body = tessera_proto::frame::encode(&req);
        let first = self
            .conn
            .as_mut()
            .expect("connected above")
            .exchange(&body, way);
        match first {
            Err(e) if is_disconnect(&e) => {
                self.conn = None;
                self.reconnect()?;
                if !req.is_idempotent() {
                    return Err(FsError::new(
                        Errno::HostDown,
                        format!(
                            "the daemon restarted while handling {}; it may or may not have taken effect: check, then retry",
                            req.name()
                        ),
                    ));
                }
                self.conn
                    .as_mut()
                    .expect("reconnected")
                    .exchange(&body, way)?;
            }
            Err(e) => return Err(e),
            Ok(()) => {}
        }
        self.conn.as_mut().expect("connected").reply::<R>()
    }

    /// The data that followed the last `Data` answer.
    pub fn last_data(&self) -> &[u8] {
        self.conn.as_ref().map_or(&[], |c| c.data())
    }

    /// The client id, connecting first if this process has none yet (after fork).
    pub fn client_id(&mut self) -> FsResult<u64> {
        if self.client_id == 0 {
            self.reconnect()?;
        }
        Ok(self.client_id)
    }
}
