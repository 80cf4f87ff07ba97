//! The client ids a node hands out (also the log ids of transactions' members): unique on
//! the node across restarts, made durable a block ahead so that most ids cost no state write.

use std::ops::Range;
use std::sync::Mutex;

/// How many ids one state write reserves ahead.
pub const BLOCK: u64 = 1024;

/// The counter of a node's client ids.
pub struct ClientIds {
    counter: Mutex<Counter>,
}

struct Counter {
    /// The next to hand out.
    next: u64,
    /// Ids below this are reserved by a state write (made or on its way).
    reserved: u64,
    /// Ids below this are reserved durably.
    durable: u64,
}

impl ClientIds {
    /// After a start: past every id reserved before (`persisted`, as the state recorded it).
    pub fn resume(persisted: u64) -> ClientIds {
        let next = persisted.max(1);
        ClientIds {
            counter: Mutex::new(Counter {
                next,
                reserved: next,
                durable: next,
            }),
        }
    }

    /// Hands out `n` ids. When they reach past what is reserved, a block more is reserved
    /// with `reserve(upto)` (called under the counter's lock, so reservations are written
    /// in order), whose result the caller waits for, then reports with
    /// [`ClientIds::durable_below`]; also while another call's reservation is on its way
    /// (waiting for this one, written after it, covers both).
    pub fn hand_out<P>(
        &self,
        n: u64,
        reserve: impl FnOnce(u64) -> P,
    ) -> (Range<u64>, Option<(u64, P)>) {
        let mut c = self.counter.lock().expect("client ids");
        let first = c.next.max(1);
        c.next = first + n;
        if c.next > c.reserved {
            c.reserved = c.next + BLOCK;
        }
        let pending = (c.next > c.durable).then(|| (c.reserved, reserve(c.reserved)));
        (first..first + n, pending)
    }

    /// The ids below `upto` are reserved durably.
    pub fn durable_below(&self, upto: u64) {
        let mut c = self.counter.lock().expect("client ids");
        c.durable = c.durable.max(upto);
    }

    /// Whether `id` was handed out (a reconnecting client may keep it).
    pub fn issued(&self, id: u64) -> bool {
        id >= 1 && id < self.counter.lock().expect("client ids").next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_write_reserves_a_block_ahead_and_a_restart_resumes_past_it() {
        let ids = ClientIds::resume(0);
        let mut writes = Vec::new();
        let (first, pending) = ids.hand_out(1, |upto| writes.push(upto));
        assert_eq!(first, 1..2);
        let (upto, ()) = pending.expect("the first id needs a reservation");
        assert_eq!(upto, 2 + BLOCK);
        // Until the write is durable, every call waits for one (its own, after the first).
        let (_, again) = ids.hand_out(1, |upto| writes.push(upto));
        assert!(again.is_some());
        ids.durable_below(upto);
        let mut quiet = 0;
        for _ in 0..BLOCK - 2 {
            let (_, p) = ids.hand_out(1, |_| ());
            quiet += usize::from(p.is_none());
        }
        assert_eq!(
            quiet as u64,
            BLOCK - 2,
            "ids within the block cost no write"
        );
        assert!(ids.issued(5) && !ids.issued(0) && !ids.issued(BLOCK + 10));
        // After a restart from what was written: never an id handed out before.
        let restarted = ClientIds::resume(upto);
        let (next, _) = restarted.hand_out(1, |_| ());
        assert!(next.start >= BLOCK, "{next:?} may repeat an id");
    }
}
