//! Paths through symbolic links to directories (`/tessera/run/latest/out.h5` where `latest` is
//! a link). The daemons look a path up by its directory and name, and a link among the
//! directories is no directory, so such a path misses. A call that misses (`ENOENT`,
//! `ENOTDIR`) is tried once more on the path with each such link replaced by its target: the
//! walk costs a lookup per component, paid only by the calls that miss.

use crate::Client;
use tessera_core::{Errno, FsError, FsResult, path};
use tessera_proto::FileKind;

/// Links followed along one path before giving up with `ELOOP`, as Linux does.
const MAX_LINKS_ALONG: u32 = 40;

impl Client {
    /// `path` with every link among its directories replaced by where it leads (the last
    /// component is left as it is), or `None` when none of them is a link.
    pub(crate) fn through_links(&self, user_path: &str) -> FsResult<Option<String>> {
        let (internal, pfs, mount) = {
            let g = self.lock();
            let cfg = &g.cfg;
            (
                g.resolve(user_path)?,
                cfg.pfs_dir.display().to_string(),
                cfg.mount.clone(),
            )
        };
        let mut todo: Vec<String> = internal
            .split('/')
            .filter(|c| !c.is_empty())
            .map(str::to_string)
            .collect();
        let Some(last) = todo.pop() else {
            return Ok(None);
        };
        todo.reverse();
        let (mut dir, mut hops) = (String::new(), 0);
        while let Some(part) = todo.pop() {
            let here = format!("{dir}/{part}");
            let shown = self.lock().user_path(&here);
            match self.stat_here(&shown)?.kind {
                FileKind::Dir => dir = here,
                FileKind::File => {
                    return Err(FsError::new(
                        Errno::NotDir,
                        format!("{shown} is a file, and {user_path} goes on beneath it"),
                    ));
                }
                FileKind::Symlink => {
                    hops += 1;
                    if hops > MAX_LINKS_ALONG {
                        return Err(FsError::new(
                            Errno::Loop,
                            format!("{user_path}: more than {MAX_LINKS_ALONG} symbolic links"),
                        ));
                    }
                    let target = self.readlink(&shown)?;
                    // A target written as a Tessera path stays in Tessera; others as the PFS
                    // directory's links are followed.
                    let to = match path::resolve(&target, &mount) {
                        Ok(inside) if target.starts_with('/') => inside,
                        _ => path::link_target(&here, &target, &pfs)?,
                    };
                    for c in to.split('/').filter(|c| !c.is_empty()).rev() {
                        todo.push(c.to_string());
                    }
                    dir = String::new();
                }
            }
        }
        if hops == 0 {
            return Ok(None);
        }
        Ok(Some(self.lock().user_path(&format!("{dir}/{last}"))))
    }

    /// Runs `op` on `path`, and once more through the links among its directories when it
    /// misses there.
    pub(crate) fn through_links_on_miss<T>(
        &self,
        path: &str,
        op: impl Fn(&str) -> FsResult<T>,
    ) -> FsResult<T> {
        match op(path) {
            Err(e) if matches!(e.errno, Errno::NoEnt | Errno::NotDir) => {
                match self.through_links(path) {
                    Ok(Some(p)) => op(&p),
                    // Links that never end are the answer, not the miss they caused.
                    Err(l) if l.errno == Errno::Loop => Err(l),
                    _ => Err(e),
                }
            }
            r => r,
        }
    }

    /// As [`Client::through_links_on_miss`] for a call that names two paths.
    pub(crate) fn through_links_on_miss2<T>(
        &self,
        a: &str,
        b: &str,
        op: impl Fn(&str, &str) -> FsResult<T>,
    ) -> FsResult<T> {
        match op(a, b) {
            Err(e) if matches!(e.errno, Errno::NoEnt | Errno::NotDir) => {
                let a2 = self.through_links(a).ok().flatten();
                let b2 = self.through_links(b).ok().flatten();
                if a2.is_none() && b2.is_none() {
                    return Err(e);
                }
                op(a2.as_deref().unwrap_or(a), b2.as_deref().unwrap_or(b))
            }
            r => r,
        }
    }
}
