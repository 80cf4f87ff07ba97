//! Symbolic links in the PFS directory: shown as links, never followed by a change, followed
//! by a read only to a target beneath the PFS root. Links are planted as an attacker (or an
//! unlucky user) would, on the leaf and on a directory of the path, pointing outside.

mod common;

use common::{Inst, scratch};
use std::os::unix::fs::symlink;
use std::path::Path;
use tessera_client::{Errno, FileKind, OpenOptions};

fn read_all(c: &tessera_client::Client, p: &str) -> Result<Vec<u8>, tessera_client::FsError> {
    let mut f = c.open_read(p)?;
    let n = f.len()? as usize;
    let mut buf = vec![0u8; n];
    f.read_exact_at(&mut buf, 0)?;
    Ok(buf)
}

/// The outside world: files that no Tessera operation may touch.
struct Outside {
    dir: std::path::PathBuf,
}

impl Outside {
    fn new() -> Outside {
        let dir = scratch("outside");
        for name in ["trunc", "del", "secret"] {
            std::fs::write(dir.join(name), format!("outside {name}")).unwrap();
        }
        Outside { dir }
    }

    fn intact(&self) {
        for name in ["trunc", "del", "secret"] {
            assert_eq!(
                std::fs::read_to_string(self.dir.join(name)).unwrap_or_default(),
                format!("outside {name}"),
                "the outside file {name} was changed"
            );
        }
        let extra: Vec<_> = std::fs::read_dir(&self.dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .filter(|n| !["trunc", "del", "secret"].contains(&n.to_str().unwrap()))
            .collect();
        assert!(extra.is_empty(), "files appeared outside: {extra:?}");
    }
}

fn link(target: &Path, at: &Path) {
    symlink(target, at).unwrap();
}

#[test]
fn links_on_the_leaf_are_shown_and_never_followed_by_a_change() {
    let inst = Inst::start(2);
    let out = Outside::new();
    let pfs = inst.pfs();
    std::fs::write(pfs.join("data"), b"inside data").unwrap();
    link(&out.dir.join("trunc"), &pfs.join("l-trunc"));
    link(&out.dir.join("del"), &pfs.join("l-del"));
    link(&out.dir.join("secret"), &pfs.join("l-secret"));
    link(Path::new("data"), &pfs.join("l-inside"));
    link(&out.dir.join("trunc"), &pfs.join("l-chmod"));
    let c = inst.client(0);

    // Shown as links, with their targets.
    let a = c.stat("/tessera/l-trunc").unwrap();
    assert_eq!(a.kind, FileKind::Symlink);
    assert_eq!(
        c.readlink("/tessera/l-trunc").unwrap(),
        out.dir.join("trunc").display().to_string()
    );
    let names: Vec<(String, FileKind)> = c
        .readdir("/tessera")
        .unwrap()
        .into_iter()
        .map(|e| (e.name, e.kind))
        .collect();
    assert!(
        names.contains(&("l-del".into(), FileKind::Symlink)),
        "{names:?}"
    );
    assert!(
        names.contains(&("data".into(), FileKind::File)),
        "{names:?}"
    );

    // Changes through a link are refused; the link itself may be removed or renamed.
    let e = c.truncate("/tessera/l-trunc", 0).unwrap_err();
    assert_eq!(e.errno, Errno::Loop, "{e}");
    let e = c
        .open("/tessera/l-trunc", OpenOptions::new().write(true))
        .err()
        .expect("write open through a link");
    assert_eq!(e.errno, Errno::Loop, "{e}");
    let e = c
        .set_attr(
            "/tessera/l-chmod",
            tessera_client::AttrChange {
                mode: Some(0o600),
                ..Default::default()
            },
        )
        .unwrap_err();
    // A chmod of the link itself (links have no mode, as on Linux), never of its target.
    assert_eq!(e.errno, Errno::NotSup, "{e}");
    c.unlink("/tessera/l-del").unwrap();
    assert!(
        std::fs::symlink_metadata(pfs.join("l-del")).is_err(),
        "the link stays"
    );
    c.rename("/tessera/l-secret", "/tessera/l-moved").unwrap();
    assert!(
        std::fs::symlink_metadata(pfs.join("l-moved"))
            .unwrap()
            .file_type()
            .is_symlink()
    );

    // A read follows a link only to a target beneath the PFS root.
    assert_eq!(read_all(&c, "/tessera/l-inside").unwrap(), b"inside data");
    let e = read_all(&c, "/tessera/l-moved").unwrap_err();
    assert_eq!(e.errno, Errno::XDev, "{e}");
    out.intact();
}

#[test]
fn links_on_a_directory_of_the_path_are_not_followed() {
    let inst = Inst::start(2);
    let out = Outside::new();
    let pfs = inst.pfs();
    link(&out.dir, &pfs.join("dirlink"));
    std::fs::write(pfs.join("mine"), b"a PFS file").unwrap();
    let c = inst.client(1);

    // Lookups through the link find nothing (nothing outside is imported).
    for p in ["/tessera/dirlink/trunc", "/tessera/dirlink/secret"] {
        let e = c.stat(p).unwrap_err();
        assert!(matches!(e.errno, Errno::NotDir | Errno::NoEnt), "{p}: {e}");
        let e = c.truncate(p, 0).unwrap_err();
        assert!(matches!(e.errno, Errno::NotDir | Errno::NoEnt), "{p}: {e}");
        let e = c.unlink(p).unwrap_err();
        assert!(matches!(e.errno, Errno::NotDir | Errno::NoEnt), "{p}: {e}");
    }
    let e = c
        .rename("/tessera/mine", "/tessera/dirlink/moved")
        .unwrap_err();
    assert!(matches!(e.errno, Errno::NotDir | Errno::NoEnt), "{e}");
    assert_eq!(std::fs::read(pfs.join("mine")).unwrap(), b"a PFS file");

    // A directory replaced by a link after Tessera knew it: a flush of a sized file without
    // bytes, a truncate, an unlink and a rename inside it stay inside the PFS directory.
    c.mkdir("/tessera/d", 0o755).unwrap();
    let f = c.create("/tessera/d/sized").unwrap();
    f.close().unwrap();
    c.truncate("/tessera/d/sized", 4096).unwrap();
    let _ = std::fs::remove_dir_all(pfs.join("d"));
    link(&out.dir, &pfs.join("d"));
    let e = c.flush_path("/tessera/d/sized").unwrap_err();
    assert_eq!(e.errno, Errno::Loop, "{e}");
    let _ = c.truncate("/tessera/d/trunc", 0);
    let _ = c.unlink("/tessera/d/del");
    let _ = c.rename("/tessera/d/sized", "/tessera/d/secret");
    out.intact();
}

#[test]
fn a_file_replaced_by_a_link_after_tessera_knew_it() {
    let inst = Inst::start(2);
    let out = Outside::new();
    let pfs = inst.pfs();
    std::fs::write(pfs.join("f"), b"pfs file f").unwrap();
    std::fs::write(pfs.join("g"), b"pfs file g").unwrap();
    let c = inst.client(0);
    assert_eq!(c.stat("/tessera/f").unwrap().size, 10);
    assert_eq!(c.stat("/tessera/g").unwrap().size, 10);
    for (name, target) in [("f", "trunc"), ("g", "secret")] {
        std::fs::remove_file(pfs.join(name)).unwrap();
        link(&out.dir.join(target), &pfs.join(name));
    }
    // A truncate acts on the PFS copy only if it is a regular file beneath the root.
    c.truncate("/tessera/f", 3).unwrap();
    // A read of the PFS copy does not follow the link out.
    let r = read_all(&c, "/tessera/g").unwrap();
    assert!(
        !r.starts_with(b"outside"),
        "read {:?}",
        String::from_utf8_lossy(&r)
    );
    // A flush replaces the planted link with the file, and copies nothing from outside.
    assert_eq!(c.flush_path("/tessera/g").unwrap(), 0);
    let published = std::fs::read(pfs.join("g")).unwrap();
    assert!(!published.starts_with(b"outside"), "{published:?}");
    out.intact();
}
