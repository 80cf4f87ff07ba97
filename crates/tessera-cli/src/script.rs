//! A scripted rank: one process that performs file-system operations read as JSON lines on
//! stdin and answers each with a JSON line on stdout. Tests drive several of them at once to
//! run multi-process programs against real daemons; the driver decides the order of
//! operations across processes, which gives the happens-before edges.

use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};
use tessera_client::{Client, File, FsError, HeldList, LockKind, Model, OpenOptions};

/// One operation of a scripted rank.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Cmd {
    Open {
        path: String,
        model: Model,
        read: bool,
        write: bool,
        create: bool,
    },
    /// Writes `len` bytes of pattern `id` at `off` (see [`pattern_byte`]).
    Write {
        off: u64,
        len: u64,
        id: u32,
    },
    /// Reads `len` bytes at `off`; the answer carries them in hex.
    Read {
        off: u64,
        len: u64,
    },
    Attach {
        off: u64,
        len: u64,
    },
    AttachFile,
    Detach {
        off: u64,
        len: u64,
    },
    DetachFile,
    Commit,
    SessionOpen,
    SessionClose,
    Sync,
    Flush,
    /// Takes a byte-range lock (`len` 0: to end of file).
    Lock {
        off: u64,
        len: u64,
        exclusive: bool,
        wait: bool,
    },
    Unlock {
        off: u64,
        len: u64,
    },
    /// F_GETLK; the answer's data is `none` or `PID START END shared|exclusive`, hex-encoded.
    GetLock {
        off: u64,
        len: u64,
        exclusive: bool,
    },
    /// Takes a list lock; the answer's data is its token in decimal, hex-encoded.
    ListLock {
        runs: Vec<tessera_client::LockRun>,
        wait: bool,
    },
    /// Publishes under, then releases, the list lock `token` of this rank.
    ListUnlock {
        token: u64,
    },
    /// The process's client statistics; the answer's data is their JSON, hex-encoded.
    Stats,
    /// Opens a transaction at this rank's daemon; the answer's data is its id in decimal,
    /// hex-encoded.
    TxnOpen,
    /// Joins transaction `txn` (`None`: leaves).
    TxnJoin {
        txn: Option<u64>,
    },
    /// Commits (`commit`) or aborts transaction `txn`.
    TxnDecide {
        txn: u64,
        commit: bool,
    },
    Close,
    /// Stats a path; the answer's data is `SIZE MTIME_NS`, hex-encoded.
    StatPath {
        path: String,
    },
    /// Lists a directory with attributes (readdir-plus); the answer's data is one line
    /// `NAME SIZE` per entry (`-` for a size the listing did not carry), hex-encoded.
    List {
        dir: String,
    },
    /// Creates an empty file (or truncates one).
    Touch {
        path: String,
    },
    Unlink {
        path: String,
    },
    Exit,
}

/// Answer to one command.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errno: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub msg: Option<String>,
}

/// Byte `off` of write pattern `id`: never 0, and different writes differ at every offset.
pub fn pattern_byte(id: u32, off: u64) -> u8 {
    ((u64::from(id) * 37 + off) % 255 + 1) as u8
}

