//! Golden bytes of every wire message: one sample of every request of both protocols with an
//! answer of its reply type, an error answer, and the handshake frames, encoded and compared
//! with the bytes committed in `tests/golden/`.
//! Reordering a variant, changing a field's type or order, or changing the codec fails here,
//! naming the message. A deliberate format change bumps `PROTOCOL_VERSION` and re-blesses:
//! `TESSERA_BLESS=1 cargo test -p tessera-proto --test golden`.
//!
//! The samples are checked against the protocols' lists of requests, so a new request fails
//! here until it has a sample; a sample's reply must have the type its request names.

use std::collections::BTreeMap;
use std::path::PathBuf;
use tessera_core::locality::{PlacedExtent, Placement, Residence};
use tessera_core::lock_list::LockRun;
use tessera_core::locks::{HeldLock, LockKind, LockOwner};
use tessera_core::{Errno, FsError, Owner, Run};
use tessera_proto::peer_auth::{self, Challenge, Welcome};
use tessera_proto::*;

fn txn() -> u64 {
    txn_id(1, 42)
}

fn view() -> TxnView {
    TxnView {
        viewer: Some(txn()),
        committed: vec![txn_id(0, 7)],
    }
}

fn variable() -> Variable {
    Variable {
        name: "temperature".into(),
        elem_type: "f64".into(),
        elem_size: 8,
        dims: vec![64, 64, 32],
    }
}

fn chunk() -> Chunk {
    Chunk {
        offsets: vec![0, 32, 0],
        counts: vec![32, 32, 32],
        path: "/tessera/t.0".into(),
        offset: 4096,
        len: 32 * 32 * 32 * 8,
    }
}

fn version() -> VersionView {
    VersionView {
        version: 3,
        variable: variable(),
        chunks: vec![chunk()],
    }
}

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
        nlink: 2,
    }
}

fn extent() -> OwnedExtent {
    OwnedExtent {
        start: 4096,
        end: 8192,
        owner: owner(),
    }
}

fn owned_run() -> OwnedRun {
    OwnedRun {
        run: run(),
        owner: owner(),
    }
}

