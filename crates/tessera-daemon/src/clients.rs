//! The clients of this node: which client ids are bound to a live connection.
//!
//! A client id names a process's logs on this node, so two connections must never act under
//! one id: a hello that resumes an id (after a daemon restart) is accepted only while no live
//! connection holds it.

use std::collections::HashMap;
use std::sync::Mutex;
use tessera_core::{Errno, FsError, FsResult};

#[derive(Default)]
pub struct Clients {
    /// Client id -> pid of the process whose connection holds it.
    live: Mutex<HashMap<u64, u32>>,
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
        Ok(())
    }

    /// Frees `id` once its connection has ended and its state is cleaned up.
    pub fn unbind(&self, id: u64) {
        self.live.lock().expect("clients").remove(&id);
    }

    /// Whether a live connection holds `id`.
    pub fn is_live(&self, id: u64) -> bool {
        self.live.lock().expect("clients").contains_key(&id)
    }

    /// Number of live client connections.
    pub fn count(&self) -> usize {
        self.live.lock().expect("clients").len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
