//! One node's share of a staging run (`tessera stage-worker`, launched on the node's host):
//! each file copied through this node's daemon (a few at once, a connection each), its
//! CRC32C computed while the source is read and compared with the destination's bytes read
//! back once published, then its completion record written. Progress goes to stdout as JSON
//! lines for the front end.

use super::plan::{Copy, Found, How, Plan, pfs_path, record, set_local_xattr};
use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::io::{Read, Write};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use tessera_client::{
    AttrChange, Client, InstanceConfig, OpenOptions, Residence, SetMode, StageDirection,
};
use tessera_core::staging::{COMPLETION_XATTR, Completion};

/// Bytes read and written at a time.
const CHUNK: usize = 4 << 20;

/// What a worker tells the front end, one JSON line each.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Event {
    /// More bytes copied of the file in hand.
    Bytes(u64),
    /// A file copied (its index in the plan, its bytes).
    Done {
        copy: usize,
        bytes: u64,
    },
    /// A file whose destination already had a record matching its source.
    Skipped {
        copy: usize,
        bytes: u64,
    },
    Failed {
        copy: usize,
        error: String,
    },
}

/// Where a worker's threads tell the front end, a whole line at a time.
struct Out(Mutex<std::io::Stdout>);

fn tell(out: &Out, e: &Event) -> Result<()> {
    let line = format!("{}\n", serde_json::to_string(e)?);
    let mut o = out.0.lock().unwrap_or_else(|p| p.into_inner());
    o.write_all(line.as_bytes())?;
    o.flush()?;
    Ok(())
}

/// Files one worker copies at once, each thread with its own connection: a small file's
/// copy is a handful of round trips, which overlap.
const FILES_IN_FLIGHT: usize = 4;

/// What a worker's threads share: the plan, the next file of the share to take, and
/// whether the node's daemon was found gone.
struct Share<'a> {
    layout: &'a tessera_client::InstanceLayout,
    node: u32,
    plan: &'a Plan,
    mine: &'a [usize],
    next: AtomicUsize,
    daemon_gone: AtomicBool,
    out: Out,
}

/// Runs share `share` of the plan at `plan` through node `node`'s daemon.
pub fn main(
    layout: &tessera_client::InstanceLayout,
    plan: &Path,
    share: usize,
    node: u32,
) -> Result<()> {
    let plan: Plan = serde_json::from_slice(
        &std::fs::read(plan).with_context(|| format!("reading the plan {}", plan.display()))?,
    )?;
    let Some(mine) = plan.shares.get(share) else {
        bail!("the plan has no share {share}");
    };
    let shared = Share {
        layout,
        node,
        plan: &plan,
        mine,
        next: AtomicUsize::new(0),
        daemon_gone: AtomicBool::new(false),
        out: Out(Mutex::new(std::io::stdout())),
    };
    let threads = FILES_IN_FLIGHT.min(mine.len()).max(1);
    std::thread::scope(|s| {
        let running: Vec<_> = (0..threads)
            .map(|_| s.spawn(|| copy_files(&shared)))
            .collect();
        running
            .into_iter()
            .map(|t| {
                t.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a copying thread panicked")))
            })
            .collect::<Result<Vec<()>>>()
    })?;
    Ok(())
}

/// Staged bytes not yet told to the daemon's metrics: told in batches (every 64 MiB or
/// second, and at the end) rather than one request per file, which small files would feel.
#[derive(Default)]
struct Counted {
    direction: Option<StageDirection>,
    bytes: u64,
    since: Option<std::time::Instant>,
}

impl Counted {
    fn add(&mut self, c: &Client, direction: StageDirection, bytes: u64) {
        if self.direction.is_some_and(|d| d != direction) {
            self.report(c);
        }
        self.direction = Some(direction);
        self.bytes += bytes;
        let since = *self.since.get_or_insert_with(std::time::Instant::now);
        if self.bytes >= 64 << 20 || since.elapsed() >= std::time::Duration::from_secs(1) {
            self.report(c);
        }
    }

