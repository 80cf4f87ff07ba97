#!/usr/bin/env bash
# The FusionFS and Swift experiment on emulated hosts (root): reads placed by the locality query, blind,
# with migrate-on-open and direct, against hosts (2, 3, 4, 6; one task per host) and against
# tasks per host (1, 2, 4 on 4 hosts); records in results/locality/, then the report.
# Extra arguments are passed to every run (e.g. --files 24 --size 32MiB --reps 5).
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ensure_build_deps
ensure_bench_deps
ensure_host_deps
say "building tessera, tessera-bench and the interposer (release)"
cargo build --release --locked -q -p tessera-cli -p tessera-bench -p tessera-preload
B=target/release/tessera-bench
bash scripts/hosts.sh up 6
eval "$(bash scripts/hosts.sh env)"
for n in 2 3 4 6; do
    say "tessera bench locality --hosts $n"
    "$B" locality --hosts "$n" "$@"
done
for t in 2 4; do
    say "tessera bench locality --hosts 4 --tasks-per-host $t"
    "$B" locality --hosts 4 --tasks-per-host "$t" "$@"
done
say "report"
"$B" report
