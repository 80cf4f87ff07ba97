//! The tiers as MPI communicators, and the one collective move of the protocol: gather to the
//! sub-coordinators, reduce to unique items, gather to the coordinator, reduce again, broadcast
//! back down. No process receives more than its group's and the sub-coordinators' messages.

use mpi::datatype::PartitionMut;
use mpi::topology::{Color, SimpleCommunicator};
use mpi::traits::*;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tessera_core::txn_tiers::Tiers;

/// A process's communicators: its group (rank 0 there is the group's sub-coordinator) and, for
/// sub-coordinators, the communicator of sub-coordinators (rank 0 there is the coordinator).
pub struct TierComms {
    pub tiers: Tiers,
    pub rank: u32,
    group: SimpleCommunicator,
    subs: Option<SimpleCommunicator>,
    /// The communicator the tiers were split from (kept for the library's lifetime).
    world: SimpleCommunicator,
}

impl TierComms {
    /// Splits `world` into the tiers of its size with sub-coordinators of at most `fan_in`.
    /// Collective over `world`.
    pub fn split(world: SimpleCommunicator, fan_in: u32) -> TierComms {
        let size = world.size() as u32;
        let rank = world.rank() as u32;
        let tiers = Tiers::with_fan_in(size, fan_in);
        let role = tiers.role(rank);
        // Keys keep world order, so a group's rank 0 is its first rank: its sub-coordinator.
        let group = world
            .split_by_color_with_key(Color::with_value(role.group as i32), rank as i32)
            .expect("every process has a group");
        let color = if role.sub_coordinator {
            Color::with_value(0)
        } else {
            Color::undefined()
        };
        let subs = world.split_by_color_with_key(color, rank as i32);
        TierComms {
            tiers,
            rank,
            group,
            subs,
            world,
        }
    }

    /// Every process contributes `mine`; every process returns the sorted union of all
    /// contributions. Collective over the tiers. A message that cannot be encoded or read, or
    /// is too large for MPI's counts, ends the job with a message: a process that returned
    /// early would leave the others waiting in the collective for good.
    pub fn unique<T>(&self, mine: Vec<T>) -> Vec<T>
    where
        T: Serialize + DeserializeOwned + Ord,
    {
        self.unique_with(mine, |_| {})
    }

    /// As [`TierComms::unique`], and the coordinator may add to the union before it goes
    /// back down (`top`, called on the coordinator only, with every process's items): what it
    /// decides there, with everything gathered, every process learns in the same move.
    pub fn unique_with<T>(&self, mine: Vec<T>, top: impl FnOnce(&mut Vec<T>)) -> Vec<T>
    where
        T: Serialize + DeserializeOwned + Ord,
    {
        let at_sub = gather_unique(&self.group, mine, &self.world);
        let mut result = Vec::new();
        if let Some(subs) = &self.subs {
            // Only sub-coordinators hold a group's items; the coordinator unites them.
            let all =
                gather_unique(subs, at_sub.unwrap_or_default(), &self.world).map(|mut all| {
                    top(&mut all);
                    all.sort();
                    all.dedup();
                    all
                });
            let mut bytes = all.map(|v| encode(&v, &self.world)).unwrap_or_default();
            broadcast_bytes(subs, &mut bytes);
            result = bytes;
        }
        broadcast_bytes(&self.group, &mut result);
        decode(&result, &self.world)
    }
}

/// Ends the whole job with `what`: nothing else keeps the other processes from waiting.
fn fatal(world: &SimpleCommunicator, what: &str) -> ! {
    eprintln!(
        "tessera-txn rank {}: {what}; ending the job (the others would wait for this process forever)",
        world.rank()
    );
    world.abort(3)
}

/// Gathers every member's items to rank 0 of `comm`, which returns their sorted union; other
/// members return `None`.
fn gather_unique<T>(
    comm: &SimpleCommunicator,
    mine: Vec<T>,
    world: &SimpleCommunicator,
) -> Option<Vec<T>>
where
    T: Serialize + DeserializeOwned + Ord,
{
    let bytes = encode(&mine, world);
    let root = comm.process_at_rank(0);
    let len = i32::try_from(bytes.len())
        .unwrap_or_else(|_| fatal(world, "a transaction message is larger than 2 GiB"));
    if comm.rank() != 0 {
        root.gather_into(&len);
        root.gather_varcount_into(&bytes[..]);
        return None;
    }
    let mut lens = vec![0i32; comm.size() as usize];
    root.gather_into_root(&len, &mut lens[..]);
    let mut displs = Vec::with_capacity(lens.len());
    let mut at: i32 = 0;
    for l in &lens {
        displs.push(at);
        at = at
            .checked_add(*l)
            .unwrap_or_else(|| fatal(world, "the transaction messages of a group exceed 2 GiB"));
    }
    let mut buf = vec![0u8; at as usize];
    {
        let mut part = PartitionMut::new(&mut buf[..], &lens[..], &displs[..]);
        root.gather_varcount_into_root(&bytes[..], &mut part);
    }
    let mut all = Vec::new();
    for (d, l) in displs.iter().zip(&lens) {
        all.extend(decode::<Vec<T>>(
            &buf[*d as usize..(*d + *l) as usize],
            world,
        ));
    }
    all.sort();
    all.dedup();
    Some(all)
}

/// Rank 0's `bytes` to every member of `comm` (length first).
fn broadcast_bytes(comm: &SimpleCommunicator, bytes: &mut Vec<u8>) {
    let root = comm.process_at_rank(0);
    let mut len = bytes.len() as u64;
    root.broadcast_into(&mut len);
    bytes.resize(len as usize, 0);
    root.broadcast_into(&mut bytes[..]);
}

fn encode<T: Serialize>(v: &T, world: &SimpleCommunicator) -> Vec<u8> {
    postcard::to_stdvec(v)
        .unwrap_or_else(|e| fatal(world, &format!("encoding a transaction message: {e}")))
}

fn decode<T: DeserializeOwned>(b: &[u8], world: &SimpleCommunicator) -> T {
    postcard::from_bytes(b)
        .unwrap_or_else(|e| fatal(world, &format!("reading a transaction message: {e}")))
}
