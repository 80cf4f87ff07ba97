//! `tessera find`: GNU find's `-name`, `-size`, `-newer` and `-type` over a Tessera tree,
//! evaluated by every daemon on its own shard at once (`tessera_core::find`,
//! `tessera_daemon::services::find`): each node pages through the entries it holds beneath
//! the root, testing name and type; the entries that pass and need their attributes are
//! tested by the nodes that hold their inodes, a batch per node. Matches are printed as each
//! page comes back. With `--io500` only IO500's last line is printed (`MATCHED found/total`,
//! total counting what is not a directory), so IO500 can run it as its external find.

use crate::admin::Admin;
use futures::future::join_all;
use std::io::Write;
use std::time::Instant;
use tessera_core::find::{Filter, Matcher, SizeTest};
use tessera_core::placement::{ino_shard, path_shard};
use tessera_core::{Errno, FsError, FsResult, path};
use tessera_proto::{
    Attr, Dentry, DentryGet, FileKind, FindEntries, FoundPage, InodeAttrs, InodeGet,
    InstanceLayout, TxnView,
};

/// The options of `tessera find`.
#[derive(Debug, clap::Args)]
pub struct FindArgs {
    /// Print only IO500's last line, `MATCHED found/total` (IO500's `external-script`
    /// is the tessera binary, its `external-extra-args` are `find --io500`).
    #[arg(long)]
    pub io500: bool,
    /// One JSON object per match (path, type, and size and mtime_ns when a predicate
    /// asked for them), and one with the counts at the end.
    #[arg(long, conflicts_with = "io500")]
    pub json: bool,
    /// Entries each daemon looks at per answer (more: fewer round trips, longer pauses
    /// of its namespace for other requests).
    #[arg(long, default_value_t = 8192)]
    pub page_entries: u32,
    /// The path to search, then the predicates.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
    pub expr: Vec<String>,
}

/// `tessera find`: parses the expression, searches every shard at once, prints the matches
/// as they come and the summary the output asks for.
pub fn main(layout: &InstanceLayout, args: &FindArgs) -> anyhow::Result<()> {
    layout.check_trusted()?;
    let started = Instant::now();
    let query = parse(&args.expr)?;
    let output = match (args.io500, args.json) {
        (true, _) => Output::Io500,
        (_, true) => Output::Json,
        _ => Output::Paths,
    };
    let counts = run(layout, &query, output, args.page_entries)?;
    print_summary(output, &counts, started);
    Ok(())
}

/// What to print.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Output {
    /// A path per line.
    Paths,
    /// A JSON object per match, and one with the counts at the end.
    Json,
    /// IO500's line only: `MATCHED found/total`.
    Io500,
}

/// A parsed `tessera find` command line: the root, the predicates, and the file `-newer`
/// names (resolved when the search starts).
#[derive(Clone, Debug, PartialEq)]
pub struct Query {
    pub root: String,
    pub filter: Filter,
    pub newer: Option<String>,
}

/// Parses `PATH [-name GLOB] [-size N[c]] [-newer FILE] [-type f|d|l]` (predicates in any
/// order, each at most once; all must hold).
pub fn parse(args: &[String]) -> FsResult<Query> {
    let usage = |why: String| {
        FsError::new(
            Errno::Inval,
            format!(
                "{why}; usage: tessera find [--io500] [--json] PATH [-name GLOB] [-size [+-]N[cwbkMG]] [-newer FILE] [-type f|d|l]"
            ),
        )
    };
    let mut it = args.iter();
    let root = match it.next() {
        Some(r) if !r.starts_with('-') => r.clone(),
        _ => return Err(usage("a path to search comes first".into())),
    };
    let mut q = Query {
        root,
        filter: Filter::default(),
        newer: None,
    };
    while let Some(pred) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .ok_or_else(|| usage(format!("{pred} needs a value")))
        };
        match pred.as_str() {
            "-name" => q.filter.name = Some(value()?),
            "-size" => q.filter.size = Some(SizeTest::parse(&value()?)?),
            "-newer" => q.newer = Some(value()?),
            "-type" => {
                q.filter.kind = Some(match value()?.as_str() {
                    "f" => FileKind::File,
                    "d" => FileKind::Dir,
                    "l" => FileKind::Symlink,
                    other => return Err(usage(format!("-type {other}: f, d or l"))),
                })
            }
            other => return Err(usage(format!("unknown predicate {other}"))),
        }
    }
    Ok(q)
}

/// What a search found and looked at.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Counts {
    pub matched: u64,
    pub looked_at: u64,
    pub files_looked_at: u64,
}

/// One match, as printed.
struct Hit {
    path: String,
    kind: FileKind,
    attr: Option<Attr>,
}

