//! The check of names against link counts: the files this node holds that have more names
//! than their count get their count raised to their names, so that removing one name no
//! longer destroys the file another name leads to. A crash in the middle of a rename of a
//! build from before intents (`services::names`) could leave such a pair. It runs once at
//! the start of a daemon whose state predates them, and whenever `tessera check` asks.

use crate::Node;
use crate::rpc::ServePeer;
use crate::services::namespace_shard::now_ns;
use crate::store::{DbOp, MetaKey};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tessera_core::placement::ino_shard;
use tessera_core::{FsResult, path};
use tessera_proto::{CheckNames, NamesChecked, NamesOfNode, NamesPage};

/// Entries a shard looks at for one page.
const PAGE: usize = 4096;

impl ServePeer<NamesOfNode> for Node {
    async fn serve_peer(&self, r: NamesOfNode) -> FsResult<NamesPage> {
        self.shards.namespace(|ns| {
            let (found, next) =
                ns.entries_after(r.after.as_ref(), PAGE, |d| ino_shard(d.ino) == r.node);
            Ok(NamesPage {
                names: found
                    .into_iter()
                    .map(|((parent, name), d)| (path::join(&parent, &name), d))
                    .collect(),
                next,
            })
        })
    }
}

impl ServePeer<CheckNames> for Node {
    async fn serve_peer(&self, _: CheckNames) -> FsResult<NamesChecked> {
        self.check_names().await
    }
}

impl Node {
    /// Counts the names of this node's files on every shard and raises the counts found
    /// below them. No operation on names begins meanwhile; files with one in flight are left
    /// out (their counts already cover their names).
    pub async fn check_names(&self) -> FsResult<NamesChecked> {
        self.names
            .quiet(async {
        // Files with an operation in flight at any time during the count are left out: one
        // that ended meanwhile may have been counted with a name before and one after.
        let mut busy = self.names.inodes_in_flight();
        let mut names: BTreeMap<u64, Vec<String>> = BTreeMap::new();
        for shard in 0..self.cfg.nodes {
            let mut after = None;
            loop {
                let ask = NamesOfNode {
                    node: self.id,
                    after: after.take(),
                };
                let page = self.call(shard, ask).await?;
                for (p, d) in page.names {
                    names.entry(d.ino).or_default().push(p);
                }
                match page.next {
                    Some(k) => after = Some(k),
                    None => break,
                }
            }
        }
        busy.extend(self.names.inodes_in_flight());
        let (report, durable) = self.shards.namespace(|ns| {
            let mut report = NamesChecked {
                files: names.len() as u64,
                raised: Vec::new(),
            };
            let mut ops = Vec::new();
            for (ino, paths) in names {
                let Some(attr) = ns.attr(ino) else { continue };
                if busy.contains(&ino) || paths.len() as u64 <= u64::from(attr.nlink) {
                    continue;
                }
                for _ in attr.nlink as usize..paths.len() {
                    let (_, changes) = ns.add_name(ino, now_ns())?;
                    ops.extend(changes.into_iter().map(DbOp::from));
                }
                tracing::warn!(
                    "inode {ino:#x} had {} names and a count of {}: raised to {} (a crash in an earlier version's rename left them; remove the name you did not mean to keep): {}",
                    paths.len(),
                    attr.nlink,
                    paths.len(),
                    paths
                        .iter()
                        .map(|p| self.user_path(p))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                report.raised.push((ino, attr.nlink, paths));
            }
            Ok((report, self.store.submit(ops)))
            })?;
        durable.durable().await?;
        Ok(report)
            })
            .await
    }

    /// At the start of a daemon whose state predates intents: the check, once every shard
    /// answers, then never again.
    pub async fn check_names_once(self: Arc<Self>) {
        loop {
            if self.stopping() {
                return;
            }
            match self.check_names().await {
                Ok(report) => {
                    let done = self
                        .store
                        .submit(vec![DbOp::SetMeta(MetaKey::NamesUnchecked, 0)]);
                    if let Err(e) = done.durable().await {
                        tracing::warn!("recording the names check: {e}");
                    }
                    tracing::info!(
                        files = report.files,
                        raised = report.raised.len(),
                        "names checked against link counts"
                    );
                    return;
                }
                Err(e) => {
                    tracing::info!("the names check waits for every daemon: {e}");
                    tokio::time::sleep(Duration::from_secs(2)).await;
                }
            }
        }
    }
}
