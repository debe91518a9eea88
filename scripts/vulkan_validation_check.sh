#!/usr/bin/env bash
# The Vulkan backend under Khronos' validation layer, core checks and synchronization validation: the op
# tests and a greedy decode of every oracle fixture fail on any message of the layer (two commands that touch
# one buffer without a barrier between them, a descriptor left unwritten, ...). Lavapipe runs commands one
# after another, so a missing barrier changes no result there; the layer finds it all the same. The layer is
# Debian's vulkan-validationlayers; where the loader does not insert it, the check fails rather than passing
# unchecked. Usage: scripts/vulkan_validation_check.sh COLI_BINARY
set -uo pipefail
cd "$(dirname "$0")/.."
coli=$1
export VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation
export VK_LAYER_ENABLES=VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT
log=$(mktemp)
trap 'rm -f "$log"' EXIT
loader=$(VK_LOADER_DEBUG=layer "$coli" backends 2>&1)
if ! grep -q 'Insert instance layer "VK_LAYER_KHRONOS_validation"' <<<"$loader"; then
    echo "FAIL: the Vulkan loader did not insert VK_LAYER_KHRONOS_validation (apt-get install vulkan-validationlayers)"
    exit 1
fi
status=0
messages='Validation Error|SYNC-HAZARD|VUID-'
check() {  # NAME COMMAND...: runs it, fails on its exit status or on a message of the layer
    local name=$1
    shift
    "$@" >"$log" 2>&1 || { echo "FAIL: $name exited with $?"; tail -n 5 "$log"; status=1; }
    if grep -qE "$messages" "$log"; then
        echo "FAIL: $name: $(grep -cE "$messages" "$log") validation messages, the first:"
        grep -m 3 -E "$messages" "$log" | cut -c 1-600
        status=1
    else
        echo "ok: $name"
    fi
}
check "test-ops" "$coli" test-ops --backend vulkan
source scripts/fixture_prompts.sh
for fx in "${!prompts[@]}"; do
    check "$fx" "$coli" run --model "tests/fixtures/$fx" --ids "${prompts[$fx]}" --max-tokens 8 --temperature 0 \
        --print-ids --hot-set none --backend vulkan
done
exit $status
