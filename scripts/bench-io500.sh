#!/usr/bin/env bash
# IO500, unmodified, through the interposer on Tessera (3 daemons), once with IO500's own
# pfind and once with `tessera find` as its external find, and on the local disk, with
# scripts/io500-short.ini (a 10-second stonewall: no valid submission). Prints each phase's
# result side by side.
#
# IO500 is not part of Tessera: build it by hand and name its directory in IO500_DIR.
#   git clone https://github.com/IO500/io500 && cd io500
#   git clone https://github.com/hpc/ior build/ior && git -C build/ior checkout 5fcf0ba995f
#   git clone https://github.com/VI4IO/pfind build/pfind
#   (cd build/ior && ./bootstrap && ./configure --prefix=$PWD/../.. && make -C src install)
#   (cd build/pfind && CC=mpicc ./compile.sh) && make     # needs electric-fence, Open MPI
#
# Usage: IO500_DIR=DIR bash scripts/bench-io500.sh [RANKS] [LOCAL_DIR]
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ranks=${1:-4}
local_dir=${2:-/tmp}
io500_dir=${IO500_DIR:-}
if [[ -z $io500_dir || ! -x $io500_dir/io500 ]]; then
    echo "IO500 is not here (IO500_DIR=${io500_dir:-unset} has no io500 binary)." >&2
    sed -n '/^# IO500 is not part/,/^# Usage/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
ensure_build_deps
cargo build --release -q -p tessera-cli -p tessera-preload
bin=$PWD/target/release
lib=$bin/libtessera_preload.so
ini=$PWD/scripts/io500-short.ini
work=$(mktemp -d "$local_dir/tessera-bench-io500.XXXXXX")
export TESSERA_INSTANCE=$work/instance OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
trap '"$bin/tessera" stop >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
mkdir -m 700 "$TESSERA_INSTANCE"
"$bin/tessera" start --daemons 3 --pfs "$work/pfs" --bb-root "$work/bb" >/dev/null

# run NAME DATADIR FIND(pfind|tessera) [mpirun args...]: IO500's output in $work/NAME.out.
run() {
    local name=$1 data=$2 find=$3
    shift 3
    sed -e "s|^datadir = .*|datadir = $data|" -e "s|^resultdir = .*|resultdir = $work/results-$name|" "$ini" > "$work/$name.ini"
    if [[ $find == tessera ]]; then
        sed -i -e "s|^external-script =.*|external-script = $bin/tessera|" \
            -e "s|^external-extra-args =.*|external-extra-args = find --io500|" "$work/$name.ini"
    fi
    echo "== $name ($ranks ranks) ..." >&2
    (cd "$io500_dir" && mpirun -np "$ranks" --oversubscribe "$@" ./io500 "$work/$name.ini") > "$work/$name.out" 2>&1 || {
        tail -20 "$work/$name.out" >&2
        echo "IO500 failed ($name): $work/$name.out" >&2
        trap - EXIT
        exit 1
    }
    # The short stonewall makes IO500 say each run is invalid; any other ERROR is shown.
    grep -n "ERROR" "$work/$name.out" | grep -v "smaller than expected minimum runtime" >&2 || true
}
run local "$work/local" pfind
run tessera-pfind /tessera/io500-pfind pfind -x LD_PRELOAD="$lib" -x TESSERA_INSTANCE
run tessera-find /tessera/io500-find tessera -x LD_PRELOAD="$lib" -x TESSERA_INSTANCE
# A line per phase and score: the local disk, Tessera with pfind, Tessera with tessera find.
awk '
    /^\[RESULT\]|^\[SCORE/ {
        key = $2; val = ($1 == "[SCORE") ? $0 : $3 " " $4
        if ($1 == "[SCORE") { key = "score"; val = $0; sub(/.*\[SCORE[^]]*\] */, "", val) }
        v[FILENAME, key] = val; if (!(key in seen)) { seen[key] = 1; order[++n] = key }
    }
    END {
        printf "%-26s %-28s %-28s %s\n", "phase", "local disk", "Tessera (pfind)", "Tessera (tessera find)"
        for (i = 1; i <= n; i++) { k = order[i]
            printf "%-26s %-28s %-28s %s\n", k, v[ARGV[1], k], v[ARGV[2], k], v[ARGV[3], k] }
    }' "$work/local.out" "$work/tessera-pfind.out" "$work/tessera-find.out"
