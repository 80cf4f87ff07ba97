//! File-system paths: from what a user typed to the normalised path the namespace stores.
//!
//! Users name Tessera files under a mount prefix (default `/tessera`, as the LD_PRELOAD layer
//! will see them). Inside the system a path is absolute from the file system's root: `/`,
//! `/dir`, `/dir/file`, with no `.`, `..`, empty or trailing components.

use crate::error::{Errno, FsError, FsResult};

/// Default mount prefix of an instance.
pub const DEFAULT_MOUNT: &str = "/tessera";
/// Longest path accepted, in bytes (PATH_MAX).
pub const MAX_PATH: usize = 4096;
/// Longest single name, in bytes (NAME_MAX).
pub const MAX_NAME: usize = 255;

/// Normalises `user_path`, which must lie under `mount`, into an internal path.
pub fn resolve(user_path: &str, mount: &str) -> FsResult<String> {
    if !user_path.starts_with('/') {
        return Err(FsError::new(
            Errno::XDev,
            format!(
                "'{user_path}' is a relative path; Tessera paths are absolute and start with the mount prefix {mount}/"
            ),
        ));
    }
    let mount = mount.trim_end_matches('/');
    let rest = if mount.is_empty() {
        user_path
    } else if user_path == mount {
        "/"
    } else if let Some(r) = user_path.strip_prefix(mount).filter(|r| r.starts_with('/')) {
        r
    } else {
        return Err(FsError::new(
            Errno::XDev,
            format!(
                "'{user_path}' is outside the Tessera file system, which is mounted at {mount}; use a path such as {mount}/{}",
                user_path.trim_start_matches('/')
            ),
        ));
    };
    normalize(rest)
}

/// Normalises an internal absolute path (collapses `//` and `.`, resolves `..` lexically).
pub fn normalize(path: &str) -> FsResult<String> {
    if path.len() > MAX_PATH {
        return Err(FsError::new(
            Errno::NameTooLong,
            format!(
                "path of {} bytes exceeds the limit of {MAX_PATH}",
                path.len()
            ),
        ));
    }
    if path.contains('\0') {
        return Err(FsError::new(Errno::Inval, "path contains a NUL byte"));
    }
    if !path.starts_with('/') {
        return Err(FsError::new(
            Errno::Inval,
            format!("internal path '{path}' is not absolute"),
        ));
    }
    let mut parts: Vec<&str> = Vec::new();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            name if name.len() > MAX_NAME => {
                return Err(FsError::new(
                    Errno::NameTooLong,
                    format!(
                        "name '{}…' is longer than {MAX_NAME} bytes",
                        name.chars().take(32).collect::<String>()
                    ),
                ));
            }
            name => parts.push(name),
        }
    }
    Ok(format!("/{}", parts.join("/")))
}

/// Splits a normalised path into (parent, name); the root has no parent.
pub fn split(path: &str) -> Option<(&str, &str)> {
    if path == "/" {
        return None;
    }
    let i = path.rfind('/').expect("normalised paths are absolute");
    let parent = if i == 0 { "/" } else { &path[..i] };
    Some((parent, &path[i + 1..]))
}

/// Joins a normalised directory path and a name.
pub fn join(dir: &str, name: &str) -> String {
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
}

/// Whether `path` is `dir` itself or lies below it.
pub fn is_within(path: &str, dir: &str) -> bool {
    dir == "/" || path == dir || path.strip_prefix(dir).is_some_and(|r| r.starts_with('/'))
}

/// Most links followed while resolving one path (as the kernel's 40 is for whole paths, 8 is
/// plenty for the one link at a path's end that Tessera follows).
pub const MAX_LINK_HOPS: u32 = 8;

