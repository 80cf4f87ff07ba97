//! Byte-range locks (fcntl record locks) between processes on different daemons: conflicts,
//! F_GETLK, blocking until release, and release at close and at process death.

mod common;

use common::{Inst, Rank, decode_hex};
use std::time::Duration;
use tessera_cli::script::Cmd;
use tessera_client::Model;

fn open(r: &mut Rank, path: &str) {
    r.ok(&Cmd::Open {
        path: path.into(),
        model: Model::Commit,
        read: true,
        write: true,
        create: true,
    });
}

fn lock(off: u64, len: u64, exclusive: bool, wait: bool) -> Cmd {
    Cmd::Lock {
        off,
        len,
        exclusive,
        wait,
    }
}

fn getlock(r: &mut Rank, off: u64, len: u64, exclusive: bool) -> String {
    let reply = r.ok(&Cmd::GetLock {
        off,
        len,
        exclusive,
    });
    String::from_utf8(decode_hex(reply.data.as_deref().unwrap())).unwrap()
}

#[test]
fn conflicting_locks_across_daemons() {
    let inst = Inst::start(3);
    let (mut a, mut b, mut c) = (inst.rank(0), inst.rank(1), inst.rank(2));
    for r in [&mut a, &mut b, &mut c] {
        open(r, "/tessera/locked");
    }
    a.ok(&lock(0, 100, true, false));
    // Another process on another daemon: refused with EAGAIN naming the holder.
    let r = b.run(&lock(50, 10, true, false));
    assert!(!r.ok);
    assert_eq!(r.errno.as_deref(), Some("EAGAIN"));
    assert!(r.msg.unwrap().contains(&format!("pid {}", a.pid())));
    let r = c.run(&lock(99, 1, false, false));
    assert_eq!(r.errno.as_deref(), Some("EAGAIN"), "{r:?}");
    assert_eq!(
        getlock(&mut b, 0, 0, false),
        format!("{} 0 100 exclusive", a.pid())
    );
    // Disjoint ranges and shared locks coexist; the holder itself never conflicts.
    b.ok(&lock(100, 50, false, false));
    c.ok(&lock(120, 0, false, false));
    assert_eq!(getlock(&mut a, 0, 0, false), "none");
    assert_eq!(
        getlock(&mut a, 130, 1, true),
        format!("{} 100 150 shared", b.pid())
    );
    // Downgrade in place: a's exclusive lock becomes shared, so readers get in.
    a.ok(&lock(0, 100, false, false));
    b.ok(&lock(0, 10, false, false));
    // Unlocking part of a range splits it.
    a.ok(&Cmd::Unlock { off: 40, len: 20 });
    c.ok(&lock(40, 20, true, false));
    assert_eq!(
        c.run(&lock(39, 2, true, false)).errno.as_deref(),
        Some("EAGAIN")
    );
    // Bad ranges are refused with EINVAL.
    let r = a.run(&lock(u64::MAX - 1, 10, true, false));
    assert_eq!(r.errno.as_deref(), Some("EINVAL"), "{r:?}");
}

#[test]
fn blocking_lock_waits_for_unlock_close_and_death() {
    let inst = Inst::start(3);
    let (mut a, mut b) = (inst.rank(0), inst.rank(2));
    open(&mut a, "/tessera/wait");
    open(&mut b, "/tessera/wait");

    // Unlock wakes the waiter.
    a.ok(&lock(0, 0, true, false));
    b.send(&lock(10, 10, true, true));
    inst.wait_lock_waiters(1);
    assert!(!b.has_reply(Duration::ZERO), "granted while held");
    a.ok(&Cmd::Unlock { off: 0, len: 0 });
    assert!(b.has_reply(Duration::from_secs(10)));
    assert!(b.recv().ok);
    b.ok(&Cmd::Unlock { off: 0, len: 0 });

    // Close releases the process's locks on the file.
    a.ok(&lock(0, 0, true, false));
    b.send(&lock(0, 1, false, true));
    inst.wait_lock_waiters(1);
    assert!(!b.has_reply(Duration::ZERO), "granted while held");
    a.ok(&Cmd::Close);
    assert!(b.has_reply(Duration::from_secs(10)));
    assert!(b.recv().ok);
    b.ok(&Cmd::Unlock { off: 0, len: 0 });

    // A holder killed with SIGKILL loses its locks; the waiter gets in.
    open(&mut a, "/tessera/wait");
    a.ok(&lock(0, 0, true, false));
    b.send(&lock(0, 0, true, true));
    inst.wait_lock_waiters(1);
    assert!(!b.has_reply(Duration::ZERO), "granted while held");
    let with_a = inst.clients(0);
    a.kill9();
    assert!(b.has_reply(Duration::from_secs(10)));
    assert!(b.recv().ok);
    // The lock is released as soon as the death is seen, a moment before the connection is
    // no longer counted: the counts below start from a daemon that has let go of `a`.
    inst.wait_clients_where(0, &format!("fewer than {with_a}"), |now| now < with_a);
    // A waiter that dies is never granted the lock, whichever node it was on (the lock
    // table lives on one of them, so two of these waits are remote).
    for node in 0..3 {
        let idle = inst.clients(node);
        let mut c = inst.rank(node);
        open(&mut c, "/tessera/wait");
        c.send(&lock(0, 0, true, true));
        inst.wait_lock_waiters(1);
        assert!(!c.has_reply(Duration::ZERO), "granted while held");
        c.kill9();
        // The daemon has seen the waiter's process end before the lock is freed.
        inst.wait_clients(node, idle);
        b.ok(&Cmd::Unlock { off: 0, len: 0 });
        let before = inst.clients(0);
        let mut probe = a2(&inst);
        assert_eq!(getlock(&mut probe, 0, 0, true), "none", "node {node}");
        drop(probe);
        inst.wait_clients(0, before);
        b.ok(&lock(0, 0, true, false));
    }
}

