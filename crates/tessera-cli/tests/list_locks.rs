//! List locks between processes on different daemons: interleaved strided locks held at once,
//! conflicts with record locks (the holder's own included), the fair queue, release at process
//! death, and a holder whose daemon stops answering: its lock is revoked when the lease ends
//! and the writes it made under it are refused.

mod common;

use common::{Inst, Rank, lock_run as run, lock_token as token};
use std::time::{Duration, Instant};
use tessera_cli::script::{Cmd, pattern_byte};
use tessera_client::{LockRun, Model};

fn open(r: &mut Rank, path: &str) {
    r.open(path, Model::Commit, true);
}

fn list_lock(runs: Vec<LockRun>, wait: bool) -> Cmd {
    Cmd::ListLock { runs, wait }
}

#[test]
fn interleaved_list_locks_hold_together_and_conflict_with_record_locks() {
    let inst = Inst::start(3);
    let (mut a, mut b, mut c) = (inst.rank(0), inst.rank(1), inst.rank(2));
    for r in [&mut a, &mut b, &mut c] {
        open(r, "/tessera/list");
    }
    // Two ranks of a vector filetype: 100-byte blocks every 200 bytes, interleaved.
    let ta = token(&a.ok(&list_lock(vec![run(0, 100, 200, 50, true)], false)));
    let tb = token(&b.ok(&list_lock(vec![run(100, 100, 200, 50, true)], false)));
    assert_ne!(ta, tb);
    // Bytes of either are held: a record lock or a list lock of a third process waits.
    let r = c.run(&Cmd::Lock {
        off: 150,
        len: 10,
        exclusive: false,
        wait: false,
    });
    assert_eq!(r.errno.as_deref(), Some("EAGAIN"), "{r:?}");
    let r = c.run(&list_lock(vec![run(9_950, 100, 100, 1, false)], false));
    assert_eq!(r.errno.as_deref(), Some("EAGAIN"), "{r:?}");
    assert!(r.msg.unwrap().contains(&format!("pid {}", b.pid())));
    // Past both: free.
    c.ok(&Cmd::Lock {
        off: 10_000,
        len: 0,
        exclusive: true,
        wait: false,
    });
    // A list lock is its own owner: its holder's record lock conflicts with it too, and a
    // record unlock of the holder does not release it.
    let r = a.run(&Cmd::Lock {
        off: 0,
        len: 10,
        exclusive: true,
        wait: false,
    });
    assert_eq!(r.errno.as_deref(), Some("EAGAIN"), "{r:?}");
    a.ok(&Cmd::Unlock { off: 0, len: 0 });
    let r = c.run(&list_lock(vec![run(0, 1, 1, 1, false)], false));
    assert_eq!(r.errno.as_deref(), Some("EAGAIN"), "{r:?}");
    // Writes under the lock are published at its release and seen by the next holder.
    a.ok(&Cmd::Write {
        off: 0,
        len: 100,
        id: 7,
    });
    a.ok(&Cmd::ListUnlock { token: ta });
    let t = token(&c.ok(&list_lock(vec![run(0, 100, 100, 1, false)], false)));
    let got = c.read(0, 100);
    assert_eq!(
        got,
        (0..100).map(|o| pattern_byte(7, o)).collect::<Vec<_>>()
    );
    c.ok(&Cmd::ListUnlock { token: t });
    // The unlock of a token that is not held is refused.
    let r = a.run(&Cmd::ListUnlock { token: ta });
    assert_eq!(r.errno.as_deref(), Some("EINVAL"), "{r:?}");
    // Bad runs are named.
    let r = b.run(&list_lock(vec![run(0, 100, 50, 3, true)], false));
    assert_eq!(r.errno.as_deref(), Some("EINVAL"), "{r:?}");
    assert!(r.msg.unwrap().contains("stride 50"));
    b.ok(&Cmd::ListUnlock { token: tb });
}

