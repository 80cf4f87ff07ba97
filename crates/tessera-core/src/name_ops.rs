//! Operations that change a file's names across shards (rename, link, unlink, rmdir): the
//! steps, and how each survives a crash between two of them.
//!
//! An entry lives on its path's shard and the file's link count on its inode's shard, so an
//! operation on names touches two to four shards (a rename: the old name's, the new name's,
//! the inode's, and the shard of the file it replaces). A daemon killed between two steps
//! must leave the names right: never a name more than the count (removing one name would
//! then destroy the file another name still leads to), and, after a restart, the operation
//! done or not done.
//!
//! So the inode's shard drives every such operation from an [`Intent`] it keeps durably:
//!
//! * the count goes up for a new name in the same write that records the intent, before the
//!   name exists, and down for a removed name only once the removal was seen: at every step
//!   names <= count;
//! * each step on another shard is applied exactly once: the shard records the step's answer
//!   in the same write as its effect, under the intent's id and stage ([`StepKey`]), and
//!   answers a repeat with the recorded answer. A driver that starts again from the last
//!   recorded stage (after a crash, or a shard that did not answer) repeats the step it cannot
//!   know was done, and learns what it did, even if others changed the entry since;
//! * the request that records an intent drives it to its end; after a failure (a shard that
//!   does not answer) or a restart, the node's background task does, until its shards answer;
//!   the recorded answers are forgotten once the intent has ended.
//!
//! A rename of `from` to `to`, replacing the file R that `to` named:
//!
//! ```text
//!  Start ─put to→file─► Placed{R} ─remove from─► Moving{R} ─PFS copy moves─► Releasing{R} ─► done
//!  (count +1)                     (count -1 if         │                    (R's shard: its
//!                                  this step            └── no R ─────────►  count -1)
//!                                  removed it)
//!  a refused removal of `from`: Placed{R} ─► Undoing{R} ─put R back at to─► done (count -1)
//! ```
//!
//! A link: Start (count +1) ─place `to` where free─► done; a name taken: count -1, `EEXIST`.
//! An unlink or rmdir: Start ─remove `path`─► count -1, and with the last name the inode goes
//! and the stage is Dropping: the file's bytes on every node and its PFS copy go ─► done.
//! A file that lost a name to another's rename (`Lost`): count -1 at once; with its last name,
//! Dropping.

use crate::meta::{Dentry, FileKind};
use serde::{Deserialize, Serialize};

/// What an intent does to a file's names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum NameOp {
    /// The file's name `from` becomes `to` (replacing what `to` named).
    Rename { from: String, to: String },
    /// `to` becomes one more name of the file, whose name `from` is (where its PFS copy, which
    /// keeps one name, would be).
    Link { from: String, to: String },
    /// `path` stops naming the file (unlink, rmdir).
    Remove { path: String },
    /// Another file's rename replaced the entry `path` that named this file.
    Lost { path: String },
}

/// How far an intent got; recorded with each change it makes on the inode's shard.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Stage {
    /// Recorded (for a new name, with the count raised): the first remote step is next.
    Start,
    /// A rename's new name leads to the file; the old one is to go. `replaced`: what the new
    /// name led to before (another file, which loses that name at the end).
    Placed { replaced: Option<Dentry> },
    /// A rename whose old name could not be removed: the new name's entry is put back.
    Undoing { replaced: Option<Dentry> },
    /// A rename's names are done: the PFS copy follows (and with `last`, the file had no name
    /// left after all, and its bytes go).
    Moving {
        replaced: Option<Dentry>,
        last: bool,
    },
    /// The inode went with its last name: its bytes go on every node, and its PFS copy at
    /// `pfs` (a path) if there is one to remove.
    Dropping { pfs: Option<String> },
    /// The file a rename replaced is being told it lost its name (sent at most once).
    Releasing { replaced: Dentry },
}

/// One operation on a file's names, kept on the file's inode's shard until it ends.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intent {
    /// Unique on its node.
    pub id: u64,
    /// The file whose names change (its inode is on the node that keeps the intent).
    pub file: Dentry,
    pub op: NameOp,
    pub stage: Stage,
    /// Whether the current stage's steps may have been carried out before by a driver that
    /// lost their answers (it crashed, or a shard did not answer). Only the PFS steps, which
    /// no shard records, look at it.
    #[serde(default)]
    pub retried: bool,
}

