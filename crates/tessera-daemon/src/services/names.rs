//! Operations on a file's names that span shards (rename, link, unlink, rmdir outside
//! transactions), driven by the shard of the file's inode from an intent it keeps durably
//! (`tessera_core::name_ops` has the stages and why they are safe).
//!
//! * [`ChangeNames`]: a client's daemon, its checks of the paths done, asks the inode's shard
//!   to carry out an operation. The shard records the intent (with the file's count raised
//!   for a new name) and drives it: each stage's steps, then the next stage recorded with the
//!   count change it makes, until the intent ends.
//! * [`NameStep`]: a path's shard (or a replaced file's inode shard) carries out one step,
//!   once: its answer is recorded with its effect, and a repeat gets the recorded answer.
//! * A shard that does not answer leaves the intent to the background task
//!   ([`Node::keep_names`]), which drives it again until it ends; so does a restart. The
//!   client is told `EHOSTDOWN`: the operation will complete by itself.
//!
//! Failpoints (`TESSERA_FAILPOINT`, for the crash tests): `names-<op>-<stage>-begun` ends the
//! daemon once a stage is recorded and before its steps; `names-<op>-<stage>-answered` once
//! its steps were carried out and before the next stage is recorded (the answers are lost).
//! `<op>` is `rename`, `link`, `remove` or `lost`; `<stage>` is `start`, `placed`,
//! `undoing`, `moving`, `dropping` or `releasing`.

use crate::Node;
use crate::rpc::ServePeer;
use crate::services::namespace_shard::now_ns;
use crate::store::{DbOp, Pending};
use std::sync::Arc;
use std::time::Duration;
use tessera_core::name_ops::{
    Count, Failed, Intent, NameOp, Outcome, Placed, Stage, Step, StepKey,
};
use tessera_core::namespace::Namespace;
use tessera_core::placement::{ino_shard, path_shard};
use tessera_core::txn_entries::busy;
use tessera_core::{Errno, FsError, FsResult, path};
use tessera_proto::{ChangeNames, FileKind, ForgetNameSteps, NameStep, Removal, RemoveName};

/// How often the background task looks at intents left to it.
const RETRY_EVERY: Duration = Duration::from_millis(500);

/// Whether an error says a step went unanswered (its outcome unknown), rather than that a
/// shard refused it.
fn unanswered(e: &FsError) -> bool {
    matches!(
        e.errno,
        Errno::HostDown | Errno::ConnRefused | Errno::TimedOut | Errno::Proto | Errno::Io
    )
}

fn op_name(op: &NameOp) -> &'static str {
    match op {
        NameOp::Rename { .. } => "rename",
        NameOp::Link { .. } => "link",
        NameOp::Remove { .. } => "remove",
        NameOp::Lost { .. } => "lost",
    }
}

fn stage_name(stage: &Stage) -> &'static str {
    match stage {
        Stage::Start => "start",
        Stage::Placed { .. } => "placed",
        Stage::Undoing { .. } => "undoing",
        Stage::Moving { .. } => "moving",
        Stage::Dropping { .. } => "dropping",
        Stage::Releasing { .. } => "releasing",
    }
}

/// The failpoint of an intent's stage (`names-<op>-<stage>-<when>`).
fn names_failpoint(node: &Node, intent: &Intent, when: &str) -> FsResult<()> {
    node.failpoints.crash_at(&format!(
        "names-{}-{}-{when}",
        op_name(&intent.op),
        stage_name(&intent.stage)
    ))
}

/// The count change an intent makes, as namespace changes.
fn count_change(ns: &mut Namespace, ino: u64, count: Count, op: &NameOp) -> FsResult<Vec<DbOp>> {
    let changes = match count {
        Count::Keep => Vec::new(),
        // A link is a file's further name (checked: regular file, within the most names);
        // a rename's new name exists beside the old one for a moment, whatever the kind.
        Count::Up if matches!(op, NameOp::Link { .. }) => ns.link(ino, now_ns())?.1,
        Count::Up => ns.add_name(ino, now_ns())?.1,
        Count::Down => ns.unlink(ino, now_ns()).1,
    };
    Ok(changes.into_iter().map(DbOp::from).collect())
}

