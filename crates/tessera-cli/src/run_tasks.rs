//! `tessera run`: runs tasks where their input bytes are (FusionFS and Swift).
//!
//! One batched locate finds, for every task, the node holding most of its input bytes; the
//! [`crate::task_queue`] decides when and where each runs; each runs through the launcher that
//! reaches its host (a process here for this machine's daemons, `srun -w HOST` inside a Slurm
//! allocation, `mpirun --host HOST` otherwise), with `TESSERA_NODE` naming the chosen daemon and
//! the interposer preloaded, so that its reads of Tessera paths are local. Output is printed
//! per task as each finishes; a progress line runs on stderr; a summary (and, on request, a
//! JSON report) follows.

use crate::task_queue::{Preference, Rule, TaskQueue};
use anyhow::{Context, Result, bail};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;
use tessera_client::{Client, RangeAsk};
use tessera_proto::hosts::{HostTable, normalize_host, this_host};

/// One task: a shell command and the Tessera paths it reads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Task {
    pub command: String,
    pub inputs: Vec<String>,
}

/// How tasks reach other hosts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TaskLauncher {
    /// A process here for this machine's hosts; srun inside a Slurm allocation, mpirun
    /// otherwise.
    Auto,
    Srun,
    Mpirun,
}

/// The command-line options of `tessera run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Only on that host (wait for a free slot there); by default a task whose host is
    /// full runs on another host with a free slot.
    #[arg(long)]
    pub hard: bool,
    /// Tasks running at once on one host.
    #[arg(long, default_value_t = 1)]
    pub per_host: usize,
    #[arg(long, value_enum, default_value = "auto")]
    pub launcher: TaskLauncher,
    /// A file of tasks: `INPUT... :: COMMAND` per line, `{}` standing for the inputs.
    #[arg(long)]
    pub tasks: Option<PathBuf>,
    /// Write a JSON report of every task (host, node, placement, exit code, time).
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Do not preload the interposer into the tasks.
    #[arg(long)]
    pub no_preload: bool,
    /// COMMAND (with `{}` for the input), then the inputs.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

/// `tessera run`: reads the tasks from the options, runs them where their inputs are and
/// prints the summary; `Ok(false)` when a task failed.
pub fn main(layout: &tessera_proto::InstanceLayout, a: RunArgs) -> Result<bool> {
    let tasks = match (&a.tasks, a.args.split_first()) {
        (Some(file), None) => parse_task_file(
            &std::fs::read_to_string(file)
                .with_context(|| format!("reading the task file {}", file.display()))?,
        )?,
        (None, Some((cmd, inputs))) => tasks_from_template(cmd, inputs),
        (Some(_), Some(_)) => {
            bail!("give either --tasks FILE or a command and its inputs, not both")
        }
        (None, None) => bail!(
            "nothing to run: give a command with {{}} and its inputs (tessera run 'wc -c {{}}' /tessera/a /tessera/b), or --tasks FILE"
        ),
    };
    let preload = if a.no_preload {
        None
    } else {
        let found = find_preload();
        if found.is_none() {
            eprintln!(
                "tessera run: libtessera_preload.so not found next to this program; tasks run without the interposer (set LD_PRELOAD yourself, or --no-preload to silence this)"
            );
        }
        found
    };
    let opts = RunOptions {
        rule: if a.hard { Rule::Hard } else { Rule::Soft },
        per_host: a.per_host,
        launcher: a.launcher,
        preload,
        report: a.report,
    };
    let r = run(
        &Client::connect(layout.clone(), None)?,
        &layout.dir,
        tasks,
        &opts,
    )?;
    print_summary(&r);
    Ok(r.failed == 0)
}

/// Options of a run of tasks.
pub struct RunOptions {
    pub rule: Rule,
    pub per_host: usize,
    pub launcher: TaskLauncher,
    /// The interposer to preload into tasks (None: leave `LD_PRELOAD` as it is).
    pub preload: Option<PathBuf>,
    /// Where to write the JSON report.
    pub report: Option<PathBuf>,
}

