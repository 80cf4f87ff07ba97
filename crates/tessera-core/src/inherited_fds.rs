//! The table of Tessera descriptors a program hands to the program it executes, as the
//! interposer passes it in `TESSERA_FDS`: per descriptor its number, the identity (device and
//! inode) of the placeholder the descriptor must still be open on, its status flags and its
//! path. Entries are `fd:dev:ino:flags:path-in-hex` joined by `,` (hex so that no path can
//! hold a separator); a malformed entry is skipped, never trusted.

/// One inherited descriptor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InheritedFd {
    pub fd: i32,
    pub dev: u64,
    pub ino: u64,
    pub flags: i32,
    pub path: String,
}

impl InheritedFd {
    /// The entry's text.
    pub fn encode(&self) -> String {
        let hex: String = self.path.bytes().map(|b| format!("{b:02x}")).collect();
        format!("{}:{}:{}:{}:{hex}", self.fd, self.dev, self.ino, self.flags)
    }

    /// One entry, or `None` if it is malformed.
    pub fn decode(s: &str) -> Option<InheritedFd> {
        let mut f = s.split(':');
        let (fd, dev, ino, flags, hex) = (f.next()?, f.next()?, f.next()?, f.next()?, f.next()?);
        if f.next().is_some() || hex.len() % 2 != 0 {
            return None;
        }
        let bytes = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
            .collect::<Option<Vec<u8>>>()?;
        Some(InheritedFd {
            fd: fd.parse().ok().filter(|fd| *fd >= 0)?,
            dev: dev.parse().ok()?,
            ino: ino.parse().ok()?,
            flags: flags.parse().ok()?,
            path: String::from_utf8(bytes).ok()?,
        })
    }

    /// The well-formed entries of a whole table.
    pub fn decode_all(table: &str) -> Vec<InheritedFd> {
        table.split(',').filter_map(InheritedFd::decode).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn tables_survive_encoding(
            fds in proptest::collection::vec((0..1 << 20, any::<u64>(), any::<u64>(), any::<i32>(), "[^\u{0}]{0,40}"), 0..5)
        ) {
            let fds: Vec<InheritedFd> = fds
                .into_iter()
                .map(|(fd, dev, ino, flags, path)| InheritedFd { fd, dev, ino, flags, path })
                .collect();
            let table = fds.iter().map(InheritedFd::encode).collect::<Vec<_>>().join(",");
            prop_assert_eq!(InheritedFd::decode_all(&table), fds);
        }

        #[test]
        fn hostile_tables_decode_to_valid_entries_only(s in "[0-9a-f:,-]{0,80}") {
            for e in InheritedFd::decode_all(&s) {
                prop_assert!(e.fd >= 0);
                prop_assert_eq!(InheritedFd::decode(&e.encode()), Some(e.clone()));
            }
        }
    }

    #[test]
    fn malformed_entries_are_skipped() {
        let good = InheritedFd {
            fd: 1,
            dev: 2,
            ino: 3,
            flags: 1,
            path: "/tessera/x".into(),
        };
        let table = format!("-1:2:3:1:2f,1:2:3:1:2,x,{},1:2:3:1:2f:9", good.encode());
        assert_eq!(InheritedFd::decode_all(&table), vec![good]);
    }
}
