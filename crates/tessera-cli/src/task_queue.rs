//! Which task runs next, and where (pure): the placement rules of `tessera run` (FusionFS and Swift).
//!
//! Each task may prefer a node (the one holding most of its input bytes); nodes sit on hosts,
//! and each host runs at most `per_host` tasks at once. As Swift/T's `@location`, a *hard*
//! task runs only on its host (it waits for a free slot there, letting later tasks pass), a
//! *soft* one runs there if a slot is free and anywhere else otherwise; a task without a
//! preference runs where most slots are free. Tasks are considered in order.

use std::collections::VecDeque;

/// Hard or soft placement (Swift/T's distinction).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    Hard,
    Soft,
}

/// Where a task would like to run: a host (by index) and a node on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Preference {
    pub host: usize,
    pub node: u32,
}

/// A task dispatched: which one, on which host and node, and whether that is where it
/// preferred to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dispatch {
    pub task: usize,
    pub host: usize,
    pub node: u32,
    pub preferred: bool,
}

/// The hosts, their nodes and free slots, and the tasks not dispatched yet.
pub struct TaskQueue {
    /// Per host: its nodes (at least one), and the tasks running there.
    hosts: Vec<(Vec<u32>, usize)>,
    per_host: usize,
    rule: Rule,
    prefs: Vec<Option<Preference>>,
    pending: VecDeque<usize>,
    /// Next node to use per host for tasks placed there without a preference for it.
    spread: Vec<usize>,
}

impl TaskQueue {
    /// `hosts`: the nodes of each host; `prefs`: each task's preference. A preference for a
    /// host outside `hosts` counts as none.
    pub fn new(
        hosts: Vec<Vec<u32>>,
        per_host: usize,
        rule: Rule,
        prefs: Vec<Option<Preference>>,
    ) -> TaskQueue {
        assert!(hosts.iter().all(|n| !n.is_empty()), "every host has a node");
        let n = hosts.len();
        let prefs = prefs
            .into_iter()
            .map(|p| p.filter(|p| p.host < n))
            .collect::<Vec<_>>();
        TaskQueue {
            pending: (0..prefs.len()).collect(),
            hosts: hosts.into_iter().map(|nodes| (nodes, 0)).collect(),
            per_host: per_host.max(1),
            rule,
            prefs,
            spread: vec![0; n],
        }
    }

    /// Tasks not dispatched yet.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Tasks running on `host`.
    pub fn running_on(&self, host: usize) -> usize {
        self.hosts[host].1
    }

    /// The next task that can start now, if any; marks its slot taken.
    pub fn dispatch(&mut self) -> Option<Dispatch> {
        let free = |hosts: &Vec<(Vec<u32>, usize)>, h: usize| hosts[h].1 < self.per_host;
        for i in 0..self.pending.len() {
            let task = self.pending[i];
            let pick = match self.prefs[task] {
                Some(p) if free(&self.hosts, p.host) => Some((p.host, Some(p.node))),
                Some(_) if self.rule == Rule::Hard => None,
                _ => self.least_loaded().map(|h| (h, None)),
            };
            let Some((host, node)) = pick else { continue };
            self.pending.remove(i);
            self.hosts[host].1 += 1;
            let node = node.unwrap_or_else(|| {
                let nodes = &self.hosts[host].0;
                let k = self.spread[host] % nodes.len();
                self.spread[host] += 1;
                nodes[k]
            });
            let preferred = self.prefs[task].is_some_and(|p| p.host == host);
            return Some(Dispatch {
                task,
                host,
                node,
                preferred,
            });
        }
        None
    }

    /// A task on `host` finished: its slot is free again.
    pub fn finished(&mut self, host: usize) {
        let running = &mut self.hosts[host].1;
        assert!(
            *running > 0,
            "a task finished on host {host}, which runs none"
        );
        *running -= 1;
    }

