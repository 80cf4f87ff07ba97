//! The namespace across daemons, flush to the PFS, and reads of unowned ranges from it.

mod common;

use common::Inst;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use tessera_client::{Errno, FileKind, Model, OpenOptions};

#[test]
fn directories_files_rename_unlink_across_daemons() {
    let inst = Inst::start(3);
    let a = inst.client(0);
    let b = inst.client(2);
    a.mkdir("/tessera/run", 0o755).unwrap();
    assert_eq!(
        a.mkdir("/tessera/run", 0o755).unwrap_err().errno,
        Errno::Exist
    );
    assert_eq!(
        a.mkdir("/tessera/no/such", 0o755).unwrap_err().errno,
        Errno::NoEnt
    );
    for i in 0..30 {
        let mut f = a.create(&format!("/tessera/run/f{i:02}")).unwrap();
        f.write_at(format!("file {i}").as_bytes(), 0).unwrap();
        f.close().unwrap();
    }
    // Entries hash to every daemon; a listing from another node sees all of them.
    let names: Vec<String> = b
        .readdir("/tessera/run")
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(
        names,
        (0..30).map(|i| format!("f{i:02}")).collect::<Vec<_>>()
    );
    assert_eq!(b.stat("/tessera/run/f07").unwrap().size, 6);
    assert_eq!(b.stat("/tessera/run").unwrap().kind, FileKind::Dir);
    assert_eq!(b.rmdir("/tessera/run").unwrap_err().errno, Errno::NotEmpty);
    assert_eq!(b.unlink("/tessera/run").unwrap_err().errno, Errno::IsDir);
    assert_eq!(
        b.rmdir("/tessera/run/f01").unwrap_err().errno,
        Errno::NotDir
    );

    // Rename keeps the data, replaces a target file, and moves across shards.
    b.rename("/tessera/run/f03", "/tessera/moved").unwrap();
    assert_eq!(a.stat("/tessera/run/f03").unwrap_err().errno, Errno::NoEnt);
    let mut f = a.open_read("/tessera/moved").unwrap();
    let mut buf = [0u8; 6];
    f.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"file 3");
    b.rename("/tessera/run/f04", "/tessera/moved").unwrap();
    let mut f = a.open_read("/tessera/moved").unwrap();
    f.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"file 4");

    // Truncate shrinks for everyone; growing leaves a hole of zeros.
    a.truncate("/tessera/moved", 2).unwrap();
    assert_eq!(b.stat("/tessera/moved").unwrap().size, 2);
    a.truncate("/tessera/moved", 5).unwrap();
    let mut f = b.open_read("/tessera/moved").unwrap();
    let mut five = [9u8; 5];
    f.read_exact_at(&mut five, 0).unwrap();
    assert_eq!(&five, b"fi\0\0\0");

    for i in (0..30).filter(|i| *i != 3 && *i != 4) {
        b.unlink(&format!("/tessera/run/f{i:02}")).unwrap();
    }
    b.rmdir("/tessera/run").unwrap();
    assert_eq!(a.readdir("/tessera").unwrap().len(), 1);
    assert_eq!(
        a.unlink("/tessera/run/f00").unwrap_err().errno,
        Errno::NoEnt
    );
}

