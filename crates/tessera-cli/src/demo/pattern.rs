//! The demo's data: byte `off` of the checkpoint is a fixed function of `off`, so any rank
//! can write or verify any piece without being told what others wrote.

use tessera_core::placement::mix64;

/// Byte at logical offset `off` of the demo's checkpoint file.
pub fn pattern_at(off: u64) -> u8 {
    (mix64(off >> 3) >> ((off & 7) * 8)) as u8
}

/// Fills `buf` with the pattern from logical offset `off` (a word at a time).
pub fn fill_pattern(buf: &mut [u8], off: u64) {
    let mut i = 0usize;
    // Unaligned head, byte by byte.
    while i < buf.len() && (off + i as u64) & 7 != 0 {
        buf[i] = pattern_at(off + i as u64);
        i += 1;
    }
    // Whole words: the 8 bytes of word w are mix64(w) in little-endian order.
    while i + 8 <= buf.len() {
        let w = (off + i as u64) >> 3;
        buf[i..i + 8].copy_from_slice(&mix64(w).to_le_bytes());
        i += 8;
    }
    while i < buf.len() {
        buf[i] = pattern_at(off + i as u64);
        i += 1;
    }
}

/// The first offset in `buf` (holding logical bytes from `off`) that differs from the pattern.
pub fn first_mismatch(buf: &[u8], off: u64) -> Option<usize> {
    let mut expected = vec![0u8; buf.len().min(1 << 20)];
    let mut at = 0;
    while at < buf.len() {
        let n = (buf.len() - at).min(expected.len());
        fill_pattern(&mut expected[..n], off + at as u64);
        if buf[at..at + n] != expected[..n] {
            return (at..at + n).find(|k| buf[*k] != expected[*k - at]);
        }
        at += n;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_fill_equals_bytewise_pattern() {
        for off in [0u64, 1, 7, 8, 13, 1000] {
            let mut buf = vec![0u8; 77];
            fill_pattern(&mut buf, off);
            let want: Vec<u8> = (0..77).map(|i| pattern_at(off + i)).collect();
            assert_eq!(buf, want, "offset {off}");
            assert_eq!(first_mismatch(&buf, off), None);
            buf[40] ^= 1;
            assert_eq!(first_mismatch(&buf, off), Some(40));
        }
    }
}
