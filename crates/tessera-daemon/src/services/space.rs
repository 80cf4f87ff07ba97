//! The space service: a client's reservations of burst-buffer space on this node, and the
//! files it keeps logs of here (where to look for what it leaves unpublished).

use crate::Node;
use crate::rpc::ServeClient;
use tessera_core::FsResult;
use tessera_proto::{Release, Reserve, Writing};

impl ServeClient<Reserve> for Node {
    async fn serve_client(&self, client: u64, r: Reserve) -> FsResult<u64> {
        // Measures the device: off the async workers.
        tokio::task::block_in_place(|| self.logs.reserve(client, r.bytes))
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
