//! Block checksums of a data log: the `.sums` file kept beside it.
//!
//! ```text
//! header (16 B)  magic "TSXS" | version u16 | block log2 u8 | 0 u8 | 0 u32 | crc32c u32 of the first 12
//! slot k (8 B)   crc32c u32 of the first `len` bytes of block k | len u32     (at 16 + 8k)
//! ```
//!
//! Block `k` is the data log's bytes `[k * B, (k + 1) * B)` with `B = 2^log2` (16 KiB). A data
//! log only grows, so a full block's slot never changes; the last, partial block's slot is
//! rewritten as the block fills (its `len` says how much it covers). The writer writes the
//! slots of everything appended before it writes the index records that point there, so every
//! indexed byte has a checksum; a reader checks every block it reads from the device (a slot
//! read while being rewritten fails the check once and is read again; `tessera-logstore`
//! says which cached blocks are not checked again).
//!
//! Checking whole blocks costs a reader at most two extra partial blocks per contiguous span
//! it reads (16 KiB blocks: a 4 KiB random read reads at most 32 KiB); the slots cost 0.05 %
//! of the log.

/// Magic of the header.
pub const MAGIC: [u8; 4] = *b"TSXS";
pub const VERSION: u16 = 1;
pub const HEADER_SIZE: usize = 16;
pub const SLOT_SIZE: usize = 8;
/// Block size, as a power of two: 16 KiB.
pub const BLOCK_LOG2: u8 = 14;

/// The checksum of (the first `len` bytes of) one block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Slot {
    pub crc: u32,
    pub len: u32,
}

