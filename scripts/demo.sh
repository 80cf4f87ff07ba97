#!/usr/bin/env bash
# Quick start, part 1: build Tessera (installing what is missing) and run the demo.
# Extra arguments go to `tessera demo` (see `tessera demo --help`).
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ensure_build_deps
say "building tessera (release)"
cargo build --release --locked -q -p tessera-cli
exec target/release/tessera demo "$@"
