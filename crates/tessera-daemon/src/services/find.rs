//! `tessera find` on this node's shard: the entries it holds beneath a root, tested against
//! the predicates an entry answers (name, type), a page at a time; and the attributes of the
//! inodes it holds, for the predicates on size and time (`tessera_core::find`). Every node
//! answers for its own shard, so a find runs on all of them at once.

use crate::Node;
use crate::rpc::ServePeer;
use tessera_core::find::{Matcher, beneath};
use tessera_core::{FsResult, path};
use tessera_proto::{Attr, FileKind, FindEntries, FoundPage, InodeAttrs};

/// Most entries one page looks at.
const MOST_PER_PAGE: u32 = 16_384;

impl ServePeer<FindEntries> for Node {
    async fn serve_peer(&self, r: FindEntries) -> FsResult<FoundPage> {
        let root = path::normalize(&r.root)?;
        let matcher = Matcher::new(r.filter)?;
        let limit = r.limit.clamp(1, MOST_PER_PAGE) as usize;
        Ok(self.shards.namespace(|ns| {
            let (mut looked_at, mut files_looked_at) = (0u64, 0u64);
            // Keys beneath the root (parent == root, or inside it) all start with the root's
            // text, and so sort together from (root, ""): the first key that does not start with
            // it ends the walk. Between them lie siblings such as "root-x", which are skipped.
            let start = r.after.or_else(|| Some((root.clone(), String::new())));
            let (entries, next) = ns.entries_after(start.as_ref(), limit, |_| true);
            let mut found = Vec::new();
            let mut past_root = false;
            for ((parent, name), d) in entries {
                if !parent.starts_with(root.as_str()) {
                    past_root = true;
                    break;
                }
                if !beneath(&root, &parent) {
                    continue;
                }
                looked_at += 1;
                if d.kind != FileKind::Dir {
                    files_looked_at += 1;
                }
                if matcher.entry_matches(&name, d.kind) {
                    found.push((path::join(&parent, &name), d));
                }
            }
            FoundPage {
                found,
                looked_at,
                files_looked_at,
                next: if past_root { None } else { next },
            }
        }))
    }
}

impl ServePeer<InodeAttrs> for Node {
    async fn serve_peer(&self, r: InodeAttrs) -> FsResult<Vec<Option<Attr>>> {
        Ok(self
            .shards
            .namespace(|ns| r.inos.iter().map(|&ino| ns.attr(ino)).collect()))
    }
}
