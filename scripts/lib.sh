# Shared setup for the quick-start scripts: install what is missing, idempotently.
# Sourced by scripts/demo.sh and scripts/test.sh.

set -euo pipefail

say() { printf '==> %s\n' "$*" >&2; }

# Debian packages the build needs. Installs only the missing ones (as root or with sudo).
ensure_debian_packages() {
    local missing=()
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    say "installing Debian packages: ${missing[*]}"
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || { echo "need root or sudo to install: ${missing[*]}" >&2; exit 1; }
        sudo="sudo"
    fi
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

# The toolchain rust-toolchain.toml pins. Where the installed stable release is that version,
# it is linked under the pinned name instead of downloaded again (a machine without network
# access to rustup's servers builds all the same); otherwise rustup installs it.
ensure_pinned_toolchain() {
    command -v rustup >/dev/null || return 0
    local root want
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    want=$(sed -n 's/^channel *= *"\(.*\)"/\1/p' "$root/rust-toolchain.toml")
    [ -n "$want" ] || return 0
    if rustup toolchain list | grep -q "^$want"; then
        return 0
    fi
    local stable
    stable=$(rustup run stable rustc --version 2>/dev/null | awk '{print $2}' || true)
    if [ "$stable" = "$want" ]; then
        say "naming the installed stable Rust $want as the pinned toolchain"
        rustup toolchain link "$want" "$(rustup run stable rustc --print sysroot)"
    else
        say "installing the pinned Rust toolchain $want"
        rustup toolchain install "$want" --profile minimal --component rustfmt,clippy
    fi
}

# A Rust toolchain (stable, with rustfmt and clippy), from rustup.
ensure_rust() {
    if ! command -v cargo >/dev/null && [ -f "$HOME/.cargo/env" ]; then
        # shellcheck disable=SC1091
        . "$HOME/.cargo/env"
    fi
    if ! command -v cargo >/dev/null; then
        say "installing Rust (rustup, stable)"
        ensure_debian_packages curl ca-certificates
        curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal --component rustfmt,clippy
        # shellcheck disable=SC1091
        . "$HOME/.cargo/env"
    fi
    ensure_pinned_toolchain
    if command -v rustup >/dev/null; then
        local have
        have=$(rustup component list --installed 2>/dev/null || true)
        for c in rustfmt clippy; do
            grep -q "^$c" <<<"$have" || rustup component add "$c" >/dev/null 2>&1 || true
        done
    fi
}

ensure_build_deps() {
    ensure_debian_packages gcc libc6-dev
    ensure_rust
}

# What the benchmark suite adds: Open MPI (launcher and headers), libclang for the MPI
# bindings, a font for the report's plots, and parallel HDF5 (the FLASH-IO-like pattern).
ensure_bench_deps() {
    ensure_debian_packages openmpi-bin libopenmpi-dev libclang-dev pkg-config fonts-dejavu-core \
        libhdf5-openmpi-dev
}

# What emulated hosts need: iproute2 (namespaces, veth, bridge) and util-linux (unshare,
# nsenter, mountpoint); Dask distributed for the workflow-tool test of locality.
ensure_host_deps() {
    ensure_debian_packages iproute2 util-linux
    ensure_python_modules distributed
}

# Python modules for the tests, from PyPI into the python3 on PATH (the one the tests run),
# each only if it does not import yet.
ensure_python_modules() {
    local missing=()
    for m in "$@"; do
        python3 -c "import $m" 2>/dev/null || missing+=("$m")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    say "installing python modules: ${missing[*]}"
    python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore "${missing[@]}"
}

# What the tests of unmodified programs add: parallel HDF5 (h5pcc, h5diff) over Open MPI,
# MPICH, a Fortran compiler (mpifort), mpi4py, rsync, and numpy and h5py.

ensure_test_deps() {
    ensure_bench_deps
    ensure_debian_packages libhdf5-openmpi-dev hdf5-tools
    # MPICH beside Open MPI (its own mpicc.mpich and mpirun.mpich): Open MPI stays the
    # default mpicc/mpirun, as its higher alternatives priority keeps it.
    ensure_debian_packages mpich libmpich-dev
    # Fortran MPI programs (mpifort and mpifort.mpich drive it), and Python ones (mpi4py for
    # Debian's python3, built against Open MPI).
    ensure_debian_packages gfortran python3-mpi4py
    # The full tier's Python environment is a venv of Debian's python3 (it reaches
    # python3-mpi4py with --system-site-packages).
    ensure_debian_packages python3-venv
    # Everyday programs the interposer tests run (coreutils, tar, make, python3 are already
    # on the image).
    ensure_debian_packages rsync
    # The FUSE mount: fusermount3, a statically linked program the interposer cannot
    # reach, and tools that lean on a file system's corners.
    ensure_debian_packages fuse3 busybox-static git sqlite3 golang-go
    ensure_python_modules numpy h5py
}

cd "$(dirname "${BASH_SOURCE[0]}")/.."
