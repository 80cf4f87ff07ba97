//! How a transaction's processes become its members all at once (D2T), as the
//! transaction library does it: the coordinator reserves a block of transaction ids at its
//! daemon ahead of use ([`TxnReserve`]), so that every process names its next transaction
//! without a message; at begin, with every process's identity gathered, it enrolls them all
//! in one request ([`TxnEnroll`]): the home opens the reserved id, each member's node counts
//! its members and hands each a log id ([`TxnEnrollNode`]), and the home admits them. One
//! request and one message per node, where a join per process would cost a round trip each.

use crate::Node;
use crate::rpc::{ServeClient, ServePeer};
use crate::store::{DbOp, MetaKey};
use std::collections::{HashMap, HashSet};
use tessera_core::txn_home::HomeTxn;
use tessera_core::{Errno, FsError, FsResult};
use tessera_proto::{TxnEnroll, TxnEnrollNode, TxnReserve, txn_home, txn_id};

use super::txn_homes::Home;

/// The most ids one reservation takes.
const MAX_RESERVE: u32 = 1 << 16;

impl ServeClient<TxnReserve> for Node {
    async fn serve_client(&self, _: u64, r: TxnReserve) -> FsResult<u64> {
        if r.count == 0 || r.count > MAX_RESERVE {
            return Err(FsError::new(
                Errno::Inval,
                format!(
                    "reserving {} transaction ids: give 1 to {MAX_RESERVE}",
                    r.count
                ),
            ));
        }
        let (first, durable) = self.txns.take_numbers(u64::from(r.count), |n, after| {
            let first = txn_id(self.id, n);
            self.txns.reserve(first, u64::from(r.count));
            let ops = vec![DbOp::SetMeta(MetaKey::NextTxn, after)];
            (first, self.store.submit(ops))
        });
        durable.durable().await?;
        Ok(first)
    }
}

impl Node {
    /// Opens `txn` at this home (with `ops` of the caller in the same durable write); it
    /// times out like one whose processes all ended if no process joins it.
    pub(crate) fn open_home(&self, txn: u64, mut ops: Vec<DbOp>) -> crate::store::Pending {
        let mut machine = HomeTxn::open(txn, self.cfg.nodes);
        machine.left(self.txns.now_ms());
        self.txns.homes.insert(
            txn,
            Home {
                machine,
                members: HashSet::new(),
                waiters: Vec::new(),
                decided_at: None,
                heard: HashMap::new(),
            },
        );
        ops.push(DbOp::PutHomeTxn { txn, state: 0 });
        self.store.submit(ops)
    }

    /// Opens a reserved `txn` now, if it is reserved here and not opened yet: open in memory
    /// at once, durable when the answer is awaited; `None` if it is not reserved here.
    fn open_reserved(&self, txn: u64) -> Option<crate::store::Pending> {
        if !self.txns.take_reserved(txn) {
            return None;
        }
        Some(self.open_home(txn, Vec::new()))
    }
}

/// The most members one enrollment names (a bound on what the wire may ask for; the
/// transaction library enrolls its communicator's processes, far fewer than this).
const MAX_ENROLL: usize = 1 << 20;

