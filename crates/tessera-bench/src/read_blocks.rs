//! `tessera-bench read-blocks`: one process reading a Tessera file in blocks through the Rust
//! client, pass after pass, each pass's rate on a line: the reference that other layers'
//! reads of the same file are measured against (the Python package's `readinto`:
//! `scripts/bench-python.sh`).

use anyhow::{Result, bail};
use std::path::PathBuf;
use std::time::Instant;
use tessera_client::{Client, InstanceLayout};

#[derive(clap::Args, Debug)]
pub struct ReadBlocksOpts {
    /// The instance directory.
    #[arg(long)]
    pub instance: PathBuf,
    /// The daemon to connect to (default: this host's).
    #[arg(long)]
    pub node: Option<u32>,
    /// The Tessera file to read.
    pub path: String,
    /// Bytes per read.
    #[arg(long, default_value = "1MiB", value_parser = tessera_cli::size::parse_size)]
    pub block: u64,
    /// Timed passes over the file, after one untimed pass.
    #[arg(long, default_value_t = 3)]
    pub passes: u32,
}

/// Prints MiB/s of each timed pass.
pub fn run(o: ReadBlocksOpts) -> Result<()> {
    let c = Client::connect(InstanceLayout::new(&o.instance), o.node)?;
    let mut f = c.open_read(&o.path)?;
    let size = f.len()?;
    if size == 0 {
        bail!("{} is empty: nothing to read", o.path);
    }
    let mut buf = vec![0u8; o.block as usize];
    for pass in 0..=o.passes {
        let started = Instant::now();
        let mut at = 0;
        while at < size {
            let n = f.read_at(&mut buf, at)?;
            if n == 0 {
                bail!("{} ended at {at} of {size} bytes", o.path);
            }
            at += n as u64;
        }
        if pass > 0 {
            let secs = started.elapsed().as_secs_f64();
            println!("{:.1}", size as f64 / (1 << 20) as f64 / secs);
        }
    }
    f.close()?;
    Ok(())
}
