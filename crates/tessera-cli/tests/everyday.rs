//! Everyday programs through the interposer on 3 daemons: what a new user runs on the first
//! day (shells, coreutils, util-linux, python3) does what it does on a local file system, or
//! refuses with a message that names the reason.

mod common;

use common::{Inst, TESSERA, ok_under as ok, under};
use std::process::Output;

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Archives `what` (relative to `dir`) with the system's tar, outside Tessera, into
/// `dir/<what>.tar`, with `extra` options first.
fn local_tar(dir: &std::path::Path, what: &str, extra: &[&str]) -> std::path::PathBuf {
    let tar = dir.join(format!("{what}.tar"));
    let out = std::process::Command::new("tar")
        .args(extra)
        .arg("-C")
        .arg(dir)
        .arg("-cf")
        .arg(&tar)
        .arg(what)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    tar
}

/// mkdir honours the umask, F_GETFD reports the descriptor's own close-on-exec flag, and
/// df shows the burst buffer's size.
#[test]
fn modes_descriptor_flags_and_df_are_the_kernels() {
    let inst = Inst::start(3);
    ok(
        &inst,
        0,
        "sh",
        &[
            "-c",
            "umask 027; mkdir /tessera/u; umask 077; mkdir /tessera/v; mkdir -m 755 /tessera/w",
        ],
    );
    let modes = ok(
        &inst,
        1,
        "stat",
        &["-c", "%a", "/tessera/u", "/tessera/v", "/tessera/w"],
    );
    assert_eq!(stdout(&modes), "750\n700\n755\n");
    // Through libc's open itself (python's os.open always adds O_CLOEXEC).
    let script = r#"
import ctypes, fcntl, os
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.open(b'/tessera/fd.txt', os.O_WRONLY | os.O_CREAT, 0o644)
assert fd >= 0, ctypes.get_errno()
assert fcntl.fcntl(fd, fcntl.F_GETFD) == 0, 'a plain open is not close-on-exec'
fcntl.fcntl(fd, fcntl.F_SETFD, fcntl.FD_CLOEXEC)
assert fcntl.fcntl(fd, fcntl.F_GETFD) == fcntl.FD_CLOEXEC
fd2 = libc.open(b'/tessera/fd.txt', os.O_RDONLY | os.O_CLOEXEC)
assert fcntl.fcntl(fd2, fcntl.F_GETFD) == fcntl.FD_CLOEXEC
print('ok')
"#;
    assert_eq!(
        stdout(&ok(&inst, 2, "python3", &["-c", script])).trim(),
        "ok"
    );
    let df = ok(&inst, 0, "df", &["-B1", "--output=size,avail", "/tessera"]);
    let numbers: Vec<u64> = stdout(&df)
        .lines()
        .nth(1)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|n| n.parse().ok())
        .collect();
    assert!(
        numbers.len() == 2 && numbers[0] > 0 && numbers[1] <= numbers[0],
        "df: {}",
        stdout(&df)
    );
}

/// fallocate preallocates (the file grows, reading zeros; KEEP_SIZE keeps the size) and
/// refuses what it cannot do, naming it.
#[test]
fn fallocate_preallocates_and_refuses_punching_by_name() {
    let inst = Inst::start(3);
    ok(&inst, 0, "fallocate", &["-l", "1MiB", "/tessera/big"]);
    let size = |n| stdout(&ok(&inst, n, "stat", &["-c", "%s", "/tessera/big"]));
    assert_eq!(size(1).trim(), "1048576");
    ok(
        &inst,
        2,
        "cmp",
        &["-n", "1048576", "/tessera/big", "/dev/zero"],
    );
    ok(&inst, 0, "fallocate", &["-n", "-l", "2MiB", "/tessera/big"]);
    assert_eq!(size(1).trim(), "1048576", "KEEP_SIZE grew the file");
    let punch = under(
        &inst,
        0,
        "fallocate",
        &["-p", "-o", "0", "-l", "4096", "/tessera/big"],
    )
    .output()
    .unwrap();
    assert!(!punch.status.success());
    assert!(
        stderr(&punch).contains("preallocation only"),
        "{}",
        stderr(&punch)
    );
    // posix_fallocate (numpy's tofile, python): no ENOTSUP line, and the data stays.
    let script = r#"
import os
fd = os.open('/tessera/pf', os.O_WRONLY | os.O_CREAT, 0o644)
os.posix_fallocate(fd, 0, 4096)
os.write(fd, b'abc')
os.close(fd)
d = open('/tessera/pf', 'rb').read()
assert d == b'abc' + bytes(4093), (len(d), d[:8])
print('ok')
"#;
    let out = ok(&inst, 1, "python3", &["-c", script]);
    assert_eq!(stdout(&out).trim(), "ok");
    assert!(!stderr(&out).contains("tessera:"), "{}", stderr(&out));
}

/// `tessera status | head -1` ends quietly when head closes the pipe.
#[test]
fn commands_into_a_closed_pipe_end_quietly() {
    let inst = Inst::start(3);
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{TESSERA} --instance {} status | head -1",
            inst.layout.dir.display()
        ))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).starts_with("instance"), "{}", stdout(&out));
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
}

/// Under the session model, a process that opens a file after another truncated it reads the
/// new size.
#[test]
fn a_reopened_file_has_the_size_another_process_truncated_it_to() {
    let inst = Inst::start(3);
    ok(
        &inst,
        0,
        "sh",
        &["-c", "printf 0123456789abcdef > /tessera/t"],
    );
    ok(&inst, 1, "truncate", &["-s", "4", "/tessera/t"]);
    let out = ok(&inst, 2, "cat", &["/tessera/t"]);
    assert_eq!(stdout(&out), "0123");
}

