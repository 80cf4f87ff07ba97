//! Damage to a byte stream or file: flipped, cut, inserted and removed bytes. Targets judge
//! what survived by content (a byte flipped twice is intact again), never by bookkeeping.

use arbitrary::Arbitrary;
use std::num::NonZeroU8;

/// One change to the bytes; positions wrap around the current length.
#[derive(Arbitrary, Clone, Debug)]
pub enum Damage {
    Flip { at: u32, mask: NonZeroU8 },
    Cut { at: u32 },
    Insert { at: u32, bytes: Vec<u8> },
    Remove { at: u32, len: u16 },
}

/// A reader's size limit, often right at the size of one of the frames it reads (where an
/// off-by-one would show).
#[derive(Arbitrary, Clone, Copy, Debug)]
pub enum Limit {
    Any(u16),
    NearFrame { frame: u8, delta: i8 },
}

impl Limit {
    /// The limit in bytes, for frames of these body sizes.
    pub fn bytes(self, bodies: &[Vec<u8>]) -> usize {
        match self {
            Limit::Any(n) => n as usize,
            Limit::NearFrame { frame, delta } => match bodies.len() {
                0 => 0,
                n => bodies[frame as usize % n]
                    .len()
                    .saturating_add_signed(delta as isize % 3),
            },
        }
    }
}

/// The most changes applied from one input (more add nothing but time).
pub const MAX_DAMAGE: usize = 8;

/// Applies each change in turn (at most [`MAX_DAMAGE`]) to `bytes`.
pub fn apply_all(bytes: &mut Vec<u8>, damage: &[Damage]) {
    for d in damage.iter().take(MAX_DAMAGE) {
        apply(bytes, d);
    }
}

/// Applies one change.
pub fn apply(bytes: &mut Vec<u8>, d: &Damage) {
    let len = bytes.len();
    match d {
        Damage::Flip { at, mask } => {
            if len > 0 {
                bytes[*at as usize % len] ^= mask.get();
            }
        }
        Damage::Cut { at } => bytes.truncate(*at as usize % (len + 1)),
        Damage::Insert { at, bytes: new } => {
            let at = *at as usize % (len + 1);
            bytes.splice(at..at, new.iter().copied());
        }
        Damage::Remove { at, len: n } => {
            if len > 0 {
                let at = *at as usize % len;
                bytes.drain(at..(at + *n as usize).min(len));
            }
        }
    }
}

/// Applies each change in place, keeping the length: a cut zeroes the rest, an insertion
/// overwrites, a removal zeroes (blocks lost or overwritten, a file's size unchanged).
pub fn overwrite_all(bytes: &mut [u8], damage: &[Damage]) {
    let len = bytes.len();
    if len == 0 {
        return;
    }
    for d in damage.iter().take(MAX_DAMAGE) {
        match d {
            Damage::Flip { at, mask } => bytes[*at as usize % len] ^= mask.get(),
            Damage::Cut { at } => bytes[*at as usize % len..].fill(0),
            Damage::Insert { at, bytes: new } => {
                let at = *at as usize % len;
                let n = new.len().min(len - at);
                bytes[at..at + n].copy_from_slice(&new[..n]);
            }
            Damage::Remove { at, len: n } => {
                let at = *at as usize % len;
                bytes[at..(at + *n as usize).min(len)].fill(0);
            }
        }
    }
}

/// `original` after `damage`.
pub fn damaged(original: &[u8], damage: &[Damage]) -> Vec<u8> {
    let mut b = original.to_vec();
    apply_all(&mut b, damage);
    b
}

/// How many leading bytes two byte strings share: what a reader of `now` sees of
/// `original` before the first damaged byte.
pub fn common_prefix(original: &[u8], now: &[u8]) -> usize {
    original.iter().zip(now).take_while(|(a, b)| a == b).count()
}

/// Every position at which `needle` occurs in `hay`.
pub fn occurrences(hay: &[u8], needle: &[u8]) -> Vec<usize> {
    if needle.is_empty() || needle.len() > hay.len() {
        return Vec::new();
    }
    hay.windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle)
        .map(|(i, _)| i)
        .collect()
}
