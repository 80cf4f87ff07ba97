//! The errors a user will meet: each has its errno-style code and says what to do.

mod common;

use common::Inst;
use tessera_client::{Client, Errno, InstanceLayout, Model, OpenOptions};

#[test]
fn daemon_not_running_names_the_socket_and_the_fix() {
    let inst = Inst::start(1);
    assert!(inst.tessera(&["stop"]).status.success());
    let err = Client::connect(inst.layout.clone(), Some(0))
        .err()
        .expect("no daemon, no client");
    assert_eq!(err.errno, Errno::ConnRefused);
    let socket = inst.socket(0).display().to_string();
    assert!(err.message.contains(&socket), "{err}");
    assert!(err.message.contains("tessera start --instance"), "{err}");
    // The CLI says the same.
    let out = inst.tessera(&["stat", "/tessera"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("ECONNREFUSED"));
}

#[test]
fn missing_instance_says_how_to_create_one() {
    let err = Client::connect(InstanceLayout::new("/nonexistent/tessera-instance"), None)
        .err()
        .unwrap();
    assert_eq!(err.errno, Errno::ConnRefused);
    assert!(err.message.contains("tessera start"), "{err}");
}

#[test]
fn paths_outside_the_file_system_are_refused() {
    let inst = Inst::start(1);
    let c = inst.client(0);
    for bad in ["/etc/passwd", "relative/file", "/tesseract/x"] {
        let err = c
            .create(bad)
            .err()
            .unwrap_or_else(|| panic!("{bad} accepted"));
        assert_eq!(err.errno, Errno::XDev, "{bad}: {err}");
        assert!(err.message.contains("/tessera"), "{err}");
    }
}

#[test]
fn reading_past_end_of_file() {
    let inst = Inst::start(1);
    let c = inst.client(0);
    let mut f = c
        .open(
            "/tessera/short",
            OpenOptions::new().read(true).write(true).create(true),
        )
        .unwrap();
    f.write_at(b"0123456789", 0).unwrap();
    let mut buf = [0u8; 8];
    // POSIX read: a short count, then 0 at the end.
    assert_eq!(f.read_at(&mut buf, 6).unwrap(), 4);
    assert_eq!(&buf[..4], b"6789");
    assert_eq!(f.read_at(&mut buf, 10).unwrap(), 0);
    assert_eq!(f.read_at(&mut buf, 1 << 40).unwrap(), 0);
    // The exact read says what happened.
    let err = f.read_exact_at(&mut buf, 6).unwrap_err();
    assert_eq!(err.errno, Errno::NoData);
    assert!(err.message.contains("past end of file (size 10"), "{err}");
}

#[test]
fn attach_of_never_written_bytes() {
    let inst = Inst::start(2);
    let c = inst.client(0);
    let mut f = c
        .open(
            "/tessera/a",
            OpenOptions::new()
                .write(true)
                .create(true)
                .model(Model::Commit),
        )
        .unwrap();
    f.write_at(&[1; 100], 0).unwrap();
    f.write_at(&[2; 100], 200).unwrap();
    let err = f.attach(50, 200).unwrap_err();
    assert_eq!(err.errno, Errno::Inval);
    assert!(
        err.message.contains("bytes [100, 200) were never written"),
        "{err}"
    );
    f.attach(0, 100).unwrap();
    f.attach(210, 50).unwrap();
}

#[test]
fn detach_of_an_unattached_range() {
    let inst = Inst::start(2);
    let c = inst.client(1);
    let mut f = c
        .open(
            "/tessera/d",
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .model(Model::Commit),
        )
        .unwrap();
    f.write_at(&[7; 100], 0).unwrap();
    let err = f.detach(0, 100).unwrap_err();
    assert_eq!(err.errno, Errno::Inval);
    assert!(
        err.message.contains("not attached by this process"),
        "{err}"
    );
    f.attach(0, 60).unwrap();
    assert_eq!(f.detach(0, 80).unwrap_err().errno, Errno::Inval);
    f.detach(0, 60).unwrap();
    // Detached bytes are no one's: they now read as a hole.
    let mut buf = [9u8; 10];
    assert_eq!(f.read_at(&mut buf, 0).unwrap(), 10);
    assert_eq!(buf, [0; 10]);
}

#[test]
fn full_burst_buffer_fails_the_write_and_keeps_earlier_data() {
    let inst = Inst::start_with(1, &["--bb-capacity", &(4u64 << 20).to_string()]);
    let c = inst.client(0);
    let mut f = c
        .open(
            "/tessera/big",
            OpenOptions::new().read(true).write(true).create(true),
        )
        .unwrap();
    let a = vec![0xaa; 3 << 20];
    f.write_at(&a, 0).unwrap();
    let err = f.write_at(&vec![0xbb; 2 << 20], 3 << 20).unwrap_err();
    assert_eq!(err.errno, Errno::NoSpace);
    assert!(err.message.contains("burst buffer"), "{err}");
    assert!(err.message.contains("--bb-capacity"), "{err}");
    f.close().unwrap();
    let mut r = c.open_read("/tessera/big").unwrap();
    assert_eq!(r.len().unwrap(), 3 << 20);
    let mut back = vec![0; 3 << 20];
    r.read_exact_at(&mut back, 0).unwrap();
    assert!(back == a, "earlier data damaged");
    // Space comes back when the file goes.
    c.unlink("/tessera/big").unwrap();
    let mut g = c.create("/tessera/again").unwrap();
    g.write_at(&vec![1; 3 << 20], 0).unwrap();
}

#[test]
fn detach_keeps_newer_unattached_writes() {
    let inst = Inst::start(2);
    let c = inst.client(0);
    let mut f = c
        .open(
            "/tessera/dd",
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .model(Model::Commit),
        )
        .unwrap();
    f.write_at(&[1; 10], 0).unwrap();
    f.attach_file().unwrap();
    f.write_at(&[2; 10], 0).unwrap();
    f.detach(0, 10).unwrap();
    let mut buf = [0u8; 10];
    f.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(
        buf, [2; 10],
        "the newer write must survive the detach of the older one"
    );
    f.close().unwrap();
    let mut r = inst.client(1).open_read("/tessera/dd").unwrap();
    r.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(buf, [2; 10]);
    // Zero-length primitives are no-ops.
    let mut g = c
        .open("/tessera/dd", OpenOptions::new().read(true).write(true))
        .unwrap();
    g.attach(5, 0).unwrap();
    g.detach(5, 0).unwrap();
}

#[test]
fn stale_cached_owners_after_truncate_read_as_holes() {
    let inst = Inst::start(1);
    let c = inst.client(0);
    let mut f = c
        .open(
            "/tessera/tr",
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .model(Model::Session),
        )
        .unwrap();
    f.write_at(&[7; 100], 0).unwrap();
    f.attach_file().unwrap();
    c.truncate("/tessera/tr", 0).unwrap();
    let mut buf = [9u8; 100];
    // The handle's session view is older than the truncate: zeros or a short read, never EIO.
    let n = f.read_at(&mut buf, 0).unwrap();
    assert!(buf[..n].iter().all(|b| *b == 0), "{:?}", &buf[..n]);
    let err = f.read_exact_at(&mut [0u8; 10], 1000).unwrap_err();
    assert!(err.message.contains("(size 100"), "{err}");
}

/// Offsets and sizes beyond what Tessera supports are refused up front with EFBIG, as the
/// kernel does, and the file's valid writes are still published.
#[test]
fn sizes_past_the_supported_range_are_efbig() {
    let inst = Inst::start(2);
    let c = inst.client(0);
    let mut f = c
        .open(
            "/tessera/huge",
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .model(Model::Session),
        )
        .unwrap();
    f.write_at(b"valid", 0).unwrap();
    for off in [1u64 << 62, u64::MAX - 2, tessera_core::run::MAX_FILE_SIZE] {
        let err = f
            .write_at(b"x", off)
            .expect_err("write past the largest file size");
        assert_eq!(err.errno, Errno::FBig, "offset {off}: {err}");
        assert!(err.message.contains("largest file size"), "{err}");
    }
    f.commit().expect("the valid write still commits");
    f.close().expect("and the file still closes");
    let other = inst.client(1);
    assert_eq!(other.stat("/tessera/huge").unwrap().size, 5);
    for size in [u64::MAX, 1u64 << 62] {
        let err = other.truncate("/tessera/huge", size).unwrap_err();
        assert_eq!(err.errno, Errno::FBig, "truncate to {size}: {err}");
    }
    assert_eq!(other.stat("/tessera/huge").unwrap().size, 5);
    let mut r = other.open_read("/tessera/huge").unwrap();
    let mut buf = [0u8; 5];
    r.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"valid");
}
