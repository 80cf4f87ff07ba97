//! `tessera stage-in` and `stage-out`: trees and manifests copied in parallel by a worker
//! per node, every copy checked by its CRC32C, reruns skipping what a completion record
//! says is staged, runs cut short (the command killed, or a daemon) finished by a rerun, and
//! files of the PFS directory brought into the burst buffers in place.

mod common;

use common::{Inst, eventually_ok, scratch};
use std::path::Path;
use std::time::Duration;
use tessera_core::staging::{COMPLETION_XATTR, Completion};

/// `size` bytes that differ from file to file.
fn bytes(seed: u64, size: usize) -> Vec<u8> {
    (0..size)
        .map(|i| ((i as u64).wrapping_mul(31).wrapping_add(seed * 7919) % 251) as u8)
        .collect()
}

/// A tree of `n` files (some in subdirectories), file `i` of `size(i)` bytes.
fn tree(dir: &Path, n: u64, size: impl Fn(u64) -> usize) {
    for i in 0..n {
        let p = if i % 3 == 0 {
            dir.join(format!("sub{}/f{i}", i % 2))
        } else {
            dir.join(format!("f{i}"))
        };
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes(i, size(i))).unwrap();
    }
}

/// Every file of local `src` has the same bytes at Tessera path `dest` (the same relative
/// path).
fn same_in_tessera(inst: &Inst, src: &Path, dest: &str) -> usize {
    let c = inst.client(0);
    let mut n = 0;
    for e in walk(src) {
        let rel = e.strip_prefix(src).unwrap().to_str().unwrap().to_string();
        let want = std::fs::read(&e).unwrap();
        let mut f = c.open_read(&format!("{dest}/{rel}")).unwrap();
        let mut got = vec![0u8; want.len()];
        f.read_exact_at(&mut got, 0).unwrap();
        assert_eq!(f.len().unwrap(), want.len() as u64, "{rel}");
        assert!(got == want, "{rel} differs");
        n += 1;
    }
    n
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

fn stage(inst: &Inst, args: &[&str]) -> String {
    let out = inst.tessera(args);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "tessera {args:?}: {text}");
    text
}

