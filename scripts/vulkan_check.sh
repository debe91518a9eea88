#!/usr/bin/env bash
# On a GPU machine: the Vulkan backend's acceptance checks in one go (op tests, oracle fixtures, CPU vs
# Vulkan greedy ids, fault injection, benchmarks beside the CUDA backend's). Usage:
#   scripts/vulkan_check.sh BIN_DIR [OUT_DIR]
#   BIN_DIR holds coli and test_backend (built with -DCOLI_VULKAN=ON, and -DCOLI_CUDA=ON for the CUDA
#   figures), and lib/ with the shared libraries the machine lacks, the Vulkan loader libvulkan.so.1
#   included (scripts/vulkan_bundle.sh makes it). Logs go to OUT_DIR (default: .).
set -uo pipefail
cd "$(dirname "$0")/.."
bin=$1
out=${2:-.}
mkdir -p "$out"
export LD_LIBRARY_PATH="$bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
status=0
# Each run's stderr, packed into runs.tgz at the end: a device run brings back few files.
runs="$out/runs"
mkdir -p "$runs"
step() { echo; echo "=== $*"; }

step "device"
nvidia-smi -L || true
# NVIDIA's ICD manifest is normally in /usr/share/vulkan/icd.d or /etc/vulkan/icd.d (containers that mount
# the driver: /usr/local/nvidia/share/vulkan/icd.d). In a container that
# mounts the driver without it, a manifest naming the driver's Vulkan library (libGLX_nvidia.so.0) is made.
icd=$(ls /usr/share/vulkan/icd.d/nvidia_icd*.json /etc/vulkan/icd.d/nvidia_icd*.json \
    /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd*.json 2>/dev/null | head -n 1)
[[ -n "$icd" && -z "${VK_ICD_FILENAMES:-}" ]] && export VK_ICD_FILENAMES="$icd"
if [[ -z "$icd" && -z "${VK_ICD_FILENAMES:-}" ]] && ldconfig -p | grep -q libGLX_nvidia.so.0; then
    icd="$out/nvidia_icd.json"
    printf '{"file_format_version": "1.0.0", "ICD": {"library_path": "libGLX_nvidia.so.0", "api_version": "1.3"}}\n' \
        >"$icd"
    export VK_ICD_FILENAMES="$icd"
fi
echo "vulkan ICD: ${VK_ICD_FILENAMES:-${icd:-none found, the loader searches its default paths}}"
"$bin/coli" backends | sed -n '1,/^$/p' || status=1

step "op tests on vulkan"
"$bin/coli" test-ops --backend vulkan --require 2>&1 | tee "$out/test_ops_vulkan.txt" || status=1

if "$bin/coli" backends | grep -qE "^  cuda +available"; then
    step "op tests on cuda, outputs poisoned (an op must write its output in full)"
    COLI_POISON_OUTPUTS=cuda "$bin/coli" test-ops --backend cuda --require 2>&1 | tail -n 3 || status=1
fi

step "oracle fixtures on every device backend (logits, argmax, greedy ids, cache 0 and 1)"
"$bin/test_backend" --gtest_filter='BackendOracle*' 2>&1 | tee "$out/fixtures.txt" | tail -n 50 || status=1

step "greedy ids: cpu vs vulkan, and vulkan with an injected matmul fault"
source scripts/fixture_prompts.sh
for fx in "${!prompts[@]}"; do
    args=(run --model "tests/fixtures/$fx" --ids "${prompts[$fx]}" --max-tokens 8 --temperature 0 --print-ids
          --hot-set none)
    cpu=$("$bin/coli" "${args[@]}" --backend cpu 2>/dev/null | tail -n 1)
    gpu=$("$bin/coli" "${args[@]}" --backend vulkan 2>"$runs/run_$fx.err" | tail -n 1)
    fault=$(COLI_FAIL_OP=vulkan:matmul "$bin/coli" "${args[@]}" --backend vulkan 2>"$runs/fault_$fx.err" |
            tail -n 1)
    echo "$fx cpu    $cpu"
    echo "$fx vulkan $gpu"
    echo "$fx fault  $fault"
    [[ "$cpu" == "$gpu" && "$cpu" == "$fault" && -n "$cpu" ]] || { echo "MISMATCH on $fx"; status=1; }
done
cat "$runs/run_olmoe_gqa.err"
grep -E "warning|fallbacks" "$runs/fault_olmoe_gqa.err"

step "benchmarks: vulkan, then cuda in the same run"
"$bin/coli" test-ops --backend vulkan --bench 2>&1 | sed -n '/^device:/,$p' | tee "$out/bench_vulkan.txt" || status=1
if "$bin/coli" backends | grep -qE "^  cuda +available"; then
    "$bin/coli" test-ops --backend cuda --bench 2>&1 | sed -n '/^device:/,$p' | tee "$out/bench_cuda.txt" ||
        status=1
    step "decode GEMV side by side (GB/s and share of each backend's own device copy)"
    # Rows of the GEMV tables: format, RxC shape, us, GB/s, % of copy, same-size GB/s, % of it.
    awk 'FNR == 1 { file++ }
         $2 ~ /^[0-9]+x[0-9]+$/ && NF == 7 { key = $1 " " $2; if (file == 1) { vk[key] = $4 " " $5; order[++n] = key }
                                              else cu[key] = $4 " " $5 }
         END { printf "%-16s %-10s %12s %8s %12s %8s %10s\n", "format", "shape", "vulkan GB/s", "of copy",
                      "cuda GB/s", "of copy", "vk / cuda"
               for (i = 1; i <= n; i++) { k = order[i]; split(k, f, " "); split(vk[k], a, " "); split(cu[k], b, " ")
                   printf "%-16s %-10s %12s %8s %12s %8s %9.0f%%\n", f[1], f[2], a[1], a[2], b[1], b[2],
                          (b[1] > 0 ? 100 * a[1] / b[1] : 0) } }' \
        "$out/bench_vulkan.txt" "$out/bench_cuda.txt" | tee "$out/bench_side_by_side.txt"
else
    echo "cuda: not available in this build or on this machine; no CUDA figures"
fi
tar czf "$out/runs.tgz" -C "$out" runs && rm -rf "$runs"
exit $status
