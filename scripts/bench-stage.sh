#!/usr/bin/env bash
# Stage-in beside `cp -r` and a parallel copy (`find | xargs -P 4 cp`), both through the
# interposer, of one large file and of 10,000 small ones, on 3 emulated hosts (root). Each
# way runs 3 times into a fresh destination; prints min / median / max seconds and MiB/s.
#
#   bash scripts/bench-stage.sh [LARGE_MIB (1024)] [SMALL_FILES (10000)] [SMALL_BYTES (4096)]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
LARGE_MIB=${1:-1024}
SMALL=${2:-10000}
SMALL_BYTES=${3:-4096}
T=$PWD/target/release/tessera
PRELOAD=$PWD/target/release/libtessera_preload.so
[ -x "$T" ] && [ -f "$PRELOAD" ] || {
    echo "build first: cargo build --release -p tessera-cli -p tessera-preload" >&2
    exit 1
}
bash scripts/hosts.sh up 3 >/dev/null
eval "$(bash scripts/hosts.sh env)"
work=$(mktemp -d /tmp/tessera-bench-stage-XXXXXX)
trap 'TESSERA_INSTANCE=$work/inst "$T" stop >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
export TESSERA_INSTANCE=$work/inst
bash scripts/hosts.sh exec 1 "$T" start --hostfile "$TESSERA_HOSTFILE" --pfs "$work/pfs" \
    --bb-root "$TESSERA_HOSTS_LOCAL/$(basename "$work")" >/dev/null

mkdir -p "$work/large" "$work/small"
head -c $((LARGE_MIB << 20)) /dev/urandom > "$work/large/big"
for i in $(seq 1 "$SMALL"); do
    d="$work/small/d$((i % 100))"
    mkdir -p "$d"
    head -c "$SMALL_BYTES" /dev/urandom > "$d/f$i"
done
cat "$work"/large/big "$work"/small/*/* > /dev/null   # every way reads warm sources

on_h1() { bash scripts/hosts.sh exec 1 env TESSERA_INSTANCE="$TESSERA_INSTANCE" "$@"; }
seconds() { local s; s=$(date +%s.%N); "$@" >/dev/null; awk -v a="$(date +%s.%N)" -v b="$s" 'BEGIN { print a - b }'; }

way() { # way NAME SET REP
    local name=$1 set=$2 rep=$3 dest=/tessera/$1-$2-$3
    case $name in
        stage) seconds on_h1 "$T" stage-in --quiet "$work/$set" "$dest" ;;
        cp) seconds on_h1 env LD_PRELOAD="$PRELOAD" sh -c "mkdir -p $dest && cp -r $work/$set $dest/" ;;
        xargs) seconds on_h1 env LD_PRELOAD="$PRELOAD" sh -c \
            "cd $work && find $set -type d | sed 's|^|$dest/|' | xargs mkdir -p && find $set -type f | xargs -P 4 -I{} cp {} $dest/{}" ;;
    esac
}

summary() { # summary NAME SET BYTES TIMES...
    local name=$1 set=$2 bytes=$3; shift 3
    printf '%s\n' "$@" | sort -g | awk -v n="$name" -v s="$set" -v b="$bytes" '
        { t[NR] = $1 } END {
            printf "%-6s %-6s seconds %.2f / %.2f / %.2f   MiB/s %.0f / %.0f / %.0f\n",
                n, s, t[1], t[2], t[3], b / t[3] / 1048576, b / t[2] / 1048576, b / t[1] / 1048576 }'
}

for set in large small; do
    bytes=$(du -sb "$work/$set" | cut -f1)
    declare -A times=()
    for rep in 1 2 3; do
        for name in stage cp xargs; do
            times[$name]+="$(way "$name" "$set" "$rep") "
        done
    done
    for name in stage cp xargs; do
        # shellcheck disable=SC2086
        summary "$name" "$set" "$bytes" ${times[$name]}
    done
    unset times
done
