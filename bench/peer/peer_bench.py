#!/usr/bin/env python3
"""coli beside llama.cpp as users get it (node-llama-cpp 3.21.1's prebuilt binaries), on the same weights.

Usage (bench/peer/run.sh installs the npm packages and calls this):
  python3 bench/peer/peer_bench.py --model DIR [--rounds 3] [--threads T] [--backend cpu|cuda|vulkan]
      [--prompts 128,512] [--decode 64] [--cache warm|own|cold] [--ctx N] [--no-agree] [--coli build/coli]
      [--gguf FILE] [--json OUT.json]

What it does:
  1. Converts the checkpoint DIR (OLMoE safetensors, e.g. `coli synth --arch olmoe` output) to GGUF with
     convert_olmoe.py, once: the file is cached under $XDG_CACHE_HOME/coli-peer (or ~/.cache/coli-peer),
     keyed by the checkpoint's files and the converter's source.
  2. Runs both engines in interleaved rounds (the order alternates from round to round), one fresh process
     per measurement, on the same pseudo-random prompt ids: the first prompt length with --decode greedy
     tokens (prefill and decode speed), the other lengths with one token (prefill only). coli runs
     `coli run --ids ... --ignore-eos --hot-set none`; the peer runs peer.mjs.
  3. Prints one markdown table: prefill tok/s per prompt length, decode tok/s, peak RSS (the process's
     ru_maxrss from wait4, the largest over a round's runs), load time, each the median over rounds with
     every round's value beside it, and the ratio coli / peer.
  4. Checks that the engines agree: teacher-forced top-1 agreement (coli's `coli logits` argmax at every
     position against the peer's greedy next token after every prefix) over the first prompt followed by
     coli's greedy continuation of round 1, so that the positions where the two greedy continuations part
     are among those checked; the difference of the two engines' log-probabilities of the peer's 8 most
     likely tokens at every position (a random model's distribution is nearly flat, so top-1 alone says
     little); and the common prefix of the two greedy continuations.

Both engines get the same context length (--ctx; by default the longest prompt and --decode, rounded up to
256 as node-llama-cpp rounds it), so that their KV caches are the same size: coli's default, the model's
whole context, would add its KV cache for 4096 positions to coli's RSS.
Load time: the peer's is getLlama + loadModel + createContext, measured in its process; coli's is the
process's wall time less its prompt and decode time (`coli run` prints those), so it includes process
start and exit. --cache warm (the default) drops the page cache once (where allowed) and reads both
engines' files once before the rounds, leaving them in the page cache; --cache cold drops the page cache
before every run (needs root, and a writable /proc/sys/vm/drop_caches: when it is not, the run says so and
stays warm). --cache own drops the page cache before each engine's runs of a round and reads only that
engine's files: the model resident for the engine that runs, for models whose two copies (safetensors and
GGUF) do not fit in RAM together.
"""

import argparse
import array
import hashlib
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import convert_olmoe  # noqa: E402
import gguf  # noqa: E402

PEER_VERSION = "3.21.1"  # node-llama-cpp, as package-lock.json pins it
PROMPT_SEED = 12345
LCG_A, LCG_C, LCG_M = 6364136223846793005, 1442695040888963407, 1 << 64  # Knuth's MMIX constants
READ_CHUNK = 64 << 20
CTX_ALIGN = 256  # node-llama-cpp rounds a context size up to a multiple of this; both engines get the result
BUSY_LOAD_PER_CORE = 0.5  # a load average above this per core before or after the rounds: say so
CODE_FILES = ("convert_olmoe.py", "gguf.py")  # the GGUF cache key includes their source

RE_COLI_SPEED = re.compile(r"prompt: (\d+) tokens in ([\d.]+) s .*; decode: (\d+) tokens in ([\d.]+) s")


