#!/usr/bin/env bash
# Gathers what scripts/vulkan_check.sh needs on another machine into BIN_DIR: coli and test_backend from
# BUILD_DIR (configured with -DCOLI_VULKAN=ON), and in BIN_DIR/lib the shared libraries they load that are
# not part of a base system, with the Vulkan loader (Debian's libvulkan1: the backend opens libvulkan.so.1
# at start; the GPU machine has NVIDIA's driver and ICD but usually no loader).
# Usage: scripts/vulkan_bundle.sh BUILD_DIR BIN_DIR
set -euo pipefail
build=$1
bin=$2
mkdir -p "$bin/lib"
cp "$build/coli" "$build/tests/test_backend" "$bin/"
# Libraries of the binaries outside glibc and the compiler runtime, which every Linux has.
for exe in "$bin/coli" "$bin/test_backend"; do
    ldd "$exe" | awk '/=> \// {print $3}' | grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
        while read -r lib; do cp -L "$lib" "$bin/lib/"; done
done
loader=$(ldconfig -p | awk '/libvulkan\.so\.1 .*x86-64/ {print $NF; exit}')
[[ -n "$loader" ]] || { echo "libvulkan.so.1 not found: apt install libvulkan1" >&2; exit 1; }
cp -L "$loader" "$bin/lib/libvulkan.so.1"
ls -l "$bin" "$bin/lib"
