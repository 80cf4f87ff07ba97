//! The interposer's own descriptors (its connection to the daemon, its logs) stay out of the
//! program's way: a program that places its files on those numbers (`exec 5>` in a shell,
//! `dup2` in C) gets its file where it said, every byte it wrote to Tessera is in the file,
//! no byte of the library's lands in the program's files, and no false damage is reported.

mod common;

use common::{Inst, ok_under as ok, scratch};

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A shell under a descriptor limit of 64 puts its files on 3 to 9 and on 32 to 62 (where
/// the library's descriptors go under that limit) with `exec N>`, around writes and reads of a
/// Tessera file.
#[test]
fn a_shell_places_its_files_over_the_librarys_descriptors() {
    let inst = Inst::start(2);
    let local = scratch("shell-fds");
    let l = local.display();
    let script = format!(
        r#"ulimit -n 64 || exit 9
mkdir /tessera/sh
echo first > /tessera/sh/a
for n in 3 4 5 6 7 8 9 $(seq 32 62); do eval "exec $n>{l}/f$n"; done
for n in 3 4 5 6 7 8 9 $(seq 32 62); do echo "mine $n" >&$n; done
echo second >> /tessera/sh/a
read -r line < /tessera/sh/a
echo "$line" >> /tessera/sh/a
for n in 3 4 5 6 7 8 9 $(seq 32 62); do eval "exec $n>&-"; done
cat /tessera/sh/a
"#
    );
    let out = ok(&inst, 0, "bash", &["-c", &script]);
    assert_eq!(stdout(&out), "first\nsecond\nfirst\n", "{}", stderr(&out));
    assert!(
        !stderr(&out).contains("tessera:"),
        "no damage reported: {}",
        stderr(&out)
    );
    for n in (3..=9).chain(32..=62) {
        let got = std::fs::read_to_string(local.join(format!("f{n}"))).unwrap();
        assert_eq!(
            got,
            format!("mine {n}\n"),
            "the shell's file on descriptor {n}"
        );
    }
    let again = ok(&inst, 1, "cat", &["/tessera/sh/a"]);
    assert_eq!(stdout(&again), "first\nsecond\nfirst\n");
}

const PROGRAM: &str = r#"
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The descriptors of the library: its logs in the burst buffer (argv[3]) and its socket. */
static int library_fds(const char *bb, int *out, int skip) {
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    while ((e = readdir(d))) {
        int fd = atoi(e->d_name);
        char link[64], target[4096];
        if (e->d_name[0] == '.' || fd == dirfd(d) || fd == skip) continue;
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t k = readlink(link, target, sizeof target - 1);
        if (k < 0) continue;
        target[k] = 0;
        if (strstr(target, bb) || strncmp(target, "socket:", 7) == 0) out[n++] = fd;
    }
    closedir(d);
    return n;
}

static void check(int ok, const char *what) {
    if (!ok) { fprintf(stderr, "FAILED: %s (errno %d: %s)\n", what, errno, strerror(errno)); exit(1); }
}

int main(int argc, char **argv) {
    const char *path = argv[1], *local = argv[2], *bb = argv[3];
    char buf[64], name[4096];
    int held[256];
    int t = open(path, O_CREAT | O_RDWR | O_TRUNC, 0644);
    check(t >= 0, "open the Tessera file");
    check(write(t, "abcdefghij", 10) == 10, "first write");
    int n = library_fds(bb, held, t);
    check(n >= 2, "the library holds its socket and logs");
    /* Calls on a number the program never opened: EBADF, and the library keeps it. */
    errno = 0;
    check(close(held[0]) == -1 && errno == EBADF, "close of the library's descriptor");
    check(fcntl(held[0], F_GETFD) == -1 && errno == EBADF, "fcntl of the library's descriptor");
    check(dup(held[0]) == -1 && errno == EBADF, "dup of the library's descriptor");
    /* The program's own files onto every one of them. */
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "%s/own-%d", local, held[i]);
        int own = open(name, O_CREAT | O_WRONLY | O_TRUNC, 0644);
        check(own >= 0, "open a local file");
        check(dup2(own, held[i]) == held[i], "dup2 onto the library's descriptor");
        check(close(own) == 0, "close the local file's first descriptor");
        int len = snprintf(buf, sizeof buf, "mine %d\n", held[i]);
        check(write(held[i], buf, len) == len, "write the program's file");
    }
    /* Tessera goes on: writes, reads back every byte, and closes cleanly. */
    check(write(t, "KLMNOPQRST", 10) == 10, "second write");
    check(lseek(t, 0, SEEK_SET) == 0, "seek");
    memset(buf, 0, sizeof buf);
    check(read(t, buf, 20) == 20 && memcmp(buf, "abcdefghijKLMNOPQRST", 20) == 0, "read back");
    errno = 0;
    check(close(t) == 0, "close the Tessera file");
    /* A child of fork places its file over a descriptor the library inherited, then uses
       Tessera itself: its file is not closed or written by the library. */
    int again = open(path, O_RDONLY);
    check(again >= 0, "open again");
    int m = library_fds(bb, held, again);
    check(m >= 1, "the library holds descriptors again");
    pid_t child = fork();
    if (child == 0) {
        snprintf(name, sizeof name, "%s/child", local);
        int own = open(name, O_CREAT | O_WRONLY | O_TRUNC, 0644);
        check(dup2(own, held[0]) == held[0], "child: dup2 onto an inherited descriptor");
        close(own);
        int c = open(argv[4], O_CREAT | O_WRONLY | O_TRUNC, 0644);
        check(c >= 0 && write(c, "child", 5) == 5 && close(c) == 0, "child: Tessera");
        check(write(held[0], "child's own\n", 12) == 12, "child: its own file");
        _exit(0);
    }
    int status;
    check(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0, "child");
    memset(buf, 0, sizeof buf);
    check(pread(again, buf, 20, 0) == 20 && memcmp(buf, "abcdefghijKLMNOPQRST", 20) == 0, "read after fork");
    /* close_range closes the program's descriptors and leaves the library's. */
    check(close_range(3, ~0U, 0) == 0, "close_range");
    int last = open(path, O_RDONLY);
    check(last >= 0, "open after close_range");
    memset(buf, 0, sizeof buf);
    check(read(last, buf, 20) == 20 && memcmp(buf, "abcdefghijKLMNOPQRST", 20) == 0, "read after close_range");
    check(close(last) == 0, "close after close_range");
    printf("%d\n", n);
    return 0;
}
"#;

