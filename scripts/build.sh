#!/usr/bin/env bash
# Installs what is missing (Debian 12, as root), configures colibri into build/ and builds `coli` (only
# what running needs; scripts/test.sh builds the tests and benchmarks too).
# Usage: scripts/build.sh [extra cmake -D options]
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the build needs (GoogleTest and Google Benchmark too: the configuration declares the tests
# and benchmarks, which scripts/test.sh builds); see README.md "Dependencies".
packages=(build-essential cmake ninja-build pkg-config libfmt-dev nlohmann-json3-dev libcli11-dev
          libcpp-httplib-dev libedit-dev libgtest-dev libgmock-dev libbenchmark-dev
          glslc libvulkan-dev mesa-vulkan-drivers libspirv-cross-c-shared-dev)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
    echo "installing: ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The CUDA backend is built whenever nvcc is here (CI has nvcc but no GPU: the code compiles, its tests skip).
cuda=()
nvcc_path=$(command -v nvcc || true)
[[ -z "$nvcc_path" && -x /usr/local/cuda/bin/nvcc ]] && nvcc_path=/usr/local/cuda/bin/nvcc
if [[ -n "$nvcc_path" ]]; then
    echo "nvcc found at $nvcc_path: building the CUDA backend (-DCOLI_CUDA=ON)" >&2
    cuda=(-DCOLI_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc_path")
fi

# The Vulkan backend is always built: glslc and the headers are Debian packages, and Mesa's lavapipe
# (mesa-vulkan-drivers) is a Vulkan device on the CPU, so its tests run everywhere, CI included.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOLI_VULKAN=ON "${cuda[@]}" "$@" >/dev/null
cmake --build build -j"$(nproc)" --target coli
