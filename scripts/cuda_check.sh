#!/usr/bin/env bash
# On a GPU machine: the CUDA backend's acceptance checks in one go (op tests, oracle fixtures, CPU vs CUDA
# greedy ids, fault injection, benchmarks). Usage: scripts/cuda_check.sh BIN_DIR [OUT_DIR]
#   BIN_DIR holds coli and test_backend (built with -DCOLI_CUDA=ON), and lib/ with any shared libraries
#   they need that the machine lacks. Logs go to OUT_DIR (default: .).
set -uo pipefail
cd "$(dirname "$0")/.."
bin=$1
out=${2:-.}
export LD_LIBRARY_PATH="$bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
status=0
step() { echo; echo "=== $*"; }

step "device"
nvidia-smi -L || true
"$bin/coli" backends || status=1

step "op tests on cuda"
"$bin/coli" test-ops --backend cuda --require 2>&1 | tee "$out/test_ops.txt" || status=1

step "oracle fixtures on cuda (logits, argmax, greedy ids, cache 0 and 1)"
"$bin/test_backend" --gtest_brief=1 2>&1 | tail -n 30 || status=1

step "greedy ids: cpu vs cuda, and cuda with an injected matmul fault"
declare -A prompts=([olmoe_gqa]=298,275,120,325,190,433,174,242,66,264,152,226,401,133,341,111
                    [olmoe_bf16]=201,271,492,439,33,492,447,448,249,232,139,139,184,200,57,183
                    [olmoe_clip]=54,203,457,107,90,439,404,49,278,9,184,225,294,352,88,396
                    [deepseek_v3]=5,17,99,200,33,150,8,61,120,240,7,77
                    [deepseek_v3_noq]=250,3,64,128,9,31,177,45,2,199,86,140
                    [deepseek_v3_fp8]=12,200,45,3,99,180,64,7,250,31,90,141
                    [deepseek_v32]=5,17,99,200,33,150,8,61,120,240,7,77
                    [glm_moe_dsa]=250,3,64,128,9,31,177,45,2,199,86,140
                    [kimi_linear]=5,17,99,200,33,150,8,61,120,240,7,77
                    [kimi_k3]=250,3,64,128,9,31,177,45,2,199,86,140)
for fx in "${!prompts[@]}"; do
    args=(run --model "tests/fixtures/$fx" --ids "${prompts[$fx]}" --max-tokens 8 --temperature 0 --print-ids
          --hot-set none)
    cpu=$("$bin/coli" "${args[@]}" --backend cpu 2>/dev/null | tail -n 1)
    gpu=$("$bin/coli" "${args[@]}" --backend cuda 2>"$out/run_$fx.err" | tail -n 1)
    fault=$(COLI_CUDA_FAIL_OP=matmul "$bin/coli" "${args[@]}" --backend cuda 2>"$out/fault_$fx.err" | tail -n 1)
    echo "$fx cpu   $cpu"
    echo "$fx cuda  $gpu"
    echo "$fx fault $fault"
    [[ "$cpu" == "$gpu" && "$cpu" == "$fault" && -n "$cpu" ]] || { echo "MISMATCH on $fx"; status=1; }
done
cat "$out/run_olmoe_gqa.err"
grep -E "warning|fallbacks" "$out/fault_olmoe_gqa.err"

step "benchmarks"
"$bin/coli" test-ops --backend cuda --bench 2>&1 | sed -n '/^device:/,$p' | tee "$out/bench.txt" || status=1
exit $status