/// Times set by programs stick: tar -x and `cp --preserve=timestamps` set them before they
/// close the file, and publishing the writes at close must not overwrite them with "now".
#[test]
fn times_set_by_tar_and_cp_stick() {
    let inst = Inst::start(3);
    let local = common::scratch("times");
    std::fs::create_dir_all(local.join("tree")).unwrap();
    std::fs::write(local.join("tree/f"), b"x\n").unwrap();
    std::fs::write(local.join("src"), b"hello\n").unwrap();
    let set = |what: &str, when: &str| {
        let out = std::process::Command::new("touch")
            .args(["-d", when])
            .arg(local.join(what))
            .output()
            .unwrap();
        assert!(out.status.success());
    };
    set("tree/f", "2002-01-01 00:00:00 UTC");
    set("src", "2001-02-03 04:05:06 UTC");
    let tar = local_tar(&local, "tree", &[]);
    ok(
        &inst,
        0,
        "tar",
        &["-C", "/tessera", "-xf", tar.to_str().unwrap()],
    );
    let src = local.join("src");
    ok(
        &inst,
        1,
        "cp",
        &[
            "--preserve=timestamps",
            src.to_str().unwrap(),
            "/tessera/dst",
        ],
    );
    let times = ok(
        &inst,
        2,
        "stat",
        &["-c", "%Y %s", "/tessera/tree/f", "/tessera/dst"],
    );
    // 2002-01-01 and 2001-02-03 04:05:06 UTC, with the sizes written.
    assert_eq!(stdout(&times), "1009843200 2\n981173106 6\n");
    assert_eq!(
        stdout(&ok(&inst, 0, "cat", &["/tessera/tree/f", "/tessera/dst"])),
        "x\nhello\n"
    );
}

/// A working directory inside Tessera survives exec: shells, make and python's subprocess
/// run their children there, `cd ..` climbs the virtual directory, and a program the
/// interposer cannot see fails instead of writing into the caller's real directory.
#[test]
fn the_working_directory_survives_exec() {
    let inst = Inst::start(3);
    let caller = common::scratch("caller");
    let run_in = |node: u32, prog: &str, args: &[&str]| {
        let out = under(&inst, node, prog, args)
            .current_dir(&caller)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{prog} {args:?}: {}{}",
            stdout(&out),
            stderr(&out)
        );
        out
    };
    run_in(0, "mkdir", &["-p", "/tessera/d/sub"]);
    run_in(0, "sh", &["-c", "echo a > /tessera/d/file"]);
    let out = run_in(
        1,
        "bash",
        &[
            "-c",
            "cd /tessera/d && /bin/pwd && ls && cd .. && /bin/pwd && cd .. && /bin/pwd",
        ],
    );
    assert_eq!(stdout(&out), "/tessera/d\nfile\nsub\n/tessera\n/\n");
    let out = run_in(
        2,
        "dash",
        &[
            "-c",
            "cd /tessera/d/sub && /bin/pwd && ls .. && cat ../file",
        ],
    );
    assert_eq!(stdout(&out), "/tessera/d/sub\nfile\nsub\na\n");
    let script = r#"
import os, subprocess
os.chdir('/tessera/d')
assert subprocess.run(['ls'], capture_output=True, text=True).stdout.split() == ['file', 'sub']
assert subprocess.run('pwd', shell=True, capture_output=True, text=True).stdout == '/tessera/d\n'
print('ok')
"#;
    assert_eq!(stdout(&run_in(0, "python3", &["-c", script])).trim(), "ok");
    // make -C: the recipe runs in the project, and its output lands there.
    run_in(
        1,
        "sh",
        &[
            "-c",
            "mkdir /tessera/proj && echo hi > /tessera/proj/in.txt && \
             printf 'out.txt: in.txt\\n\\tcp in.txt out.txt\\n' > /tessera/proj/Makefile",
        ],
    );
    run_in(2, "make", &["-s", "-C", "/tessera/proj"]);
    assert_eq!(
        stdout(&run_in(0, "cat", &["/tessera/proj/out.txt"])),
        "hi\n"
    );
    // A program without the interposer, started from inside Tessera, finds no real directory
    // to write into.
    let out = under(
        &inst,
        0,
        "bash",
        &["-c", "cd /tessera/d && env -u LD_PRELOAD touch escaped"],
    )
    .current_dir(&caller)
    .output()
    .unwrap();
    assert!(!out.status.success(), "{}", stderr(&out));
    let left: Vec<_> = std::fs::read_dir(&caller).unwrap().collect();
    assert!(
        left.is_empty(),
        "files appeared in the caller's directory: {left:?}"
    );
}

/// Paths go where they name: relative to a kernel directory descriptor into the prefix (rsync
/// opens "/" and works relative to it), and through the prefix back to a real place
/// (`/tessera/..` is `/`; `..` from a Tessera working directory climbs out of it).
#[test]
fn paths_through_kernel_directories_and_dotdot_go_where_they_name() {
    let inst = Inst::start(3);
    let script = r#"
import os, stat
root = os.open('/', os.O_PATH)
assert stat.S_ISDIR(os.stat('tessera', dir_fd=root).st_mode)
os.mkdir('tessera/made', dir_fd=root)
assert os.path.isdir('/tessera/made')
usr = os.open('/usr', os.O_RDONLY | os.O_DIRECTORY)
assert stat.S_ISDIR(os.stat('../tessera/made', dir_fd=usr).st_mode)
real = open('/etc/hostname').read()
assert open('/tessera/../etc/hostname').read() == real
assert 'etc' in os.listdir('/tessera/..')
os.chdir('/tessera/made')
assert open('../../etc/hostname').read() == real
made = os.open('/tessera/made', os.O_RDONLY | os.O_DIRECTORY)
assert open('../../etc/hostname', opener=lambda p, f: os.open(p, f, dir_fd=made)).read() == real
print('ok')
"#;
    assert_eq!(
        stdout(&ok(&inst, 1, "python3", &["-c", script])).trim(),
        "ok"
    );
    let out = ok(&inst, 2, "ls", &["/tessera/.."]);
    assert!(stdout(&out).lines().any(|l| l == "etc"), "{}", stdout(&out));
}

/// `rsync -a` into Tessera and back keeps contents, modes and times (symlinks are not carried
/// yet: Tessera has none).
#[test]
fn rsync_into_tessera_and_back_keeps_contents_modes_and_times() {
    let inst = Inst::start(3);
    let local = common::scratch("rsync");
    let src = local.join("src");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    std::fs::write(src.join("a"), b"hello\n").unwrap();
    let big: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(src.join("sub/b"), &big).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(src.join("a"), std::fs::Permissions::from_mode(0o640)).unwrap();
    let touched = std::process::Command::new("touch")
        .args(["-d", "2003-03-03 00:00:00 UTC"])
        .arg(src.join("a"))
        .output()
        .unwrap();
    assert!(touched.status.success());
    let from = format!("{}/", src.display());
    ok(&inst, 0, "rsync", &["-a", &from, "/tessera/dst/"]);
    let st = ok(
        &inst,
        1,
        "stat",
        &["-c", "%a %Y %s", "/tessera/dst/a", "/tessera/dst/sub/b"],
    );
    let lines: Vec<String> = stdout(&st).lines().map(str::to_string).collect();
    assert_eq!(lines[0], "640 1046649600 6");
    assert!(lines[1].ends_with(" 300000"), "{lines:?}");
    let back = local.join("back");
    let to = format!("{}/", back.display());
    ok(&inst, 2, "rsync", &["-a", "/tessera/dst/", &to]);
    assert_eq!(std::fs::read(back.join("a")).unwrap(), b"hello\n");
    assert_eq!(std::fs::read(back.join("sub/b")).unwrap(), big);
    let meta = std::fs::metadata(back.join("a")).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o640);
    use std::os::unix::fs::MetadataExt;
    assert_eq!(meta.mtime(), 1046649600);
}

