//! The consistency models and where each one places attach and query (Wang, Mohror and Snir, Table VI).
//!
//! A model is nothing but a placement of the two synchronisation primitives: `attach` makes a
//! process's writes visible, `query` learns who holds the newest bytes. The stronger the model,
//! the more often they run. The client library consults [`Model::policy`] at each event.
//!
//! | model   | attach                         | query                       | user sync calls          |
//! |---------|--------------------------------|-----------------------------|--------------------------|
//! | posix   | every write                    | every read                  | none                     |
//! | commit  | commit (fsync), close          | every read                  | commit                   |
//! | session | session_close (close)          | session_open (open), cached | open / close             |
//! | mpiio   | sync, close                    | sync, open, cached          | MPI_File_sync-barrier-sync |
//!
//! Every model also attaches at close, so a process that forgets its commit still publishes
//! what it wrote when it closes (nothing written is stranded in a private log).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Model {
    /// Every write visible to every later read: attach per write, query per read.
    Posix,
    /// Writes visible after the writer's commit (fsync): query per read.
    Commit,
    /// Close-to-open: writes visible to a process that opens after the writer closed.
    #[default]
    Session,
    /// MPI-IO sync-barrier-sync: attach and re-query at sync, query at open.
    MpiIo,
}

/// When a model runs the primitives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    pub attach_on_write: bool,
    pub query_on_read: bool,
    pub query_on_open: bool,
    pub attach_on_commit: bool,
    pub attach_on_sync: bool,
    pub query_on_sync: bool,
    pub attach_on_close: bool,
}

impl Model {
    pub const ALL: [Model; 4] = [Model::Posix, Model::Commit, Model::Session, Model::MpiIo];

    pub fn policy(self) -> Policy {
        match self {
            Model::Posix => Policy {
                attach_on_write: true,
                query_on_read: true,
                query_on_open: false,
                attach_on_commit: true,
                attach_on_sync: true,
                query_on_sync: false,
                attach_on_close: true,
            },
            Model::Commit => Policy {
                attach_on_write: false,
                query_on_read: true,
                query_on_open: false,
                attach_on_commit: true,
                attach_on_sync: true,
                query_on_sync: false,
                attach_on_close: true,
            },
            Model::Session => Policy {
                attach_on_write: false,
                query_on_read: false,
                query_on_open: true,
                attach_on_commit: true,
                attach_on_sync: true,
                query_on_sync: true,
                attach_on_close: true,
            },
            Model::MpiIo => Policy {
                attach_on_write: false,
                query_on_read: false,
                query_on_open: true,
                attach_on_commit: true,
                attach_on_sync: true,
                query_on_sync: true,
                attach_on_close: true,
            },
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Model::Posix => "posix",
            Model::Commit => "commit",
            Model::Session => "session",
            Model::MpiIo => "mpiio",
        }
    }
}

impl fmt::Display for Model {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Model {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "posix" => Ok(Model::Posix),
            "commit" => Ok(Model::Commit),
            "session" => Ok(Model::Session),
            "mpiio" | "mpi-io" | "mpi_io" => Ok(Model::MpiIo),
            other => Err(format!(
                "unknown consistency model '{other}': choose posix, commit, session or mpiio"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_vi_placement() {
        let p = Model::Posix.policy();
        assert!(p.attach_on_write && p.query_on_read && !p.query_on_open);
        let c = Model::Commit.policy();
        assert!(!c.attach_on_write && c.query_on_read && c.attach_on_commit);
        let s = Model::Session.policy();
        assert!(!s.attach_on_write && !s.query_on_read && s.query_on_open && s.attach_on_close);
        let m = Model::MpiIo.policy();
        assert!(m.attach_on_sync && m.query_on_sync && m.query_on_open && !m.query_on_read);
    }

    #[test]
    fn names_round_trip_and_bad_names_explain() {
        for m in Model::ALL {
            assert_eq!(m.name().parse::<Model>(), Ok(m));
        }
        let err = "eventual".parse::<Model>().unwrap_err();
        assert!(err.contains("posix, commit, session or mpiio"), "{err}");
    }
}