impl ServePeer<RemoveName> for Node {
    async fn serve_peer(&self, r: RemoveName) -> FsResult<Removal> {
        let p = self.settled(&r.path).await?;
        let found = self.shards.namespace(|ns| {
            // A transaction's entry: the lookup, which sees it as the client's view does.
            if self.txns.entries(|e| e.get(&p)).is_some() {
                return None;
            }
            ns.get(&p)
        });
        let Some(file) = found else {
            return Ok(Removal::NotHere);
        };
        if file.kind == FileKind::Dir {
            return Err(FsError::new(
                Errno::IsDir,
                format!("{} is a directory; use rmdir", self.user_path(&p)),
            ));
        }
        if ino_shard(file.ino) != self.id {
            return Ok(Removal::Elsewhere(file));
        }
        // The inode is here: the request its daemon would send next, served here.
        self.serve_peer(ChangeNames {
            file,
            op: NameOp::Remove { path: p },
        })
        .await?;
        Ok(Removal::Done)
    }
}

impl ServePeer<ChangeNames> for Node {
    async fn serve_peer(&self, r: ChangeNames) -> FsResult<()> {
        let op = normalized(r.op)?;
        if let NameOp::Lost { .. } = op {
            // Only a release (a step of another file's rename) takes a name off a count.
            return Err(FsError::new(
                Errno::Inval,
                "a file loses a name only by a removal or a rename that replaces it",
            ));
        }
        if ino_shard(r.file.ino) != self.id {
            return Err(FsError::new(
                Errno::Inval,
                format!(
                    "inode {:#x} is held by node {}, not by node {}",
                    r.file.ino,
                    ino_shard(r.file.ino),
                    self.id
                ),
            ));
        }
        let ino = r.file.ino;
        self.names
            .serialized(ino, async {
                // What came before on this file first (a retried operation finds the first
                // attempt's intent here, and sees its outcome).
                self.finish_file(ino).await?;
                let linking = match &op {
                    NameOp::Link { from, .. } => Some(from.clone()),
                    _ => None,
                };
                let begin = async {
                    if let NameOp::Remove { path } = &op
                        && path_shard(path, self.cfg.nodes) == self.id
                        && let Some(intent) = self.remove_here(r.file, path).await?
                    {
                        return self.drive_names(intent).await;
                    }
                    // No check of names against counts counts meanwhile.
                    let (intent, durable) = self
                        .names
                        .beginning(|| self.begin_names(r.file, op, None))
                        .await?;
                    durable.durable().await?;
                    match intent {
                        Some(intent) => self.drive_names(intent).await,
                        None => Ok(()),
                    }
                };
                match linking {
                    // Under the flush lock: no flush makes a PFS copy while the file gains a
                    // name.
                    Some(from) => {
                        self.flush_locks
                            .serialized(ino, async {
                                self.refuse_link_of_flushed(&from).await?;
                                begin.await
                            })
                            .await
                    }
                    None => begin.await,
                }
            })
            .await
    }
}

/// The operation with its paths normalised (they come from the wire).
fn normalized(op: NameOp) -> FsResult<NameOp> {
    Ok(match op {
        NameOp::Rename { from, to } => NameOp::Rename {
            from: path::normalize(&from)?,
            to: path::normalize(&to)?,
        },
        NameOp::Link { from, to } => NameOp::Link {
            from: path::normalize(&from)?,
            to: path::normalize(&to)?,
        },
        NameOp::Remove { path } => NameOp::Remove {
            path: path::normalize(&path)?,
        },
        NameOp::Lost { path } => NameOp::Lost {
            path: path::normalize(&path)?,
        },
    })
}