    fn report(&mut self, c: &Client) {
        // A daemon gone (a reconnection gave up) has no metrics to tell, and trying again
        // would wait as long again.
        if let Some(direction) = self.direction
            && self.bytes > 0
            && c.connected()
            && let Err(e) = c.report_staged(direction, self.bytes)
        {
            tracing::debug!("counting staged bytes: {e}");
        }
        self.bytes = 0;
        self.since = None;
    }
}

/// One thread of a worker: takes the share's files one at a time until none is left.
fn copy_files(share: &Share) -> Result<()> {
    let c = Client::connect(share.layout.clone(), Some(share.node))?;
    let cfg = c.config();
    let out = &share.out;
    let node = share.node;
    let mut dirs = HashSet::new();
    let mut counted = Counted::default();
    loop {
        let at = share.next.fetch_add(1, Ordering::Relaxed);
        let Some(&i) = share.mine.get(at) else {
            counted.report(&c);
            return Ok(());
        };
        if share.daemon_gone.load(Ordering::Relaxed) {
            // Every file left would wait as long again for the daemon: reported at once.
            tell(
                out,
                &Event::Failed {
                    copy: i,
                    error: format!(
                        "not copied: node {node}'s daemon stopped during the run; restart it (`tessera start --node {node}`) and run the same command again"
                    ),
                },
            )?;
            continue;
        }
        let copy = &share.plan.copies[i];
        let found = record(&c, &cfg, copy);
        let copied = if found.covers(copy.size, copy.mtime_ns) {
            None
        } else {
            match copy.how {
                How::In => Some(stage_in(&c, &cfg.mount, copy, found, &mut dirs, out)),
                How::Flush => Some(flush(&c, &cfg, copy, out)),
                How::Out => Some(stage_out(&c, copy, out)),
                How::Fetch => match pfs_only(&c, &copy.source) {
                    // Every byte is in a burst buffer already.
                    Ok(ranges) if ranges.is_empty() => None,
                    Ok(ranges) => Some(fetch(&c, copy, &ranges, out)),
                    Err(e) => Some(Err(e)),
                },
            }
        };
        let Some(copied) = copied else {
            tell(
                out,
                &Event::Skipped {
                    copy: i,
                    bytes: copy.size,
                },
            )?;
            continue;
        };
        match copied {
            Ok(bytes) => {
                let direction = match copy.how {
                    How::In | How::Fetch => StageDirection::In,
                    How::Flush | How::Out => StageDirection::Out,
                };
                counted.add(&c, direction, bytes);
                tell(out, &Event::Done { copy: i, bytes })?
            }
            Err(e) => {
                tell(
                    out,
                    &Event::Failed {
                        copy: i,
                        error: format!("{e:#}"),
                    },
                )?;
                if !c.connected() {
                    // This node's daemon is gone (a reconnection gave up).
                    share.daemon_gone.store(true, Ordering::Relaxed);
                }
            }
        }
    }
}

/// Makes the Tessera directories above `path` (those not made already by this worker).
fn parents(c: &Client, mount: &str, path: &str, made: &mut HashSet<String>) -> Result<()> {
    let mut at = String::new();
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        at.push('/');
        at.push_str(part);
        if at.len() <= mount.trim_end_matches('/').len() || made.contains(&at) {
            continue;
        }
        match c.mkdir(&at, 0o755) {
            Ok(()) => {}
            Err(e) if e.errno == tessera_client::Errno::Exist => {}
            Err(e) => return Err(e).with_context(|| format!("making {at}")),
        }
        made.insert(at.clone());
    }
    Ok(())
}

/// Reads `src` to its end in chunks, handing each to `sink`; the CRC32C and length.
fn pump(
    src: &mut impl Read,
    out: Option<&Out>,
    mut sink: impl FnMut(&[u8], u64) -> Result<()>,
) -> Result<(u32, u64)> {
    let mut buf = vec![0u8; CHUNK];
    let (mut crc, mut at) = (0u32, 0u64);
    loop {
        let n = match src.read(&mut buf) {
            Ok(0) => return Ok((crc, at)),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        };
        crc = crc32c::crc32c_append(crc, &buf[..n]);
        sink(&buf[..n], at)?;
        at += n as u64;
        if let Some(out) = out {
            tell(out, &Event::Bytes(n as u64))?;
        }
    }
}

