//! The pieces of the `tessera` command, as a library so that tests and tools reuse them.
//!
//! * [`instance`]: create an instance, start, stop and report its daemons;
//! * [`start`]: `tessera start`, its options and the policy deciding what it does;
//! * [`launch`]: one daemon per node of an allocation, through srun or mpirun;
//! * [`repair`]: salvage of a damaged state log, the check of names against link counts;
//! * [`find`]: `tessera find`, every daemon searching its shard;
//! * [`vars`]: the catalogue of variables (D2T);
//! * [`doctor`]: whether the interposer can serve a program;
//! * [`admin`]: status and stop requests to any node, authenticated with the secret;
//! * [`watch`]: `tessera status --watch`, each node's metrics as rates;
//! * [`inspect`]: ls, stat, where, flush;
//! * [`mount`]: `tessera mount` and `umount`, the FUSE mount's server and its busy check;
//! * [`demo`]: the N-1 strided checkpoint demo and its ranks;
//! * [`emulated`]: runs of the demo and the benchmarks on emulated hosts;
//! * [`script`]: a rank driven by JSON-line commands, for multi-process tests;
//!   [`script_posix`]: the same through plain file calls on a FUSE mount;
//! * [`run_tasks`] / [`task_queue`]: `tessera run`, tasks placed where their inputs are;
//! * [`stage`]: `tessera stage-in` and `stage-out`, a worker per node, resumable;
//! * [`size`]: sizes with units on the command line.

pub mod admin;
pub mod demo;
pub mod doctor;
pub mod emulated;
pub mod find;
pub mod inspect;
pub mod instance;
pub mod launch;
pub mod mount;
pub mod repair;
pub mod run_tasks;
pub mod script;
pub mod script_posix;
pub mod size;
pub mod stage;
pub mod start;
pub mod task_queue;
pub mod vars;
pub mod watch;