/// A C program puts its own files on every descriptor the library holds (found in
/// /proc/self/fd), in the process and in a child of fork, and closes everything with
/// close_range; the library's calls on those numbers get EBADF.
#[test]
fn a_program_that_dup2s_onto_every_library_descriptor_loses_nothing() {
    let inst = Inst::start(2);
    let dir = scratch("dup-onto-library");
    let src = dir.join("onto.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let exe = dir.join("onto");
    let built = std::process::Command::new("cc")
        .arg("-O2")
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
        .unwrap();
    assert!(built.status.success(), "{}", stderr(&built));
    let local = dir.join("local");
    std::fs::create_dir(&local).unwrap();
    let bb = inst.root.join("bb");
    let out = ok(
        &inst,
        0,
        exe.to_str().unwrap(),
        &[
            "/tessera/c-file",
            local.to_str().unwrap(),
            bb.to_str().unwrap(),
            "/tessera/from-child",
        ],
    );
    let held: usize = stdout(&out).trim().parse().unwrap();
    assert!(held >= 2, "{}", stderr(&out));
    assert!(
        !stderr(&out).contains("corrupt") && !stderr(&out).contains("checksum"),
        "no false damage: {}",
        stderr(&out)
    );
    let mut found = 0;
    for e in std::fs::read_dir(&local).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().into_string().unwrap();
        let got = std::fs::read_to_string(e.path()).unwrap();
        if let Some(n) = name.strip_prefix("own-") {
            assert_eq!(
                got,
                format!("mine {n}\n"),
                "{name}: only the program's bytes"
            );
            found += 1;
        } else {
            assert_eq!(name, "child");
            assert_eq!(got, "child's own\n", "the child's file");
        }
    }
    assert_eq!(found, held);
    let c = inst.client(1);
    let mut buf = [0u8; 20];
    c.open_read("/tessera/c-file")
        .unwrap()
        .read_exact_at(&mut buf, 0)
        .unwrap();
    assert_eq!(&buf, b"abcdefghijKLMNOPQRST");
    let mut child = [0u8; 5];
    c.open_read("/tessera/from-child")
        .unwrap()
        .read_exact_at(&mut child, 0)
        .unwrap();
    assert_eq!(&child, b"child");
}

