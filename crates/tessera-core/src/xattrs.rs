//! Extended attributes of the inodes one namespace shard holds: the rules of
//! setxattr/getxattr/listxattr/removexattr (name namespaces, sizes, create/replace), and the
//! table they change. Linux's limits apply: names up to 255 bytes in the `user.`, `trusted.`
//! or `security.` namespace, values up to 64 KiB. `system.` (POSIX ACLs) is not kept, so ACL
//! copies report it as unsupported, as on a file system without ACLs.
//!
//! What one inode may hold is bounded ([`XattrLimits`], set in `instance.toml`): a count, a
//! total of name and value bytes, and names that fit one `listxattr` answer. A set beyond
//! them is `ENOSPC`, as ext4 answers when an inode's attributes no longer fit.

use crate::{Errno, FsError, FsResult};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `XATTR_NAME_MAX`.
pub const NAME_MAX: usize = 255;
/// `XATTR_SIZE_MAX`.
pub const VALUE_MAX: usize = 65_536;

/// `XATTR_LIST_MAX`: the largest list of names (each with its NUL) `listxattr` returns.
pub const LIST_MAX: usize = 65_536;

/// What the extended attributes of one inode may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XattrLimits {
    /// Attributes per inode.
    pub max_count: u32,
    /// Bytes of names and values per inode.
    pub max_bytes: u64,
}

impl Default for XattrLimits {
    fn default() -> Self {
        XattrLimits {
            max_count: DEFAULT_MAX_COUNT,
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }
}

/// Default [`XattrLimits::max_count`].
pub const DEFAULT_MAX_COUNT: u32 = 1024;
/// Default [`XattrLimits::max_bytes`]: 1 MiB, sixteen values of the largest size.
pub const DEFAULT_MAX_BYTES: u64 = 1 << 20;

/// What a set may do: `setxattr`'s flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum SetMode {
    /// Create or replace.
    #[default]
    Any,
    /// `XATTR_CREATE`: only if absent (else `EEXIST`).
    Create,
    /// `XATTR_REPLACE`: only if present (else `ENODATA`).
    Replace,
}

/// What to do with an entry's extended attributes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum XattrOp {
    Get {
        name: String,
    },
    List,
    Set {
        name: String,
        value: Vec<u8>,
        mode: SetMode,
    },
    Remove {
        name: String,
    },
}

impl XattrOp {
    /// Whether a second copy cannot change the outcome (a second remove fails, a second
    /// exclusive create too).
    pub fn is_idempotent(&self) -> bool {
        match self {
            XattrOp::Get { .. } | XattrOp::List => true,
            XattrOp::Set { mode, .. } => *mode != SetMode::Create,
            XattrOp::Remove { .. } => false,
        }
    }
}

/// The answer to an [`XattrOp`]: a value (`Get`), the names (`List`), or nothing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum XattrReply {
    Value(Vec<u8>),
    Names(Vec<String>),
    Done,
}

/// A change to the persisted table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum XattrChange {
    Put {
        ino: u64,
        name: String,
        value: Vec<u8>,
    },
    Del {
        ino: u64,
        name: String,
    },
}

/// Checks a name: its namespace and length.
pub fn check_name(name: &str) -> FsResult<()> {
    if name.len() > NAME_MAX {
        return Err(FsError::new(
            Errno::Range,
            format!(
                "extended attribute name of {} bytes: at most {NAME_MAX}",
                name.len()
            ),
        ));
    }
    let known = ["user.", "trusted.", "security."];
    match known.iter().find(|ns| name.starts_with(**ns)) {
        Some(ns) if name.len() > ns.len() => Ok(()),
        Some(_) => Err(FsError::new(
            Errno::Inval,
            format!("extended attribute name {name:?} has a namespace and no name"),
        )),
        None => Err(FsError::new(
            Errno::NotSup,
            format!(
                "extended attribute {name:?}: Tessera keeps the user., trusted. and security. namespaces (not system., so no ACLs)"
            ),
        )),
    }
}