#[test]
fn one_shared_file_spreads_ownership_over_all_daemons() {
    let inst = Inst::start_with(3, &["--stripe-size", "65536"]);
    let c = inst.client(0);
    let mut f = c
        .open(
            "/tessera/wide",
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .model(Model::Commit),
        )
        .unwrap();
    f.write_at(&vec![5u8; 1 << 20], 0).unwrap();
    f.commit().unwrap();
    let mut holders = std::collections::BTreeSet::new();
    for n in 0..3 {
        let s = inst.client(n).status().unwrap();
        if s.ownership_entries > 0 {
            holders.insert(n);
        }
    }
    assert_eq!(holders.len(), 3, "16 stripes should land on every daemon");
    let out = inst.tessera(&["where", "/tessera/wide"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("node 0 holds 1.0 MiB"), "{text}");
}

#[test]
fn a_whole_file_answer_larger_than_a_frame_comes_in_pages() {
    const PIECES: u64 = 140_000;
    let inst = Inst::start_with(2, &["--stripe-size", "65536", "--set", "max_frame=1048576"]);
    let c = inst.client(0);
    let mut f = c
        .open(
            "/tessera/sparse",
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .model(Model::Session),
        )
        .unwrap();
    // Pieces at irregular gaps: no two neighbours continue a stride, so one run each.
    let mut offsets = Vec::new();
    let mut at = 0u64;
    for i in 0..PIECES {
        f.write_at(&at.to_le_bytes(), at).unwrap();
        offsets.push(at);
        at += 16 + (i.wrapping_mul(2_654_435_761) >> 7) % 61;
    }
    f.close().unwrap();
    let r = inst.client(1);
    let mut g = r
        .open(
            "/tessera/sparse",
            OpenOptions::new().read(true).model(Model::Session),
        )
        .unwrap();
    let runs = g.query_file().unwrap();
    let bytes = tessera_proto::frame::encode(&runs).len();
    assert!(
        bytes > 1 << 20,
        "the answer ({bytes} bytes) would have fit in one frame"
    );
    // Every byte written, once (a piece across a stripe boundary is two runs).
    assert_eq!(runs.iter().map(|r| r.run.bytes()).sum::<u64>(), PIECES * 8);
    assert!(runs.windows(2).all(|w| w[0].run.start < w[1].run.start));
    // A ranged query over more than 64 stripes is paged as well (clipped to its range).
    let (lo, hi) = (offsets[1000] + 3, offsets[PIECES as usize - 1000]);
    let ranged = g.query(lo, hi - lo).unwrap();
    let want: u64 = runs
        .iter()
        .flat_map(|r| r.run.clip(lo, hi))
        .map(|r| r.bytes())
        .sum();
    assert_eq!(ranged.iter().map(|r| r.run.bytes()).sum::<u64>(), want);
    assert!(
        ranged
            .iter()
            .all(|r| r.run.start >= lo && r.run.end() <= hi)
    );
    // The open's own query was paged too: reads use the owners it learned.
    let queries = r.stats().queries;
    for &o in offsets.iter().step_by(997) {
        let mut b = [0u8; 8];
        g.read_at(&mut b, o).unwrap();
        assert_eq!(u64::from_le_bytes(b), o, "piece at {o}");
    }
    assert_eq!(r.stats().queries, queries, "a session read asked again");
}

#[test]
fn flush_publishes_atomically_and_unowned_ranges_come_from_the_pfs() {
    let inst = Inst::start(3);
    let w = inst.client(1);
    let pfs_file = inst.pfs().join("out/data");
    w.mkdir("/tessera/out", 0o755).unwrap();
    let size = 6 << 20;
    let mut f = w
        .open(
            "/tessera/out/data",
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .model(Model::Commit),
        )
        .unwrap();
    f.write_at(&vec![1u8; size], 0).unwrap();
    assert_eq!(f.flush_file().unwrap(), size as u64);
    assert_eq!(std::fs::read(&pfs_file).unwrap(), vec![1u8; size]);

    // While new versions are flushed, a reader of the PFS sees whole versions only. The
    // premise is checked: versions are flushed until the reader has made reads that
    // overlapped a flush (one was running when the read began or ended, or ran in between).
    let stop = Arc::new(AtomicBool::new(false));
    let flushing = Arc::new(AtomicBool::new(false));
    let flushes = Arc::new(AtomicU64::new(0));
    let overlapped = Arc::new(AtomicU64::new(0));
    let watcher = {
        let (stop, path) = (stop.clone(), pfs_file.clone());
        let (flushing, flushes, overlapped) =
            (flushing.clone(), flushes.clone(), overlapped.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let (busy, done) = (
                    flushing.load(Ordering::SeqCst),
                    flushes.load(Ordering::SeqCst),
                );
                let data = std::fs::read(&path).unwrap();
                assert_eq!(data.len(), size, "partly flushed file visible");
                assert!(data.iter().all(|b| *b == data[0]), "mixed versions visible");
                if busy || flushing.load(Ordering::SeqCst) || flushes.load(Ordering::SeqCst) != done
                {
                    overlapped.fetch_add(1, Ordering::SeqCst);
                }
            }
        })
    };
    let mut v = 1u8;
    while overlapped.load(Ordering::SeqCst) < 3 {
        v += 1;
        assert!(v < 100, "no read overlapped any of {} flushes", v - 2);
        f.write_at(&vec![v; size], 0).unwrap();
        flushing.store(true, Ordering::SeqCst);
        f.flush_file().unwrap();
        flushing.store(false, Ordering::SeqCst);
        flushes.fetch_add(1, Ordering::SeqCst);
    }
    stop.store(true, Ordering::SeqCst);
    watcher.join().unwrap();
    assert!(
        std::fs::read(&pfs_file).unwrap() == vec![v; size],
        "the PFS copy is version {v} throughout"
    );

    // Give up ownership: the bytes are now served from the PFS copy.
    f.detach_file().unwrap();
    let r = inst.client(2);
    let mut g = r
        .open(
            "/tessera/out/data",
            OpenOptions::new().read(true).model(Model::Commit),
        )
        .unwrap();
    assert!(g.query_file().unwrap().is_empty());
    let mut buf = vec![0u8; 4096];
    g.read_exact_at(&mut buf, 1 << 20).unwrap();
    assert!(
        buf.iter().all(|b| *b == v),
        "the PFS copy holds version {v}"
    );

    // A partial overwrite is flushed over the old PFS contents.
    let mut h = r
        .open(
            "/tessera/out/data",
            OpenOptions::new()
                .read(true)
                .write(true)
                .model(Model::Commit),
        )
        .unwrap();
    h.write_at(b"XYZ", 10).unwrap();
    h.flush_file().unwrap();
    let data = std::fs::read(&pfs_file).unwrap();
    assert_eq!(&data[8..15], &[v, v, b'X', b'Y', b'Z', v, v]);
    assert_eq!(data.len(), size);
}