def prompt_ids(n, vocab, seed=PROMPT_SEED):
    """n pseudo-random token ids in [1, vocab): the same for both engines and every round."""
    x, ids = seed, []
    for _ in range(n):
        x = (x * LCG_A + LCG_C) % LCG_M
        ids.append(1 + (x >> 33) % (vocab - 1))
    return ids


def gguf_for(model_dir, explicit):
    """The converted file: explicit if given (converted when missing), else a cached one."""
    if explicit:
        path = Path(explicit)
    else:
        h = hashlib.sha256()
        for name in CODE_FILES:
            h.update((HERE / name).read_bytes())
        for p in sorted(model_dir.iterdir()):
            if p.suffix in (".json", ".safetensors"):
                st = p.stat()
                h.update(f"{p.name} {st.st_size} {st.st_mtime_ns}\n".encode())
        cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "coli-peer"
        cache.mkdir(parents=True, exist_ok=True)
        path = cache / f"{model_dir.name}-{h.hexdigest()[:12]}.gguf"
    if path.exists():
        print(f"gguf: {path} (cached)", file=sys.stderr)
    else:
        t = time.monotonic()
        n = convert_olmoe.convert(model_dir, path)
        print(f"gguf: wrote {path}: {n} tensors, {path.stat().st_size / 1e9:.2f} GB in "
              f"{time.monotonic() - t:.1f} s", file=sys.stderr)
    return path


def drop_caches():
    """True when the page cache was dropped."""
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def read_through(paths):
    """Reads files once so that they sit in the page cache."""
    for p in paths:
        with open(p, "rb", buffering=0) as f:
            while f.read(READ_CHUNK):
                pass


