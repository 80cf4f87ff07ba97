//! The tiers as MPI communicators, and the one collective move of the protocol: gather to the
//! sub-coordinators, reduce to unique items, gather to the coordinator, reduce again, broadcast
//! back down (or scatter, when the coordinator also hands processes items of their own). No
//! process receives more than its group's and the sub-coordinators' messages.

use mpi::datatype::{Partition, PartitionMut};
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

impl TierComms {
    /// As [`TierComms::unique_with`], and `top` also hands single processes items of their
    /// own (by world rank, such as the log id each is enrolled under): every process returns
    /// the union and its own items. Down the tiers the coordinator scatters, to each
    /// sub-coordinator, the union and its group's own items, and each sub-coordinator
    /// scatters the union and one process's own items to each of its group: what a process
    /// receives grows with the union and its own items, not with every process's.
    pub fn unique_with_own<T>(
        &self,
        mine: Vec<T>,
        top: impl FnOnce(&mut Vec<T>) -> Vec<(u32, T)>,
    ) -> (Vec<T>, Vec<T>)
    where
        T: Serialize + DeserializeOwned + Ord,
    {
        let at_sub = gather_unique(&self.group, mine, &self.world);
        // What this process's sub-coordinator hands its group: the union, encoded once, and
        // each member's own items by world rank.
        let mut for_group: (Vec<u8>, Vec<(u32, T)>) = (Vec::new(), Vec::new());
        if let Some(subs) = &self.subs {
            let pieces =
                gather_unique(subs, at_sub.unwrap_or_default(), &self.world).map(|mut all| {
                    let own = top(&mut all);
                    all.sort();
                    all.dedup();
                    let union = encode(&all, &self.world);
                    // Sub-coordinators are ranked as their groups are (keys keep world order).
                    self.tiers
                        .by_group(own)
                        .iter()
                        .map(|theirs| encode(&(&union, theirs), &self.world))
                        .collect::<Vec<_>>()
                });
            for_group = decode(&scatter_bytes(subs, pieces, &self.world), &self.world);
        }
        let pieces = (self.group.rank() == 0).then(|| {
            let (union, own) = for_group;
            // Group members are ranked as in the world (keys keep world order).
            self.tiers
                .by_member(self.tiers.role(self.rank).group, own)
                .iter()
                .map(|items| encode(&(&union, items), &self.world))
                .collect()
        });
        let (union, own): (Vec<u8>, Vec<T>) = decode(
            &scatter_bytes(&self.group, pieces, &self.world),
            &self.world,
        );
        (decode(&union, &self.world), own)
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
    let (displs, at) = displacements(&lens, world);
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

/// Where each of the messages of lengths `lens` starts when they lie end to end, and their
/// total; more than MPI's counts can hold ends the job.
fn displacements(lens: &[i32], world: &SimpleCommunicator) -> (Vec<i32>, i32) {
    let mut displs = Vec::with_capacity(lens.len());
    let mut at: i32 = 0;
    for l in lens {
        displs.push(at);
        at = at
            .checked_add(*l)
            .unwrap_or_else(|| fatal(world, "the transaction messages of a tier exceed 2 GiB"));
    }
    (displs, at)
}

/// Rank 0's `pieces` (one per member, in rank order; `None` on the others) to the members
/// of `comm`: each returns its own (lengths first).
fn scatter_bytes(
    comm: &SimpleCommunicator,
    pieces: Option<Vec<Vec<u8>>>,
    world: &SimpleCommunicator,
) -> Vec<u8> {
    let root = comm.process_at_rank(0);
    let mut len: i32 = 0;
    if comm.rank() != 0 {
        root.scatter_into(&mut len);
        let mut mine = vec![0u8; len as usize];
        root.scatter_varcount_into(&mut mine[..]);
        return mine;
    }
    let pieces = pieces
        .filter(|p| p.len() == comm.size() as usize)
        .unwrap_or_else(|| fatal(world, "a scatter's root has not one piece per member"));
    let lens: Vec<i32> = pieces
        .iter()
        .map(|p| {
            i32::try_from(p.len())
                .unwrap_or_else(|_| fatal(world, "a transaction message is larger than 2 GiB"))
        })
        .collect();
    let (displs, _) = displacements(&lens, world);
    root.scatter_into_root(&lens[..], &mut len);
    let all: Vec<u8> = pieces.concat();
    let mut mine = vec![0u8; len as usize];
    let part = Partition::new(&all[..], &lens[..], &displs[..]);
    root.scatter_varcount_into_root(&part, &mut mine[..]);
    mine
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
