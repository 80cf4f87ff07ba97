//! Directory listings in pages with attributes (readdir-plus): every name once, in order,
//! whatever the page size; the PFS's own entries in their pages; attributes as a stat gives
//! them; hostile cursors and sizes refused.

mod common;

use common::Inst;
use tessera_client::{Errno, OpenOptions};

fn write(c: &tessera_client::Client, path: &str, bytes: &[u8]) {
    let mut f = c
        .open(path, OpenOptions::new().write(true).create(true))
        .unwrap();
    f.write_at(bytes, 0).unwrap();
    f.close().unwrap();
}

#[test]
fn pages_list_every_name_once_with_its_attributes() {
    let inst = Inst::start(3);
    let c = inst.client(0);
    c.mkdir("/tessera/d", 0o755).unwrap();
    let mut want: Vec<String> = Vec::new();
    for i in 0..300 {
        let name = format!("f{i:03}");
        write(&c, &format!("/tessera/d/{name}"), &vec![b'x'; i % 17]);
        want.push(name);
    }
    c.mkdir("/tessera/d/sub", 0o755).unwrap();
    want.push("sub".into());
    // Renamed in from elsewhere: its inode is on whichever shard made it, not its name's.
    for i in 0..20 {
        let from = format!("/tessera/m{i}");
        write(&c, &from, b"moved");
        c.rename(&from, &format!("/tessera/d/moved{i:02}")).unwrap();
        want.push(format!("moved{i:02}"));
    }
    // Entries only the PFS holds appear in their pages too.
    std::fs::create_dir_all(inst.pfs().join("d")).unwrap();
    for name in ["a-pfs-only", "zz-pfs-only", "f150x"] {
        std::fs::write(inst.pfs().join("d").join(name), b"from the pfs").unwrap();
        want.push(name.into());
    }
    want.sort();
    for limit in [1, 7, 64, 4096] {
        let mut got = Vec::new();
        let mut after = None;
        let mut pages = 0;
        loop {
            let page = c.readdir_page("/tessera/d", after.clone(), limit).unwrap();
            pages += 1;
            // At most a limit from each shard, and the PFS's own names of the page.
            assert!(
                page.entries.len() <= 3 * limit as usize + 3,
                "limit {limit}"
            );
            for (e, attr) in &page.entries {
                let attr = attr
                    .as_ref()
                    .unwrap_or_else(|| panic!("{}: no attributes", e.name));
                let stat = c.stat(&format!("/tessera/d/{}", e.name)).unwrap();
                assert_eq!(attr.ino, e.ino, "{}", e.name);
                assert_eq!(
                    (attr.size, attr.kind, attr.mode),
                    (stat.size, stat.kind, stat.mode)
                );
                got.push(e.name.clone());
            }
            match page.next {
                Some(n) => after = Some(n),
                None => break,
            }
            assert!(
                pages <= want.len() + 1,
                "limit {limit}: the listing does not end"
            );
        }
        assert_eq!(got, want, "limit {limit}");
    }
    let plain: Vec<String> = c
        .readdir("/tessera/d")
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(plain, want);
}

#[test]
fn hostile_cursors_and_page_sizes_are_refused() {
    let inst = Inst::start(2);
    let c = inst.client(1);
    c.mkdir("/tessera/d", 0o755).unwrap();
    for (after, limit) in [(Some("a/b"), 5), (Some(""), 5), (None, 0)] {
        let e = c
            .readdir_page("/tessera/d", after.map(String::from), limit)
            .unwrap_err();
        assert_eq!(e.errno, Errno::Inval, "{after:?} {limit}: {e}");
    }
    // A page larger than the largest is cut to it, not refused.
    let page = c.readdir_page("/tessera/d", None, u32::MAX).unwrap();
    assert!(page.entries.is_empty() && page.next.is_none());
    // A cursor past every name: an empty last page.
    write(&c, "/tessera/d/a", b"");
    let page = c.readdir_page("/tessera/d", Some("zzz".into()), 5).unwrap();
    assert!(page.entries.is_empty() && page.next.is_none());
}
