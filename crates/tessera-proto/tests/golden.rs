//! Golden bytes of every wire message: one sample of each variant of every message enum, and
//! of the handshake frames, encoded and compared with the bytes committed in `tests/golden/`.
//! Reordering a variant, changing a field's type or order, or changing the codec fails here,
//! naming the message. A deliberate format change bumps `PROTOCOL_VERSION` and re-blesses:
//! `TESSERA_BLESS=1 cargo test -p tessera-proto --test golden`.
//!
//! Each enum also has an exhaustive `variant` function without a default arm, so a new variant
//! does not compile until it has a sample here.

use std::collections::BTreeMap;
use std::path::PathBuf;
use tessera_core::locks::{HeldLock, LockKind, LockOwner};
use tessera_core::{Errno, FsError, Owner, Run};
use tessera_proto::peer_auth::{Challenge, Hello, Welcome};
use tessera_proto::*;

fn owner() -> Owner {
    Owner {
        node: 2,
        client: 77,
    }
}

fn attr() -> Attr {
    Attr {
        ino: (1 << 48) | 5,
        kind: FileKind::File,
        mode: 0o644,
        uid: 1000,
        gid: 100,
        size: 123_456,
        atime_ns: 1_700_000_000_000_000_001,
        mtime_ns: -2,
        ctime_ns: 3,
    }
}

fn extent() -> OwnedExtent {
    OwnedExtent {
        start: 4096,
        end: 8192,
        owner: owner(),
    }
}

fn owners() -> Owners {
    Owners {
        size: Some(9000),
        extents: vec![extent()],
    }
}

fn run() -> Run {
    Run {
        start: 100,
        len: 47001,
        stride: 188_004,
        count: 40,
    }
}

fn lock_owner() -> LockOwner {
    LockOwner { id: 9, pid: 4242 }
}

fn held() -> HeldLock {
    HeldLock {
        start: 0,
        end: 100,
        kind: LockKind::Exclusive,
        owner: lock_owner(),
    }
}

fn dentry() -> Dentry {
    Dentry {
        ino: 7,
        kind: FileKind::Dir,
    }
}

fn status() -> NodeStatus {
    NodeStatus {
        node: 1,
        pid: 300,
        uptime_ms: 5000,
        bb_dir: "/bb/node-1".into(),
        bb_used: 1,
        bb_reserved: 2,
        bb_capacity: 3,
        bb_device_total: 4,
        bb_device_free: 5,
        clients: 6,
        files_owned: 7,
        extents_owned: 8,
        requests: 9,
    }
}

fn error() -> FsError {
    FsError::new(Errno::HostDown, "node 2 on host h3 is unreachable")
}

fn change() -> AttrChange {
    AttrChange {
        mode: Some(0o600),
        atime_ns: None,
        mtime_ns: Some(42),
    }
}

fn variant_request(r: &Request) -> &'static str {
    match r {
        Request::Hello { .. } => "Hello",
        Request::Open { .. } => "Open",
        Request::Stat { .. } => "Stat",
        Request::Mkdir { .. } => "Mkdir",
        Request::Rmdir { .. } => "Rmdir",
        Request::Unlink { .. } => "Unlink",
        Request::Readdir { .. } => "Readdir",
        Request::Rename { .. } => "Rename",
        Request::Truncate { .. } => "Truncate",
        Request::SetAttr { .. } => "SetAttr",
        Request::ReadLink { .. } => "ReadLink",
        Request::Attach { .. } => "Attach",
        Request::Detach { .. } => "Detach",
        Request::DetachFile { .. } => "DetachFile",
        Request::Query { .. } => "Query",
        Request::QueryFile { .. } => "QueryFile",
        Request::Read { .. } => "Read",
        Request::Flush { .. } => "Flush",
        Request::Lock { .. } => "Lock",
        Request::GetLock { .. } => "GetLock",
        Request::Reserve { .. } => "Reserve",
        Request::Release { .. } => "Release",
        Request::Writing { .. } => "Writing",
        Request::Status => "Status",
        Request::Shutdown => "Shutdown",
    }
}