/// `s` quoted for `sh`.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+=:,@%".contains(&b))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The command line with `{}` replaced by the quoted inputs (appended if it has no `{}`).
pub fn expand(template: &str, inputs: &[String]) -> String {
    let quoted: Vec<String> = inputs.iter().map(|i| shell_quote(i)).collect();
    let joined = quoted.join(" ");
    if template.contains("{}") {
        template.replace("{}", &joined)
    } else {
        format!("{template} {joined}")
    }
}

/// Tasks from a command template and one input per task.
pub fn tasks_from_template(template: &str, inputs: &[String]) -> Vec<Task> {
    inputs
        .iter()
        .map(|i| Task {
            command: expand(template, std::slice::from_ref(i)),
            inputs: vec![i.clone()],
        })
        .collect()
}

/// Tasks from a task file: `INPUT... :: COMMAND` per line (`{}` in the command stands for the
/// inputs); blank lines and lines starting with `#` are skipped.
pub fn parse_task_file(text: &str) -> Result<Vec<Task>> {
    let mut tasks = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((inputs, command)) = line.split_once("::") else {
            bail!(
                "task file line {}: '{line}' has no '::'; write the inputs, then '::', then the command (INPUT... :: COMMAND, with {{}} for the inputs)",
                n + 1
            );
        };
        let inputs: Vec<String> = inputs.split_whitespace().map(str::to_string).collect();
        let command = command.trim();
        if command.is_empty() {
            bail!("task file line {}: no command after '::'", n + 1);
        }
        let command = if command.contains("{}") {
            expand(command, &inputs)
        } else {
            command.to_string()
        };
        tasks.push(Task { command, inputs });
    }
    Ok(tasks)
}

/// What happened to one task.
#[derive(Debug, Serialize)]
pub struct TaskResult {
    pub command: String,
    pub inputs: Vec<String>,
    /// The host holding most of its input bytes, and the node there (none: no input bytes
    /// in any burst buffer).
    pub preferred_host: Option<String>,
    pub preferred_node: Option<u32>,
    pub host: String,
    pub node: u32,
    pub on_preferred: bool,
    /// The exit code (`None`: ended by a signal, or could not be launched).
    pub exit_code: Option<i32>,
    pub seconds: f64,
}

/// The JSON report of a run.
#[derive(Debug, Serialize)]
pub struct Report {
    pub launcher: String,
    pub per_host: usize,
    pub hard: bool,
    pub seconds: f64,
    pub failed: usize,
    pub tasks: Vec<TaskResult>,
}

/// The hosts of the instance with their nodes, in node order of their first node.
struct Hosts {
    /// (registered name, nodes)
    list: Vec<(String, Vec<u32>)>,
}

impl Hosts {
    fn of(table: &HostTable) -> Result<Hosts> {
        let mut list: Vec<(String, Vec<u32>)> = Vec::new();
        for e in &table.nodes {
            match list
                .iter_mut()
                .find(|(h, _)| normalize_host(h) == normalize_host(&e.host))
            {
                Some((_, nodes)) => nodes.push(e.node),
                None => list.push((e.host.clone(), vec![e.node])),
            }
        }
        if list.is_empty() {
            bail!("no daemon is registered: start the instance first (tessera start)");
        }
        Ok(Hosts { list })
    }

    fn index(&self, normalized: &str) -> Option<usize> {
        self.list
            .iter()
            .position(|(h, _)| normalize_host(h) == normalized)
    }
}