/// Under which a shard records a step's answer: the node that drives the intent, its id,
/// and the stage the step belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct StepKey {
    pub node: u32,
    pub intent: u64,
    pub stage: u8,
}

impl Stage {
    /// The stage's number in a [`StepKey`] (stages without a recorded step share one).
    pub fn seq(&self) -> u8 {
        match self {
            Stage::Start => 0,
            Stage::Placed { .. } => 1,
            Stage::Undoing { .. } => 2,
            Stage::Releasing { .. } => 3,
            Stage::Moving { .. } | Stage::Dropping { .. } => 4,
        }
    }
}

/// A change to the file's link count, made in the same write as the intent's stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Count {
    Keep,
    /// One more name (made for any kind of file: a rename's new name exists for a moment
    /// beside the old one).
    Up,
    /// One name fewer; with the last, the inode goes.
    Down,
}

/// What a driver does next. The steps on shards (`Put` to `Release`) are applied exactly
/// once per [`StepKey`]; the others are idempotent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Step {
    /// Puts the entry `path -> file` on the path's shard; answers what it replaced.
    Put { path: String, file: Dentry },
    /// Puts the entry only where the name is free; answers whether `path` now leads to the
    /// file.
    Place { path: String, file: Dentry },
    /// Removes `path`'s entry if it leads to `ino`; answers whether this step removed it.
    Remove { path: String, ino: u64 },
    /// Undoes a rename's new name: `path` leads to `replaced` again (or to nothing), if it
    /// still leads to `ino`; answers whether it did (`Removed`: the file's entry went).
    Restore {
        path: String,
        ino: u64,
        replaced: Option<Dentry>,
    },
    /// The PFS copy of `from` moves to `to`; where there is none, `to`'s copy (that of the
    /// replaced file, `replaced`) goes.
    PfsRename {
        from: String,
        to: String,
        replaced: bool,
    },
    /// The PFS copy at `path` goes (a directory's, with `dir`).
    PfsRemove { path: String, dir: bool },
    /// Every node forgets the file's bytes (its ownership and logs).
    DropEverywhere { ino: u64 },
    /// Tells `file`'s inode shard that `path` no longer leads to it (its count goes down).
    Release { path: String, file: Dentry },
}

/// What a step's shard answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// [`Step::Put`]: the entry it replaced.
    Replaced(Option<Dentry>),
    /// [`Step::Remove`] and [`Step::Restore`]: whether this step took the file's entry away.
    Removed(bool),
    /// [`Step::Place`]: what it found.
    Placed(Placed),
    /// The shard refused the step for good (a transaction's entry is in the way, say).
    Refused,
    /// Any other step is done.
    Done,
}

/// What a [`Step::Place`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Placed {
    /// The name was free and leads to the file now.
    Made,
    /// The name led to the file already (another name of it: `EEXIST` as for any).
    Already,
    /// The name leads to another file.
    Other,
}

/// Why an operation failed (after it was undone).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failed {
    /// A link's name was taken (`EEXIST`).
    NameTaken,
    /// The name to remove no longer led to the file (`ENOENT`).
    NotNamed,
    /// A shard refused a step (its error is the answer).
    Refused,
}

/// The result of a step: the intent as recorded next and the count change made with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Advance {
    /// `None`: the intent is done and forgotten.
    pub next: Option<Intent>,
    pub count: Count,
    /// The operation failed; the driver still runs `next` to its end, then answers this.
    pub failed: Option<Failed>,
}

impl Intent {
    /// A new intent, and the count change its first write makes. `nlink`: the file's count
    /// now. `None` for a `Lost` that leaves the file names: its count change is all.
    pub fn begin(id: u64, file: Dentry, op: NameOp, nlink: u32) -> (Option<Intent>, Count) {
        let (stage, count) = match &op {
            NameOp::Rename { .. } | NameOp::Link { .. } => (Some(Stage::Start), Count::Up),
            NameOp::Remove { .. } => (Some(Stage::Start), Count::Keep),
            NameOp::Lost { .. } => (
                (nlink <= 1).then_some(Stage::Dropping { pfs: None }),
                Count::Down,
            ),
        };
        let intent = stage.map(|stage| Intent {
            id,
            file,
            op,
            stage,
            retried: false,
        });
        (intent, count)
    }

