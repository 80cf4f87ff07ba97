//! The request ring: a region one client and its node's daemon share, carrying one small
//! request and its answer at a time without a system call when both sides are running.
//!
//! Layout (little-endian, version [`RING_VERSION`]):
//!
//! | offset | size | field | written by |
//! |---:|---:|---|---|
//! | 0 | 8 | magic `TSRRING\0` | maker |
//! | 8 | 4 | version | maker |
//! | 12 | 4 | header bytes (where the request area starts) | maker |
//! | 16 | 4 | request capacity | maker |
//! | 20 | 4 | answer capacity | maker |
//! | 64 | 4 | request sequence | client |
//! | 68 | 4 | request length | client |
//! | 72 | 4 | client asleep (1 while it waits on the futex) | client |
//! | 128 | 4 | answer sequence (the futex word) | daemon |
//! | 132 | 4 | answer length | daemon |
//! | 136 | 4 | answer place (0 in the region, 1 on the socket) | daemon |
//! | 140 | 4 | daemon awake (0 once it sleeps on the socket) | daemon |
//! | 192 | 8 × [`REPORT_SLOTS`] | figures the client reports (bytes it read itself) | client |
//! | header | request capacity | the request's bytes | client |
//! | header + request capacity | answer capacity | the answer's bytes | daemon |
//!
//! **One exchange.** The client writes the request's bytes and length, then moves the request
//! sequence. If the daemon is not watching (awake is 0) the client rings it through the
//! socket, which stays for setup, credentials and these wake-ups. The daemon copies the
//! request out of the region before it validates it, serves it, writes the answer (or, when
//! it does not fit, says it comes on the socket and then sends it there) and moves the answer
//! sequence to the request's, waking the client's futex if the client said it sleeps. Each side watches for at most
//! [`SPIN`] before it sleeps (the daemon on its socket, the client on the futex), so an idle
//! instance uses no CPU. Both "asleep" handshakes store their flag, fence, and look again,
//! so a wake-up is never lost: either the sleeper sees the new sequence or the other side
//! sees the flag.
//!
//! **Trust.** The region is private to the instance's user (a memfd opened through
//! `/proc/<daemon pid>/fd/<fd>`), sealed against growing and shrinking, so neither side can
//! make the other's mapping fault. A client can still write anything into it: the daemon
//! reads lengths once, checks them against the capacities it chose, copies the bytes out and
//! only then decodes them, so garbage costs the writer its connection and nobody else
//! anything. A child of `fork` must never use its parent's ring (the client library drops it
//! in the child).
//!
//! **Reports.** A client reads the logs of its node and the PFS copy itself, without a
//! request; it keeps its running totals of those bytes in the report words
//! ([`Ring::report`]), which the daemon reads when its metrics are scraped
//! ([`RingReports`]). They are the client's word only: a client that writes nonsense there
//! skews the figures of its own node, and nothing else.
//!
//! **Bulk bytes.** A ring's answer area may be large (a daemon makes it to hold its largest
//! read, 16 MiB, by default): the file bytes of a read then reach the client here, copied in
//! once by the daemon and read in place by the client, which copies them once more, into the
//! caller's buffer ([`Ring::answer_in_place`]). The area's pages are allocated as they are
//! first written, so a client that only ever asks small questions costs a few pages.

use crate::region::{Region, ShmError};
use rustix::fd::BorrowedFd;
use rustix::fs::SealFlags;
use rustix::thread::futex;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering, fence};
use std::time::{Duration, Instant};

/// The first eight bytes of a ring.
pub const RING_MAGIC: [u8; 8] = *b"TSRRING\0";
/// The layout version written at offset 8.
pub const RING_VERSION: u32 = 2;
/// Bytes before the request area: the control words, each side's on a cache line of its own.
pub const RING_HEADER_BYTES: usize = 4096;
/// The request area of a ring made with [`Ring::create`].
pub const REQUEST_CAPACITY: u32 = 64 << 10;
/// The answer area of a ring made with [`Ring::create`].
pub const ANSWER_CAPACITY: u32 = 192 << 10;
/// The most either side watches the ring before it sleeps.
pub const SPIN: Duration = Duration::from_micros(50);
/// The largest area a ring may declare (an opener refuses more).
const MAX_CAPACITY: u32 = 64 << 20;

