//! The views a process keeps open of other processes' logs on its node: at most a number of
//! them (each holds descriptors, and the process's own files need them too), the least
//! recently used closed first and opened again when needed; each refreshed before use when a
//! query was answered since it was last read (the answer may point into bytes the view has
//! not parsed yet).

use lru::LruCache;
use std::num::NonZeroUsize;
use tessera_core::FsResult;

/// A view that can be brought up to date with what its writer appended since.
pub trait Refresh {
    fn refresh(&mut self) -> FsResult<()>;
}

impl Refresh for tessera_logstore::LogView {
    fn refresh(&mut self) -> FsResult<()> {
        tessera_logstore::LogView::refresh(self)
    }
}

/// Open views by log id, each with the query generation it was last brought up to.
pub struct ViewCache<V> {
    views: LruCache<u64, (V, u64)>,
}

impl<V: Refresh> ViewCache<V> {
    /// A cache keeping at most `capacity` views open (at least one).
    pub fn new(capacity: usize) -> Self {
        ViewCache {
            views: LruCache::new(NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN)),
        }
    }

    /// The view of `log`, current as of query generation `generation`: kept, or opened with
    /// `open` (closing the least recently used one beyond the capacity). A view that fails to
    /// open or refresh is not kept.
    pub fn get(
        &mut self,
        log: u64,
        generation: u64,
        open: impl FnOnce() -> FsResult<V>,
    ) -> FsResult<&V> {
        if !self.views.contains(&log) {
            let view = open()?;
            self.views.push(log, (view, generation));
        }
        let (view, seen) = self.views.get_mut(&log).expect("present or just put");
        if *seen < generation {
            if let Err(e) = view.refresh() {
                self.views.pop(&log);
                return Err(e);
            }
            *seen = generation;
        }
        let (view, _) = self.views.peek(&log).expect("kept");
        Ok(view)
    }

    /// Closes every view (after a reconnect: the logs may have gone meanwhile).
    pub fn clear(&mut self) {
        self.views.clear();
    }

    /// How many views are open.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.views.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tessera_core::{Errno, FsError};

    /// A view that counts its refreshes, or fails them.
    struct Fake {
        log: u64,
        refreshes: u32,
        fails: bool,
    }

    impl Refresh for Fake {
        fn refresh(&mut self) -> FsResult<()> {
            if self.fails {
                return Err(FsError::new(Errno::Io, "damaged"));
            }
            self.refreshes += 1;
            Ok(())
        }
    }

    fn fake(log: u64) -> FsResult<Fake> {
        Ok(Fake {
            log,
            refreshes: 0,
            fails: false,
        })
    }

    #[test]
    fn the_least_recently_used_view_is_closed_first() {
        let mut c = ViewCache::new(2);
        let mut opened = Vec::new();
        let mut get = |c: &mut ViewCache<Fake>, log: u64| {
            c.get(log, 0, || {
                opened.push(log);
                fake(log)
            })
            .unwrap()
            .log
        };
        assert_eq!(get(&mut c, 1), 1);
        assert_eq!(get(&mut c, 2), 2);
        assert_eq!(get(&mut c, 1), 1, "a hit: 1 is now the most recent");
        assert_eq!(get(&mut c, 3), 3, "evicts 2, the least recently used");
        assert_eq!(get(&mut c, 1), 1);
        assert_eq!(get(&mut c, 2), 2, "opened again");
        assert_eq!(opened, [1, 2, 3, 2]);
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn a_view_is_refreshed_once_per_newer_query_and_dropped_when_that_fails() {
        let mut c = ViewCache::new(4);
        assert_eq!(
            c.get(7, 1, || fake(7)).unwrap().refreshes,
            0,
            "fresh at open"
        );
        assert_eq!(c.get(7, 1, || fake(7)).unwrap().refreshes, 0);
        assert_eq!(c.get(7, 3, || fake(7)).unwrap().refreshes, 1);
        assert_eq!(c.get(7, 3, || fake(7)).unwrap().refreshes, 1);
        let failing = || {
            Ok(Fake {
                log: 8,
                refreshes: 0,
                fails: true,
            })
        };
        c.get(8, 1, failing).unwrap();
        assert!(c.get(8, 2, failing).is_err());
        assert_eq!(c.len(), 1, "the view that failed to refresh was closed");
        let e = c.get(9, 1, || Err(FsError::new(Errno::NoEnt, "gone")));
        assert!(e.is_err());
        assert_eq!(c.len(), 1, "a view that failed to open is not kept");
    }

    proptest! {
        /// Against a model (a list, most recent last): the same views stay open, and a log
        /// is opened exactly when the model does not hold it.
        #[test]
        fn keeps_what_a_model_lru_keeps(
            capacity in 1usize..5,
            logs in proptest::collection::vec(0u64..8, 0..64),
        ) {
            let mut c = ViewCache::new(capacity);
            let mut model: Vec<u64> = Vec::new();
            for log in logs {
                let mut opened = false;
                c.get(log, 0, || {
                    opened = true;
                    fake(log)
                })
                .unwrap();
                let held = model.iter().position(|l| *l == log);
                prop_assert_eq!(opened, held.is_none());
                match held {
                    Some(i) => {
                        model.remove(i);
                    }
                    None if model.len() == capacity => {
                        model.remove(0);
                    }
                    None => {}
                }
                model.push(log);
                prop_assert_eq!(c.len(), model.len());
            }
        }
    }
}
