//! The glibc functions that reach paths through glibc's internal calls (realpath, scandir,
//! glob, ftw/nftw, remove, utime, mkdtemp, ...): run through the interposer on a Tessera tree,
//! each must answer as glibc's own does on the same tree on the local disk.

mod common;

use common::{Inst, build_c, build_c_with, scratch, under};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// Builds the same tree under `root`: directories, files, relative links (to files, to
/// directories, through `..`, dangling, a loop), a name the filter drops, and a directory
/// wider than one directory read of glibc's.
const TREE: &str = r#"
set -e
R=$1
mkdir -p $R/main/a/b/c $R/main/d $R/main/skipme/inner $R/main/s $R/main/wide $R/links/loop
echo hello > $R/main/a/f1
printf 12345 > $R/main/a/b/f2
echo x > $R/main/a/b/c/f3
echo x > $R/main/xhidden
echo y > $R/main/skipme/inner/g
echo z > $R/main/s/stop_here
ln -s a/f1 $R/main/lf
ln -s ../a/b $R/main/d/up
ln -s nowhere $R/main/dangling
ln -s ../main/a $R/links/la
ln -s ../main/a/f1 $R/links/lf
ln -s nowhere $R/links/dangling
ln -s . $R/links/loop/self
i=0
while [ $i -lt 1500 ]; do : > $R/main/wide/f$i; i=$((i+1)); done
"#;

/// The runs compared: `walks` arguments, with ROOT standing for the tree's root, and whether
/// to run with the working directory at the root.
fn cases() -> Vec<Vec<&'static str>> {
    vec![
        vec![
            "realpath",
            "ROOT/main/lf",
            "ROOT/main/d/up/f2",
            "ROOT/main/a/../a/b",
            "ROOT/main/a/b/",
            "ROOT/links/la/b/c/f3",
            "ROOT/main/dangling",
            "ROOT/main/a/f1/x",
            "ROOT/main/nope/x",
            "ROOT/links/loop/self/self",
            "main/a/./b",
            "links/lf",
        ],
        vec!["scandir", "ROOT/main"],
        vec!["scandir", "ROOT/main/wide"],
        vec!["scandir", "ROOT/main/nope"],
        vec!["glob", "ROOT/main/*", ""],
        vec!["glob", "ROOT/main/a/*/f*", ""],
        vec!["glob", "ROOT/main/*", "m"],
        vec!["glob", "ROOT/main/*", "o"],
        vec!["glob", "ROOT/main/{a,s}/*", "b"],
        vec!["glob", "ROOT/main/nomatch*", ""],
        vec!["glob", "ROOT/main/nomatch*", "n"],
        vec!["glob", "ROOT/links/la/*", ""],
        vec!["glob", "ROOT/main/wide/f14*", ""],
        vec!["glob", "main/a/*", ""],
        vec!["nftw", "ROOT/main", "p"],
        vec!["nftw", "ROOT/main/", "pd"],
        vec!["nftw", "ROOT/main", "pc"],
        vec!["nftw", "ROOT/main", "pa"],
        vec!["nftw", "ROOT/main", "pda"],
        vec!["nftw", "ROOT/links", ""],
        vec!["nftw", "ROOT/links", "d"],
        vec!["nftw", "ROOT/main/dangling", ""],
        vec!["nftw", "ROOT/main/nope", "p"],
        vec!["nftw", "main/a", "p"],
        vec!["nftw", "main/a", "pc"],
        vec!["nftw", "main", "pcd"],
        vec!["ftw", "ROOT/links"],
        vec!["pfind", "ROOT/main"],
        vec!["fts", "P", "ROOT/main"],
        vec!["fts", "PN", "ROOT/main/a"],
        vec!["fts", "PS", "ROOT/main/a"],
        vec!["fts", "PX", "ROOT/main/d", "ROOT/main/s"],
        vec!["fts", "L", "ROOT/links"],
        vec!["fts", "P", "ROOT/links"],
        vec![
            "fts",
            "PC",
            "ROOT/links/la",
            "ROOT/main/nope",
            "ROOT/main/lf",
        ],
        vec!["fts", "P", "main/a", "links"],
    ]
}

