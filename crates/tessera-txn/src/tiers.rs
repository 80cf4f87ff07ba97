//! The tiers as MPI communicators, and the one collective move of the protocol: gather to the
//! sub-coordinators, reduce to unique items, gather to the coordinator, reduce again, broadcast
//! back down. No process receives more than its group's and the sub-coordinators' messages.

use mpi::datatype::PartitionMut;
use mpi::topology::{Color, SimpleCommunicator};
use mpi::traits::*;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tessera_core::txn_tiers::Tiers;

use crate::TxnError;

/// A process's communicators: its group (rank 0 there is the group's sub-coordinator) and, for
/// sub-coordinators, the communicator of sub-coordinators (rank 0 there is the coordinator).
pub struct TierComms {
    pub tiers: Tiers,
    pub rank: u32,
    group: SimpleCommunicator,
    subs: Option<SimpleCommunicator>,
    /// The communicator the tiers were split from (kept for the library's lifetime).
    _world: SimpleCommunicator,
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
            _world: world,
        }
    }

    /// Every process contributes `mine`; every process returns the sorted union of all
    /// contributions. Collective over the tiers.
    pub fn unique<T>(&self, mine: Vec<T>) -> Result<Vec<T>, TxnError>
    where
        T: Serialize + DeserializeOwned + Ord,
    {
        let at_sub = gather_unique(&self.group, mine)?;
        let mut result = Vec::new();
        if let Some(subs) = &self.subs {
            // Only sub-coordinators hold a group's items; the coordinator unites them.
            let all = gather_unique(subs, at_sub.unwrap_or_default())?;
            let mut bytes = all.map(|v| encode(&v)).transpose()?.unwrap_or_default();
            broadcast_bytes(subs, &mut bytes);
            result = bytes;
        }
        broadcast_bytes(&self.group, &mut result);
        decode(&result)
    }
}

/// Gathers every member's items to rank 0 of `comm`, which returns their sorted union; other
/// members return `None`.
fn gather_unique<T>(comm: &SimpleCommunicator, mine: Vec<T>) -> Result<Option<Vec<T>>, TxnError>
where
    T: Serialize + DeserializeOwned + Ord,
{
    let bytes = encode(&mine)?;
    let root = comm.process_at_rank(0);
    let len = bytes.len() as i32;
    if comm.rank() != 0 {
        root.gather_into(&len);
        root.gather_varcount_into(&bytes[..]);
        return Ok(None);
    }
    let mut lens = vec![0i32; comm.size() as usize];
    root.gather_into_root(&len, &mut lens[..]);
    let displs: Vec<i32> = lens
        .iter()
        .scan(0i32, |at, l| {
            let d = *at;
            *at += l;
            Some(d)
        })
        .collect();
    let total: usize = lens.iter().map(|l| *l as usize).sum();
    let mut buf = vec![0u8; total];
    {
        let mut part = PartitionMut::new(&mut buf[..], &lens[..], &displs[..]);
        root.gather_varcount_into_root(&bytes[..], &mut part);
    }
    let mut all = Vec::new();
    for (d, l) in displs.iter().zip(&lens) {
        all.extend(decode::<Vec<T>>(&buf[*d as usize..(*d + *l) as usize])?);
    }
    all.sort();
    all.dedup();
    Ok(Some(all))
}

/// Rank 0's `bytes` to every member of `comm` (length first).
fn broadcast_bytes(comm: &SimpleCommunicator, bytes: &mut Vec<u8>) {
    let root = comm.process_at_rank(0);
    let mut len = bytes.len() as u64;
    root.broadcast_into(&mut len);
    bytes.resize(len as usize, 0);
    root.broadcast_into(&mut bytes[..]);
}

fn encode<T: Serialize>(v: &T) -> Result<Vec<u8>, TxnError> {
    postcard::to_stdvec(v).map_err(|e| TxnError::Message(e.to_string()))
}

fn decode<T: DeserializeOwned>(b: &[u8]) -> Result<T, TxnError> {
    postcard::from_bytes(b).map_err(|e| TxnError::Message(e.to_string()))
}
