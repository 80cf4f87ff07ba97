//! Unmodified programs through the LD_PRELOAD interposer, against 3 daemons: coreutils,
//! python3, a C program doing an N-1 strided pwrite from 4 processes and stdio, POSIX aio,
//! fcntl locks between two processes, and the pass-through of everything outside the prefix. Every test
//! checks the data byte for byte.

mod common;

use common::{Inst, build_c, ok_under as ok, scratch, under};
use std::process::{Output, Stdio};

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn random_bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn coreutils_work_unchanged() {
    let inst = Inst::start(3);
    let local = scratch("coreutils");
    let data = random_bytes(3 << 20, 7);
    std::fs::write(local.join("in.bin"), &data).unwrap();
    std::fs::create_dir_all(local.join("tree/sub")).unwrap();
    std::fs::write(local.join("tree/a.txt"), b"alpha\n").unwrap();
    std::fs::write(local.join("tree/sub/b.bin"), random_bytes(200_000, 9)).unwrap();
    let l = |p: &str| local.join(p).display().to_string();

    ok(&inst, 0, "mkdir", &["-p", "/tessera/d/e"]);
    ok(&inst, 1, "cp", &[&l("in.bin"), "/tessera/d/in.bin"]);
    // Read back through another daemon, with cat and with dd in odd block sizes.
    let cat = ok(&inst, 2, "cat", &["/tessera/d/in.bin"]);
    assert!(cat.stdout == data, "cat returned different bytes");
    ok(
        &inst,
        0,
        "dd",
        &[
            "if=/tessera/d/in.bin",
            &format!("of={}", l("dd.bin")),
            "bs=47001",
            "status=none",
        ],
    );
    assert!(std::fs::read(local.join("dd.bin")).unwrap() == data);
    ok(
        &inst,
        1,
        "dd",
        &[
            &format!("if={}", l("in.bin")),
            "of=/tessera/d/e/dd.bin",
            "bs=65536",
            "seek=1",
            "status=none",
        ],
    );
    let st = stdout(&ok(
        &inst,
        2,
        "stat",
        &["-c", "%s %F %a", "/tessera/d/e/dd.bin"],
    ));
    assert_eq!(
        st.trim(),
        format!("{} regular file 644", data.len() + 65536)
    );
    // mv inside Tessera, then ls sees the new name only.
    ok(
        &inst,
        0,
        "mv",
        &["/tessera/d/in.bin", "/tessera/d/e/moved.bin"],
    );
    let ls = stdout(&ok(&inst, 1, "ls", &["-a", "/tessera/d/e"]));
    let names: Vec<&str> = ls.split_whitespace().collect();
    assert_eq!(names, [".", "..", "dd.bin", "moved.bin"]);
    let long = stdout(&ok(&inst, 1, "ls", &["-l", "/tessera/d"]));
    assert!(long.contains("drwx"), "{long}");
    ok(&inst, 2, "cmp", &[&l("in.bin"), "/tessera/d/e/moved.bin"]);
    // tar out of and into Tessera; the extracted tree matches the original.
    ok(
        &inst,
        0,
        "tar",
        &["-cf", "/tessera/tree.tar", "-C", &l(""), "tree"],
    );
    ok(&inst, 1, "mkdir", &["/tessera/x"]);
    ok(
        &inst,
        2,
        "tar",
        &["-xf", "/tessera/tree.tar", "-C", "/tessera/x"],
    );
    ok(
        &inst,
        0,
        "cmp",
        &[&l("tree/sub/b.bin"), "/tessera/x/tree/sub/b.bin"],
    );
    ok(
        &inst,
        0,
        "cmp",
        &[&l("tree/a.txt"), "/tessera/x/tree/a.txt"],
    );
    ok(&inst, 1, "cp", &["-r", "/tessera/x/tree", &l("back")]);
    assert!(
        std::fs::read(local.join("back/sub/b.bin")).unwrap()
            == std::fs::read(local.join("tree/sub/b.bin")).unwrap()
    );
    // rm -r walks the tree (openat/fdopendir/unlinkat relative to Tessera descriptors).
    ok(&inst, 2, "rm", &["-r", "/tessera/x", "/tessera/d"]);
    let ls = stdout(&ok(&inst, 0, "ls", &["/tessera"]));
    assert_eq!(ls.split_whitespace().collect::<Vec<_>>(), ["tree.tar"]);
    // A missing file gives the usual message and status.
    let out = under(&inst, 0, "cat", &["/tessera/nope"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("No such file or directory"));
    let _ = std::fs::remove_dir_all(&local);
}

#[test]
fn python_reads_and_writes() {
    let inst = Inst::start(3);
    let script = r#"
import os, sys
data = bytes((i * 7 + 3) % 256 for i in range(1_000_003))
with open('/tessera/py/data.bin', 'wb') as f:
    f.write(data[:500_000]); f.write(data[500_000:])
with open('/tessera/py/data.bin', 'rb') as f:
    f.seek(123_456); part = f.read(1000)
assert part == data[123_456:124_456], 'seek+read'
assert os.path.getsize('/tessera/py/data.bin') == len(data)
with open('/tessera/py/log.txt', 'a') as f: f.write('one\n')
with open('/tessera/py/log.txt', 'a') as f: f.write('two\n')
assert open('/tessera/py/log.txt').read() == 'one\ntwo\n'
assert sorted(os.listdir('/tessera/py')) == ['data.bin', 'log.txt']
os.rename('/tessera/py/log.txt', '/tessera/py/renamed.txt')
assert not os.path.exists('/tessera/py/log.txt')
# A path that reaches the prefix through '..', and relative paths after chdir into Tessera.
assert sorted(os.listdir('/usr/../tessera/py')) == ['data.bin', 'renamed.txt']
os.chdir('/tessera/py')
assert os.getcwd() == '/tessera/py'
assert open('renamed.txt').read() == 'one\ntwo\n'
assert open('../py/data.bin', 'rb').read(10) == data[:10]
os.chdir('/')
assert not os.path.exists('renamed.txt')
print('ok')
"#;
    ok(&inst, 0, "mkdir", &["/tessera/py"]);
    let out = ok(&inst, 1, "python3", &["-c", script]);
    assert_eq!(stdout(&out).trim(), "ok");
    // Another process on another daemon reads what python wrote (session: after its close).
    let check = "import sys; d=open('/tessera/py/data.bin','rb').read(); \
                 sys.exit(0 if d == bytes((i*7+3)%256 for i in range(1_000_003)) else 1)";
    ok(&inst, 2, "python3", &["-c", check]);
}

#[test]
fn c_program_n1_strided_from_four_processes_and_stdio() {
    let inst = Inst::start(3);
    let exe = build_c("cc", "strided");
    let exe = exe.to_str().unwrap();
    let (xfer, count) = ("47001", "40");
    let writers: Vec<_> = (0..4)
        .map(|r| {
            under(
                &inst,
                r,
                exe,
                &["write", "/tessera/n1", &r.to_string(), "4", xfer, count],
            )
            .spawn()
            .unwrap()
        })
        .collect();
    for mut w in writers {
        assert!(w.wait().unwrap().success());
    }
    for node in 0..3 {
        ok(
            &inst,
            node,
            exe,
            &["verify", "/tessera/n1", "4", xfer, count],
        );
    }
    ok(&inst, 1, exe, &["stdio", "/tessera/stdio.txt"]);
}

#[test]
fn posix_aio_on_tessera_and_local_files() {
    let inst = Inst::start(3);
    let exe = build_c("cc", "aio");
    let local = scratch("aio");
    let l = local.join("local.bin").display().to_string();
    let out = ok(&inst, 1, exe.to_str().unwrap(), &["/tessera/aio.bin", &l]);
    assert_eq!(stdout(&out).trim(), "aio: ok");
    // Another process sees the asynchronous writes.
    let back = ok(&inst, 2, "cat", &["/tessera/aio.bin"]).stdout;
    assert_eq!(back.len(), 4096 + 8192);
    assert!(
        back[4096..]
            .iter()
            .enumerate()
            .all(|(i, &b)| b == (i * 7) as u8)
    );
    let _ = std::fs::remove_dir_all(&local);
}

#[test]
fn fcntl_locks_block_between_processes() {
    let inst = Inst::start(3);
    // The holder takes an exclusive lock, says so, and keeps it until its stdin closes.
    let holder = r#"
import fcntl, os, sys
fd = os.open('/tessera/lockfile', os.O_RDWR | os.O_CREAT)
fcntl.lockf(fd, fcntl.LOCK_EX, 100, 0)
os.write(fd, b'held')
print('locked', flush=True)
sys.stdin.read()
os.close(fd)
"#;
    let mut h = under(&inst, 0, "python3", &["-c", holder])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(h.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "locked");
    // Non-blocking attempts from another daemon fail with EAGAIN; F_GETLK names the holder;
    // a disjoint range is free.
    let probe = format!(
        r#"
import errno, fcntl, os, struct
fd = os.open('/tessera/lockfile', os.O_RDWR)
try:
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 10, 50)
    raise SystemExit('lock granted while held')
except OSError as e:
    assert e.errno in (errno.EAGAIN, errno.EACCES), e
req = struct.pack('hhqqi', fcntl.F_WRLCK, 0, 0, 0, 0)
got = fcntl.fcntl(fd, fcntl.F_GETLK, req + bytes(4))
typ, wh, start, ln, pid = struct.unpack('hhqqi', got[:28])
assert typ == fcntl.F_WRLCK and start == 0 and ln == 100 and pid == {pid}, (typ, start, ln, pid)
fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, 10, 100)
print('probed')
"#,
        pid = h.id()
    );
    let out = ok(&inst, 2, "python3", &["-c", &probe]);
    assert_eq!(stdout(&out).trim(), "probed");
    // A blocking request waits until the holder closes, then sees the holder's write.
    let waiter = r#"
