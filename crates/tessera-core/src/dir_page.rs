//! Directory listings in pages. A directory's entries are spread over every shard (by a hash
//! of their paths), so one page of a listing is a page from each shard, merged.
//!
//! Each shard answers the names after the cursor, in order, up to a limit, and the *bound* of
//! its answer: its last name if it holds more, none if it told everything. The merged page
//! holds every name up to the smallest bound, and that bound is the next cursor: a name past
//! it that another shard sent is sent again next time, so no name is lost or listed twice
//! whatever each shard holds. Memory per page is at most a limit per shard.

use crate::meta::{Attr, DirEntry};
use crate::{Errno, FsError, FsResult};
use serde::{Deserialize, Serialize};

/// Largest page a listing request may ask for (entries per shard).
pub const MAX_PAGE: u32 = 16_384;

/// The page a client asks for by default.
pub const DEFAULT_PAGE: u32 = 4_096;

/// One shard's part of a page.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShardPage<T> {
    /// In name order, all after the cursor.
    pub entries: Vec<T>,
    /// The last name sent when the shard holds more after it; `None`: it sent all.
    pub bound: Option<String>,
}

/// An entry with its attributes where they were at hand (readdir-plus; `None`: stat it).
pub type EntryPlus = (DirEntry, Option<Attr>);

/// A page of a listing as a client receives it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DirPage {
    /// In name order.
    pub entries: Vec<EntryPlus>,
    /// The cursor of the next page; `None`: the listing is complete.
    pub next: Option<String>,
    /// Leases on the entries' attributes, for the client's attribute cache.
    pub leases: Option<PageLeases>,
}

/// Leases on the attributes of a page's entries: one per entry, in the page's order
/// (`None`: not leased), each a slot of the daemon's invalidation board and the epoch it
/// held, all ending at `expires_ns` (`CLOCK_MONOTONIC`) unless the board's generation moves.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageLeases {
    pub generation: u64,
    pub expires_ns: u64,
    pub slots: Vec<Option<(u32, u64)>>,
}

/// Something listed under a name.
pub trait Named {
    fn name(&self) -> &str;
}

impl Named for DirEntry {
    fn name(&self) -> &str {
        &self.name
    }
}

impl<A> Named for (DirEntry, A) {
    fn name(&self) -> &str {
        &self.0.name
    }
}

/// Checks a listing request's cursor and limit (they come from the wire).
pub fn check_request(after: Option<&str>, limit: u32) -> FsResult<u32> {
    if let Some(a) = after
        && (a.is_empty() || a.contains('/') || a.contains('\0'))
    {
        return Err(FsError::new(
            Errno::Inval,
            format!("a listing's cursor {a:?} is not a name in the directory"),
        ));
    }
    if limit == 0 {
        return Err(FsError::new(
            Errno::Inval,
            "a listing page of 0 entries: ask for at least 1",
        ));
    }
    Ok(limit.min(MAX_PAGE))
}

/// The names of `sorted` (in name order, each once) after `after`, at most `limit` of them,
/// with the page's bound.
pub fn page_of<T: Named>(
    sorted: impl IntoIterator<Item = T>,
    after: Option<&str>,
    limit: u32,
) -> ShardPage<T> {
    let mut entries = Vec::new();
    let mut more = false;
    for e in sorted {
        if after.is_some_and(|a| e.name() <= a) {
            continue;
        }
        if entries.len() == limit as usize {
            more = true;
            break;
        }
        entries.push(e);
    }
    let bound = more
        .then(|| entries.last().map(|e: &T| e.name().to_string()))
        .flatten();
    ShardPage { entries, bound }
}

/// Merges the shards' pages into one, in name order: the names up to the smallest bound, and
/// that bound as the next cursor (`None`: the listing is complete).
pub fn merge<T: Named>(pages: Vec<ShardPage<T>>) -> (Vec<T>, Option<String>) {
    let next = pages.iter().filter_map(|p| p.bound.clone()).min();
    let mut all: Vec<T> = pages
        .into_iter()
        .flat_map(|p| p.entries)
        .filter(|e| next.as_deref().is_none_or(|n| e.name() <= n))
        .collect();
    all.sort_by(|a, b| a.name().cmp(b.name()));
    all.dedup_by(|a, b| a.name() == b.name());
    (all, next)
}