    /// The host with most free slots (the first of equals), if any slot is free.
    fn least_loaded(&self) -> Option<usize> {
        (0..self.hosts.len())
            .filter(|&h| self.hosts[h].1 < self.per_host)
            .min_by_key(|&h| self.hosts[h].1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pref(host: usize, node: u32) -> Option<Preference> {
        Some(Preference { host, node })
    }

    #[test]
    fn soft_tasks_overflow_to_free_hosts_and_hard_ones_wait() {
        let hosts = vec![vec![0], vec![1], vec![2, 3]];
        let prefs = vec![pref(0, 0), pref(0, 0), None, pref(2, 3)];
        let mut soft = TaskQueue::new(hosts.clone(), 1, Rule::Soft, prefs.clone());
        let got: Vec<_> = std::iter::from_fn(|| soft.dispatch()).collect();
        assert_eq!(
            got,
            vec![
                Dispatch {
                    task: 0,
                    host: 0,
                    node: 0,
                    preferred: true
                },
                Dispatch {
                    task: 1,
                    host: 1,
                    node: 1,
                    preferred: false
                },
                Dispatch {
                    task: 2,
                    host: 2,
                    node: 2,
                    preferred: false
                },
            ]
        );
        // Task 3's host is full and every other too: it waits.
        soft.finished(2);
        assert_eq!(
            soft.dispatch(),
            Some(Dispatch {
                task: 3,
                host: 2,
                node: 3,
                preferred: true
            })
        );

        let mut hard = TaskQueue::new(hosts, 1, Rule::Hard, prefs);
        let got: Vec<_> = std::iter::from_fn(|| hard.dispatch()).collect();
        // Task 1 waits for host 0; the tasks after it pass.
        assert_eq!(
            got.iter().map(|d| d.task).collect::<Vec<_>>(),
            vec![0, 2, 3]
        );
        assert_eq!(got[1].host, 1, "no preference: the least loaded host");
        hard.finished(0);
        assert_eq!(
            hard.dispatch(),
            Some(Dispatch {
                task: 1,
                host: 0,
                node: 0,
                preferred: true
            })
        );
        assert_eq!(hard.pending(), 0);
    }

    proptest! {
        /// Against the rules, with tasks finishing in a random order: no host ever runs more
        /// than its slots, a hard task runs only on its host, a soft one on its host whenever
        /// a slot was free there, every task runs once, and the queue never stalls with free
        /// slots a waiting task could take.
        #[test]
        fn dispatch_keeps_the_rules(
            nodes_per_host in proptest::collection::vec(1usize..3, 1..5),
            per_host in 1usize..3,
            hard in any::<bool>(),
            raw_prefs in proptest::collection::vec(proptest::option::of((0usize..6, 0usize..3)), 0..30),
            finish_order in proptest::collection::vec(any::<u16>(), 60),
        ) {
            let mut next_node = 0u32;
            let hosts: Vec<Vec<u32>> = nodes_per_host
                .iter()
                .map(|&k| (0..k).map(|_| { next_node += 1; next_node - 1 }).collect())
                .collect();
            let prefs: Vec<Option<Preference>> = raw_prefs
                .iter()
                .map(|p| p.map(|(h, k)| {
                    let host = h % hosts.len();
                    Preference { host, node: hosts[host][k % hosts[host].len()] }
                }))
                .collect();
            let rule = if hard { Rule::Hard } else { Rule::Soft };
            let mut q = TaskQueue::new(hosts.clone(), per_host, rule, prefs.clone());
            let mut running: Vec<Dispatch> = Vec::new();
            let mut ran = vec![0u32; prefs.len()];
            let mut turn = 0;
            loop {
                while let Some(d) = q.dispatch() {
                    // Before taking it, the slot was free.
                    let on_host = running.iter().filter(|r| r.host == d.host).count();
                    prop_assert!(on_host < per_host);
                    prop_assert!(hosts[d.host].contains(&d.node));
                    match prefs[d.task] {
                        Some(p) => {
                            let pref_free = running.iter().filter(|r| r.host == p.host).count() < per_host;
                            if hard { prop_assert_eq!(d.host, p.host); }
                            if pref_free { prop_assert_eq!((d.host, d.node), (p.host, p.node)); }
                            prop_assert_eq!(d.preferred, d.host == p.host);
                        }
                        None => prop_assert!(!d.preferred),
                    }
                    ran[d.task] += 1;
                    running.push(d);
                }
                // Nothing more could start: every waiting task's possible hosts are full.
                let full = |h: usize| running.iter().filter(|r| r.host == h).count() >= per_host;
                for t in (0..prefs.len()).filter(|&t| ran[t] == 0) {
                    match prefs[t] {
                        Some(p) if hard => prop_assert!(full(p.host)),
                        _ => prop_assert!((0..hosts.len()).all(full)),
                    }
                }
                if running.is_empty() {
                    break;
                }
                let k = finish_order[turn % finish_order.len()] as usize % running.len();
                turn += 1;
                let done = running.swap_remove(k);
                q.finished(done.host);
            }
            prop_assert!(ran.iter().all(|&n| n == 1), "{:?}", ran);
            prop_assert_eq!(q.pending(), 0);
        }
    }
}