def run_measured(cmd, cwd=None):
    """Runs cmd; returns (stdout, stderr, wall seconds, peak RSS bytes of that process)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.monotonic()
        p = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=cwd)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.monotonic() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        so, se = out.read().decode(), err.read().decode()
    if p.returncode != 0:
        raise SystemExit(f"failed ({p.returncode}): {' '.join(map(str, cmd))}\n{se[-3000:]}")
    return so, se, wall, usage.ru_maxrss * 1024


class Coli:
    name = "coli"

    def __init__(self, args):
        self.args = args

    def files(self):
        return sorted(self.args.model.glob("*.safetensors"))

    def common(self):
        a = self.args
        return ["-m", str(a.model), "-t", str(a.threads), "--backend", a.backend, "--ctx", str(a.ctx),
                *a.coli_args.split()]

    def generate(self, ids, n):
        """One fresh process: prompt ids, then n greedy tokens; speeds, load time, peak RSS, the tokens."""
        cmd = [self.args.coli, "run", *self.common(), "--hot-set", "none", "--ids", ",".join(map(str, ids)),
               "-n", str(n), "--ignore-eos", "--print-ids"]
        so, se, wall, rss = run_measured(cmd)
        m = RE_COLI_SPEED.search(se)
        if not m:
            raise SystemExit(f"coli run printed no speed line:\n{se[-2000:]}")
        pt, ps, dt, ds = int(m[1]), float(m[2]), int(m[3]), float(m[4])
        out = [int(t) for t in so.strip().splitlines()[-1].split(",")]
        return {"prefill_tps": pt / ps, "decode_tps": dt / ds if dt else None, "load_s": wall - ps - ds,
                "rss": rss, "ids": out}

    def top1(self, ids, tmp):
        """Teacher-forced: the argmax after every prefix of ids, and the logit rows [len(ids)][vocab]."""
        npy = Path(tmp) / "coli_logits.npy"
        cmd = [self.args.coli, "logits", *self.common(), "--hot-set", "none", "--ids", ",".join(map(str, ids)),
               "-o", str(npy)]
        run_measured(cmd)
        return npy_argmax(npy)


class Peer:
    name = "peer"

    def __init__(self, args, gguf_path):
        self.args, self.gguf = args, gguf_path

    def files(self):
        return [self.gguf]

    def common(self, ids):
        a = self.args
        return ["node", str(HERE / "peer.mjs"), "--model", str(self.gguf), "--ids", ",".join(map(str, ids)),
                "--threads", str(a.threads), "--gpu", a.backend, "--ctx", str(a.ctx)]

    def generate(self, ids, n):
        """As Coli.generate, through peer.mjs."""
        so, _, _, rss = run_measured(self.common(ids) + ["--decode", str(n)], cwd=HERE)
        r = json.loads(so.strip().splitlines()[-1])
        return {"prefill_tps": r["prompt_tokens"] / r["prefill_s"],
                "decode_tps": r["decode_tokens"] / r["decode_s"] if r["decode_tokens"] else None,
                "load_s": r["load_s"], "rss": rss, "ids": r["ids"], "threads": r["threads"]}

    def top1(self, ids, tmp):
        """Teacher-forced: the greedy token after every prefix of ids, and the most likely [token, prob]s."""
        so, _, _, _ = run_measured(self.common(ids) + ["--agree"], cwd=HERE)
        r = json.loads(so.strip().splitlines()[-1])
        return r["top1"], r["top"]


def npy_argmax(path):
    """Row argmax of a little-endian float32 [T, V] .npy file, and the rows (for the margins)."""
    raw = Path(path).read_bytes()
    if raw[:6] != b"\x93NUMPY":
        raise SystemExit(f"{path}: not a .npy file")
    hlen = int.from_bytes(raw[8:10], "little") if raw[6] == 1 else int.from_bytes(raw[8:12], "little")
    start = (10 if raw[6] == 1 else 12) + hlen
    header = raw[start - hlen:start].decode("latin1")
    if "'<f4'" not in header or "'fortran_order': False" not in header:
        raise SystemExit(f"{path}: expected a C-order float32 array, header {header.strip()}")
    t, v = (int(x) for x in re.search(r"'shape': \((\d+), (\d+)\)", header).groups())
    values = array.array("f")
    values.frombytes(raw[start:start + 4 * t * v])
    rows = [values[i * v:(i + 1) * v] for i in range(t)]
    return [row.index(max(row)) for row in rows], rows


def median_cell(values, fmt):
    vals = [x for x in values if x is not None]
    if not vals:
        return "-", None
    med = statistics.median(vals)
    return f"{fmt(med)} ({' / '.join(fmt(x) for x in vals)})", med


def machine_line(args):
    cpu = "unknown CPU"
    try:
        m = re.search(r"model name\s*:\s*(.*)", Path("/proc/cpuinfo").read_text())
        cpu = m[1].strip() if m else cpu
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{platform.node()}: {cpu}, {os.cpu_count()} cores, {mem:.0f} GiB RAM; backend {args.backend}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, type=Path, help="checkpoint directory (OLMoE safetensors)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--backend", choices=("cpu", "cuda", "vulkan"), default="cpu")
    ap.add_argument("--prompts", default="128,512", help="prompt lengths; the first also times decode")
    ap.add_argument("--decode", type=int, default=64, help="greedy tokens after the first prompt")
    ap.add_argument("--cache", choices=("warm", "own", "cold"), default="warm")
    ap.add_argument("--ctx", type=int, default=0,
                    help="context length of both engines (0: the longest prompt and --decode, rounded up to 256)")
    ap.add_argument("--no-agree", action="store_true", help="skip the agreement check")
    ap.add_argument("--coli", default=str(HERE.parent.parent / "build" / "coli"))
    ap.add_argument("--coli-args", default="", help="extra options for coli run and coli logits")
    ap.add_argument("--gguf", help="GGUF file to use or write (default: a cached conversion)")
    ap.add_argument("--json", help="also write every measurement here")
    args = ap.parse_args()
    prompts = [int(x) for x in args.prompts.split(",")]
    if args.ctx <= 0:  # the KV cache both engines allocate: the same size, so that peak RSS compares
        args.ctx = -(-(max(prompts) + args.decode + 1) // CTX_ALIGN) * CTX_ALIGN
    config = json.loads((args.model / "config.json").read_text())
    vocab = config["vocab_size"]

    gguf_path = gguf_for(args.model, args.gguf)
    meta, _, _ = gguf.read_header(gguf_path)
    if meta.get("general.architecture") != "olmoe" or len(meta["tokenizer.ggml.tokens"]) != vocab:
        raise SystemExit(f"{gguf_path}: not an olmoe GGUF with {vocab} tokens")
    engines = [Coli(args), Peer(args, gguf_path)]

    cache_note = "files left in the page cache (read once before the rounds)"
    if args.cache in ("cold", "own"):
        if drop_caches():
            cache_note = ("page cache dropped before every run" if args.cache == "cold" else
                          "page cache dropped before each engine's runs of a round, then that engine's files read")
        else:
            cache_note = (f"--cache {args.cache} asked, but /proc/sys/vm/drop_caches is not writable here: "
                          "files stay cached")
            args.cache = "warm"
    if args.cache == "warm":
        # Dropped first where allowed, so that both engines' files enter the page cache the same way: how a
        # file was first read decides the kernel's folio sizes for it, and with them what each process pays
        # to touch a page for the first time (4 KB or 2 MB page-table entries).
        if drop_caches():
            cache_note = "page cache dropped once, then both engines' files read once before the rounds"
        read_through(sorted(args.model.glob("*.safetensors")) + [gguf_path])
    print(f"cache: {cache_note}", file=sys.stderr)

    load_before = os.getloadavg()[0]
    ids = {p: prompt_ids(p, vocab) for p in prompts}
    results = {e.name: [] for e in engines}  # per round: {prefill: {p: tps}, decode, load_s, rss, ids}
    for r in range(args.rounds):
        order = engines if r % 2 == 0 else engines[::-1]
        for e in order:
            rec = {"prefill": {}}
            if args.cache == "own":
                drop_caches()
                read_through(e.files())
            for i, p in enumerate(prompts):
                if args.cache == "cold":
                    drop_caches()
                out = e.generate(ids[p], args.decode if i == 0 else 1)
                rec["prefill"][p] = out["prefill_tps"]
                rec["rss"] = max(rec.get("rss", 0), out["rss"])
                if i == 0:
                    rec.update(decode=out["decode_tps"], load_s=out["load_s"], ids=out["ids"])
                print(f"round {r + 1}: {e.name} prompt {p}: prefill {out['prefill_tps']:.2f} tok/s"
                      + (f", decode {out['decode_tps']:.2f} tok/s" if i == 0 else "")
                      + f", load {out['load_s']:.2f} s, peak RSS {out['rss'] / 1e9:.2f} GB", file=sys.stderr)
            results[e.name].append(rec)

    # Greedy continuations of round 1 (the first prompt): the common prefix.
    c_ids, p_ids = results["coli"][0]["ids"], results["peer"][0]["ids"]
    prefix = next((i for i, (a, b) in enumerate(zip(c_ids, p_ids)) if a != b), min(len(c_ids), len(p_ids)))

    agreement = None
    if not args.no_agree:
        # The first prompt, then coli's continuation: position t predicts token t + 1 of this sequence.
        agree_ids = ids[prompts[0]] + c_ids[:-1]
        with tempfile.TemporaryDirectory() as tmp:
            coli_top1, rows = engines[0].top1(agree_ids, tmp)
            peer_top1, peer_top = engines[1].top1(agree_ids, tmp)
        same = [a == b for a, b in zip(coli_top1, peer_top1)]
        # Where they differ: how far below coli's own top logit the peer's choice is, in coli's logits.
        gaps = [rows[t][coli_top1[t]] - rows[t][peer_top1[t]] for t in range(len(same))
                if not same[t] and 0 <= peer_top1[t] < len(rows[t])]
        # The sharper check: the peer's most likely tokens, their log-probabilities in both engines.
        logp_diffs = []
        for t, top in enumerate(peer_top):
            row = rows[t]
            m = max(row)
            log_z = m + math.log(sum(math.exp(x - m) for x in row))
            logp_diffs += [abs(math.log(p) - (row[tok] - log_z)) for tok, p in top if p > 0]
        n_prompt = prompts[0]
        agreement = {"positions": len(same), "agree": sum(same), "fraction": sum(same) / len(same),
                     "prompt_agree": sum(same[:n_prompt]), "prompt_positions": n_prompt,
                     "max_gap": max(gaps) if gaps else 0.0,
                     "logp_max": max(logp_diffs, default=0.0),
                     "logp_median": statistics.median(logp_diffs) if logp_diffs else 0.0}

    def fmt_tps(x):
        return f"{x:.1f}" if x >= 10 else f"{x:.2f}"

    def row(label, getter, fmt, lower_better=False):
        c_cell, c_med = median_cell([getter(x) for x in results["coli"]], fmt)
        p_cell, p_med = median_cell([getter(x) for x in results["peer"]], fmt)
        ratio = f"{c_med / p_med:.2f}" if c_med and p_med else "-"
        return f"| {label} | {c_cell} | {p_cell} | {ratio}{' (lower is better)' if lower_better else ''} |"

    peer_label = f"llama.cpp (node-llama-cpp {PEER_VERSION}, {args.backend})"
    busy = max(load_before, os.getloadavg()[0]) > BUSY_LOAD_PER_CORE * os.cpu_count()
    lines = [
        *(["**the machine was busy (the load average on the next line), so these figures are indicative only; "
           "llama.cpp's threads spin while they wait for each other and lose most when they do not each have a "
           "core**", ""] if busy else []),
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {machine_line(args)}, {args.threads} threads, "
        f"context {args.ctx}, {args.rounds} interleaved rounds; {cache_note}; load average {load_before:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after",
        f"model: {args.model} ({config['num_hidden_layers']} layers, hidden {config['hidden_size']}, "
        f"{config['num_experts']} experts top-{config['num_experts_per_tok']}), GGUF {gguf_path.name}",
        "",
        f"| | coli | {peer_label} | coli / peer |",
        "|---|---|---|---|",
    ]
    for p in prompts:
        lines.append(row(f"prefill tok/s, {p}-token prompt", lambda x, p=p: x["prefill"][p], fmt_tps))
    lines.append(row(f"decode tok/s ({args.decode} tokens after {prompts[0]})", lambda x: x["decode"], fmt_tps))
    lines.append(row("peak RSS, GB", lambda x: x["rss"] / 1e9, lambda v: f"{v:.2f}", True))
    lines.append(row("load, s", lambda x: x["load_s"], lambda v: f"{v:.2f}", True))
    lines.append("")
    if agreement:
        lines.append(f"agreement: teacher-forced top-1 {agreement['agree']}/{agreement['positions']} = "
                     f"{agreement['fraction']:.3f} ({agreement['prompt_agree']}/{agreement['prompt_positions']} "
                     f"over the prompt, the rest over coli's greedy continuation; coli's logits argmax against "
                     f"the peer's greedy next token at every position; where they differ, the peer's pick is "
                     f"at most {agreement['max_gap']:.3g} below coli's top logit, in coli's logits)")
        lines.append(f"log-probabilities of the peer's {len(peer_top[0]) if peer_top else 0} most likely tokens at "
                     f"every position, peer against coli: |difference| median {agreement['logp_median']:.2g}, "
                     f"largest {agreement['logp_max']:.2g}")
    lines.append(f"greedy continuations after the {prompts[0]}-token prompt: the first {prefix} of "
                 f"{min(len(c_ids), len(p_ids))} tokens identical")
    print("\n".join(lines))
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, "agreement": agreement,
                                               "greedy_prefix": prefix, "table": lines}, indent=1))


if __name__ == "__main__":
    main()