fn kind_letter(k: FileKind) -> &'static str {
    match k {
        FileKind::File => "f",
        FileKind::Dir => "d",
        FileKind::Symlink => "l",
    }
}

/// Prints matches as they come.
struct Printer {
    output: Output,
    out: std::io::BufWriter<std::io::Stdout>,
}

impl Printer {
    fn hits(&mut self, hits: &[Hit]) -> FsResult<()> {
        let io = |e: std::io::Error| FsError::io("writing the matches", &e);
        for h in hits {
            match self.output {
                Output::Paths => writeln!(self.out, "{}", h.path).map_err(io)?,
                Output::Json => {
                    let mut v = serde_json::json!({ "path": h.path, "type": kind_letter(h.kind) });
                    if let Some(a) = &h.attr {
                        v["size"] = a.size.into();
                        v["mtime_ns"] = a.mtime_ns.into();
                    }
                    writeln!(self.out, "{v}").map_err(io)?
                }
                Output::Io500 => {}
            }
        }
        self.out.flush().map_err(io)
    }
}

/// The modification time of the file `-newer` names: in Tessera (asked of its shards) or
/// anywhere else.
fn mtime_of(admin: &Admin, mount: &str, nodes: u32, file: &str) -> FsResult<i64> {
    if let Ok(p) = path::resolve(file, mount) {
        let (_, attr) = lookup(admin, nodes, &p)?
            .ok_or_else(|| FsError::new(Errno::NoEnt, format!("-newer {file}: no such file")))?;
        return Ok(attr.mtime_ns);
    }
    // GNU find's default (-P) takes a link's own time.
    let meta =
        std::fs::symlink_metadata(file).map_err(|e| FsError::io(format!("-newer {file}"), &e))?;
    use std::os::unix::fs::MetadataExt;
    Ok(meta.mtime() * 1_000_000_000 + meta.mtime_nsec())
}

/// The entry and attributes of the internal path `p` (`None`: no such path).
fn lookup(admin: &Admin, nodes: u32, p: &str) -> FsResult<Option<(Dentry, Attr)>> {
    if p == "/" {
        let root = Dentry {
            ino: tessera_core::namespace::ROOT_INO,
            kind: FileKind::Dir,
        };
        let attr = Attr {
            ino: root.ino,
            kind: FileKind::Dir,
            mode: 0o755,
            uid: 0,
            gid: 0,
            size: 0,
            atime_ns: 0,
            mtime_ns: 0,
            ctime_ns: 0,
            nlink: 2,
        };
        return Ok(Some((root, attr)));
    }
    let get = DentryGet {
        path: p.to_string(),
        view: TxnView::default(),
    };
    let Some((d, attr)) = admin.ask(path_shard(p, nodes), get)? else {
        return Ok(None);
    };
    let attr = match attr {
        Some(a) => a,
        None => admin.ask(ino_shard(d.ino), InodeGet { ino: d.ino })?,
    };
    Ok(Some((d, attr)))
}

/// Runs a search and prints what it finds; the counts.
/// Each node looks at `page` entries per answer.
pub fn run(layout: &InstanceLayout, q: &Query, output: Output, page: u32) -> FsResult<Counts> {
    let cfg = layout.load_config()?;
    let admin = Admin::new(layout)?;
    let mut filter = q.filter.clone();
    if let Some(f) = &q.newer {
        filter.newer_than_ns = Some(mtime_of(&admin, &cfg.mount, cfg.nodes, f)?);
    }
    let matcher = Matcher::new(filter.clone())?;
    let root = path::resolve(&q.root, &cfg.mount)?;
    let shown = |p: &str| {
        if p == "/" {
            cfg.mount.clone()
        } else {
            format!("{}{p}", cfg.mount.trim_end_matches('/'))
        }
    };
    let mut printer = Printer {
        output,
        out: std::io::BufWriter::new(std::io::stdout()),
    };
    let mut counts = Counts::default();
    // The root itself, as GNU find tests it first.
    let (root_entry, root_attr) = lookup(&admin, cfg.nodes, &root)?.ok_or_else(|| {
        FsError::new(
            Errno::NoEnt,
            format!("{}: no such file or directory", q.root),
        )
    })?;
    counts.looked_at += 1;
    if root_entry.kind != FileKind::Dir {
        counts.files_looked_at += 1;
    }
    // The root's name as `-name` sees it: Tessera's root is the mount's last component.
    let mount_name = cfg
        .mount
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or("/");
    let name = path::split(&root).map_or(mount_name, |(_, n)| n);
    if matcher.entry_matches(name, root_entry.kind) && matcher.attr_matches(&root_attr) {
        counts.matched += 1;
        printer.hits(&[Hit {
            path: shown(&root),
            kind: root_entry.kind,
            attr: Some(root_attr),
        }])?;
    }
    if root_entry.kind == FileKind::Dir {
        let nodes: Vec<u32> = (0..cfg.nodes).collect();
        let printer = std::cell::RefCell::new(&mut printer);
        let totals = admin.block_on(join_all(nodes.iter().map(|&node| {
            let (admin, matcher, filter, root, printer, shown) =
                (&admin, &matcher, &filter, &root, &printer, &shown);
            async move {
                let mut c = Counts::default();
                let mut after = None;
                loop {
                    let ask = FindEntries {
                        root: root.clone(),
                        filter: Filter {
                            size: None,
                            newer_than_ns: None,
                            ..filter.clone()
                        },
                        after: after.take(),
                        limit: page,
                    };
                    let page: FoundPage = admin.ask_async(node, ask).await?;
                    c.looked_at += page.looked_at;
                    c.files_looked_at += page.files_looked_at;
                    let hits = with_attrs(admin, matcher, page.found).await?;
                    c.matched += hits.len() as u64;
                    let hits: Vec<Hit> = hits
                        .into_iter()
                        .map(|(p, d, a)| Hit {
                            path: shown(&p),
                            kind: d.kind,
                            attr: a,
                        })
                        .collect();
                    printer.borrow_mut().hits(&hits)?;
                    match page.next {
                        Some(n) => after = Some(n),
                        None => return Ok::<Counts, FsError>(c),
                    }
                }
            }
        })));
        for t in totals {
            let t = t?;
            counts.matched += t.matched;
            counts.looked_at += t.looked_at;
            counts.files_looked_at += t.files_looked_at;
        }
    }
    Ok(counts)
}

