//! The models are really different: relaxed models may show old data, strong ones may not.

mod common;

use common::Inst;
use tessera_cli::script::{Cmd, pattern_byte};
use tessera_client::Model;

fn pattern(id: u32, off: u64, len: u64) -> Vec<u8> {
    (off..off + len).map(|o| pattern_byte(id, o)).collect()
}

fn open(path: &str, model: Model, write: bool) -> Cmd {
    Cmd::Open {
        path: path.into(),
        model,
        read: true,
        write,
        create: write,
    }
}

/// A session reader that opened before the writer closed may see the old bytes; it sees the
/// new ones once it opens again after the close.
#[test]
fn session_reader_may_see_old_data_until_it_reopens() {
    let inst = Inst::start(3);
    let mut writer = inst.rank(1);
    let mut reader = inst.rank(2);
    let path = "/tessera/relaxed";
    writer.ok(&open(path, Model::Session, true));
    writer.ok(&Cmd::Write {
        off: 0,
        len: 100,
        id: 1,
    });
    writer.ok(&Cmd::Close);

    reader.ok(&open(path, Model::Session, false));
    assert_eq!(reader.read(0, 100), pattern(1, 0, 100));

    writer.ok(&open(path, Model::Session, true));
    writer.ok(&Cmd::Write {
        off: 0,
        len: 100,
        id: 2,
    });
    // The write has returned, yet the reader (whose session began earlier) sees old data:
    // the model allows it, and Tessera does it.
    assert_eq!(
        reader.read(0, 100),
        pattern(1, 0, 100),
        "session reader saw the new write early"
    );
    writer.ok(&Cmd::Close);
    // After close -> open, the new bytes must be visible.
    reader.ok(&Cmd::SessionOpen);
    assert_eq!(reader.read(0, 100), pattern(2, 0, 100));
}

/// Under commit consistency the same reader sees the new bytes as soon as the writer commits,
/// with no action of its own; before the commit it may not.
#[test]
fn commit_reader_sees_data_after_the_writers_commit() {
    let inst = Inst::start(3);
    let mut writer = inst.rank(0);
    let mut reader = inst.rank(1);
    let path = "/tessera/commit";
    writer.ok(&open(path, Model::Commit, true));
    writer.ok(&Cmd::Write {
        off: 0,
        len: 64,
        id: 1,
    });
    writer.ok(&Cmd::Commit);
    reader.ok(&open(path, Model::Commit, false));
    assert_eq!(reader.read(0, 64), pattern(1, 0, 64));
    writer.ok(&Cmd::Write {
        off: 0,
        len: 64,
        id: 2,
    });
    assert_eq!(
        reader.read(0, 64),
        pattern(1, 0, 64),
        "uncommitted write became visible"
    );
    writer.ok(&Cmd::Commit);
    assert_eq!(reader.read(0, 64), pattern(2, 0, 64));
}

/// Under POSIX consistency every write is visible to the next read, with no sync at all.
#[test]
fn posix_reader_sees_every_write_immediately() {
    let inst = Inst::start(3);
    let mut writer = inst.rank(2);
    let mut reader = inst.rank(0);
    let path = "/tessera/posix";
    writer.ok(&open(path, Model::Posix, true));
    reader.ok(&open(path, Model::Posix, false));
    for id in 1..6u32 {
        let off = u64::from(id) * 10;
        writer.ok(&Cmd::Write { off, len: 30, id });
        assert_eq!(reader.read(off, 30), pattern(id, off, 30));
    }
}

/// A reader on the same node as the writer reads its logs directly; the result is the same.
#[test]
fn same_node_reader_reads_the_writers_log_directly() {
    let inst = Inst::start(2);
    let mut writer = inst.rank(1);
    let mut reader = inst.rank(1);
    writer.ok(&open("/tessera/local", Model::Commit, true));
    writer.ok(&Cmd::Write {
        off: 5,
        len: 1000,
        id: 7,
    });
    writer.ok(&Cmd::Commit);
    reader.ok(&open("/tessera/local", Model::Commit, false));
    let before = reader.stats();
    assert_eq!(reader.read(5, 1000), pattern(7, 5, 1000));
    let after = reader.stats();
    assert_eq!(
        after.read.node_logs - before.read.node_logs,
        1000,
        "read straight from the writer's log: {after:?}"
    );
    assert_eq!(after.read.remote, before.read.remote, "{after:?}");
    // Bytes 0..5 were never written: a hole reads as zeros.
    assert_eq!(reader.read(0, 5), vec![0; 5]);
    assert_eq!(reader.stats().read.holes - after.read.holes, 5);
}

/// A session reader reading another node's bytes in a regular pattern is served from what it
/// read ahead: few requests, most bytes without one.
#[test]
fn pattern_reads_are_served_from_read_ahead() {
    let inst = Inst::start(2);
    let mut writer = inst.rank(1);
    let mut reader = inst.rank(0);
    let path = "/tessera/ahead";
    let (piece, pieces) = (4096u64, 64u64);
    writer.ok(&open(path, Model::Commit, true));
    writer.ok(&Cmd::Write {
        off: 0,
        len: piece * pieces,
        id: 3,
    });
    writer.ok(&Cmd::Commit);
    reader.ok(&open(path, Model::Session, false));
    let before = reader.stats();
    for i in 0..pieces {
        assert_eq!(reader.read(i * piece, piece), pattern(3, i * piece, piece));
    }
    let s = reader.stats();
    let hits = s.read.read_ahead_hits - before.read.read_ahead_hits;
    let remote = s.read.remote - before.read.remote;
    assert_eq!(
        hits + remote,
        piece * pieces,
        "every byte came from node 1: {s:?}"
    );
    assert!(
        hits >= piece * (pieces - 4),
        "after three reads the pattern is read ahead: {s:?}"
    );
    assert!(
        s.requests - before.requests < 8,
        "{} requests for {pieces} reads",
        s.requests - before.requests
    );
}

/// Queries served from a daemon's leased copy of a remote stripe never miss a later commit:
/// the stripe's shard invalidates the copy before acknowledging the attach.
#[test]
fn cached_remote_stripes_see_every_commit() {
    let inst = Inst::start_with(3, &["--stripe-size", "65536"]);
    // Two writers take turns, so every commit moves the ownership (a stale copy would send
    // the reader to the previous writer's log).
    let mut writers = [inst.rank(1), inst.rank(2)];
    let mut reader = inst.rank(0);
    let path = "/tessera/cached";
    let len = 1 << 20; // 16 stripes: most of them on the other two daemons
    for w in writers.iter_mut() {
        w.ok(&open(path, Model::Commit, true));
    }
    reader.ok(&open(path, Model::Commit, false));
    for id in 1..7u32 {
        let writer = &mut writers[id as usize % 2];
        writer.ok(&Cmd::Write { off: 0, len, id });
        writer.ok(&Cmd::Commit);
        // Read twice: the first query fills the caches, the second is served from them
        // (checked below: the daemon counts the queries its copies answered).
        for _ in 0..2 {
            for chunk in 0..16u64 {
                let off = chunk * 65536;
                assert_eq!(
                    reader.read(off, 65536),
                    pattern(id, off, 65536),
                    "version {id}, chunk {chunk}"
                );
            }
        }
    }
    let status = inst.client(0).status().unwrap();
    assert!(
        status.stripe_copy_hits > 0 && status.stripe_copy_misses > 0,
        "node 0 fetched copies of remote stripes and answered queries from them: {status:?}"
    );
}
