//! The catalogue service, client side (D2T's metadata service): a process's catalogue
//! calls go to the shard of the variable they name, in the process's transaction if its
//! connection is in one; a listing asks every shard. The shard side is
//! [`super::catalogue_shard`].

use crate::Node;
use crate::rpc::ServeClient;
use std::collections::BTreeMap;
use tessera_core::FsResult;
use tessera_core::placement::variable_shard;
use tessera_proto::{
    CatChange, CatList, CatLookup, CatShardChange, CatShardList, CatShardLookup, CatShardWait,
    CatWait, VersionView,
};

impl ServeClient<CatChange> for Node {
    async fn serve_client(&self, client: u64, r: CatChange) -> FsResult<()> {
        let txn = self.txns.member(client);
        let shard = variable_shard(r.op.name(), self.cfg.nodes);
        self.call(shard, CatShardChange { txn, op: r.op }).await
    }
}

impl ServeClient<CatLookup> for Node {
    async fn serve_client(&self, client: u64, r: CatLookup) -> FsResult<VersionView> {
        let shard = variable_shard(&r.name, self.cfg.nodes);
        let ask = CatShardLookup {
            name: r.name,
            version: r.version,
            view: self.view_of(client),
        };
        self.call(shard, ask).await
    }
}

impl ServeClient<CatList> for Node {
    async fn serve_client(&self, client: u64, _: CatList) -> FsResult<Vec<(String, u64)>> {
        let view = self.view_of(client);
        let asks = (0..self.cfg.nodes).map(|n| self.call(n, CatShardList { view: view.clone() }));
        let mut all = BTreeMap::new();
        for part in futures::future::join_all(asks).await {
            all.extend(part?);
        }
        Ok(all.into_iter().collect())
    }
}

impl ServeClient<CatWait> for Node {
    async fn serve_client(&self, _: u64, r: CatWait) -> FsResult<u64> {
        let shard = variable_shard(&r.name, self.cfg.nodes);
        let ask = CatShardWait {
            name: r.name,
            version: r.version,
            timeout_ms: r.timeout_ms,
        };
        self.call(shard, ask).await
    }
}
