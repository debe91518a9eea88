#!/usr/bin/env bash
# On a GPU machine: every op kind that the fixtures' forwards call on BACKEND fails in turn
# (COLI_FAIL_OP=BACKEND:op), runs on the CPU instead, counted, and the greedy ids stay transformers' own
# (docs/reliability.md; VulkanCli.EachOpFailingInTurnKeepsTheTokens does the same on lavapipe in CTest).
# Fixtures that together call every op kind the models use: GQA, MLA with the DSA indexer, KDA with MXFP4
# experts, DeepSeek-V4's compressed attention and hyper-connections. Each op kind is failed on the first
# fixture that calls it. Usage: scripts/fault_each_op.sh BIN_DIR BACKEND [OUT_DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
bin=$1
backend=$2
out=${3:-.}
source scripts/fixture_prompts.sh
status=0
declare -A failed=()
for fx in olmoe_gqa deepseek_v32 kimi_k3 deepseek_v4_orig; do
    base=(run --model "tests/fixtures/$fx" --ids "${prompts[$fx]}" --max-tokens 8 --temperature 0 --print-ids
          --hot-set none)
    args=("${base[@]}" --backend "$backend")
    cpu=$("$bin/coli" "${base[@]}" --backend cpu 2>/dev/null | tail -n 1)
    clean=$("$bin/coli" "${args[@]}" 2>"$out/clean_$fx.err" | tail -n 1)
    [[ -n "$cpu" && "$clean" == "$cpu" ]] || { echo "MISMATCH on $fx: cpu $cpu, $backend $clean"; status=1; }
    # "ops on cuda: embedding 8/0/0, rms_norm 51/0/0, ... (native/host step/fallback)"
    ops=$(grep -oP "^ops on $backend: \K.*(?= \(native)" "$out/clean_$fx.err" | tr ',' '\n' | awk '{print $1}')
    for op in $ops; do
        [[ -n "${failed[$op]:-}" ]] && continue
        failed[$op]=1
        got=$(COLI_FAIL_OP="$backend:$op" "$bin/coli" "${args[@]}" 2>"$out/fault_${fx}_$op.err" | tail -n 1)
        if [[ "$got" == "$cpu" ]] && grep -q "$op 0/0/" "$out/fault_${fx}_$op.err"; then
            echo "$fx: $op failing on $backend: same ids, every call on the cpu"
        else
            echo "MISMATCH on $fx with $op failing: $got (cpu $cpu)"
            status=1
        fi
    done
done
echo "$backend: ${#failed[@]} op kinds failed in turn"
exit $status
