//! The rules of staging data in and out (`tessera stage-in`, `stage-out`), apart from any
//! I/O: the manifest a job script holds, the completion record that lets a rerun skip what
//! was copied, and how the files are shared among the nodes that copy them.

use crate::{Errno, FsError};

/// One line of a manifest: copy `source` to `dest`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestLine {
    pub source: String,
    pub dest: String,
    /// 1-based, for messages.
    pub line: usize,
}

/// Splits one manifest line into fields: separated by blanks; a field in double quotes may
/// hold blanks, `\"` and `\\`.
fn fields(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let Some(&first) = chars.peek() else {
            return Ok(out);
        };
        let mut field = String::new();
        if first == '"' {
            chars.next();
            loop {
                match chars.next() {
                    None => return Err("a quoted field is not closed".into()),
                    Some('"') => break,
                    Some('\\') => match chars.next() {
                        Some(c @ ('"' | '\\')) => field.push(c),
                        Some(c) => return Err(format!("unknown escape \\{c} in a quoted field")),
                        None => return Err("a quoted field is not closed".into()),
                    },
                    Some(c) => field.push(c),
                }
            }
            if chars.peek().is_some_and(|c| !c.is_whitespace()) {
                return Err("a quoted field must be followed by a blank".into());
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                field.push(c);
                chars.next();
            }
        }
        out.push(field);
    }
}

/// Parses a manifest: one `SOURCE DESTINATION` pair per line, blank lines and lines whose
/// first non-blank character is `#` ignored. An error names the line and what is wrong.
pub fn parse_manifest(text: &str) -> Result<Vec<ManifestLine>, FsError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |why: String| {
            FsError::new(
                Errno::Inval,
                format!(
                    "manifest line {}: {why}: {raw:?} (each line is SOURCE DESTINATION; quote a path with blanks)",
                    i + 1
                ),
            )
        };
        let f = fields(line).map_err(bad)?;
        match <[String; 2]>::try_from(f) {
            Ok([source, dest]) => out.push(ManifestLine {
                source,
                dest,
                line: i + 1,
            }),
            Err(f) => return Err(bad(format!("{} fields, not 2", f.len()))),
        }
    }
    Ok(out)
}

/// What a finished copy records beside its destination: the source as it was copied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    pub size: u64,
    pub mtime_ns: i64,
    /// CRC32C of the bytes, computed while the source was read.
    pub crc32c: u32,
}

/// The extended attribute a completion record is kept in.
pub const COMPLETION_XATTR: &str = "user.tessera.staged";

impl Completion {
    /// The record's text (format version 1): `v1 SIZE MTIME_NS CRC32C_HEX`.
    pub fn encode(&self) -> String {
        format!("v1 {} {} {:08x}", self.size, self.mtime_ns, self.crc32c)
    }

    /// Reads a record; `None` for anything else (a record of another version, or damage:
    /// the file is then copied again).
    pub fn decode(text: &str) -> Option<Completion> {
        let mut f = text.split(' ');
        if f.next()? != "v1" {
            return None;
        }
        let c = Completion {
            size: f.next()?.parse().ok()?,
            mtime_ns: f.next()?.parse().ok()?,
            crc32c: u32::from_str_radix(f.next()?, 16).ok()?,
        };
        f.next().is_none().then_some(c)
    }

    /// Whether this record says the source as it is now (size, modification time) was
    /// copied already.
    pub fn covers(&self, size: u64, mtime_ns: i64) -> bool {
        self.size == size && self.mtime_ns == mtime_ns
    }
}