const REQ_SEQ: usize = 64;
const REQ_LEN: usize = 68;
const CLIENT_ASLEEP: usize = 72;
const ANS_SEQ: usize = 128;
const ANS_LEN: usize = 132;
const ANS_PLACE: usize = 136;
const DAEMON_AWAKE: usize = 140;
const REPORTS: usize = 192;
/// How many figures a client can report in its ring.
pub const REPORT_SLOTS: usize = 8;

/// Where an answer waits for the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// In the ring's answer area.
    Ring,
    /// On the socket, as a frame (too large for the area, or a refusal).
    Socket,
}

/// A request the client placed in the ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Posted {
    /// The sequence its answer will carry.
    pub seq: u32,
    /// Whether the daemon was not watching: the client must ring it through the socket.
    pub wake: bool,
}

/// The figures a ring's client reports, read by the daemon (see "Reports" above).
#[derive(Clone)]
pub struct RingReports {
    region: Arc<Region>,
}

impl RingReports {
    /// Figure `slot` as the client last wrote it (0 if it never did).
    pub fn get(&self, slot: usize) -> u64 {
        assert!(slot < REPORT_SLOTS, "report slot {slot} out of range");
        self.region
            .word64(REPORTS + 8 * slot)
            .load(Ordering::Relaxed)
    }
}

/// A mapped ring, on either side.
pub struct Ring {
    /// Shared with the [`RingReports`] handed out, which read it after the ring is gone.
    region: Arc<Region>,
    request_capacity: u32,
    answer_capacity: u32,
    /// The client's last request sequence (kept privately: the shared word is only a
    /// message, and the client never trusts what it reads back of its own).
    last_posted: AtomicU32,
}

impl Ring {
    /// Makes a ring of the default capacities (the daemon's side).
    pub fn create() -> Result<Ring, ShmError> {
        Ring::create_with(REQUEST_CAPACITY, ANSWER_CAPACITY)
    }

    /// Makes a ring with request and answer areas of the given sizes (multiples of 8).
    pub fn create_with(request_capacity: u32, answer_capacity: u32) -> Result<Ring, ShmError> {
        check_capacities(request_capacity, answer_capacity)?;
        let len = RING_HEADER_BYTES + request_capacity as usize + answer_capacity as usize;
        let region = Region::create("tessera-ring", len)?;
        let mut head = [0u8; 24];
        head[0..8].copy_from_slice(&RING_MAGIC);
        head[8..12].copy_from_slice(&RING_VERSION.to_le_bytes());
        head[12..16].copy_from_slice(&(RING_HEADER_BYTES as u32).to_le_bytes());
        head[16..20].copy_from_slice(&request_capacity.to_le_bytes());
        head[20..24].copy_from_slice(&answer_capacity.to_le_bytes());
        region.init(&head);
        // The size is fixed before anyone else can open it: no side can cut the other's
        // mapping (a cut would fault it).
        region.seal(SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)?;
        Ok(Ring {
            region: Arc::new(region),
            request_capacity,
            answer_capacity,
            last_posted: AtomicU32::new(0),
        })
    }

    /// Maps, read-write, the ring at `path` (a daemon's `/proc/<pid>/fd/<fd>`: the client's
    /// side).
    pub fn open(path: &Path) -> Result<Ring, ShmError> {
        let mut caps = (0, 0);
        let region = Region::open(path, true, RING_HEADER_BYTES, |head, size| {
            caps = check_header(head, size)?;
            Ok(RING_HEADER_BYTES + caps.0 as usize + caps.1 as usize)
        })?;
        let last = region.word32(REQ_SEQ).load(Ordering::Acquire);
        Ok(Ring {
            region: Arc::new(region),
            request_capacity: caps.0,
            answer_capacity: caps.1,
            last_posted: AtomicU32::new(last),
        })
    }

