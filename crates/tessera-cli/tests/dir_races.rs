//! A directory never loses a race with the creates inside it: an rmdir that answers has seen
//! every create that answered before it, and a create after it finds no directory. Before
//! seals, a create that passed its parent check on the parent's shard could land its entry
//! after an rmdir had checked every shard for children, leaving a name under no directory.

mod common;

use common::Inst;
use std::sync::{Arc, Barrier};
use tessera_client::{Client, Errno, OpenOptions};

const CREATORS: u32 = 2;

fn create(c: &Client, path: &str) -> Result<(), Errno> {
    c.open(path, OpenOptions::new().write(true).create(true))
        .and_then(|f| f.close())
        .map_err(|e| e.errno)
}

#[test]
fn creates_racing_an_rmdir_never_outlive_their_directory() {
    let inst = Arc::new(Inst::start(3));
    let rounds: u32 = if std::env::var_os("TESSERA_FULL").is_some() {
        400
    } else {
        100
    };
    let per_round = 6;
    let start = Arc::new(Barrier::new(CREATORS as usize + 1));
    let end = Arc::new(Barrier::new(CREATORS as usize + 1));
    let creators: Vec<_> = (0..CREATORS)
        .map(|k| {
            let (inst, start, end) = (inst.clone(), start.clone(), end.clone());
            std::thread::spawn(move || {
                let c = inst.client(1 + k);
                for r in 0..rounds {
                    start.wait();
                    for i in 0..per_round {
                        match create(&c, &format!("/tessera/d/r{r}-c{k}-{i}")) {
                            Ok(()) | Err(Errno::NoEnt) => {}
                            Err(e) => panic!("round {r}: create: {e:?}"),
                        }
                    }
                    end.wait();
                }
            })
        })
        .collect();
    let c = inst.client(0);
    let mut orphans = Vec::new();
    let mut removed_first = 0;
    for r in 0..rounds {
        c.mkdir("/tessera/d", 0o755).unwrap();
        start.wait();
        // Races the creators' first creates.
        let rmdir = c.rmdir("/tessera/d");
        end.wait();
        match rmdir {
            Ok(()) => {
                removed_first += 1;
                // No directory: no name inside it may exist.
                assert_eq!(c.stat("/tessera/d").unwrap_err().errno, Errno::NoEnt);
                for k in 0..CREATORS {
                    for i in 0..per_round {
                        let p = format!("/tessera/d/r{r}-c{k}-{i}");
                        if c.stat(&p).is_ok() {
                            orphans.push(p.clone());
                            c.unlink(&p).unwrap();
                        }
                    }
                }
            }
            Err(e) => {
                assert_eq!(e.errno, Errno::NotEmpty, "round {r}: {e}");
                for entry in c.readdir("/tessera/d").unwrap() {
                    c.unlink(&format!("/tessera/d/{}", entry.name)).unwrap();
                }
                c.rmdir("/tessera/d").unwrap();
            }
        }
    }
    for t in creators {
        t.join().unwrap();
    }
    assert!(
        orphans.is_empty(),
        "{} names outlived their directory (rmdir first in {removed_first} of {rounds} rounds): {:?}",
        orphans.len(),
        &orphans[..orphans.len().min(5)]
    );
}
