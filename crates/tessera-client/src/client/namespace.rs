//! The namespace calls of a client: stat (with the attribute cache and stat-ahead), links,
//! directories, rename, truncate, flush, attributes, and the daemon's status.

use super::*;
use crate::stat_ahead::PageDue;
use tessera_core::dir_page::{self, DirPage, EntryPlus};
use tessera_core::{Errno, FsError, FsResult, path};
use tessera_proto::{
    Attr, AttrChange, DirEntry, Flush, Link, Mkdir, NodeStatus, ReadLink, Readdir, Rename, Rmdir,
    SetAttr, Shutdown, Stat, StatLeased, Status, Symlink, Truncate, Unlink,
};

impl Client {
    pub fn stat(&self, path: &str) -> FsResult<Attr> {
        self.through_links_on_miss(path, |p| self.stat_here(p))
    }

    /// [`Client::stat`] without following links among the directories of `path`.
    pub(crate) fn stat_here(&self, path: &str) -> FsResult<Attr> {
        let mut g = self.lock();
        let p = g.resolve(path)?;
        // A member of a transaction sees it through its view: never from the cache.
        let cached = g.attrs.enabled() && g.membership.outside();
        let mut ahead = None;
        let mut a = if !cached {
            g.call(Stat { path: p })?
        } else if let Some(a) = g.attrs.get(&p) {
            g.stats.attr_hits += 1;
            a
        } else {
            g.stats.attr_misses += 1;
            let got = g.call(StatLeased { path: p.clone() })?;
            if let Some(lease) = got.lease {
                g.attrs.put(p.clone(), got.attr.clone(), lease);
                if let Some((dir, name)) = path::split(&p) {
                    ahead = g.stat_ahead.miss(dir, name);
                }
            }
            got.attr
        };
        g.count_own_writes(&mut a);
        drop(g);
        if let Some(due) = ahead {
            self.stat_ahead(due);
        }
        Ok(a)
    }

    /// Fetches a page of a directory's listing for stat-ahead (`stat_ahead`): it warms the
    /// attribute cache. A page that cannot be fetched only ends that listing.
    pub(super) fn stat_ahead(&self, due: PageDue) {
        let user = self.lock().user_path(&due.dir);
        let page = self
            .readdir_page(&user, due.after, STAT_AHEAD_PAGE)
            .ok()
            .map(|p| (p.entries.len() as u64, p.next));
        self.lock().stat_ahead.fetched(&due.dir, page);
    }

    /// Like [`Client::stat`], but a symbolic link (found in the PFS directory) is followed to
    /// its target, which must lie beneath the PFS root.
    pub fn stat_follow(&self, path: &str) -> FsResult<Attr> {
        self.follow(path).map(|(_, a)| a)
    }

    /// The path (as the user writes it) that `path` leads to through symbolic links found in
    /// the PFS directory, each to a target beneath the PFS root, and its attributes.
    pub fn follow(&self, path: &str) -> FsResult<(String, Attr)> {
        let (mut p, pfs) = {
            let g = self.lock();
            (g.resolve(path)?, g.cfg.pfs_dir.display().to_string())
        };
        for _ in 0..=path::MAX_LINK_HOPS {
            // Each lock is released before the call that takes it again.
            let user = self.lock().user_path(&p);
            let a = self.stat(&user)?;
            if a.kind != tessera_proto::FileKind::Symlink {
                return Ok((user, a));
            }
            let target = self.readlink(&user)?;
            p = path::link_target(&p, &target, &pfs)?;
        }
        Err(FsError::new(
            Errno::Loop,
            format!(
                "{path}: more than {} symbolic links in a row",
                path::MAX_LINK_HOPS
            ),
        ))
    }

    /// Creates the symbolic link `path` to `target` (kept as given).
    pub fn symlink(&self, target: &str, path: &str) -> FsResult<()> {
        self.through_links_on_miss(path, |path| {
            let mut g = self.lock();
            let p = g.resolve(path)?;
            g.call(Symlink {
                path: p,
                target: target.to_string(),
            })
        })
    }

    /// Gives the file `from` the further name `to` (a hard link): both name one file.
    pub fn link(&self, from: &str, to: &str) -> FsResult<()> {
        self.through_links_on_miss2(from, to, |from, to| {
            let mut g = self.lock();
            let from = g.resolve(from)?;
            let to = g.resolve(to)?;
            g.call(Link { from, to })
        })
    }

    /// The target of a symbolic link found in the PFS directory.
    pub fn readlink(&self, path: &str) -> FsResult<String> {
        self.through_links_on_miss(path, |path| {
            let mut g = self.lock();
            let p = g.resolve(path)?;
            g.call(ReadLink { path: p })
        })
    }

    pub fn mkdir(&self, path: &str, mode: u32) -> FsResult<()> {
        self.through_links_on_miss(path, |path| {
            let mut g = self.lock();
            let p = g.resolve(path)?;
            g.call(Mkdir { path: p, mode }).map(drop)
        })
    }