/// The extended attributes of one shard's inodes.
#[derive(Default)]
pub struct Xattrs {
    by_inode: BTreeMap<(u64, String), Vec<u8>>,
    limits: XattrLimits,
}

impl Xattrs {
    /// The table as persisted: (inode, name, value).
    pub fn load(rows: impl IntoIterator<Item = (u64, String, Vec<u8>)>) -> Self {
        Xattrs {
            by_inode: rows
                .into_iter()
                .map(|(ino, name, v)| ((ino, name), v))
                .collect(),
            limits: XattrLimits::default(),
        }
    }

    pub fn limits(&self) -> XattrLimits {
        self.limits
    }

    /// The same table under other limits (attributes already held beyond them stay).
    pub fn with_limits(mut self, limits: XattrLimits) -> Self {
        self.limits = limits;
        self
    }

    pub fn get(&self, ino: u64, name: &str) -> FsResult<Vec<u8>> {
        check_name(name)?;
        self.by_inode
            .get(&(ino, name.to_string()))
            .cloned()
            .ok_or_else(|| FsError::new(Errno::NoData, format!("no extended attribute {name}")))
    }

    /// The names of `ino`'s attributes, in order.
    pub fn list(&self, ino: u64) -> Vec<String> {
        self.of(ino).map(|(name, _)| name.clone()).collect()
    }

    fn of(&self, ino: u64) -> impl Iterator<Item = (&String, &Vec<u8>)> + '_ {
        self.by_inode
            .range((ino, String::new())..)
            .take_while(move |((i, _), _)| *i == ino)
            .map(|((_, n), v)| (n, v))
    }

    pub fn set(
        &mut self,
        ino: u64,
        name: &str,
        value: Vec<u8>,
        mode: SetMode,
    ) -> FsResult<Vec<XattrChange>> {
        check_name(name)?;
        if value.len() > VALUE_MAX {
            return Err(FsError::new(
                Errno::TooBig,
                format!(
                    "extended attribute {name}: a value of {} bytes, at most {VALUE_MAX}",
                    value.len()
                ),
            ));
        }
        let key = (ino, name.to_string());
        match (mode, self.by_inode.contains_key(&key)) {
            (SetMode::Create, true) => {
                return Err(FsError::new(
                    Errno::Exist,
                    format!("extended attribute {name} exists (XATTR_CREATE)"),
                ));
            }
            (SetMode::Replace, false) => {
                return Err(FsError::new(
                    Errno::NoData,
                    format!("no extended attribute {name} to replace (XATTR_REPLACE)"),
                ));
            }
            _ => {}
        }
        self.check_room(ino, name, value.len())?;
        self.by_inode.insert(key, value.clone());
        Ok(vec![XattrChange::Put {
            ino,
            name: name.to_string(),
            value,
        }])
    }

    /// Refuses a set of `name` to a value of `len` bytes that would take `ino` beyond the
    /// limits (counting what the set replaces as gone).
    fn check_room(&self, ino: u64, name: &str, len: usize) -> FsResult<()> {
        let (mut count, mut bytes, mut listed) = (1u64, (name.len() + len) as u64, name.len() + 1);
        for (other, value) in self.of(ino).filter(|(n, _)| n.as_str() != name) {
            count += 1;
            bytes += (other.len() + value.len()) as u64;
            listed += other.len() + 1;
        }
        let full = |what: String| {
            Err(FsError::new(
                Errno::NoSpace,
                format!(
                    "extended attribute {name}: {what}; remove some of the file's attributes first"
                ),
            ))
        };
        if count > u64::from(self.limits.max_count) {
            return full(format!(
                "the file would hold {count} attributes, at most {} (xattr_max_count in instance.toml)",
                self.limits.max_count
            ));
        }
        if bytes > self.limits.max_bytes {
            return full(format!(
                "the file's attributes would take {bytes} bytes of names and values, at most {} (xattr_max_bytes in instance.toml)",
                self.limits.max_bytes
            ));
        }
        if listed > LIST_MAX {
            return full(format!(
                "the list of the file's attribute names would take {listed} bytes, more than listxattr returns ({LIST_MAX})"
            ));
        }
        Ok(())
    }

    pub fn remove(&mut self, ino: u64, name: &str) -> FsResult<Vec<XattrChange>> {
        check_name(name)?;
        match self.by_inode.remove(&(ino, name.to_string())) {
            Some(_) => Ok(vec![XattrChange::Del {
                ino,
                name: name.to_string(),
            }]),
            None => Err(FsError::new(
                Errno::NoData,
                format!("no extended attribute {name}"),
            )),
        }
    }

    /// Every attribute of an inode that goes.
    pub fn remove_all(&mut self, ino: u64) -> Vec<XattrChange> {
        let names = self.list(ino);
        names
            .into_iter()
            .map(|name| {
                self.by_inode.remove(&(ino, name.clone()));
                XattrChange::Del { ino, name }
            })
            .collect()
    }
}

