#!/usr/bin/env bash
# On a GPU machine: the CUDA backend's acceptance checks in one go (op tests, oracle fixtures, CPU vs CUDA
# greedy ids, fault injection (every op kind in turn: scripts/fault_each_op.sh), benchmarks, batched
# sequences against alone in test_backend, DeepSeek-V4 at real scale).
# Usage: scripts/cuda_check.sh BIN_DIR [OUT_DIR]
#   BIN_DIR holds coli and test_backend (built with -DCOLI_CUDA=ON), and lib/ with any shared libraries
#   they need that the machine lacks. Logs go to OUT_DIR (default: .).
set -uo pipefail
cd "$(dirname "$0")/.."
bin=$1
out=${2:-.}
export LD_LIBRARY_PATH="$bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
status=0
# Each run's stderr, packed into runs.tgz at the end: a device run brings back few files.
runs="$out/runs"
mkdir -p "$runs"
step() { echo; echo "=== $*"; }

step "device"
nvidia-smi -L || true
"$bin/coli" backends || status=1

step "op tests on cuda"
"$bin/coli" test-ops --backend cuda --require 2>&1 | tee "$out/test_ops.txt" || status=1

step "oracle fixtures on cuda (logits, argmax, greedy ids, cache 0 and 1)"
"$bin/test_backend" --gtest_brief=1 2>&1 | tail -n 30 || status=1

step "greedy ids: cpu vs cuda, and cuda with an injected matmul fault"
source scripts/fixture_prompts.sh
for fx in "${!prompts[@]}"; do
    args=(run --model "tests/fixtures/$fx" --ids "${prompts[$fx]}" --max-tokens 8 --temperature 0 --print-ids
          --hot-set none)
    cpu=$("$bin/coli" "${args[@]}" --backend cpu 2>/dev/null | tail -n 1)
    gpu=$("$bin/coli" "${args[@]}" --backend cuda 2>"$runs/run_$fx.err" | tail -n 1)
    fault=$(COLI_FAIL_OP=cuda:matmul "$bin/coli" "${args[@]}" --backend cuda 2>"$runs/fault_$fx.err" | tail -n 1)
    echo "$fx cpu   $cpu"
    echo "$fx cuda  $gpu"
    echo "$fx fault $fault"
    [[ "$cpu" == "$gpu" && "$cpu" == "$fault" && -n "$cpu" ]] || { echo "MISMATCH on $fx"; status=1; }
done
cat "$runs/run_olmoe_gqa.err"
grep -E "warning|fallbacks" "$runs/fault_olmoe_gqa.err"

step "every op kind the fixtures call, failing in turn on cuda"
scripts/fault_each_op.sh "$bin" cuda "$runs" | tail -n 3 || status=1

step "benchmarks"
"$bin/coli" test-ops --backend cuda --bench 2>&1 | sed -n '/^device:/,$p' | tee "$out/bench.txt" || status=1

# DeepSeek-V4-Flash at real dimensions, 4 layers (about 14 GB of MXFP4 experts), streamed through a 4 GB
# budget: the store and the CUDA backend at V4's real sizes (issue 25).
step "deepseek_v4 at real scale: coli bench --backend cuda --ram-gb 4"
v4=${TMPDIR:-/tmp}/coli_v4_synth
[[ -d "$v4" ]] || "$bin/coli" synth --arch deepseek_v4 --layers 4 -o "$v4" >"$out/v4_synth.txt" 2>&1 || status=1
"$bin/coli" bench --model "$v4" --backend cuda --ram-gb 4 --decode-reps 3 2>&1 | tee "$out/v4_bench.txt" || status=1
tar czf "$out/runs.tgz" -C "$out" runs && rm -rf "$runs"
exit $status
