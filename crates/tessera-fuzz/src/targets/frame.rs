//! Frame decoding: what a daemon or a client reads from a socket.
//!
//! A byte stream is read as frames by the blocking readers (`read_frame`, `read_frame_into`)
//! and by the daemon's codec fed in arbitrary chunks; all three must agree with a model of
//! the framing (a 4-byte big-endian length, refused above the maximum before the body is
//! read). A frame body is decoded as every message type: whatever decodes must encode to a
//! message that decodes to itself, and split trailers must be what follows the message.

use super::damage::Limit;
use super::feed::feed;
use arbitrary::{Arbitrary, Unstructured};
use serde::{Serialize, de::DeserializeOwned};
use std::fmt::Debug;
use tessera_core::locks::HeldLock;
use tessera_proto::{calls, frame, peer_auth};
use tokio_util::codec::Decoder;

#[derive(Arbitrary, Debug)]
enum Input {
    /// Arbitrary bytes on a socket.
    Stream {
        max: u16,
        chunks: Vec<u8>,
        bytes: Vec<u8>,
    },
    /// Well-formed frames, the stream cut anywhere.
    Frames {
        max: Limit,
        chunks: Vec<u8>,
        bodies: Vec<Vec<u8>>,
        cut: Option<u16>,
    },
    /// A frame body.
    Message(Vec<u8>),
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
        Input::Stream { max, chunks, bytes } => stream(&bytes, max as usize, &chunks),
        Input::Frames {
            max,
            chunks,
            bodies,
            cut,
        } => {
            let mut bytes = Vec::new();
            for b in &bodies {
                frame::write_frame(&mut bytes, b).expect("writing to memory");
            }
            if let Some(cut) = cut {
                bytes.truncate(cut as usize);
            }
            stream(&bytes, max.bytes(&bodies), &chunks);
        }
        Input::Message(body) => messages(&body),
    }
}

/// How a stream of frames ends.
#[derive(Debug, PartialEq)]
enum End {
    /// Cleanly between frames, or inside one (`leftover` bytes of it).
    Eof { leftover: usize },
    /// At a frame announcing more than the maximum.
    TooBig,
}

/// The framing, simply: the frames of `bytes` and how the stream ends.
fn model(bytes: &[u8], max: usize) -> (Vec<&[u8]>, End) {
    let mut frames = Vec::new();
    let mut at = 0;
    loop {
        let rest = &bytes[at..];
        if rest.len() < frame::HEADER_LEN {
            return (
                frames,
                End::Eof {
                    leftover: rest.len(),
                },
            );
        }
        let len = u32::from_be_bytes(rest[..4].try_into().expect("4 bytes")) as usize;
        if len > max {
            return (frames, End::TooBig);
        }
        if rest.len() < 4 + len {
            return (
                frames,
                End::Eof {
                    leftover: rest.len(),
                },
            );
        }
        frames.push(&rest[4..4 + len]);
        at += 4 + len;
    }
}

fn stream(bytes: &[u8], max: usize, chunks: &[u8]) {
    let (want, end) = model(bytes, max);

    // The blocking readers.
    let mut r = bytes;
    let mut got = Vec::new();
    let err = loop {
        match frame::read_frame(&mut r, max) {
            Ok(f) => got.push(f),
            Err(e) => break e,
        }
    };
    assert_eq!(got, want, "read_frame");
    match end {
        End::TooBig => assert_eq!(err.kind(), std::io::ErrorKind::InvalidData, "{err}"),
        End::Eof { .. } => assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof, "{err}"),
    }
    let mut r = bytes;
    let mut buf = Vec::new();
    for (i, w) in want.iter().enumerate() {
        frame::read_frame_into(&mut r, max, &mut buf)
            .unwrap_or_else(|e| panic!("read_frame_into, frame {i}: {e}"));
        assert_eq!(&buf[..], *w, "read_frame_into, frame {i}");
    }
    assert!(frame::read_frame_into(&mut r, max, &mut buf).is_err());

    // The daemon's codec, fed as a socket would (in chunks).
    let mut codec = tessera_daemon::peer::codec(max as u32);
    let mut fed = feed(&mut codec, bytes, chunks);
    assert_eq!(fed.frames, want, "the daemon's codec");
    match end {
        End::TooBig => assert!(fed.refused, "an oversized frame was not refused"),
        End::Eof { leftover } => {
            assert!(!fed.refused, "a stream of valid frames was refused");
            let at_eof = codec.decode_eof(&mut fed.left);
            assert_eq!(
                at_eof.is_err(),
                leftover > 0,
                "end of stream with {leftover} bytes left: {at_eof:?}"
            );
        }
    }
}

/// Decodes `body` as `T` both ways a receiver does; what decodes must survive re-encoding.
fn message<T: Serialize + DeserializeOwned + PartialEq + Debug>(body: &[u8]) {
    let whole = frame::decode::<T>(body);
    let split = frame::split_message::<T>(body);
    match (&whole, &split) {
        (Ok(w), Ok((s, rest))) => {
            assert_eq!(w, s);
            assert!(body.ends_with(rest), "the trailer is the end of the body");
            let again = frame::encode(w);
            assert_eq!(
                &frame::decode::<T>(&again).expect("a re-encoded message decodes"),
                w
            );
        }
        (Err(_), Err(_)) => {}
        _ => panic!("decode and split_message disagree: {whole:?} vs {split:?}"),
    }
}

/// Decodes `body` as an answer of type `T` with its trailer.
fn answer<T: Serialize + DeserializeOwned + PartialEq + Debug>(body: &[u8]) {
    message::<calls::Answer<T>>(body);
    if let Ok((_, rest)) = calls::decode_answer::<T>(body) {
        assert!(body.ends_with(rest));
    }
}

fn messages(body: &[u8]) {
    message::<calls::Request>(body);
    message::<calls::PeerRequest>(body);
    message::<peer_auth::Challenge>(body);
    message::<peer_auth::Hello>(body);
    message::<peer_auth::Welcome>(body);
    answer::<()>(body);
    answer::<bool>(body);
    answer::<u32>(body);
    answer::<u64>(body);
    answer::<String>(body);
    answer::<calls::Bound>(body);
    answer::<calls::Opened>(body);
    answer::<calls::Flushed>(body);
    answer::<calls::Found>(body);
    answer::<calls::Created>(body);
    answer::<calls::Stripe>(body);
    answer::<tessera_proto::Attr>(body);
    answer::<tessera_proto::Owners>(body);
    answer::<tessera_proto::NodeStatus>(body);
    answer::<Vec<tessera_proto::DirEntry>>(body);
    answer::<tessera_proto::OwnedPage>(body);
    answer::<Option<tessera_proto::Dentry>>(body);
    answer::<Option<HeldLock>>(body);
    if let Ok((data, trailer)) = calls::decode_answer::<calls::Data>(body) {
        let checked = calls::check_data(&data, trailer);
        assert_eq!(checked.is_ok(), data.len == trailer.len() as u64);
    }
}
