#!/bin/sh
# The prefix cache on `coli serve`: N chat requests that share a long system message, each asking for one
# token (so that its time is the prompt's), timed by curl, against a server without the cache. Prints each
# request's seconds and the median of requests 2..N for both servers, and the cached server's /metrics lines.
# Usage: bench/prefix_cache.sh [COLI [MODEL [N]]]   (defaults: build/coli, models/demo, 8)
set -eu
coli=${1:-build/coli}
model=${2:-models/demo}
n=${3:-8}
work=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; rm -rf "$work"' EXIT

# A system message of about 400 tokens of the demo model (its context is 512).
verse="In the beginning God created the heaven and the earth. And the earth was without form, and void; and darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters."
system=""
for i in 1 2 3 4 5 6 7 8; do system="$system$verse "; done

serve() {  # $@: extra flags; sets pid and port
    "$coli" serve --model "$model" --port 0 --hot-set none --threads 2 "$@" 2>"$work/err" &
    pid=$!
    port=""
    while [ -z "$port" ]; do
        sleep 0.2
        port=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$work/err")
    done
}

run() {  # $1: label, $2: the system message; times n requests, prints them and their median from the second on
    times=""
    for i in $(seq 1 "$n"); do
        body=$(printf '{"model":"%s","max_tokens":1,"temperature":0,"messages":[{"role":"system","content":"%s"},{"role":"user","content":"Question %s: who made the light?"}]}' "$(basename "$model")" "$2" "$i")
        t=$(curl -sf -o /dev/null -w '%{time_total}' -H 'Content-Type: application/json' -d "$body" "http://127.0.0.1:$port/v1/chat/completions")
        times="$times $t"
    done
    echo "$1: seconds per request:$times"
    [ "$n" -gt 1 ] || return 0
    median=$(echo "$times" | tr ' ' '\n' | tail -n +3 | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}')
    echo "$1: median of requests 2..$n: $median s"
}

serve
run "no prefix cache" "$system"
# What is left to compute once the system message is restored, and the request's own costs (HTTP, template,
# tokenizer, one sampled token): the same requests with a one-word system message.
run "no prefix cache, one-word system message" "Answer."
kill $pid; wait $pid 2>/dev/null || true
serve --prefix-cache-gb 1
run "--prefix-cache-gb 1" "$system"
curl -s "http://127.0.0.1:$port/metrics" | grep -E '^coli_(prefix_cache|prompt_tokens)'
grep -m1 "after a prompt of" "$work/err" || true
kill $pid; wait $pid 2>/dev/null || true
# --cache-dir: one request writes the entries, then a restarted server's first request reads them back.
serve --prefix-cache-gb 1 --cache-dir "$work/cache"
n_all=$n; n=1
run "--cache-dir, first server" "$system"
kill $pid; wait $pid 2>/dev/null || true
serve --prefix-cache-gb 1 --cache-dir "$work/cache"
run "--cache-dir, restarted server" "$system"
n=$n_all
curl -s "http://127.0.0.1:$port/metrics" | grep -E '^coli_prefix_cache_(hits|files_loaded)'
