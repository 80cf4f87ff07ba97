#!/usr/bin/env bash
# Many writers of one file (tessera bench scale): the writer sweep W = 100, 1,000, 10,000 at
# K = 1,000 pieces of 16 bytes, the piece sweep K = 100 and 10,000 at W = 1,000, and random
# offsets at W = 100 and 1,000; 3 repetitions each, then the report. About 15 minutes on 2 cores.
# Extra arguments are passed to every run (e.g. --reps 5, --dir /mnt/nvme).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ensure_build_deps
ensure_bench_deps
say "building tessera and tessera-bench (release)"
cargo build --release --locked -q -p tessera-cli -p tessera-bench
B=target/release/tessera-bench
run() { say "tessera bench $*"; "$B" run scale --xfer 16 --ranks 2 "$@"; }
for w in 100 1000 10000; do
    run --writers "$w" --writes 1000 "$@"
done
for k in 100 10000; do
    run --writers 1000 --writes "$k" "$@"
done
for w in 100 1000; do
    run --writers "$w" --writes 1000 --random "$@"
done
say "report"
"$B" report
