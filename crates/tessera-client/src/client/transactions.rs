//! Transactions (D2T) from a client: opening, joining, enrolling, entering and leaving one,
//! and the switch of logs a member makes.

use super::*;
use tessera_core::{Errno, FsError, FsResult, RangeMap, RangeSet};
use tessera_proto::{TxnDecide, TxnEnroll, TxnJoin, TxnOpen, TxnReserve};

impl Client {
    /// Opens a transaction whose home is this process's daemon; returns its id, which the
    /// other processes join.
    pub fn txn_open(&self) -> FsResult<u64> {
        self.lock().call(TxnOpen {})
    }

    /// Makes this process a member of `txn` (`None`: of none). While a member, what it
    /// publishes (attaches at close, sync, commit) is pending under the transaction: visible
    /// to its members, to everyone else only once the transaction commits. Writes must be
    /// published before the vote to be part of it.
    ///
    /// A member writes to logs of its own, so every write must be published (closed, synced
    /// or committed) before joining or leaving: otherwise `EBUSY`.
    pub fn txn_join(&self, txn: Option<u64>) -> FsResult<()> {
        let mut g = self.lock();
        if g.membership.joins_nothing(txn) {
            return Ok(());
        }
        g.check_published(if txn.is_some() { "joining" } else { "leaving" })?;
        let log = g.call(TxnJoin { txn, log: None })?;
        // Whether a transaction left this way committed is not known here: its logs are
        // closed at once, as they may be deleted (an abort) and would stay allocated.
        g.switch_logs(false);
        g.membership.joined(txn.map(|t| (t, log)));
        Ok(())
    }

    /// What the transaction's coordinator enrolls this process as (its node and client id),
    /// once every write is published (`EBUSY` otherwise, as for [`Client::txn_join`]).
    pub fn txn_identity(&self) -> FsResult<(u32, u64)> {
        let mut g = self.lock();
        g.check_published("joining")?;
        let client = g.client_id()?;
        Ok((g.node, client))
    }

    /// Reserves `count` consecutive transaction ids at this process's daemon (their home);
    /// returns the first. Each is opened by [`Client::txn_enroll`] of its members.
    pub fn txn_reserve(&self, count: u32) -> FsResult<u64> {
        self.lock().call(TxnReserve { count })
    }

    /// Makes the processes `members` (each's [`Client::txn_identity`]) members of `txn`, which
    /// this process opened or reserved (then opened now), at once; returns each one's log id,
    /// in order, which each then takes up with [`Client::txn_enter`].
    pub fn txn_enroll(&self, txn: u64, members: Vec<(u32, u64)>) -> FsResult<Vec<u64>> {
        self.lock().call(TxnEnroll {
            txn,
            members,
            open: true,
        })
    }

    /// Takes up membership of `txn` under `log`, as enrolled by the coordinator: from now on
    /// this process writes as a member (its daemon already counts it as one).
    pub fn txn_enter(&self, txn: u64, log: u64) -> FsResult<()> {
        let mut g = self.lock();
        g.check_published("joining")?;
        g.switch_logs(true);
        g.membership.joined(Some((txn, log)));
        Ok(())
    }

    /// Leaves this process's transaction without a round trip: its daemon is told before the
    /// process's next request (a transaction that was decided has no use for it before).
    /// Every write must be published first (`EBUSY` otherwise). The log written under a
    /// transaction that `committed` stays open until the next switch (see `Inner::retired`);
    /// that of one that aborted is closed at once: its files are deleted, and would stay
    /// allocated.
    pub fn txn_leave(&self, committed: bool) -> FsResult<()> {
        let mut g = self.lock();
        if !g.membership.is_member() {
            return Ok(());
        }
        g.check_published("leaving")?;
        g.switch_logs(committed);
        g.membership.leave();
        Ok(())
    }

    /// The transaction this process is a member of.
    pub fn txn_member(&self) -> Option<u64> {
        self.lock().membership.txn()
    }

    /// Asks `txn`'s home to commit (`commit`) or abort it; returns once the decision is
    /// durable. A commit that ends in an abort fails with `ECANCELED` and the reasons.
    pub fn txn_decide(&self, txn: u64, commit: bool, reasons: Vec<String>) -> FsResult<()> {
        self.lock().call(TxnDecide {
            txn,
            commit,
            reasons,
        })
    }
}

impl Inner {
    /// Refuses to change transactions (`what`: joining or leaving) while a write is not
    /// published: a member writes to logs of its own.
    pub(super) fn check_published(&self, what: &str) -> FsResult<()> {
        let dirty = |ino: &&u64| self.files.get(ino).is_some_and(|fs| !fs.dirty.is_empty());
        if let Some(ino) = self.written.iter().find(dirty) {
            return Err(FsError::new(
                Errno::Busy,
                format!(
                    "inode {ino:#x} has writes this process has not published: close, sync or commit the file before {what} a transaction"
                ),
            ));
        }
        Ok(())
    }

    /// Writes from now on go under a new log id (the caller changes the membership): the
    /// writer of the log written until now is kept until the next switch (`retire`) or
    /// closed.
    pub(super) fn switch_logs(&mut self, retire: bool) {
        self.attrs.clear();
        self.stat_ahead.clear();
        // New writes go to the new log id's log; the old one stays readable through
        // ownership like any other process's.
        for ino in std::mem::take(&mut self.written) {
            let Some(fs) = self.files.get_mut(&ino) else {
                continue;
            };
            fs.writing = false;
            fs.local = RangeMap::default();
            fs.attached = RangeSet::default();
            fs.forgot = true;
        }
        self.retired = self.log.take().filter(|_| retire).map(|(_, s)| s);
    }
}