/// Runs `walks` with ROOT replaced by `root`: output lines, sorted (directory order is each
/// file system's own), and the lines in the order printed.
fn run(mut cmd: Command, root: &str, args: &[&str]) -> (Vec<String>, Vec<String>) {
    cmd.env("WALKS_ROOT", root);
    if args.get(2).is_some_and(|f| f.contains('c')) && args[0] == "nftw" {
        cmd.env("WALKS_CHDIR", "1");
    }
    for a in args {
        cmd.arg(a.replace("ROOT", root));
    }
    let out = cmd.output().expect("walks runs");
    assert!(
        out.status.success(),
        "walks {args:?} under {root}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    let mut sorted = printed.clone();
    sorted.sort();
    (sorted, printed)
}

/// In the printed order of an nftw run: each directory's `D` line comes before every entry
/// beneath it, its `DP` line after every one.
fn check_walk_order(printed: &[String], args: &[&str]) {
    let paths: Vec<(&str, &str)> = printed
        .iter()
        .filter_map(|l| {
            let mut w = l.split(' ');
            Some((w.next()?, w.nth(1)?))
        })
        .collect();
    for (i, (kind, dir)) in paths.iter().enumerate() {
        let under = format!("{dir}/");
        for (j, (_, p)) in paths.iter().enumerate() {
            if !p.starts_with(&under) {
                continue;
            }
            match *kind {
                "D" => assert!(i < j, "{args:?}: {p} before its directory:\n{printed:#?}"),
                "DP" => assert!(i > j, "{args:?}: {p} after its directory:\n{printed:#?}"),
                _ => {}
            }
        }
    }
}

#[test]
fn path_functions_answer_as_glibc_does_on_a_local_tree() {
    let inst = Inst::start(3);
    let walks = build_c("cc", "walks");
    let local = scratch("walks");
    let local_root = local.join("root");
    std::fs::create_dir(&local_root).unwrap();
    let local_root = local_root.to_str().unwrap().to_string();
    let sh = |cmd: &mut Command| {
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{cmd:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    sh(Command::new("sh").args(["-c", TREE, "tree", &local_root]));
    let t_root = "/tessera/root";
    sh(&mut under(
        &inst,
        0,
        "sh",
        &["-c", &format!("mkdir {t_root}")],
    ));
    sh(&mut under(&inst, 1, "sh", &["-c", TREE, "tree", t_root]));

    let mut differ = BTreeMap::new();
    for (i, args) in cases().into_iter().enumerate() {
        let mut on_disk = Command::new(&walks);
        on_disk.current_dir(&local_root);
        let (want, _) = run(on_disk, &local_root, &args);
        // From a working directory in Tessera, as the local run's is the tree's root.
        let in_tessera = under(
            &inst,
            (i % 3) as u32,
            "sh",
            &[
                "-c",
                "cd \"$0\" && exec \"$@\"",
                t_root,
                walks.to_str().unwrap(),
            ],
        );
        let (got, printed) = run(in_tessera, t_root, &args);
        assert!(
            !want.is_empty(),
            "{args:?} printed nothing on the local disk"
        );
        if got != want {
            differ.insert(format!("{args:?}"), (want, got));
        }
        if args[0] == "nftw" {
            check_walk_order(&printed, &args);
        }
    }
    assert!(
        differ.is_empty(),
        "answers differ from glibc's on the local disk (local, then Tessera):\n{differ:#?}"
    );
    assert!(Path::new(&local_root).join("main/wide/f1499").exists());
}

/// glibc's calls that work through internal ones (remove, utime and the other time setters,
/// mkdtemp, freopen, get_current_dir_name, lockf, pathconf, syncfs, sync_file_range, splice)
/// answer in Tessera as on the local disk; a FIFO is refused with a reason, never `ENOENT`.
#[test]
fn glibc_calls_that_use_internal_ones_answer_as_on_the_local_disk() {
    let inst = Inst::start(2);
    let prog = build_c("cc", "glibc_calls");
    let local = scratch("glibc-calls");
    let out = Command::new(&prog).arg(&local).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let want = String::from_utf8_lossy(&out.stdout).into_owned();
    let dir = "/tessera/calls";
    common::ok_under(&inst, 0, "mkdir", &[dir]);
    let out = under(&inst, 1, prog.to_str().unwrap(), &[dir])
        .output()
        .unwrap();
    let got = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{got}\n{stderr}");
    // Refused in Tessera, with a clear errno: a FIFO, and reopening a stream other than a
    // standard one (glibc's would keep writing it where the interposer cannot see).
    let want = want
        .replace("mkfifo: ok", "mkfifo: refused")
        .replace("freopen a stream: ok", "freopen a stream: refused");
    assert_eq!(got, want, "Tessera, then the local disk; stderr: {stderr}");
    assert!(want.contains("mtime after utimes: 1300000000"), "{want}");
    // A refusal of what a file system may refuse is quiet unless diagnostics are asked
    // for; then it says why. The stream refusal says how to do it instead.
    assert!(
        stderr.lines().all(|l| l.contains("open it with fopen")),
        "nothing else on stderr: {stderr}"
    );
    common::ok_under(&inst, 0, "mkdir", &["/tessera/calls2"]);
    let out = under(&inst, 0, prog.to_str().unwrap(), &["/tessera/calls2"])
        .env("TESSERA_VERBOSE", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("not FIFOs"),
        "the refusal says why: {stderr}"
    );
}

/// A program built with `_FORTIFY_SOURCE` keeps glibc's buffer checks under the interposer:
/// an over-long read into an 8-byte buffer aborts with glibc's message for a Tessera
/// descriptor or path as for a kernel one, and a read that fits works.
#[test]
fn fortified_calls_keep_their_checks() {
    let inst = Inst::start(1);
    let prog = build_c_with("cc", "fortify", &["-D_FORTIFY_SOURCE=2"]);
    let local = scratch("fortify");
    std::fs::write(local.join("f"), b"0123456789abcdef").unwrap();
    std::os::unix::fs::symlink("a-target-longer-than-8", local.join("l")).unwrap();
    let l = local.to_str().unwrap();
    common::ok_under(
        &inst,
        0,
        "sh",
        &[
            "-c",
            "mkdir /tessera/fy && printf 0123456789abcdef > /tessera/fy/f && ln -s a-target-longer-than-8 /tessera/fy/l",
        ],
    );
    let cases: &[(&str, &str)] = &[
        ("read", "f"),
        ("pread", "f"),
        ("pread64", "f"),
        ("readlink", "l"),
        ("readlinkat", "l"),
        ("getcwd", ""),
        ("getwd", ""),
        ("realpath", "f"),
    ];
    for (fn_name, name) in cases {
        for (dir, interposed) in [(l, false), (l, true), ("/tessera/fy", true)] {
            let path = if name.is_empty() {
                dir.to_string()
            } else {
                format!("{dir}/{name}")
            };
            let run = |n: &str| {
                let mut c = if interposed {
                    under(&inst, 0, prog.to_str().unwrap(), &[])
                } else {
                    Command::new(&prog)
                };
                c.args([fn_name, path.as_str(), n]).output().unwrap()
            };
            let over = run("64");
            let err = String::from_utf8_lossy(&over.stderr);
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(
                over.status.signal(),
                Some(libc::SIGABRT),
                "{fn_name} of 64 bytes into 8 on {path} (interposed: {interposed}): {over:?}"
            );
            assert!(
                err.contains("*** buffer overflow detected ***"),
                "{fn_name} on {path}: {err}"
            );
            if !matches!(*fn_name, "getwd" | "realpath" | "getcwd") {
                let fits = run("8");
                assert!(
                    fits.status.success()
                        && String::from_utf8_lossy(&fits.stdout).contains("returned 8"),
                    "{fn_name} of 8 bytes on {path}: {fits:?}"
                );
            }
        }
    }
}

/// `ls -la` of Tessera's root and of directories reached through a link (with the trailing
/// slash that makes `ls -ld` follow it) lists them and prints nothing on stderr: the ACL and
/// SELinux probes of `ls` get the quiet answers of a file system that keeps none. Files
/// beneath a link to a directory are reached, created and removed through it.
#[test]
fn ls_probes_quietly_and_paths_through_directory_links_work() {
    let inst = Inst::start(2);
    common::ok_under(
        &inst,
        0,
        "sh",
        &[
            "-c",
            "mkdir -p /tessera/d/sub && echo hi > /tessera/d/f && ln -s d /tessera/ld",
        ],
    );
    for args in [
        vec!["-la", "/tessera/"],
        vec!["-la", "/tessera/."],
        vec!["-la", "/tessera/ld/"],
        vec!["-ld", "/tessera/ld/"],
    ] {
        let out = common::ok_under(&inst, 1, "ls", &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.is_empty(), "ls {args:?} printed: {stderr}");
        let listing = String::from_utf8_lossy(&out.stdout);
        assert!(
            listing.starts_with('d') || listing.starts_with("total"),
            "ls {args:?}: {listing}"
        );
    }
    let out = common::ok_under(&inst, 1, "ls", &["-ld", "/tessera/ld/", "/tessera/ld"]);
    let lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert!(lines.iter().any(|l| l.starts_with('d')), "{lines:?}");
    assert!(lines.iter().any(|l| l.starts_with('l')), "{lines:?}");
    let out = common::ok_under(
        &inst,
        0,
        "sh",
        &[
            "-c",
            "cat /tessera/ld/f && echo new > /tessera/ld/sub/g && cat /tessera/d/sub/g && rm /tessera/ld/sub/g && ls /tessera/d/sub | wc -l",
        ],
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\nnew\n0\n");
    // du and ls -R walk with gnulib's fts, over openat and fstatat.
    let out = common::ok_under(&inst, 0, "du", &["-a", "/tessera/d"]);
    let du = String::from_utf8_lossy(&out.stdout);
    assert!(
        du.contains("/tessera/d/f\n") && du.contains("/tessera/d/sub\n"),
        "{du}"
    );
    let out = common::ok_under(&inst, 1, "ls", &["-R", "/tessera"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "/tessera:\nd\nld\n\n/tessera/d:\nf\nsub\n\n/tessera/d/sub:\n"
    );
    let out = common::ok_under(
        &inst,
        1,
        "python3",
        &[
            "-c",
            "import glob, os\nprint(sorted(glob.glob('/tessera/ld/*')))\nprint(sorted(r for r, _, _ in os.walk('/tessera', followlinks=True)))",
        ],
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "['/tessera/ld/f', '/tessera/ld/sub']\n['/tessera', '/tessera/d', '/tessera/d/sub', '/tessera/ld', '/tessera/ld/sub']\n"
    );
}

/// `*` matches any run of characters; everything else itself.
fn glob_match(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, tail)) => {
            name.starts_with(head)
                && (0..=name.len() - head.len()).any(|i| glob_match(tail, &name[head.len() + i..]))
        }
    }
}

/// The functions a shared library defines (`nm -D`), with versions of `GLIBC_PRIVATE` left
/// out.
fn defined_functions(lib: &Path) -> std::collections::BTreeSet<String> {
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(lib)
        .output()
        .expect("nm (binutils) runs");
    assert!(out.status.success(), "nm {}: {out:?}", lib.display());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let (_, kind, sym) = (w.next()?, w.next()?, w.next()?);
            let (name, version) = sym.split_once('@').unwrap_or((sym, ""));
            (matches!(kind, "T" | "W" | "i") && !version.contains("PRIVATE"))
                .then(|| name.to_string())
        })
        .collect()
}

