#!/usr/bin/env bash
# The whole benchmark suite on this machine, then the report (docs/benchmarks.md + plots).
# Records go to results/; each run starts a fresh instance. Takes about 15 minutes on 2 cores.
# Extra arguments are passed to every run (e.g. --reps 5, --dir /mnt/nvme).
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ensure_build_deps
ensure_bench_deps
say "building tessera, tessera-bench and the interposer (release)"
cargo build --release --locked -q -p tessera-cli -p tessera-bench -p tessera-preload
B=target/release/tessera-bench
run() { say "tessera bench $*"; "$B" run "$@"; }
for n in 2 4 8; do
    run checkpoint --ranks "$n" "$@"
    run consistency --pattern CS-R --size 8192 --ops 2000 --ranks "$n" "$@"
    run consistency --pattern CC-R --size 8388608 --ops 8 --ranks "$n" "$@"
done
for size in 8192 8388608; do
    ops=$([ "$size" = 8192 ] && echo 2000 || echo 8)
    run consistency --pattern CN-W --size "$size" --ops "$ops" --ranks 4 "$@"
    run consistency --pattern SN-W --size "$size" --ops "$ops" --ranks 4 "$@"
done
run dl-read --ranks 4 "$@"
run scr --ranks 4 "$@"
run ops --ranks 4 "$@"
for shape in shared easy hard; do
    run meta --shape "$shape" --ranks 4 "$@"
done
# Aarestad et al.: MPI-IO atomic mode under every lock strategy (its own front end: MPI-IO programs
# through the interposer; records in results/atomic/).
say "tessera bench atomic --pattern block3d"
"$B" atomic --pattern block3d
say "tessera bench atomic --pattern flash"
"$B" atomic --pattern flash
say "tessera bench atomic --pattern tile"
"$B" atomic --pattern tile
# D2T: the transaction protocol's calls beside an allreduce, and D2T's workload
# with and without transactions (records in results/txn/).
say "tessera bench txn"
"$B" txn --ranks 4,8,16,32,64 --reps 5
# The Python package beside the Rust client: readinto, and the deep-learning pattern beside
# dl-read and plain Python reads of a local file (results/python/).
say "the Python package (scripts/bench-python.sh)"
bash scripts/bench-python.sh
say "report"
"$B" report
