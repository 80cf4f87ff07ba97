//! Repairs an operator runs on a stopped or damaged instance: `tessera salvage` (a node's
//! damaged state log) and `tessera check-names` (link counts below a file's names).

use anyhow::{Result, bail};
use tessera_proto::InstanceLayout;

/// `tessera salvage --node K`: keeps every intact record of the node's state log, drops the
/// damaged bytes (reported) and saves a copy of the damaged log. The daemon must be stopped.
pub fn salvage(layout: &InstanceLayout, node: u32) -> Result<()> {
    let cfg = layout.load_config()?;
    if node >= cfg.nodes {
        bail!(
            "node {node} does not exist: the instance has nodes 0..{}",
            cfg.nodes
        );
    }
    if crate::instance::is_up(layout, node) {
        bail!("the daemon of node {node} is running; stop it first (`tessera stop`)");
    }
    let report = tessera_daemon::store::state_log::salvage(&cfg.bb_dir(node))?;
    println!("{report}");
    Ok(())
}

/// `tessera check-names`: has every node count its files' names against their link counts,
/// raise a count below the names, and prints each file it changed.
pub fn check_names(layout: &InstanceLayout) -> Result<()> {
    layout.check_trusted()?;
    let cfg = layout.load_config()?;
    let admin = crate::admin::Admin::new(layout)?;
    let mut raised = 0;
    for n in 0..cfg.nodes {
        let report = admin.check_names(n)?;
        for (ino, count, names) in &report.raised {
            println!(
                "node {n}: inode {ino:#x} had a count of {count} for {} names, raised: {}",
                names.len(),
                names.join(" ")
            );
        }
        raised += report.raised.len();
        println!("node {n}: {} files checked", report.files);
    }
    println!("{raised} counts raised; remove the names you did not mean to keep");
    Ok(())
}
