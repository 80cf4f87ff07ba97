//! The protocol under mpirun: every scenario of `tessera-txn-check` at sizes and fan-ins that
//! give one, two and three tiers (a fan-in of 2 makes 7 processes four groups).

const CHECK: &str = env!("CARGO_BIN_EXE_tessera-txn-check");

fn mpirun(np: u32, fan_in: u32, scenario: &str) -> String {
    let out = tessera_testkit::mpirun(np)
        .args(["--mca", "btl_vader_single_copy_mechanism", "none"])
        .args(["-x", &format!("TESSERA_TXN_FAN_IN={fan_in}")])
        .arg(CHECK)
        .arg(scenario)
        .output()
        .expect("mpirun (apt-get install openmpi-bin)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{np} processes, fan-in {fan_in}, {scenario}:\n{text}"
    );
    text
}

#[test]
fn every_scenario_at_one_two_and_three_tiers() {
    for (np, fan_in, groups) in [(1, 256, 1), (2, 256, 2), (7, 2, 4), (5, 256, 2)] {
        for scenario in ["commit", "vote-abort", "uncommitted", "mixed", "large"] {
            let text = mpirun(np, fan_in, scenario);
            assert!(
                text.contains(&format!(
                    "{scenario}: ok ({np} processes, {groups} sub-coordinators)"
                )),
                "{text}"
            );
        }
    }
}

#[test]
fn processes_that_name_a_global_sub_transaction_differently_all_learn_it() {
    let text = mpirun(4, 2, "disagree");
    assert!(text.contains("disagree: ok (4 processes)"), "{text}");
}

#[test]
fn a_bad_fan_in_is_named() {
    // Rank 0's value holds for all: every process fails with it, none waits.
    let out = tessera_testkit::mpirun(3)
        .args(["-x", "TESSERA_TXN_FAN_IN=1"])
        .arg(CHECK)
        .arg("commit")
        .output()
        .expect("mpirun");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("TESSERA_TXN_FAN_IN on rank 0 is \"1\"") && err.contains("at least 2"),
        "{err}"
    );
}