#[test]
fn waiting_list_locks_are_granted_in_order_and_on_holder_death() {
    let inst = Inst::start(3);
    let (mut a, mut b, mut c) = (inst.rank(0), inst.rank(1), inst.rank(2));
    for r in [&mut a, &mut b, &mut c] {
        open(r, "/tessera/queue");
    }
    let ta = token(&a.ok(&list_lock(vec![run(0, 10, 10, 1, true)], false)));
    // b wants everything; c wants free bytes, but behind b's request: both wait.
    b.send(&list_lock(vec![run(0, 1000, 1000, 1, true)], true));
    // b's request is queued before c's (its reply is a grant, never an EAGAIN).
    inst.wait_lock_waiters(1);
    assert!(!b.has_reply(Duration::ZERO), "granted while held");
    c.send(&list_lock(vec![run(500, 10, 10, 1, true)], true));
    inst.wait_lock_waiters(2);
    assert!(!c.has_reply(Duration::ZERO), "passed the queued request");
    a.ok(&Cmd::ListUnlock { token: ta });
    assert!(b.has_reply(Duration::from_secs(10)));
    let tb = token(&b.recv());
    // c waits behind b's grant now, alone in the queue.
    inst.wait_lock_waiters(1);
    assert!(!c.has_reply(Duration::ZERO), "granted while b holds");
    // The holder dies: its lock goes, and the waiter is granted.
    b.kill9();
    let _ = tb;
    assert!(c.has_reply(Duration::from_secs(10)));
    assert!(c.recv().ok);
}

/// SIGSTOP on the daemon serving `pid` until dropped.
struct Stopped(i32);

impl Stopped {
    fn new(pid: i32) -> Stopped {
        // SAFETY: sending a signal to a process id.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        // SAFETY: as above.
        unsafe { libc::kill(self.0, libc::SIGCONT) };
    }
}

#[test]
fn a_silent_holders_lock_is_revoked_and_its_writes_refused() {
    let lease_ms = 1000;
    let inst = Inst::start_with(2, &["--set", &format!("lock_lease_ms={lease_ms}")]);
    // The holder on the node that does not keep the file's lock table (its inode's node).
    let mut b = inst.rank(0);
    open(&mut b, "/tessera/revoked");
    let ino = inst.client(0).stat("/tessera/revoked").unwrap().ino;
    let table = tessera_core::placement::ino_shard(ino);
    let holder = 1 - table;
    let (mut b, mut a, mut reader) = (inst.rank(table), inst.rank(holder), inst.rank(table));
    open(&mut b, "/tessera/revoked");
    open(&mut a, "/tessera/revoked");
    open(&mut reader, "/tessera/revoked");
    let ta = token(&a.ok(&list_lock(vec![run(0, 100, 100, 1, true)], false)));
    a.ok(&Cmd::Write {
        off: 0,
        len: 100,
        id: 1,
    });
    let stopped = Stopped::new(inst.pid(holder));
    let t0 = Instant::now();
    b.send(&list_lock(vec![run(0, 100, 100, 1, true)], true));
    assert!(
        b.has_reply(Duration::from_millis(20 * lease_ms)),
        "the silent holder's lock was never revoked"
    );
    let tb = token(&b.recv());
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_millis(lease_ms),
        "granted after {waited:?}, before the lease ended"
    );
    drop(stopped);
    // The holder resumes: publishing under the revoked lock is refused, naming why.
    let r = a.run(&Cmd::ListUnlock { token: ta });
    assert_eq!(r.errno.as_deref(), Some("ESTALE"), "{r:?}");
    assert!(r.msg.unwrap().contains("revoked"));
    // Its writes were never published, not even at its close.
    a.ok(&Cmd::Close);
    assert!(
        reader.read(0, 100).iter().all(|b| *b == 0),
        "a revoked holder's writes were published"
    );
    b.ok(&Cmd::Write {
        off: 0,
        len: 100,
        id: 2,
    });
    b.ok(&Cmd::ListUnlock { token: tb });
    assert_eq!(
        reader.read(0, 100),
        (0..100).map(|o| pattern_byte(2, o)).collect::<Vec<_>>()
    );
}
