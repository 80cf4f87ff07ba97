#!/usr/bin/env bash
# Quick start, part 1: build Tessera (installing what is missing) and run the demo.
# Extra arguments go to `tessera demo` (see `tessera demo --help`); with `--hosts N` (root)
# the daemons and ranks run on N emulated hosts (scripts/hosts.sh), launched by mpirun.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ensure_build_deps
hosts=""
prev=""
for arg in "$@"; do
    case "$arg" in
        --hosts=*) hosts="${arg#--hosts=}" ;;
    esac
    [ "$prev" = "--hosts" ] && hosts="$arg"
    prev="$arg"
done
if [ -n "$hosts" ]; then
    ensure_bench_deps
    ensure_host_deps
    bash scripts/hosts.sh up "$hosts"
    eval "$(bash scripts/hosts.sh env)"
fi
say "building tessera (release)"
cargo build --release --locked -q -p tessera-cli
exec target/release/tessera demo "$@"
