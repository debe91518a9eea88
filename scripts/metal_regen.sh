#!/usr/bin/env bash
# Regenerates the committed Metal kernels (src/backend/metal/generated: kernels.metal, kernel_table.cpp) from
# this tree's Vulkan shaders, after a shader changed; the metal_msl_golden test fails until this is run and
# the result committed. Usage: scripts/metal_regen.sh [build dir, default build] (configured with
# -DCOLI_VULKAN=ON, as scripts/build.sh does).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
cmake --build "$build" --target coli_metal_msl
cp "$build/generated/metal/kernel_table.cpp" src/backend/metal/generated/
# The library itself (about 5 MB) stays in the build tree: its SHA-256 is what is committed.
sha256sum "$build/generated/metal/kernels.metal" | cut -d' ' -f1 >src/backend/metal/generated/kernels.metal.sha256
git status --short src/backend/metal/generated