/// Every function of the installed glibc that takes a path, a directory stream, a stream or a
/// descriptor (picked from its symbol table by the committed patterns) is defined by the
/// interposer or listed, with what a caller gets, in docs/interposer.md's table of the other
/// calls.
#[test]
fn every_glibc_file_call_is_served_or_documented() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("cc")
        .arg("-print-file-name=libc.so.6")
        .output()
        .expect("cc runs");
    let libc_path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let libc = defined_functions(Path::new(&libc_path));
    assert!(libc.len() > 1000, "{libc_path}: {} functions", libc.len());
    let ours = defined_functions(&common::preload_lib());
    let patterns: Vec<String> = std::fs::read_to_string(root.join("tests/glibc_file_calls.txt"))
        .unwrap()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect();
    let doc = std::fs::read_to_string(root.join("../../docs/interposer.md")).unwrap();
    let section = doc
        .split("\n## Every other glibc call on a path or descriptor\n")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("docs/interposer.md has the table of the other calls");
    let listed: std::collections::BTreeSet<&str> = section
        .lines()
        .filter(|l| l.starts_with('|'))
        .filter_map(|l| l.split('|').nth(1))
        .flat_map(|cell| cell.split('`').skip(1).step_by(2))
        .collect();
    let picked: Vec<&String> = libc
        .iter()
        .filter(|f| patterns.iter().any(|p| glob_match(p, f)))
        .collect();
    assert!(
        picked.len() > 250,
        "the patterns pick {} functions",
        picked.len()
    );
    let neither: Vec<&&String> = picked
        .iter()
        .filter(|f| !ours.contains(f.as_str()) && !listed.contains(f.as_str()))
        .collect();
    assert!(
        neither.is_empty(),
        "glibc functions on paths or descriptors that the interposer neither defines nor \
         lists in docs/interposer.md: {neither:?}"
    );
    // And the table lists nothing the interposer defines (it would say the wrong thing).
    let both: Vec<&&str> = listed.iter().filter(|f| ours.contains(**f)).collect();
    assert!(
        both.is_empty(),
        "listed as not defined, but defined: {both:?}"
    );
}