/// The CRC32C of a Tessera file's bytes as published.
fn tessera_crc(c: &Client, path: &str) -> Result<(u32, u64)> {
    let mut f = c.open_read(path)?;
    let mut buf = vec![0u8; CHUNK];
    let (mut crc, mut at) = (0u32, 0u64);
    loop {
        let n = f.read_at(&mut buf, at)?;
        if n == 0 {
            f.close()?;
            return Ok((crc, at));
        }
        crc = crc32c::crc32c_append(crc, &buf[..n]);
        at += n as u64;
    }
}

fn local_crc(path: &Path) -> Result<(u32, u64)> {
    let mut f = std::fs::File::open(path)?;
    pump(&mut f, None, |_, _| Ok(()))
}

fn check(what: &str, read: (u32, u64), back: (u32, u64)) -> Result<()> {
    if read != back {
        bail!(
            "{what}: the copy reads back as {} bytes with CRC32C {:08x}, the source gave {} bytes with {:08x}",
            back.1,
            back.0,
            read.1,
            read.0
        );
    }
    Ok(())
}

fn stage_in(
    c: &Client,
    mount: &str,
    copy: &Copy,
    found: Found,
    dirs: &mut HashSet<String>,
    out: &Out,
) -> Result<u64> {
    parents(c, mount, &copy.dest, dirs)?;
    // A record left from an earlier copy goes first: a copy cut short must not look done.
    if found != Found::Absent {
        let _ = c.remove_xattr(&copy.dest, COMPLETION_XATTR);
    }
    let mut src =
        std::fs::File::open(&copy.source).with_context(|| format!("opening {}", copy.source))?;
    let m = src.metadata()?;
    let mut o = OpenOptions::new();
    o.write(true).create(true).truncate(true);
    let mut dst = c.open(&copy.dest, &o)?;
    let read = pump(&mut src, Some(out), |bytes, at| {
        dst.write_at(bytes, at)?;
        Ok(())
    })?;
    dst.close()?;
    check(&copy.dest, read, tessera_crc(c, &copy.dest)?)?;
    let done = Completion {
        size: read.1,
        mtime_ns: super::plan::mtime_of(&m),
        crc32c: read.0,
    };
    c.set_xattr(
        &copy.dest,
        COMPLETION_XATTR,
        done.encode().as_bytes(),
        SetMode::Any,
    )?;
    Ok(read.1)
}

fn flush(c: &Client, cfg: &InstanceConfig, copy: &Copy, out: &Out) -> Result<u64> {
    let read = tessera_crc(c, &copy.source)?;
    c.flush_path(&copy.source)?;
    tell(out, &Event::Bytes(read.1))?;
    let target = pfs_path(cfg, &copy.source)
        .with_context(|| format!("{} is not beneath the instance's prefix", copy.source))?;
    check(&target.display().to_string(), read, local_crc(&target)?)?;
    let done = Completion {
        size: copy.size,
        mtime_ns: copy.mtime_ns,
        crc32c: read.0,
    };
    set_local_xattr(&target, done.encode().as_bytes())?;
    Ok(read.1)
}

fn stage_out(c: &Client, copy: &Copy, out: &Out) -> Result<u64> {
    let dest = Path::new(&copy.dest);
    if let Some(dir) = dest.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("making {}", dir.display()))?;
    }
    // Written under a temporary name beside it, then renamed: a reader of the destination
    // sees the old file or the whole new one, as a flush publishes.
    let tmp = dest.with_file_name(format!(
        ".{}.tessera-{:08x}",
        dest.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
        rand::random::<u32>()
    ));
    let copied = (|| {
        let mut src = c.open_read(&copy.source)?;
        let mut f =
            std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        let mut buf = vec![0u8; CHUNK];
        let (mut crc, mut at) = (0u32, 0u64);
        loop {
            let n = src.read_at(&mut buf, at)?;
            if n == 0 {
                break;
            }
            crc = crc32c::crc32c_append(crc, &buf[..n]);
            f.write_all(&buf[..n])?;
            at += n as u64;
            tell(out, &Event::Bytes(n as u64))?;
        }
        src.close()?;
        f.sync_all()?;
        drop(f);
        check(&copy.dest, (crc, at), local_crc(&tmp)?)?;
        let done = Completion {
            size: copy.size,
            mtime_ns: copy.mtime_ns,
            crc32c: crc,
        };
        set_local_xattr(&tmp, done.encode().as_bytes())?;
        std::fs::rename(&tmp, dest).with_context(|| format!("publishing {}", dest.display()))?;
        Ok::<u64, anyhow::Error>(at)
    })();
    if copied.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    copied
}