/// `listxattr`'s encoding: each name followed by a NUL.
pub fn encode_list(names: &[String]) -> Vec<u8> {
    let mut out = Vec::new();
    for n in names {
        out.extend_from_slice(n.as_bytes());
        out.push(0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[test]
    fn names_values_and_modes_follow_linux() {
        let mut x = Xattrs::default();
        assert_eq!(
            x.set(1, "system.posix_acl_access", vec![], SetMode::Any)
                .unwrap_err()
                .errno,
            Errno::NotSup
        );
        assert_eq!(
            x.set(1, "user.", vec![], SetMode::Any).unwrap_err().errno,
            Errno::Inval
        );
        let long = format!("user.{}", "n".repeat(NAME_MAX));
        assert_eq!(x.get(1, &long).unwrap_err().errno, Errno::Range);
        let e = x
            .set(1, "user.big", vec![0; VALUE_MAX + 1], SetMode::Any)
            .unwrap_err();
        assert_eq!(e.errno, Errno::TooBig);
        assert_eq!(
            x.set(1, "user.a", b"1".to_vec(), SetMode::Replace)
                .unwrap_err()
                .errno,
            Errno::NoData
        );
        x.set(1, "user.a", b"1".to_vec(), SetMode::Create).unwrap();
        assert_eq!(
            x.set(1, "user.a", b"2".to_vec(), SetMode::Create)
                .unwrap_err()
                .errno,
            Errno::Exist
        );
        x.set(1, "user.a", b"2".to_vec(), SetMode::Replace).unwrap();
        x.set(1, "security.b", vec![], SetMode::Any).unwrap();
        x.set(2, "user.other", b"x".to_vec(), SetMode::Any).unwrap();
        assert_eq!(x.get(1, "user.a").unwrap(), b"2");
        assert_eq!(x.list(1), ["security.b", "user.a"]);
        assert_eq!(encode_list(&x.list(1)), b"security.b\0user.a\0");
        assert_eq!(x.remove_all(1).len(), 2);
        assert!(x.list(1).is_empty());
        assert_eq!(x.list(2), ["user.other"]);
        assert_eq!(x.remove(2, "user.nope").unwrap_err().errno, Errno::NoData);
    }

    #[test]
    fn an_inode_holds_a_bounded_amount() {
        let limits = XattrLimits {
            max_count: 3,
            max_bytes: 100,
        };
        let mut x = Xattrs::default().with_limits(limits);
        for n in ["user.a", "user.b", "user.c"] {
            x.set(1, n, vec![0; 10], SetMode::Any).unwrap();
        }
        let e = x.set(1, "user.d", vec![], SetMode::Any).unwrap_err();
        assert_eq!(e.errno, Errno::NoSpace, "{e}");
        assert!(e.message.contains("xattr_max_count"), "{e}");
        // Replacing one counts it once; another inode has its own budget.
        x.set(1, "user.a", vec![0; 20], SetMode::Any).unwrap();
        x.set(2, "user.d", vec![0; 90], SetMode::Any).unwrap();
        // 6 + 20 + 2 * (6 + 10) = 58 held; 6 + 37 more would be 101.
        let e = x.set(1, "user.b", vec![0; 53], SetMode::Any).unwrap_err();
        assert_eq!(e.errno, Errno::NoSpace, "{e}");
        assert!(e.message.contains("xattr_max_bytes"), "{e}");
        x.set(1, "user.b", vec![0; 52], SetMode::Any).unwrap();
        assert_eq!(x.get(1, "user.b").unwrap().len(), 52);
        // Removing makes room again.
        x.remove(1, "user.c").unwrap();
        x.set(1, "user.d", vec![], SetMode::Any).unwrap();
        // Names beyond one listxattr answer, whatever the other limits.
        let mut x = Xattrs::default().with_limits(XattrLimits {
            max_count: u32::MAX,
            max_bytes: u64::MAX,
        });
        let mut refused = None;
        for i in 0..300 {
            let name = format!("user.{i:0>250}");
            if let Err(e) = x.set(1, &name, Vec::new(), SetMode::Any) {
                refused = Some((i, e));
                break;
            }
        }
        let (i, e) = refused.expect("names past LIST_MAX are refused");
        assert_eq!(i, LIST_MAX / 256, "{e}");
        assert_eq!(e.errno, Errno::NoSpace);
        assert!(encode_list(&x.list(1)).len() <= LIST_MAX);
    }

    proptest! {
        /// Against a map model: every answer agrees, and the persisted changes rebuild it.
        #[test]
        fn xattrs_match_a_map(ops in proptest::collection::vec((0u8..4, 0u64..3, 0usize..3, 0u8..3), 1..80)) {
            let names = ["user.a", "user.b", "trusted.c"];
            let mut x = Xattrs::default();
            let mut model: HashMap<(u64, &str), Vec<u8>> = HashMap::new();
            let mut rows: BTreeMap<(u64, String), Vec<u8>> = BTreeMap::new();
            for (op, ino, n, v) in ops {
                let name = names[n];
                let changes = match op {
                    0 => {
                        let mode = [SetMode::Any, SetMode::Create, SetMode::Replace][v as usize];
                        let present = model.contains_key(&(ino, name));
                        let r = x.set(ino, name, vec![v; v as usize], mode);
                        let ok = match mode {
                            SetMode::Any => true,
                            SetMode::Create => !present,
                            SetMode::Replace => present,
                        };
                        prop_assert_eq!(r.is_ok(), ok);
                        if ok { model.insert((ino, name), vec![v; v as usize]); }
                        r.unwrap_or_default()
                    }
                    1 => {
                        let r = x.remove(ino, name);
                        prop_assert_eq!(r.is_ok(), model.remove(&(ino, name)).is_some());
                        r.unwrap_or_default()
                    }
                    2 => {
                        model.retain(|(i, _), _| *i != ino);
                        x.remove_all(ino)
                    }
                    _ => Vec::new(),
                };
                for c in changes {
                    match c {
                        XattrChange::Put { ino, name, value } => { rows.insert((ino, name), value); }
                        XattrChange::Del { ino, name } => { rows.remove(&(ino, name)); }
                    }
                }
                for i in 0..3u64 {
                    let mut want: Vec<&str> = model.keys().filter(|(m, _)| *m == i).map(|(_, n)| *n).collect();
                    want.sort_unstable();
                    prop_assert_eq!(x.list(i), want);
                    for name in names {
                        prop_assert_eq!(x.get(i, name).ok(), model.get(&(i, name)).cloned());
                    }
                }
            }
            let reloaded = Xattrs::load(rows.into_iter().map(|((i, n), v)| (i, n, v)));
            for i in 0..3u64 {
                prop_assert_eq!(reloaded.list(i), x.list(i));
            }
        }
    }
}
