//! `tessera find`: every daemon searches its own shard, and the answer equals, as a set, GNU
//! find's through the interposer on the same tree, predicate by predicate.

mod common;

use common::{Inst, ok_under};
use std::collections::BTreeSet;
use tessera_cli::script::Cmd;
use tessera_client::Model;

/// A tree with names, sizes, kinds and times to tell apart, a sibling whose name extends the
/// root's (`t-x`), and links.
const TREE: &str = r#"
set -e
mkdir -p /tessera/t/a/b /tessera/t/c /tessera/t-x /tessera/t/old
i=0
while [ $i -lt 120 ]; do
  printf %0${i}d 0 > /tessera/t/a/f$i
  head -c 3901 /dev/zero > /tessera/t/c/g${i}01
  i=$((i+1))
done
echo hidden > /tessera/t/.dot
echo x > /tessera/t-x/f1
ln -s a /tessera/t/la
ln -s missing /tessera/t/dangling
echo old > /tessera/t/old/ancient01
head -c 3901 /dev/zero > /tessera/t/old/ancient3901_01
touch -d 2001-01-01 /tessera/t/old/ancient01 /tessera/t/old/ancient3901_01
"#;

fn lines(out: &std::process::Output) -> BTreeSet<String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn tessera_find_answers_as_gnu_find_does() {
    let inst = Inst::start(3);
    ok_under(&inst, 0, "sh", &["-c", TREE]);
    // A reference time between the old files and the rest.
    let reference = common::scratch("find").join("reference");
    std::fs::write(&reference, b"").unwrap();
    let out = std::process::Command::new("touch")
        .args(["-d", "2010-01-01"])
        .arg(&reference)
        .output()
        .unwrap();
    assert!(out.status.success());
    let reference = reference.to_str().unwrap().to_string();
    // A file still open under the session model: published at 6 bytes, 4096 more written
    // and not published; both finds see the published size.
    ok_under(&inst, 1, "sh", &["-c", "printf 123456 > /tessera/t/open01"]);
    let mut writer = inst.rank(2);
    writer.open("/tessera/t/open01", Model::Session, true);
    writer.ok(&Cmd::Write {
        off: 6,
        len: 4096,
        id: 9,
    });

    let cases: Vec<Vec<&str>> = vec![
        vec![],
        vec!["-name", "*01*"],
        vec!["-name", "f1?"],
        vec!["-name", ".*"],
        vec!["-size", "3901c"],
        vec!["-size", "6c"],
        vec!["-size", "+1k"],
        vec!["-size", "-2"],
        vec!["-type", "d"],
        vec!["-type", "f"],
        vec!["-type", "l"],
        vec!["-newer", reference.as_str()],
        vec![
            "-newer",
            reference.as_str(),
            "-size",
            "3901c",
            "-name",
            "*01*",
        ],
        vec!["-newer", "/tessera/t/a/f5", "-type", "f"],
    ];
    for (i, preds) in cases.iter().enumerate() {
        let mut gnu_args = vec!["/tessera/t"];
        gnu_args.extend(preds);
        let gnu = lines(&ok_under(&inst, (i % 3) as u32, "find", &gnu_args));
        let mut ours_args = vec!["find", "--page-entries", "64", "/tessera/t"];
        ours_args.extend(preds);
        let ours = lines(&inst.tessera(&ours_args));
        assert!(
            !gnu.is_empty() || preds.contains(&"l"),
            "{preds:?}: GNU find found nothing"
        );
        assert_eq!(
            ours, gnu,
            "tessera find {preds:?} (left) against GNU find's (right)"
        );
    }
    // IO500's form: only the last line, with the files looked at.
    let out = inst.tessera(&[
        "find",
        "--io500",
        "/tessera/t",
        "-newer",
        &reference,
        "-size",
        "3901c",
        "-name",
        "*01*",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    let files = 120 * 2 + 1 + 2 + 2 + 1;
    assert_eq!(text, format!("MATCHED 120/{files}\n"), "{out:?}");
    // A missing root, a bad predicate: an error naming it.
    let out = inst.tessera(&["find", "/tessera/nowhere"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/tessera/nowhere"));
    let out = inst.tessera(&["find", "/tessera/t", "-perm", "644"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown predicate -perm"));
    drop(writer);
}