/// Runs `tasks`; returns the report (also written where asked). Fails only if the run could
/// not be set up; failed tasks are in the report.
pub fn run(c: &Client, layout_dir: &Path, tasks: Vec<Task>, opts: &RunOptions) -> Result<Report> {
    if tasks.is_empty() {
        bail!("no tasks to run: give a command and its inputs, or --tasks FILE");
    }
    let table = tessera_proto::InstanceLayout::new(layout_dir).load_hosts()?;
    let hosts = Hosts::of(&table)?;
    let prefs = preferences(c, &tasks, &hosts)?;
    let mut queue = TaskQueue::new(
        hosts.list.iter().map(|(_, n)| n.clone()).collect(),
        opts.per_host,
        opts.rule,
        prefs.clone(),
    );
    let started = Instant::now();
    let (tx, rx) = std::sync::mpsc::channel();
    let mut results: Vec<Option<TaskResult>> = (0..tasks.len()).map(|_| None).collect();
    let mut running = 0usize;
    let mut done = 0usize;
    let mut failed = 0usize;
    let progress = Progress::new(tasks.len());
    let mut launchers_used: Vec<&'static str> = Vec::new();
    while done < tasks.len() {
        while let Some(d) = queue.dispatch() {
            let (host, _) = &hosts.list[d.host];
            let launcher = launcher_for(host, opts.launcher);
            if !launchers_used.contains(&launcher) {
                launchers_used.push(launcher);
            }
            let cmd = task_command(
                launcher,
                host,
                d.node,
                &tasks[d.task].command,
                layout_dir,
                opts.preload.as_deref(),
            );
            let tx = tx.clone();
            let (task, host_i, node) = (d.task, d.host, d.node);
            running += 1;
            std::thread::spawn(move || {
                let t = Instant::now();
                let out = run_captured(cmd);
                let _ = tx.send((task, host_i, node, out, t.elapsed().as_secs_f64()));
            });
            results[d.task] = Some(TaskResult {
                command: tasks[d.task].command.clone(),
                inputs: tasks[d.task].inputs.clone(),
                preferred_host: prefs[d.task].map(|p| normalize_host(&hosts.list[p.host].0)),
                preferred_node: prefs[d.task].map(|p| p.node),
                host: normalize_host(host),
                node: d.node,
                on_preferred: d.preferred,
                exit_code: None,
                seconds: 0.0,
            });
            progress.show(done, running, failed, false);
        }
        let (task, host_i, _node, out, seconds) =
            rx.recv().context("a task runner thread vanished")?;
        queue.finished(host_i);
        running -= 1;
        done += 1;
        let r = results[task].as_mut().expect("dispatched");
        r.seconds = seconds;
        match out {
            Ok((code, stdout, stderr)) => {
                r.exit_code = code;
                progress.clear();
                std::io::stdout().write_all(&stdout)?;
                std::io::stderr().write_all(&stderr)?;
            }
            Err(e) => {
                progress.clear();
                eprintln!("tessera run: task {}: {e:#}", task + 1);
            }
        }
        if r.exit_code != Some(0) {
            failed += 1;
        }
        progress.show(done, running, failed, true);
    }
    progress.clear();
    let report = Report {
        launcher: launchers_used.join("+"),
        per_host: opts.per_host,
        hard: opts.rule == Rule::Hard,
        seconds: started.elapsed().as_secs_f64(),
        failed,
        tasks: results
            .into_iter()
            .map(|r| r.expect("every task ran"))
            .collect(),
    };
    if let Some(path) = &opts.report {
        std::fs::write(path, serde_json::to_string_pretty(&report)? + "\n")
            .with_context(|| format!("writing the report {}", path.display()))?;
    }
    Ok(report)
}

