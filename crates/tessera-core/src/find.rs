//! The predicates of `tessera find`, with GNU find's meaning, as pure logic: the daemons
//! evaluate them on the entries of their own shards (name and type) and on the inodes of
//! their own shards (size and modification time).
//!
//! - `-name GLOB`: the last component matches the shell pattern (`*`, `?`, `[...]`, `[!...]`),
//!   a leading `.` included, as GNU find's (`fnmatch` without flags). Patterns are matched by
//!   the `glob` crate's `Pattern`, which has no backslash escape (`[*]` matches a `*`).
//! - `-size [+-]N[cwbkMG]`: the size in units (512-byte blocks by default; `c` bytes, `w`
//!   2-byte words, `k` KiB, `M` MiB, `G` GiB), rounded up, is N (more than N with `+`, less
//!   with `-`): `-size -1M` matches only empty files, as in GNU find.
//! - `-newer FILE`: modified strictly after FILE was.
//! - `-type f|d|l`.

use crate::meta::{Attr, FileKind};
use crate::{Errno, FsError, FsResult};
use serde::{Deserialize, Serialize};

/// How a size compares with the predicate's count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Compare {
    Exactly,
    MoreThan,
    LessThan,
}

/// `-size`: a count of units and how the rounded-up size compares with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SizeTest {
    pub compare: Compare,
    pub count: u64,
    pub unit: u64,
}

impl SizeTest {
    /// Parses GNU find's `-size` argument (`3901c`, `+10k`, `-1M`, `7`).
    pub fn parse(arg: &str) -> FsResult<SizeTest> {
        let bad = || {
            FsError::new(
                Errno::Inval,
                format!(
                    "-size {arg}: a count with an optional + or - before it and a unit after it (c bytes, w words, b 512-byte blocks (the default), k, M, G)"
                ),
            )
        };
        let (compare, rest) = match arg.as_bytes().first() {
            Some(b'+') => (Compare::MoreThan, &arg[1..]),
            Some(b'-') => (Compare::LessThan, &arg[1..]),
            _ => (Compare::Exactly, arg),
        };
        let (digits, unit) = match rest.char_indices().last() {
            Some((i, c)) if !c.is_ascii_digit() => {
                let unit = match c {
                    'c' => 1,
                    'w' => 2,
                    'b' => 512,
                    'k' => 1 << 10,
                    'M' => 1 << 20,
                    'G' => 1 << 30,
                    _ => return Err(bad()),
                };
                (&rest[..i], unit)
            }
            _ => (rest, 512),
        };
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let count = digits.parse().map_err(|_| bad())?;
        Ok(SizeTest {
            compare,
            count,
            unit,
        })
    }

    /// Whether a file of `size` bytes passes.
    pub fn matches(&self, size: u64) -> bool {
        let units = size.div_ceil(self.unit);
        match self.compare {
            Compare::Exactly => units == self.count,
            Compare::MoreThan => units > self.count,
            Compare::LessThan => units < self.count,
        }
    }
}

/// Every predicate of one `tessera find` (all must hold).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Filter {
    pub name: Option<String>,
    pub kind: Option<FileKind>,
    pub size: Option<SizeTest>,
    /// Modified strictly after this time (ns since the epoch).
    pub newer_than_ns: Option<i64>,
}

/// A [`Filter`] ready to test entries: its name pattern compiled.
pub struct Matcher {
    filter: Filter,
    name: Option<glob::Pattern>,
}

/// GNU find's `-name`: `*` and `?` match any character, `/` and a leading `.` included.
const NAME_MATCH: glob::MatchOptions = glob::MatchOptions {
    case_sensitive: true,
    require_literal_separator: false,
    require_literal_leading_dot: false,
};

impl Matcher {
    pub fn new(filter: Filter) -> FsResult<Matcher> {
        let name = match &filter.name {
            // Runs of `*` are one `*` to fnmatch; the crate reads `**` as its own operator.
            Some(p) => Some(
                glob::Pattern::new(&collapse_stars(p))
                    .map_err(|e| FsError::new(Errno::Inval, format!("-name {p}: {e}")))?,
            ),
            None => None,
        };
        Ok(Matcher { filter, name })
    }

    /// Whether an entry passes the predicates its shard can test (name and type).
    pub fn entry_matches(&self, name: &str, kind: FileKind) -> bool {
        self.filter.kind.is_none_or(|k| k == kind)
            && self
                .name
                .as_ref()
                .is_none_or(|p| p.matches_with(name, NAME_MATCH))
    }

