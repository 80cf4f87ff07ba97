//! The structs of `tessera.h` against their Rust definitions: a C program compiled against the
//! header prints every struct's size and alignment and every field's offset, and they must
//! equal Rust's. A field reordered or retyped on one side fails here, naming it.

use crate::{CExtent, CLocation, CPlacement, CStat};
use std::collections::BTreeMap;
use std::mem::{align_of, offset_of, size_of};
use std::process::Command;

/// `name -> value` for every size, alignment and offset, as Rust lays the structs out.
fn rust_layout() -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    let mut put = |k: &str, v: usize| {
        m.insert(k.to_string(), v);
    };
    put("tessera_stat.size", size_of::<CStat>());
    put("tessera_stat.align", align_of::<CStat>());
    put("tessera_stat.ino", offset_of!(CStat, ino));
    put("tessera_stat.kind", offset_of!(CStat, kind));
    put("tessera_stat.mode", offset_of!(CStat, mode));
    put("tessera_stat.uid", offset_of!(CStat, uid));
    put("tessera_stat.gid", offset_of!(CStat, gid));
    put("tessera_stat.size_field", offset_of!(CStat, size));
    put("tessera_stat.atime_ns", offset_of!(CStat, atime_ns));
    put("tessera_stat.mtime_ns", offset_of!(CStat, mtime_ns));
    put("tessera_stat.ctime_ns", offset_of!(CStat, ctime_ns));
    put("tessera_extent.size", size_of::<CExtent>());
    put("tessera_extent.align", align_of::<CExtent>());
    put("tessera_extent.start", offset_of!(CExtent, start));
    put("tessera_extent.end", offset_of!(CExtent, end));
    put("tessera_extent.node", offset_of!(CExtent, node));
    put("tessera_extent.client", offset_of!(CExtent, client));
    put("tessera_location.size", size_of::<CLocation>());
    put("tessera_location.align", align_of::<CLocation>());
    put("tessera_location.start", offset_of!(CLocation, start));
    put("tessera_location.end", offset_of!(CLocation, end));
    put("tessera_location.node", offset_of!(CLocation, node));
    put(
        "tessera_location.residence",
        offset_of!(CLocation, residence),
    );
    put("tessera_location.host", offset_of!(CLocation, host));
    put("tessera_location.addr", offset_of!(CLocation, addr));
    put("tessera_placement.size", size_of::<CPlacement>());
    put("tessera_placement.align", align_of::<CPlacement>());
    put("tessera_placement.error", offset_of!(CPlacement, error));
    put("tessera_placement.hosts", offset_of!(CPlacement, hosts));
    put("tessera_placement.size_field", offset_of!(CPlacement, size));
    put(
        "tessera_placement.best_bytes",
        offset_of!(CPlacement, best_bytes),
    );
    put(
        "tessera_placement.view_time_ns",
        offset_of!(CPlacement, view_time_ns),
    );
    put(
        "tessera_placement.best_host",
        offset_of!(CPlacement, best_host),
    );
    m
}

const PROBE: &str = r#"
#include <stdalign.h>
#include <stddef.h>
#include <stdio.h>
#include "tessera.h"
#define S(t) printf(#t ".size %zu\n" #t ".align %zu\n", sizeof(struct t), alignof(struct t))
#define F(t, f) printf(#t "." #f " %zu\n", offsetof(struct t, f))
int main(void) {
    S(tessera_stat);
    F(tessera_stat, ino); F(tessera_stat, kind); F(tessera_stat, mode); F(tessera_stat, uid);
    F(tessera_stat, gid);
    printf("tessera_stat.size_field %zu\n", offsetof(struct tessera_stat, size));
    F(tessera_stat, atime_ns); F(tessera_stat, mtime_ns); F(tessera_stat, ctime_ns);
    S(tessera_extent);
    F(tessera_extent, start); F(tessera_extent, end); F(tessera_extent, node);
    F(tessera_extent, client);
    S(tessera_location);
    F(tessera_location, start); F(tessera_location, end); F(tessera_location, node);
    F(tessera_location, residence); F(tessera_location, host); F(tessera_location, addr);
    S(tessera_placement);
    F(tessera_placement, error); F(tessera_placement, hosts);
    printf("tessera_placement.size_field %zu\n", offsetof(struct tessera_placement, size));
    F(tessera_placement, best_bytes); F(tessera_placement, view_time_ns);
    F(tessera_placement, best_host);
    return 0;
}
"#;

#[test]
fn header_structs_match_the_rust_layout() {
    let dir = std::env::temp_dir().join(format!("tessera-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("probe.c");
    let exe = dir.join("probe");
    std::fs::write(&src, PROBE).unwrap();
    let include = concat!(env!("CARGO_MANIFEST_DIR"), "/include");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let built = Command::new(&cc)
        .args(["-std=c11", "-Wall", "-Werror", "-I", include, "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("{cc} (a C compiler) is needed to check tessera.h: {e}"));
    assert!(
        built.status.success(),
        "compiling the layout probe against tessera.h failed:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let out = Command::new(&exe).output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let c: BTreeMap<String, usize> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (k, v) = l.split_once(' ').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect();
    let rust = rust_layout();
    let differ: Vec<String> = rust
        .iter()
        .filter(|(k, v)| c.get(*k) != Some(v))
        .map(|(k, v)| format!("{k}: Rust {v}, C {:?}", c.get(k)))
        .collect();
    assert!(
        differ.is_empty(),
        "tessera.h and lib.rs disagree:\n{}",
        differ.join("\n")
    );
    assert_eq!(
        c.len(),
        rust.len(),
        "the probe and the Rust list name the same fields"
    );
}