/// Calls that cannot act on a Tessera file answer its path with the errno docs/interposer.md
/// gives, never `ENOENT` for a file that exists, and quietly.
#[test]
fn calls_that_cannot_act_on_tessera_refuse_with_a_reason_not_enoent() {
    let inst = Inst::start(1);
    let prog = build_c("cc", "refusals");
    common::ok_under(
        &inst,
        0,
        "sh",
        &["-c", "mkdir /tessera/rd && echo x > /tessera/rd/f"],
    );
    let out = common::ok_under(
        &inst,
        0,
        prog.to_str().unwrap(),
        &["/tessera/rd/f", "/tessera/rd"],
    );
    let got = String::from_utf8_lossy(&out.stdout);
    let want = "chroot ENOTSUP\nmount EPERM\numount EPERM\nswapon EPERM\nacct EPERM\n\
        inotify_add_watch ENOTSUP\nname_to_handle_at ENOTSUP\n\
        posix_spawn_file_actions_addopen ENOTSUP\nposix_spawn_file_actions_addchdir_np ENOTSUP\n\
        isatty 0 ENOTTY\ngetdents64 EBADF\nreadahead ok\nftok ok\n";
    assert_eq!(got, want);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.is_empty(), "quiet without TESSERA_VERBOSE: {stderr}");
}