    /// A removal of a file's last name where the name's shard is the inode's: the name and the
    /// count go in the write that records this intent, which starts at `Dropping` (the PFS
    /// copy, then the bytes everywhere). The same states as the general removal's, without its
    /// first stage's writes and step.
    pub fn removed_here(id: u64, file: Dentry, path: String) -> Intent {
        Intent {
            id,
            file,
            op: NameOp::Remove { path: path.clone() },
            stage: Stage::Dropping { pfs: Some(path) },
            retried: false,
        }
    }

    /// The intent as a driver takes it up again after its steps went unanswered (a crash,
    /// a shard that did not answer).
    pub fn resumed(self) -> Intent {
        Intent {
            retried: true,
            ..self
        }
    }

    /// Under which the shards record the current stage's step, for an intent of `node`.
    pub fn key(&self, node: u32) -> StepKey {
        StepKey {
            node,
            intent: self.id,
            stage: self.stage.seq(),
        }
    }

    fn from(&self) -> &str {
        match &self.op {
            NameOp::Rename { from, .. } => from,
            NameOp::Link { to, .. } => to,
            NameOp::Remove { path } | NameOp::Lost { path } => path,
        }
    }

    fn to(&self) -> &str {
        match &self.op {
            NameOp::Rename { to, .. } | NameOp::Link { to, .. } => to,
            NameOp::Remove { path } | NameOp::Lost { path } => path,
        }
    }

    /// The steps of the current stage, in order; the last one's outcome advances the intent
    /// (the ones before it are idempotent and answer [`Outcome::Done`]).
    pub fn steps(&self) -> Vec<Step> {
        let ino = self.file.ino;
        let is_file = self.file.kind == FileKind::File;
        match &self.stage {
            Stage::Start => match &self.op {
                NameOp::Rename { to, .. } => vec![Step::Put {
                    path: to.clone(),
                    file: self.file,
                }],
                NameOp::Link { to, .. } => vec![Step::Place {
                    path: to.clone(),
                    file: self.file,
                }],
                NameOp::Remove { path } => vec![Step::Remove {
                    path: path.clone(),
                    ino,
                }],
                // `begin` records no Start for it.
                NameOp::Lost { .. } => Vec::new(),
            },
            Stage::Placed { .. } => vec![Step::Remove {
                path: self.from().to_string(),
                ino,
            }],
            Stage::Undoing { replaced } => vec![Step::Restore {
                path: self.to().to_string(),
                ino,
                replaced: *replaced,
            }],
            // The file lost its new name too (another rename replaced it there): its PFS copy
            // goes, and never over the copy of the file that has that name now.
            Stage::Moving { last: true, .. } => {
                let mut steps = Vec::new();
                if is_file {
                    steps.push(Step::DropEverywhere { ino });
                }
                steps.push(Step::PfsRemove {
                    path: self.from().to_string(),
                    dir: self.file.kind == FileKind::Dir,
                });
                steps
            }
            Stage::Moving { replaced, .. } => {
                // A repeat never takes `to`'s copy: it may be the one the first attempt moved.
                vec![Step::PfsRename {
                    from: self.from().to_string(),
                    to: self.to().to_string(),
                    replaced: replaced.is_some() && !self.retried,
                }]
            }
            Stage::Dropping { pfs } => {
                let mut steps = Vec::new();
                if is_file {
                    steps.push(Step::DropEverywhere { ino });
                }
                if let Some(path) = pfs {
                    steps.push(Step::PfsRemove {
                        path: path.clone(),
                        dir: self.file.kind == FileKind::Dir,
                    });
                }
                steps
            }
            Stage::Releasing { replaced } => vec![Step::Release {
                path: self.to().to_string(),
                file: *replaced,
            }],
        }
    }

    fn at_stage(self, stage: Stage) -> Intent {
        Intent {
            stage,
            retried: false,
            ..self
        }
    }

