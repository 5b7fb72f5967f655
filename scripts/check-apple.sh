#!/usr/bin/env bash
# Type-checks hcq-metal and the hcq facade (whose Metal backend it is on macOS) for Apple
# Silicon macOS (`aarch64-apple-darwin`) on Linux.
#
# No machine of this project runs macOS, and rustup here cannot add targets, so this uses Debian's
# `rustc-web` toolchain (unpacked with `dpkg -x`, never installed) with `-Zbuild-std`: the std of
# the Apple target is built from `rust-web-src`, then `cargo check` type-checks the objc2 code.
# It checks only (no linking: there is no Apple linker or SDK here).
#
# The toolchain is cached outside the repository, in
# ${HCQ_APPLE_TOOLCHAIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/hcq-apple-toolchain}/<version>;
# a second run downloads nothing. The check uses its own target dir (<cache>/target).
#
# Environment:
#   HCQ_APPLE_RUST_VERSION  Debian version of rustc-web to use (default: apt's candidate)
#   HCQ_APPLE_TARGET        target triple (default: aarch64-apple-darwin)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache_root="${HCQ_APPLE_TOOLCHAIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/hcq-apple-toolchain}"
target="${HCQ_APPLE_TARGET:-aarch64-apple-darwin}"

candidate() { apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ { print $2 }'; }

version="${HCQ_APPLE_RUST_VERSION:-}"
if [ -z "$version" ]; then
    version="$(candidate rustc-web)"
    if [ -z "$version" ] || [ "$version" = "(none)" ]; then
        echo "check-apple: apt knows no rustc-web; running apt-get update" >&2
        apt-get update -qq
        version="$(candidate rustc-web)"
    fi
fi
if [ -z "$version" ] || [ "$version" = "(none)" ]; then
    echo "check-apple: no rustc-web package available" >&2
    exit 1
fi
# 1.96.0+dfsg1-1~deb12u2 -> 1.96 (the name of the versioned std package)
majmin="$(echo "$version" | sed -E 's/^([0-9]+\.[0-9]+).*/\1/')"
dir="$cache_root/$version"
root="$dir/root"

if [ ! -f "$dir/.complete" ]; then
    echo "check-apple: fetching Debian rustc-web $version into $dir" >&2
    rm -rf "$dir"
    mkdir -p "$dir/debs" "$root"
    # libllvm is whatever version this rustc-web depends on.
    llvm="$(apt-cache show "libstd-rust-web-$majmin=$version" | awk -F': ' '/^Depends:/ { print $2; exit }' \
        | tr ',' '\n' | sed -nE 's/^ *(libllvm[0-9]+).*/\1/p' | head -n1)"
    if [ -z "$llvm" ]; then
        echo "check-apple: cannot tell which libllvm libstd-rust-web-$majmin $version needs" >&2
        exit 1
    fi
    # apt's sandbox user cannot write into a private cache dir; download in a world-writable
    # scratch dir and move the files over.
    scratch="$(mktemp -d)"
    chmod 777 "$scratch"
    (cd "$scratch" && apt-get download -q \
        "rustc-web=$version" "libstd-rust-web-$majmin=$version" \
        "libstd-rust-web-dev=$version" "rust-web-src=$version" "$llvm")
    mv "$scratch"/*.deb "$dir/debs/"
    rmdir "$scratch"
    for deb in "$dir"/debs/*.deb; do
        dpkg -x "$deb" "$root"
    done
    touch "$dir/.complete"
fi

# rustc finds its sysroot (std for the host, rust-src for -Zbuild-std) next to its binary; it
# only needs to be told where its shared libraries are.
wrapper="$dir/rustc"
cat > "$wrapper" <<WRAP
#!/bin/sh
LD_LIBRARY_PATH="$root/usr/lib/x86_64-linux-gnu\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$root/usr/bin/rustc" "\$@"
WRAP
chmod +x "$wrapper"
"$wrapper" --version >&2

cd "$repo"
# RUSTC_BOOTSTRAP lets the stable toolchain accept -Zbuild-std. The check reads Cargo.lock
# (--locked) so that it uses exactly the versions the workspace pins.
RUSTC="$wrapper" RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR="$cache_root/target" \
    cargo check --locked -p hcq-metal -p hcq --target "$target" -Zbuild-std=std,panic_abort "$@"
