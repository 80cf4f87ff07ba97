//! The table of Tessera files a program hands to the program it executes, as the interposer
//! passes it in `TESSERA_FDS`: per open file, the identity (device and inode) of the
//! placeholder its descriptors hold, its status flags and its path. The new program finds
//! the descriptors itself, by that identity, among those it has: the table names no
//! descriptor numbers, so a child that moved a descriptor before the exec (`posix_spawn`'s
//! `dup2` actions, a shell's redirection) is served. Entries are `dev:ino:flags:path-in-hex`
//! joined by `,` (hex so that no path can hold a separator); a malformed entry is skipped,
//! never trusted.

/// One inherited file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InheritedFile {
    pub dev: u64,
    pub ino: u64,
    pub flags: i32,
    pub path: String,
}

impl InheritedFile {
    /// The entry's text.
    pub fn encode(&self) -> String {
        let hex: String = self.path.bytes().map(|b| format!("{b:02x}")).collect();
        format!("{}:{}:{}:{hex}", self.dev, self.ino, self.flags)
    }

    /// One entry, or `None` if it is malformed.
    pub fn decode(s: &str) -> Option<InheritedFile> {
        let mut f = s.split(':');
        let (dev, ino, flags, hex) = (f.next()?, f.next()?, f.next()?, f.next()?);
        if f.next().is_some() || hex.len() % 2 != 0 {
            return None;
        }
        let bytes = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
            .collect::<Option<Vec<u8>>>()?;
        Some(InheritedFile {
            dev: dev.parse().ok()?,
            ino: ino.parse().ok()?,
            flags: flags.parse().ok()?,
            path: String::from_utf8(bytes).ok()?,
        })
    }

    /// The well-formed entries of a whole table.
    pub fn decode_all(table: &str) -> Vec<InheritedFile> {
        table.split(',').filter_map(InheritedFile::decode).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn tables_survive_encoding(
            files in proptest::collection::vec((any::<u64>(), any::<u64>(), any::<i32>(), "[^\u{0}]{0,40}"), 0..5)
        ) {
            let files: Vec<InheritedFile> = files
                .into_iter()
                .map(|(dev, ino, flags, path)| InheritedFile { dev, ino, flags, path })
                .collect();
            let table = files.iter().map(InheritedFile::encode).collect::<Vec<_>>().join(",");
            prop_assert_eq!(InheritedFile::decode_all(&table), files);
        }

        #[test]
        fn hostile_tables_decode_to_well_formed_entries_only(s in "[0-9a-f:,-]{0,80}") {
            for e in InheritedFile::decode_all(&s) {
                prop_assert_eq!(InheritedFile::decode(&e.encode()), Some(e.clone()));
            }
        }
    }

    #[test]
    fn malformed_entries_are_skipped() {
        let good = InheritedFile {
            dev: 2,
            ino: 3,
            flags: 1,
            path: "/tessera/x".into(),
        };
        let table = format!("-2:3:1:2f,2:3:1:2,x,{},2:3:1:2f:9", good.encode());
        assert_eq!(InheritedFile::decode_all(&table), vec![good]);
    }
}
