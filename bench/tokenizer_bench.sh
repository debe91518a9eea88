#!/usr/bin/env bash
# Tokenizer encode speed, colibri vs the reference implementations, on the same large English text (the KJV
# bible, Debian bible-kjv) and large CJK text (Chinese fortunes, Debian fortunes-zh), single thread.
# Usage (Debian, as root; after scripts/build.sh): bench/tokenizer_bench.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
for p in bible-kjv fortunes-zh; do
    dpkg -s "$p" >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$p" >/dev/null; }
done
(cd tests/text/reference && [ -d node_modules ] || npm ci --no-audit --no-fund --loglevel=error)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bible -f "Gen1:1-Rev22:21" > "$work/english.txt"
cp /usr/share/games/fortunes/chinese "$work/cjk.txt"
echo "texts: English $(wc -c < "$work/english.txt") bytes, CJK $(wc -c < "$work/cjk.txt") bytes"
node bench/tokenizer_bench.mjs "$work/english.txt" "$work/cjk.txt" "$work/o200k"
COLI_BENCH_ENGLISH_TEXT="$work/english.txt" COLI_BENCH_CJK_TEXT="$work/cjk.txt" COLI_BENCH_TIKTOKEN_DIR="$work/o200k" \
    taskset -c 0 "$build/bench/coli_microbench" --benchmark_filter=TokenizerEncode --benchmark_counters_tabular=true