import fcntl, os
fd = os.open('/tessera/lockfile', os.O_RDWR)
print('waiting', flush=True)
fcntl.lockf(fd, fcntl.LOCK_EX, 100, 0)
print(os.pread(fd, 4, 0).decode(), flush=True)
"#;
    let mut w = under(&inst, 1, "python3", &["-c", waiter])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(w.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert_eq!(line.trim(), "waiting");
    // While the holder holds, the waiter says nothing more.
    let fd = std::os::fd::AsRawFd::as_raw_fd(out.get_ref());
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call.
    let ready = unsafe { libc::poll(&mut pfd, 1, 500) };
    assert_eq!(ready, 0, "the waiter went on while the lock was held");
    drop(h.stdin.take()); // the holder closes its file and exits
    assert!(h.wait().unwrap().success());
    line.clear();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert_eq!(
        line.trim(),
        "held",
        "the waiter must see the holder's write"
    );
    assert!(w.wait().unwrap().success());
}

#[test]
fn calls_outside_the_prefix_pass_through() {
    let inst = Inst::start(1);
    let local = scratch("passthrough");
    let f = local.join("plain.txt").display().to_string();
    // A shell writes a local file, and lists a directory, as without the interposer.
    ok(
        &inst,
        0,
        "sh",
        &[
            "-c",
            &format!(
                "echo local > {f} && cat {f} > {f}.2 && ls {}",
                local.display()
            ),
        ],
    );
    assert_eq!(
        std::fs::read_to_string(format!("{f}.2")).unwrap(),
        "local\n"
    );
    // Nothing was created inside Tessera.
    let ls = stdout(&ok(&inst, 0, "ls", &["-A", "/tessera"]));
    assert!(ls.trim().is_empty(), "{ls}");
    // The interposer does not even connect for programs that never touch the prefix: with
    // the daemon stopped, local work still succeeds.
    assert!(inst.tessera(&["stop"]).status.success());
    ok(&inst, 0, "cp", &[&f, &format!("{f}.3")]);
    let out = under(&inst, 0, "cat", &["/tessera/x"]).output().unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("tessera start"),
        "the error names the fix: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&local);
}