impl ServePeer<NameStep> for Node {
    async fn serve_peer(&self, r: NameStep) -> FsResult<Outcome> {
        // A repeat gets the first copy's answer once its write is durable (it was queued
        // under the namespace lock, before the answer could be seen).
        let repeat = self.shards.namespace(|_| {
            self.names
                .answered(r.key)
                .map(|o| (o, self.store.barrier()))
        });
        if let Some((o, durable)) = repeat {
            durable.durable().await?;
            return Ok(o);
        }
        match r.step {
            Step::Put { path, file } => {
                let p = self.settled(&path).await?;
                self.step_on_entries(r.key, &p, |ns| {
                    let (replaced, changes) = ns.put(&p, file)?;
                    Ok((Outcome::Replaced(replaced), changes))
                })
                .await
            }
            Step::Place { path, file } => {
                let p = self.settled(&path).await?;
                self.step_on_entries(r.key, &p, |ns| match ns.get(&p) {
                    Some(d) if d.ino == file.ino => {
                        Ok((Outcome::Placed(Placed::Already), Vec::new()))
                    }
                    Some(_) => Ok((Outcome::Placed(Placed::Other), Vec::new())),
                    None => Ok((Outcome::Placed(Placed::Made), ns.put(&p, file)?.1)),
                })
                .await
            }
            Step::Remove { path, ino } => {
                let p = self.settled(&path).await?;
                self.step_on_entries(r.key, &p, |ns| {
                    let (removed, changes) = ns.remove(&p, ino)?;
                    Ok((Outcome::Removed(removed), changes))
                })
                .await
            }
            Step::Restore {
                path,
                ino,
                replaced,
            } => {
                let p = self.settled(&path).await?;
                self.step_on_entries(r.key, &p, |ns| {
                    let (undone, changes) = match (ns.get(&p), replaced) {
                        (Some(d), Some(old)) if d.ino == ino => (true, ns.put(&p, old)?.1),
                        (Some(d), None) if d.ino == ino => (true, ns.remove(&p, ino)?.1),
                        // Another rename replaced the name meanwhile.
                        _ => (false, Vec::new()),
                    };
                    Ok((Outcome::Removed(undone), changes))
                })
                .await
            }
            Step::Release { path, file } => {
                let p = path::normalize(&path)?;
                // No check of names against counts counts meanwhile.
                let (intent, durable) = self
                    .names
                    .beginning(|| self.begin_names(file, NameOp::Lost { path: p }, Some(r.key)))
                    .await?;
                durable.durable().await?;
                if intent.is_some() {
                    // The file went with that name: its bytes go, in the background (the
                    // release itself is recorded).
                    self.names.wake();
                }
                Ok(Outcome::Done)
            }
            other => Err(FsError::new(
                Errno::Inval,
                format!("{other:?} is not a step a shard carries out"),
            )),
        }
    }
}

impl ServePeer<ForgetNameSteps> for Node {
    async fn serve_peer(&self, r: ForgetNameSteps) -> FsResult<()> {
        let pending = {
            // Under the namespace lock: in the store's order, after the answers' rows.
            self.shards.namespace(|_| {
                let gone = self.names.forget_answers(&r.keys);
                self.store
                    .submit(gone.into_iter().map(DbOp::DelNameStep).collect())
            })
        };
        pending.durable().await
    }
}

impl Node {
    /// The path normalised, with a decided transaction's pending entry there settled first.
    async fn settled(&self, p: &str) -> FsResult<String> {
        let p = path::normalize(p)?;
        self.settle_entry(&p, None).await?;
        Ok(p)
    }

    /// Carries out a step on this shard's entries once for `key`: refused where a
    /// transaction's pending entry is at `p`; its answer recorded in the same write as its
    /// changes.
    async fn step_on_entries(
        &self,
        key: StepKey,
        p: &str,
        change: impl FnOnce(
            &mut Namespace,
        )
            -> FsResult<(Outcome, Vec<tessera_core::namespace::NamespaceChange>)>,
    ) -> FsResult<Outcome> {
        let (outcome, durable) = self.shards.namespace(|ns| {
            // A repeat that raced the first copy: the first one's answer, once durable.
            if let Some(o) = self.names.answered(key) {
                Ok((o, self.store.barrier()))
            } else {
                if let Some((txn, _)) = self.txns.entries(|e| e.get(p)) {
                    return Err(busy(&self.user_path(p), txn));
                }
                let (outcome, changes) = change(ns)?;
                let mut ops: Vec<DbOp> = changes.into_iter().map(DbOp::from).collect();
                ops.push(DbOp::PutNameStep { key, outcome });
                self.names.record_answer(key, outcome);
                Ok((outcome, self.store.submit(ops)))
            }
        })?;
        durable.durable().await?;
        Ok(outcome)
    }