/// The ranges `[start, end)` of Tessera file `path` that only its PFS copy holds.
fn pfs_only(c: &Client, path: &str) -> Result<Vec<(u64, u64)>> {
    let mut out = Vec::new();
    let mut from = 0;
    loop {
        let loc = c.locate(path, from, None)?;
        out.extend(
            loc.extents
                .iter()
                .filter(|x| x.residence == Residence::Pfs)
                .map(|x| (x.start, x.end)),
        );
        match loc.more_from {
            Some(next) if next > from => from = next,
            _ => return Ok(out),
        }
    }
}

/// Reads `ranges` of open file `f` a chunk at a time, handing each chunk and its offset to
/// `visit`; the CRC32C and length of what was read. A range the file ends within is an
/// error naming `strict` if given, else read as far as it goes.
fn over_ranges(
    f: &mut tessera_client::File,
    ranges: &[(u64, u64)],
    strict: Option<&str>,
    mut visit: impl FnMut(&mut tessera_client::File, &[u8], u64) -> Result<()>,
) -> Result<(u32, u64)> {
    let mut buf = vec![0u8; CHUNK];
    let (mut crc, mut total) = (0u32, 0u64);
    for &(start, end) in ranges {
        let mut at = start;
        while at < end {
            let want = (end - at).min(CHUNK as u64) as usize;
            let n = f.read_at(&mut buf[..want], at)?;
            if n == 0 {
                match strict {
                    Some(path) => bail!(
                        "{path}: the file ends at {at}, before the {end} bytes its PFS copy was located to hold (changed meanwhile?)"
                    ),
                    None => break,
                }
            }
            crc = crc32c::crc32c_append(crc, &buf[..n]);
            visit(f, &buf[..n], at)?;
            at += n as u64;
            total += n as u64;
        }
    }
    Ok((crc, total))
}

/// The CRC32C and length of `ranges` of Tessera file `path` as published.
fn ranges_crc(c: &Client, path: &str, ranges: &[(u64, u64)]) -> Result<(u32, u64)> {
    let mut f = c.open_read(path)?;
    let read = over_ranges(&mut f, ranges, None, |_, _, _| Ok(()))?;
    f.close()?;
    Ok(read)
}

/// Brings `ranges` of an imported file, held by its PFS copy only, into this node's burst
/// buffer: each chunk read through Tessera (from the PFS copy) is written back at its
/// offset, checked by reading the ranges back once published, and the file's times are put
/// back as the plan found them.
fn fetch(c: &Client, copy: &Copy, ranges: &[(u64, u64)], out: &Out) -> Result<u64> {
    let mut o = OpenOptions::new();
    o.read(true).write(true);
    let mut f = c.open(&copy.source, &o)?;
    let (crc, total) = over_ranges(&mut f, ranges, Some(&copy.source), |f, bytes, at| {
        f.write_at(bytes, at)?;
        tell(out, &Event::Bytes(bytes.len() as u64))
    })?;
    f.close()?;
    check(
        &copy.source,
        (crc, total),
        ranges_crc(c, &copy.source, ranges)?,
    )?;
    c.set_attr(
        &copy.source,
        AttrChange {
            mode: None,
            atime_ns: None,
            mtime_ns: Some(copy.mtime_ns),
        },
    )?;
    Ok(total)
}
