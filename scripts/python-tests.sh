#!/usr/bin/env bash
# The Python package's tests (python/tests): a virtual environment cached under target/,
# keyed by its requirements file (a second run installs nothing new), the package built from
# this tree by pip through maturin (PEP 517), then pytest against an instance started with
# the `tessera` command of this tree.
#
#   bash scripts/python-tests.sh [--full] [PYTEST_ARGS...]
#
# Without --full: the package's own tests (python/requirements-test.txt). With --full: every
# test, in an environment of Debian's python3 with --system-site-packages (mpi4py is Debian's
# python3-mpi4py) and python/requirements-full.txt (pandas, PyArrow, xarray, Zarr, Dask), the
# package built with MPI (`--features mpi`); the tests across emulated hosts run when
# TESSERA_TEST_HOSTS=3 says the hosts are up.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
full=0
if [ "${1:-}" = --full ]; then
    full=1
    shift
fi
if [ "$full" -eq 1 ]; then
    req=python/requirements-full.txt
    key=$(cat "$req" python/requirements-test.txt | sha256sum | cut -c1-12)
    venv=target/python-full-venv-$key
    make_venv() { /usr/bin/python3 -m venv --system-site-packages "$venv"; }
    features="--features mpi"
    select=()
else
    req=python/requirements-test.txt
    venv=target/python-venv-$(sha256sum "$req" | cut -c1-12)
    make_venv() { python3 -m venv "$venv"; }
    features=""
    select=(-m "not full")
fi
if [ ! -e "$venv/.installed" ]; then
    rm -rf "$venv"
    make_venv
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$req"
    touch "$venv/.installed"
fi
# The tests take the debug profile, which reuses the workspace's debug build; benchmarks
# install the release build.
MATURIN_PEP517_ARGS="--profile dev $features" "$venv/bin/pip" install -q \
    --disable-pip-version-check --force-reinstall --no-deps ./python
cargo build --locked -q -p tessera-cli
TESSERA_BIN=$PWD/target/debug/tessera "$venv/bin/python" -m pytest -q -p no:cacheprovider \
    -rs "${select[@]}" python/tests "$@"
