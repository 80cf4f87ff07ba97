//! The space service: a client's reservations of burst-buffer space on this node, and the
//! files it keeps logs of here (where to look for what it leaves unpublished).

use crate::Node;
use crate::rpc::ServeClient;
use std::time::Duration;
use tessera_core::{Errno, FsResult};
use tessera_proto::{Release, Reserve, Status, Writing};

/// How long a reservation that meets a full burst buffer waits for removed files still
/// being released (the release runs in the background, after the unlink answered).
const WAIT_FOR_RELEASES: Duration = Duration::from_secs(5);

impl ServeClient<Reserve> for Node {
    async fn serve_client(&self, client: u64, r: Reserve) -> FsResult<u64> {
        let deadline = crate::clock::now() + WAIT_FOR_RELEASES;
        loop {
            // Measures the device: off the async workers.
            match crate::blocking::blocking(|| self.logs.reserve(client, r.bytes)) {
                Err(e)
                    if e.errno == Errno::NoSpace
                        && crate::clock::now() < deadline
                        && self.releasing_anywhere().await =>
                {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                other => return other,
            }
        }
    }
}

impl Node {
    /// Whether a node of the instance still lists removed files to release (their space may
    /// come back on this one). Asked only when a reservation found no space.
    async fn releasing_anywhere(&self) -> bool {
        self.call_all(self.every_node(|| Status))
            .await
            .is_ok_and(|all| all.iter().any(|s| s.files_to_drop > 0))
    }
}

impl ServeClient<Release> for Node {
    async fn serve_client(&self, client: u64, r: Release) -> FsResult<()> {
        self.logs.release(client, r.bytes)
    }
}

impl ServeClient<Writing> for Node {
    async fn serve_client(&self, client: u64, r: Writing) -> FsResult<()> {
        self.check_ino(r.ino)?;
        self.clients.note_writing(client, r.ino);
        Ok(())
    }
}