fn requests() -> Vec<Request> {
    let path = || "/run1/ckpt".to_string();
    vec![
        Request::Hello {
            version: PROTOCOL_VERSION,
            pid: 4242,
            resume: Some(3),
        },
        Request::Open {
            path: path(),
            flags: OpenFlags {
                create: true,
                exclusive: false,
                truncate: true,
                write: true,
            },
            mode: 0o644,
            want_owners: true,
        },
        Request::Stat { path: path() },
        Request::Mkdir {
            path: path(),
            mode: 0o755,
        },
        Request::Rmdir { path: path() },
        Request::Unlink { path: path() },
        Request::Readdir { path: path() },
        Request::Rename {
            from: path(),
            to: "/run1/old".into(),
        },
        Request::Truncate {
            path: path(),
            size: 1 << 40,
        },
        Request::SetAttr {
            path: path(),
            change: change(),
        },
        Request::ReadLink { path: path() },
        Request::Attach {
            ino: 5,
            runs: vec![run()],
            upto: Some(1_880_040),
        },
        Request::Detach {
            ino: 5,
            start: 0,
            end: 10,
        },
        Request::DetachFile { ino: 5 },
        Request::Query {
            ino: 5,
            start: 0,
            end: u64::MAX,
        },
        Request::QueryFile { ino: 5 },
        Request::Read {
            ino: 5,
            parts: vec![(owner(), vec![(0, 10), (20, 30)])],
        },
        Request::Flush {
            path: path(),
            range: Some((0, 4096)),
        },
        Request::Lock {
            ino: 5,
            start: 0,
            end: 100,
            kind: Some(LockKind::Shared),
            wait: true,
            pid: 4242,
        },
        Request::GetLock {
            ino: 5,
            start: 0,
            end: 100,
            kind: LockKind::Exclusive,
        },
        Request::Reserve { bytes: 64 << 20 },
        Request::Release { bytes: 4096 },
        Request::Writing { ino: 5 },
        Request::Status,
        Request::Shutdown,
    ]
}

fn variant_response(r: &Response) -> &'static str {
    match r {
        Response::Ok => "Ok",
        Response::Hello { .. } => "Hello",
        Response::Opened { .. } => "Opened",
        Response::Attr(_) => "Attr",
        Response::Entries(_) => "Entries",
        Response::Owners(_) => "Owners",
        Response::Data { .. } => "Data",
        Response::Flushed { .. } => "Flushed",
        Response::Granted { .. } => "Granted",
        Response::Lock(_) => "Lock",
        Response::Status(_) => "Status",
        Response::Link { .. } => "Link",
        Response::Err(_) => "Err",
    }
}

fn responses() -> Vec<Response> {
    vec![
        Response::Ok,
        Response::Hello {
            client: 11,
            node: 2,
            nodes: 3,
        },
        Response::Opened {
            attr: attr(),
            owners: Some(owners()),
            path: "/run1/ckpt".into(),
        },
        Response::Attr(attr()),
        Response::Entries(vec![DirEntry {
            name: "ckpt".into(),
            ino: 5,
            kind: FileKind::Symlink,
        }]),
        Response::Owners(owners()),
        Response::Data { len: 16 << 20 },
        Response::Flushed {
            bytes: 1 << 30,
            nodes: 3,
        },
        Response::Granted { bytes: 64 << 20 },
        Response::Lock(Some(held())),
        Response::Status(status()),
        Response::Link {
            target: "../elsewhere".into(),
        },
        Response::Err(error()),
    ]
}

fn variant_peer_request(r: &PeerRequest) -> &'static str {
    match r {
        PeerRequest::Ping => "Ping",
        PeerRequest::DentryGet { .. } => "DentryGet",
        PeerRequest::DentryCreate { .. } => "DentryCreate",
        PeerRequest::DentryRemove { .. } => "DentryRemove",
        PeerRequest::DentryPut { .. } => "DentryPut",
        PeerRequest::ListChildren { .. } => "ListChildren",
        PeerRequest::HasChildren { .. } => "HasChildren",
        PeerRequest::InodeGet { .. } => "InodeGet",
        PeerRequest::InodeSetSize { .. } => "InodeSetSize",
        PeerRequest::InodeRemove { .. } => "InodeRemove",
        PeerRequest::InodeSetAttr { .. } => "InodeSetAttr",
        PeerRequest::OwnAttach { .. } => "OwnAttach",
        PeerRequest::OwnDetach { .. } => "OwnDetach",
        PeerRequest::OwnFetchStripe { .. } => "OwnFetchStripe",
        PeerRequest::Invalidate { .. } => "Invalidate",
        PeerRequest::OwnQueryFile { .. } => "OwnQueryFile",
        PeerRequest::OwnDetachFile { .. } => "OwnDetachFile",
        PeerRequest::OwnTruncate { .. } => "OwnTruncate",
        PeerRequest::DropFile { .. } => "DropFile",
        PeerRequest::ReadLog { .. } => "ReadLog",
        PeerRequest::Flush { .. } => "Flush",
        PeerRequest::FlushPart { .. } => "FlushPart",
        PeerRequest::Lock { .. } => "Lock",
        PeerRequest::GetLock { .. } => "GetLock",
        PeerRequest::ReleaseLocks { .. } => "ReleaseLocks",
        PeerRequest::Status => "Status",
        PeerRequest::Shutdown => "Shutdown",
    }
}

