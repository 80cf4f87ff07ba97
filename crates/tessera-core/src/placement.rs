//! Where things live: which daemon holds a path's namespace entry, a file's inode, or a
//! (file, stripe) ownership shard.
//!
//! All placement is a pure function of names and the daemon count, so every client and daemon
//! computes the same answer without asking anyone. A file's logical space is cut into stripes
//! (default 64 MiB) and each stripe is placed independently, so one shared checkpoint spreads its
//! ownership traffic over all daemons instead of piling onto one server (the bottleneck of the
//! single global server in BaseFS).

/// Default stripe size: large enough that a typical per-process block stays in one stripe,
/// small enough that a multi-GiB shared file spreads over every daemon.
pub const DEFAULT_STRIPE_SIZE: u64 = 64 << 20;

/// Inode numbers carry the node that created them in the top 16 bits, so the inode shard is
/// known from the number alone (and stays put when the file is renamed).
pub const INO_NODE_SHIFT: u32 = 48;

/// Maps a 64-bit hash uniformly onto `0..n` (multiply-shift, no modulo bias for small `n`).
fn bucket(hash: u64, n: u32) -> u32 {
    ((u128::from(hash) * u128::from(n)) >> 64) as u32
}

/// A well-mixing 64-bit finaliser (SplitMix64), so nearby stripe numbers land far apart.
pub fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Daemon holding the namespace entry (directory entry) of `path`.
pub fn path_shard(path: &str, nodes: u32) -> u32 {
    let h = u64::from(crc32c::crc32c(path.as_bytes()));
    bucket(mix64(h), nodes)
}

/// Daemon holding the ownership map of stripe `stripe` of file `ino`.
pub fn stripe_shard(ino: u64, stripe: u64, nodes: u32) -> u32 {
    bucket(mix64(ino ^ mix64(stripe)), nodes)
}

/// Builds an inode number from the creating node and its local counter.
pub fn make_ino(node: u32, counter: u64) -> u64 {
    (u64::from(node) << INO_NODE_SHIFT) | (counter & ((1 << INO_NODE_SHIFT) - 1))
}

/// Daemon holding the attributes (size, times, mode) of inode `ino`.
pub fn ino_shard(ino: u64) -> u32 {
    (ino >> INO_NODE_SHIFT) as u32
}

/// Cuts `[start, end)` at stripe boundaries: yields (stripe, sub_start, sub_end).
pub fn split_by_stripe(
    start: u64,
    end: u64,
    stripe_size: u64,
) -> impl Iterator<Item = (u64, u64, u64)> {
    let mut at = start;
    std::iter::from_fn(move || {
        if at >= end {
            return None;
        }
        let stripe = at / stripe_size;
        let stripe_end = (stripe + 1).saturating_mul(stripe_size).min(end);
        let item = (stripe, at, stripe_end);
        at = stripe_end;
        Some(item)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stripes_cut_at_boundaries() {
        let v: Vec<_> = split_by_stripe(5, 25, 10).collect();
        assert_eq!(v, vec![(0, 5, 10), (1, 10, 20), (2, 20, 25)]);
        assert_eq!(split_by_stripe(7, 7, 10).count(), 0);
    }

    #[test]
    fn stripes_of_one_file_spread_over_all_daemons() {
        let mut hits = [0u32; 3];
        for stripe in 0..300 {
            hits[stripe_shard(42, stripe, 3) as usize] += 1;
        }
        assert!(hits.iter().all(|h| *h > 60), "uneven spread {hits:?}");
    }

    #[test]
    fn paths_spread_and_are_stable() {
        let mut hits = [0u32; 4];
        for i in 0..400 {
            hits[path_shard(&format!("/dir/file{i}"), 4) as usize] += 1;
        }
        assert!(hits.iter().all(|h| *h > 60), "uneven spread {hits:?}");
        assert_eq!(path_shard("/a", 4), path_shard("/a", 4));
    }

    #[test]
    fn ino_remembers_its_node() {
        let ino = make_ino(5, 1234);
        assert_eq!(ino_shard(ino), 5);
        assert_eq!(ino & 0xffff, 1234);
    }
}
