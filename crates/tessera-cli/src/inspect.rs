//! Looking at files: ls, stat, where (which node holds which range), flush, migrate.

use crate::instance::human;
use anyhow::{Context, Result, bail};
use tessera_client::{Client, FileKind, Location, RangeAsk, Residence};
use tessera_proto::InstanceLayout;

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

/// `tessera where`: where the bytes of each file (or of one range of each) live, by node and
/// host, in one batched request; `--json` for schedulers. Fails if any path failed, after
/// answering the others.
pub fn where_(c: &Client, paths: &[String], range: (u64, Option<u64>), json: bool) -> Result<()> {
    let asks: Vec<RangeAsk> = paths
        .iter()
        .map(|p| RangeAsk {
            path: p.clone(),
            offset: range.0,
            len: range.1,
        })
        .collect();
    let answers = c.locate_many(&asks, tessera_client::DEFAULT_MAX_EXTENTS)?;
    let failed = answers.iter().filter(|a| a.is_err()).count();
    if json {
        let files: Vec<serde_json::Value> = paths
            .iter()
            .zip(&answers)
            .map(|(p, a)| match a {
                Ok(l) => serde_json::to_value(l).expect("a location is plain data"),
                Err(e) => serde_json::json!({
                    "path": p,
                    "error": { "errno": e.errno.name(), "message": e.message },
                }),
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "files": files }))?
        );
    } else {
        for a in &answers {
            match a {
                Ok(l) => print_location(l),
                Err(e) => eprintln!("tessera where: {} ({})", e.message, e.errno.name()),
            }
        }
    }
    if failed > 0 {
        anyhow::bail!("{failed} of {} paths could not be located", paths.len());
    }
    Ok(())
}

fn print_location(l: &Location) {
    println!(
        "{}: bytes {}..{} of {} (as of {})",
        l.path,
        l.start,
        l.end,
        human(l.size),
        view_time(l.view_time_ns)
    );
    println!("{:>14} {:>14}  where", "start", "end");
    for e in &l.extents {
        let at = match &e.holder {
            Some(h) => format!("node {} on {} ({})", h.node, h.host, h.addr),
            None => "no node".to_string(),
        };
        let res = match e.residence {
            Residence::BurstBuffer => "burst buffer",
            Residence::Both => "burst buffer and PFS",
            Residence::Pfs => "PFS copy",
            Residence::Hole => "hole",
        };
        println!("{:>14} {:>14}  {at}, {res}", e.start, e.end);
    }
    if let Some(m) = l.more_from {
        println!(
            "{m:>14} {:>14}  ... (listing cut; totals below are whole)",
            l.end
        );
    }
    let range = l.end - l.start;
    for h in &l.bytes_by_host {
        println!(
            "host {} holds {} of {}",
            h.host,
            human(h.bytes),
            human(range)
        );
        for (n, b) in &h.nodes {
            println!("  node {n} holds {} of {}", human(*b), human(range));
        }
    }
    if l.pfs_only_bytes > 0 {
        println!("the PFS copy alone holds {}", human(l.pfs_only_bytes));
    }
}

/// An answer's view time as UTC seconds with milliseconds.
fn view_time(ns: i64) -> String {
    let secs = ns.div_euclid(1_000_000_000);
    let ms = ns.rem_euclid(1_000_000_000) / 1_000_000;
    format!("{secs}.{ms:03} s since the epoch")
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

/// `tessera migrate`: copies the bytes of each file held on other nodes to this process's node
/// (FusionFS and Swift) and reports what moved.
pub fn migrate(c: &Client, paths: &[String]) -> Result<()> {
    let (node, _) = c.identity();
    let host = tessera_proto::hosts::normalize_host(&tessera_proto::hosts::this_host());
    for p in paths {
        let mut f = c.open_read(p)?;
        let before = c.stats();
        let moved = f.migrate_here()?;
        let after = c.stats();
        let copied = after.migrated_copied - before.migrated_copied;
        let size = f.len()?;
        println!(
            "{p}: {} of {} moved to node {node} on {host}{}",
            human(moved),
            human(size),
            if copied > moved {
                format!(
                    " ({} copied but left with their owners: changed meanwhile)",
                    human(copied - moved)
                )
            } else {
                String::new()
            }
        );
    }
    Ok(())
}

/// `tessera migrate --to HOST`: runs `tessera migrate` on HOST (through the launcher that
/// reaches it), so that the bytes move to that host's node.
pub fn migrate_to(layout: &InstanceLayout, host: &str, paths: &[String]) -> Result<()> {
    use crate::run_tasks::{command_on_host, shell_quote};
    let table = layout.load_hosts()?;
    let wanted = tessera_proto::hosts::normalize_host(host);
    let Some(e) = table
        .nodes
        .iter()
        .find(|e| tessera_proto::hosts::normalize_host(&e.host) == wanted)
    else {
        let known: Vec<&str> = table.nodes.iter().map(|e| e.host.as_str()).collect();
        bail!(
            "--to {host}: no daemon runs there (daemons run on {})",
            known.join(", ")
        );
    };
    let exe = std::env::current_exe()?;
    let mut line = format!(
        "{} --instance {} migrate",
        shell_quote(&exe.display().to_string()),
        shell_quote(&layout.dir.display().to_string())
    );
    for p in paths {
        line.push(' ');
        line.push_str(&shell_quote(p));
    }
    let status = command_on_host(&e.host, e.node, &line, &layout.dir)
        .stdin(std::process::Stdio::null())
        .status()
        .with_context(|| format!("launching the migration on {}", e.host))?;
    if !status.success() {
        bail!("the migration on {} failed ({status})", e.host);
    }
    Ok(())
}
