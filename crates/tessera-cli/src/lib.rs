//! The pieces of the `tessera` command, as a library so that tests and tools reuse them.
//!
//! * [`instance`]: create an instance, start, stop and report its daemons;
//! * [`launch`]: one daemon per node of an allocation, through srun or mpirun;
//! * [`admin`]: status and stop requests to any node, authenticated with the secret;
//! * [`inspect`]: ls, stat, where, flush;
//! * [`demo`]: the N-1 strided checkpoint demo and its ranks;
//! * [`emulated`]: runs of the demo and the benchmarks on emulated hosts;
//! * [`script`]: a rank driven by JSON-line commands, for multi-process tests;
//! * [`run_tasks`] / [`task_queue`]: `tessera run`, tasks placed where their inputs are;
//! * [`size`]: sizes with units on the command line.

pub mod admin;
pub mod demo;
pub mod doctor;
pub mod emulated;
pub mod find;
pub mod inspect;
pub mod instance;
pub mod launch;
pub mod run_tasks;
pub mod script;
pub mod size;
pub mod task_queue;
pub mod vars;