/// A library stored in Tessera loads with `dlopen` and `dlmopen`; a program stored there runs
/// through `execveat` and `fexecve`.
#[test]
fn code_stored_in_tessera_loads_and_runs() {
    let inst = Inst::start(2);
    let prog = build_c("cc", "loaders");
    let dir = scratch("loaders");
    let src = dir.join("answer.c");
    std::fs::write(&src, "int answer(void) { return 42; }\n").unwrap();
    let lib = dir.join("libanswer.so");
    let out = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(&src)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let script = format!(
        "mkdir -p /tessera/code && cp {} /tessera/code/ && cp /bin/echo /tessera/code/echo",
        lib.display()
    );
    common::ok_under(&inst, 0, "sh", &["-c", &script]);
    let p = prog.to_str().unwrap();
    let out = common::ok_under(&inst, 1, p, &["dlopen", "/tessera/code/libanswer.so"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "dlopen answer 42\ndlmopen answer 42\n"
    );
    // A bare name is searched with the caller's RUNPATH: the interposer must not stand
    // between the program and the dynamic linker.
    let with_runpath = build_c_with("cc", "loaders", &["-Wl,-rpath,$ORIGIN/lib"]);
    let lib_dir = with_runpath.parent().unwrap().join("lib");
    std::fs::create_dir_all(&lib_dir).unwrap();
    std::fs::copy(&lib, lib_dir.join("libanswer.so")).unwrap();
    let out = common::ok_under(
        &inst,
        0,
        with_runpath.to_str().unwrap(),
        &["dlopen", "libanswer.so"],
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "dlopen answer 42\ndlmopen answer 42\n"
    );
    let out = common::ok_under(&inst, 1, p, &["execveat", "/tessera/code", "echo"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "from-execveat\n");
    let out = common::ok_under(&inst, 0, p, &["fexecve", "/tessera/code/echo"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "from-fexecve\n");
}