/// The number before `word` in a summary (`staged in 12 files`: 12).
fn count(summary: &str, after: &str) -> u64 {
    let at = summary
        .find(after)
        .unwrap_or_else(|| panic!("{after:?} in {summary}"))
        + after.len();
    summary[at..]
        .trim_start()
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn a_tree_is_staged_in_by_every_node_and_a_rerun_copies_only_what_changed() {
    let inst = Inst::start(3);
    let work = scratch("stage-in");
    let src = work.join("input");
    tree(&src, 12, |i| 200_000 + (i as usize) * 1000);
    let src_s = src.to_str().unwrap();
    let summary = stage(&inst, &["stage-in", src_s, "/tessera/run"]);
    assert_eq!(count(&summary, "staged in"), 12, "{summary}");
    assert_eq!(same_in_tessera(&inst, &src, "/tessera/run/input"), 12);
    // Each node's worker copied a share, into its own burst buffer.
    let per_node = summary.split("per node:").nth(1).unwrap();
    for n in 0..3 {
        assert!(per_node.contains(&format!("{n}:")), "{summary}");
        assert!(
            !per_node.contains(&format!("{n}:0 B")),
            "node {n} staged nothing: {summary}"
        );
    }
    let c = inst.client(0);
    let mut holders = std::collections::BTreeSet::new();
    for e in walk(&src) {
        let rel = e.strip_prefix(&src).unwrap().to_str().unwrap().to_string();
        let path = format!("/tessera/run/input/{rel}");
        let loc = c.locate(&path, 0, None).unwrap();
        holders.extend(
            loc.extents
                .iter()
                .filter_map(|x| x.holder.as_ref().map(|h| h.node)),
        );
        // The record names the source as copied.
        let rec = c.get_xattr(&path, COMPLETION_XATTR).unwrap();
        let rec = Completion::decode(std::str::from_utf8(&rec).unwrap()).unwrap();
        assert_eq!(rec.size, std::fs::metadata(&e).unwrap().len());
        assert_eq!(rec.crc32c, crc32c::crc32c(&std::fs::read(&e).unwrap()));
    }
    assert_eq!(holders.len(), 3, "bytes on nodes {holders:?}");
    // A rerun copies nothing and says what it skipped.
    let again = stage(&inst, &["stage-in", src_s, "/tessera/run"]);
    assert_eq!(count(&again, "staged in"), 0, "{again}");
    assert_eq!(count(&again, "skipped"), 12, "{again}");
    // A source that changed is copied again; so is a destination cut short without a
    // record, and one whose record is damaged.
    std::fs::write(src.join("f1"), bytes(99, 12345)).unwrap();
    c.remove_xattr("/tessera/run/input/f2", COMPLETION_XATTR)
        .unwrap();
    c.truncate("/tessera/run/input/f2", 10).unwrap();
    c.set_xattr(
        "/tessera/run/input/f4",
        COMPLETION_XATTR,
        b"v1 garbage",
        Default::default(),
    )
    .unwrap();
    let third = stage(&inst, &["stage-in", src_s, "/tessera/run"]);
    assert_eq!(count(&third, "staged in"), 3, "{third}");
    assert_eq!(count(&third, "skipped"), 9, "{third}");
    assert_eq!(same_in_tessera(&inst, &src, "/tessera/run/input"), 12);
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn a_manifest_stages_in_and_stage_out_flushes_or_copies_out_resumably() {
    let inst = Inst::start(2);
    let work = scratch("stage-manifest");
    let src = work.join("data");
    tree(&src, 6, |i| 1000 * (i as usize + 1));
    std::fs::write(work.join("single"), b"one file").unwrap();
    let manifest = work.join("manifest");
    std::fs::write(
        &manifest,
        format!(
            "# a job script's data set\n{} /tessera/m\n\"{}\" /tessera/m\n",
            src.display(),
            work.join("single").display()
        ),
    )
    .unwrap();
    let summary = stage(
        &inst,
        &["stage-in", "--manifest", manifest.to_str().unwrap()],
    );
    assert_eq!(count(&summary, "staged in"), 7, "{summary}");
    assert_eq!(same_in_tessera(&inst, &src, "/tessera/m/data"), 6);
    // Stage-out into the PFS directory: a flush of the tree, each file checked.
    let out = stage(&inst, &["stage-out", "/tessera/m"]);
    assert_eq!(count(&out, "staged out"), 7, "{out}");
    for e in walk(&src) {
        let rel = e.strip_prefix(&src).unwrap();
        let flushed = inst.pfs().join("m/data").join(rel);
        assert_eq!(std::fs::read(&flushed).unwrap(), std::fs::read(&e).unwrap());
    }
    assert_eq!(
        std::fs::read(inst.pfs().join("m/single")).unwrap(),
        b"one file"
    );
    let again = stage(&inst, &["stage-out", "/tessera/m"]);
    assert_eq!(count(&again, "skipped"), 7, "{again}");
    // Stage-out to a directory outside the instance: published whole, no temporaries left.
    let dest = work.join("results");
    let out = stage(
        &inst,
        &["stage-out", "/tessera/m/data", dest.to_str().unwrap()],
    );
    assert_eq!(count(&out, "staged out"), 6, "{out}");
    for e in walk(&src) {
        let rel = e.strip_prefix(&src).unwrap();
        assert_eq!(
            std::fs::read(dest.join("data").join(rel)).unwrap(),
            std::fs::read(&e).unwrap()
        );
    }
    assert!(
        walk(&dest)
            .iter()
            .all(|p| !p.to_str().unwrap().contains(".tessera-")),
        "a temporary was left"
    );
    let again = stage(
        &inst,
        &["stage-out", "/tessera/m/data", dest.to_str().unwrap()],
    );
    assert_eq!(count(&again, "skipped"), 6, "{again}");
    // A bad manifest line is refused by number.
    std::fs::write(&manifest, "/a /b /c\n").unwrap();
    let bad = inst.tessera(&["stage-in", "--manifest", manifest.to_str().unwrap()]);
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("manifest line 1"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    let _ = std::fs::remove_dir_all(&work);
}

/// Waits until some file of local tree `src` is recorded as staged under Tessera `dest`.
fn wait_first_staged(inst: &Inst, src: &Path, dest: &str) {
    let c = inst.client(0);
    eventually_ok(Duration::from_secs(60), "a first file staged", || {
        let done = walk(src).iter().any(|e| {
            let rel = e.strip_prefix(src).unwrap().to_str().unwrap().to_string();
            c.get_xattr(&format!("{dest}/{rel}"), COMPLETION_XATTR)
                .is_ok()
        });
        if done {
            Ok(())
        } else {
            Err("none yet".to_string())
        }
    });
}

/// The command killed with SIGKILL while its workers copy; a rerun finishes the job,
/// skipping what was recorded as done.
#[test]
fn a_killed_stage_in_is_finished_by_a_rerun() {
    let inst = Inst::start(2);
    let work = scratch("stage-killed");
    let src = work.join("big");
    tree(&src, 16, |_| 6 << 20);
    use std::os::unix::process::CommandExt;
    // In a process group of its own, so the kill reaches its workers too, as a scheduler's
    // kill of a job step does.
    let mut run = std::process::Command::new(common::TESSERA)
        .process_group(0)
        .arg("--instance")
        .arg(&inst.layout.dir)
        .args(["stage-in", src.to_str().unwrap(), "/tessera/k"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Once some file is recorded as staged, kill the command.
    wait_first_staged(&inst, &src, "/tessera/k/big");
    // SAFETY: kill has no memory preconditions; the negative pid names the group.
    unsafe { libc::kill(-(run.id() as i32), libc::SIGKILL) };
    run.wait().unwrap();
    // The group's last worker is gone before the rerun starts.
    eventually_ok(Duration::from_secs(20), "the killed workers gone", || {
        // SAFETY: as above; signal 0 only asks whether the group still has a member.
        match unsafe { libc::kill(-(run.id() as i32), 0) } {
            0 => Err("still running".to_string()),
            _ => Ok(()),
        }
    });
    let summary = stage(&inst, &["stage-in", src.to_str().unwrap(), "/tessera/k"]);
    let (copied, skipped) = (count(&summary, "staged in"), count(&summary, "skipped"));
    assert_eq!(copied + skipped, 16, "{summary}");
    assert!(
        skipped >= 1,
        "what finished before the kill is skipped: {summary}"
    );
    assert_eq!(same_in_tessera(&inst, &src, "/tessera/k/big"), 16);
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn files_of_the_pfs_directory_are_brought_into_the_burst_buffers_in_place() {
    let inst = Inst::start(3);
    let data = inst.pfs().join("imported");
    tree(&data, 9, |i| 300_000 + (i as usize) * 1000);
    let c = inst.client(0);
    let files: Vec<(std::path::PathBuf, String)> = walk(&data)
        .into_iter()
        .map(|e| {
            let rel = e.strip_prefix(&data).unwrap().to_str().unwrap().to_string();
            (e, format!("/tessera/imported/{rel}"))
        })
        .collect();
    // One file was partly rewritten through Tessera: those bytes are newer than its PFS
    // copy's, and must stay.
    let (first_local, first) = &files[0];
    let mut w = inst
        .client(1)
        .open(first, tessera_client::OpenOptions::new().write(true))
        .unwrap();
    w.write_at(&[0xEE; 1000], 0).unwrap();
    w.close().unwrap();
    let mut want: Vec<Vec<u8>> = files
        .iter()
        .map(|(e, _)| std::fs::read(e).unwrap())
        .collect();
    want[0][..1000].fill(0xEE);
    let mut mtimes = Vec::new();
    for (e, path) in &files {
        let loc = c.locate(path, 0, None).unwrap();
        let size = std::fs::metadata(e).unwrap().len();
        let pfs_only = if path == first { size - 1000 } else { size };
        assert_eq!(loc.pfs_only_bytes, pfs_only, "{path} before staging");
        mtimes.push(c.stat(path).unwrap().mtime_ns);
    }
    let summary = stage(&inst, &["stage-in", data.to_str().unwrap()]);
    assert_eq!(count(&summary, "staged in"), 9, "{summary}");
    let mut holders = std::collections::BTreeSet::new();
    for (i, (e, path)) in files.iter().enumerate() {
        let loc = c.locate(path, 0, None).unwrap();
        assert_eq!(
            loc.pfs_only_bytes, 0,
            "{path}: every byte in a burst buffer"
        );
        holders.extend(
            loc.extents
                .iter()
                .filter_map(|x| x.holder.as_ref().map(|h| h.node)),
        );
        let mut f = c.open_read(path).unwrap();
        let mut got = vec![0u8; want[i].len()];
        f.read_exact_at(&mut got, 0).unwrap();
        assert!(got == want[i], "{path} differs after staging");
        assert_eq!(c.stat(path).unwrap().mtime_ns, mtimes[i], "{path}'s mtime");
        // The PFS copy itself is untouched (the newer bytes are not flushed).
        let pfs_copy = std::fs::read(e).unwrap();
        assert_eq!(pfs_copy.len(), want[i].len());
        if e != first_local {
            assert!(pfs_copy == want[i]);
        }
    }
    assert_eq!(holders.len(), 3, "every node took a share: {holders:?}");
    // A rerun, by Tessera path this time, finds every byte staged.
    let summary = stage(&inst, &["stage-in", "/tessera/imported", "/tessera"]);
    assert_eq!(count(&summary, "staged in"), 0, "{summary}");
    assert_eq!(count(&summary, "skipped"), 9, "{summary}");
    // In place means in place: another destination is refused, naming where it is.
    let out = inst.tessera(&["stage-in", data.to_str().unwrap(), "/tessera/else"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("already /tessera/imported"), "{err}");
}

#[test]
fn a_stage_in_cut_by_a_daemon_killed_is_finished_by_a_rerun_after_its_restart() {
    let inst = Inst::start(3);
    let work = scratch("stage-daemon-killed");
    let src = work.join("big");
    tree(&src, 18, |_| 4 << 20);
    let run = std::process::Command::new(common::TESSERA)
        .arg("--instance")
        .arg(&inst.layout.dir)
        .args(["stage-in", src.to_str().unwrap(), "/tessera/d"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_first_staged(&inst, &src, "/tessera/d/big");
    inst.kill9(2);
    // The run ends rather than hangs; whether it failed depends on how far it had come.
    let started = std::time::Instant::now();
    let out = run.wait_with_output().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "the run outlived its daemon by {:?}",
        started.elapsed()
    );
    let first = String::from_utf8_lossy(&out.stdout).to_string();
    eprintln!(
        "first run, {:?} after the kill: {first}{}",
        started.elapsed(),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("tessera: "),
            "a failed run names what failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    inst.restart(2);
    let summary = stage(&inst, &["stage-in", src.to_str().unwrap(), "/tessera/d"]);
    let (copied, skipped) = (count(&summary, "staged in"), count(&summary, "skipped"));
    assert_eq!(copied + skipped, 18, "{first}\n{summary}");
    assert!(
        skipped >= 1,
        "what finished before the kill is skipped: {summary}"
    );
    assert_eq!(same_in_tessera(&inst, &src, "/tessera/d/big"), 18);
    let _ = std::fs::remove_dir_all(&work);
}