/// Prints the summary of a run.
pub fn print_summary(r: &Report) {
    let mut per_host: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for t in &r.tasks {
        let e = per_host.entry(&t.host).or_default();
        e.0 += 1;
        e.1 += usize::from(t.on_preferred);
    }
    let placed = r.tasks.iter().filter(|t| t.on_preferred).count();
    let with_pref = r
        .tasks
        .iter()
        .filter(|t| t.preferred_host.is_some())
        .count();
    eprintln!(
        "tessera run: {} tasks in {:.2} s through {} ({} per host, {}): {} ran where most of their input bytes are ({} had input bytes in a burst buffer), {} failed",
        r.tasks.len(),
        r.seconds,
        r.launcher,
        r.per_host,
        if r.hard {
            "hard placement"
        } else {
            "soft placement"
        },
        placed,
        with_pref,
        r.failed
    );
    for (h, (n, local)) in per_host {
        eprintln!("  {h}: {n} tasks, {local} of them on their inputs' host");
    }
    for (i, t) in r.tasks.iter().enumerate() {
        if t.exit_code != Some(0) {
            let code = t.exit_code.map_or(
                "no exit code (a signal, or not launched)".to_string(),
                |c| format!("exit code {c}"),
            );
            eprintln!(
                "  task {} on {} failed with {code}: {}",
                i + 1,
                t.host,
                t.command
            );
        }
    }
}

/// Where each task would like to run: the node holding most of its input bytes, found for
/// all tasks in one locate.
fn preferences(c: &Client, tasks: &[Task], hosts: &Hosts) -> Result<Vec<Option<Preference>>> {
    let mut asks = Vec::new();
    let mut owner = Vec::new();
    for (t, task) in tasks.iter().enumerate() {
        for i in &task.inputs {
            asks.push(RangeAsk::file(i.clone()));
            owner.push(t);
        }
    }
    let answers = c.locate_many(&asks, 1)?;
    let mut per_task: Vec<BTreeMap<(String, u32), u64>> = vec![BTreeMap::new(); tasks.len()];
    for ((t, ask), a) in owner.iter().zip(&asks).zip(answers) {
        // An input that cannot be located (not written yet, say) places nothing: the task
        // still runs, wherever a slot is free, and meets the problem itself.
        let l = match a {
            Ok(l) => l,
            Err(e) => {
                eprintln!(
                    "tessera run: task {}: input {}: {} ({}); it runs without a placement",
                    t + 1,
                    ask.path,
                    e.message,
                    e.errno.name()
                );
                continue;
            }
        };
        for h in &l.bytes_by_host {
            for (node, bytes) in &h.nodes {
                *per_task[*t].entry((h.host.clone(), *node)).or_default() += bytes;
            }
        }
    }
    Ok(per_task
        .into_iter()
        .map(|bytes| {
            let mut by_host: BTreeMap<&str, u64> = BTreeMap::new();
            for ((h, _), b) in &bytes {
                *by_host.entry(h).or_default() += b;
            }
            let (best_host, _) = by_host
                .iter()
                .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))?;
            let host = hosts.index(best_host)?;
            let (&(_, node), _) = bytes
                .iter()
                .filter(|((h, _), _)| h == best_host)
                .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.1.cmp(&a.0.1)))?;
            Some(Preference { host, node })
        })
        .collect())
}

/// A command that runs `shell_line` on `host` (as the host table names it) with
/// `TESSERA_NODE=node`, through the launcher `tessera run` would choose.
pub fn command_on_host(host: &str, node: u32, shell_line: &str, layout_dir: &Path) -> Command {
    let launcher = launcher_for(host, TaskLauncher::Auto);
    task_command(launcher, host, node, shell_line, layout_dir, None)
}

/// How a task reaches `host`: a process here for this machine (unless a launcher was
/// chosen), srun inside a Slurm allocation, mpirun otherwise.
fn launcher_for(host: &str, choice: TaskLauncher) -> &'static str {
    match choice {
        TaskLauncher::Srun => "srun",
        TaskLauncher::Mpirun => "mpirun",
        TaskLauncher::Auto if normalize_host(host) == normalize_host(&this_host()) => "local",
        TaskLauncher::Auto if std::env::var_os("SLURM_JOB_ID").is_some() => "srun",
        TaskLauncher::Auto => "mpirun",
    }
}