    /// The maker's descriptor (the client opens it through `/proc`); `None` on the client, or
    /// once the maker closed it.
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.region.fd()
    }

    /// Closes the maker's descriptor once the client has mapped the ring; true if this call
    /// closed it. Call it before handing out [`Ring::reports`]: a ring whose region is shared
    /// keeps its descriptor.
    pub fn close_fd(&mut self) -> bool {
        match Arc::get_mut(&mut self.region) {
            Some(region) if region.fd().is_some() => {
                region.close_fd();
                true
            }
            _ => false,
        }
    }

    /// A handle to the figures the client reports (the daemon's side), readable from any
    /// thread while the ring or the handle lives.
    pub fn reports(&self) -> RingReports {
        RingReports {
            region: self.region.clone(),
        }
    }

    /// Sets figure `slot` (below [`REPORT_SLOTS`]) to `value` (the client's side): a running
    /// total the client keeps, written with one store.
    pub fn report(&self, slot: usize, value: u64) {
        assert!(slot < REPORT_SLOTS, "report slot {slot} out of range");
        self.region
            .word64(REPORTS + 8 * slot)
            .store(value, Ordering::Relaxed);
    }

    /// The largest request the ring carries.
    pub fn request_capacity(&self) -> usize {
        self.request_capacity as usize
    }

    /// The largest answer the ring carries.
    pub fn answer_capacity(&self) -> usize {
        self.answer_capacity as usize
    }

    fn word(&self, offset: usize) -> &AtomicU32 {
        self.region.word32(offset)
    }

    /// Writes `bytes` at `offset` of the region, whatever is there: what a misbehaving
    /// client can do to its own ring, for tests and fuzzing of the daemon's side. The offset
    /// is rounded down to 8 and the bytes cut at the region's end.
    #[doc(hidden)]
    pub fn overwrite(&self, offset: usize, bytes: &[u8]) {
        let len = RING_HEADER_BYTES + self.request_capacity() + self.answer_capacity();
        let at = offset.min(len) & !7;
        let room = len - at;
        // Whole words only, so the write stays inside the region.
        let n = bytes.len().min(room) & !7;
        self.region.copy_in(at, &bytes[..n]);
    }

    /// Offsets of the control words, for [`Ring::overwrite`].
    #[doc(hidden)]
    pub const REQUEST_SEQ_AT: usize = REQ_SEQ;
    #[doc(hidden)]
    pub const REQUEST_LEN_AT: usize = REQ_LEN;

    // ---- the client's side ----

    /// Places a request; `None` if it does not fit (send it on the socket).
    pub fn post(&mut self, body: &[u8]) -> Option<Posted> {
        if body.len() > self.request_capacity() {
            return None;
        }
        let seq = self.last_posted.load(Ordering::Relaxed).wrapping_add(1);
        self.last_posted.store(seq, Ordering::Relaxed);
        self.region.copy_in(RING_HEADER_BYTES, body);
        self.word(REQ_LEN)
            .store(body.len() as u32, Ordering::Relaxed);
        self.word(REQ_SEQ).store(seq, Ordering::Release);
        // Pairs with the daemon's fence in `sleep`: it sees this request, or this sees it
        // asleep.
        fence(Ordering::SeqCst);
        let wake = self.word(DAEMON_AWAKE).load(Ordering::Relaxed) == 0;
        Some(Posted { seq, wake })
    }

    /// Waits for the answer to `seq`: watches for at most `spin`, then sleeps on the futex
    /// for at most `nap`. `None` if no answer came meanwhile (check the daemon is alive, then
    /// wait again).
    pub fn wait(&self, seq: u32, spin: Duration, nap: Duration) -> Option<Place> {
        let answered = || self.word(ANS_SEQ).load(Ordering::Acquire) == seq;
        let start = Instant::now();
        loop {
            if answered() {
                return Some(self.place());
            }
            if start.elapsed() >= spin {
                break;
            }
            // Lets the daemon run when both share a core.
            std::thread::yield_now();
        }
        self.word(CLIENT_ASLEEP).store(1, Ordering::Relaxed);
        // Pairs with the daemon's fence in `answer`: it sees the flag, or this sees the
        // answer.
        fence(Ordering::SeqCst);
        let now = self.word(ANS_SEQ).load(Ordering::Acquire);
        if now != seq {
            let nap = rustix::time::Timespec {
                tv_sec: nap.as_secs() as i64,
                tv_nsec: i64::from(nap.subsec_nanos()),
            };
            // Shared (not private) futex: the word is in memory two processes map. A wake, a
            // timeout, a signal or a changed word all end the wait; the caller looks again.
            let _ = futex::wait(self.word(ANS_SEQ), futex::Flags::empty(), now, Some(&nap));
        }
        self.word(CLIENT_ASLEEP).store(0, Ordering::Relaxed);
        answered().then(|| self.place())
    }

    fn place(&self) -> Place {
        if self.word(ANS_PLACE).load(Ordering::Relaxed) == 0 {
            Place::Ring
        } else {
            Place::Socket
        }
    }

    /// The answer in the ring, borrowed in place until the client's next request (posting
    /// one needs `&mut self`).
    pub fn answer_in_place(&self) -> Result<&[u8], ShmError> {
        let len = self.word(ANS_LEN).load(Ordering::Relaxed);
        if len > self.answer_capacity {
            return Err(ShmError::Garbage(format!(
                "an answer of {len} bytes in an area of {}",
                self.answer_capacity
            )));
        }
        // SAFETY: the daemon writes the answer area only between a request's post and the
        // publication of its answer (which this side saw with Acquire in `wait`); the next
        // post needs `&mut self`, which the returned borrow of `self` prevents while it lives. The daemon is
        // the user's own process (checked by the client at connect).
        Ok(unsafe { self.region.bytes(self.answer_area(), len as usize) })
    }

    /// Copies the answer in the ring into `out`.
    pub fn take_answer(&self, out: &mut Vec<u8>) -> Result<(), ShmError> {
        let len = self.word(ANS_LEN).load(Ordering::Relaxed);
        if len > self.answer_capacity {
            return Err(ShmError::Garbage(format!(
                "an answer of {len} bytes in an area of {}",
                self.answer_capacity
            )));
        }
        self.region.copy_out(self.answer_area(), len as usize, out);
        Ok(())
    }

    fn answer_area(&self) -> usize {
        RING_HEADER_BYTES + self.request_capacity as usize
    }

    // ---- the daemon's side ----

    /// Whether a request newer than `served` waits.
    pub fn pending(&self, served: u32) -> bool {
        self.word(REQ_SEQ).load(Ordering::Acquire) != served
    }

    /// Copies the waiting request, if any, into `out`, with its sequence; the bytes are the
    /// client's and not yet validated. An impossible length is an error (the connection
    /// should end; the sequence is still the one to answer).
    pub fn take_request(
        &self,
        served: u32,
        out: &mut Vec<u8>,
    ) -> Option<(u32, Result<(), ShmError>)> {
        let seq = self.word(REQ_SEQ).load(Ordering::Acquire);
        if seq == served {
            return None;
        }
        // Read once: the client may change it at any moment.
        let len = self.word(REQ_LEN).load(Ordering::Relaxed);
        if len > self.request_capacity {
            let e = ShmError::Garbage(format!(
                "a request of {len} bytes in an area of {}",
                self.request_capacity
            ));
            return Some((seq, Err(e)));
        }
        self.region.copy_out(RING_HEADER_BYTES, len as usize, out);
        Some((seq, Ok(())))
    }

    /// Answers `seq` with the concatenation of `parts`; false (and nothing written) if it
    /// does not fit, for the caller to send it on the socket and call
    /// [`Ring::answered_on_socket`].
    pub fn answer(&self, seq: u32, parts: &[&[u8]]) -> bool {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if len > self.answer_capacity() {
            return false;
        }
        let mut at = self.answer_area();
        for part in parts {
            self.region.copy_bulk_in(at, part);
            at += part.len();
        }
        self.word(ANS_LEN).store(len as u32, Ordering::Relaxed);
        self.word(ANS_PLACE).store(0, Ordering::Relaxed);
        self.publish(seq);
        true
    }

    /// Tells the client that the answer to `seq` was sent on the socket.
    pub fn answered_on_socket(&self, seq: u32) {
        self.word(ANS_PLACE).store(1, Ordering::Relaxed);
        self.publish(seq);
    }

    fn publish(&self, seq: u32) {
        self.word(ANS_SEQ).store(seq, Ordering::Release);
        // Pairs with the client's fence in `wait`.
        fence(Ordering::SeqCst);
        if self.word(CLIENT_ASLEEP).load(Ordering::Relaxed) != 0 {
            let _ = futex::wake(self.word(ANS_SEQ), futex::Flags::empty(), i32::MAX as u32);
        }
    }

    /// Says the daemon watches the ring: the client need not ring it.
    pub fn awake(&self) {
        self.word(DAEMON_AWAKE).store(1, Ordering::Relaxed);
    }

    /// Says the daemon stops watching; returns true (and stays awake) if a request newer
    /// than `served` arrived meanwhile, which the client may not have rung for.
    pub fn sleep(&self, served: u32) -> bool {
        self.word(DAEMON_AWAKE).store(0, Ordering::Relaxed);
        // Pairs with the client's fence in `post`.
        fence(Ordering::SeqCst);
        if self.pending(served) {
            self.awake();
            return true;
        }
        false
    }
}

