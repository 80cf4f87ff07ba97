//! The plain frame codec of the client socket and of the peer handshake: a 4-byte big-endian
//! length, then the body (tokio-util's `LengthDelimitedCodec`), which also reports a stream
//! cut inside a frame.
//!
//! `LengthDelimitedCodec` consumes a frame's header before its body has arrived; if the
//! stream then ends, its buffer is empty and its end-of-stream check sees nothing left, so a
//! connection cut right after a header ended as if cleanly. This codec remembers that a frame
//! is under way and reports that end as `UnexpectedEof`.

use bytes::{Bytes, BytesMut};
use tokio_util::codec::{Decoder, Encoder, LengthDelimitedCodec};

/// Length-delimited frames of at most `max_frame` bytes; an end of stream inside a frame is
/// an error.
#[derive(Debug)]
pub struct FrameCodec {
    inner: LengthDelimitedCodec,
    /// A header was consumed and its body is not complete yet.
    in_frame: bool,
}

impl FrameCodec {
    pub fn new(max_frame: u32) -> Self {
        FrameCodec {
            inner: LengthDelimitedCodec::builder()
                .max_frame_length(max_frame as usize)
                .new_codec(),
            in_frame: false,
        }
    }
}

impl Decoder for FrameCodec {
    type Item = BytesMut;
    type Error = std::io::Error;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<BytesMut>, Self::Error> {
        let before = src.len();
        let out = self.inner.decode(src)?;
        // The inner codec consumes bytes without returning a frame only when it takes a
        // header whose body is still to come; it stays inside that frame until it returns it.
        self.in_frame = match out {
            Some(_) => false,
            None => self.in_frame || src.len() < before,
        };
        Ok(out)
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<BytesMut>, Self::Error> {
        match self.decode(buf)? {
            Some(frame) => Ok(Some(frame)),
            None if self.in_frame || !buf.is_empty() => Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the stream ended inside a frame",
            )),
            None => Ok(None),
        }
    }
}

impl Encoder<Bytes> for FrameCodec {
    type Error = std::io::Error;

    fn encode(&mut self, item: Bytes, dst: &mut BytesMut) -> Result<(), Self::Error> {
        self.inner.encode(item, dst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eof_of(stream: &[u8]) -> Result<Vec<Vec<u8>>, std::io::Error> {
        let mut codec = FrameCodec::new(1 << 20);
        let mut buf = BytesMut::new();
        let mut frames = Vec::new();
        // Byte by byte, as the slowest socket would deliver them.
        for b in stream {
            buf.extend_from_slice(&[*b]);
            while let Some(f) = codec.decode(&mut buf)? {
                frames.push(f.to_vec());
            }
        }
        while let Some(f) = codec.decode_eof(&mut buf)? {
            frames.push(f.to_vec());
        }
        Ok(frames)
    }

    #[test]
    fn whole_frames_end_cleanly() {
        let got = eof_of(&[0, 0, 0, 2, b'h', b'i', 0, 0, 0, 0]).unwrap();
        assert_eq!(got, vec![b"hi".to_vec(), Vec::new()]);
    }

    #[test]
    fn an_end_right_after_a_header_is_reported() {
        let e = eof_of(&[0, 0, 0, 1, b'x', 0, 0, 0, 5]).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn an_end_inside_a_body_or_a_header_is_reported() {
        for cut in [&[0u8, 0, 0, 3, b'a'][..], &[0, 0][..]] {
            let e = eof_of(cut).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof);
        }
    }
}
