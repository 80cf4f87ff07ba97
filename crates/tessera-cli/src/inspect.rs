//! Looking at files: ls, stat, where (which node holds which range), flush.

use crate::instance::human;
use anyhow::Result;
use std::collections::BTreeMap;
use tessera_client::{Client, FileKind, Model, OpenOptions};

pub fn ls(c: &Client, path: &str, long: bool) -> Result<()> {
    for e in c.readdir(path)? {
        if long {
            let full = format!("{}/{}", path.trim_end_matches('/'), e.name);
            let a = c.stat(&full)?;
            let kind = match a.kind {
                FileKind::Dir => 'd',
                FileKind::File => '-',
                FileKind::Symlink => 'l',
            };
            let link = if a.kind == FileKind::Symlink {
                format!(" -> {}", c.readlink(&full)?)
            } else {
                String::new()
            };
            println!("{kind}{:04o} {:>12} {}{link}", a.mode, a.size, e.name);
        } else {
            let mark = match e.kind {
                FileKind::Dir => "/",
                FileKind::Symlink => "@",
                FileKind::File => "",
            };
            println!("{}{mark}", e.name);
        }
    }
    Ok(())
}

pub fn stat(c: &Client, path: &str) -> Result<()> {
    let a = c.stat(path)?;
    println!("  path: {path}");
    println!("  kind: {:?}", a.kind);
    println!("  size: {} ({})", a.size, human(a.size));
    println!("  mode: {:04o}  uid: {}  gid: {}", a.mode, a.uid, a.gid);
    println!(
        " inode: {:#x} (attributes on node {})",
        a.ino,
        tessera_core::placement::ino_shard(a.ino)
    );
    println!(
        " mtime: {}.{:09}",
        a.mtime_ns / 1_000_000_000,
        a.mtime_ns % 1_000_000_000
    );
    Ok(())
}

pub fn where_(c: &Client, path: &str) -> Result<()> {
    let mut f = c.open(path, OpenOptions::new().read(true).model(Model::Session))?;
    let extents = tessera_client::sorted_extents(&f.query_file()?);
    let size = f.len()?;
    let mut per_node: BTreeMap<u32, u64> = BTreeMap::new();
    let mut at = 0;
    println!("{:>14} {:>14}  holder", "start", "end");
    let gap = |a: u64, b: u64| {
        if a < b {
            println!("{a:>14} {b:>14}  no owner (PFS copy or hole)");
        }
    };
    for e in &extents {
        gap(at, e.start);
        println!(
            "{:>14} {:>14}  node {} (client {})",
            e.start, e.end, e.owner.node, e.owner.client
        );
        *per_node.entry(e.owner.node).or_default() += e.end - e.start;
        at = e.end;
    }
    gap(at, size);
    for (n, b) in per_node {
        println!("node {n} holds {} of {}", human(b), human(size));
    }
    Ok(())
}

pub fn flush(c: &Client, path: &str) -> Result<()> {
    let t = std::time::Instant::now();
    let bytes = c.flush_path(path)?;
    let s = t.elapsed().as_secs_f64();
    println!(
        "flushed {path}: {} in {s:.2} s ({:.0} MiB/s) to {}",
        human(bytes),
        bytes as f64 / (1u64 << 20) as f64 / s.max(1e-9),
        c.config()
            .pfs_path(&tessera_core::path::resolve(path, &c.config().mount)?)
            .display()
    );
    Ok(())
}
