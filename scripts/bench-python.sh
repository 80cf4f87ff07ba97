#!/usr/bin/env bash
# The Python package beside the Rust client, each pair measured side by side in one run,
# min / median / max of RUNS and their ratios:
#   1. readinto of 1 MiB blocks from a local log beside the Rust client's reads of the same
#      file (`tessera-bench read-blocks`), in one instance;
#   2. the deep-learning read pattern (python/bench/dl_read.py) beside `tessera bench
#      dl-read` (4 processes, 3 daemons, 256 samples of 116 KiB each, 3 epochs; its
#      session_read_mibs), with the same reads of a local file through plain Python, warm and
#      cold (caches dropped; root only), as the limit.
# The package is built in the release profile into its own virtual environment under target/.
# The figures also go to results/python/python-<time>.json (beside, not in, the report).
#
#   bash scripts/bench-python.sh [FILE_MIB (512)] [RUNS (5)]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
MIB=${1:-512}
RUNS=${2:-5}
cargo build --locked --release -q -p tessera-cli -p tessera-bench
venv=target/python-bench-venv
if [ ! -e "$venv/.installed" ]; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    touch "$venv/.installed"
fi
"$venv/bin/pip" install -q --disable-pip-version-check --force-reinstall --no-deps ./python
T=$PWD/target/release/tessera
work=$(mktemp -d /tmp/tessera-bench-python-XXXXXX)
trap 'for i in "$work/inst" "$work/dl/inst"; do "$T" --instance "$i" stop >/dev/null 2>&1 || true; done; rm -rf "$work"' EXIT
"$T" start --instance "$work/inst" --daemons 1 --pfs "$work/pfs" --bb-root "$work/bb" >/dev/null
"$venv/bin/python" - "$work/inst" "$MIB" <<'PY'
import os, sys, tessera
fs = tessera.Client(sys.argv[1])
block = os.urandom(1 << 20)
with fs.open("/tessera/read.bin", "wb") as f:
    for _ in range(int(sys.argv[2])):
        f.write(block)
PY
rust=() py=()
for _ in $(seq 1 "$RUNS"); do
    rust+=($(target/release/tessera-bench read-blocks --instance "$work/inst" /tessera/read.bin --passes 1))
    py+=($("$venv/bin/python" python/bench/readinto.py "$work/inst" /tessera/read.bin $((1 << 20)) 1))
done
"$T" --instance "$work/inst" stop >/dev/null
# The deep-learning pattern: each run starts its instances afresh, Rust's and Python's in
# turn (tessera-bench starts its own), in the same directory; tessera-bench's records stay
# there (the report's dl-read figures come from scripts/bench.sh's own run).
dl_rust=() dl_py=()
for _ in $(seq 1 "$RUNS"); do
    dl_rust+=("$(target/release/tessera-bench run dl-read --ranks 4 --daemons 3 --reps 1 --json \
        --dir "$work" --results "$work/dl-records" \
        | tail -n 1)")
    rm -rf "$work/dl" && mkdir -p "$work/dl"
    "$T" start --instance "$work/dl/inst" --daemons 3 --pfs "$work/dl/pfs" \
        --bb-root "$work/dl/bb" >/dev/null
    dl_py+=("$("$venv/bin/python" python/bench/dl_read.py "$work/dl/inst" "$work/dl" \
        --ranks 4 --daemons 3)")
    "$T" --instance "$work/dl/inst" stop >/dev/null
done
mkdir -p results/python
python3 - "${rust[*]}" "${py[*]}" "$(printf '%s\n' "${dl_rust[@]}")" \
    "$(printf '%s\n' "${dl_py[@]}")" "results/python/python-$(date +%s).json" <<'PY'
import json, statistics, sys
rust = [float(x) for x in sys.argv[1].split()]
py = [float(x) for x in sys.argv[2].split()]
dl_rust = [json.loads(l)["metrics"]["session_read_mibs"] for l in sys.argv[3].splitlines()]
dl_py = [json.loads(l) for l in sys.argv[4].splitlines()]
fmt = lambda xs: f"{min(xs):.0f} / {statistics.median(xs):.0f} / {max(xs):.0f}" if xs else "n/a"
rfmt = lambda xs: f"{min(xs):.2f} / {statistics.median(xs):.2f} / {max(xs):.2f}"
ratios = [p / r for p, r in zip(py, rust)]
print(f"1 MiB reads of a local log, MiB/s min / median / max of {len(rust)}")
print(f"  Rust client        {fmt(rust)}")
print(f"  Python readinto    {fmt(py)}")
print(f"  ratio, same run    {rfmt(ratios)}")
session = [d["python_session_read_mibs"] for d in dl_py]
warm = [d["local_warm_read_mibs"] for d in dl_py]
cold = [d["local_cold_read_mibs"] for d in dl_py if d["local_cold_read_mibs"] is not None]
dl_ratios = [p / r for p, r in zip(session, dl_rust)]
print(f"deep-learning reads (4 processes, 116 KiB samples), MiB/s min / median / max of {len(dl_rust)}")
print(f"  Rust (tessera bench dl-read, session)   {fmt(dl_rust)}")
print(f"  Python package (session)                {fmt(session)}")
print(f"  ratio, same run                         {rfmt(dl_ratios)}")
print(f"  plain Python, local file, warm          {fmt(warm)}")
print(f"  plain Python, local file, cold          {fmt(cold)}")
runs = {"readinto_rust_mibs": rust, "readinto_python_mibs": py,
        "dl_rust_session_read_mibs": dl_rust, "python_session_read_mibs": session,
        "local_warm_read_mibs": warm, "local_cold_read_mibs": cold}
with open(sys.argv[5], "w") as f:
    json.dump({"workload": "python", "runs": runs}, f, indent=1)
print(f"full data: {sys.argv[5]}")
PY