/// Shell redirections into Tessera work for the shells' builtins, which print with stdio
/// (bash) or write(2) (dash), on stdout and stderr, appending and in groups.
#[test]
fn shell_builtins_redirect_into_tessera() {
    let inst = Inst::start(3);
    for (node, shell) in [(0, "bash"), (1, "dash")] {
        let dir = format!("/tessera/{shell}");
        let script = format!(
            "mkdir {dir} && echo hi > {dir}/x && printf '%s\\n' two >> {dir}/x && \
             echo err 2> {dir}/e >&2 && {{ echo a; echo b; }} > {dir}/g && echo done"
        );
        let out = ok(&inst, node, shell, &["-c", &script]);
        assert_eq!(
            stdout(&out),
            "done\n",
            "{shell}: the terminal got the redirected output"
        );
        let read = ok(
            &inst,
            2,
            "cat",
            &[
                &format!("{dir}/x"),
                &format!("{dir}/e"),
                &format!("{dir}/g"),
            ],
        );
        assert_eq!(stdout(&read), "hi\ntwo\nerr\na\nb\n", "{shell}");
    }
}

/// Tessera descriptors survive exec and share their position across fork, as the kernel's
/// do: an external command writes through the shell's redirection (`>`, `>>`, `2>`, `<`,
/// `exec 3>`), the shell and its children write one after the other into one file, a
/// close-on-exec descriptor is not passed on, python's `subprocess` and `os.system` hand
/// their children the file, and a program the interposer cannot serve fails loudly on it.
#[test]
fn descriptors_survive_exec_and_share_their_position_across_fork() {
    let inst = Inst::start(3);
    for (node, shell) in [(0, "bash"), (1, "dash")] {
        let d = format!("/tessera/fds-{shell}");
        let script = format!(
            "mkdir {d} && printf 'in1\\nin2\\n' > {d}/in && /bin/echo one > {d}/x && \
             {{ echo a; /bin/echo b; echo c; /bin/sh -c 'echo d; /bin/echo e'; }} > {d}/g && \
             /bin/cat < {d}/in > {d}/copy && sed -n 2p < {d}/in > {d}/second && \
             /bin/echo more >> {d}/x && ls /nowhere 2> {d}/err; \
             exec 3> {d}/h; /bin/echo h1 >&3; /bin/echo h2 >&3; echo h3 >&3; exec 3>&-; \
             {{ (for i in 1 2 3 4 5 6 7 8; do /bin/echo a$i; done) & \
                (for i in 1 2 3 4 5 6 7 8; do /bin/echo b$i; done) & wait; }} > {d}/both; \
             echo done"
        );
        let out = ok(&inst, node, shell, &["-c", &script]);
        assert_eq!(stdout(&out), "done\n", "{shell}: {}", stderr(&out));
        let cat = |f: &str| stdout(&ok(&inst, 2, "cat", &[&format!("{d}/{f}")]));
        assert_eq!(cat("x"), "one\nmore\n", "{shell}: > and >> into /bin/echo");
        assert_eq!(cat("g"), "a\nb\nc\nd\ne\n", "{shell}: one position for all");
        assert_eq!(cat("copy"), "in1\nin2\n", "{shell}: < into /bin/cat");
        assert_eq!(cat("second"), "in2\n", "{shell}: stdin as a stdio stream");
        assert_eq!(cat("h"), "h1\nh2\nh3\n", "{shell}: exec 3>");
        assert!(cat("err").contains("nowhere"), "{shell}: 2> into ls");
        // Two writers at once through one description: every line whole, none written over.
        let mut lines: Vec<String> = cat("both").lines().map(String::from).collect();
        lines.sort();
        let mut want: Vec<String> = (1..=8)
            .flat_map(|i| [format!("a{i}"), format!("b{i}")])
            .collect();
        want.sort();
        assert_eq!(lines, want, "{shell}: concurrent writers");
    }
    // A close-on-exec descriptor stays behind; python's children get the file.
    let py = r#"
import os, subprocess, sys
f = open("/tessera/py/out", "w")
f.write("1\n"); f.flush()
subprocess.run(["/bin/echo", "2"], stdout=f, check=True)
f.write("3\n"); f.flush()
os.set_inheritable(f.fileno(), True)
os.system("/bin/echo 4 >&%d" % f.fileno())
os.set_inheritable(f.fileno(), False)
r = subprocess.run(["/bin/sh", "-c", "echo x >&%d" % f.fileno()], close_fds=False, capture_output=True)
print("cloexec", r.returncode != 0)
f.write("5\n"); f.close()
"#;
    ok(&inst, 0, "mkdir", &["/tessera/py"]);
    let out = ok(&inst, 1, "python3", &["-c", py]);
    assert_eq!(stdout(&out), "cloexec True\n", "{}", stderr(&out));
    let got = stdout(&ok(&inst, 2, "cat", &["/tessera/py/out"]));
    assert_eq!(got, "1\n2\n3\n4\n5\n");
    // A program the interposer cannot serve fails loudly on the placeholder it inherits.
    let dir = common::scratch("static-writer");
    let src = dir.join("w.c");
    std::fs::write(
        &src,
        "#include <errno.h>\n#include <unistd.h>\n\
         int main(void) { return write(1, \"x\", 1) == 1 ? 0 : errno == EPERM ? 3 : 4; }\n",
    )
    .unwrap();
    let exe = dir.join("w");
    let built = std::process::Command::new("cc")
        .args(["-static", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .unwrap();
    assert!(built.status.success(), "{}", stderr(&built));
    let script = format!("{} > /tessera/py/static; echo $?", exe.display());
    let out = ok(&inst, 0, "bash", &["-c", &script]);
    assert_eq!(
        stdout(&out),
        "3\n",
        "a static program's write must fail with EPERM"
    );
    assert_eq!(stdout(&ok(&inst, 2, "cat", &["/tessera/py/static"])), "");
}

/// numpy (`tofile`/`fromfile`, `save`/`load`, a read-only memory map) and h5py (a chunked
/// dataset and an attribute) write arrays in Tessera through one daemon that another daemon's
/// reader gets back exactly, with nothing on stderr.
#[test]
fn numpy_and_h5py_keep_their_arrays() {
    let inst = Inst::start(3);
    ok(&inst, 0, "mkdir", &["/tessera/np"]);
    let write = r#"
import numpy as np, h5py
a = np.arange(1 << 16, dtype=np.float64)
a.tofile("/tessera/np/raw")
np.save("/tessera/np/a.npy", a.reshape(256, 256))
with h5py.File("/tessera/np/a.h5", "w") as f:
    f.create_dataset("x", data=a.reshape(256, 256), chunks=(64, 64))
    f["x"].attrs["unit"] = "m"
print("written")
"#;
    let out = ok(&inst, 0, "python3", &["-c", write]);
    assert_eq!(stdout(&out), "written\n");
    assert_eq!(stderr(&out), "", "numpy and h5py print nothing");
    let read = r#"
import numpy as np, h5py
a = np.arange(1 << 16, dtype=np.float64)
assert (np.fromfile("/tessera/np/raw") == a).all()
m = np.load("/tessera/np/a.npy", mmap_mode="r")
assert m.shape == (256, 256) and (m.ravel() == a).all()
with h5py.File("/tessera/np/a.h5", "r") as f:
    assert f["x"].chunks == (64, 64)
    assert (f["x"][...].ravel() == a).all() and f["x"].attrs["unit"] == "m"
print("read")
"#;
    let out = ok(&inst, 1, "python3", &["-c", read]);
    assert_eq!(stdout(&out), "read\n", "{}", stderr(&out));
}

/// `tessera doctor` tells a program the interposer serves from one it cannot: statically
/// linked, Go, setuid; a script is judged by its interpreter.
#[test]
fn doctor_tells_which_programs_can_be_interposed() {
    let doctor = |prog: &str| {
        std::process::Command::new(TESSERA)
            .args(["doctor", prog])
            .output()
            .unwrap()
    };
    let out = doctor("cat");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("can be interposed: dynamically linked against glibc"));
    let dir = common::scratch("doctor");
    let cc = |name: &str, src: &str, flags: &[&str]| {
        let c = dir.join(format!("{name}.c"));
        std::fs::write(&c, src).unwrap();
        let exe = dir.join(name);
        let built = std::process::Command::new("cc")
            .args(flags)
            .arg("-o")
            .arg(&exe)
            .arg(&c)
            .output()
            .unwrap();
        assert!(built.status.success(), "{}", stderr(&built));
        exe.display().to_string()
    };
    let stat = cc("static", "int main(void) { return 0; }", &["-static"]);
    let out = doctor(&stat);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("statically linked"),
        "{}",
        stderr(&out)
    );
    // Go's toolchain marks its programs with this note (the doctor looks for it).
    let go = cc(
        "golike",
        "__attribute__((section(\".note.go.buildid\"), used)) static const char id[] = \"x\";\n\
         int main(void) { return 0; }",
        &[],
    );
    let out = doctor(&go);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("a Go program"), "{}", stderr(&out));
    let script = dir.join("script.sh");
    std::fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
    let out = doctor(script.to_str().unwrap());
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("a script run by /bin/sh"),
        "{}",
        stdout(&out)
    );
    let setuid = dir.join("setuid");
    std::fs::copy("/bin/true", &setuid).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&setuid, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let out = doctor(setuid.to_str().unwrap());
    assert!(!out.status.success());
    assert!(stderr(&out).contains("setuid"), "{}", stderr(&out));
}

