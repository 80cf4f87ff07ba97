#!/usr/bin/env bash
# Installs Tessera for users: the tessera command, the C API (libtessera.so, tessera.h, a
# pkg-config file) and the LD_PRELOAD interposer. Builds what is missing first; idempotent.
#
#   bash scripts/install.sh [--prefix DIR] [--profile release|debug] [--no-build]
#
# Default prefix: $HOME/.local. Then:
#   cc app.c $(PKG_CONFIG_PATH=DIR/lib/pkgconfig pkg-config --cflags --libs tessera)
#   LD_PRELOAD=DIR/lib/libtessera_preload.so ./unmodified-program
set -euo pipefail

prefix="${HOME:-/root}/.local"
profile=release
build=1
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix="$2"; shift 2 ;;
        --prefix=*) prefix="${1#*=}"; shift ;;
        --profile) profile="$2"; shift 2 ;;
        --profile=*) profile="${1#*=}"; shift ;;
        --no-build) build=0; shift ;;
        -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "install.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
case "$profile" in
    release|debug) ;;
    *) echo "install.sh: --profile must be release or debug, not '$profile'" >&2; exit 2 ;;
esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ "$build" = 1 ]; then
    # shellcheck source=lib.sh
    . "$root/scripts/lib.sh"
    ensure_build_deps
    flag=()
    [ "$profile" = release ] && flag=(--release)
    say "building tessera, libtessera and the interposer ($profile)"
    cargo build --locked "${flag[@]}" -p tessera-cli -p tessera-capi -p tessera-preload
fi

target="${CARGO_TARGET_DIR:-$root/target}/$profile"
for f in tessera libtessera.so libtessera_preload.so; do
    [ -f "$target/$f" ] || { echo "install.sh: $target/$f is missing; run without --no-build" >&2; exit 1; }
done
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -1)

mkdir -p "$prefix/bin" "$prefix/lib/pkgconfig" "$prefix/include"
install -m 0755 "$target/tessera" "$prefix/bin/tessera"
install -m 0755 "$target/libtessera.so" "$prefix/lib/libtessera.so.0"
ln -sfn libtessera.so.0 "$prefix/lib/libtessera.so"
install -m 0755 "$target/libtessera_preload.so" "$prefix/lib/libtessera_preload.so"
install -m 0644 "$root/crates/tessera-capi/include/tessera.h" "$prefix/include/tessera.h"
sed -e "s|@PREFIX@|$prefix|" -e "s|@VERSION@|$version|" \
    "$root/crates/tessera-capi/tessera.pc.in" > "$prefix/lib/pkgconfig/tessera.pc"
echo "installed Tessera $version into $prefix (bin, lib, include, lib/pkgconfig/tessera.pc)"