fn run_cmd(
    client: &Client,
    file: &mut Option<File>,
    lists: &mut Vec<HeldList>,
    cmd: Cmd,
) -> Result<Option<Vec<u8>>, FsError> {
    let no_file = || FsError::new(tessera_client::Errno::BadF, "no file is open in this rank");
    match cmd {
        Cmd::Open {
            path,
            model,
            read,
            write,
            create,
        } => {
            let f = client.open(
                &path,
                OpenOptions::new()
                    .read(read)
                    .write(write)
                    .create(create)
                    .model(model),
            )?;
            if let Some(old) = file.replace(f) {
                old.close()?;
            }
        }
        Cmd::Write { off, len, id } => {
            let buf: Vec<u8> = (off..off + len).map(|o| pattern_byte(id, o)).collect();
            file.as_mut().ok_or_else(no_file)?.write_at(&buf, off)?;
        }
        Cmd::Read { off, len } => {
            let mut buf = vec![0u8; len as usize];
            let n = file.as_mut().ok_or_else(no_file)?.read_at(&mut buf, off)?;
            buf.truncate(n);
            return Ok(Some(buf));
        }
        Cmd::Attach { off, len } => file.as_mut().ok_or_else(no_file)?.attach(off, len)?,
        Cmd::AttachFile => file.as_mut().ok_or_else(no_file)?.attach_file()?,
        Cmd::Detach { off, len } => file.as_mut().ok_or_else(no_file)?.detach(off, len)?,
        Cmd::DetachFile => file.as_mut().ok_or_else(no_file)?.detach_file()?,
        Cmd::Commit => file.as_mut().ok_or_else(no_file)?.commit()?,
        Cmd::SessionOpen => file.as_mut().ok_or_else(no_file)?.session_open()?,
        Cmd::SessionClose => file.as_mut().ok_or_else(no_file)?.session_close()?,
        Cmd::Sync => file.as_mut().ok_or_else(no_file)?.sync()?,
        Cmd::Flush => {
            file.as_mut().ok_or_else(no_file)?.flush_file()?;
        }
        Cmd::Lock {
            off,
            len,
            exclusive,
            wait,
        } => file
            .as_mut()
            .ok_or_else(no_file)?
            .lock(off, len, kind(exclusive), wait)?,
        Cmd::Unlock { off, len } => file.as_mut().ok_or_else(no_file)?.unlock(off, len)?,
        Cmd::GetLock {
            off,
            len,
            exclusive,
        } => {
            let held = file
                .as_mut()
                .ok_or_else(no_file)?
                .get_lock(off, len, kind(exclusive))?;
            let text = match held {
                None => "none".to_string(),
                Some(h) => format!(
                    "{} {} {} {}",
                    h.owner.pid,
                    h.start,
                    h.end,
                    if h.kind == LockKind::Shared {
                        "shared"
                    } else {
                        "exclusive"
                    }
                ),
            };
            return Ok(Some(text.into_bytes()));
        }
        Cmd::ListLock { runs, wait } => {
            let held = file.as_mut().ok_or_else(no_file)?.lock_list(&runs, wait)?;
            let token = held.token;
            lists.push(held);
            return Ok(Some(token.to_string().into_bytes()));
        }
        Cmd::ListUnlock { token } => {
            let i = lists.iter().position(|h| h.token == token).ok_or_else(|| {
                FsError::new(
                    tessera_client::Errno::Inval,
                    format!("this rank holds no list lock {token}"),
                )
            })?;
            let held = lists.swap_remove(i);
            file.as_mut().ok_or_else(no_file)?.unlock_list(held)?;
        }
        Cmd::Stats => {
            let json = serde_json::to_vec(&client.stats()).expect("statistics are plain data");
            return Ok(Some(json));
        }
        Cmd::TxnOpen => return Ok(Some(client.txn_open()?.to_string().into_bytes())),
        Cmd::TxnJoin { txn } => client.txn_join(txn)?,
        Cmd::TxnDecide { txn, commit } => client.txn_decide(txn, commit, Vec::new())?,
        Cmd::Close => file.take().ok_or_else(no_file)?.close()?,
        Cmd::StatPath { path } => {
            let a = client.stat(&path)?;
            return Ok(Some(format!("{} {}", a.size, a.mtime_ns).into_bytes()));
        }
        Cmd::List { dir } => {
            let lines: Vec<String> = client
                .readdir_plus(&dir)?
                .into_iter()
                .map(|(e, a)| match a {
                    Some(a) => format!("{} {}", e.name, a.size),
                    None => format!("{} -", e.name),
                })
                .collect();
            return Ok(Some(lines.join("\n").into_bytes()));
        }
        Cmd::Touch { path } => client.create(&path)?.close()?,
        Cmd::Unlink { path } => client.unlink(&path)?,
        Cmd::Exit => {}
    }
    Ok(None)
}

fn kind(exclusive: bool) -> LockKind {
    if exclusive {
        LockKind::Exclusive
    } else {
        LockKind::Shared
    }
}

/// Runs commands from stdin until `exit` or end of input.
pub fn main(client: Client) -> anyhow::Result<()> {
    let mut file: Option<File> = None;
    let mut lists = Vec::new();
    serve(|cmd| run_cmd(&client, &mut file, &mut lists, cmd))
}

/// Answers commands read from stdin with `run` until `exit` or end of input: a ready line
/// first, then one reply line per command.
pub fn serve(mut run: impl FnMut(Cmd) -> Result<Option<Vec<u8>>, FsError>) -> anyhow::Result<()> {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{}",
        serde_json::to_string(&Reply {
            ok: true,
            data: None,
            errno: None,
            msg: None
        })?
    )?;
    out.flush()?;
    for line in stdin.lock().lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let cmd: Cmd = serde_json::from_str(&line)?;
        let exit = cmd == Cmd::Exit;
        let reply = match run(cmd) {
            Ok(data) => Reply {
                ok: true,
                data: data.map(|d| d.iter().map(|b| format!("{b:02x}")).collect()),
                errno: None,
                msg: None,
            },
            Err(e) => Reply {
                ok: false,
                data: None,
                errno: Some(e.errno.name().to_string()),
                msg: Some(e.message),
            },
        };
        writeln!(out, "{}", serde_json::to_string(&reply)?)?;
        out.flush()?;
        if exit {
            break;
        }
    }
    Ok(())
}