    /// The removal of a file's last name when its name is on this shard too (a file created
    /// here and never renamed or linked): the name, the count and the inode go in one write
    /// with the intent at its `Dropping` stage (`Intent::removed_here`). `None`: not such a
    /// case (another name, a transaction's entry, a name that no longer leads to the file);
    /// the general removal answers it.
    async fn remove_here(
        &self,
        file: tessera_proto::Dentry,
        path: &str,
    ) -> FsResult<Option<Intent>> {
        let p = self.settled(path).await?;
        let begun = self
            .names
            .beginning(|| {
                self.shards.namespace(|ns| {
                    let named = ns.get(&p).is_some_and(|d| d.ino == file.ino);
                    let last = ns.attr(file.ino).is_some_and(|a| a.nlink == 1);
                    if !named || !last || self.txns.entries(|e| e.get(&p)).is_some() {
                        return Ok(None);
                    }
                    let (_, changes) = ns.remove(&p, file.ino)?;
                    let mut ops: Vec<DbOp> = changes.into_iter().map(DbOp::from).collect();
                    let intent = Intent::removed_here(rand::random::<u64>(), file, p);
                    ops.extend(count_change(ns, file.ino, Count::Down, &intent.op)?);
                    ops.push(DbOp::PutNameIntent(intent.clone()));
                    self.names.set(intent.id, Some(intent.clone()));
                    tracing::debug!(intent = intent.id, ino = file.ino, "removal on one shard");
                    Ok(Some((intent, self.store.submit(ops))))
                })
            })
            .await?;
        let Some((intent, durable)) = begun else {
            return Ok(None);
        };
        durable.durable().await?;
        Ok(Some(intent))
    }

    /// Records a new intent on `file` (held here) with the count change it begins with; with
    /// `answering`, also the answer to that step of another node's intent (a release).
    /// `None`: nothing is left to drive.
    fn begin_names(
        &self,
        file: tessera_proto::Dentry,
        op: NameOp,
        answering: Option<StepKey>,
    ) -> FsResult<(Option<Intent>, Pending)> {
        self.shards.namespace(|ns| {
        let mut ops = Vec::new();
        let intent = match ns.attr(file.ino) {
            Some(attr) => {
                // Random: an id is never reused, even by a node that lost its counter, so an
                // answer another shard kept for a crashed intent never answers a new one.
                let id = rand::random::<u64>();
                let counted = op.clone();
                let (intent, count) = Intent::begin(id, file, op, attr.nlink);
                tracing::debug!(intent = id, ino = file.ino, op = ?counted, nlink = attr.nlink, ?count, ?answering, "name operation begun");
                ops = count_change(ns, file.ino, count, &counted)?;
                intent
            }
            // Gone meanwhile (its last name went): a release has nothing to count.
            None if matches!(op, NameOp::Lost { .. }) => None,
            None => {
                return Err(FsError::new(
                    Errno::NoEnt,
                    format!(
                        "inode {:#x} no longer exists (its last name was removed meanwhile)",
                        file.ino
                    ),
                ));
            }
        };
        if let Some(i) = &intent {
            ops.push(DbOp::PutNameIntent(i.clone()));
            self.names.set(i.id, Some(i.clone()));
        }
        if let Some(key) = answering {
            ops.push(DbOp::PutNameStep {
                key,
                outcome: Outcome::Done,
            });
            self.names.record_answer(key, Outcome::Done);
        }
        Ok((intent, self.store.submit(ops)))
        })
    }