    /// The intent after its stage's last step answered `outcome`; `nlink`: the file's count
    /// before the change this makes (whether a removal took its last name).
    pub fn advance(self, outcome: Outcome, nlink: u32) -> Advance {
        let last = nlink <= 1;
        let done = |count, failed| Advance {
            next: None,
            count,
            failed,
        };
        let go = |next: Intent, count, failed| Advance {
            next: Some(next),
            count,
            failed,
        };
        // With the last name gone, the inode went: its bytes go too.
        let drop_or_done = |this: Intent, failed, pfs| {
            if last {
                go(this.at_stage(Stage::Dropping { pfs }), Count::Down, failed)
            } else {
                done(Count::Down, failed)
            }
        };
        match (&self.stage, outcome) {
            // The new name was another name of the file already: POSIX leaves both, and the
            // count goes back.
            (Stage::Start, Outcome::Replaced(Some(r))) if r.ino == self.file.ino => {
                drop_or_done(self, None, None)
            }
            (Stage::Start, Outcome::Replaced(replaced)) => {
                go(self.at_stage(Stage::Placed { replaced }), Count::Keep, None)
            }
            (Stage::Start, Outcome::Placed(Placed::Made)) => done(Count::Keep, None),
            (Stage::Start, Outcome::Placed(_)) => drop_or_done(self, Some(Failed::NameTaken), None),
            (Stage::Start, Outcome::Removed(true)) => {
                let pfs = Some(self.from().to_string());
                drop_or_done(self, None, pfs)
            }
            (Stage::Start, Outcome::Removed(false)) => done(Count::Keep, Some(Failed::NotNamed)),
            (Stage::Start, Outcome::Refused) => match self.op {
                // The count raised for the new name comes back down.
                NameOp::Rename { .. } | NameOp::Link { .. } => {
                    drop_or_done(self, Some(Failed::Refused), None)
                }
                _ => done(Count::Keep, Some(Failed::Refused)),
            },
            (Stage::Placed { replaced }, Outcome::Removed(removed)) => {
                let replaced = *replaced;
                // Removed by someone else (who took its name off the count): the count keeps
                // the new name's.
                let (count, last) = if removed {
                    (Count::Down, last)
                } else {
                    (Count::Keep, false)
                };
                go(self.at_stage(Stage::Moving { replaced, last }), count, None)
            }
            (Stage::Placed { replaced }, Outcome::Refused) => {
                let replaced = *replaced;
                go(
                    self.at_stage(Stage::Undoing { replaced }),
                    Count::Keep,
                    Some(Failed::Refused),
                )
            }
            // The new name is undone: the count goes back, and what it replaced has its name.
            (Stage::Undoing { .. }, Outcome::Removed(true)) => {
                drop_or_done(self, Some(Failed::Refused), None)
            }
            // Another rename replaced the new name meanwhile (and took it off the file's count):
            // what the new name had replaced lost its name for good.
            (Stage::Undoing { replaced }, Outcome::Removed(false)) => match *replaced {
                Some(replaced) => go(
                    self.at_stage(Stage::Releasing { replaced }),
                    Count::Keep,
                    Some(Failed::Refused),
                ),
                None => done(Count::Keep, Some(Failed::Refused)),
            },
            (Stage::Moving { replaced, .. }, _) => match *replaced {
                Some(replaced) => go(
                    self.at_stage(Stage::Releasing { replaced }),
                    Count::Keep,
                    None,
                ),
                None => done(Count::Keep, None),
            },
            (Stage::Dropping { .. } | Stage::Releasing { .. }, _) => done(Count::Keep, None),
            // An answer the step does not give: the stage is taken up again.
            (_, _) => go(self, Count::Keep, None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeMap, HashMap};

    fn file(ino: u64) -> Dentry {
        Dentry {
            ino,
            kind: FileKind::File,
        }
    }

    /// The shards, as one model: entries by path, counts by inode (a missing inode is gone),
    /// the inodes whose bytes were dropped everywhere, and the intents each node keeps.
    #[derive(Clone, Debug, Default)]
    struct World {
        entries: BTreeMap<String, Dentry>,
        counts: HashMap<u64, u32>,
        dropped: Vec<u64>,
        intents: Vec<Intent>,
        next_id: u64,
        /// The answers the shards recorded.
        recorded: HashMap<StepKey, Outcome>,
        /// Paths where a transaction's pending entry makes the shard refuse steps.
        blocked: std::collections::BTreeSet<String>,
    }

    impl World {
        fn names(&self, ino: u64) -> u32 {
            self.entries.values().filter(|d| d.ino == ino).count() as u32
        }

        /// Applies a count change; whether the inode went.
        fn count(&mut self, ino: u64, c: Count) {
            match c {
                Count::Keep => {}
                Count::Up => *self.counts.get_mut(&ino).expect("live") += 1,
                Count::Down => {
                    let n = self.counts.get_mut(&ino).expect("live");
                    if *n <= 1 {
                        self.counts.remove(&ino);
                    } else {
                        *n -= 1;
                    }
                }
            }
        }

        fn nlink(&self, ino: u64) -> u32 {
            self.counts.get(&ino).copied().unwrap_or(0)
        }

        /// A shard carries out a step once per key (a repeat gets the recorded answer);
        /// `None`: refused (a transaction's entry is at its path; nothing recorded).
        fn apply(&mut self, step: &Step, key: StepKey) -> Option<Outcome> {
            let recorded = matches!(
                step,
                Step::Put { .. }
                    | Step::Place { .. }
                    | Step::Remove { .. }
                    | Step::Restore { .. }
                    | Step::Release { .. }
            );
            if let Some(o) = self.recorded.get(&key).filter(|_| recorded) {
                return Some(*o);
            }
            let path = match step {
                Step::Put { path, .. }
                | Step::Place { path, .. }
                | Step::Remove { path, .. }
                | Step::Restore { path, .. } => Some(path),
                _ => None,
            };
            if path.is_some_and(|p| self.blocked.contains(p)) {
                return None;
            }
            let o = self.carry_out(step);
            if recorded {
                self.recorded.insert(key, o);
            }
            Some(o)
        }

        fn carry_out(&mut self, step: &Step) -> Outcome {
            match step {
                Step::Put { path, file } => {
                    Outcome::Replaced(self.entries.insert(path.clone(), *file))
                }
                Step::Place { path, file } => match self.entries.get(path) {
                    Some(d) if d.ino == file.ino => Outcome::Placed(Placed::Already),
                    Some(_) => Outcome::Placed(Placed::Other),
                    None => {
                        self.entries.insert(path.clone(), *file);
                        Outcome::Placed(Placed::Made)
                    }
                },
                Step::Remove { path, ino } => {
                    if self.entries.get(path).is_some_and(|d| d.ino == *ino) {
                        self.entries.remove(path);
                        Outcome::Removed(true)
                    } else {
                        Outcome::Removed(false)
                    }
                }
                Step::Restore {
                    path,
                    ino,
                    replaced,
                } => {
                    let ours = self.entries.get(path).is_some_and(|d| d.ino == *ino);
                    if ours {
                        match replaced {
                            Some(r) => self.entries.insert(path.clone(), *r),
                            None => self.entries.remove(path),
                        };
                    }
                    Outcome::Removed(ours)
                }
                Step::DropEverywhere { ino } => {
                    self.dropped.push(*ino);
                    Outcome::Done
                }
                Step::PfsRename { .. } | Step::PfsRemove { .. } => Outcome::Done,
                Step::Release { path, file } => {
                    // The replaced file's shard: its own intent, begun and driven at once.
                    self.start(*file, NameOp::Lost { path: path.clone() });
                    Outcome::Done
                }
            }
        }

        /// Records an intent as its inode's shard does (with its count change).
        fn start(&mut self, f: Dentry, op: NameOp) {
            self.next_id += 1;
            let nlink = self.nlink(f.ino);
            if nlink == 0 {
                return; // The file is gone: the daemon answers ENOENT.
            }
            let (intent, count) = Intent::begin(self.next_id, f, op, nlink);
            self.count(f.ino, count);
            self.intents.extend(intent);
        }

        /// Drives intent `i` by one stage: its steps, then the advance recorded. With
        /// `lose_answer`, the last step is carried out but its answer is lost (the driver
        /// crashed): the intent stays at its stage.
        fn drive_one(&mut self, i: usize, lose_answer: bool) {
            let intent = self.intents[i].clone();
            let steps = intent.steps();
            let mut outcome = Outcome::Done;
            for s in &steps {
                match self.apply(s, intent.key(0)) {
                    Some(o) => outcome = o,
                    // Refused: the stages before the names change fail; later ones wait.
                    None if matches!(intent.stage, Stage::Start | Stage::Placed { .. }) => {
                        outcome = Outcome::Refused;
                        break;
                    }
                    None => return,
                }
            }
            if lose_answer {
                self.intents[i] = intent.resumed();
                return;
            }
            let ino = intent.file.ino;
            let nlink = self.nlink(ino);
            let adv = intent.advance(outcome, nlink);
            self.count(ino, adv.count);
            match adv.next {
                Some(next) => self.intents[i] = next,
                None => {
                    self.intents.remove(i);
                }
            }
        }

        fn check(&self) -> Result<(), TestCaseError> {
            for (p, d) in &self.entries {
                prop_assert!(
                    self.counts.contains_key(&d.ino),
                    "{p} leads to inode {} which is gone",
                    d.ino
                );
                prop_assert!(!self.dropped.contains(&d.ino), "{p}'s bytes were dropped");
            }
            for (ino, n) in &self.counts {
                prop_assert!(
                    self.names(*ino) <= *n,
                    "inode {ino}: {} names, count {n}",
                    self.names(*ino)
                );
            }
            Ok(())
        }
    }

    #[derive(Clone, Debug)]
    enum Act {
        Rename(usize, usize),
        Link(usize, usize),
        Remove(usize),
        /// Drives intent n (modulo) by a stage.
        Drive(usize),
        /// Drives it, losing the answer of its last step (a crash).
        Crash(usize),
        /// A restart: every intent is taken up as after a crash.
        Restart,
        /// A transaction takes (or leaves) a path: its shard refuses steps there meanwhile.
        Block(usize),
        Unblock(usize),
    }

    fn act() -> impl Strategy<Value = Act> {
        prop_oneof![
            2 => (0usize..6, 0usize..6).prop_map(|(a, b)| Act::Rename(a, b)),
            1 => (0usize..6, 0usize..6).prop_map(|(a, b)| Act::Link(a, b)),
            1 => (0usize..6).prop_map(Act::Remove),
            6 => (0usize..8).prop_map(Act::Drive),
            1 => (0usize..8).prop_map(Act::Crash),
            1 => Just(Act::Restart),
            1 => (0usize..6).prop_map(Act::Block),
            1 => (0usize..6).prop_map(Act::Unblock),
        ]
    }

    const PATHS: [&str; 6] = ["/a", "/b", "/c", "/d/x", "/d/y", "/e"];

    proptest! {
        /// Any interleaving of renames, links and removals, with crashes and restarts between
        /// any two steps (a step carried out and its answer lost), never leaves a name more
        /// than its file's count, nor a name of a file whose bytes went; once every intent
        /// has ended, each file's count is exactly its names.
        #[test]
        fn names_never_outnumber_the_count(acts in proptest::collection::vec(act(), 1..120)) {
            let mut w = World::default();
            for (i, p) in PATHS.iter().enumerate().take(3) {
                let ino = 100 + i as u64;
                w.entries.insert(p.to_string(), file(ino));
                w.counts.insert(ino, 1);
            }
            for a in acts {
                match a {
                    Act::Rename(x, y) => {
                        if let Some(d) = w.entries.get(PATHS[x]).copied()
                            && x != y
                            && w.entries.get(PATHS[y]).is_none_or(|t| t.ino != d.ino)
                        {
                            w.start(d, NameOp::Rename { from: PATHS[x].into(), to: PATHS[y].into() });
                        }
                    }
                    Act::Link(x, y) => {
                        if let Some(d) = w.entries.get(PATHS[x]).copied() {
                            w.start(d, NameOp::Link { from: PATHS[x].into(), to: PATHS[y].into() });
                        }
                    }
                    Act::Remove(x) => {
                        if let Some(d) = w.entries.get(PATHS[x]).copied() {
                            w.start(d, NameOp::Remove { path: PATHS[x].into() });
                        }
                    }
                    Act::Drive(n) if !w.intents.is_empty() => {
                        let i = n % w.intents.len();
                        w.drive_one(i, false);
                    }
                    Act::Crash(n) if !w.intents.is_empty() => {
                        let i = n % w.intents.len();
                        w.drive_one(i, true);
                    }
                    Act::Block(x) => {
                        w.blocked.insert(PATHS[x].to_string());
                    }
                    Act::Unblock(x) => {
                        w.blocked.remove(PATHS[x]);
                    }
                    Act::Restart => {
                        w.intents = std::mem::take(&mut w.intents)
                            .into_iter()
                            .map(Intent::resumed)
                            .collect();
                    }
                    _ => {}
                }
                w.check()?;
            }
            // Every intent runs to its end (the transactions end too).
            w.blocked.clear();
            let mut rounds = 0;
            while !w.intents.is_empty() {
                w.drive_one(0, false);
                w.check()?;
                rounds += 1;
                prop_assert!(rounds < 10_000, "intents never end: {:?}", w.intents);
            }
            for (ino, n) in &w.counts {
                prop_assert_eq!(*n, w.names(*ino), "inode {} once every intent ended: {:?}", ino, w);
            }
        }
    }

    /// A rename, step by step, as the stages above draw it.
    #[test]
    fn a_rename_over_another_file_goes_through_its_stages() {
        let (a, r) = (file(1), file(2));
        let op = NameOp::Rename {
            from: "/d/a".into(),
            to: "/e/b".into(),
        };
        let (intent, count) = Intent::begin(7, a, op, 1);
        assert_eq!(count, Count::Up);
        let intent = intent.unwrap();
        assert_eq!(
            intent.steps(),
            [Step::Put {
                path: "/e/b".into(),
                file: a
            }]
        );
        let adv = intent.advance(Outcome::Replaced(Some(r)), 2);
        let placed = adv.next.unwrap();
        assert_eq!(placed.stage, Stage::Placed { replaced: Some(r) });
        assert_eq!(
            placed.steps(),
            [Step::Remove {
                path: "/d/a".into(),
                ino: 1
            }]
        );
        let adv = placed.advance(Outcome::Removed(true), 2);
        assert_eq!(adv.count, Count::Down);
        let moving = adv.next.unwrap();
        assert_eq!(
            moving.steps(),
            [Step::PfsRename {
                from: "/d/a".into(),
                to: "/e/b".into(),
                replaced: true
            }]
        );
        let releasing = moving.advance(Outcome::Done, 1).next.unwrap();
        assert_eq!(
            releasing.steps(),
            [Step::Release {
                path: "/e/b".into(),
                file: r
            }]
        );
        assert_eq!(
            releasing.key(3),
            StepKey {
                node: 3,
                intent: 7,
                stage: 3
            }
        );
        let adv = releasing.advance(Outcome::Done, 1);
        assert_eq!((adv.next, adv.count, adv.failed), (None, Count::Keep, None));
    }

    #[test]
    fn a_refused_removal_undoes_the_new_name() {
        let a = file(1);
        let op = NameOp::Rename {
            from: "/a".into(),
            to: "/b".into(),
        };
        let placed = Intent::begin(1, a, op, 1)
            .0
            .unwrap()
            .advance(Outcome::Replaced(None), 2)
            .next
            .unwrap();
        let adv = placed.advance(Outcome::Refused, 2);
        assert_eq!(adv.failed, Some(Failed::Refused));
        let undoing = adv.next.unwrap();
        assert_eq!(
            undoing.steps(),
            [Step::Restore {
                path: "/b".into(),
                ino: 1,
                replaced: None
            }]
        );
        let adv = undoing.clone().advance(Outcome::Removed(true), 2);
        assert_eq!((adv.next, adv.count), (None, Count::Down));
        // Replaced meanwhile by another rename, which took the name off the count.
        let adv = undoing.advance(Outcome::Removed(false), 1);
        assert_eq!((adv.next, adv.count), (None, Count::Keep));
    }

    #[test]
    fn the_last_name_takes_the_bytes_and_the_pfs_copy() {
        let a = file(1);
        let (intent, count) = Intent::begin(1, a, NameOp::Remove { path: "/a".into() }, 1);
        assert_eq!(count, Count::Keep);
        let adv = intent.unwrap().advance(Outcome::Removed(true), 1);
        assert_eq!(adv.count, Count::Down);
        assert_eq!(
            adv.next.unwrap().steps(),
            [
                Step::DropEverywhere { ino: 1 },
                Step::PfsRemove {
                    path: "/a".into(),
                    dir: false
                }
            ]
        );
        // A name of several: only the count.
        let (intent, _) = Intent::begin(2, a, NameOp::Remove { path: "/a".into() }, 2);
        let adv = intent.unwrap().advance(Outcome::Removed(true), 2);
        assert_eq!((adv.next, adv.count), (None, Count::Down));
        // A directory has no bytes to drop.
        let dir = Dentry {
            ino: 3,
            kind: FileKind::Dir,
        };
        let (intent, _) = Intent::begin(3, dir, NameOp::Remove { path: "/d".into() }, 1);
        let adv = intent.unwrap().advance(Outcome::Removed(true), 1);
        assert_eq!(
            adv.next.unwrap().steps(),
            [Step::PfsRemove {
                path: "/d".into(),
                dir: true
            }]
        );
    }
}
