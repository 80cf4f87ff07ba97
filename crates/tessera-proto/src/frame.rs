//! Framing, encoding and authentication of messages.
//!
//! A frame is a 4-byte big-endian length followed by that many bytes (the layout of
//! tokio-util's `LengthDelimitedCodec`, which the daemon uses; blocking clients use
//! [`write_frame`]/[`read_frame`]). Frames above the configured maximum are refused before
//! their body is read, so a hostile length cannot make anyone allocate.
//!
//! Between daemons, frames are authenticated differently: see [`crate::peer_auth`].
//!
//! **Bulk data travels as a raw trailer.** An answer that carries file bytes (a `Data { len }`
//! reply) is followed, in the same frame, by exactly `len` raw bytes instead of embedding them
//! in the encoded message: senders write header, message and data with one vectored write, and
//! receivers slice the data out of the frame without copying it again.

use serde::{Serialize, de::DeserializeOwned};
use std::io::{self, Read, Write};
use tessera_core::{Errno, FsError};

/// Length of the frame header.
pub const HEADER_LEN: usize = 4;

/// Serializes a message (postcard).
pub fn encode<T: Serialize>(msg: &T) -> Vec<u8> {
    postcard::to_stdvec(msg).expect("in-memory serialization of plain data cannot fail")
}

/// Deserializes a message; malformed bytes become `EPROTO`.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, FsError> {
    postcard::from_bytes(bytes)
        .map_err(|e| FsError::new(Errno::Proto, format!("malformed message: {e}")))
}

/// Writes one frame (header and body in a single write where possible).
pub fn write_frame(w: &mut impl Write, body: &[u8]) -> io::Result<()> {
    let len = u32::try_from(body.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "frame larger than 4 GiB"))?;
    let mut buf = Vec::with_capacity(HEADER_LEN + body.len());
    buf.extend_from_slice(&len.to_be_bytes());
    buf.extend_from_slice(body);
    w.write_all(&buf)
}

/// Reads one frame, refusing bodies longer than `max`.
pub fn read_frame(r: &mut impl Read, max: usize) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    read_frame_into(r, max, &mut body)?;
    Ok(body)
}

/// Splits a frame body into its message and the raw trailer that follows it.
pub fn split_message<T: DeserializeOwned>(body: &[u8]) -> Result<(T, &[u8]), FsError> {
    postcard::take_from_bytes(body)
        .map_err(|e| FsError::new(Errno::Proto, format!("malformed message: {e}")))
}

/// Reads one frame into `buf` (reused across calls), refusing bodies longer than `max`.
pub fn read_frame_into(r: &mut impl Read, max: usize, buf: &mut Vec<u8>) -> io::Result<()> {
    let mut h = [0u8; HEADER_LEN];
    r.read_exact(&mut h)?;
    let len = u32::from_be_bytes(h) as usize;
    if len > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("frame of {len} bytes exceeds the maximum of {max}"),
        ));
    }
    buf.resize(len, 0);
    r.read_exact(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_oversize_is_refused() {
        let mut buf = Vec::new();
        write_frame(&mut buf, b"hello").unwrap();
        assert_eq!(read_frame(&mut &buf[..], 16).unwrap(), b"hello");
        let err = read_frame(&mut &buf[..], 4).unwrap_err();
        assert!(err.to_string().contains("exceeds the maximum"), "{err}");
    }

    #[test]
    fn messages_carry_raw_trailers() {
        let answer: crate::Answer<crate::Data> = Ok(crate::Data { len: 3 });
        let mut body = encode(&answer);
        body.extend_from_slice(b"xyz");
        let (m, rest) = crate::decode_answer::<crate::Data>(&body).unwrap();
        assert_eq!(m, crate::Data { len: 3 });
        assert_eq!(rest, b"xyz");
        let mut buf = Vec::new();
        let mut wire = Vec::new();
        write_frame(&mut wire, b"abc").unwrap();
        read_frame_into(&mut &wire[..], 10, &mut buf).unwrap();
        assert_eq!(buf, b"abc");
    }

    #[test]
    fn malformed_messages_are_eproto() {
        let e = decode::<crate::Request>(&[0xff, 0xff, 0xff]).unwrap_err();
        assert_eq!(e.errno, Errno::Proto);
    }
}
