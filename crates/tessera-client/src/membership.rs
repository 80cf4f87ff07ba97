//! A process's membership of a transaction (D2T), as its client library keeps it: which
//! transaction it writes under and with which log id, a leave its daemon has not been told
//! of yet (told before the next request, without a round trip of its own), and the
//! transaction a forked child joins under a log of its own at its first connection. Pure:
//! the client asks it what to send and tells it what was answered.

/// The membership state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Membership {
    /// The transaction and the log id this process writes under while a member.
    current: Option<(u64, u64)>,
    /// This process left and its daemon does not know yet.
    leave_untold: bool,
    /// A forked child's transaction (its parent's), to join at its first connection.
    after_fork: Option<u64>,
}

/// What a new connection must first tell the daemon.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnConnect {
    /// Nothing: the process is a member of no transaction.
    Nothing,
    /// Join `txn` again under `log` (the daemon restarted: it may not count the process).
    Rejoin { txn: u64, log: u64 },
    /// Join `txn` under a new log (a forked child's first connection).
    JoinAfterFork { txn: u64 },
}

impl Membership {
    /// The transaction this process is a member of.
    pub fn txn(&self) -> Option<u64> {
        self.current.map(|(t, _)| t)
    }

    /// Whether this process is a member of a transaction.
    pub fn is_member(&self) -> bool {
        self.current.is_some()
    }

    /// The id of the logs this process writes now: its transaction's log, or `own` (its
    /// client id).
    pub fn log_id(&self, own: u64) -> u64 {
        self.current.map_or(own, |(_, log)| log)
    }

    /// Whether caches that hold committed state only (attributes, directory listings) may
    /// serve: not while a member, nor while a leave is untold (the daemon still answers as
    /// to a member).
    pub fn outside(&self) -> bool {
        self.current.is_none() && !self.leave_untold
    }

    /// Whether joining `txn` (`None`: leaving) changes nothing, so no request is needed.
    pub fn joins_nothing(&self, txn: Option<u64>) -> bool {
        self.txn() == txn && !self.leave_untold
    }

    /// The daemon answered a join of `txn` with `log` (`None`: a leave it was told of).
    pub fn joined(&mut self, txn: Option<(u64, u64)>) {
        self.current = txn;
        self.leave_untold = false;
    }

    /// This process leaves without a round trip; `false` if it was not a member.
    pub fn leave(&mut self) -> bool {
        if self.current.take().is_none() {
            return false;
        }
        self.leave_untold = true;
        true
    }

    /// Before a request other than a join: whether the daemon must first be told of a leave
    /// (the flag is taken; [`Membership::leave_not_told`] puts it back if telling failed).
    pub fn take_leave_to_tell(&mut self) -> bool {
        std::mem::take(&mut self.leave_untold)
    }

    /// Telling the daemon of the leave failed: it is told before a later request, unless the
    /// connection is gone (a new connection starts outside the transaction anyway).
    pub fn leave_not_told(&mut self, still_connected: bool) {
        self.leave_untold = still_connected;
    }

    /// After `fork`, in the child: the parent's membership is the parent's; the child joins
    /// the same transaction under a log of its own at its first connection.
    pub fn forked(&mut self) {
        self.after_fork = self.current.take().map(|(t, _)| t);
        self.leave_untold = false;
    }

    /// What a new connection must first tell the daemon (a forked child's join is taken:
    /// [`Membership::fork_join_failed`] puts it back).
    pub fn on_connect(&mut self) -> OnConnect {
        match (self.current, self.after_fork.take()) {
            (Some((txn, log)), _) => OnConnect::Rejoin { txn, log },
            (None, Some(txn)) => OnConnect::JoinAfterFork { txn },
            (None, None) => OnConnect::Nothing,
        }
    }

    /// The daemon refused to take this process back into its transaction (it ended
    /// meanwhile): the process is outside it from now on.
    pub fn rejoin_refused(&mut self) {
        self.current = None;
    }

    /// A forked child's join could not reach the transaction's home: asked again at the next
    /// connection (the child must not write outside the transaction unnoticed).
    pub fn fork_join_failed(&mut self, txn: u64) {
        self.after_fork = Some(txn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leave_is_told_before_the_next_request_and_only_once() {
        let mut m = Membership::default();
        assert!(m.outside() && !m.leave(), "not a member: nothing to leave");
        m.joined(Some((5, 77)));
        assert_eq!((m.txn(), m.log_id(3)), (Some(5), 77));
        assert!(m.joins_nothing(Some(5)) && !m.joins_nothing(None));
        assert!(!m.outside(), "a member's caches hold pending state");
        assert!(m.leave());
        assert_eq!((m.txn(), m.log_id(3)), (None, 3));
        assert!(!m.outside(), "the daemon still answers as to a member");
        assert!(
            !m.joins_nothing(None),
            "a leave untold is told by a join of none"
        );
        assert!(m.take_leave_to_tell());
        m.leave_not_told(true);
        assert!(
            m.take_leave_to_tell(),
            "telling failed on a live connection: again"
        );
        m.leave_not_told(false);
        assert!(
            !m.take_leave_to_tell(),
            "a new connection starts outside anyway"
        );
        assert!(m.outside());
    }

    #[test]
    fn a_new_connection_rejoins_and_a_refusal_leaves() {
        let mut m = Membership::default();
        assert_eq!(m.on_connect(), OnConnect::Nothing);
        m.joined(Some((5, 77)));
        assert_eq!(m.on_connect(), OnConnect::Rejoin { txn: 5, log: 77 });
        assert_eq!(
            m.on_connect(),
            OnConnect::Rejoin { txn: 5, log: 77 },
            "every time"
        );
        m.rejoin_refused();
        assert_eq!((m.txn(), m.on_connect()), (None, OnConnect::Nothing));
    }

    #[test]
    fn a_forked_child_joins_its_parents_transaction_under_a_log_of_its_own() {
        let mut m = Membership::default();
        m.joined(Some((5, 77)));
        assert!(m.leave());
        m.joined(Some((6, 78)));
        m.forked();
        assert_eq!(m.txn(), None, "the parent's log is the parent's");
        assert!(!m.take_leave_to_tell());
        assert_eq!(m.on_connect(), OnConnect::JoinAfterFork { txn: 6 });
        assert_eq!(m.on_connect(), OnConnect::Nothing, "taken");
        m.fork_join_failed(6);
        assert_eq!(
            m.on_connect(),
            OnConnect::JoinAfterFork { txn: 6 },
            "asked again"
        );
        m.joined(Some((6, 90)));
        assert_eq!(m.log_id(4), 90);
    }
}