    pub fn rmdir(&self, path: &str) -> FsResult<()> {
        self.through_links_on_miss(path, |path| {
            let mut g = self.lock();
            let p = g.resolve(path)?;
            g.call(Rmdir { path: p })
        })
    }

    pub fn unlink(&self, path: &str) -> FsResult<()> {
        self.through_links_on_miss(path, |path| {
            let mut g = self.lock();
            let p = g.resolve(path)?;
            g.call(Unlink { path: p })
        })
    }

    /// The entries of a directory, in name order (asked for in pages).
    pub fn readdir(&self, path: &str) -> FsResult<Vec<DirEntry>> {
        Ok(self
            .readdir_plus(path)?
            .into_iter()
            .map(|(e, _)| e)
            .collect())
    }

    /// The entries of a directory with their attributes where the daemons had them at hand
    /// (readdir-plus; `None`: stat that entry), in name order, asked for in pages of
    /// [`dir_page::DEFAULT_PAGE`] entries per shard.
    pub fn readdir_plus(&self, path: &str) -> FsResult<Vec<EntryPlus>> {
        let mut all = Vec::new();
        let mut after = None;
        loop {
            let page = self.readdir_page(path, after, dir_page::DEFAULT_PAGE)?;
            all.extend(page.entries);
            match page.next {
                Some(next) => after = Some(next),
                None => return Ok(all),
            }
        }
    }

    /// One page of a directory's listing: the entries after `after` (`None`: from the first),
    /// at most `limit` from each shard, and the cursor of the next page.
    pub fn readdir_page(&self, path: &str, after: Option<String>, limit: u32) -> FsResult<DirPage> {
        self.through_links_on_miss(path, |path| {
            let mut g = self.lock();
            let p = g.resolve(path)?;
            let mut page = g.call(Readdir {
                path: p.clone(),
                after: after.clone(),
                limit,
            })?;
            // The attributes warm the cache: `ls -l` and find then stat without requests.
            if let Some(leases) = &page.leases
                && g.membership.outside()
            {
                for ((e, attr), slot) in page.entries.iter().zip(&leases.slots) {
                    if let (Some(a), Some((slot, epoch))) = (attr, slot) {
                        let lease = tessera_proto::AttrLease {
                            slot: *slot,
                            epoch: *epoch,
                            generation: leases.generation,
                            expires_ns: leases.expires_ns,
                        };
                        g.attrs.put(path::join(&p, &e.name), a.clone(), lease);
                    }
                }
            }
            // Kept as the shards said; shown with this process's own writes, as a stat is.
            for (_, attr) in page.entries.iter_mut() {
                if let Some(a) = attr {
                    g.count_own_writes(a);
                }
            }
            Ok(page)
        })
    }

    pub fn rename(&self, from: &str, to: &str) -> FsResult<()> {
        self.through_links_on_miss2(from, to, |from, to| {
            let mut g = self.lock();
            let (from, to) = (g.resolve(from)?, g.resolve(to)?);
            g.call(Rename { from, to })
        })
    }

    /// Sets the size of a file; bytes beyond it are gone for every process.
    pub fn truncate(&self, path: &str, size: u64) -> FsResult<()> {
        tessera_core::run::end_within_limit(size, 0, "truncate")?;
        self.through_links_on_miss(path, |path| {
            let mut g = self.lock();
            let p = g.resolve(path)?;
            let a = g.call(Truncate { path: p, size })?;
            g.truncate_local(a.ino, size)
        })
    }

    /// Writes a file's attached bytes to the PFS (atomically); returns bytes written.
    pub fn flush_path(&self, path: &str) -> FsResult<u64> {
        let mut g = self.lock();
        let p = g.resolve(path)?;
        let flushed = g.call(Flush {
            path: p,
            range: None,
        })?;
        Ok(flushed.bytes)
    }

    /// Changes the permission bits and/or the times of a file or directory (chmod, utimens).
    pub fn set_attr(&self, path: &str, change: AttrChange) -> FsResult<Attr> {
        self.through_links_on_miss(path, |path| {
            let mut g = self.lock();
            let p = g.resolve(path)?;
            g.call(SetAttr { path: p, change })
        })
    }

    /// The status of this process's daemon.
    pub fn status(&self) -> FsResult<NodeStatus> {
        self.lock().call(Status)
    }

    /// Reserves `bytes` of the burst buffer for this process's later writes (what
    /// `fallocate` means here): they will not fail for want of space. Nothing to reserve when
    /// the burst buffer has no capacity set (the device's free space is the limit).
    pub fn preallocate(&self, bytes: u64) -> FsResult<()> {
        self.lock().preallocate(bytes)
    }

    /// Asks this process's daemon to stop.
    pub fn shutdown_daemon(&self) -> FsResult<()> {
        self.lock().call(Shutdown)
    }
}
