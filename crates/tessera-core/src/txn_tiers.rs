//! D2T's three tiers of processes, and what one collective phase costs in messages.
//!
//! A transaction's processes are a coordinator, sub-coordinators each serving at most
//! [`FAN_IN`] processes (at least [`MIN_SUB_COORDINATORS`] of them, as D2T always uses,
//! even at small scale), and subordinates. Groups are contiguous blocks of ranks of balanced
//! sizes; a group's first rank is its sub-coordinator and rank 0, the first sub-coordinator, is
//! also the coordinator (D2T's Figure 4: with 6 processes, 0 and 3 are sub-coordinators).
//!
//! Begin, global sub-transaction creation and voting are each one phase: gather to the
//! sub-coordinators, reduce to unique items there, gather to the coordinator, reduce again,
//! then broadcast back down the same tree. [`Tiers::phase`] counts the messages of such a
//! phase; [`flat_phase`] counts those of a flat two-phase commit, where the coordinator hears
//! from every process itself. The transaction library groups its processes with this code and
//! the benchmark's model computes its tables with it, so the model's grouping is the
//! protocol's own. It counts logical messages, one per hop: the library sends a length and
//! then the items on each hop, and MPI's gather and broadcast algorithms choose the messages on
//! the wire (a binomial broadcast, say, spreads a sub-coordinator's sends over its group).

use std::ops::Range;

/// The most processes one sub-coordinator serves (itself included).
pub const FAN_IN: u32 = 256;

/// The fewest sub-coordinators a transaction of two or more processes has.
pub const MIN_SUB_COORDINATORS: u32 = 2;

/// The tiers of `processes` processes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tiers {
    processes: u32,
    groups: u32,
}

/// A process's roles: every process is a subordinate of its group's sub-coordinator (the
/// sub-coordinator of itself, if it is one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Role {
    pub coordinator: bool,
    pub sub_coordinator: bool,
    /// The group the process belongs to.
    pub group: u32,
}

/// The messages of one gather -> unique -> broadcast phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PhaseMessages {
    /// The most messages any one process receives (up and down together).
    pub max_received: u64,
    /// Every message sent, up and down.
    pub total: u64,
    /// Messages on the longest chain from a subordinate's contribution to the last
    /// subordinate's copy of the result.
    pub critical_path: u64,
}

impl Tiers {
    /// The tiers of `processes` processes (at least 1), with [`FAN_IN`].
    pub fn new(processes: u32) -> Tiers {
        Tiers::with_fan_in(processes, FAN_IN)
    }

    /// The tiers with sub-coordinators of at most `fan_in` processes (`fan_in` >= 2).
    pub fn with_fan_in(processes: u32, fan_in: u32) -> Tiers {
        assert!(processes >= 1, "a transaction has at least one process");
        assert!(
            fan_in >= 2,
            "a sub-coordinator serves at least two processes"
        );
        let needed = processes.div_ceil(fan_in);
        Tiers {
            processes,
            groups: needed.max(MIN_SUB_COORDINATORS).min(processes),
        }
    }

    pub fn processes(&self) -> u32 {
        self.processes
    }

    /// How many sub-coordinators (and groups) there are.
    pub fn groups(&self) -> u32 {
        self.groups
    }

    /// The ranks of group `g`: contiguous, and the first `processes % groups` groups have one
    /// more than the rest.
    pub fn group(&self, g: u32) -> Range<u32> {
        assert!(g < self.groups, "group {g} of {}", self.groups);
        let base = self.processes / self.groups;
        let extra = self.processes % self.groups;
        let start = g * base + g.min(extra);
        start..start + base + u32::from(g < extra)
    }

    /// The group of `rank`.
    pub fn group_of(&self, rank: u32) -> u32 {
        assert!(rank < self.processes, "rank {rank} of {}", self.processes);
        let base = self.processes / self.groups;
        let extra = self.processes % self.groups;
        // The first `extra` groups hold `base + 1` ranks each.
        let big = extra * (base + 1);
        if rank < big {
            rank / (base + 1)
        } else {
            extra + (rank - big) / base
        }
    }

