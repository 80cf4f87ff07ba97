#!/usr/bin/env bash
# The Python package's readinto of 1 MiB blocks from a local log beside the Rust client's
# reads of the same file (`tessera-bench read-blocks`), interleaved, in one instance: prints
# min / median / max MiB/s of each and their ratio. The package is built in the release
# profile into its own virtual environment under target/.
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
trap '"$T" --instance "$work/inst" stop >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
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
python3 - "${rust[*]}" "${py[*]}" <<'PY'
import statistics, sys
rust = [float(x) for x in sys.argv[1].split()]
py = [float(x) for x in sys.argv[2].split()]
ratios = [p / r for p, r in zip(py, rust)]
fmt = lambda xs: f"{min(xs):.0f} / {statistics.median(xs):.0f} / {max(xs):.0f}"
print(f"1 MiB reads of a local log, MiB/s min / median / max of {len(rust)}")
print(f"  Rust client        {fmt(rust)}")
print(f"  Python readinto    {fmt(py)}")
print(f"  ratio, same run    {min(ratios):.2f} / {statistics.median(ratios):.2f} / {max(ratios):.2f}")
PY
