#!/usr/bin/env bash
# coli beside llama.cpp (node-llama-cpp 3.21.1's prebuilt binaries) on the same weights: converts the
# checkpoint to GGUF (cached), runs both in interleaved rounds, prints one markdown table and the engines'
# agreement. See bench/peer/peer_bench.py for what is measured, docs/benchmarks.md for the results.
# Usage (after scripts/build.sh): bench/peer/run.sh --model DIR [--rounds 3] [--threads 2] [--backend cpu]
#        [--prompts 128,512] [--decode 64] [--cache warm|own|cold] [--no-agree] [--json OUT]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
command -v node >/dev/null && command -v npm >/dev/null || {
    echo "bench/peer/run.sh: needs node and npm (Debian: apt-get install npm)" >&2
    exit 1
}
# The peer exactly as package-lock.json pins it; installed again only when the lock changed.
stamp="$here/node_modules/.lock-stamp"
if ! cmp -s "$here/package-lock.json" "$stamp" 2>/dev/null; then
    npm ci --prefix "$here" --no-audit --no-fund --loglevel=error
    cp "$here/package-lock.json" "$stamp"
fi
exec python3 "$here/peer_bench.py" "$@"