/// pwrite and ftruncate past the largest file size fail with EFBIG, as the kernel's do, and
/// the program's valid writes are published at close.
#[test]
fn interposed_sizes_past_the_limit_are_efbig() {
    let inst = Inst::start(2);
    let script = r#"
import errno, os
fd = os.open("/tessera/big", os.O_CREAT | os.O_RDWR, 0o644)
os.pwrite(fd, b"valid", 0)
for off in (2**62, 2**56):
    try:
        os.pwrite(fd, b"x", off)
        print("accepted", off)
    except OSError as e:
        print(errno.errorcode[e.errno])
try:
    os.ftruncate(fd, 2**62)
    print("truncate accepted")
except OSError as e:
    print(errno.errorcode[e.errno])
os.close(fd)
print(os.stat("/tessera/big").st_size)
"#;
    let out = ok(&inst, 0, "python3", &["-c", script]);
    assert_eq!(stdout(&out), "EFBIG\nEFBIG\nEFBIG\n5\n");
    let cat = ok(&inst, 1, "cat", &["/tessera/big"]);
    assert_eq!(cat.stdout, b"valid");
}

/// NULL buffers and result pointers given to interposed calls on Tessera files fail with
/// EFAULT, as the kernel's do, instead of crashing the program or reading as end of file.
#[test]
fn null_pointers_are_efault() {
    let inst = Inst::start(1);
    let script = r#"
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.read.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
libc.write.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
libc.pread.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_long]
libc.fstat.argtypes = [ctypes.c_int, ctypes.c_void_p]
libc.readv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
fd = os.open("/tessera/n", os.O_CREAT | os.O_RDWR, 0o644)
os.write(fd, b"0123456789")
def call(name, *args):
    ctypes.set_errno(0)
    rc = getattr(libc, name)(fd, *args)
    print(name, rc, errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno()))