fn check_capacities(request: u32, answer: u32) -> Result<(), ShmError> {
    for (what, cap) in [("request", request), ("answer", answer)] {
        if cap == 0 || cap > MAX_CAPACITY || !cap.is_multiple_of(8) {
            return Err(ShmError::Layout(format!(
                "a {what} area of {cap} bytes; it must be a multiple of 8 from 8 to {MAX_CAPACITY}"
            )));
        }
    }
    Ok(())
}

/// The capacities of a ring whose header is `head` and region `size` bytes, or why it is
/// not one.
fn check_header(head: &[u8], size: u64) -> Result<(u32, u32), ShmError> {
    let u32_at = |at: usize| u32::from_le_bytes(head[at..at + 4].try_into().expect("4 bytes"));
    if head[0..8] != RING_MAGIC {
        return Err(ShmError::Layout("wrong magic".into()));
    }
    let version = u32_at(8);
    if version != RING_VERSION {
        return Err(ShmError::Layout(format!(
            "ring layout version {version}; this build reads version {RING_VERSION}"
        )));
    }
    if u32_at(12) as usize != RING_HEADER_BYTES {
        return Err(ShmError::Layout(format!(
            "a header of {} bytes; this build reads {RING_HEADER_BYTES}",
            u32_at(12)
        )));
    }
    let (request, answer) = (u32_at(16), u32_at(20));
    check_capacities(request, answer)?;
    let need = RING_HEADER_BYTES as u64 + u64::from(request) + u64::from(answer);
    if need > size {
        return Err(ShmError::Layout(format!(
            "areas of {request} and {answer} bytes do not fit a region of {size}"
        )));
    }
    Ok((request, answer))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    fn proc_path(r: &Ring) -> std::path::PathBuf {
        let fd = r.fd().expect("the maker's ring").as_raw_fd();
        format!("/proc/{}/fd/{}", std::process::id(), fd).into()
    }

    fn pair() -> (Ring, Ring) {
        let daemon = Ring::create_with(64, 128).unwrap();
        let client = Ring::open(&proc_path(&daemon)).unwrap();
        (daemon, client)
    }

    #[test]
    fn the_clients_reports_reach_the_daemon_and_outlive_the_ring() {
        let (mut daemon, client) = pair();
        assert!(daemon.close_fd(), "the first close closes the descriptor");
        assert!(!daemon.close_fd(), "a second close has nothing to close");
        let reports = daemon.reports();
        assert_eq!(reports.get(0), 0);
        client.report(0, 4096);
        client.report(REPORT_SLOTS - 1, 7);
        assert_eq!(reports.get(0), 4096);
        assert_eq!(reports.get(REPORT_SLOTS - 1), 7);
        drop(daemon);
        drop(client);
        assert_eq!(reports.get(0), 4096, "the handle keeps the mapping");
    }

    #[test]
    fn a_ring_with_reports_handed_out_keeps_its_descriptor() {
        let (mut daemon, _client) = pair();
        let _reports = daemon.reports();
        assert!(!daemon.close_fd());
        assert!(daemon.fd().is_some());
    }

    #[test]
    fn a_request_and_its_answer_cross_the_ring() {
        let (daemon, mut client) = pair();
        let mut served = 0;
        assert!(!daemon.pending(served));
        let posted = client.post(b"hello, daemon").unwrap();
        assert!(posted.wake, "a daemon that never watched must be rung");
        let mut req = Vec::new();
        let (seq, taken) = daemon.take_request(served, &mut req).unwrap();
        taken.unwrap();
        assert_eq!((seq, req.as_slice()), (posted.seq, &b"hello, daemon"[..]));
        served = seq;
        assert!(daemon.take_request(served, &mut req).is_none());
        assert_eq!(client.wait(seq, Duration::ZERO, Duration::ZERO), None);
        assert!(daemon.answer(seq, &[b"hi ", b"client"]));
        assert_eq!(client.wait(seq, SPIN, Duration::ZERO), Some(Place::Ring));
        let mut ans = Vec::new();
        client.take_answer(&mut ans).unwrap();
        assert_eq!(ans, b"hi client");
        daemon.awake();
        let next = client.post(&[9; 64]).unwrap();
        assert!(!next.wake, "an awake daemon needs no ring");
        assert_eq!(next.seq, seq + 1);
        assert!(client.post(&[9; 65]).is_none(), "too large for the area");
        assert!(!daemon.answer(next.seq, &[&[0; 129]]));
        daemon.answered_on_socket(next.seq);
        assert_eq!(
            client.wait(next.seq, SPIN, Duration::ZERO),
            Some(Place::Socket)
        );
    }

    #[test]
    fn a_large_answer_in_parts_is_read_in_place() {
        let daemon = Ring::create_with(64, 4 << 20).unwrap();
        let mut client = Ring::open(&proc_path(&daemon)).unwrap();
        let posted = client.post(b"read").unwrap();
        let mut req = Vec::new();
        let (seq, taken) = daemon.take_request(0, &mut req).unwrap();
        taken.unwrap();
        let bulk: Vec<u8> = (0..3_000_001u32).map(|i| (i % 251) as u8).collect();
        // Parts of odd lengths: each lands right after the last.
        assert!(daemon.answer(seq, &[b"head", &bulk[..7], &bulk[7..]]));
        assert_eq!(client.wait(posted.seq, SPIN, SPIN), Some(Place::Ring));
        let got = client.answer_in_place().unwrap();
        assert_eq!(&got[..4], b"head");
        assert!(got[4..] == bulk[..], "the bulk bytes differ");
        assert!(
            !daemon.answer(seq, &[&vec![0u8; (4 << 20) + 1]]),
            "larger than the area"
        );
    }

    #[test]
    fn a_sleeping_daemon_sees_a_request_posted_while_it_fell_asleep() {
        let (daemon, mut client) = pair();
        daemon.awake();
        let posted = client.post(b"x").unwrap();
        assert!(!posted.wake);
        // The client did not ring: the daemon's last look before sleeping must catch it.
        assert!(daemon.sleep(0));
        let posted = client.post(b"y").unwrap();
        assert!(!posted.wake, "sleep found work and stayed awake");
        assert!(
            !daemon.sleep(posted.seq),
            "nothing new past the last request"
        );
        assert!(client.post(b"z").unwrap().wake);
    }

    #[test]
    fn a_client_sleeping_on_the_futex_is_woken_by_the_answer() {
        let (daemon, mut client) = pair();
        let posted = client.post(b"q").unwrap();
        let t = std::thread::spawn(move || {
            // Long naps: only the wake (or a spurious return) ends them early.
            let start = Instant::now();
            loop {
                if let Some(p) = client.wait(posted.seq, Duration::ZERO, Duration::from_secs(5)) {
                    return (p, start.elapsed());
                }
            }
        });
        let mut req = Vec::new();
        let seq = loop {
            if let Some((seq, taken)) = daemon.take_request(0, &mut req) {
                taken.unwrap();
                break seq;
            }
            std::thread::yield_now();
        };
        // Wait for the client to say it sleeps, so the wake path is the one tested.
        while daemon.word(CLIENT_ASLEEP).load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        assert!(daemon.answer(seq, &[b"a"]));
        let (place, took) = t.join().unwrap();
        assert_eq!(place, Place::Ring);
        assert!(took < Duration::from_secs(4), "the wake was lost: {took:?}");
    }

    #[test]
    fn garbage_lengths_are_refused_not_followed() {
        let (daemon, mut client) = pair();
        client.post(b"ok").unwrap();
        client.word(REQ_LEN).store(u32::MAX, Ordering::SeqCst);
        let mut req = Vec::new();
        assert!(matches!(
            daemon.take_request(0, &mut req),
            Some((1, Err(ShmError::Garbage(_))))
        ));
        daemon.word(ANS_LEN).store(1 << 30, Ordering::SeqCst);
        assert!(client.take_answer(&mut req).is_err());
    }

    #[test]
    fn neither_side_can_cut_or_grow_the_region() {
        let daemon = Ring::create().unwrap();
        let path = proc_path(&daemon);
        let rw =
            rustix::fs::open(&path, rustix::fs::OFlags::RDWR, rustix::fs::Mode::empty()).unwrap();
        assert!(
            rustix::fs::ftruncate(&rw, 8).is_err(),
            "the ring could be cut"
        );
        assert!(
            rustix::fs::ftruncate(&rw, 1 << 30).is_err(),
            "the ring could grow"
        );
    }

    #[test]
    fn regions_that_are_not_rings_are_refused() {
        let board = crate::Board::create(16).unwrap();
        let fd = board.fd().unwrap().as_raw_fd();
        let path = format!("/proc/{}/fd/{}", std::process::id(), fd);
        assert!(Ring::open(Path::new(&path)).is_err());
        let mut head = vec![0u8; RING_HEADER_BYTES];
        head[0..8].copy_from_slice(&RING_MAGIC);
        head[8..12].copy_from_slice(&RING_VERSION.to_le_bytes());
        head[12..16].copy_from_slice(&(RING_HEADER_BYTES as u32).to_le_bytes());
        head[16..20].copy_from_slice(&64u32.to_le_bytes());
        head[20..24].copy_from_slice(&64u32.to_le_bytes());
        assert_eq!(check_header(&head, 4096 + 128).unwrap(), (64, 64));
        assert!(
            check_header(&head, 4096 + 127).is_err(),
            "areas past the end"
        );
        head[16..20].copy_from_slice(&63u32.to_le_bytes());
        assert!(check_header(&head, 1 << 20).is_err(), "not a multiple of 8");
        head[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(check_header(&head, u64::MAX).is_err(), "too large");
        head[8..12].copy_from_slice(&2u32.to_le_bytes());
        assert!(check_header(&head, u64::MAX).is_err(), "a later version");
        assert!(Ring::create_with(0, 8).is_err());
    }
}
