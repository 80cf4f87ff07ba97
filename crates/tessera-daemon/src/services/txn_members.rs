//! Which transaction each client of this node is a member of, and the log id it writes
//! under meanwhile (a transaction's writes go to logs of their own); and the leaves to tell
//! the homes, in the background, so that leaving (after every commit) costs no round trip.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

/// Client -> (transaction, log id).
#[derive(Default)]
pub struct Members {
    of: Mutex<HashMap<u64, (u64, u64)>>,
    /// (transaction, client) that left, for their homes.
    leaving: Mutex<Vec<(u64, u64)>>,
    left: tokio::sync::Notify,
}

impl Members {
    /// The transaction and log of `client`, if it is a member.
    pub fn get(&self, client: u64) -> Option<(u64, u64)> {
        self.of.lock().expect("members").get(&client).copied()
    }

    /// Makes `client` a member of `txn` writing under `log` (`None`: of none); returns what
    /// it was before.
    pub fn set(&self, client: u64, now: Option<(u64, u64)>) -> Option<(u64, u64)> {
        let mut of = self.of.lock().expect("members");
        match now {
            Some(m) => of.insert(client, m),
            None => of.remove(&client),
        }
    }

    /// Whether a member writes under `log`.
    pub fn writes_log(&self, log: u64) -> bool {
        self.of
            .lock()
            .expect("members")
            .values()
            .any(|(_, l)| *l == log)
    }

    /// Of `clients`, those still members of `txn`.
    pub fn still_in(&self, txn: u64, clients: Vec<u64>) -> Vec<u64> {
        let of = self.of.lock().expect("members");
        clients
            .into_iter()
            .filter(|c| of.get(c).is_some_and(|(t, _)| *t == txn))
            .collect()
    }

    /// Of `clients`, how many are not members of `txn` yet (each needs a log id).
    pub fn not_in(&self, txn: u64, clients: &[u64]) -> u64 {
        let of = self.of.lock().expect("members");
        clients
            .iter()
            .filter(|c| of.get(c).is_none_or(|(t, _)| *t != txn))
            .count() as u64
    }

    /// Enrolls `clients` in `txn` at once: a member already keeps its log, each other takes
    /// the next of `fresh`. Their logs, in order, and the (old transaction, client) each left.
    pub fn enroll(
        &self,
        txn: u64,
        clients: &[u64],
        fresh: &mut impl Iterator<Item = u64>,
    ) -> (Vec<u64>, Vec<(u64, u64)>) {
        let mut of = self.of.lock().expect("members");
        let mut logs = Vec::with_capacity(clients.len());
        let mut left = Vec::new();
        for c in clients {
            match of.get(c).copied() {
                Some((t, log)) if t == txn => logs.push(log),
                before => {
                    let log = fresh.next().expect("one fresh id per new member");
                    of.insert(*c, (txn, log));
                    left.extend(before.map(|(old, _)| (old, *c)));
                    logs.push(log);
                }
            }
        }
        (logs, left)
    }

    /// Takes the enrollment of `clients` in `txn` back (those now in another stay).
    pub fn unenroll(&self, txn: u64, clients: &[u64]) {
        let mut of = self.of.lock().expect("members");
        for c in clients {
            if of.get(c).is_some_and(|(t, _)| *t == txn) {
                of.remove(c);
            }
        }
    }

    /// Queues telling `txn`'s home that `client` left.
    pub fn left(&self, txn: u64, client: u64) {
        self.leaving.lock().expect("leaving").push((txn, client));
        self.left.notify_one();
    }

    /// Waits for leaves to tell, and takes them (without those that joined the same
    /// transaction again since: members after all).
    pub async fn leaves_to_tell(&self) -> Vec<(u64, u64)> {
        self.left.notified().await;
        let mut leaves = std::mem::take(&mut *self.leaving.lock().expect("leaving"));
        let of = self.of.lock().expect("members");
        leaves.retain(|(txn, client)| of.get(client).map(|(t, _)| *t) != Some(*txn));
        leaves
    }
}

/// The transactions completed on this node since start: a late attach under one is refused.
#[derive(Default)]
pub struct Completed {
    txns: Mutex<HashSet<u64>>,
}

impl Completed {
    pub fn contains(&self, txn: u64) -> bool {
        self.txns.lock().expect("completed").contains(&txn)
    }

    pub fn insert(&self, txn: u64) {
        self.txns.lock().expect("completed").insert(txn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enrolling_keeps_a_members_log_and_reports_who_left_another() {
        let m = Members::default();
        assert_eq!(m.set(1, Some((10, 100))), None);
        m.set(2, Some((9, 90)));
        assert_eq!(m.not_in(10, &[1, 2, 3]), 2);
        let mut fresh = [200, 201].into_iter();
        let (logs, left) = m.enroll(10, &[1, 2, 3], &mut fresh);
        assert_eq!(logs, [100, 200, 201]);
        assert_eq!(left, [(9, 2)]);
        assert_eq!(m.still_in(10, vec![1, 2, 3, 4]), [1, 2, 3]);
        m.set(3, Some((11, 300)));
        m.unenroll(10, &[1, 2, 3]);
        assert_eq!(
            (m.get(1), m.get(2), m.get(3)),
            (None, None, Some((11, 300)))
        );
    }

    #[tokio::test]
    async fn a_leave_is_told_unless_the_client_joined_again() {
        let m = Members::default();
        m.left(10, 1);
        m.left(10, 2);
        m.set(2, Some((10, 5)));
        assert_eq!(m.leaves_to_tell().await, [(10, 1)]);
    }
}