    /// Items addressed to single processes (`(rank, item)`), dealt out as the tiers carry them
    /// down: one list per group, in group order, each with its members' items in the order
    /// given. Items for ranks outside the job are dropped.
    pub fn by_group<T>(&self, own: Vec<(u32, T)>) -> Vec<Vec<(u32, T)>> {
        let mut out: Vec<Vec<(u32, T)>> = (0..self.groups).map(|_| Vec::new()).collect();
        for (rank, item) in own {
            if rank < self.processes {
                out[self.group_of(rank) as usize].push((rank, item));
            }
        }
        out
    }

    /// Group `g`'s share of [`Tiers::by_group`] dealt to its members: one list per member, in
    /// the group's rank order. Items for ranks outside the group are dropped.
    pub fn by_member<T>(&self, g: u32, own: Vec<(u32, T)>) -> Vec<Vec<T>> {
        let ranks = self.group(g);
        let mut out: Vec<Vec<T>> = ranks.clone().map(|_| Vec::new()).collect();
        for (rank, item) in own {
            if ranks.contains(&rank) {
                out[(rank - ranks.start) as usize].push(item);
            }
        }
        out
    }

    /// The sub-coordinator of group `g`: its first rank.
    pub fn sub_coordinator(&self, g: u32) -> u32 {
        self.group(g).start
    }

    pub fn role(&self, rank: u32) -> Role {
        let group = self.group_of(rank);
        Role {
            coordinator: rank == 0,
            sub_coordinator: self.sub_coordinator(group) == rank,
            group,
        }
    }

    /// The messages of one phase through the tiers. A process sends nothing to itself: the
    /// coordinator is its own sub-coordinator, and each sub-coordinator its own subordinate.
    pub fn phase(&self) -> PhaseMessages {
        let mut max_received = 0u64;
        for g in 0..self.groups {
            let members = u64::from(self.group(g).len() as u32);
            // Up from its other members; down from the coordinator unless it is it.
            let sub = if g == 0 {
                members - 1 + u64::from(self.groups - 1)
            } else {
                members - 1 + 1
            };
            max_received = max_received.max(sub);
            if members > 1 {
                // A subordinate receives only the result.
                max_received = max_received.max(1);
            }
        }
        let others = u64::from(self.processes - 1);
        // Each process but the coordinator sends one message up and receives one down.
        let total = 2 * others;
        let critical_path = if self.processes == 1 {
            0
        } else if self.groups == 1 {
            2
        } else if (0..self.groups).any(|g| self.group(g).len() > 1) {
            // subordinate -> sub-coordinator -> coordinator -> sub-coordinator -> subordinate
            4
        } else {
            2
        };
        PhaseMessages {
            max_received,
            total,
            critical_path,
        }
    }
}

