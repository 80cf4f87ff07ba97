//! `tessera doctor PROGRAM`: whether the interposer can serve a program, and what to use if
//! not. The interposer is an `LD_PRELOAD` library: it sees a program's calls only when the
//! dynamic loader loads it into a program linked against glibc. A statically linked program,
//! a Go program (it makes system calls itself) or a setuid one (the loader ignores
//! `LD_PRELOAD` for it) goes straight to the kernel, which has no `/tessera` and answers
//! ENOENT with no hint.

use anyhow::{Context, Result};
use object::{Object, ObjectSection};
use std::path::{Path, PathBuf};

/// What the doctor found.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Interposed: the reason it works.
    Works(String),
    /// Not interposed: why.
    Not(String),
}

/// Finds `program` as the shell would (a path, or a name on PATH).
fn locate(program: &str) -> Result<PathBuf> {
    if program.contains('/') {
        return Ok(PathBuf::from(program));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .with_context(|| format!("{program} is not on PATH; give its path"))
}

/// The verdict for the program at `path` (`depth` bounds a chain of script interpreters).
fn examine(path: &Path, depth: u32) -> Result<Verdict> {
    let data = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)?.permissions().mode();
    if mode & 0o6000 != 0 {
        return Ok(Verdict::Not(format!(
            "{} is setuid or setgid: the loader ignores LD_PRELOAD for it",
            path.display()
        )));
    }
    if let Some(line) = data.strip_prefix(b"#!") {
        let line = String::from_utf8_lossy(line.split(|b| *b == b'\n').next().unwrap_or(&[]));
        let mut words = line.split_whitespace();
        let interp = words.next().unwrap_or_default().to_string();
        // `#!/usr/bin/env python3`: the interpreter is the next word, found on PATH.
        let interp = if interp.ends_with("/env") {
            locate(words.next().unwrap_or_default())?
        } else {
            PathBuf::from(interp)
        };
        if depth > 4 {
            return Ok(Verdict::Not(
                "a chain of script interpreters too long to follow".into(),
            ));
        }
        return Ok(match examine(&interp, depth + 1)? {
            Verdict::Works(why) => Verdict::Works(format!(
                "a script run by {}, which is {why}",
                interp.display()
            )),
            Verdict::Not(why) => Verdict::Not(format!(
                "a script run by {}, which is not interposed: {why}",
                interp.display()
            )),
        });
    }
    let file = object::File::parse(&*data)
        .with_context(|| format!("{} is neither an ELF program nor a script", path.display()))?;
    if file.section_by_name(".go.buildinfo").is_some()
        || file.section_by_name(".note.go.buildid").is_some()
    {
        return Ok(Verdict::Not(
            "a Go program: it makes its system calls itself, not through glibc".into(),
        ));
    }
    let Some(interp) = file.section_by_name(".interp") else {
        return Ok(Verdict::Not(
            "statically linked: no dynamic loader loads the interposer into it (link it dynamically against glibc to run it on Tessera)".into(),
        ));
    };
    let loader = String::from_utf8_lossy(interp.data()?)
        .trim_end_matches('\0')
        .to_string();
    if loader.contains("musl") {
        return Ok(Verdict::Not(format!(
            "linked against musl ({loader}): the interposer is built for glibc"
        )));
    }
    Ok(Verdict::Works(format!(
        "dynamically linked against glibc (loader {loader})"
    )))
}

/// Prints the verdict for `program`; an error when it cannot be interposed.
pub fn run(program: &str) -> Result<()> {
    let path = locate(program)?;
    match examine(&path, 0)? {
        Verdict::Works(why) => {
            println!("{}: can be interposed: {why}", path.display());
            println!(
                "run it with LD_PRELOAD=<libdir>/libtessera_preload.so and TESSERA_INSTANCE set (see docs/interposer.md)"
            );
            Ok(())
        }
        Verdict::Not(why) => anyhow::bail!(
            "{}: cannot be interposed: {why}. Its paths under /tessera go to the kernel, which answers ENOENT: copy its input out of Tessera and its output in with an interposed program (cp, rsync)",
            path.display()
        ),
    }
}