impl Slot {
    pub fn encode(&self) -> [u8; SLOT_SIZE] {
        let mut b = [0u8; SLOT_SIZE];
        b[0..4].copy_from_slice(&self.crc.to_le_bytes());
        b[4..8].copy_from_slice(&self.len.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> Slot {
        Slot {
            crc: u32::from_le_bytes(b[0..4].try_into().expect("4 bytes")),
            len: u32::from_le_bytes(b[4..8].try_into().expect("4 bytes")),
        }
    }

    /// Whether `block` (the block's first `len` bytes) matches.
    pub fn matches(&self, block: &[u8]) -> bool {
        block.len() == self.len as usize && crc32c::crc32c(block) == self.crc
    }
}

/// Byte offset of slot `k` in the sums file.
pub fn slot_offset(k: u64) -> u64 {
    HEADER_SIZE as u64 + k * SLOT_SIZE as u64
}

pub fn encode_header(block_log2: u8) -> [u8; HEADER_SIZE] {
    let mut h = [0u8; HEADER_SIZE];
    h[0..4].copy_from_slice(&MAGIC);
    h[4..6].copy_from_slice(&VERSION.to_le_bytes());
    h[6] = block_log2;
    let crc = crc32c::crc32c(&h[0..12]);
    h[12..16].copy_from_slice(&crc.to_le_bytes());
    h
}

/// The block size (log2) a header declares; `Ok(None)` if the header is not complete yet.
pub fn parse_header(b: &[u8]) -> Result<Option<u8>, String> {
    if b.len() < HEADER_SIZE {
        return Ok(None);
    }
    let crc = u32::from_le_bytes(b[12..16].try_into().expect("4 bytes"));
    if b[0..4] != MAGIC || crc32c::crc32c(&b[0..12]) != crc {
        return Err("not a Tessera checksum file (bad magic or header checksum)".into());
    }
    let version = u16::from_le_bytes([b[4], b[5]]);
    if version != VERSION {
        return Err(format!(
            "checksum file version {version}; this build reads version {VERSION}"
        ));
    }
    match b[6] {
        9..=24 => Ok(Some(b[6])),
        other => Err(format!("checksum block size 2^{other} is out of range")),
    }
}

/// The writer's side: checksums of what it appends, block by block.
#[derive(Clone, Debug)]
pub struct SumsBuilder {
    log2: u8,
    /// Bytes of the data log accounted for.
    len: u64,
    /// Checksum of the current block's bytes so far.
    crc: u32,
    /// First block whose slot is not written yet.
    unwritten: u64,
    /// Slots of full blocks not written yet (blocks `unwritten..`).
    full: Vec<Slot>,
}

impl SumsBuilder {
    /// A builder for an empty data log.
    pub fn new(log2: u8) -> Self {
        Self::resume(log2, 0, Slot::default())
    }

    /// A builder continuing a log of `len` bytes whose last, partial block has `partial`.
    pub fn resume(log2: u8, len: u64, partial: Slot) -> Self {
        let block = 1u64 << log2;
        SumsBuilder {
            log2,
            len,
            crc: if len.is_multiple_of(block) {
                0
            } else {
                partial.crc
            },
            unwritten: len >> log2,
            full: Vec::new(),
        }
    }

    pub fn block_log2(&self) -> u8 {
        self.log2
    }

    /// Bytes accounted for.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Accounts for `bytes` appended to the data log.
    pub fn push(&mut self, mut bytes: &[u8]) {
        let block = 1u64 << self.log2;
        while !bytes.is_empty() {
            let used = self.len % block;
            let take = ((block - used) as usize).min(bytes.len());
            self.crc = crc32c::crc32c_append(self.crc, &bytes[..take]);
            self.len += take as u64;
            bytes = &bytes[take..];
            if self.len.is_multiple_of(block) {
                self.full.push(Slot {
                    crc: self.crc,
                    len: block as u32,
                });
                self.crc = 0;
            }
        }
    }

    /// The slots to write now, as one contiguous write: (offset in the sums file, bytes). It
    /// covers every full block not written yet and the current partial block (rewritten each
    /// time as it grows). `None` if there is nothing new.
    pub fn drain(&mut self) -> Option<(u64, Vec<u8>)> {
        let block = 1u64 << self.log2;
        let partial = self.len % block;
        if self.full.is_empty() && partial == 0 {
            return None;
        }
        let first = self.unwritten;
        let mut bytes = Vec::with_capacity((self.full.len() + 1) * SLOT_SIZE);
        for s in self.full.drain(..) {
            bytes.extend_from_slice(&s.encode());
        }
        if partial > 0 {
            bytes.extend_from_slice(
                &Slot {
                    crc: self.crc,
                    len: partial as u32,
                }
                .encode(),
            );
        }
        // Full blocks are final; a partial one is written again next time.
        self.unwritten = self.len >> self.log2;
        Some((slot_offset(first), bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn header_round_trips() {
        assert_eq!(parse_header(&encode_header(14)), Ok(Some(14)));
        assert_eq!(parse_header(&encode_header(14)[..3]), Ok(None));
        let mut h = encode_header(14);
        h[1] ^= 1;
        assert!(parse_header(&h).is_err());
    }

    proptest! {
        /// Applying every drain to a file gives, for each block, the checksum of its bytes.
        #[test]
        fn slots_match_the_blocks(
            appends in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..700), 1..20),
            drain_every in 1usize..4,
            cut in any::<prop::sample::Index>(),
        ) {
            let log2 = 9; // 512-byte blocks
            let mut data: Vec<u8> = Vec::new();
            let mut sums: Vec<u8> = encode_header(log2).to_vec();
            let write = |sums: &mut Vec<u8>, (off, bytes): (u64, Vec<u8>)| {
                let end = off as usize + bytes.len();
                if sums.len() < end { sums.resize(end, 0); }
                sums[off as usize..end].copy_from_slice(&bytes);
            };
            let mut b = SumsBuilder::new(log2);
            for (i, a) in appends.iter().enumerate() {
                b.push(a);
                data.extend_from_slice(a);
                if i % drain_every == 0 && let Some(w) = b.drain() { write(&mut sums, w); }
                // Resuming from what is on disk gives the same result as going on.
                if i == cut.index(appends.len()) && let Some(w) = b.drain() {
                    write(&mut sums, w);
                    let k = data.len() as u64 >> log2;
                    let partial = if data.len().is_multiple_of(512) {
                        Slot::default()
                    } else {
                        Slot::decode(&sums[slot_offset(k) as usize..])
                    };
                    b = SumsBuilder::resume(log2, data.len() as u64, partial);
                }
            }
            if let Some(w) = b.drain() { write(&mut sums, w); }
            let blocks = data.len().div_ceil(512);
            prop_assert_eq!(sums.len(), HEADER_SIZE + blocks * SLOT_SIZE);
            for k in 0..blocks {
                let block = &data[k * 512..((k + 1) * 512).min(data.len())];
                let slot = Slot::decode(&sums[slot_offset(k as u64) as usize..]);
                prop_assert!(slot.matches(block), "block {}", k);
            }
        }
    }
}
