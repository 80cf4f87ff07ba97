//! Stat-ahead: a process that stats many entries of a directory it did not list gets their
//! attributes a listing page at a time instead of one request each.
//!
//! The attribute cache answers a stat without a message only for what this process saw
//! before: a listing, or an earlier stat. A sweep over files another process made (`du`, a
//! build's dependency checks, mdtest's and IO500's stat phases, which stat each file once from
//! a rank that never saw it) misses on every file, and every miss costs a round trip to the
//! entry's shard (on 2 cores, ~50 µs of CPU over the rank and the daemons). As Lustre's
//! statahead does for `ls -l`, once a process has missed [`START_AFTER`] times in one
//! directory, its next misses there also fetch the directory's listing with attributes
//! (readdir-plus, which warms the cache under the listing's leases), page by page. Listings
//! are in name order and sweeps tend to be too, so the listing starts after the smallest
//! name missed so far rather than at the first name: a process that stats the files of one
//! rank in a shared directory of many (`f.<rank>.<i>`) lists those first.
//!
//! The listing is paid for by the misses: each miss earns [`ENTRIES_PER_MISS`] listed entries
//! (about 1.6 µs of CPU each), so a process that stats a few files of a huge directory lists
//! little of it, and one that stats most of a directory lists it all once. A listing that
//! reaches the end starts over after further misses (the leases of its pages end, or entries
//! came after it). Nothing here decides what a stat answers: a cached copy is used only while
//! its lease holds (`attr_cache`).

use std::collections::HashMap;

/// Misses in one directory before its listing starts.
pub const START_AFTER: u64 = 32;
/// Entries the listing may cover per miss in the directory.
pub const ENTRIES_PER_MISS: u64 = 64;
/// Directories followed at most; past it the table starts over.
const MAX_DIRS: usize = 1024;

/// One directory's misses and how far its listing went.
#[derive(Debug, Default)]
struct DirAhead {
    misses: u64,
    listed: u64,
    /// Before the listing starts, the smallest name missed; then the cursor of the next page.
    after: Option<String>,
    started: bool,
    /// A page is being fetched (by another thread of the process).
    fetching: bool,
}

/// Per-directory bookkeeping of stat-ahead.
#[derive(Debug, Default)]
pub struct StatAhead {
    dirs: HashMap<String, DirAhead>,
}

/// A page to fetch: of `dir`, after `after`.
#[derive(Debug, PartialEq, Eq)]
pub struct PageDue {
    pub dir: String,
    pub after: Option<String>,
}

impl StatAhead {
    /// Notes a stat of entry `name` of `dir` that the cache could not answer; the page to
    /// fetch now, if one is due.
    pub fn miss(&mut self, dir: &str, name: &str) -> Option<PageDue> {
        if !self.dirs.contains_key(dir) && self.dirs.len() >= MAX_DIRS {
            self.dirs.clear();
        }
        let d = self.dirs.entry(dir.to_string()).or_default();
        d.misses += 1;
        if !d.started && d.after.as_deref().is_none_or(|a| name < a) {
            d.after = Some(name.to_string());
        }
        let due = d.misses >= START_AFTER
            && !d.fetching
            && d.listed < d.misses.saturating_mul(ENTRIES_PER_MISS);
        if !due {
            return None;
        }
        d.fetching = true;
        d.started = true;
        Some(PageDue {
            dir: dir.to_string(),
            after: d.after.clone(),
        })
    }

    /// Notes the page fetched for `dir`: `entries` listed, `next` its cursor (`None`: the
    /// listing ended, and starts over after [`START_AFTER`] more misses). A page that could
    /// not be fetched (`None`) ends the directory's listing the same way.
    pub fn fetched(&mut self, dir: &str, page: Option<(u64, Option<String>)>) {
        let Some(d) = self.dirs.get_mut(dir) else {
            return;
        };
        d.fetching = false;
        match page {
            Some((entries, Some(next))) => {
                d.listed += entries;
                d.after = Some(next);
            }
            _ => *d = DirAhead::default(),
        }
    }

    /// Forgets every directory (the cache was emptied).
    pub fn clear(&mut self) {
        self.dirs.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_few_misses_fetch_nothing_then_the_listing_starts_at_the_smallest_name_missed() {
        let mut s = StatAhead::default();
        for i in 1..START_AFTER {
            assert_eq!(s.miss("/d", &format!("f.2.{i}")), None);
        }
        assert_eq!(
            s.miss("/d", "f.2.0"),
            Some(PageDue {
                dir: "/d".into(),
                after: Some("f.2.0".into())
            })
        );
    }

    #[test]
    fn pages_follow_their_cursor_and_a_finished_listing_starts_over() {
        let mut s = StatAhead::default();
        for _ in 1..START_AFTER {
            s.miss("/d", "m");
        }
        assert!(s.miss("/d", "m").is_some());
        // Fetching: a second miss meanwhile fetches nothing more, and a smaller name no
        // longer moves the start.
        assert_eq!(s.miss("/d", "a"), None);
        s.fetched("/d", Some((10, Some("k".into()))));
        assert_eq!(s.miss("/d", "a").unwrap().after.as_deref(), Some("k"));
        s.fetched("/d", Some((5, None)));
        for _ in 1..START_AFTER {
            assert_eq!(s.miss("/d", "b"), None);
        }
        assert_eq!(s.miss("/d", "c").unwrap().after.as_deref(), Some("b"));
    }

    proptest! {
        /// Against a model: what is listed never runs ahead of the misses' budget by more
        /// than one page, and pages are asked for one at a time per directory.
        #[test]
        fn the_listing_stays_within_the_budget(
            steps in prop::collection::vec((0usize..3, 1u64..5000, any::<bool>()), 1..400)
        ) {
            let dirs = ["/a", "/b", "/c"];
            let mut s = StatAhead::default();
            let mut misses = [0u64; 3];
            let mut listed = [0u64; 3];
            // Before a listing starts: the smallest name missed.
            let mut smallest: [Option<String>; 3] = [None, None, None];
            let mut fetching: [Option<PageDue>; 3] = [None, None, None];
            for (d, page, ends) in steps {
                let dir = dirs[d];
                if let Some(due) = fetching[d].take() {
                    prop_assert_eq!(&due.dir, dir);
                    let next = (!ends).then(|| format!("{}", listed[d] + page));
                    s.fetched(dir, Some((page, next.clone())));
                    if next.is_some() {
                        listed[d] += page;
                    } else {
                        misses[d] = 0;
                        listed[d] = 0;
                        smallest[d] = None;
                    }
                    continue;
                }
                misses[d] += 1;
                let name = format!("n{page}");
                let started = misses[d] > START_AFTER || listed[d] > 0;
                if !started && smallest[d].as_ref().is_none_or(|m| name < *m) {
                    smallest[d] = Some(name.clone());
                }
                let got = s.miss(dir, &name);
                let due = misses[d] >= START_AFTER && listed[d] < misses[d] * ENTRIES_PER_MISS;
                prop_assert_eq!(got.is_some(), due);
                if let Some(p) = got {
                    let want = if listed[d] > 0 {
                        Some(format!("{}", listed[d]))
                    } else {
                        smallest[d].clone()
                    };
                    prop_assert_eq!(&p.after, &want);
                    fetching[d] = Some(p);
                }
            }
        }
    }
}
