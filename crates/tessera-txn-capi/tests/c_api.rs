//! libtessera_txn.so from C: a program compiled with mpicc against `tessera_txn.h` runs the
//! seed's sequence, a vote to abort, and bad calls, under mpirun at one and three tiers.

use std::path::PathBuf;
use std::process::Command;

/// The directory of the built library (`cargo build -p tessera-txn-capi`).
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    let dir = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("target dir")
        .to_path_buf();
    assert!(
        dir.join("libtessera_txn.so").exists(),
        "{} has no libtessera_txn.so: build it with `cargo build -p tessera-txn-capi`",
        dir.display()
    );
    dir
}

fn compile() -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = std::env::temp_dir().join(format!("tessera-txn-c-{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    let exe = out.join("txn_c");
    let lib = lib_dir();
    let cc = Command::new("mpicc")
        .args(["-O2", "-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(here.join("tests/c/txn_c.c"))
        .arg(format!("-I{}", here.join("include").display()))
        .arg(format!("-L{}", lib.display()))
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-ltessera_txn")
        .output()
        .expect("mpicc (apt-get install libopenmpi-dev)");
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    exe
}

fn mpirun(exe: &PathBuf, np: u32, fan_in: u32, scenario: &str) -> String {
    let out = tessera_testkit::mpirun(np)
        .args(["--mca", "btl_vader_single_copy_mechanism", "none"])
        .args(["-x", &format!("TESSERA_TXN_FAN_IN={fan_in}")])
        .arg(exe)
        .arg(scenario)
        .output()
        .expect("mpirun");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{np} processes, {scenario}:\n{text}");
    text
}

#[test]
fn the_c_api_commits_aborts_and_names_bad_calls() {
    let exe = compile();
    for (np, fan_in, subs) in [(1, 256, 1), (5, 2, 3)] {
        for scenario in ["commit", "abort"] {
            let text = mpirun(&exe, np, fan_in, scenario);
            assert!(
                text.contains(&format!(
                    "txn_c {scenario}: ok ({np} processes, {subs} sub-coordinators)"
                )),
                "{text}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(exe.parent().unwrap());
}
