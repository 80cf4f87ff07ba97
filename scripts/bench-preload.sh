#!/usr/bin/env bash
# Pass-through cost of the LD_PRELOAD interposer: a loop of open/read/close on a local file,
# with and without the library, alternating, 5 runs each; prints min/median/max (µs/iteration).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ensure_build_deps
cargo build --release -q -p tessera-preload
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -o "$work/loop" crates/tessera-preload/bench/passthrough.c
head -c 4096 /dev/urandom > "$work/small.bin"
lib=$PWD/target/release/libtessera_preload.so
plain=() pre=()
for _ in 1 2 3 4 5; do
    plain+=("$("$work/loop" "$work/small.bin" 200000)")
    pre+=("$(LD_PRELOAD=$lib "$work/loop" "$work/small.bin" 200000)")
done
stats() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {printf "min %s  median %s  max %s\n", a[1], a[int((NR+1)/2)], a[NR]}'; }
echo "without the interposer (µs/iteration): $(stats "${plain[@]}")"
echo "with the interposer    (µs/iteration): $(stats "${pre[@]}")"
