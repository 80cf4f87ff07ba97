//! The request ring, as the daemon reads what a client wrote into it.
//!
//! A client may write anything anywhere in its ring, header and control words included. After
//! arbitrary writes (mirrored in a plain model of the region's bytes), the daemon's side must
//! see a request exactly when the request sequence differs from the one it served, copy out
//! exactly the bytes the model holds and never more than its own capacity (whatever the
//! header now says), refuse an impossible length, decode the copy as a request or refuse it
//! without panicking, and answer so that the client's side reads the answer back whole.
//!
//! A region offered as a ring with an arbitrary header is mapped only when its magic,
//! version, header size and capacities are this build's and fit the region.

use arbitrary::{Arbitrary, Unstructured};
use rustix::fs::{MemfdFlags, SealFlags};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Duration;
use tessera_proto::{Request, frame};
use tessera_shm::{Place, RING_HEADER_BYTES, RING_MAGIC, RING_VERSION, Ring};

const REQUEST_CAPACITY: u32 = 256;
const ANSWER_CAPACITY: u32 = 256;

/// A request length a client writes: small, around the capacity, or anything.
#[derive(Arbitrary, Debug)]
enum Len {
    Small(u8),
    NearCapacity(i8),
    Any(u32),
}

impl Len {
    fn value(&self) -> u32 {
        match *self {
            Len::Small(n) => u32::from(n),
            Len::NearCapacity(d) => REQUEST_CAPACITY.saturating_add_signed(i32::from(d)),
            Len::Any(n) => n,
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Input {
    /// A client's writes into its ring (offset, bytes), then the daemon's look.
    Scribble {
        served: u32,
        /// A genuine request placed first, as the client library would.
        posted: Option<Vec<u8>>,
        writes: Vec<(u16, Vec<u8>)>,
        /// A request sequence and length written last, over whatever was there.
        control: Option<(u32, Len)>,
        answer: Vec<u8>,
    },
    /// A region of `size` bytes starting with `head`, offered as a ring.
    Header { head: Vec<u8>, size: u16 },
}

/// The structured input `data` stands for.
pub fn describe(data: &[u8]) -> String {
    format!("{:#?}", Input::arbitrary_take_rest(Unstructured::new(data)))
}

pub fn run(data: &[u8]) {
    let Ok(input) = Input::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    match input {
        Input::Scribble {
            served,
            posted,
            writes,
            control,
            answer,
        } => {
            let control = control.map(|(seq, len)| (seq, len.value()));
            scribble(served, posted, &writes, control, &answer)
        }
        Input::Header { head, size } => header(&head, size as u64),
    }
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

fn scribble(
    served: u32,
    posted: Option<Vec<u8>>,
    writes: &[(u16, Vec<u8>)],
    control: Option<(u32, u32)>,
    answer: &[u8],
) {
    let daemon = Ring::create_with(REQUEST_CAPACITY, ANSWER_CAPACITY).expect("make a ring");
    let fd = daemon.fd().expect("the maker's descriptor").as_raw_fd();
    let path = format!("/proc/{}/fd/{fd}", std::process::id());
    let mut client = Ring::open(Path::new(&path)).expect("map the ring");
    let len = RING_HEADER_BYTES + (REQUEST_CAPACITY + ANSWER_CAPACITY) as usize;
    // The model: the region's bytes as written.
    let mut model = vec![0u8; len];
    model[0..8].copy_from_slice(&RING_MAGIC);
    model[8..12].copy_from_slice(&RING_VERSION.to_le_bytes());
    model[12..16].copy_from_slice(&(RING_HEADER_BYTES as u32).to_le_bytes());
    model[16..20].copy_from_slice(&REQUEST_CAPACITY.to_le_bytes());
    model[20..24].copy_from_slice(&ANSWER_CAPACITY.to_le_bytes());
    if let Some(body) = posted.filter(|b| b.len() <= REQUEST_CAPACITY as usize) {
        let p = client.post(&body).expect("it fits");
        let at = RING_HEADER_BYTES;
        model[at..at + body.len()].copy_from_slice(&body);
        let tail = body.len().next_multiple_of(8);
        model[at + body.len()..at + tail].fill(0);
        model[64..68].copy_from_slice(&p.seq.to_le_bytes());
        model[68..72].copy_from_slice(&(body.len() as u32).to_le_bytes());
    }
    for (offset, bytes) in writes {
        // Offset 0..len over the u16 range, the way `overwrite` rounds it.
        let offset = (*offset as usize * len) >> 16;
        client.overwrite(offset, bytes);
        let at = offset.min(len) & !7;
        let n = bytes.len().min(len - at) & !7;
        model[at..at + n].copy_from_slice(&bytes[..n]);
    }
    if let Some((seq, len)) = control {
        let mut word = seq.to_le_bytes().to_vec();
        word.extend_from_slice(&len.to_le_bytes());
        client.overwrite(Ring::REQUEST_SEQ_AT, &word);
        model[64..72].copy_from_slice(&word);
    }
    let seq = u32_at(&model, 64);
    let want_len = u32_at(&model, 68);
    let mut copied = vec![0xAA; 3];
    let taken = daemon.take_request(served, &mut copied);
    assert_eq!(
        taken.is_some(),
        seq != served,
        "a request seen iff the sequence moved"
    );
    let Some((got_seq, result)) = taken else {
        return;
    };
    assert_eq!(got_seq, seq);
    match result {
        Ok(()) => {
            assert!(want_len <= REQUEST_CAPACITY, "took a length past the area");
            let at = RING_HEADER_BYTES;
            assert_eq!(
                copied,
                &model[at..at + want_len as usize],
                "copied other bytes"
            );
            // Whatever the bytes, decoding answers or refuses; it never panics.
            let _ = frame::decode::<Request>(&copied);
        }
        Err(_) => assert!(want_len > REQUEST_CAPACITY, "refused a length that fits"),
    }
    let fits = answer.len() <= ANSWER_CAPACITY as usize;
    assert_eq!(daemon.answer(seq, &[answer]), fits);
    if fits {
        assert_eq!(
            client.wait(seq, Duration::ZERO, Duration::ZERO),
            Some(Place::Ring)
        );
        let mut back = Vec::new();
        client
            .take_answer(&mut back)
            .expect("an answer the daemon wrote");
        assert_eq!(back, answer);
    }
}

fn header(head: &[u8], size: u64) {
    let fd = rustix::fs::memfd_create("fuzz-ring", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)
        .expect("memfd");
    let mut file = std::fs::File::from(fd);
    file.write_all(head).expect("write the header");
    file.set_len(size).expect("size the region");
    rustix::fs::fcntl_add_seals(&file, SealFlags::SHRINK | SealFlags::GROW).expect("seal");
    let path = format!("/proc/{}/fd/{}", std::process::id(), file.as_raw_fd());
    let mut region = head.to_vec();
    region.resize(size as usize, 0);
    let opened = Ring::open(Path::new(&path));
    let valid = region.len() >= RING_HEADER_BYTES && {
        let (req, ans) = (u32_at(&region, 16), u32_at(&region, 20));
        let ok_cap = |c: u32| c > 0 && c <= 64 << 20 && c.is_multiple_of(8);
        region[0..8] == RING_MAGIC
            && u32_at(&region, 8) == RING_VERSION
            && u32_at(&region, 12) as usize == RING_HEADER_BYTES
            && ok_cap(req)
            && ok_cap(ans)
            && RING_HEADER_BYTES as u64 + u64::from(req) + u64::from(ans) <= size
    };
    assert_eq!(opened.is_ok(), valid, "{:?}", opened.err());
    if let Ok(ring) = opened {
        assert_eq!(ring.request_capacity() as u32, u32_at(&region, 16));
    }
}
