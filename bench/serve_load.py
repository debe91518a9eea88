#!/usr/bin/env python3
"""Load figures for `coli serve` on loopback (docs/benchmarks.md "Serving many users").

For each client count, starts `coli serve` twice on the model: batched (--parallel = the client count) and
one at a time (--parallel 1). Every client sends streamed completions one after another (each prompt its
own, greedy, a fixed number of tokens). Prints, per server: generated tok/s over the round, p50 and p99 time
to first token, and the routed-expert bytes the server read per generated token (from /metrics), which fall
as more requests share each expert read.

With --soak SECONDS, instead: one batched server under --clients (the first count) clients sending requests
for that long, its resident set and open descriptors sampled every --sample seconds.

Usage: bench/serve_load.py --coli build/coli --model DIR [--clients 1,4,8,16] [--requests 4]
       [--max-tokens 32] [--coli-args "--ram-gb 2"] [--json FILE] [--soak SECONDS [--sample 30]]
"""
import os
import argparse
import http.client
import json
import re
import shlex
import statistics
import subprocess
import sys
import threading
import time

PROMPTS = [
    "In the beginning God created", "And the LORD spake unto Moses", "Blessed are the meek",
    "The LORD is my shepherd", "Let there be light", "And the earth was without form",
    "Now these are the generations", "Hear, O Israel", "Vanity of vanities", "The heavens declare",
    "In my Father's house are many mansions", "Ask, and it shall be given you", "Love is patient",
    "Remember now thy Creator", "To every thing there is a season", "The words of the preacher",
]
START_TIMEOUT_S = 600  # a model larger than RAM may take minutes to load


def percentile(values, q):
    """The q-th percentile (0..100), nearest rank."""
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(q / 100 * len(s) + 0.5)) - 1))]


def metric(port, name):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    m = re.search(r"^" + re.escape(name) + r" (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def start_server(coli, model, parallel, extra):
    args = [coli, "serve", "--model", model, "--port", "0", "--hot-set", "none",
            "--parallel", str(parallel), "--model-name", "m"] + extra
    proc = subprocess.Popen(args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    deadline = time.time() + START_TIMEOUT_S
    log = []
    while time.time() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        log.append(line)
        m = re.search(r"listening on http://[^:]+:(\d+)", line)
        if m:
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
            return proc, int(m.group(1))
    proc.kill()
    sys.exit("coli serve did not start:\n" + "".join(log))


def one_request(port, prompt, max_tokens):
    """A streamed completion; returns (seconds to the first token, tokens generated)."""
    body = json.dumps({"model": "m", "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                       "stream": True, "ignore_eos": True, "stream_options": {"include_usage": True}})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
    start = time.perf_counter()
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        sys.exit(f"request failed: {resp.status} {resp.read()!r}")
    first = None
    tokens = 0
    for raw in resp:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        event = json.loads(line[6:])
        if event.get("usage"):
            tokens = event["usage"]["completion_tokens"]
        if first is None and event.get("choices") and event["choices"][0].get("text"):
            first = time.perf_counter() - start
    return (first if first is not None else time.perf_counter() - start), tokens


def round_run(port, clients, requests, max_tokens):
    ttft, tokens = [], [0]
    lock = threading.Lock()

    def client(k):
        for i in range(requests):
            t, n = one_request(port, PROMPTS[(k * requests + i) % len(PROMPTS)], max_tokens)
            with lock:
                ttft.append(t)
                tokens[0] += n

    bytes_before = metric(port, "coli_expert_bytes_read_total")
    start = time.perf_counter()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - start
    read = metric(port, "coli_expert_bytes_read_total") - bytes_before
    return {"clients": clients, "tokens": tokens[0], "seconds": seconds, "tok_s": tokens[0] / seconds,
            "ttft_p50": percentile(ttft, 50), "ttft_p99": percentile(ttft, 99),
            "expert_mb_per_token": read / max(tokens[0], 1) / 1e6,
            "mean_batch": metric(port, "coli_batch_sequences_total") / max(metric(port, "coli_batch_steps_total"), 1)}


def process_usage(pid):
    """(resident set in MB, open file descriptors) of a process."""
    with open(f"/proc/{pid}/status") as f:
        rss_kb = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    return rss_kb / 1e3, len(os.listdir(f"/proc/{pid}/fd"))


def soak(a, extra, clients):
    proc, port = start_server(a.coli, a.model, clients, extra)
    stop = time.time() + a.soak
    done = [0]
    lock = threading.Lock()

    def client(k):
        i = 0
        while time.time() < stop:
            _, n = one_request(port, PROMPTS[(k + i) % len(PROMPTS)], a.max_tokens)
            i += 1
            with lock:
                done[0] += n

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    print("| minute | server RSS MB | open fds | tokens so far |")
    print("|---|---|---|---|")
    start = time.time()
    try:
        while time.time() < stop:
            rss, fds = process_usage(proc.pid)
            print(f"| {(time.time() - start) / 60:.1f} | {rss:.1f} | {fds} | {done[0]} |", flush=True)
            time.sleep(min(a.sample, max(stop - time.time(), 0.1)))
        for t in threads:
            t.join()
        rss, fds = process_usage(proc.pid)
        print(f"| {(time.time() - start) / 60:.1f} | {rss:.1f} | {fds} | {done[0]} |", flush=True)
    finally:
        proc.terminate()
        proc.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--coli", default="build/coli")
    ap.add_argument("--model", required=True)
    ap.add_argument("--clients", default="1,4,8,16")
    ap.add_argument("--requests", type=int, default=4, help="requests per client")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--coli-args", default="", help="more `coli serve` flags, e.g. \"--ram-gb 2\"")
    ap.add_argument("--json", help="also write the rows here")
    ap.add_argument("--soak", type=float, default=0, help="seconds of a soak run instead of the table")
    ap.add_argument("--sample", type=float, default=30, help="soak: seconds between samples")
    a = ap.parse_args()
    extra = shlex.split(a.coli_args)
    if a.soak > 0:
        return soak(a, extra, int(a.clients.split(",")[0]))
    rows = []
    print("| clients | serving | tok/s | TTFT p50 s | TTFT p99 s | expert MB read / token | mean batch |")
    print("|---|---|---|---|---|---|---|")
    for clients in [int(c) for c in a.clients.split(",")]:
        for mode, parallel in (("batched", clients), ("one at a time", 1)):
            if mode == "one at a time" and clients == 1:
                continue
            proc, port = start_server(a.coli, a.model, parallel, extra)
            try:
                one_request(port, PROMPTS[0], 4)  # warm: first touches of the weights
                r = round_run(port, clients, a.requests, a.max_tokens)
            finally:
                proc.terminate()
                proc.wait()
            r["serving"] = mode
            rows.append(r)
            print(f"| {clients} | {mode} | {r['tok_s']:.1f} | {r['ttft_p50']:.2f} | {r['ttft_p99']:.2f} | "
                  f"{r['expert_mb_per_token']:.1f} | {r['mean_batch']:.2f} |", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
