//! The POSIX-facing rules of the interposer that need no I/O: which paths belong to Tessera,
//! how `open` flags and `fopen` modes translate, how `lseek` moves. Kept here so they are
//! unit-tested; the LD_PRELOAD library applies them.

use crate::error::{Errno, FsError, FsResult};

/// Lexically normalises an absolute path: collapses `//`, drops `.`, resolves `..` against
/// the components before it (never above `/`). Symbolic links are not consulted (Tessera has
/// none); a relative path is returned unchanged.
pub fn lexical_normalize(path: &str) -> String {
    if !path.starts_with('/') {
        return path.to_string();
    }
    let mut parts: Vec<&str> = Vec::new();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    let mut out = String::with_capacity(path.len());
    for p in &parts {
        out.push('/');
        out.push_str(p);
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

/// Whether a normalised absolute `path` lies under `prefix` (the prefix itself included).
pub fn under_prefix(path: &str, prefix: &str) -> bool {
    let prefix = prefix.trim_end_matches('/');
    if prefix.is_empty() {
        return path.starts_with('/');
    }
    match path.strip_prefix(prefix) {
        Some(rest) => rest.is_empty() || rest.starts_with('/'),
        None => false,
    }
}

/// Joins a name to a directory path.
pub fn join_user(dir: &str, name: &str) -> String {
    if name.starts_with('/') {
        return name.to_string();
    }
    format!("{}/{}", dir.trim_end_matches('/'), name)
}

/// What an `open` call asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpenIntent {
    pub read: bool,
    pub write: bool,
    pub create: bool,
    pub exclusive: bool,
    pub truncate: bool,
    pub append: bool,
    pub directory: bool,
    /// O_PATH: a descriptor that only names the file.
    pub path_only: bool,
}

impl OpenIntent {
    /// Decodes `open(2)` flags. Flags without meaning for Tessera (O_CLOEXEC, O_NOCTTY,
    /// O_NOFOLLOW, O_LARGEFILE, O_NONBLOCK, O_SYNC, O_DIRECT, O_NOATIME) are accepted;
    /// O_TMPFILE and O_PATH are refused, naming the flag.
    pub fn from_flags(flags: i32) -> FsResult<OpenIntent> {
        if flags & libc::O_TMPFILE == libc::O_TMPFILE {
            return Err(FsError::new(
                Errno::NotSup,
                "O_TMPFILE is not supported on Tessera; create a named file and unlink it",
            ));
        }
        let (read, write) = match flags & libc::O_ACCMODE {
            libc::O_RDONLY => (true, false),
            libc::O_WRONLY => (false, true),
            libc::O_RDWR => (true, true),
            _ => {
                return Err(FsError::new(
                    Errno::Inval,
                    "open flags: the access mode must be O_RDONLY, O_WRONLY or O_RDWR",
                ));
            }
        };
        Ok(OpenIntent {
            read,
            write,
            create: flags & libc::O_CREAT != 0,
            exclusive: flags & libc::O_EXCL != 0,
            truncate: flags & libc::O_TRUNC != 0 && write,
            append: flags & libc::O_APPEND != 0,
            directory: flags & libc::O_DIRECTORY != 0,
            path_only: flags & libc::O_PATH != 0,
        })
    }
}

/// Translates an `fopen` mode ("r", "w+", "ab", "rxe", ...) into `open(2)` flags.
pub fn fopen_flags(mode: &str) -> FsResult<i32> {
    let mut chars = mode.chars();
    let mut flags = match chars.next() {
        Some('r') => libc::O_RDONLY,
        Some('w') => libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
        Some('a') => libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND,
        _ => {
            return Err(FsError::new(
                Errno::Inval,
                format!("fopen mode '{mode}' must start with r, w or a"),
            ));
        }
    };
    for c in chars {
        match c {
            '+' => flags = (flags & !libc::O_ACCMODE) | libc::O_RDWR,
            'x' => flags |= libc::O_EXCL,
            'e' => flags |= libc::O_CLOEXEC,
            'b' | 't' | 'm' | 'c' => {}
            ',' => break, // ",ccs=..." encodings are glibc's business
            _ => {}
        }
    }
    Ok(flags)
}

/// The new offset of an `lseek(fd, off, whence)` on a file of `size` bytes at `pos`. Tessera
/// files have no holes it reports: SEEK_DATA finds data anywhere below the size, SEEK_HOLE
/// finds the implicit hole at the end.
pub fn seek_target(pos: u64, size: u64, off: i64, whence: i32) -> FsResult<u64> {
    let base = match whence {
        libc::SEEK_SET => 0,
        libc::SEEK_CUR => pos,
        libc::SEEK_END => size,
        libc::SEEK_DATA | libc::SEEK_HOLE => {
            let o = u64::try_from(off)
                .map_err(|_| FsError::new(Errno::Inval, "lseek: negative offset"))?;
            if o >= size {
                return Err(FsError::new(
                    Errno::Nxio,
                    format!("lseek: offset {o} is at or past the end of the file ({size})"),
                ));
            }
            return Ok(if whence == libc::SEEK_DATA { o } else { size });
        }
        w => {
            return Err(FsError::new(
                Errno::Inval,
                format!("lseek: unknown whence {w}"),
            ));
        }
    };
    base.checked_add_signed(off).ok_or_else(|| {
        FsError::new(
            Errno::Inval,
            format!("lseek to {base} + {off} is outside the file"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_lexically() {
        assert_eq!(lexical_normalize("/tessera//a/./b/"), "/tessera/a/b");
        assert_eq!(lexical_normalize("/tessera/a/../b"), "/tessera/b");
        assert_eq!(lexical_normalize("/../.."), "/");
        assert_eq!(lexical_normalize("/tessera/.."), "/");
        assert_eq!(lexical_normalize("rel/x"), "rel/x");
    }

    #[test]
    fn prefix_matches_whole_components() {
        assert!(under_prefix("/tessera", "/tessera"));
        assert!(under_prefix("/tessera/x", "/tessera/"));
        assert!(!under_prefix("/tesseract", "/tessera"));
        assert!(!under_prefix("/etc/passwd", "/tessera"));
        assert!(under_prefix("/anything", "/"));
    }

    #[test]
    fn open_flags() {
        let i = OpenIntent::from_flags(libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC).unwrap();
        assert!(i.write && !i.read && i.create && i.truncate && !i.append);
        let i = OpenIntent::from_flags(libc::O_RDONLY | libc::O_TRUNC).unwrap();
        assert!(
            !i.truncate,
            "O_TRUNC without write access is ignored, as Linux does"
        );
        assert_eq!(
            OpenIntent::from_flags(libc::O_TMPFILE | libc::O_RDWR)
                .unwrap_err()
                .errno,
            Errno::NotSup
        );
        assert_eq!(
            OpenIntent::from_flags(libc::O_ACCMODE).unwrap_err().errno,
            Errno::Inval
        );
    }

    #[test]
    fn fopen_modes() {
        assert_eq!(fopen_flags("r").unwrap(), libc::O_RDONLY);
        assert_eq!(fopen_flags("rb+").unwrap(), libc::O_RDWR);
        assert_eq!(
            fopen_flags("w").unwrap(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC
        );
        assert_eq!(
            fopen_flags("a+").unwrap(),
            libc::O_RDWR | libc::O_CREAT | libc::O_APPEND
        );
        assert_eq!(
            fopen_flags("wx").unwrap(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_EXCL
        );
        assert!(fopen_flags("z").is_err());
        assert!(fopen_flags("").is_err());
    }

    #[test]
    fn seeking() {
        assert_eq!(seek_target(5, 100, 10, libc::SEEK_SET).unwrap(), 10);
        assert_eq!(seek_target(5, 100, -2, libc::SEEK_CUR).unwrap(), 3);
        assert_eq!(seek_target(5, 100, 0, libc::SEEK_END).unwrap(), 100);
        assert!(seek_target(5, 100, -6, libc::SEEK_CUR).is_err());
        assert_eq!(seek_target(0, 100, 40, libc::SEEK_DATA).unwrap(), 40);
        assert_eq!(seek_target(0, 100, 40, libc::SEEK_HOLE).unwrap(), 100);
        assert_eq!(
            seek_target(0, 100, 100, libc::SEEK_DATA).unwrap_err().errno,
            Errno::Nxio
        );
        assert!(seek_target(0, 0, 0, 42).is_err());
    }
}
