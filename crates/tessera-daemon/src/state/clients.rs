//! The clients of this node: which client ids are bound to a live connection, and how far
//! each has published its writes.
//!
//! A client id names a process's logs on this node, so two connections must never act under
//! one id: a hello that resumes an id (after a daemon restart) is accepted only while no live
//! connection holds it. When a connection ends without the process having published all it
//! wrote (it was killed, or exited without closing), the daemon publishes the rest from its
//! index logs (`Node::publish_leftovers`); the positions recorded here say where the
//! unpublished part starts.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use tessera_core::{Errno, FsError, FsResult};

#[derive(Default)]
pub struct Clients {
    /// Client id -> pid of the process whose connection holds it.
    live: Mutex<HashMap<u64, u32>>,
    /// (client, ino) -> data-log position below which the client published every write.
    published: Mutex<HashMap<(u64, u64), u64>>,
    /// The files each client keeps logs of on this node.
    writing: Mutex<HashMap<u64, HashSet<u64>>>,
    /// Clients that were connected when this daemon last stopped and have not come back:
    /// id -> (pid, process start time).
    absent: Mutex<HashMap<u64, (u32, u64)>>,
    /// Connected clients that said they will not resume their id (`Goodbye`).
    leaving: Mutex<HashSet<u64>>,
}

impl Clients {
    /// Binds `id` to a new connection of process `pid`; `EBUSY` if a live connection holds it.
    pub fn bind(&self, id: u64, pid: u32) -> FsResult<()> {
        let mut live = self.live.lock().expect("clients");
        if let Some(holder) = live.get(&id) {
            return Err(FsError::new(
                Errno::Busy,
                format!(
                    "client id {id} is in use by a live connection (pid {holder}); a process resumes its id only after its daemon restarted"
                ),
            ));
        }
        live.insert(id, pid);
        self.absent.lock().expect("clients").remove(&id);
        Ok(())
    }

    /// Records the clients that were connected when the daemon last stopped.
    pub fn expect_back(&self, clients: &[(u64, u32, u64)]) {
        let mut absent = self.absent.lock().expect("clients");
        for (id, pid, start) in clients {
            absent.insert(*id, (*pid, *start));
        }
    }

    /// Takes the absent clients whose processes have ended (they will never come back).
    pub fn take_ended(&self) -> Vec<u64> {
        let mut absent = self.absent.lock().expect("clients");
        let ended: Vec<u64> = absent
            .iter()
            .filter(|(_, (pid, start))| process_ended(*pid, *start))
            .map(|(id, _)| *id)
            .collect();
        for id in &ended {
            absent.remove(id);
        }
        ended
    }

    /// Whether clients are still expected back.
    pub fn any_absent(&self) -> bool {
        !self.absent.lock().expect("clients").is_empty()
    }

    /// Frees `id` once its connection has ended and its state is cleaned up.
    pub fn unbind(&self, id: u64) {
        self.live.lock().expect("clients").remove(&id);
    }

    /// Whether `id` may still come back (its connection dropped while its process lives, or
    /// it was connected when this daemon last stopped).
    pub fn is_absent(&self, id: u64) -> bool {
        self.absent.lock().expect("clients").contains_key(&id)
    }

    /// Whether a live connection holds `id`.
    pub fn is_live(&self, id: u64) -> bool {
        self.live.lock().expect("clients").contains_key(&id)
    }

    /// Records that `client` published every write of `ino` stored below `pos`.
    pub fn note_published(&self, client: u64, ino: u64, pos: u64) {
        let mut p = self.published.lock().expect("clients");
        let at = p.entry((client, ino)).or_insert(0);
        *at = (*at).max(pos);
    }

    /// Where `client`'s unpublished writes of `ino` start, as far as this daemon saw.
    pub fn published(&self, client: u64, ino: u64) -> u64 {
        self.published
            .lock()
            .expect("clients")
            .get(&(client, ino))
            .copied()
            .unwrap_or(0)
    }

    /// Records that `client` keeps logs of `ino` on this node.
    pub fn note_writing(&self, client: u64, ino: u64) {
        self.writing
            .lock()
            .expect("clients")
            .entry(client)
            .or_default()
            .insert(ino);
    }

    /// The files `client` keeps logs of on this node.
    pub fn writing(&self, client: u64) -> Vec<u64> {
        self.writing
            .lock()
            .expect("clients")
            .get(&client)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Notes that `client` will not resume its id (see `Goodbye`).
    pub fn said_goodbye(&self, client: u64) {
        self.leaving.lock().expect("clients").insert(client);
    }

    /// Whether `client` said goodbye; forgotten as it is asked (once, as its connection ends).
    pub fn take_goodbye(&self, client: u64) -> bool {
        self.leaving.lock().expect("clients").remove(&client)
    }

    /// The clients that said they write `ino`.
    pub fn writers_of(&self, ino: u64) -> Vec<u64> {
        self.writing
            .lock()
            .expect("clients")
            .iter()
            .filter(|(_, inos)| inos.contains(&ino))
            .map(|(c, _)| *c)
            .collect()
    }

    /// Forgets what `client` wrote and published (its connection is gone and its leftovers
    /// handled).
    pub fn forget(&self, client: u64) {
        self.published
            .lock()
            .expect("clients")
            .retain(|(c, _), _| *c != client);
        self.writing.lock().expect("clients").remove(&client);
    }

    /// Number of live client connections.
    pub fn count(&self) -> usize {
        self.live.lock().expect("clients").len()
    }
}

/// The kernel's flag for a task that is exiting (set before its files are closed).
const PF_EXITING: u64 = 0x4;

/// When process `pid` started (clock ticks since boot, from `/proc/<pid>/stat`), if it runs
/// and is not exiting: with the pid, it names one process for good (a pid alone may be
/// reused).
pub fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces and parentheses): state is field 3
    // (index 0 here), flags field 9, start time field 22.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    if matches!(fields.first(), Some(&"Z") | Some(&"X")) {
        return None;
    }
    let flags: u64 = fields.get(6)?.parse().ok()?;
    if flags & PF_EXITING != 0 {
        return None;
    }
    fields.get(19)?.parse().ok()
}

/// Whether the process `(pid, start)` has ended (or is ending): it never sends again.
pub fn process_ended(pid: u32, start: u64) -> bool {
    process_start(pid) != Some(start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processes_are_named_by_pid_and_start() {
        let me = std::process::id();
        let start = process_start(me).expect("this process runs");
        assert_eq!(process_start(me), Some(start), "stable");
        assert_eq!(process_start(u32::MAX), None);
    }

    #[test]
    fn an_id_binds_once_until_freed() {
        let c = Clients::default();
        c.bind(3, 100).unwrap();
        let e = c.bind(3, 200).unwrap_err();
        assert_eq!(e.errno, Errno::Busy);
        assert!(e.message.contains("pid 100"), "{e}");
        assert!(c.is_live(3) && c.count() == 1);
        c.unbind(3);
        c.bind(3, 200).unwrap();
    }
}
