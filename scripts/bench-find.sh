#!/usr/bin/env bash
# `tessera find` against GNU find through the interposer and GNU find on a local directory,
# over the same tree (FILES files in directories of 1,000, IO500's find predicates: -newer a
# reference, -size 3901c, -name '*01*'), 3 runs each, alternating; prints min/median/max of
# the seconds and the matches. Usage: bash scripts/bench-find.sh [FILES] [LOCAL_DIR]
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ensure_build_deps
files=${1:-100000}
local_dir=${2:-/tmp}
cargo build --release -q -p tessera-cli -p tessera-preload
bin=$PWD/target/release
lib=$bin/libtessera_preload.so
work=$(mktemp -d "$local_dir/tessera-bench-find.XXXXXX")
export TESSERA_INSTANCE=$work/instance
trap '"$bin/tessera" stop >/dev/null 2>&1 || true; rm -rf "$work" /dev/shm/tessera-bench-find-$$' EXIT
mkdir -m 700 "$TESSERA_INSTANCE"
"$bin/tessera" start --daemons 3 --pfs "$work/pfs" --bb-root /dev/shm/tessera-bench-find-$$ >/dev/null
touch -d 2010-01-01 "$work/reference"
# The tree: one file in ten is 3901 bytes, the rest 100; names count up, so "*01*" picks some.
make_tree='
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
small, big = b"x" * 100, b"y" * 3901
for i in range(n):
    d = f"{root}/d{i // 1000}"
    if i % 1000 == 0:
        os.makedirs(d, exist_ok=True)
    fd = os.open(f"{d}/file.{i}", os.O_CREAT | os.O_WRONLY, 0o644)
    os.write(fd, big if i % 10 == 1 else small)
    os.close(fd)
'
echo "making $files files in Tessera and in $work/local ..."
LD_PRELOAD=$lib python3 -c "$make_tree" /tessera/tree "$files"
python3 -c "$make_tree" "$work/local/tree" "$files"
preds=(-newer "$work/reference" -size 3901c -name '*01*')
ours=() gnu=() local=()
secs() { local s e; s=$(date +%s.%N); "$@" > "$work/out"; e=$(date +%s.%N); echo "$e - $s" | bc; }
for _ in 1 2 3; do
    ours+=("$(secs "$bin/tessera" find /tessera/tree "${preds[@]}")")
    n_ours=$(wc -l < "$work/out")
    gnu+=("$(secs env LD_PRELOAD="$lib" find /tessera/tree "${preds[@]}")")
    n_gnu=$(wc -l < "$work/out")
    local+=("$(secs find "$work/local/tree" "${preds[@]}")")
    n_local=$(wc -l < "$work/out")
done
stats() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {printf "min %.3f  median %.3f  max %.3f s", a[1], a[int((NR+1)/2)], a[NR]}'; }
echo "tessera find                        : $(stats "${ours[@]}")  ($n_ours matches)"
echo "GNU find through the interposer     : $(stats "${gnu[@]}")  ($n_gnu matches)"
echo "GNU find on the local disk          : $(stats "${local[@]}")  ($n_local matches)"