impl ServeClient<TxnEnroll> for Node {
    async fn serve_client(&self, _: u64, r: TxnEnroll) -> FsResult<Vec<u64>> {
        self.check_txn_id(r.txn)?;
        if txn_home(r.txn) != self.id {
            return Err(FsError::new(
                Errno::Inval,
                format!(
                    "transaction {:016x} has its home on node {}: enroll its members there (through the process that opened it), not on node {}",
                    r.txn,
                    txn_home(r.txn),
                    self.id
                ),
            ));
        }
        if r.members.len() > MAX_ENROLL {
            return Err(FsError::new(
                Errno::Inval,
                format!(
                    "{} members in one enrollment; at most {MAX_ENROLL}",
                    r.members.len()
                ),
            ));
        }
        let mut by_node: std::collections::BTreeMap<u32, Vec<u64>> = Default::default();
        for (node, client) in &r.members {
            if *node >= self.cfg.nodes {
                return Err(FsError::new(
                    Errno::Inval,
                    format!(
                        "member (node {node}, client {client}): this instance has {} nodes",
                        self.cfg.nodes
                    ),
                ));
            }
            by_node.entry(*node).or_default().push(*client);
        }
        // The open record becomes durable while the nodes count their members: no member
        // learns its log id (and acts as one) before both are done.
        let mut opened = None;
        if r.open && !self.txns.homes.contains(r.txn) {
            opened = self.open_reserved(r.txn);
        }
        self.check_open(r.txn)?;
        // Each node counts its members before the home does: the home's check of its
        // members must never find one that its node does not know.
        let enroll = |undo: bool| {
            by_node.iter().map(move |(node, clients)| {
                let req = TxnEnrollNode {
                    txn: r.txn,
                    clients: clients.clone(),
                    undo,
                };
                self.call(*node, req)
            })
        };
        let (answers, durable) =
            futures::future::join(futures::future::join_all(enroll(false)), async {
                match opened {
                    Some(p) => p.durable().await,
                    None => Ok(()),
                }
            })
            .await;
        let mut logs: HashMap<(u32, u64), u64> = HashMap::new();
        let mut failure = None;
        for ((node, clients), answer) in by_node.iter().zip(answers) {
            match answer {
                Ok(ids) if ids.len() == clients.len() => {
                    logs.extend(clients.iter().map(|c| (*node, *c)).zip(ids));
                }
                Ok(_) => {
                    failure.get_or_insert_with(|| {
                        FsError::new(
                            Errno::Io,
                            format!("node {node} answered an enrollment with the wrong count"),
                        )
                    });
                }
                Err(e) => {
                    failure.get_or_insert(e);
                }
            }
        }
        if let Err(e) = durable {
            failure.get_or_insert(e);
        }
        let admitted = match failure {
            Some(e) => Err(e),
            None => self.admit(r.txn, &r.members),
        };
        if let Err(e) = admitted {
            for undone in futures::future::join_all(enroll(true)).await {
                if let Err(u) = undone {
                    tracing::warn!("taking back an enrollment in {:016x}: {u}", r.txn);
                }
            }
            return Err(e);
        }
        Ok(r.members.iter().map(|m| logs[m]).collect())
    }
}

impl ServePeer<TxnEnrollNode> for Node {
    async fn serve_peer(&self, r: TxnEnrollNode) -> FsResult<Vec<u64>> {
        if r.undo {
            self.txns.members.unenroll(r.txn, &r.clients);
            return Ok(Vec::new());
        }
        if r.clients.len() > MAX_ENROLL {
            return Err(FsError::new(
                Errno::Inval,
                format!(
                    "{} clients in one enrollment; at most {MAX_ENROLL}",
                    r.clients.len()
                ),
            ));
        }
        let mut seen = HashSet::new();
        for c in &r.clients {
            if !seen.insert(*c) {
                return Err(FsError::new(
                    Errno::Inval,
                    format!("client {c} of node {} is named twice", self.id),
                ));
            }
            if !self.clients.is_live(*c) {
                return Err(FsError::new(
                    Errno::Inval,
                    format!(
                        "client {c} is not connected to node {}: a member must be connected to its node to be enrolled",
                        self.id
                    ),
                ));
            }
        }
        // A member enrolled again (a resent request) keeps its log id.
        let fresh = self.txns.members.not_in(r.txn, &r.clients);
        let mut ids = self.new_client_ids(fresh).await?;
        let (logs, left) = self.txns.members.enroll(r.txn, &r.clients, &mut ids);
        for (old, c) in left {
            self.leave_txn(old, c);
        }
        Ok(logs)
    }
}