    /// Whether the predicates need the inode's attributes (size, modification time).
    pub fn needs_attrs(&self) -> bool {
        self.filter.size.is_some() || self.filter.newer_than_ns.is_some()
    }

    /// Whether the inode passes the predicates on attributes.
    pub fn attr_matches(&self, a: &Attr) -> bool {
        self.filter.size.is_none_or(|s| s.matches(a.size))
            && self.filter.newer_than_ns.is_none_or(|t| a.mtime_ns > t)
    }
}

/// `pattern` with each run of `*` made one.
fn collapse_stars(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    for c in pattern.chars() {
        if !(c == '*' && out.ends_with('*')) {
            out.push(c);
        }
    }
    out
}

/// Whether an entry of directory `parent` lies beneath `root` (both normalised internal
/// paths): `parent` is `root` or inside it.
pub fn beneath(root: &str, parent: &str) -> bool {
    root == "/"
        || parent == root
        || parent
            .strip_prefix(root)
            .is_some_and(|rest| rest.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn attr(size: u64, mtime_ns: i64) -> Attr {
        Attr {
            ino: 2,
            kind: FileKind::File,
            mode: 0o644,
            uid: 0,
            gid: 0,
            size,
            atime_ns: 0,
            mtime_ns,
            ctime_ns: 0,
            nlink: 1,
        }
    }

    #[test]
    fn sizes_round_up_in_their_unit() {
        let t = |a: &str| SizeTest::parse(a).unwrap();
        assert!(t("3901c").matches(3901) && !t("3901c").matches(3900));
        assert!(t("1").matches(1) && t("1").matches(512) && !t("1").matches(513));
        assert!(t("-1M").matches(0) && !t("-1M").matches(1));
        assert!(t("+1k").matches(1025) && !t("+1k").matches(1024));
        assert!(t("2w").matches(3) && t("2w").matches(4) && !t("2w").matches(5));
        for bad in ["", "c", "+", "1x", "k1", "1.5k", "--1"] {
            assert!(SizeTest::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn names_match_as_gnu_find_does() {
        let m = |p: &str, n: &str| {
            Matcher::new(Filter {
                name: Some(p.into()),
                ..Filter::default()
            })
            .unwrap()
            .entry_matches(n, FileKind::File)
        };
        assert!(m("*01*", "file.mdtest.0.1001"));
        assert!(!m("*01*", "file.mdtest.0.1100"));
        assert!(m("*", ".hidden"), "a leading dot is matched by *");
        assert!(m("?2", "f2") && !m("?2", "f22"));
        assert!(m("[ab]*", "a1") && !m("[!ab]*", "a1") && m("[!ab]*", "c1"));
        assert!(
            Matcher::new(Filter {
                name: Some("[".into()),
                ..Filter::default()
            })
            .is_err()
        );
    }

    #[test]
    fn roots_hold_what_lies_beneath_them() {
        assert!(beneath("/", "/a/b"));
        assert!(beneath("/a", "/a") && beneath("/a", "/a/b"));
        assert!(!beneath("/a", "/ab") && !beneath("/a", "/") && !beneath("/a/b", "/a"));
    }

    proptest! {
        /// The size test against its definition: count the units by repeated subtraction.
        #[test]
        fn size_tests_follow_their_definition(
            size in 0u64..100_000,
            count in 0u64..200,
            unit in prop::sample::select(vec![1u64, 2, 512, 1024]),
            sign in 0u8..3,
        ) {
            let compare = [Compare::Exactly, Compare::MoreThan, Compare::LessThan][sign as usize];
            let t = SizeTest { compare, count, unit };
            let mut units = 0;
            let mut left = size;
            while left > 0 {
                units += 1;
                left = left.saturating_sub(unit);
            }
            let want = match compare {
                Compare::Exactly => units == count,
                Compare::MoreThan => units > count,
                Compare::LessThan => units < count,
            };
            prop_assert_eq!(t.matches(size), want);
        }

        /// Attributes: size and time both tested, each only when asked.
        #[test]
        fn attribute_tests_hold_together(size in 0u64..5000, mtime in -5i64..5, newer in proptest::option::of(-5i64..5)) {
            let m = Matcher::new(Filter {
                size: Some(SizeTest { compare: Compare::MoreThan, count: 3, unit: 1024 }),
                newer_than_ns: newer,
                ..Filter::default()
            }).unwrap();
            prop_assert_eq!(
                m.attr_matches(&attr(size, mtime)),
                size > 3 * 1024 && newer.is_none_or(|t| mtime > t)
            );
        }
    }
}
