//! One demo rank: prepares its data, meets the others at a start barrier, does its timed
//! I/O (through Tessera or directly), verifies what it read, and reports its times.

use super::pattern::{fill_pattern, first_mismatch, pattern_at};
use anyhow::{Result, bail};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use tessera_client::{Client, Model, OpenOptions};

/// Which job a demo rank does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RankMode {
    TesseraWrite,
    TesseraRead,
    DirectN1Write,
    DirectN1Read,
    DirectNnWrite,
    DirectNnRead,
}

/// Arguments of one demo rank (run by the demo, not by hand).
#[derive(Clone, Debug, clap::Args)]
pub struct RankArgs {
    #[arg(long, value_enum)]
    pub mode: RankMode,
    /// This rank (default: the launcher's task rank).
    #[arg(long)]
    pub rank: Option<u32>,
    #[arg(long)]
    pub ranks: u32,
    #[arg(long)]
    pub xfer: u64,
    #[arg(long)]
    pub count: u64,
    /// Tessera path, or direct file (N-1) / file prefix (N-N).
    #[arg(long)]
    pub target: String,
    /// Meet the other ranks here (files `ready.R`, then `go`) instead of on stdin and
    /// stdout: for ranks started by mpirun, which passes stdin to one rank only.
    #[arg(long)]
    pub barrier: Option<PathBuf>,
}

/// Logical offset of piece `i` of `rank` in the N-1 strided file.
fn n1_offset(i: u64, rank: u32, ranks: u32, xfer: u64) -> u64 {
    (i * u64::from(ranks) + u64::from(rank)) * xfer
}

fn now_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_nanos()
}

/// One rank: prepare, say "ready", wait for "go", do the timed work, report "done t0 t1 bytes".
pub fn rank_main(a: RankArgs) -> Result<()> {
    let ranks = a.ranks;
    let env: std::collections::HashMap<String, String> = std::env::vars().collect();
    let Some(rank) = a.rank.or_else(|| crate::launch::rank_from_env(&env)) else {
        bail!("demo-rank: give --rank, or start it through a launcher that sets the rank");
    };
    let src = match a.mode {
        RankMode::TesseraRead | RankMode::DirectN1Read | RankMode::DirectNnRead => {
            (rank + 1) % ranks
        }
        _ => rank,
    };
    let piece = a.xfer as usize;
    let total = piece * a.count as usize;
    // Data is prepared before the clock starts.
    let mut data = vec![0u8; total];
    let writing = matches!(
        a.mode,
        RankMode::TesseraWrite | RankMode::DirectN1Write | RankMode::DirectNnWrite
    );
    if writing {
        for i in 0..a.count {
            fill_pattern(
                &mut data[i as usize * piece..(i as usize + 1) * piece],
                n1_offset(i, src, ranks, a.xfer),
            );
        }
    }
    let client = match a.mode {
        RankMode::TesseraWrite | RankMode::TesseraRead => Some(Client::from_env()?),
        _ => None,
    };
    match &a.barrier {
        Some(dir) => {
            std::fs::write(dir.join(format!("ready.{rank}")), b"")?;
            while !dir.join("go").exists() {
                std::thread::sleep(std::time::Duration::from_micros(500));
            }
        }
        None => {
            println!("ready");
            std::io::stdout().flush()?;
            let mut line = String::new();
            std::io::stdin().read_line(&mut line)?;
        }
    }
    let t0 = now_ns();
    match a.mode {
        RankMode::TesseraWrite => {
            let fs = client.as_ref().expect("tessera mode");
            let mut f = fs.open(
                &a.target,
                OpenOptions::new()
                    .write(true)
                    .create(true)
                    .model(Model::Commit),
            )?;
            for i in 0..a.count {
                f.write_at(
                    &data[i as usize * piece..(i as usize + 1) * piece],
                    n1_offset(i, src, ranks, a.xfer),
                )?;
            }
            f.commit()?;
            f.close()?;
        }
        RankMode::TesseraRead => {
            let fs = client.as_ref().expect("tessera mode");
            let mut f = fs.open(
                &a.target,
                OpenOptions::new().read(true).model(Model::Session),
            )?;
            for i in 0..a.count {
                f.read_exact_at(
                    &mut data[i as usize * piece..(i as usize + 1) * piece],
                    n1_offset(i, src, ranks, a.xfer),
                )?;
            }
            f.close()?;
        }
        RankMode::DirectN1Write => {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(&a.target)?;
            for i in 0..a.count {
                f.write_all_at(
                    &data[i as usize * piece..(i as usize + 1) * piece],
                    n1_offset(i, src, ranks, a.xfer),
                )?;
            }
        }
        RankMode::DirectN1Read => {
            let f = std::fs::File::open(&a.target)?;
            for i in 0..a.count {
                f.read_exact_at(
                    &mut data[i as usize * piece..(i as usize + 1) * piece],
                    n1_offset(i, src, ranks, a.xfer),
                )?;
            }
        }
        RankMode::DirectNnWrite => {
            let mut f = std::fs::File::create(format!("{}.{src}", a.target))?;
            for i in 0..a.count as usize {
                f.write_all(&data[i * piece..(i + 1) * piece])?;
            }
        }
        RankMode::DirectNnRead => {
            let mut f = std::fs::File::open(format!("{}.{src}", a.target))?;
            for i in 0..a.count as usize {
                f.read_exact(&mut data[i * piece..(i + 1) * piece])?;
            }
        }
    }
    let t1 = now_ns();
    if !writing {
        for i in 0..a.count {
            let off = n1_offset(i, src, ranks, a.xfer);
            let got = &data[i as usize * piece..(i as usize + 1) * piece];
            if let Some(k) = first_mismatch(got, off) {
                bail!(
                    "rank {rank}: verification failed at logical offset {} (piece {i} of rank {src}): got {:#04x}, expected {:#04x}",
                    off + k as u64,
                    got[k],
                    pattern_at(off + k as u64)
                );
            }
        }
    }
    println!("done {rank} {t0} {t1} {total}");
    Ok(())
}