/// One phase of a flat two-phase commit over `processes` processes: the coordinator hears from
/// every other process and answers each.
pub fn flat_phase(processes: u32) -> PhaseMessages {
    assert!(processes >= 1);
    let others = u64::from(processes - 1);
    PhaseMessages {
        max_received: others,
        total: 2 * others,
        critical_path: if processes == 1 { 0 } else { 2 },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_seeds_configurations() {
        // Table 1 of D2T: processes, sub-coordinators, processes per sub-coordinator.
        for (p, subs, per) in [
            (256, 2, 128),
            (512, 2, 256),
            (1024, 4, 256),
            (2048, 8, 256),
            (8192, 32, 256),
            (16384, 64, 256),
            (32768, 128, 256),
            (65536, 256, 256),
        ] {
            let t = Tiers::new(p);
            assert_eq!(t.groups(), subs, "{p} processes");
            assert!((0..subs).all(|g| t.group(g).len() == per), "{p} processes");
        }
        // Figure 4: six processes, sub-coordinators 0 and 3.
        let t = Tiers::new(6);
        let subs: Vec<u32> = (0..6).filter(|r| t.role(*r).sub_coordinator).collect();
        assert_eq!(subs, vec![0, 3]);
        assert!(t.role(0).coordinator && !t.role(3).coordinator);
    }

    #[test]
    fn one_process_is_every_role_and_sends_nothing() {
        let t = Tiers::new(1);
        assert_eq!(t.groups(), 1);
        let r = t.role(0);
        assert!(r.coordinator && r.sub_coordinator);
        assert_eq!(
            t.phase(),
            PhaseMessages {
                max_received: 0,
                total: 0,
                critical_path: 0
            }
        );
    }

    #[test]
    fn the_tiers_beat_a_flat_commit_at_scale() {
        let t = Tiers::new(65536);
        let p = t.phase();
        assert_eq!(p.max_received, 255 + 255);
        assert_eq!(p.critical_path, 4);
        assert_eq!(flat_phase(65536).max_received, 65535);
        assert_eq!(p.total, flat_phase(65536).total);
    }

    proptest! {
        #[test]
        fn groups_partition_the_ranks_within_the_fan_in(p in 1u32..70_000, fan_in in 2u32..300) {
            let t = Tiers::with_fan_in(p, fan_in);
            prop_assert!(t.groups() >= MIN_SUB_COORDINATORS.min(p));
            let mut next = 0;
            for g in 0..t.groups() {
                let r = t.group(g);
                prop_assert_eq!(r.start, next);
                prop_assert!(!r.is_empty() && r.len() as u32 <= fan_in);
                next = r.end;
            }
            prop_assert_eq!(next, p);
            // Balanced: sizes differ by at most one.
            let sizes: Vec<usize> = (0..t.groups()).map(|g| t.group(g).len()).collect();
            prop_assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1);
        }

        #[test]
        fn group_of_agrees_with_the_groups(p in 1u32..5_000, fan_in in 2u32..300, pick in any::<u32>()) {
            let t = Tiers::with_fan_in(p, fan_in);
            let rank = pick % p;
            let g = t.group_of(rank);
            prop_assert!(t.group(g).contains(&rank));
            let role = t.role(rank);
            prop_assert_eq!(role.sub_coordinator, t.group(g).start == rank);
            prop_assert_eq!(role.coordinator, rank == 0);
        }

        #[test]
        fn items_of_single_processes_reach_exactly_those_processes(
            p in 1u32..3_000,
            fan_in in 2u32..300,
            own in proptest::collection::vec((0u32..3_100, any::<u16>()), 0..200),
        ) {
            let t = Tiers::with_fan_in(p, fan_in);
            // Dealt to groups, then within each group to its members.
            let mut got: Vec<Vec<u16>> = (0..p).map(|_| Vec::new()).collect();
            for (g, share) in t.by_group(own.clone()).into_iter().enumerate() {
                let g = g as u32;
                prop_assert!(share.iter().all(|(r, _)| t.group(g).contains(r)));
                for (i, items) in t.by_member(g, share).into_iter().enumerate() {
                    got[(t.group(g).start + i as u32) as usize] = items;
                }
            }
            // The model: each process gets its own items, in the order given; no other's.
            let mut want: Vec<Vec<u16>> = (0..p).map(|_| Vec::new()).collect();
            for (r, item) in own {
                if r < p {
                    want[r as usize].push(item);
                }
            }
            prop_assert_eq!(got, want);
        }

        #[test]
        fn no_process_receives_more_than_the_fan_in_plus_the_sub_coordinators(p in 1u32..70_000) {
            let t = Tiers::new(p);
            let phase = t.phase();
            prop_assert!(phase.max_received <= u64::from(FAN_IN + t.groups()));
            prop_assert!(phase.critical_path <= 4);
            prop_assert_eq!(phase.total, flat_phase(p).total);
        }
    }
}
