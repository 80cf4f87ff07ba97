#!/usr/bin/env bash
# Quick start, part 2: the test suite (this is what CI runs).
#
#   bash scripts/test.sh          the representative tier (CI): format, lint, every test
#   bash scripts/test.sh --full   the full tier: 5x the conformance programs, 4x the property
#                                 cases, 10x the fuzz inputs (run it before resolving an issue)
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
full=0
for arg in "$@"; do
    case "$arg" in
        --full) full=1 ;;
        -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
        *) echo "scripts/test.sh: unknown option '$arg' (use --full, or nothing)" >&2; exit 2 ;;
    esac
done
if [ "$full" -eq 1 ]; then
    export TESSERA_CONFORMANCE_PROGRAMS="${TESSERA_CONFORMANCE_PROGRAMS:-1000}"
    export PROPTEST_CASES="${PROPTEST_CASES:-1024}"
    export TESSERA_FUZZ_CASES="${TESSERA_FUZZ_CASES:-100000}"
    # Tests with a longer form of their own (the reader racing transactions: 400 reads).
    export TESSERA_FULL=1
    say "full tier: $TESSERA_CONFORMANCE_PROGRAMS conformance programs per model, $PROPTEST_CASES property cases, $TESSERA_FUZZ_CASES fuzz inputs per target"
fi
ensure_build_deps
ensure_test_deps
say "format"
cargo fmt --all -- --check
say "lint"
cargo clippy --locked --workspace --all-targets -q -- -D warnings
# The Python package's transactions are behind a feature (they link MPI).
cargo clippy --locked -p tessera-python --features mpi --all-targets -q -- -D warnings
say "documentation (warnings denied)"
RUSTDOCFLAGS="-D warnings" cargo doc --locked --workspace --no-deps --document-private-items -q
say "tests"
# The interposer and libtessera are cdylibs that no test target links: build them for the tests
# that preload them or compile C programs against them.
cargo build --locked -q -p tessera-preload -p tessera-capi -p tessera-txn-capi
cargo build --locked -q -p tessera-txn --bins
cargo test --locked --workspace -q
say "the Python package (python/), built by pip through maturin into a cached virtual environment"
bash scripts/python-tests.sh
if [ "$full" -eq 1 ] && [ "$(id -u)" -ne 0 ]; then
    say "the Python package with pandas, PyArrow, xarray, Zarr, Dask and mpi4py (the Dask test across emulated hosts needs root)"
    bash scripts/python-tests.sh --full
fi
if [ "$(id -u)" -eq 0 ]; then
    say "tests that need root (another user's files and processes)"
    # `--workspace --test NAME`, not `-p`: the features are then resolved as for the run above,
    # so its builds are reused instead of a second tokio, daemon and CLI being compiled.
    cargo test --locked -q --workspace --test as_root -- --ignored
    say "the FUSE mount (mounting needs root and /dev/fuse)"
    cargo test --locked -q --workspace --test fuse -- --ignored
    cargo test --locked -q --workspace --test conformance -- --ignored fuse_
    say "across 3 emulated hosts: registration, stop, a lost link, a list lock revoked with its lease, the demo, a Slurm batch job, conformance, restart, locks, MPI-IO, HDF5, benchmarks"
    ensure_host_deps
    bash scripts/hosts.sh up 3
    # One at a time: a test takes a host's link down.
    TESSERA_TEST_HOSTS=3 cargo test --locked -q --workspace --test hosts -- --ignored --test-threads=1
    # One at a time too: each starts its daemons through mpirun onto the same hosts, and one
    # such start, beside another, once never registered a daemon (a start that times out
    # lists what its launcher still runs).
    TESSERA_TEST_HOSTS=3 cargo test --locked -q --workspace \
        --test conformance --test locks --test restart --test mpi -- --test-threads=1 \
        read_the_latest_write conflicting_locks_across_daemons blocking_lock_waits \
        killed_daemon_restarts mpiio_ompio posix_programs_as_mpi_ranks parallel_hdf5
    cargo test --locked -q --workspace --test smoke -- --ignored
    if [ "$full" -eq 1 ]; then
        say "the Python package with pandas, PyArrow, xarray, Zarr, mpi4py, and Dask tasks placed by locate across the 3 hosts"
        TESSERA_TEST_HOSTS=3 bash scripts/python-tests.sh --full
    fi
    bash scripts/slurm.sh down
    bash scripts/hosts.sh down
else
    say "tests that need root are reported as ignored: another user's files, the FUSE mount, and every test across emulated hosts (network namespaces) (run as root to include them)"
fi
