//! The FUSE mount (`tessera mount`): everyday tools, a statically linked program, locks
//! shared with the interposer's lock service, unmount with and without users, and a mount at
//! the interposer's own prefix.
//!
//! Mounting needs root (or a user-mountable FUSE) and /dev/fuse: these tests are ignored
//! otherwise, and `scripts/test.sh` runs them when it runs as root.

mod common;

use common::{Inst, ok_under, scratch, succeeded};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use tessera_client::{Errno, LockKind, OpenOptions};

/// A mount of an instance, unmounted (lazily) when dropped.
struct Mount<'a> {
    inst: &'a Inst,
    point: PathBuf,
}

impl<'a> Mount<'a> {
    fn new(inst: &'a Inst, point: &Path, extra: &[&str]) -> Mount<'a> {
        std::fs::create_dir_all(point).unwrap();
        let mut args = vec!["mount", point.to_str().unwrap()];
        args.extend(extra);
        let out = inst.tessera(&args);
        assert!(
            out.status.success(),
            "tessera mount: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Mount {
            inst,
            point: point.to_path_buf(),
        }
    }

    fn at(&self, rel: &str) -> PathBuf {
        self.point.join(rel)
    }

    fn umount(&self, lazy: bool) -> std::process::Output {
        let p = self.point.to_str().unwrap();
        let args: Vec<&str> = if lazy {
            vec!["umount", "--lazy", p]
        } else {
            vec!["umount", p]
        };
        self.inst.tessera(&args)
    }
}

impl Drop for Mount<'_> {
    fn drop(&mut self) {
        let _ = self.umount(true);
    }
}

fn sh(script: &str, cwd: &Path) -> std::process::Output {
    succeeded(Command::new("sh").arg("-c").arg(script).current_dir(cwd))
}

/// A tree of files of varied sizes, a subdirectory, an empty file and an executable.
fn sample_tree(dir: &Path) {
    std::fs::create_dir_all(dir.join("sub/deeper")).unwrap();
    for (i, size) in [0usize, 1, 4095, 4096, 131_073, 1 << 20].iter().enumerate() {
        let bytes: Vec<u8> = (0..*size).map(|b| (b * 7 + i) as u8).collect();
        std::fs::write(dir.join(format!("f{i}")), &bytes).unwrap();
        std::fs::write(dir.join(format!("sub/deeper/g{i}")), &bytes).unwrap();
    }
    std::fs::write(dir.join("run.sh"), "#!/bin/sh\necho ran\n").unwrap();
    sh("chmod 755 run.sh && chmod 600 f1", dir);
}