fn owners() -> Owners {
    Owners {
        size: Some(9000),
        pfs_upto: Some(4096),
        runs: vec![owned_run()],
        next: Some(1 << 30),
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

/// A 3-D block's plane: 100-byte rows every 400 bytes.
fn lock_run() -> LockRun {
    LockRun {
        run: Run {
            start: 4096,
            len: 100,
            stride: 400,
            count: 25,
        },
        kind: LockKind::Exclusive,
    }
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
        ownership_entries: 8,
        requests: 9,
        stripe_copy_hits: 10,
        stripe_copy_misses: 11,
        list_locks_granted: 12,
        list_lock_runs: 13,
        lock_peak_holders: 14,
        txns_at_home: 2,
        txns_open: 1,
        txns_pending: 3,
        logs_to_release: 4,
        name_intents: 5,
        files_to_drop: 6,
        attr_leases: 120,
        stats_leased: 900,
        stats_unleased: 100,
        security: peer_auth::Security::Integrity,
        lock_waiters: 15,
        metrics_endpoint: Some("http://127.0.0.1:9401/metrics".into()),
        metrics: vec![("tessera_write_bytes_total".into(), 4096.0)],
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

fn dir_entry() -> DirEntry {
    DirEntry {
        name: "ckpt".into(),
        ino: 5,
        kind: FileKind::File,
    }
}

/// `name hex` of every sample, in a stable order; and which requests have one.
#[derive(Default)]
struct Samples {
    out: BTreeMap<String, String>,
    client: Vec<&'static str>,
    peer: Vec<&'static str>,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl Samples {
    fn add(&mut self, name: String, bytes: Vec<u8>) {
        assert!(
            self.out.insert(name.clone(), hex(&bytes)).is_none(),
            "two samples named {name}"
        );
    }

    /// A client request and an answer of its reply type; both must decode to themselves.
    fn client<R: ClientCall + Clone + PartialEq + std::fmt::Debug>(
        &mut self,
        req: R,
        reply: R::Reply,
    ) where
        R::Reply: PartialEq + std::fmt::Debug + Clone,
    {
        let wire: Request = req.into();
        let bytes = frame::encode(&wire);
        assert_eq!(frame::decode::<Request>(&bytes).unwrap(), wire);
        self.add(format!("Request::{}", R::NAME), bytes);
        let answer = encode_answer(&Ok::<_, FsError>(reply.clone()));
        assert_eq!(decode_answer::<R::Reply>(&answer).unwrap().0, reply);
        self.add(format!("Answer::{}", R::NAME), answer);
        self.client.push(R::NAME);
    }

    /// A peer request and an answer of its reply type; both must decode to themselves.
    fn peer<R: PeerCall + Clone + PartialEq + std::fmt::Debug>(&mut self, req: R, reply: R::Reply)
    where
        R::Reply: PartialEq + std::fmt::Debug + Clone,
    {
        let wire: PeerRequest = req.into();
        let bytes = frame::encode(&wire);
        assert_eq!(frame::decode::<PeerRequest>(&bytes).unwrap(), wire);
        self.add(format!("PeerRequest::{}", R::NAME), bytes);
        let answer = encode_answer(&Ok::<_, FsError>(reply.clone()));
        assert_eq!(decode_answer::<R::Reply>(&answer).unwrap().0, reply);
        self.add(format!("PeerAnswer::{}", R::NAME), answer);
        self.peer.push(R::NAME);
    }
}

fn client_samples(s: &mut Samples) {
    let path = || "/run1/ckpt".to_string();
    s.client(
        Hello {
            version: PROTOCOL_VERSION,
            pid: 4242,
            resume: Some(3),
            ring: true,
        },
        Bound {
            client: 11,
            node: 2,
            nodes: 3,
            board: Some(RegionAt { pid: 4243, fd: 9 }),
            ring: Some(RegionAt { pid: 4243, fd: 10 }),
        },
    );
    s.client(
        Open {
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
        Opened {
            attr: attr(),
            owners: Some(owners()),
            path: "/run1/ckpt".into(),
        },
    );
    s.client(Stat { path: path() }, attr());
    s.client(
        Mkdir {
            path: path(),
            mode: 0o755,
        },
        attr(),
    );
    s.client(Rmdir { path: path() }, ());
    s.client(Unlink { path: path() }, ());
    s.client(
        Readdir {
            path: path(),
            after: Some("f".into()),
            limit: 4096,
        },
        tessera_core::dir_page::DirPage {
            entries: vec![(dir_entry(), Some(attr())), (dir_entry(), None)],
            next: Some("g".into()),
            leases: Some(tessera_core::dir_page::PageLeases {
                generation: 2,
                expires_ns: 987_654_321,
                slots: vec![Some((17, 3)), None],
            }),
        },
    );
    s.client(
        Rename {
            from: path(),
            to: "/run1/old".into(),
        },
        (),
    );
    s.client(
        Truncate {
            path: path(),
            size: 1 << 40,
        },
        attr(),
    );
    s.client(
        SetAttr {
            path: path(),
            change: change(),
        },
        attr(),
    );
    s.client(ReadLink { path: path() }, "../data/ckpt.0".into());
    s.client(
        Attach {
            ino: 5,
            runs: vec![run()],
            upto: Some(1_880_040),
            fences: vec![1_700_000_000_000_000_001],
        },
        (),
    );
    s.client(
        Detach {
            ino: 5,
            start: 0,
            end: 10,
        },
        (),
    );
    s.client(DetachFile { ino: 5 }, ());
    s.client(
        Query {
            ino: 5,
            start: 0,
            end: u64::MAX,
        },
        owners(),
    );
    s.client(QueryFile { ino: 5, from: 0 }, owners());
    s.client(
        Read {
            ino: 5,
            parts: vec![(owner(), vec![(0, 10), (20, 30)])],
        },
        Data { len: 16 << 20 },
    );
    s.client(
        Flush {
            path: path(),
            range: Some((0, 4096)),
        },
        Flushed {
            bytes: 1 << 30,
            nodes: 3,
        },
    );
    s.client(
        Lock {
            ino: 5,
            start: 0,
            end: 100,
            kind: Some(LockKind::Shared),
            wait: true,
            pid: 4242,
        },
        (),
    );
    s.client(
        GetLock {
            ino: 5,
            start: 0,
            end: 100,
            kind: LockKind::Exclusive,
        },
        Some(held()),
    );
    s.client(
        ListLock {
            ino: 5,
            seq: 3,
            runs: vec![lock_run()],
            wait: true,
            pid: 4242,
        },
        1_700_000_000_000_000_001,
    );
    s.client(
        ListUnlock {
            ino: 5,
            token: 1_700_000_000_000_000_001,
        },
        (),
    );
    s.client(Reserve { bytes: 64 << 20 }, 64 << 20);
    s.client(Release { bytes: 4096 }, ());
    s.client(Writing { ino: 5 }, ());
    s.client(Status, status());
    s.client(Shutdown, ());
    s.client(TxnOpen {}, txn());
    s.client(
        TxnJoin {
            txn: Some(txn()),
            log: Some(78),
        },
        78,
    );
    s.client(
        TxnDecide {
            txn: txn(),
            commit: false,
            reasons: vec!["rank 3 voted to abort: out of memory".into()],
        },
        (),
    );
    s.client(
        CatChange {
            op: CatalogueOp::Create(variable()),
        },
        (),
    );
    s.client(
        CatLookup {
            name: "temperature".into(),
            version: Some(3),
        },
        version(),
    );
    s.client(CatList {}, vec![("temperature".to_string(), 3)]);
    s.client(
        CatWait {
            name: "temperature".into(),
            version: 4,
            timeout_ms: 10_000,
        },
        4,
    );
    s.client(AppendAt { ino: 5, len: 12 }, 4096);
    s.client(
        Xattr {
            path: "/run1/ckpt".into(),
            op: XattrOp::Get {
                name: "user.origin".into(),
            },
        },
        XattrReply::Value(b"run 7".to_vec()),
    );
    s.client(
        Symlink {
            path: "/run1/latest".into(),
            target: "ckpt".into(),
        },
        (),
    );
    s.client(
        Link {
            from: "/run1/ckpt".into(),
            to: "/run1/ckpt.keep".into(),
        },
        (),
    );
    s.client(
        Locate {
            ranges: vec![
                LocateRange {
                    path: "/run1/ckpt".into(),
                    start: 0,
                    len: None,
                },
                LocateRange {
                    path: "/run1/gone".into(),
                    start: 4096,
                    len: Some(8192),
                },
            ],
            max_extents: 4096,
        },
        Located {
            view_time_ns: 1_700_000_000_123_456_789,
            files: vec![
                Ok(FileLocation {
                    ino: 5,
                    size: 1 << 20,
                    placement: Placement {
                        start: 0,
                        end: 1 << 20,
                        extents: vec![
                            PlacedExtent {
                                start: 0,
                                end: 4096,
                                node: Some(1),
                                residence: Residence::Both,
                            },
                            PlacedExtent {
                                start: 4096,
                                end: 1 << 20,
                                node: None,
                                residence: Residence::Pfs,
                            },
                        ],
                        more_from: None,
                        bytes_by_node: vec![(1, 4096)],
                        pfs_only_bytes: (1 << 20) - 4096,
                    },
                }),
                Err(error()),
            ],
        },
    );
    s.client(ForwardPing { node: 2 }, 2);
    s.client(
        MigratePlan { ino: 5 },
        vec![StripeAt {
            stripe: 0,
            version: 1_700_000_000_000_000_042,
            runs: vec![OwnedRun {
                run: Run::single(0, 4096),
                owner: Owner { node: 1, client: 3 },
            }],
        }],
    );
    s.client(
        AttachIf {
            ino: 5,
            stripes: vec![(0, 1_700_000_000_000_000_042, vec![Run::single(0, 4096)])],
            upto: Some(4096),
            from: vec![Owner { node: 1, client: 3 }],
        },
        4096,
    );
    s.client(
        TxnEnroll {
            txn: txn(),
            members: vec![(0, 3), (1, 9)],
            open: true,
        },
        vec![1_024, 2_048],
    );
    s.client(TxnReserve { count: 1024 }, txn());
    s.client(
        LogAppend {
            ino: 5,
            log: 9,
            offset: 4096,
            data: b"abc".to_vec(),
        },
        8192,
    );
    s.client(
        LogSync {
            ino: 5,
            log: 9,
            durable: true,
        },
        LogLens {
            data: 8195,
            index: 112,
        },
    );
    s.client(
        LogMarkIt {
            ino: 5,
            log: 9,
            mark: LogMark::PublishedRange {
                start: 0,
                end: 4096,
            },
        },
        (),
    );
    s.client(
        LogReadAt {
            ino: 5,
            log: 9,
            pos: 0,
            len: 3,
        },
        Data { len: 3 },
    );
    s.client(
        ReadPfs {
            path: "/a/b".into(),
            ranges: vec![(0, 4096), (8192, 9000)],
        },
        vec![4096, 100],
    );
    s.client(
        StatLeased {
            path: "/run1/f".into(),
        },
        Leased {
            attr: attr(),
            lease: Some(AttrLease {
                slot: 513,
                epoch: 7,
                generation: 1,
                expires_ns: 123_456_789_000,
            }),
        },
    );
    s.client(Nop, ());
    s.client(Goodbye, ());
    s.client(
        Staged {
            direction: StageDirection::Out,
            bytes: 1 << 30,
        },
        (),
    );
}

fn peer_samples(s: &mut Samples) {
    let path = || "/run1/ckpt".to_string();
    s.peer(Ping, 2);
    s.peer(
        DentryGet {
            path: path(),
            view: view(),
        },
        Some((dentry(), Some(attr()))),
    );
    s.peer(
        DentryCreate {
            path: path(),
            kind: FileKind::File,
            mode: 0o644,
            uid: 1000,
            gid: 100,
            exclusive: true,
            txn: Some(txn()),
            parent_ino: 1,
        },
        Created {
            dentry: dentry(),
            created: true,
            attr: Some(attr()),
        },
    );
    s.peer(
        DentryRemove {
            path: path(),
            ino: 5,
            txn: Some(txn()),
        },
        true,
    );
    s.peer(
        DentryPut {
            path: path(),
            dentry: dentry(),
        },
        Some(dentry()),
    );
    s.peer(
        ListChildren {
            dir: "/run1".into(),
            view: view(),
            after: None,
            limit: 4096,
            lease_to: Some((1, 0xfeed)),
        },
        Listed {
            page: tessera_core::dir_page::ShardPage {
                entries: vec![(dir_entry(), Some(attr()))],
                bound: Some("f".into()),
            },
            leased: vec![0],
        },
    );
    s.peer(
        HasChildren {
            dir: "/run1".into(),
        },
        true,
    );
    s.peer(
        SealDir {
            dir: "/run1".into(),
            ino: 5,
            seal: true,
        },
        true,
    );
    s.peer(InodeGet { ino: 5 }, attr());
    s.peer(
        InodeSetSize {
            ino: 5,
            change: SizeChange::Extend(9000),
            txn: Some(txn()),
        },
        attr(),
    );
    s.peer(InodeRemove { ino: 5 }, ());
    s.peer(
        InodeSetAttr {
            ino: 5,
            change: change(),
        },
        attr(),
    );
    s.peer(
        OwnAttach {
            ino: 5,
            stripe: 1,
            owner: owner(),
            runs: vec![run()],
            fences: vec![1_700_000_000_000_000_001],
            txn: Some(txn()),
        },
        (),
    );
    s.peer(
        OwnDetach {
            ino: 5,
            stripe: 1,
            owner: owner(),
            start: 0,
            end: 10,
        },
        4096,
    );
    s.peer(
        OwnFetchStripe {
            ino: 5,
            stripe: 1,
            from: 0,
            view: view(),
        },
        Stripe {
            runs: vec![owned_run()],
            version: 12,
            cached: true,
            excluded: vec![txn()],
        },
    );
    s.peer(
        Invalidate {
            ino: 5,
            stripe: 1,
            version: 12,
        },
        (),
    );
    s.peer(
        OwnQueryFile {
            ino: 5,
            only: Some(owner()),
            from: 4096,
            max: 1000,
            view: view(),
        },
        OwnedPage {
            runs: vec![owned_run()],
            resume: Some(1 << 30),
            excluded: vec![txn()],
        },
    );
    s.peer(
        OwnDetachFile {
            ino: 5,
            owner: owner(),
        },
        (),
    );
    s.peer(OwnTruncate { ino: 5, size: 100 }, ());
    s.peer(DropFile { ino: 5 }, ());
    s.peer(DropFiles { inos: vec![5, 6] }, ());
    s.peer(
        ReadLog {
            ino: 5,
            client: 77,
            ranges: vec![(0, 10)],
        },
        Data { len: 10 },
    );
    s.peer(
        FlushFile {
            path: path(),
            range: None,
        },
        Flushed {
            bytes: 4096,
            nodes: 1,
        },
    );
    s.peer(
        FlushPart {
            ino: 5,
            target: "/run1/.tessera-flush.0.00000000000000ab".into(),
            extents: vec![extent()],
        },
        4096,
    );
    s.peer(
        TableLock {
            ino: 5,
            owner: lock_owner(),
            start: 0,
            end: 100,
            kind: None,
            wait: false,
        },
        (),
    );
    s.peer(
        TableGetLock {
            ino: 5,
            owner: lock_owner(),
            start: 0,
            end: 100,
            kind: LockKind::Shared,
        },
        Some(held()),
    );
    s.peer(ReleaseLocks { owner_id: 9 }, ());
    s.peer(
        TableListLock {
            ino: 5,
            owner: lock_owner(),
            seq: 3,
            runs: vec![lock_run()],
            wait: false,
        },
        1_700_000_000_000_000_001,
    );
    s.peer(
        TableListUnlock {
            ino: 5,
            token: 1_700_000_000_000_000_001,
        },
        (),
    );
    s.peer(
        RenewLease { node: 2 },
        vec![Fence {
            ino: 5,
            token: 1_700_000_000_000_000_001,
        }],
    );
    s.peer(
        Fence {
            ino: 5,
            token: 1_700_000_000_000_000_001,
        },
        (),
    );
    s.peer(Status, status());
    s.peer(Shutdown, ());
    s.peer(
        TxnMember {
            txn: txn(),
            node: 1,
            client: 77,
            joined: true,
        },
        (),
    );
    s.peer(
        TxnHomeDecide {
            txn: txn(),
            commit: true,
            reasons: Vec::new(),
        },
        (),
    );
    s.peer(TxnPrepare { txn: txn() }, ());
    s.peer(
        TxnComplete {
            txn: txn(),
            commit: true,
        },
        (),
    );
    s.peer(TxnStatus { txn: txn() }, TxnVerdict::Committed);
    s.peer(
        InodeGetAs {
            ino: 5,
            view: view(),
        },
        AttrAs {
            attr: attr(),
            excluded: vec![txn()],
            pfs_upto: None,
        },
    );
    s.peer(
        TxnMembers {
            txn: txn(),
            clients: vec![77, 78],
        },
        vec![77],
    );
    s.peer(
        CatShardChange {
            txn: Some(txn()),
            op: CatalogueOp::AddChunk {
                name: "temperature".into(),
                chunk: chunk(),
            },
        },
        (),
    );
    s.peer(
        CatShardLookup {
            name: "temperature".into(),
            version: None,
            view: view(),
        },
        version(),
    );
    s.peer(
        CatShardList { view: view() },
        vec![("temperature".to_string(), 0)],
    );
    s.peer(
        CatShardWait {
            name: "temperature".into(),
            version: 4,
            timeout_ms: 10_000,
        },
        5,
    );
    s.peer(InodeAppend { ino: 5, len: 12 }, 4096);
    s.peer(
        TxnTruncate {
            txn: txn(),
            ino: 5,
            size: 10,
            path: "/out/data.h5".into(),
        },
        (),
    );
    s.peer(
        DentryMoveOut {
            path: "/out/ckpt.tmp".into(),
            ino: 5,
            txn: txn(),
            to: Some("/out/ckpt".into()),
        },
        MovedOut {
            committed: true,
            moved_from: None,
        },
    );
    s.peer(
        DentryMoveIn {
            path: "/out/ckpt".into(),
            dentry: dentry(),
            txn: txn(),
            from: Some("/out/ckpt.tmp".into()),
        },
        MovedIn {
            replaced: Some(dentry()),
            moved_from: Some("/out/old".into()),
        },
    );
    s.peer(
        InodeXattr {
            ino: 5,
            op: XattrOp::Set {
                name: "user.origin".into(),
                value: b"run 7".to_vec(),
                mode: SetMode::Create,
            },
        },
        XattrReply::Done,
    );
    s.peer(
        InodeLink {
            ino: 5,
            path: path(),
        },
        attr(),
    );
    s.peer(InodeUnlink { ino: 5 }, true);
    s.peer(
        DentryLink {
            path: path(),
            dentry: dentry(),
        },
        (),
    );
    s.peer(
        LocateNames {
            paths: vec![path(), "/run1/gone".into()],
        },
        vec![
            Some(NamedFile {
                ino: 5,
                kind: FileKind::File,
                pfs_size: Some(4096),
                inode: Some((1 << 20, true)),
            }),
            None,
        ],
    );
    s.peer(
        LocateInodes { inos: vec![5, 6] },
        vec![Some((1 << 20, false)), None],
    );
    s.peer(
        LocateRuns {
            spans: vec![(5, 0, 0, 1 << 20)],
            max_runs: 65_536,
        },
        vec![Some(vec![OwnedRun {
            run: Run::single(0, 4096),
            owner: Owner { node: 1, client: 3 },
        }])],
    );
    s.peer(
        OwnStripeAt { ino: 5, stripe: 0 },
        Some(StripeAt {
            stripe: 0,
            version: 1_700_000_000_000_000_042,
            runs: vec![],
        }),
    );
    s.peer(
        OwnAttachIf {
            ino: 5,
            stripe: 0,
            owner: Owner { node: 2, client: 9 },
            runs: vec![Run::single(0, 4096)],
            version: 1_700_000_000_000_000_042,
        },
        true,
    );
    s.peer(
        ReleaseLogs {
            ino: 5,
            clients: vec![3],
            now: false,
        },
        (),
    );
    s.peer(
        TxnEnrollNode {
            txn: txn(),
            clients: vec![9, 12],
            undo: false,
        },
        vec![2_048, 2_049],
    );
    use tessera_core::name_ops::{NameOp, Outcome, Placed, Step, StepKey};
    let key = StepKey {
        node: 2,
        intent: 0x1234_5678_9abc_def0,
        stage: 1,
    };
    s.peer(
        ChangeNames {
            file: dentry(),
            op: NameOp::Rename {
                from: "/a/b".into(),
                to: "/c".into(),
            },
        },
        (),
    );
    s.peer(
        NameStep {
            key,
            step: Step::Place {
                path: "/c".into(),
                file: dentry(),
            },
        },
        Outcome::Placed(Placed::Made),
    );
    s.peer(ForgetNameSteps { keys: vec![key] }, ());
    s.peer(
        NamesOfNode {
            node: 1,
            after: Some(("/a".into(), "b".into())),
        },
        NamesPage {
            names: vec![("/a/c".into(), dentry())],
            next: None,
        },
    );
    s.peer(
        CheckNames {},
        NamesChecked {
            files: 3,
            raised: vec![(7, 1, vec!["/a".into(), "/b".into()])],
        },
    );
    s.peer(
        TxnMovedIn {
            txn: txn(),
            path: "/c".into(),
            ino: 7,
        },
        true,
    );
    s.peer(
        FindEntries {
            root: "/a".into(),
            filter: tessera_core::find::Filter {
                name: Some("*01*".into()),
                kind: Some(FileKind::File),
                size: Some(tessera_core::find::SizeTest {
                    compare: tessera_core::find::Compare::Exactly,
                    count: 3901,
                    unit: 1,
                }),
                newer_than_ns: Some(1_700_000_000_000_000_000),
            },
            after: Some(("/a".into(), "b".into())),
            limit: 4096,
        },
        FoundPage {
            found: vec![("/a/c01".into(), dentry())],
            looked_at: 10,
            files_looked_at: 9,
            next: None,
        },
    );
    s.peer(InodeAttrs { inos: vec![7, 8] }, vec![Some(attr()), None]);
    s.peer(
        RemoveName {
            path: "/run1/f".into(),
        },
        Removal::Elsewhere(dentry()),
    );
    s.peer(
        LeaseAttr {
            path: "/run1/f".into(),
            node: 1,
            boot: 0xfeed,
        },
        LeasedFound {
            found: Some((dentry(), Some(attr()))),
            leased: true,
        },
    );
    s.peer(
        ForgetAttrs {
            boot: 0xfeed,
            keys: vec![1, u64::MAX],
            version: 42,
        },
        (),
    );
}

fn samples() -> Samples {
    let mut s = Samples::default();
    client_samples(&mut s);
    peer_samples(&mut s);
    s.add("Answer::Err".into(), encode_answer::<()>(&Err(error())));
    s.add(
        "handshake::Challenge".into(),
        frame::encode(&Challenge {
            version: PROTOCOL_VERSION,
            node: 1,
            nonce: [0xab; 32],
            security: peer_auth::Security::Auth,
        }),
    );
    s.add(
        "handshake::Hello".into(),
        frame::encode(&peer_auth::Hello {
            version: PROTOCOL_VERSION,
            from: peer_auth::ADMIN_NODE,
            nonce: [0x01; 32],
            proof: [0x02; 32],
        }),
    );
    s.add(
        "handshake::Welcome".into(),
        frame::encode(&Welcome { proof: [0x03; 32] }),
    );
    let mut framed = Vec::new();
    frame::write_frame(&mut framed, &frame::encode(&Request::from(Status))).unwrap();
    s.add("frame::Request::Status".into(), framed);
    s
}

fn golden_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/messages.txt")
}

#[test]
fn every_message_encodes_to_its_committed_bytes() {
    let now = samples().out;
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
fn the_samples_cover_every_request_in_wire_order() {
    let s = samples();
    assert_eq!(
        s.client,
        Request::NAMES,
        "one client sample per request, in wire order"
    );
    assert_eq!(
        s.peer,
        PeerRequest::NAMES,
        "one peer sample per request, in wire order"
    );
    let e = decode_answer::<Attr>(&encode_answer::<Attr>(&Err(error()))).unwrap_err();
    assert_eq!(e, error());
}
