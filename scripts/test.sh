#!/usr/bin/env bash
# Quick start, part 2: the test suite (this is what CI runs).
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ensure_build_deps
ensure_test_deps
say "format"
cargo fmt --all -- --check
say "lint"
cargo clippy --locked --workspace --all-targets -q -- -D warnings
say "tests"
# The interposer and libtessera are cdylibs that no test target links: build them for the tests
# that preload them or compile C programs against them.
cargo build --locked -q -p tessera-preload -p tessera-capi
cargo test --locked --workspace -q
if [ "$(id -u)" -eq 0 ]; then
    say "tests that need root (another user's files and processes)"
    cargo test --locked -q -p tessera-cli --test as_root -- --ignored
else
    say "tests that need root are reported as ignored (run as root to include them)"
fi