/// O_APPEND is atomic across processes: shells appending with `>>` and programs holding an
/// append descriptor open (one write(2) per line) never write over each other's lines.
#[test]
fn appenders_in_different_processes_keep_every_line() {
    let inst = Inst::start(3);
    let shell = "for i in $(seq 1 200); do echo \"$0-$i\" >> /tessera/shell.log; done";
    let held = r#"
import os, sys
fd = os.open('/tessera/held.log', os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
for i in range(1, 501):
    os.write(fd, f'{sys.argv[1]}-{i}\n'.encode())
os.close(fd)
"#;
    let runs: Vec<_> = ["a", "b", "c"]
        .iter()
        .enumerate()
        .flat_map(|(n, who)| {
            [
                under(&inst, n as u32, "bash", &["-c", shell, who]),
                under(&inst, n as u32, "python3", &["-c", held, who]),
            ]
        })
        .map(|mut c| c.spawn().expect("spawn an appender"))
        .collect();
    for mut r in runs {
        assert!(r.wait().unwrap().success(), "an appender failed");
    }
    for (file, per) in [("/tessera/shell.log", 200), ("/tessera/held.log", 500)] {
        let text = stdout(&ok(&inst, 2, "cat", &[file]));
        let mut lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3 * per, "{file}: lines lost or torn:\n{text}");
        lines.sort_unstable();
        lines.dedup();
        assert_eq!(lines.len(), 3 * per, "{file}: a line twice");
        for who in ["a", "b", "c"] {
            assert_eq!(
                lines
                    .iter()
                    .filter(|l| l.split('-').next() == Some(who))
                    .count(),
                per,
                "{file}: {who}'s lines"
            );
        }
    }
}