/// Under a descriptor limit too low for the library's own files (32), a process says so once
/// on stderr and works through its daemon alone: it holds no log of its own, yet writes,
/// reads its own unpublished writes, another process's log on its node, and a PFS copy, and
/// its own files on every number it places them stay its own.
#[test]
fn under_a_tiny_descriptor_limit_a_process_works_through_its_daemon_alone() {
    let inst = Inst::start(2);
    let local = scratch("tiny-limit");
    let l = local.display();
    // Another process's published file on the same node, and a file only on the PFS.
    let other = inst.client(0);
    other.mkdir("/tessera/dm", 0o755).unwrap();
    let mut f = other.create("/tessera/dm/other").unwrap();
    f.write_at(b"from another process\n", 0).unwrap();
    f.close().unwrap();
    std::fs::create_dir_all(inst.pfs().join("dm")).unwrap();
    std::fs::write(inst.pfs().join("dm/pfs-only"), b"from the PFS\n").unwrap();
    let bb = inst.root.join("bb");
    let script = format!(
        r#"ulimit -n 32 || exit 9
for n in 3 4 5 6 7 8 9 $(seq 16 28); do eval "exec $n>{l}/f$n"; done
echo first > /tessera/dm/mine
exec 29<>/tessera/dm/mine
echo unpublished >&29  # over "first", from offset 0, not published yet
read -r a < /tessera/dm/mine
read -r b < /tessera/dm/other
read -r c < /tessera/dm/pfs-only
exec 29>&-
for n in 3 4 5 6 7 8 9 $(seq 16 28); do echo "mine $n" >&$n; eval "exec $n>&-"; done
echo "$a|$b|$c"
held=$(ls -l /proc/$$/fd | grep -c '{bb}' || true)
echo "logs held: $held"
"#,
        bb = bb.display()
    );
    let stats = local.join("stats");
    let out = common::succeeded(
        common::under(&inst, 0, "bash", &["-c", &script]).env("TESSERA_STATS", &stats),
    );
    let said = stderr(&out);
    // Its own unpublished bytes, another process's log on its node and the PFS copy, each
    // read through the daemon.
    let lines = common::stats_lines(&stats);
    let read = &lines.last().expect("a statistics line")["stats"]["read"];
    for source in ["own_unattached", "node_logs", "pfs"] {
        assert!(read[source].as_u64() > Some(0), "{source}: {read}");
    }
    assert_eq!(
        stdout(&out),
        "unpublished|from another process|from the PFS\nlogs held: 0\n",
        "{said}"
    );
    assert_eq!(
        said.matches("works through its daemon alone").count(),
        1,
        "said once: {said}"
    );
    for n in (3..=9).chain(16..=28) {
        let got = std::fs::read_to_string(local.join(format!("f{n}"))).unwrap();
        assert_eq!(got, format!("mine {n}\n"));
    }
    // What it wrote through its daemon is there for everyone.
    let mut buf = vec![0u8; 12];
    inst.client(1)
        .open_read("/tessera/dm/mine")
        .unwrap()
        .read_exact_at(&mut buf, 0)
        .unwrap();
    assert_eq!(&buf, b"unpublished\n");
}

/// The requests of a process working through its daemon, sent as a hostile or broken program
/// of the user could: another process's log, too much at once, inverted ranges, a path out of
/// the PFS directory. Each gets an error saying what was wrong, and the daemon carries on.
#[test]
fn the_requests_of_a_process_working_through_its_daemon_are_checked() {
    use tessera_proto::{LogAppend, LogReadAt, LogSync, ReadPfs};
    let inst = Inst::start(1);
    let c = inst.client(0);
    let mut f = c.create("/tessera/x").unwrap();
    f.write_at(b"x", 0).unwrap();
    f.close().unwrap();
    let ino = c.stat("/tessera/x").unwrap().ino;
    let mut raw = common::RawClient::hello(&inst, 0, None).unwrap();
    let me = raw.client;
    let errno = |r: Result<_, String>| -> tessera_client::Errno {
        let (answer, _): (tessera_proto::Answer<_>, Vec<u8>) = r.unwrap();
        let e: tessera_client::FsError = match answer {
            Ok::<tessera_proto::LogLens, _>(_) => panic!("accepted"),
            Err(e) => e,
        };
        e.errno
    };
    // Another process's log: refused.
    let theirs = LogSync {
        ino,
        log: me + 1000,
        durable: false,
    };
    assert_eq!(errno(raw.call(theirs)), tessera_client::Errno::Access);
    let (answer, _) = raw
        .call(LogAppend {
            ino,
            log: me + 1000,
            offset: 0,
            data: b"forged".to_vec(),
        })
        .unwrap();
    assert_eq!(answer.unwrap_err().errno, tessera_client::Errno::Access);
    // Its own log: appended, synced, read back; a read too large is refused.
    let (pos, _) = raw
        .call(LogAppend {
            ino,
            log: me,
            offset: 0,
            data: b"own".to_vec(),
        })
        .unwrap();
    assert_eq!(pos.unwrap(), 0);
    let (lens, _) = raw
        .call(LogSync {
            ino,
            log: me,
            durable: true,
        })
        .unwrap();
    assert_eq!(lens.unwrap().data, 3);
    let (data, trailer) = raw
        .call(LogReadAt {
            ino,
            log: me,
            pos: 0,
            len: 3,
        })
        .unwrap();
    assert_eq!((data.unwrap().len, trailer.as_slice()), (3, &b"own"[..]));
    let (too_big, _) = raw
        .call(LogReadAt {
            ino,
            log: me,
            pos: 0,
            len: 1 << 40,
        })
        .unwrap();
    assert_eq!(too_big.unwrap_err().errno, tessera_client::Errno::MsgSize);
    // PFS reads: inverted ranges are refused; a path never leaves the PFS directory, by
    // `..` or by a link there.
    let (answer, _) = raw
        .call(ReadPfs {
            path: "/x".to_string(),
            ranges: vec![(5, 1)],
        })
        .unwrap();
    assert_eq!(answer.unwrap_err().errno, tessera_client::Errno::Inval);
    std::os::unix::fs::symlink("/etc/passwd", inst.pfs().join("out")).unwrap();
    for path in ["/../etc/passwd", "/out"] {
        let (answer, trailer) = raw
            .call(ReadPfs {
                path: path.to_string(),
                ranges: vec![(0, 8)],
            })
            .unwrap();
        assert!(trailer.is_empty(), "{path}: {answer:?} {trailer:?}");
        if let Ok(got) = answer {
            assert_eq!(got, [0], "{path}");
        }
    }
    c.status().expect("the daemon carries on");
}