fn a2(inst: &Inst) -> Rank {
    let mut r = inst.rank(0);
    open(&mut r, "/tessera/wait");
    r
}

/// A lock belongs to the process, not to the handle it was taken through: after taking it,
/// every session handle of the file in the process sees what the previous holder wrote (the
/// pattern of programs that lock through one descriptor and read through another, and of
/// MPI-IO atomic mode). The same holds for fsync-style syncs.
#[test]
fn taking_a_lock_refreshes_every_handle_of_the_process() {
    use tessera_client::{LockKind, OpenOptions};
    let inst = Inst::start(3);
    let (first, writer, reader) = (inst.client(0), inst.client(1), inst.client(2));
    let session = |read: bool, write: bool| {
        let mut o = OpenOptions::new();
        o.read(read)
            .write(write)
            .create(write)
            .model(Model::Session);
        o
    };
    let mut f = first.open("/tessera/shared", &session(true, true)).unwrap();
    f.write_at(b"old!", 0).unwrap();
    f.close().unwrap();
    let mut w = writer
        .open("/tessera/shared", &session(true, true))
        .unwrap();
    // The reader opens two session handles: both see "old!".
    let mut data = reader
        .open("/tessera/shared", &session(true, false))
        .unwrap();
    let mut lock_handle = reader
        .open("/tessera/shared", &session(true, false))
        .unwrap();
    let mut buf = [0u8; 4];
    data.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"old!");
    // The writer updates under an exclusive lock and releases it (which publishes).
    w.lock(0, 0, LockKind::Exclusive, true).unwrap();
    w.write_at(b"new!", 0).unwrap();
    w.unlock(0, 0).unwrap();
    // Without synchronising, the session handle still reads from the owner it learned at
    // open (the first writer's log).
    data.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"old!", "a session handle refreshed without a sync");
    // Locking through the other handle makes this one see the release's writes.
    lock_handle.lock(0, 4, LockKind::Shared, true).unwrap();
    data.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"new!");
    lock_handle.unlock(0, 4).unwrap();
    // A read-only handle's unlock publishes the process's writes made through another handle.
    let mut rw = reader
        .open("/tessera/shared", &session(true, true))
        .unwrap();
    lock_handle.lock(0, 0, LockKind::Exclusive, true).unwrap();
    rw.write_at(b"3rd!", 0).unwrap();
    lock_handle.unlock(0, 0).unwrap();
    w.lock(0, 0, LockKind::Shared, true).unwrap();
    w.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"3rd!");
}

/// A process reads its own writes through every handle, whichever handle published them; and
/// "lock, append, unlock" from several processes builds a log without lost records.
#[test]
fn own_writes_across_handles_and_appends_under_locks() {
    use tessera_client::{LockKind, OpenOptions};
    let inst = Inst::start(3);
    let mut o = OpenOptions::new();
    o.read(true).write(true).create(true).model(Model::Session);
    let (other, me) = (inst.client(0), inst.client(1));
    let mut f = other.open("/tessera/mine", &o).unwrap();
    f.write_at(b"theirs", 0).unwrap();
    f.close().unwrap();
    // Two handles of one process: write through one, publish through the other.
    let mut x = me.open("/tessera/mine", &o).unwrap();
    let mut y = me.open("/tessera/mine", &o).unwrap();
    y.write_at(b"MINE", 0).unwrap();
    x.commit().unwrap();
    let mut buf = [0u8; 6];
    y.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"MINErs", "a handle lost its own process's write");

    // Three processes on three daemons append records under an exclusive lock.
    let mut a = OpenOptions::new();
    a.read(true)
        .write(true)
        .create(true)
        .append(true)
        .model(Model::Session);
    let clients: Vec<_> = (0..3).map(|n| inst.client(n)).collect();
    let mut logs: Vec<_> = clients
        .iter()
        .map(|c| c.open("/tessera/log", &a).unwrap())
        .collect();
    for round in 0..4 {
        for (i, l) in logs.iter_mut().enumerate() {
            l.lock(0, 0, LockKind::Exclusive, true).unwrap();
            l.write(format!("r{round}c{i};").as_bytes()).unwrap();
            l.unlock(0, 0).unwrap();
        }
    }
    drop(logs);
    let mut r = inst.client(2).open_read("/tessera/log").unwrap();
    let mut all = vec![0u8; r.len().unwrap() as usize];
    r.read_exact_at(&mut all, 0).unwrap();
    let text = String::from_utf8(all).unwrap();
    let expected: String = (0..4)
        .flat_map(|round| (0..3).map(move |i| format!("r{round}c{i};")))
        .collect();
    assert_eq!(text, expected);
}