/// A program or script stored in Tessera runs (staged into memory for the kernel); one without
/// an execute bit is refused as the kernel refuses it.
#[test]
fn programs_stored_in_tessera_run() {
    let inst = Inst::start(3);
    ok(
        &inst,
        0,
        "sh",
        &[
            "-c",
            "mkdir /tessera/bin && cp /bin/echo /tessera/bin/app && chmod 755 /tessera/bin/app \
             && printf '#!/bin/sh\\necho script says $1\\n' > /tessera/bin/s.sh \
             && chmod 755 /tessera/bin/s.sh && cp /bin/echo /tessera/bin/plain \
             && chmod 644 /tessera/bin/plain",
        ],
    );
    let ran = ok(
        &inst,
        1,
        "bash",
        &[
            "-c",
            "/tessera/bin/app hello from tessera; /tessera/bin/s.sh hi; cd /tessera/bin && ./app relative",
        ],
    );
    assert_eq!(
        stdout(&ran),
        "hello from tessera\nscript says hi\nrelative\n"
    );
    let refused = under(&inst, 2, "bash", &["-c", "/tessera/bin/plain x"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("Permission denied"),
        "{}",
        stderr(&refused)
    );
}

/// Memory maps of Tessera files: read-only and private maps hold the file's bytes; a shared
/// writable map is refused with the reason.
#[test]
fn read_only_and_private_maps_hold_the_files_bytes() {
    let inst = Inst::start(3);
    let script = r#"
import errno, mmap, os
fd = os.open('/tessera/m.bin', os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, bytes(range(256)) * 64)
os.close(fd)
fd = os.open('/tessera/m.bin', os.O_RDONLY)
m = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
assert len(m) == 16384 and m[:256] == bytes(range(256)) and m[-1] == 255, 'read-only map'
m.close()
c = mmap.mmap(fd, 4096, access=mmap.ACCESS_COPY, offset=4096)
assert c[1] == 1, 'private map at an offset'
c[1] = 7
assert c[1] == 7 and os.pread(fd, 1, 4097) == b'\x01', 'a private change stays private'
c.close()
rw = os.open('/tessera/m.bin', os.O_RDWR)
try:
    mmap.mmap(rw, 0, access=mmap.ACCESS_WRITE)
    raise SystemExit('a shared writable map was accepted')
except OSError as e:
    assert e.errno == errno.ENODEV, e
print('ok')
"#;
    let out = under(&inst, 1, "python3", &["-c", script])
        .output()
        .unwrap();
    assert_eq!(stdout(&out).trim(), "ok", "{}", stderr(&out));
    assert!(
        stderr(&out).contains("shared writable map"),
        "the refusal names its reason: {}",
        stderr(&out)
    );
}

/// git in Tessera: init, add, commit, log and status (its temporaries come from mkstemp, its
/// objects are read through memory maps).
#[test]
fn git_works_in_tessera() {
    let inst = Inst::start(3);
    let script = "mkdir /tessera/repo && cd /tessera/repo && git init -q . \
         && git config user.email ci@example.org && git config user.name CI \
         && echo hello > a.txt && git add a.txt && git commit -qm first \
         && echo more >> a.txt && echo new > b.txt && git add -A && git commit -qm second \
         && git log --format=%s && git status --porcelain && git show HEAD:a.txt";
    let out = ok(&inst, 1, "bash", &["-c", script]);
    assert_eq!(stdout(&out), "second\nfirst\nhello\nmore\n");
    // Another process, on another daemon, reads the same repository.
    let log = ok(
        &inst,
        2,
        "git",
        &["-C", "/tessera/repo", "log", "--oneline"],
    );
    assert_eq!(stdout(&log).lines().count(), 2);
}

/// `git clone` of a local repository into Tessera (git copies its packs and sets their times
/// with glibc's `utime`) makes a whole repository, which another daemon's git checks.
#[test]
fn git_clones_a_local_repository_into_tessera() {
    let inst = Inst::start(2);
    let src = common::scratch("clone-src");
    let script = "git init -q . && git config user.email ci@example.org && git config user.name CI \
         && for i in 1 2 3; do echo $i > f$i; git add .; git commit -qm c$i; done && git gc -q";
    let out = std::process::Command::new("bash")
        .args(["-c", script])
        .current_dir(&src)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let src = src.to_str().unwrap();
    ok(&inst, 0, "git", &["clone", "-q", src, "/tessera/clone"]);
    let log = ok(
        &inst,
        1,
        "git",
        &["-C", "/tessera/clone", "log", "--format=%s"],
    );
    assert_eq!(stdout(&log), "c3\nc2\nc1\n");
    ok(
        &inst,
        1,
        "git",
        &["-C", "/tessera/clone", "fsck", "--strict"],
    );
    let f2 = ok(&inst, 0, "cat", &["/tessera/clone/f2"]);
    assert_eq!(stdout(&f2), "2\n");
}

/// sqlite: the rollback journal modes work; WAL (a shared writable map of its index) is refused
/// with the reason on stderr, never half-working.
#[test]
fn sqlite_works_with_a_rollback_journal_and_refuses_wal_with_the_reason() {
    let inst = Inst::start(3);
    for mode in ["DELETE", "TRUNCATE", "PERSIST"] {
        let db = format!("/tessera/{mode}.db");
        let sql = format!(
            "PRAGMA journal_mode={mode}; create table t(x); insert into t values(1),(2); \
             begin; update t set x = x * 10; commit; select sum(x) from t;"
        );
        let out = ok(&inst, 0, "sqlite3", &[&db, &sql]);
        assert_eq!(stdout(&out), format!("{}\n30\n", mode.to_lowercase()));
        // Another process, on another daemon, reads it.
        let out = ok(&inst, 1, "sqlite3", &[&db, "select count(*) from t;"]);
        assert_eq!(stdout(&out), "2\n");
    }
    let wal = under(
        &inst,
        2,
        "sqlite3",
        &[
            "/tessera/wal.db",
            "PRAGMA journal_mode=WAL; create table t(x); insert into t values(1);",
        ],
    )
    .output()
    .unwrap();
    assert!(!wal.status.success(), "WAL appeared to work");
    assert!(
        stderr(&wal).contains("shared writable map"),
        "{}",
        stderr(&wal)
    );
}

/// Extended attributes are stored: python's calls (path, descriptor, flags, a value larger
/// than its first buffer), `cp -a` into Tessera and back, and `tar --xattrs` both ways keep
/// them, across a kill -9 and restart of every daemon.
#[test]
fn extended_attributes_are_kept_by_cp_tar_and_python() {
    let inst = Inst::start(3);
    let local = common::scratch("xattrs");
    let src = local.join("src");
    std::fs::write(&src, b"data\n").unwrap();
    let set_local = std::process::Command::new("python3")
        .arg("-c")
        .arg("import os, sys; os.setxattr(sys.argv[1], 'user.origin', b'run 7')")
        .arg(&src)
        .output()
        .unwrap();
    assert!(set_local.status.success(), "{}", stderr(&set_local));
    let src = src.to_str().unwrap();
    ok(&inst, 0, "cp", &["-a", src, "/tessera/copy"]);
    ok(&inst, 1, "mkdir", &["/tessera/ex"]);
    let tar = local_tar(&local, "src", &["--xattrs", "--xattrs-include=user.*"]);
    let tar = tar.to_str().unwrap();
    ok(
        &inst,
        2,
        "tar",
        &[
            "--xattrs",
            "--xattrs-include=user.*",
            "-C",
            "/tessera/ex",
            "-xf",
            tar,
        ],
    );
    let script = r#"
import errno, os
def fails(code, f, *a):
    try:
        f(*a)
    except OSError as e:
        assert e.errno == code, (f, e)
    else:
        raise AssertionError(f"{f.__name__}{a} succeeded")
for p in ["/tessera/copy", "/tessera/ex/src"]:
    assert os.getxattr(p, "user.origin") == b"run 7", p
    assert os.listxattr(p) == ["user.origin"], os.listxattr(p)
p = "/tessera/copy"
fails(errno.EEXIST, os.setxattr, p, "user.origin", b"x", os.XATTR_CREATE)
fails(errno.ENODATA, os.setxattr, p, "user.none", b"x", os.XATTR_REPLACE)
fails(errno.ENODATA, os.getxattr, p, "user.none")
fails(errno.ENOTSUP, os.setxattr, p, "system.posix_acl_access", b"x")
big = bytes(range(256)) * 4
fd = os.open(p, os.O_RDONLY)
os.setxattr(fd, "user.big", big)
assert os.getxattr(fd, "user.big") == big
assert sorted(os.listxattr(fd)) == ["user.big", "user.origin"]
os.close(fd)
os.setxattr("/tessera/ex", "user.dir", b"d")
os.removexattr("/tessera/ex/src", "user.origin")
fails(errno.ENODATA, os.removexattr, "/tessera/ex/src", "user.origin")
# One file holds at most xattr_max_bytes (1 MiB) of names and values: the 16th value of 64 KiB
# is refused with ENOSPC, as ext4 refuses what no longer fits; a removal makes room.
full = "/tessera/ex/full"
open(full, "w").close()
value = b"v" * 65536
for i in range(15):
    os.setxattr(full, f"user.fill{i:02}", value)
fails(errno.ENOSPC, os.setxattr, full, "user.fill15", value)
fails(errno.E2BIG, os.setxattr, full, "user.huge", value + b"v")
os.removexattr(full, "user.fill00")
os.setxattr(full, "user.fill15", value)
assert len(os.listxattr(full)) == 15
print("set")
"#;
    let out = ok(&inst, 0, "python3", &["-c", script]);
    assert_eq!(stdout(&out), "set\n");
    // Python learns a value's size from ERANGE (it tries 128 bytes first): an answer it
    // expects, not an error to explain.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("do not fit"), "{err}");
    for n in 0..3 {
        inst.kill9(n);
        inst.restart(n);
    }
    let check = r#"
import os
big = bytes(range(256)) * 4
assert os.getxattr("/tessera/copy", "user.big") == big
assert os.getxattr("/tessera/ex", "user.dir") == b"d"
assert os.listxattr("/tessera/ex/src") == []
print("kept")
"#;
    assert_eq!(stdout(&ok(&inst, 1, "python3", &["-c", check])), "kept\n");
    // Back out of Tessera: cp -a and tar carry them to a local disk.
    let back = local.join("back");
    let back_s = back.to_str().unwrap();
    ok(&inst, 2, "cp", &["-a", "/tessera/copy", back_s]);
    let out_tar = local.join("out.tar");
    ok(
        &inst,
        0,
        "tar",
        &[
            "--xattrs",
            "-C",
            "/tessera",
            "-cf",
            out_tar.to_str().unwrap(),
            "copy",
        ],
    );
    let untar = local.join("untar");
    std::fs::create_dir_all(&untar).unwrap();
    let out = std::process::Command::new("tar")
        .args(["--xattrs", "--xattrs-include=user.*", "-C"])
        .arg(&untar)
        .arg("-xf")
        .arg(&out_tar)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let read_local = std::process::Command::new("python3")
        .arg("-c")
        .arg("import os, sys; print(*(os.getxattr(p, 'user.origin').decode() for p in sys.argv[1:]), sep=',')")
        .arg(&back)
        .arg(untar.join("copy"))
        .output()
        .unwrap();
    assert_eq!(
        stdout(&read_local),
        "run 7,run 7\n",
        "{}",
        stderr(&read_local)
    );
    let _ = std::fs::remove_dir_all(&local);
}

/// Symbolic links are made in Tessera (links in the PFS directory, targets kept as given):
/// `ln -s`, `readlink`, reading through one, `ls -l`, and tar and rsync carry them both ways.
#[test]
fn symbolic_links_are_made_and_carried_both_ways() {
    let inst = Inst::start(3);
    ok(&inst, 0, "mkdir", &["/tessera/d"]);
    ok(&inst, 0, "sh", &["-c", "echo hello > /tessera/d/file"]);
    ok(&inst, 1, "ln", &["-s", "file", "/tessera/d/link"]);
    assert_eq!(
        stdout(&ok(&inst, 2, "readlink", &["/tessera/d/link"])),
        "file\n"
    );
    assert_eq!(
        stdout(&ok(&inst, 2, "cat", &["/tessera/d/link"])),
        "hello\n"
    );
    let ls = stdout(&ok(&inst, 0, "ls", &["-l", "/tessera/d"]));
    assert!(ls.contains("link -> file"), "{ls}");
    let again = under(&inst, 0, "ln", &["-s", "other", "/tessera/d/link"])
        .output()
        .unwrap();
    assert!(!again.status.success());
    assert!(stderr(&again).contains("File exists"), "{}", stderr(&again));

    // Into Tessera with tar and rsync.
    let local = common::scratch("links");
    std::fs::create_dir_all(local.join("tree")).unwrap();
    std::fs::write(local.join("tree/f"), b"x\n").unwrap();
    std::os::unix::fs::symlink("f", local.join("tree/l")).unwrap();
    let tar = local_tar(&local, "tree", &[]);
    ok(
        &inst,
        1,
        "tar",
        &["-C", "/tessera", "-xf", tar.to_str().unwrap()],
    );
    let tree = format!("{}/", local.join("tree").display());
    ok(&inst, 2, "rsync", &["-a", &tree, "/tessera/rs/"]);
    for l in ["/tessera/tree/l", "/tessera/rs/l"] {
        assert_eq!(stdout(&ok(&inst, 0, "readlink", &[l])), "f\n", "{l}");
        assert_eq!(stdout(&ok(&inst, 0, "cat", &[l])), "x\n", "{l}");
    }
    // And back out.
    let back = local.join("back");
    let back_s = format!("{}/", back.display());
    ok(&inst, 1, "rsync", &["-a", "/tessera/d/", &back_s]);
    assert_eq!(
        std::fs::read_link(back.join("link")).unwrap(),
        std::path::Path::new("file")
    );
    let _ = std::fs::remove_dir_all(&local);
}

/// Hard links: `ln` gives a file a further name (one inode, `stat` counts 2, writes through
/// one name are read through the other, removing one name keeps the file); tar, `rsync -aH`
/// and `cp -a` carry links into Tessera and back; counts survive kill -9 and restart of every
/// daemon; `linkat` follows a symbolic link only when asked; a directory, a symbolic link, a
/// link across file systems, a name taken, and the PFS copy (one name per file) are refused
/// with the reason.
#[test]
fn hard_links_name_one_file_and_are_carried_by_tar_rsync_and_cp() {
    let inst = Inst::start(3);
    let fails = |node: u32, prog: &str, args: &[&str], why: &str| {
        let out = under(&inst, node, prog, args).output().unwrap();
        assert!(!out.status.success(), "{prog} {args:?} succeeded");
        assert!(
            stderr(&out).contains(why),
            "{prog} {args:?}: {}",
            stderr(&out)
        );
    };
    let id = |p: &str| stdout(&ok(&inst, 2, "stat", &["-c", "%i %h", p]));
    ok(&inst, 0, "mkdir", &["/tessera/h"]);
    ok(&inst, 0, "sh", &["-c", "echo one > /tessera/h/a"]);
    ok(&inst, 1, "ln", &["/tessera/h/a", "/tessera/h/b"]);
    assert_eq!(id("/tessera/h/a"), id("/tessera/h/b"));
    assert!(
        id("/tessera/h/a").ends_with(" 2\n"),
        "{}",
        id("/tessera/h/a")
    );
    ok(&inst, 2, "sh", &["-c", "echo two >> /tessera/h/b"]);
    assert_eq!(
        stdout(&ok(&inst, 0, "cat", &["/tessera/h/a"])),
        "one\ntwo\n"
    );
    fails(0, "ln", &["/tessera/h/a", "/tessera/h/b"], "exists");
    fails(
        0,
        "ln",
        &["/tessera/h/a", "/tmp/out-of-tessera"],
        "cross-device",
    );
    ok(&inst, 0, "rm", &["/tessera/h/a"]);
    assert_eq!(
        stdout(&ok(&inst, 1, "cat", &["/tessera/h/b"])),
        "one\ntwo\n"
    );
    assert!(id("/tessera/h/b").ends_with(" 1\n"));
    // The daemon's refusals and linkat's flags, through python's os.link.
    let flags = r#"
import os, errno
def err(f, *a, **k):
    try:
        f(*a, **k)
    except OSError as e:
        return errno.errorcode[e.errno]
    return "ok"
assert err(os.link, "/tessera/h", "/tessera/h2") == "EPERM"
os.symlink("b", "/tessera/h/sl")
assert err(os.link, "/tessera/h/sl", "/tessera/h/sl2", follow_symlinks=False) == "EPERM"
# With dir_fds python calls linkat(AT_SYMLINK_FOLLOW) (plain link() never follows).
d = os.open("/tessera/h", os.O_RDONLY)
os.link("sl", "via", src_dir_fd=d, dst_dir_fd=d, follow_symlinks=True)
os.close(d)
assert os.stat("/tessera/h/via").st_ino == os.stat("/tessera/h/b").st_ino
assert os.stat("/tessera/h/b").st_nlink == 2
os.unlink("/tessera/h/via")
print("flags")
"#;
    assert_eq!(stdout(&ok(&inst, 2, "python3", &["-c", flags])), "flags\n");
    assert!(id("/tessera/h/b").ends_with(" 1\n"));

    // Carried in: a local tree with two names for one file.
    let local = common::scratch("hard-links");
    std::fs::create_dir_all(local.join("tree")).unwrap();
    std::fs::write(local.join("tree/x"), b"shared bytes").unwrap();
    std::fs::hard_link(local.join("tree/x"), local.join("tree/y")).unwrap();
    let tar = local_tar(&local, "tree", &[]);
    let tar_s = tar.display().to_string();
    let tree = format!("{}/tree/", local.display());
    ok(&inst, 0, "mkdir", &["/tessera/h/t"]);
    ok(&inst, 0, "tar", &["-C", "/tessera/h/t", "-xf", &tar_s]);
    ok(&inst, 1, "rsync", &["-aH", &tree, "/tessera/h/r/"]);
    ok(&inst, 2, "cp", &["-a", &tree, "/tessera/h/c"]);
    for d in ["/tessera/h/t/tree", "/tessera/h/r", "/tessera/h/c"] {
        let (x, y) = (id(&format!("{d}/x")), id(&format!("{d}/y")));
        assert_eq!(x, y, "{d}: x and y are one file");
        assert!(x.ends_with(" 2\n"), "{d}: {x}");
        let bytes = stdout(&ok(&inst, 0, "cat", &[&format!("{d}/y")]));
        assert_eq!(bytes, "shared bytes", "{d}");
    }
    // A rename between two names of one file leaves both (POSIX).
    let same = "import os; os.rename('/tessera/h/c/x', '/tessera/h/c/y'); print('same')";
    assert_eq!(stdout(&ok(&inst, 1, "python3", &["-c", same])), "same\n");
    assert_eq!(id("/tessera/h/c/x"), id("/tessera/h/c/y"));
    assert!(id("/tessera/h/c/x").ends_with(" 2\n"));
    // And back out: tar keeps the link in its archive, rsync -aH on the local disk.
    ok(
        &inst,
        0,
        "tar",
        &["-C", "/tessera/h", "-cf", "/tessera/h/r.tar", "r"],
    );
    let listing = stdout(&ok(&inst, 1, "tar", &["-tvf", "/tessera/h/r.tar"]));
    assert!(listing.contains("link to"), "{listing}");
    let back = local.join("back");
    let back_s = format!("{}/", back.display());
    ok(&inst, 1, "rsync", &["-aH", "/tessera/h/r/", &back_s]);
    use std::os::unix::fs::MetadataExt;
    let (x, y) = (
        std::fs::metadata(back.join("x")).unwrap(),
        std::fs::metadata(back.join("y")).unwrap(),
    );
    assert_eq!((x.ino(), x.nlink()), (y.ino(), 2));

    // Counts are state: they survive every daemon's death.
    for n in 0..3 {
        inst.kill9(n);
        inst.restart(n);
    }
    assert!(id("/tessera/h/r/x").ends_with(" 2\n"));
    ok(&inst, 0, "rm", &["/tessera/h/r/x"]);
    assert_eq!(
        stdout(&ok(&inst, 2, "cat", &["/tessera/h/r/y"])),
        "shared bytes"
    );

    // The PFS directory keeps one name per file: neither a flushed file gets a second name,
    // nor a file with two names a PFS copy.
    ok(&inst, 0, "sh", &["-c", "echo f > /tessera/h/flushed"]);
    let flushed = inst.tessera(&["flush", "/tessera/h/flushed"]);
    assert!(flushed.status.success(), "{}", stderr(&flushed));
    fails(
        1,
        "ln",
        &["/tessera/h/flushed", "/tessera/h/g"],
        "PFS directory",
    );
    let two = inst.tessera(&["flush", "/tessera/h/c/x"]);
    assert!(!two.status.success());
    assert!(stderr(&two).contains("2 names"), "{}", stderr(&two));
    let _ = std::fs::remove_dir_all(&local);
}

/// A program that writes one file after another keeps working past its descriptor limit's
/// worth of log writers (6 descriptors each; under the common limit of 1024 it failed with
/// `EMFILE` at the 170th file), and reads every file back past the limit's worth of views of
/// logs (3 descriptors each); what it fsynced, appended and read stays right.
#[test]
fn a_program_writes_and_reads_more_files_than_its_descriptors_could_hold_open() {
    let inst = Inst::start(1);
    ok(&inst, 0, "mkdir", &["/tessera/many"]);
    let script = r#"
ulimit -n 1024 && exec python3 -c '
import os
n = 400
for i in range(n):
    with open(f"/tessera/many/{i}", "w") as f:
        f.write("x" * 100)
        if i % 7 == 0:
            f.flush()
            os.fsync(f.fileno())
for i in range(0, n, 3):
    with open(f"/tessera/many/{i}", "a") as f:
        f.write("y" * 10)
for _ in range(2):
    for i in range(n):
        want = "x" * 100 + ("y" * 10 if i % 3 == 0 else "")
        assert open(f"/tessera/many/{i}").read() == want, i
print("ok", len(os.listdir("/proc/self/fd")))
'"#;
    let out = ok(&inst, 0, "sh", &["-c", script]);
    let open: usize = stdout(&out)
        .strip_prefix("ok ")
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("{}{}", stdout(&out), stderr(&out)));
    assert!(open < 1024, "{open} descriptors open at the end");
    // Another process reads them all through the same node's logs.
    let out = ok(
        &inst,
        0,
        "sh",
        &["-c", "ulimit -n 1024 && cat /tessera/many/* | wc -c"],
    );
    assert_eq!(stdout(&out).trim(), (400 * 100 + 134 * 10).to_string());
}