/// Whether `name` belongs to the page that ends at `next` after `after`.
pub fn in_page(name: &str, after: Option<&str>, next: Option<&str>) -> bool {
    after.is_none_or(|a| name > a) && next.is_none_or(|n| name <= n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::FileKind;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn entry(name: &str) -> DirEntry {
        DirEntry {
            name: name.to_string(),
            ino: name.len() as u64,
            kind: FileKind::File,
        }
    }

    /// Lists `shards` (each a set of names) page by page with `limit`, as a daemon does.
    fn list_all(shards: &[BTreeSet<String>], limit: u32) -> (Vec<String>, usize) {
        let shards: Vec<Vec<DirEntry>> = shards
            .iter()
            .map(|s| s.iter().map(|n| entry(n)).collect())
            .collect();
        let mut out = Vec::new();
        let mut after: Option<String> = None;
        let mut pages = 0;
        loop {
            pages += 1;
            let parts = shards
                .iter()
                .map(|s| page_of(s.iter().cloned(), after.as_deref(), limit))
                .collect();
            let (page, next) = merge(parts);
            out.extend(page.into_iter().map(|e| e.name));
            match next {
                Some(n) => after = Some(n),
                None => return (out, pages),
            }
            assert!(pages < 100_000, "the listing does not end");
        }
    }

    #[test]
    fn a_name_past_another_shards_bound_comes_next_time() {
        let a: BTreeSet<String> = ["a", "b", "c", "d"].map(String::from).into();
        let b: BTreeSet<String> = ["bb", "z"].map(String::from).into();
        let parts = vec![page_of(entries(&a), None, 2), page_of(entries(&b), None, 2)];
        let (page, next) = merge(parts);
        assert_eq!(names(&page), ["a", "b"]);
        assert_eq!(next.as_deref(), Some("b"));
        let (all, _) = list_all(&[a, b], 2);
        assert_eq!(all, ["a", "b", "bb", "c", "d", "z"]);
    }

    fn entries(s: &BTreeSet<String>) -> Vec<DirEntry> {
        s.iter().map(|n| entry(n)).collect()
    }

    fn names(v: &[DirEntry]) -> Vec<&str> {
        v.iter().map(|e| e.name.as_str()).collect()
    }

    #[test]
    fn hostile_cursors_and_limits_are_refused() {
        assert_eq!(
            check_request(Some("a/b"), 5).unwrap_err().errno,
            Errno::Inval
        );
        assert_eq!(check_request(Some(""), 5).unwrap_err().errno, Errno::Inval);
        assert_eq!(check_request(None, 0).unwrap_err().errno, Errno::Inval);
        assert_eq!(check_request(None, u32::MAX).unwrap(), MAX_PAGE);
        assert_eq!(check_request(Some("x"), 7).unwrap(), 7);
    }

    proptest! {
        /// Paged, the listing is exactly the sorted union of the shards, and each page holds
        /// at most a limit per shard.
        #[test]
        fn pages_list_every_name_once(
            shards in prop::collection::vec(
                prop::collection::btree_set("[a-e]{1,4}", 0..40), 1..5),
            limit in 1u32..12,
        ) {
            // A name lives on one shard only.
            let mut seen = BTreeSet::new();
            let shards: Vec<BTreeSet<String>> = shards
                .into_iter()
                .map(|s| s.into_iter().filter(|n| seen.insert(n.clone())).collect())
                .collect();
            let (all, pages) = list_all(&shards, limit);
            let want: Vec<String> = seen.into_iter().collect();
            prop_assert_eq!(&all, &want);
            // Every page but the last moves the cursor by at least one name.
            prop_assert!(pages <= want.len() + 1);
        }
    }
}
