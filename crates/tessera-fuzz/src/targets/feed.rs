//! Feeding a decoder as a socket would: the bytes arrive in chunks of arbitrary sizes.

use bytes::BytesMut;
use tokio_util::codec::Decoder;

/// What a decoder made of a stream.
pub struct Fed {
    /// The frames decoded, in order.
    pub frames: Vec<Vec<u8>>,
    /// Whether the decoder refused the stream (it stops there, as a connection would).
    pub refused: bool,
    /// The bytes left in its buffer at the end.
    pub left: BytesMut,
}

/// Feeds `bytes` to `codec` in chunks whose sizes `chunks` gives (cycled; all at once if it
/// is empty), decoding every frame as soon as it is complete.
pub fn feed<D: Decoder>(codec: &mut D, bytes: &[u8], chunks: &[u8]) -> Fed
where
    D::Item: AsRef<[u8]>,
{
    let mut src = BytesMut::new();
    let mut frames = Vec::new();
    let mut sizes = chunks.iter().map(|c| *c as usize + 1).cycle();
    let mut at = 0;
    while at < bytes.len() {
        let n = sizes.next().unwrap_or(bytes.len());
        let to = (at + n).min(bytes.len());
        src.extend_from_slice(&bytes[at..to]);
        at = to;
        loop {
            match codec.decode(&mut src) {
                Ok(Some(f)) => frames.push(f.as_ref().to_vec()),
                Ok(None) => break,
                Err(_) => {
                    return Fed {
                        frames,
                        refused: true,
                        left: src,
                    };
                }
            }
        }
    }
    Fed {
        frames,
        refused: false,
        left: src,
    }
}
