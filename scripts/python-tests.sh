#!/usr/bin/env bash
# The Python package's tests (python/tests): a virtual environment cached under target/,
# keyed by python/requirements-test.txt (a second run installs nothing new), the package
# built from this tree by pip through maturin (PEP 517), then pytest against an instance
# started with the `tessera` command of this tree.
#
#   bash scripts/python-tests.sh [PYTEST_ARGS...]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
req=python/requirements-test.txt
venv=target/python-venv-$(sha256sum "$req" | cut -c1-12)
if [ ! -e "$venv/.installed" ]; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$req"
    touch "$venv/.installed"
fi
# The tests take the debug profile, which reuses the workspace's debug build; benchmarks
# install the release build.
MATURIN_PEP517_ARGS="--profile dev" "$venv/bin/pip" install -q --disable-pip-version-check \
    --force-reinstall --no-deps ./python
cargo build --locked -q -p tessera-cli
TESSERA_BIN=$PWD/target/debug/tessera "$venv/bin/python" -m pytest -q -p no:cacheprovider python/tests "$@"