#[test]
#[ignore = "needs root and /dev/fuse: scripts/test.sh runs it as root"]
fn coreutils_and_tar_round_trip_through_the_mount() {
    let inst = Inst::start(2);
    let work = scratch("fuse-coreutils");
    let src = work.join("src");
    sample_tree(&src);
    let m = Mount::new(&inst, &work.join("mnt"), &[]);
    let root = m.at("");
    sh(
        &format!(
            "cp -a {src}/. copy && diff -r {src} copy \
             && test \"$(stat -c %a copy/run.sh copy/f1)\" = \"$(printf '755\\n600')\" \
             && ./copy/run.sh | grep -qx ran \
             && mv copy moved && test ! -e copy && diff -r {src} moved \
             && ln -s moved/f4 link && cmp link {src}/f4 && test \"$(readlink link)\" = moved/f4 \
             && ln moved/f5 hard && test \"$(stat -c %h moved/f5)\" = 2 \
             && test \"$(stat -c %i moved/f5)\" = \"$(stat -c %i hard)\" \
             && touch -d 2001-02-03T04:05:06 moved/f2 && test \"$(stat -c %Y moved/f2)\" = 981173106 \
             && truncate -s 10 moved/f5 && test \"$(stat -c %s hard)\" = 10 \
             && echo appended >> moved/f0 && test \"$(cat moved/f0)\" = appended \
             && tar cf {work}/out.tar -C moved . && mkdir back && tar xf {work}/out.tar -C back \
             && rm back/f0 moved/f0 back/f5 moved/f5 && diff -r moved back \
             && rm -r moved back hard link && test -z \"$(ls -A)\"",
            src = src.display(),
            work = work.display()
        ),
        &root,
    );
    // What the mount wrote, a client of another node reads.
    sh(&format!("cp {}/f4 seen", src.display()), &root);
    let mut f = inst.client(1).open_read("/tessera/seen").unwrap();
    let mut got = vec![0u8; 131_073];
    f.read_exact_at(&mut got, 0).unwrap();
    assert_eq!(got, std::fs::read(src.join("f4")).unwrap());
    drop(m);
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
#[ignore = "needs root and /dev/fuse: scripts/test.sh runs it as root"]
fn a_statically_linked_program_writes_and_reads_through_the_mount() {
    let busybox = Path::new("/bin/busybox");
    assert!(
        busybox.exists(),
        "Debian's busybox-static is missing (scripts/lib.sh installs it)"
    );
    // The interposer cannot reach it: no dynamic section.
    let ldd = Command::new("ldd").arg(busybox).output().unwrap();
    assert!(
        !ldd.status.success() || String::from_utf8_lossy(&ldd.stdout).contains("not a dynamic"),
        "busybox is dynamically linked here: {}",
        String::from_utf8_lossy(&ldd.stdout)
    );
    let inst = Inst::start(1);
    let work = scratch("fuse-static");
    let m = Mount::new(&inst, &work.join("mnt"), &[]);
    let out = succeeded(
        Command::new(busybox)
            .args([
                "sh",
                "-c",
                "mkdir d && echo from-static > d/s.txt && cat d/s.txt",
            ])
            .current_dir(m.at("")),
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "from-static\n");
    // A dynamically linked program under the interposer sees it at the instance's prefix.
    let out = ok_under(&inst, 0, "cat", &["/tessera/d/s.txt"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "from-static\n");
    drop(m);
    let _ = std::fs::remove_dir_all(&work);
}

/// A Python program holding a lock (`call`: `lockf` for an fcntl lock, `flock` for a
/// flock(2) one) on a file through the mount until told to end. Before it says so, it opens
/// and closes another descriptor of the file, which ends an fcntl lock but not a flock.
fn python_lock_holder(path: &Path, call: &str) -> std::process::Child {
    let script = format!(
        "import fcntl, sys\np = {:?}\nf = open(p, 'r+')\nfcntl.{call}(f, fcntl.LOCK_EX)\nif '{call}' == 'flock':\n    open(p).close()\nprint('held', flush=True)\nsys.stdin.read()\n",
        path.to_str().unwrap()
    );
    Command::new("python3")
        .args(["-c", &script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// What a non-blocking exclusive lock (`call`: `lockf` or `flock`) through the mount gets:
/// `got` or the error's name.
fn python_try_lock(path: &Path, call: &str) -> String {
    let script = format!(
        "import fcntl, errno\nf = open({:?}, 'r+')\ntry:\n    fcntl.{call}(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n    print('got')\nexcept OSError as e:\n    print(errno.errorcode[e.errno])\n",
        path.to_str().unwrap()
    );
    let out = succeeded(Command::new("python3").args(["-c", &script]));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn refused(answer: &str) -> bool {
    ["EAGAIN", "EACCES", "EWOULDBLOCK"].contains(&answer)
}

/// Locks of kind `call` (`lockf` or `flock`) through the mount conflict with a lock held
/// through a client of another node, with each other, and the other way round.
fn locks_through_the_mount_meet_the_other_interfaces_locks(call: &str) {
    use std::io::{BufRead, Write};
    let inst = Inst::start(2);
    let work = scratch(&format!("fuse-locks-{call}"));
    let m = Mount::new(&inst, &work.join("mnt"), &[]);
    let client = inst.client(1);
    let mut f = client
        .open(
            "/tessera/locked",
            OpenOptions::new().read(true).write(true).create(true),
        )
        .unwrap();
    f.write_at(b"0123456789", 0).unwrap();
    f.lock(0, 0, LockKind::Exclusive, false).unwrap();
    // Held by a process of another node: refused through the mount.
    let answer = python_try_lock(&m.at("locked"), call);
    assert!(
        refused(&answer),
        "a {call} lock through the mount must conflict with one held elsewhere: {answer}"
    );
    f.unlock(0, 0).unwrap();
    assert_eq!(python_try_lock(&m.at("locked"), call), "got");
    // Two processes on the mount conflict with each other too.
    let mut holder = python_lock_holder(&m.at("locked"), call);
    let mut line = String::new();
    std::io::BufReader::new(holder.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "held");
    let answer = python_try_lock(&m.at("locked"), call);
    assert!(refused(&answer), "{call}: {answer}");
    // ... and with the other interfaces.
    let e = f.lock(0, 0, LockKind::Exclusive, false).unwrap_err();
    assert_eq!(e.errno, Errno::Again, "{e}");
    // Ending the holder releases its lock.
    holder.stdin.as_mut().unwrap().write_all(b"").unwrap();
    drop(holder.stdin.take());
    assert!(holder.wait().unwrap().success());
    common::eventually_ok(Duration::from_secs(20), "the lock released", || {
        match f.lock(0, 0, LockKind::Exclusive, false) {
            Ok(()) => Ok(()),
            Err(e) => Err(e.to_string()),
        }
    });
    f.close().unwrap();
    drop(m);
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
#[ignore = "needs root and /dev/fuse: scripts/test.sh runs it as root"]
fn record_locks_through_the_mount_meet_the_other_interfaces_locks() {
    locks_through_the_mount_meet_the_other_interfaces_locks("lockf");
}

#[test]
#[ignore = "needs root and /dev/fuse: scripts/test.sh runs it as root"]
fn flock_through_the_mount_meets_the_other_interfaces_locks() {
    locks_through_the_mount_meet_the_other_interfaces_locks("flock");
}

#[test]
#[ignore = "needs root and /dev/fuse: scripts/test.sh runs it as root"]
fn extended_attributes_and_statfs_through_the_mount() {
    let inst = Inst::start(1);
    let work = scratch("fuse-xattr");
    let m = Mount::new(&inst, &work.join("mnt"), &[]);
    std::fs::write(m.at("x"), b"x").unwrap();
    let script = format!(
        "import os\np = {:?}\nos.setxattr(p, 'user.k', b'value')\nprint(os.getxattr(p, 'user.k').decode())\nprint(','.join(os.listxattr(p)))\nos.removexattr(p, 'user.k')\nprint(len(os.listxattr(p)))\ns = os.statvfs(p)\nprint(s.f_blocks > 0 and s.f_bavail <= s.f_blocks)\n",
        m.at("x").to_str().unwrap()
    );
    let out = succeeded(Command::new("python3").args(["-c", &script]));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "value\nuser.k\n0\nTrue\n"
    );
    // The client sees what was set through the mount.
    let c = inst.client(0);
    c.set_xattr("/tessera/x", "user.other", b"v2", Default::default())
        .unwrap();
    let out = succeeded(Command::new("python3").args([
        "-c",
        &format!(
            "import os; print(os.getxattr({:?}, 'user.other').decode())",
            m.at("x").to_str().unwrap()
        ),
    ]));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "v2\n");
    drop(m);
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
#[ignore = "needs root and /dev/fuse: scripts/test.sh runs it as root"]
fn unmount_refuses_while_in_use_naming_the_processes_unless_lazy() {
    let inst = Inst::start(1);
    let work = scratch("fuse-busy");
    let m = Mount::new(&inst, &work.join("mnt"), &[]);
    std::fs::create_dir(m.at("d")).unwrap();
    std::fs::write(m.at("d/open"), b"held open").unwrap();
    let mut in_dir = Command::new("sleep")
        .arg("60")
        .current_dir(m.at("d"))
        .spawn()
        .unwrap();
    let holding = std::fs::File::open(m.at("d/open")).unwrap();
    let out = m.umount(false);
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("EBUSY"), "{text}");
    assert!(
        text.contains(&format!("pid {} (sleep): working directory", in_dir.id())),
        "{text}"
    );
    assert!(
        text.contains(&format!("pid {} (", std::process::id())) && text.contains("open file"),
        "this test holds a file open: {text}"
    );
    in_dir.kill().unwrap();
    in_dir.wait().unwrap();
    drop(holding);
    // Free now: a plain unmount succeeds and the server ends.
    let out = m.umount(false);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap()
            .contains(m.point.to_str().unwrap()),
        "the mount is gone"
    );
    // A lazy unmount detaches a mount still in use.
    let m2 = Mount::new(&inst, &work.join("mnt"), &[]);
    let mut in_dir = Command::new("sleep")
        .arg("60")
        .current_dir(m2.at(""))
        .spawn()
        .unwrap();
    let out = m2.umount(true);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    in_dir.kill().unwrap();
    in_dir.wait().unwrap();
    drop(m2);
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
#[ignore = "needs root and /dev/fuse: scripts/test.sh runs it as root"]
fn a_bad_model_or_mount_point_is_refused_by_name() {
    let inst = Inst::start(1);
    let work = scratch("fuse-refused");
    let out = inst.tessera(&["mount", work.to_str().unwrap(), "--model", "eventual"]);
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("eventual") && text.contains("posix, commit, session or mpiio"),
        "{text}"
    );
    let out = inst.tessera(&["mount", work.join("missing").to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("mkdir it first"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A POSIX mount: a write through one descriptor is read at once through another
    // process's, with no close between.
    let m = Mount::new(&inst, &work.join("mnt"), &["--model", "posix"]);
    sh(
        "exec 3>shared; printf first >&3; test \"$(cat shared)\" = first; printf -- '-second' >&3; test \"$(cat shared)\" = first-second",
        &m.at(""),
    );
    drop(m);
    let _ = std::fs::remove_dir_all(&work);
}

/// Mounted at the interposer's prefix, static and dynamic programs use the same paths.
#[test]
#[ignore = "needs root and /dev/fuse: scripts/test.sh runs it as root"]
fn a_mount_at_the_interposers_prefix_serves_static_and_dynamic_programs_alike() {
    let inst = Inst::start(1);
    let prefix = Path::new(tessera_client::DEFAULT_MOUNT);
    let made = !prefix.exists();
    let m = Mount::new(&inst, prefix, &[]);
    succeeded(Command::new("/bin/busybox").args([
        "sh",
        "-c",
        "echo one-path > /tessera/same && cat /tessera/same",
    ]));
    let out = ok_under(&inst, 0, "cat", &["/tessera/same"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "one-path\n");
    let out = ok_under(
        &inst,
        0,
        "sh",
        &["-c", "echo from-dynamic >> /tessera/same"],
    );
    assert!(out.status.success());
    let out = succeeded(Command::new("/bin/busybox").args(["cat", "/tessera/same"]));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "one-path\nfrom-dynamic\n"
    );
    let out = m.umount(false);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop(m);
    if made {
        let _ = std::fs::remove_dir(prefix);
    }
}

/// Tools that lean on the file system's corners: git (renames, hard links, lock files),
/// make (timestamps) and sqlite3 (fcntl locks; WAL mode also maps its shared-memory index
/// MAP_SHARED), each run by two processes in turn.
#[test]
#[ignore = "needs root and /dev/fuse: scripts/test.sh runs it as root"]
fn git_make_and_sqlite_work_on_the_mount() {
    let inst = Inst::start(1);
    let work = scratch("fuse-tools");
    let m = Mount::new(&inst, &work.join("mnt"), &[]);
    let root = m.at("");
    sh(
        "git init -q repo && cd repo && git config user.email t@example.org \
         && git config user.name t \
         && printf 'out: in\\n\\tcat in > out\\n' > Makefile && echo one > in \
         && git add Makefile in && git commit -qm first \
         && make -s && test \"$(cat out)\" = one \
         && make -q out \
         && sleep 1 && echo two > in && ! make -q out && make -s && test \"$(cat out)\" = two \
         && git mv in input && git commit -qam second && git gc -q \
         && test \"$(git log --format=%s | tr '\\n' ' ')\" = 'second first ' \
         && git fsck --strict --no-progress",
        &root,
    );
    for journal in ["delete", "wal"] {
        let db = format!("{journal}.db");
        let out = sh(
            &format!(
                "sqlite3 {db} 'PRAGMA journal_mode={journal};' \
                 'create table t(x);' 'insert into t values (1),(2),(3);' 'select sum(x) from t;'"
            ),
            &root,
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("{journal}\n6\n")
        );
        // A second process sees the first's commits, and its own writes last.
        let out = sh(
            &format!(
                "sqlite3 {db} 'insert into t values (4);' && sqlite3 {db} 'select count(*), sum(x) from t;' 'PRAGMA integrity_check;'"
            ),
            &root,
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), "4|10\nok\n");
    }
    drop(m);
    let _ = std::fs::remove_dir_all(&work);
}

/// A Go program (Go makes its system calls itself: LD_PRELOAD never sees them), built with
/// Debian's Go toolchain, writes and reads a file through the mount.
#[test]
#[ignore = "needs root and /dev/fuse: scripts/test.sh runs it as root"]
fn a_go_program_writes_and_reads_through_the_mount() {
    let go = Path::new("/usr/bin/go");
    assert!(
        go.exists(),
        "Debian's golang-go is missing (scripts/lib.sh installs it)"
    );
    let work = scratch("fuse-go");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/go/rw.go");
    let exe = work.join("rw");
    succeeded(
        Command::new(go)
            .args(["build", "-o"])
            .arg(&exe)
            .arg(&src)
            .env("GOCACHE", work.join("gocache"))
            .env("GOPATH", work.join("gopath"))
            .env("GO111MODULE", "off"),
    );
    let inst = Inst::start(1);
    let m = Mount::new(&inst, &work.join("mnt"), &[]);
    let out = succeeded(Command::new(&exe).arg(m.at("from-go")));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "65536\n");
    let out = ok_under(&inst, 0, "wc", &["-c", "/tessera/from-go"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("65536 "),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    drop(m);
    let _ = std::fs::remove_dir_all(&work);
}