/// The internal path a symbolic link of the PFS directory points to, if its target lies beneath
/// the PFS root: `link` is the link's internal path, `target` what the link holds, `pfs_dir`
/// the PFS directory (an absolute target inside it is taken relative to it). A target outside
/// the root (absolute elsewhere, or `..` above the root) is `EXDEV`: Tessera never follows a
/// link out of the PFS directory.
pub fn link_target(link: &str, target: &str, pfs_dir: &str) -> FsResult<String> {
    let outside = || {
        FsError::new(
            Errno::XDev,
            format!(
                "{link} is a symbolic link to {target}, outside the PFS directory {pfs_dir}; Tessera follows links only to targets beneath it"
            ),
        )
    };
    if target.is_empty() || target.contains('\0') {
        return Err(FsError::new(
            Errno::Inval,
            format!("{link} is a symbolic link with an empty or malformed target"),
        ));
    }
    let (mut parts, rest): (Vec<&str>, &str) = if target.starts_with('/') {
        let root = pfs_dir.trim_end_matches('/');
        match target.strip_prefix(root) {
            Some(r) if r.is_empty() || r.starts_with('/') => (Vec::new(), r),
            _ => return Err(outside()),
        }
    } else {
        let parent = split(link).map_or("/", |(p, _)| p);
        (
            parent.split('/').filter(|c| !c.is_empty()).collect(),
            target,
        )
    };
    for c in rest.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(outside());
                }
            }
            name => parts.push(name),
        }
    }
    normalize(&format!("/{}", parts.join("/")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_targets_stay_beneath_the_root() {
        let pfs = "/scratch/me/out";
        assert_eq!(link_target("/a/l", "data", pfs).unwrap(), "/a/data");
        assert_eq!(link_target("/a/l", "../b/./c", pfs).unwrap(), "/b/c");
        assert_eq!(link_target("/l", "d/", pfs).unwrap(), "/d");
        assert_eq!(
            link_target("/a/l", "/scratch/me/out/x/y", pfs).unwrap(),
            "/x/y"
        );
        for bad in ["../x", "/etc/passwd", "/scratch/me/outside/x", "a/../../x"] {
            let e = link_target("/l", bad, pfs).unwrap_err();
            assert_eq!(e.errno, Errno::XDev, "{bad}: {e}");
            assert!(e.message.contains("outside the PFS directory"), "{e}");
        }
        assert_eq!(link_target("/l", "", pfs).unwrap_err().errno, Errno::Inval);
    }

    #[test]
    fn resolves_under_the_mount() {
        assert_eq!(resolve("/tessera", "/tessera").unwrap(), "/");
        assert_eq!(resolve("/tessera/a//b/./c/", "/tessera").unwrap(), "/a/b/c");
        assert_eq!(resolve("/tessera/a/../b", "/tessera").unwrap(), "/b");
        assert_eq!(resolve("/tessera/../../x", "/tessera").unwrap(), "/x");
    }

    #[test]
    fn outside_paths_name_the_mount() {
        let e = resolve("/home/me/f", "/tessera").unwrap_err();
        assert_eq!(e.errno, Errno::XDev);
        assert!(e.message.contains("mounted at /tessera"), "{e}");
        assert_eq!(
            resolve("/tesserax/f", "/tessera").unwrap_err().errno,
            Errno::XDev
        );
        assert_eq!(resolve("rel/f", "/tessera").unwrap_err().errno, Errno::XDev);
    }

    #[test]
    fn long_names_are_refused() {
        let long = format!("/tessera/{}", "n".repeat(300));
        assert_eq!(
            resolve(&long, "/tessera").unwrap_err().errno,
            Errno::NameTooLong
        );
        // Multi-byte characters across the cut do not panic.
        let euros = format!("/tessera/{}", "€".repeat(100));
        assert_eq!(
            resolve(&euros, "/tessera").unwrap_err().errno,
            Errno::NameTooLong
        );
    }

    #[test]
    fn split_and_join() {
        assert_eq!(split("/a/b"), Some(("/a", "b")));
        assert_eq!(split("/a"), Some(("/", "a")));
        assert_eq!(split("/"), None);
        assert_eq!(join("/", "a"), "/a");
        assert_eq!(join("/a", "b"), "/a/b");
        assert!(is_within("/a/b", "/a") && !is_within("/ab", "/a") && is_within("/x", "/"));
    }
}