/// The command that runs `shell_line` on `host` with `TESSERA_NODE=node`.
fn task_command(
    launcher: &str,
    host: &str,
    node: u32,
    shell_line: &str,
    layout_dir: &Path,
    preload: Option<&Path>,
) -> Command {
    let mut env: Vec<(String, String)> = vec![
        ("TESSERA_NODE".into(), node.to_string()),
        ("TESSERA_INSTANCE".into(), layout_dir.display().to_string()),
    ];
    if let Some(p) = preload {
        env.push(("LD_PRELOAD".into(), p.display().to_string()));
    }
    let mut c = match launcher {
        "local" => {
            let mut c = Command::new("sh");
            c.args(["-c", shell_line]);
            c
        }
        "srun" => {
            let mut c = Command::new("srun");
            let exports: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
            c.args([
                "--nodes=1",
                "--ntasks=1",
                "--overlap",
                &format!("--nodelist={host}"),
                &format!("--export=ALL,{}", exports.join(",")),
                "sh",
                "-c",
                shell_line,
            ]);
            c
        }
        _ => {
            let mut c = Command::new("mpirun");
            c.args(["--host", &format!("{host}:1"), "-np", "1"]);
            for (k, _) in &env {
                c.args(["-x", k]);
            }
            c.args(["sh", "-c", shell_line]);
            c
        }
    };
    c.envs(env);
    c.stdin(Stdio::null());
    c
}

/// Runs a command to its end; (exit code, stdout, stderr).
fn run_captured(mut c: Command) -> Result<(Option<i32>, Vec<u8>, Vec<u8>)> {
    let out = c
        .output()
        .with_context(|| format!("launching {:?}", c.get_program()))?;
    Ok((out.status.code(), out.stdout, out.stderr))
}

/// The progress line: rewritten in place on a terminal, one line per finished task
/// otherwise.
struct Progress {
    total: usize,
    tty: bool,
}

impl Progress {
    fn new(total: usize) -> Progress {
        Progress {
            total,
            tty: std::io::stderr().is_terminal(),
        }
    }

    /// `finished`: a task just ended (the moment a log gets a line).
    fn show(&self, done: usize, running: usize, failed: usize, finished: bool) {
        let line = format!(
            "tessera run: {done}/{} done, {running} running, {failed} failed",
            self.total
        );
        if self.tty {
            eprint!("\r{line}\x1b[K");
        } else if finished {
            eprintln!("{line}");
        }
    }

    fn clear(&self) {
        if self.tty {
            eprint!("\r\x1b[K");
        }
    }
}

/// The interposer next to this program (`target/*/` in a build tree, `../lib` installed).
pub fn find_preload() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [
        dir.join("libtessera_preload.so"),
        dir.join("../lib/libtessera_preload.so"),
        dir.join("../lib/tessera/libtessera_preload.so"),
    ]
    .into_iter()
    .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_are_quoted_into_the_command() {
        assert_eq!(shell_quote("/tessera/a-1.dat"), "/tessera/a-1.dat");
        assert_eq!(shell_quote("it's here"), "'it'\\''s here'");
        assert_eq!(
            expand("wc -c {}", &["/tessera/x y".into()]),
            "wc -c '/tessera/x y'"
        );
        assert_eq!(
            expand("md5sum", &["/tessera/a".into()]),
            "md5sum /tessera/a"
        );
    }

    #[test]
    fn task_files_name_inputs_then_the_command() {
        let t = parse_task_file(
            "# comment\n/tessera/a /tessera/b :: cat {} > /tessera/ab\n\n/tessera/c :: true\n",
        )
        .unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].inputs, vec!["/tessera/a", "/tessera/b"]);
        assert_eq!(t[0].command, "cat /tessera/a /tessera/b > /tessera/ab");
        assert_eq!(t[1].command, "true");
        let e = parse_task_file("/tessera/a cat\n").unwrap_err().to_string();
        assert!(e.contains("line 1") && e.contains("::"), "{e}");
        let e = parse_task_file("/tessera/a ::  \n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no command"), "{e}");
    }
}