/// The soft and hard limits on open descriptors of process `pid`.
fn descriptor_limits(pid: u32) -> (u64, u64) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("a descriptor limit");
    let mut n = line
        .trim_start_matches("Max open files")
        .split_whitespace()
        .map(|v| v.parse::<u64>().unwrap_or(u64::MAX));
    (n.next().unwrap(), n.next().unwrap())
}

/// A daemon started under a low soft limit on descriptors (the common 1024, here 256) raises
/// it to the hard limit, as servers do: it holds a connection per process of its node and
/// views of up to 256 logs.
#[test]
fn a_daemon_raises_its_descriptor_limit_to_the_hard_one() {
    let root = tessera_cli::instance::temp_dir("tessera-test").expect("temp dir");
    let inst = Inst {
        layout: tessera_client::InstanceLayout::new(root.join("inst")),
        root,
        nodes: 1,
        hosts: None,
    };
    let start = format!(
        "ulimit -Sn 256 && exec {TESSERA} start --instance {} --pfs {} --daemons 1 --bb-root {}",
        inst.layout.dir.display(),
        inst.root.join("pfs").display(),
        inst.root.join("bb").display()
    );
    let out = std::process::Command::new("sh")
        .args(["-c", &start])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let pid = inst
        .layout
        .load_hosts()
        .unwrap()
        .get(0)
        .expect("node 0")
        .pid;
    let (soft, hard) = descriptor_limits(pid);
    assert!(
        hard > 256,
        "the hard limit here ({hard}) leaves nothing to raise to"
    );
    assert_eq!(soft, hard, "the daemon kept a soft limit of {soft}");
}