    /// Drives the intents recorded for file `ino` to their ends, under the file's lock (held
    /// by the caller). `EHOSTDOWN` if one of them cannot end now.
    async fn finish_file(&self, ino: u64) -> FsResult<()> {
        for intent in self.names.of_file(ino) {
            // Another error ended it (its own request was answered with that error).
            match self.drive_names(intent).await {
                Err(e) if e.errno == Errno::HostDown => {
                    return Err(FsError::new(
                        Errno::HostDown,
                        format!(
                            "an earlier operation on the file is not finished: {}",
                            e.message
                        ),
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Drives an intent to its end, under its file's lock (held by the caller); answers as
    /// the operation does. A step left unanswered leaves it to the background task
    /// (`EHOSTDOWN`: it will complete by itself).
    pub(crate) async fn drive_names(&self, mut intent: Intent) -> FsResult<()> {
        let (id, op) = (intent.id, intent.op.clone());
        let mut touched: Vec<(u32, StepKey)> = Vec::new();
        let mut failure: Option<FsError> = None;
        let result = loop {
            names_failpoint(self, &intent, "begun")?;
            let mut outcome = Outcome::Done;
            let mut left = None;
            // Released in the background once the stage's end is recorded with them.
            let mut to_drop = Vec::new();
            for step in intent.steps() {
                if let Step::DropEverywhere { ino } = step {
                    to_drop.push(ino);
                    continue;
                }
                let pfs = matches!(step, Step::PfsRename { .. } | Step::PfsRemove { .. });
                match self.carry_out(&intent, step, &mut touched).await {
                    Ok(o) => outcome = o,
                    // The PFS answered: its refusal is the operation's answer, and the names
                    // stay as they are now (as before intents).
                    Err(e) if pfs => {
                        tracing::warn!("{}: the PFS copy: {e}", self.describe(&intent.op));
                        failure.get_or_insert(e);
                    }
                    Err(e) if unanswered(&e) || !refusable(&intent.stage) => {
                        left = Some(e);
                        break;
                    }
                    Err(e) => {
                        outcome = Outcome::Refused;
                        failure.get_or_insert(e);
                        break;
                    }
                }
            }
            if let Some(e) = left {
                // Taken up again by the background task (or the next operation on the
                // file), as after a crash.
                let again = intent.clone().resumed();
                self.names.set(id, Some(again));
                self.names.wake();
                break Err(FsError::new(
                    Errno::HostDown,
                    format!(
                        "{} is recorded but not finished ({}); it completes by itself once the daemons it needs answer",
                        self.describe(&intent.op),
                        e.message
                    ),
                ));
            }
            names_failpoint(self, &intent, "answered")?;
            let (advance, durable) = self.advance_names(intent, outcome, &to_drop)?;
            durable.durable().await?;
            self.drops.add(&to_drop);
            if let Some(f) = advance.failed {
                failure.get_or_insert_with(|| self.failure(f, &op));
            }
            match advance.next {
                Some(next) => intent = next,
                None => break failure.take().map_or(Ok(()), Err),
            }
        };
        if self.names.get(id).is_none() {
            // Every shard the intent may have asked, at every stage: drivers before this
            // one (left to the background, or before a restart) asked them too.
            for shard in self.shards_of(&op) {
                for stage in 0..=4 {
                    touched.push((
                        shard,
                        StepKey {
                            node: self.id,
                            intent: id,
                            stage,
                        },
                    ));
                }
            }
            self.forget_steps(touched);
        }
        result
    }

    /// Records the intent's next stage (or its end) with the count change it makes, and the
    /// files whose bytes are to be released everywhere (`to_drop`).
    fn advance_names(
        &self,
        intent: Intent,
        outcome: Outcome,
        to_drop: &[u64],
    ) -> FsResult<(tessera_core::name_ops::Advance, Pending)> {
        self.shards.namespace(|ns| {
            let (id, ino, op) = (intent.id, intent.file.ino, intent.op.clone());
            let nlink = ns.attr(ino).map_or(0, |a| a.nlink);
            let stage = intent.stage.clone();
            let advance = intent.advance(outcome, nlink);
            tracing::debug!(
                intent = id,
                ino,
                ?op,
                ?stage,
                ?outcome,
                nlink,
                count = ?advance.count,
                next = ?advance.next.as_ref().map(|n| &n.stage),
                "name operation advanced"
            );
            let mut ops = count_change(ns, ino, advance.count, &op)?;
            match &advance.next {
                Some(next) => ops.push(DbOp::PutNameIntent(next.clone())),
                None => ops.push(DbOp::DelNameIntent(id)),
            }
            if !to_drop.is_empty() {
                ops.push(DbOp::PutFilesToDrop(to_drop.to_vec()));
            }
            self.names.set(id, advance.next.clone());
            Ok((advance, self.store.submit(ops)))
        })
    }

    /// Carries out one step: on its shard, or here (PFS, the file's bytes everywhere).
    async fn carry_out(
        &self,
        intent: &Intent,
        step: Step,
        touched: &mut Vec<(u32, StepKey)>,
    ) -> FsResult<Outcome> {
        let key = intent.key(self.id);
        let shard = match &step {
            Step::Put { path, .. }
            | Step::Place { path, .. }
            | Step::Remove { path, .. }
            | Step::Restore { path, .. } => Some(path_shard(path, self.cfg.nodes)),
            Step::Release { file, .. } => Some(ino_shard(file.ino)),
            _ => None,
        };
        if let Some(shard) = shard {
            touched.push((shard, key));
            return self.call(shard, NameStep { key, step }).await;
        }
        match step {
            Step::PfsRename { from, to, replaced } => {
                let pfs = self.pfs.clone();
                tokio::task::spawn_blocking(move || {
                    if !pfs.rename(&from, &to)? && replaced {
                        // No copy of its own moved there: the replaced file's goes.
                        match pfs.lstat(&to)?.map(|m| m.kind) {
                            Some(FileKind::Dir) => pfs.remove_dir(&to)?,
                            Some(_) => pfs.remove_file(&to)?,
                            None => {}
                        }
                    }
                    Ok(())
                })
                .await
                .map_err(crate::blocking_failed)??;
            }
            Step::PfsRemove { path, dir } => {
                let removed = self
                    .on_pfs(&path, move |pfs, p| {
                        if dir {
                            pfs.remove_dir(p)
                        } else {
                            pfs.remove_file(p)
                        }
                    })
                    .await;
                match removed {
                    Err(e) if dir => tracing::warn!(
                        "rmdir {}: the PFS directory stays: {e}",
                        self.user_path(&path)
                    ),
                    Err(e) => return Err(e),
                    Ok(()) => {}
                }
            }
            Step::DropEverywhere { .. } => {
                unreachable!("drive_names lists the file to drop with the stage's end")
            }
            _ => unreachable!("shard steps are sent above"),
        }
        Ok(Outcome::Done)
    }

    /// The error an operation that failed answers with (a refusal answers with the
    /// shard's own error, kept where it came).
    fn failure(&self, f: Failed, op: &NameOp) -> FsError {
        match (f, op) {
            (Failed::NameTaken, NameOp::Link { to, .. }) => self.exists(to),
            (Failed::NotNamed, NameOp::Remove { path }) => self.enoent(path),
            _ => FsError::new(
                Errno::Busy,
                format!("{} was refused; try again", self.describe(op)),
            ),
        }
    }

    fn describe(&self, op: &NameOp) -> String {
        match op {
            NameOp::Rename { from, to } => format!(
                "the rename of {} to {}",
                self.user_path(from),
                self.user_path(to)
            ),
            NameOp::Link { to, .. } => format!("the link {}", self.user_path(to)),
            NameOp::Remove { path } => format!("the removal of {}", self.user_path(path)),
            NameOp::Lost { path } => format!("the replacement of {}", self.user_path(path)),
        }
    }

    /// The path shards an operation's steps go to.
    fn shards_of(&self, op: &NameOp) -> Vec<u32> {
        let nodes = self.cfg.nodes;
        match op {
            NameOp::Rename { from, to } => vec![path_shard(from, nodes), path_shard(to, nodes)],
            NameOp::Link { to, .. } => vec![path_shard(to, nodes)],
            NameOp::Remove { path } | NameOp::Lost { path } => vec![path_shard(path, nodes)],
        }
    }

    /// The answers other shards recorded for an intent that ended go (in the background, at
    /// most once: one lost to a crash stays, a few bytes).
    fn forget_steps(&self, touched: Vec<(u32, StepKey)>) {
        if touched.is_empty() {
            return;
        }
        let mut by_shard: std::collections::BTreeMap<u32, Vec<StepKey>> = Default::default();
        for (shard, key) in touched {
            let keys = by_shard.entry(shard).or_default();
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        self.names.to_forget(by_shard);
        self.names.wake();
    }

    /// The background task: drives the intents left to it (a shard did not answer, or the
    /// daemon restarted) until they end.
    pub async fn keep_names(self: Arc<Self>) {
        loop {
            if self.stopping() {
                return;
            }
            for (shard, keys) in self.names.take_forgets() {
                let node = self.clone();
                tokio::spawn(async move {
                    if let Err(e) = node.call(shard, ForgetNameSteps { keys }).await {
                        tracing::debug!("forgetting recorded steps on node {shard}: {e}");
                    }
                });
            }
            for ino in self.names.inodes_in_flight() {
                let node = self.clone();
                tokio::spawn(async move {
                    // A file whose lock is held is being driven by its holder.
                    let finished = node.names.unless_held(ino, node.finish_file(ino)).await;
                    if let Some(Err(e)) = finished {
                        tracing::debug!("a name operation is still waiting: {e}");
                    }
                });
            }
            tokio::select! {
                () = self.names.woken() => tokio::time::sleep(RETRY_EVERY).await,
                _ = tokio::time::sleep(RETRY_EVERY) => {}
            }
        }
    }
}

/// Whether a shard's refusal of a step of this stage fails the operation (before its names
/// changed, or while they can still be undone); later steps are retried until they succeed.
fn refusable(stage: &Stage) -> bool {
    matches!(stage, Stage::Start | Stage::Placed { .. })
}
