//! Starting instances of Tessera in tests: the `tessera start` command line of an instance
//! whose files (instance directory, PFS directory, burst buffers) all lie under one scratch
//! root, so that removing the root removes everything, and the check that a command
//! succeeded that shows its output when it did not.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `tessera start` line of an instance under `root`: the instance in `root/inst`, the
/// PFS directory in `root/pfs`, the burst buffers in `root/bb` unless [`StartLine::bb_root`]
/// says otherwise.
#[derive(Clone, Debug)]
pub struct StartLine {
    tessera: PathBuf,
    root: PathBuf,
    daemons: Option<u32>,
    bb_root: Option<PathBuf>,
    extra: Vec<String>,
}

impl StartLine {
    /// `tessera` is the binary (`env!("CARGO_BIN_EXE_tessera")` in its crate's tests).
    pub fn new(tessera: impl Into<PathBuf>, root: &Path) -> StartLine {
        StartLine {
            tessera: tessera.into(),
            root: root.to_path_buf(),
            daemons: None,
            bb_root: None,
            extra: Vec::new(),
        }
    }

    /// Daemons on this machine (`--daemons`); without it, the launcher's count or the
    /// default.
    pub fn daemons(mut self, n: u32) -> StartLine {
        self.daemons = Some(n);
        self
    }

    /// The burst buffers' root instead of `root/bb`.
    pub fn bb_root(mut self, dir: &Path) -> StartLine {
        self.bb_root = Some(dir.to_path_buf());
        self
    }

    /// Further options (`--set security=none`, `--hostfile F`).
    pub fn args<S: AsRef<str>>(mut self, args: impl IntoIterator<Item = S>) -> StartLine {
        self.extra
            .extend(args.into_iter().map(|a| a.as_ref().to_string()));
        self
    }

    /// The instance directory.
    pub fn instance_dir(&self) -> PathBuf {
        self.root.join("inst")
    }

    /// The command, to run or to add an environment to.
    pub fn command(&self) -> Command {
        let mut c = Command::new(&self.tessera);
        c.arg("start")
            .arg("--instance")
            .arg(self.instance_dir())
            .arg("--pfs")
            .arg(self.root.join("pfs"))
            .arg("--bb-root")
            .arg(self.bb_root.clone().unwrap_or_else(|| self.root.join("bb")));
        if let Some(n) = self.daemons {
            c.args(["--daemons", &n.to_string()]);
        }
        c.args(&self.extra);
        c
    }
}

/// Runs `cmd`; it must succeed, else the test fails showing its status and output.
pub fn succeeded(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("could not run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(c: &Command) -> Vec<String> {
        c.get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn the_start_line_keeps_everything_under_the_root() {
        let line = StartLine::new("/bin/tessera", Path::new("/scratch/t"))
            .daemons(2)
            .args(["--set", "security=integrity"]);
        let c = line.command();
        assert_eq!(c.get_program(), "/bin/tessera");
        assert_eq!(
            argv(&c),
            [
                "start",
                "--instance",
                "/scratch/t/inst",
                "--pfs",
                "/scratch/t/pfs",
                "--bb-root",
                "/scratch/t/bb",
                "--daemons",
                "2",
                "--set",
                "security=integrity"
            ]
        );
        let shared = line.bb_root(Path::new("/shared")).command();
        assert!(
            argv(&shared)
                .windows(2)
                .any(|w| w == ["--bb-root", "/shared"])
        );
    }

    #[test]
    #[should_panic(expected = "failed: exit status: 3")]
    fn a_failed_command_fails_the_test_with_its_output() {
        succeeded(Command::new("sh").args(["-c", "echo said it; exit 3"]));
    }
}
