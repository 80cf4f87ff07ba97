//! Flush to the PFS: a published file keeps its mode and its holes, and a flush that a crash
//! interrupts leaves nothing behind once its daemon is back.

mod common;

use common::Inst;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::Duration;
use tessera_client::OpenOptions;

fn temporaries(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.contains(".tessera-flush.") {
            out.push(name);
        }
    }
    out
}

#[test]
fn a_flushed_file_keeps_its_mode() {
    let inst = Inst::start(2);
    let c = inst.client(0);
    for (name, mode) in [("private", 0o600), ("shared", 0o644), ("script", 0o750)] {
        let p = format!("/tessera/{name}");
        let mut f = c
            .open(&p, OpenOptions::new().write(true).create(true).mode(mode))
            .unwrap();
        f.write_at(b"contents", 0).unwrap();
        f.close().unwrap();
        inst.client(1).flush_path(&p).unwrap();
        let m = std::fs::metadata(inst.pfs().join(name)).unwrap();
        assert_eq!(
            m.permissions().mode() & 0o7777,
            mode,
            "{name}: published with mode {:o}",
            m.permissions().mode() & 0o7777
        );
    }
    // A chmod in Tessera reaches the PFS copy at the next flush.
    c.set_attr(
        "/tessera/shared",
        tessera_client::AttrChange {
            mode: Some(0o600),
            ..Default::default()
        },
    )
    .unwrap();
    c.flush_path("/tessera/shared").unwrap();
    let m = std::fs::metadata(inst.pfs().join("shared")).unwrap();
    assert_eq!(m.permissions().mode() & 0o7777, 0o600);
}

#[test]
fn a_flushed_file_keeps_its_holes() {
    let inst = Inst::start(2);
    let c = inst.client(0);
    const GIB: u64 = 1 << 30;
    let mut f = c
        .open(
            "/tessera/sparse",
            OpenOptions::new().read(true).write(true).create(true),
        )
        .unwrap();
    f.write_at(b"head", 0).unwrap();
    f.write_at(b"tail", GIB - 4).unwrap();
    f.close().unwrap();
    // Flushed twice: the second flush starts from the first one's PFS copy.
    for round in 0..2 {
        c.flush_path("/tessera/sparse").unwrap();
        let m = std::fs::metadata(inst.pfs().join("sparse")).unwrap();
        assert_eq!(m.len(), GIB);
        let allocated = m.blocks() * 512;
        assert!(
            allocated < 16 << 20,
            "flush {round}: a file of 8 written bytes and a 1 GiB hole takes {allocated} bytes on the PFS"
        );
    }
    let pfs = std::fs::read(inst.pfs().join("sparse")).unwrap();
    assert_eq!(&pfs[..4], b"head");
    assert_eq!(&pfs[pfs.len() - 4..], b"tail");
    assert!(pfs[4..pfs.len() - 4].iter().all(|b| *b == 0));
}

#[test]
fn a_crash_during_flush_leaves_no_temporary() {
    let inst = Inst::start(2);
    let c = inst.client(0);
    let p = "/tessera/big";
    let chunk = vec![7u8; 4 << 20];
    let mut f = c.create(p).unwrap();
    for i in 0..48u64 {
        f.write_at(&chunk, i * chunk.len() as u64).unwrap();
    }
    f.close().unwrap();
    let coordinator = tessera_core::placement::ino_shard(c.stat(p).unwrap().ino);
    let flusher = {
        let layout = inst.layout.clone();
        std::thread::spawn(move || {
            let c = tessera_client::Client::connect(layout, Some(1 - coordinator)).unwrap();
            c.flush_path("/tessera/big")
        })
    };
    // Kill the coordinator as soon as its temporary exists.
    tessera_testkit::eventually_busy(
        Duration::from_secs(30),
        "the flush creates its temporary",
        || !temporaries(&inst.pfs()).is_empty(),
    );
    inst.kill9(coordinator);
    let _ = flusher.join().unwrap();
    inst.restart(coordinator);
    assert_eq!(
        temporaries(&inst.pfs()),
        Vec::<String>::new(),
        "temporaries left after the restart"
    );
    // And the file flushes whole afterwards.
    assert_eq!(c.flush_path(p).unwrap(), 48 * (4 << 20));
    assert_eq!(
        std::fs::metadata(inst.pfs().join("big")).unwrap().len(),
        48 * (4 << 20)
    );
}