#[test]
fn files_already_on_the_pfs_appear_in_the_namespace() {
    let inst = Inst::start(2);
    std::fs::create_dir_all(inst.pfs().join("input")).unwrap();
    std::fs::write(inst.pfs().join("input/mesh.dat"), b"pre-existing data").unwrap();
    let c = inst.client(1);
    let names: Vec<String> = c
        .readdir("/tessera/input")
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, vec!["mesh.dat"]);
    assert_eq!(c.stat("/tessera/input/mesh.dat").unwrap().size, 17);
    let mut f = c.open_read("/tessera/input/mesh.dat").unwrap();
    let mut buf = [0u8; 17];
    f.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"pre-existing data");
    // Unlinking removes the PFS copy too (otherwise it would come back).
    c.unlink("/tessera/input/mesh.dat").unwrap();
    assert!(!inst.pfs().join("input/mesh.dat").exists());
    assert_eq!(
        c.stat("/tessera/input/mesh.dat").unwrap_err().errno,
        Errno::NoEnt
    );
}

#[test]
fn forked_child_becomes_a_new_client() {
    let inst = Inst::start(2);
    let c = inst.client(0);
    let mut f = c
        .open(
            "/tessera/fork",
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .model(Model::Commit),
        )
        .unwrap();
    f.write_at(b"parent", 0).unwrap();
    f.commit().unwrap();
    let (_, parent_id) = c.identity();
    // SAFETY: the child only uses the client (no threads are running in this test's client)
    // and exits with _exit.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let code = (|| -> Result<i32, tessera_client::FsError> {
            f.write_at(b"child!", 6)?;
            f.commit()?;
            let (_, child_id) = c.identity();
            let mut buf = [0u8; 12];
            f.read_exact_at(&mut buf, 0)?;
            Ok(
                if child_id != parent_id && child_id != 0 && &buf == b"parentchild!" {
                    0
                } else {
                    2
                },
            )
        })()
        .unwrap_or(3);
        // SAFETY: leave without running the parent's destructors twice.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waiting for the child forked above.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child failed: status {status}"
    );
    let mut buf = [0u8; 12];
    f.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"parentchild!");
    f.write_at(b"P", 0).unwrap();
    f.commit().unwrap();
}

/// Ranks flushing their own ranges of one file at the same time all land in the PFS file.
#[test]
fn concurrent_range_flushes_of_one_file_all_land() {
    let inst = Inst::start(3);
    let part = 1u64 << 20;
    let threads: Vec<_> = (0..3u32)
        .map(|n| {
            let c = inst.client(n);
            std::thread::spawn(move || {
                let mut f = c
                    .open(
                        "/tessera/shared",
                        OpenOptions::new()
                            .write(true)
                            .create(true)
                            .model(Model::Commit),
                    )
                    .unwrap();
                f.write_at(&vec![n as u8 + 1; part as usize], u64::from(n) * part)
                    .unwrap();
                f.commit().unwrap();
                f.flush(u64::from(n) * part, part).unwrap();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let data = std::fs::read(inst.pfs().join("shared")).unwrap();
    assert_eq!(data.len() as u64, 3 * part);
    for n in 0..3u64 {
        let chunk = &data[(n * part) as usize..((n + 1) * part) as usize];
        assert!(
            chunk.iter().all(|b| u64::from(*b) == n + 1),
            "range of rank {n} lost"
        );
    }
}