/// The entries that pass the predicates on attributes, with their attributes (asked of the
/// nodes that hold their inodes, all at once); every entry when none is asked for.
async fn with_attrs(
    admin: &Admin,
    matcher: &Matcher,
    found: Vec<(String, Dentry)>,
) -> FsResult<Vec<(String, Dentry, Option<Attr>)>> {
    if !matcher.needs_attrs() || found.is_empty() {
        return Ok(found.into_iter().map(|(p, d)| (p, d, None)).collect());
    }
    let mut by_node: std::collections::BTreeMap<u32, Vec<usize>> = Default::default();
    for (i, (_, d)) in found.iter().enumerate() {
        by_node.entry(ino_shard(d.ino)).or_default().push(i);
    }
    let answers = join_all(by_node.iter().map(|(&node, idx)| {
        let inos = idx.iter().map(|&i| found[i].1.ino).collect();
        admin.ask_async(node, InodeAttrs { inos })
    }))
    .await;
    let mut attrs: Vec<Option<Attr>> = vec![None; found.len()];
    for ((_, idx), answer) in by_node.iter().zip(answers) {
        for (&i, a) in idx.iter().zip(answer?) {
            attrs[i] = a;
        }
    }
    Ok(found
        .into_iter()
        .zip(attrs)
        .filter_map(|((p, d), a)| {
            // An inode gone meanwhile (the file removed) matches nothing.
            let a = a?;
            matcher.attr_matches(&a).then_some((p, d, Some(a)))
        })
        .collect())
}

/// Prints the closing line of the output: IO500's, or the counts in JSON.
pub fn print_summary(output: Output, counts: &Counts, started: Instant) {
    match output {
        Output::Io500 => println!("MATCHED {}/{}", counts.matched, counts.files_looked_at),
        Output::Json => println!(
            "{}",
            serde_json::json!({
                "matched": counts.matched,
                "looked_at": counts.looked_at,
                "files_looked_at": counts.files_looked_at,
                "seconds": started.elapsed().as_secs_f64(),
            })
        ),
        Output::Paths => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn io500s_command_line_parses() {
        let q = parse(&args(&[
            "/tessera/io500/datafiles",
            "-newer",
            "/tmp/results/timestampfile",
            "-size",
            "3901c",
            "-name",
            "*01*",
        ]))
        .unwrap();
        assert_eq!(q.root, "/tessera/io500/datafiles");
        assert_eq!(q.newer.as_deref(), Some("/tmp/results/timestampfile"));
        assert_eq!(q.filter.name.as_deref(), Some("*01*"));
        assert!(q.filter.size.unwrap().matches(3901));
    }

    #[test]
    fn bad_command_lines_say_what_is_wrong() {
        for (bad, says) in [
            (&["-name", "x"][..], "a path to search comes first"),
            (&["/t", "-name"][..], "-name needs a value"),
            (&["/t", "-type", "x"][..], "-type x"),
            (&["/t", "-perm", "644"][..], "unknown predicate -perm"),
            (&["/t", "-size", "12q"][..], "-size 12q"),
        ] {
            let e = parse(&args(bad)).unwrap_err();
            assert!(e.message.contains(says), "{bad:?}: {}", e.message);
        }
    }
}