fn peer_requests() -> Vec<PeerRequest> {
    let path = || "/run1/ckpt".to_string();
    vec![
        PeerRequest::Ping,
        PeerRequest::DentryGet { path: path() },
        PeerRequest::DentryCreate {
            path: path(),
            kind: FileKind::File,
            mode: 0o644,
            uid: 1000,
            gid: 100,
            exclusive: true,
        },
        PeerRequest::DentryRemove {
            path: path(),
            ino: 5,
        },
        PeerRequest::DentryPut {
            path: path(),
            dentry: dentry(),
        },
        PeerRequest::ListChildren {
            dir: "/run1".into(),
        },
        PeerRequest::HasChildren {
            dir: "/run1".into(),
        },
        PeerRequest::InodeGet { ino: 5 },
        PeerRequest::InodeSetSize {
            ino: 5,
            change: SizeChange::Extend(9000),
        },
        PeerRequest::InodeRemove { ino: 5 },
        PeerRequest::InodeSetAttr {
            ino: 5,
            change: change(),
        },
        PeerRequest::OwnAttach {
            ino: 5,
            stripe: 1,
            owner: owner(),
            runs: vec![run()],
        },
        PeerRequest::OwnDetach {
            ino: 5,
            stripe: 1,
            owner: owner(),
            start: 0,
            end: 10,
        },
        PeerRequest::OwnFetchStripe {
            ino: 5,
            stripe: 1,
            from: 0,
        },
        PeerRequest::Invalidate {
            ino: 5,
            stripe: 1,
            version: 12,
        },
        PeerRequest::OwnQueryFile {
            ino: 5,
            only: Some(owner()),
        },
        PeerRequest::OwnDetachFile {
            ino: 5,
            owner: owner(),
        },
        PeerRequest::OwnTruncate { ino: 5, size: 100 },
        PeerRequest::DropFile { ino: 5 },
        PeerRequest::ReadLog {
            ino: 5,
            client: 77,
            ranges: vec![(0, 10)],
        },
        PeerRequest::Flush {
            path: path(),
            range: None,
        },
        PeerRequest::FlushPart {
            ino: 5,
            target: "/run1/.tessera-flush.0.00000000000000ab".into(),
            extents: vec![extent()],
        },
        PeerRequest::Lock {
            ino: 5,
            owner: lock_owner(),
            start: 0,
            end: 100,
            kind: None,
            wait: false,
        },
        PeerRequest::GetLock {
            ino: 5,
            owner: lock_owner(),
            start: 0,
            end: 100,
            kind: LockKind::Shared,
        },
        PeerRequest::ReleaseLocks { owner_id: 9 },
        PeerRequest::Status,
        PeerRequest::Shutdown,
    ]
}

fn variant_peer_response(r: &PeerResponse) -> &'static str {
    match r {
        PeerResponse::Ok => "Ok",
        PeerResponse::Pong { .. } => "Pong",
        PeerResponse::Found(_) => "Found",
        PeerResponse::Dentry(_) => "Dentry",
        PeerResponse::Created { .. } => "Created",
        PeerResponse::Entries(_) => "Entries",
        PeerResponse::Bool(_) => "Bool",
        PeerResponse::Attr(_) => "Attr",
        PeerResponse::Extents(_) => "Extents",
        PeerResponse::Stripe { .. } => "Stripe",
        PeerResponse::Bytes(_) => "Bytes",
        PeerResponse::Data { .. } => "Data",
        PeerResponse::Flushed { .. } => "Flushed",
        PeerResponse::Lock(_) => "Lock",
        PeerResponse::Err(_) => "Err",
        PeerResponse::Status(_) => "Status",
    }
}

fn peer_responses() -> Vec<PeerResponse> {
    vec![
        PeerResponse::Ok,
        PeerResponse::Pong { node: 2 },
        PeerResponse::Found(Some((dentry(), Some(attr())))),
        PeerResponse::Dentry(Some(dentry())),
        PeerResponse::Created {
            dentry: dentry(),
            created: true,
            attr: Some(attr()),
        },
        PeerResponse::Entries(vec![DirEntry {
            name: "a".into(),
            ino: 9,
            kind: FileKind::File,
        }]),
        PeerResponse::Bool(true),
        PeerResponse::Attr(attr()),
        PeerResponse::Extents(vec![extent()]),
        PeerResponse::Stripe {
            extents: vec![extent()],
            version: 3,
            cached: true,
        },
        PeerResponse::Bytes(4096),
        PeerResponse::Data { len: 10 },
        PeerResponse::Flushed {
            bytes: 1 << 20,
            nodes: 2,
        },
        PeerResponse::Lock(Some(held())),
        PeerResponse::Err(error()),
        PeerResponse::Status(status()),
    ]
}