/// Shares files (by index, with their sizes) among `nodes` nodes so that each copies about
/// as many bytes as the others: the largest file first, each to the node with the fewest
/// bytes so far (at most the mean plus the largest file per node). Small files spread by
/// count as well, since a file costs a create however small it is.
pub fn shares(sizes: &[u64], nodes: u32) -> Vec<Vec<usize>> {
    let nodes = nodes.max(1) as usize;
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    order.sort_by(|a, b| sizes[*b].cmp(&sizes[*a]).then(a.cmp(b)));
    let mut out = vec![Vec::new(); nodes];
    // (bytes, files) per node; a file's cost counts a 4 KiB create beside its bytes.
    let mut load = vec![0u64; nodes];
    for i in order {
        let n = (0..nodes)
            .min_by_key(|n| (load[*n], out[*n].len(), *n))
            .expect("at least one node");
        load[n] = load[n].saturating_add(sizes[i].max(4096));
        out[n].push(i);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_manifest_has_pairs_comments_and_quoted_paths() {
        let m = parse_manifest(
            "# inputs\n/pfs/a /tessera/a\n\n  \"/pfs/with space\"  \"/tessera/q \\\"x\\\"\"\n",
        )
        .unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(
            (m[0].source.as_str(), m[0].dest.as_str(), m[0].line),
            ("/pfs/a", "/tessera/a", 2)
        );
        assert_eq!(m[1].source, "/pfs/with space");
        assert_eq!(m[1].dest, "/tessera/q \"x\"");
        assert_eq!(m[1].line, 4);
    }

    #[test]
    fn a_bad_line_is_refused_by_number() {
        for (text, why) in [
            ("/a\n", "1 fields"),
            ("/a /b /c\n", "3 fields"),
            ("ok /b\n\"/open /b\n", "not closed"),
            ("\"/a\"x /b\n", "followed by a blank"),
            ("\"/a\\n\" /b\n", "unknown escape"),
        ] {
            let e = parse_manifest(text).unwrap_err();
            assert_eq!(e.errno, Errno::Inval);
            assert!(e.message.contains(why), "{text:?}: {e}");
            assert!(e.message.contains("manifest line"), "{e}");
        }
        assert!(
            parse_manifest("ok /b\n\"/open /b\n")
                .unwrap_err()
                .message
                .contains("line 2")
        );
    }

    #[test]
    fn a_record_round_trips_and_anything_else_reads_as_none() {
        let c = Completion {
            size: 5,
            mtime_ns: -3,
            crc32c: 0xdead_beef,
        };
        assert_eq!(Completion::decode(&c.encode()), Some(c));
        assert!(c.covers(5, -3));
        assert!(!c.covers(5, -2) && !c.covers(6, -3));
        for bad in [
            "",
            "v2 5 -3 deadbeef",
            "v1 5 -3",
            "v1 5 -3 deadbeef extra",
            "v1 x -3 0",
        ] {
            assert_eq!(Completion::decode(bad), None, "{bad:?}");
        }
    }

    proptest! {
        /// Any path without a newline survives quoting in a manifest line.
        #[test]
        fn quoted_paths_round_trip(a in "[^\n\r]{1,40}", b in "[^\n\r]{1,40}") {
            let quote = |s: &str| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""));
            let text = format!("{} {}\n", quote(&a), quote(&b));
            let m = parse_manifest(&text).unwrap();
            prop_assert_eq!(m.len(), 1);
            prop_assert_eq!(&m[0].source, &a);
            prop_assert_eq!(&m[0].dest, &b);
        }

        /// Every file goes to exactly one node, and no node copies more than the mean plus
        /// the largest file (each file counted at least 4 KiB).
        #[test]
        fn shares_cover_every_file_once_and_stay_balanced(
            sizes in proptest::collection::vec(0u64..1 << 30, 0..200),
            nodes in 1u32..9,
        ) {
            let s = shares(&sizes, nodes);
            prop_assert_eq!(s.len(), nodes as usize);
            let mut seen: Vec<usize> = s.iter().flatten().copied().collect();
            seen.sort_unstable();
            prop_assert_eq!(seen, (0..sizes.len()).collect::<Vec<_>>());
            let cost = |i: usize| sizes[i].max(4096);
            let total: u64 = (0..sizes.len()).map(cost).sum();
            let largest = (0..sizes.len()).map(cost).max().unwrap_or(0);
            for share in &s {
                let load: u64 = share.iter().map(|i| cost(*i)).sum();
                prop_assert!(load <= total / u64::from(nodes) + largest);
            }
        }
    }
}