/// Python's `subprocess` changes into `cwd=` in a child of `vfork`, before the program starts:
/// under the interposer that child is a forked one, served like any process, so a child runs
/// in a Tessera directory, and `python3 -m venv` (which runs pip that way) makes a venv there.
#[test]
fn python_subprocess_and_venv_work_in_a_tessera_directory() {
    let inst = Inst::start(2);
    ok(&inst, 0, "mkdir", &["-p", "/tessera/work"]);
    let script = "import subprocess\n\
        r = subprocess.run(['sh', '-c', 'pwd; echo made > out'], cwd='/tessera/work', capture_output=True, text=True)\n\
        print(r.returncode, r.stdout.strip(), r.stderr.strip())\n\
        print(open('/tessera/work/out').read().strip())";
    let out = ok(&inst, 1, "python3", &["-c", script]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "0 /tessera/work \nmade\n"
    );
    // A process that never used Tessera keeps glibc's vfork; its child's chdir is handed on.
    let fresh = "import subprocess\n\
        print(subprocess.run(['sh', '-c', 'pwd; ls'], cwd='/tessera/work', capture_output=True, text=True).stdout)";
    let out = ok(&inst, 0, "python3", &["-c", fresh]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "/tessera/work\nout\n\n"
    );
    ok(&inst, 0, "python3", &["-m", "venv", "/tessera/venv"]);
    let listed = ok(&inst, 1, "ls", &["/tessera/venv/bin"]);
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.contains("pip") && listed.contains("activate"),
        "{listed}"
    );
}