/// `name hex` lines of every sample, in a stable order.
fn encodings() -> BTreeMap<String, String> {
    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }
    let mut out = BTreeMap::new();
    let mut add = |name: String, bytes: Vec<u8>| {
        assert!(
            out.insert(name.clone(), hex(&bytes)).is_none(),
            "{name} twice"
        );
    };
    for r in requests() {
        add(
            format!("Request::{}", variant_request(&r)),
            frame::encode(&r),
        );
    }
    for r in responses() {
        add(
            format!("Response::{}", variant_response(&r)),
            frame::encode(&r),
        );
    }
    for r in peer_requests() {
        add(
            format!("PeerRequest::{}", variant_peer_request(&r)),
            frame::encode(&r),
        );
    }
    for r in peer_responses() {
        add(
            format!("PeerResponse::{}", variant_peer_response(&r)),
            frame::encode(&r),
        );
    }
    add(
        "handshake::Challenge".into(),
        frame::encode(&Challenge {
            version: PROTOCOL_VERSION,
            node: 1,
            nonce: [0xab; 32],
        }),
    );
    add(
        "handshake::Hello".into(),
        frame::encode(&Hello {
            version: PROTOCOL_VERSION,
            from: peer_auth::ADMIN_NODE,
            nonce: [0x01; 32],
            proof: [0x02; 32],
        }),
    );
    add(
        "handshake::Welcome".into(),
        frame::encode(&Welcome { proof: [0x03; 32] }),
    );
    let mut framed = Vec::new();
    frame::write_frame(&mut framed, &frame::encode(&Request::Status)).unwrap();
    add("frame::Request::Status".into(), framed);
    out
}

fn golden_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/messages.txt")
}

#[test]
fn every_message_encodes_to_its_committed_bytes() {
    let now = encodings();
    let text: String = now.iter().map(|(k, v)| format!("{k} {v}\n")).collect();
    if std::env::var_os("TESSERA_BLESS").is_some() {
        std::fs::write(golden_path(), &text).unwrap();
    }
    let committed = std::fs::read_to_string(golden_path())
        .expect("tests/golden/messages.txt (create it with TESSERA_BLESS=1)");
    let committed: BTreeMap<&str, &str> = committed
        .lines()
        .filter_map(|l| l.split_once(' '))
        .collect();
    let mut problems = Vec::new();
    for (name, hex) in &now {
        match committed.get(name.as_str()) {
            Some(c) if c == hex => {}
            Some(c) => problems.push(format!("{name}: committed {c}, now {hex}")),
            None => problems.push(format!("{name}: not in the golden file")),
        }
    }
    for name in committed.keys() {
        if !now.contains_key(*name) {
            problems.push(format!("{name}: in the golden file, no longer encoded"));
        }
    }
    assert!(
        problems.is_empty(),
        "the wire format changed (bump PROTOCOL_VERSION and re-bless if deliberate):\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_samples_cover_every_variant_and_round_trip() {
    // Every variant once: the names are distinct (the exhaustive matches above name each).
    let names: Vec<&str> = requests().iter().map(variant_request).collect();
    assert_eq!(names.len(), 25);
    let names: Vec<&str> = responses().iter().map(variant_response).collect();
    assert_eq!(names.len(), 13);
    let names: Vec<&str> = peer_requests().iter().map(variant_peer_request).collect();
    assert_eq!(names.len(), 27);
    let names: Vec<&str> = peer_responses().iter().map(variant_peer_response).collect();
    assert_eq!(names.len(), 16);
    for r in requests() {
        assert_eq!(frame::decode::<Request>(&frame::encode(&r)).unwrap(), r);
    }
    for r in peer_requests() {
        assert_eq!(frame::decode::<PeerRequest>(&frame::encode(&r)).unwrap(), r);
    }
    for r in responses() {
        assert_eq!(frame::decode::<Response>(&frame::encode(&r)).unwrap(), r);
    }
    for r in peer_responses() {
        assert_eq!(
            frame::decode::<PeerResponse>(&frame::encode(&r)).unwrap(),
            r
        );
    }
}