call("read", None, 10)
call("write", None, 10)
call("pread", None, 10, 0)
call("fstat", None)
call("readv", None, 2)
call("read", None, 0)
os.close(fd)
print(open("/tessera/n").read())
"#;
    let out = ok(&inst, 0, "python3", &["-c", script]);
    assert_eq!(
        stdout(&out),
        "read -1 EFAULT\nwrite -1 EFAULT\npread -1 EFAULT\nfstat -1 EFAULT\nreadv -1 EFAULT\nread 0 0\n0123456789\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Links found in the PFS directory, through the interposer: lstat shows a link, readlink
/// its target, stat and open follow it beneath the PFS root, never out of it.
#[test]
fn pfs_links_through_the_interposer() {
    let inst = Inst::start(2);
    let pfs = inst.pfs();
    std::fs::write(pfs.join("data"), b"inside").unwrap();
    std::os::unix::fs::symlink("data", pfs.join("in")).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", pfs.join("out")).unwrap();
    let script = r#"
import errno, os, stat
print(stat.S_ISLNK(os.lstat("/tessera/in").st_mode), os.readlink("/tessera/in"))
print(os.stat("/tessera/in").st_size, open("/tessera/in").read())
try:
    open("/tessera/out").read()
    print("followed out")
except OSError as e:
    print(errno.errorcode[e.errno])
try:
    open("/tessera/in", "w").write("x")
    print("wrote through")
except OSError as e:
    print(errno.errorcode[e.errno])
print(sorted(os.listdir("/tessera")))
"#;
    let out = ok(&inst, 0, "python3", &["-c", script]);
    assert_eq!(
        stdout(&out),
        "True data\n6 inside\nEXDEV\nELOOP\n['data', 'in', 'out']\n"
    );
    assert_eq!(std::fs::read(pfs.join("data")).unwrap(), b"inside");
}

/// A name that is not UTF-8, under the prefix or relative to a Tessera working directory, is
/// refused with a clear error, never passed on to the kernel (which would create it in the
/// process's real working directory).
#[test]
fn non_utf8_names_are_refused_not_passed_through() {
    let inst = Inst::start(2);
    let cwd = scratch("non-utf8-cwd");
    ok(&inst, 0, "mkdir", &["/tessera/d"]);
    let script = r#"
import errno, os
os.chdir("/tessera/d")
for name in (b"rel\xff", b"/tessera/d/abs\xfe"):
    try:
        fd = os.open(name, os.O_CREAT | os.O_WRONLY, 0o644)
        os.write(fd, b"x")
        os.close(fd)
        print("created")
    except OSError as e:
        print(errno.errorcode[e.errno])
try:
    os.mkdir(b"dir\xff")
    print("created")
except OSError as e:
    print(errno.errorcode[e.errno])
"#;
    let out = common::succeeded(under(&inst, 0, "python3", &["-c", script]).current_dir(&cwd));
    assert_eq!(stdout(&out), "EILSEQ\nEILSEQ\nEILSEQ\n");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not UTF-8"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let leaked: Vec<_> = std::fs::read_dir(&cwd)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(
        leaked.is_empty(),
        "created in the real working directory: {leaked:?}"
    );
}
