#!/usr/bin/env python3
"""Generate tiny random-weight OLMoE checkpoints plus reference outputs (oracles).

The reference is Hugging Face transformers' ``OlmoeForCausalLM`` run on CPU in fp32 with
``attn_implementation="eager"``. For every variant the script writes ``OUTDIR/<variant>/`` holding
exactly what ``save_pretrained`` writes (config.json, generation_config.json, model.safetensors or
model-0000x-of-0000y.safetensors + model.safetensors.index.json) and ``oracle.safetensors`` with:

  input_ids  I64 [T]            random prompt ids in [0, vocab)
  logits     F32 [T, vocab]     full-forward logits at every prompt position
  greedy     I64 [N]            the N new tokens of generate(do_sample=False); eos is disabled
  hidden_i   F32 [T, D]         i < L: input of decoder layer i (hidden_0 = embeddings);
                                i = L: output of the final RMSNorm (what lm_head sees)

Variants (all: vocab 512, hidden 64, 32-wide experts, 3 layers, 4 heads of 16, 16 experts, top-4):
  olmoe_base     MHA (4 kv heads), norm_topk_prob False
  olmoe_gqa      GQA (2 kv heads), norm_topk_prob True
  olmoe_bf16     GQA, norm_topk_prob False, checkpoint stored in bfloat16; the oracle is the fp32
                 model whose weights are the bf16-rounded weights
  olmoe_sharded  GQA, norm_topk_prob True, saved in >= 3 shards with an index
  olmoe_clip     MHA, norm_topk_prob False, clip_qkv set near the 90th percentile of |q|

All RMSNorm weights (input/post-attention/q/k/final) are drawn from U(0.5, 1.5) instead of HF's
all-ones init, so that a missing or misplaced norm weight shows up in the logits.

The script checks what it writes (reload with from_pretrained reproduces the logits, per-expert tensor
names on disk, bf16 dtype, shard count, clipping active, generate == manual greedy) and prints
diagnostics. It exits with status 1 if any check failed (the files are still written).

Needs torch, transformers (5.x), safetensors. Typical use on the GPU machine (runs on CPU, seconds):

  PYTHONUNBUFFERED=1 python3 tools/make_olmoe_oracles.py /tmp/oracles
  tar czf $OUT/oracles.tgz -C /tmp/oracles .
"""

import argparse
import copy
import json
import os
import re
import struct
import sys
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import transformers
from safetensors.torch import save_file
from transformers import OlmoeConfig, OlmoeForCausalLM

# Shared tiny dimensions (head_dim = hidden_size / num_attention_heads = 16).
TINY_DIMS = dict(
    vocab_size=512,
    hidden_size=64,
    intermediate_size=32,
    num_hidden_layers=3,
    num_attention_heads=4,
    num_experts=16,
    num_experts_per_tok=4,
    max_position_embeddings=256,
    rms_norm_eps=1e-5,
    rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
    initializer_range=0.1,
    tie_word_embeddings=False,
    attention_bias=False,
    hidden_act="silu",
    pad_token_id=1,
    bos_token_id=None,
    eos_token_id=None,  # no eos: generate() must never stop early
)


@dataclass
class Variant:
    name: str
    num_key_value_heads: int
    norm_topk_prob: bool
    save_bf16: bool = False
    max_shard_size: str | None = None
    clip_percentile: float | None = None  # set clip_qkv to this percentile of |q|


VARIANTS = [
    Variant("olmoe_base", num_key_value_heads=4, norm_topk_prob=False),
    Variant("olmoe_gqa", num_key_value_heads=2, norm_topk_prob=True),
    Variant("olmoe_bf16", num_key_value_heads=2, norm_topk_prob=False, save_bf16=True),
    Variant("olmoe_sharded", num_key_value_heads=2, norm_topk_prob=True, max_shard_size="200KB"),
    Variant("olmoe_clip", num_key_value_heads=4, norm_topk_prob=False, clip_percentile=90.0),
]

EXPERT_NAME = re.compile(r"^model\.layers\.(\d+)\.mlp\.experts\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight$")


class Checks:
    """Collects pass/fail results so that one failed check does not stop the run."""

    def __init__(self):
        self.failures = []

    def expect(self, ok, what):
        print(f"  [{'ok' if ok else 'FAIL'}] {what}")
        if not ok:
            self.failures.append(what)


# ----------------------------------------------------------------------------------------------
# Model construction


def build_model(variant, seed):
    """Random-init fp32 eager OlmoeForCausalLM for one variant (deterministic in `seed`)."""
    kwargs = dict(TINY_DIMS)
    kwargs.update(num_key_value_heads=variant.num_key_value_heads, norm_topk_prob=variant.norm_topk_prob)
    try:
        config = OlmoeConfig(**kwargs, attn_implementation="eager")
    except (TypeError, ValueError):
        config = OlmoeConfig(**kwargs)
        config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = OlmoeForCausalLM(config).float().eval()
    if model.config._attn_implementation != "eager":
        model.config._attn_implementation = "eager"
    # HF initialises every RMSNorm weight to 1; randomise them so the norm weights are tested too.
    gen = torch.Generator().manual_seed(seed + 1000)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.copy_(0.5 + torch.rand(param.shape, generator=gen))
    return model


def round_weights_to_bf16(model):
    """Replace every parameter by its bf16-rounded value, kept in fp32."""
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(param.to(torch.bfloat16).to(torch.float32))


def set_clip_qkv(model, value):
    """Set clip_qkv on the model config and on every submodule that holds its own config reference."""
    model.config.clip_qkv = value
    for module in model.modules():
        cfg = getattr(module, "config", None)
        if cfg is not None and hasattr(cfg, "clip_qkv"):
            cfg.clip_qkv = value


# ----------------------------------------------------------------------------------------------
# Instrumented forward


@contextmanager
def capture(model):
    """Record per-layer inputs, final-norm output, routing inputs and pre-clip q/k/v during a forward."""
    rec = {"layer_in": {}, "final": None, "moe_in": {}, "q": {}, "k": {}, "v": {}}
    handles = []
    layers = model.model.layers

    def layer_pre_hook(idx):
        def hook(module, args, kwargs):
            x = args[0] if args else kwargs["hidden_states"]
            rec["layer_in"][idx] = x.detach().clone()

        return hook

    def out_hook(slot, idx):
        def hook(module, args, output):
            out = output[0] if isinstance(output, tuple) else output
            rec[slot][idx] = out.detach().clone()  # clone: clip_qkv clamps this tensor in place

        return hook

    def moe_in_hook(idx):
        def hook(module, args, kwargs):
            x = args[0] if args else kwargs["hidden_states"]
            rec["moe_in"][idx] = x.detach().clone()

        return hook

    def final_hook(module, args, output):
        rec["final"] = output.detach().clone()

    for i, layer in enumerate(layers):
        handles.append(layer.register_forward_pre_hook(layer_pre_hook(i), with_kwargs=True))
        handles.append(layer.mlp.register_forward_pre_hook(moe_in_hook(i), with_kwargs=True))
        handles.append(layer.self_attn.q_norm.register_forward_hook(out_hook("q", i)))
        handles.append(layer.self_attn.k_norm.register_forward_hook(out_hook("k", i)))
        handles.append(layer.self_attn.v_proj.register_forward_hook(out_hook("v", i)))
    handles.append(model.model.norm.register_forward_hook(final_hook))
    try:
        yield rec
    finally:
        for h in handles:
            h.remove()


def routing(model, rec):
    """Per layer: (top-k expert ids [T, k], min gap between k-th and (k+1)-th router probability)."""
    k = model.config.num_experts_per_tok
    result = []
    for i, layer in enumerate(model.model.layers):
        x = rec["moe_in"][i].reshape(-1, model.config.hidden_size)
        probs = torch.softmax((x @ layer.mlp.gate.weight.T).float(), dim=-1)
        top = torch.topk(probs, k + 1, dim=-1)
        gap = (top.values[:, k - 1] - top.values[:, k]).min().item()
        result.append((top.indices[:, :k], gap))
    return result


def forward(model, ids):
    with torch.no_grad():
        return model(input_ids=ids[None], output_hidden_states=True, use_cache=False)


def manual_greedy(model, ids, n):
    """Greedy decoding by repeated full forwards (no cache); returns ids and top1-top2 margins."""
    seq = ids.clone()
    new, margins = [], []
    with torch.no_grad():
        for _ in range(n):
            last = model(input_ids=seq[None], use_cache=False).logits[0, -1]
            top2 = torch.topk(last, 2)
            new.append(int(top2.indices[0]))
            margins.append(float(top2.values[0] - top2.values[1]))
            seq = torch.cat([seq, top2.indices[:1]])
    return torch.tensor(new, dtype=torch.int64), margins


def hf_greedy(model, ids, n):
    with torch.no_grad():
        out = model.generate(
            input_ids=ids[None],
            attention_mask=torch.ones(1, ids.numel(), dtype=torch.int64),
            max_new_tokens=n,
            do_sample=False,
        )
    return out[0, ids.numel():].clone()


# ----------------------------------------------------------------------------------------------
# Checkpoint inspection


def safetensors_header(path):
    """{tensor name: {"dtype", "shape", "data_offsets"}} from a .safetensors file header."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    return header


def checkpoint_tensors(directory):
    """Union of tensor headers over the checkpoint files (sharded or not) and the list of files."""
    index_path = os.path.join(directory, "model.safetensors.index.json")
    if os.path.exists(index_path):
        with open(index_path) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    tensors = {}
    for fname in files:
        tensors.update(safetensors_header(os.path.join(directory, fname)))
    return tensors, files


def dir_size(directory):
    return sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory))


# ----------------------------------------------------------------------------------------------
# One variant


def make_variant(variant, index, args, checks, print_names):
    print(f"\n=== {variant.name} ===")
    seed = args.seed + 17 * index
    model = build_model(variant, seed)
    cfg = model.config
    L, E, V = cfg.num_hidden_layers, cfg.num_experts, cfg.vocab_size
    print(f"  seed {seed}, kv heads {cfg.num_key_value_heads}, norm_topk_prob {cfg.norm_topk_prob}, "
          f"attn {cfg._attn_implementation}")
    ids = torch.randint(0, V, (args.seq_len,), generator=torch.Generator().manual_seed(seed + 1),
                        dtype=torch.int64)

    if variant.save_bf16:
        round_weights_to_bf16(model)
        print("  weights rounded to bf16 (oracle runs in fp32 on the rounded weights)")

    if variant.clip_percentile is not None:
        with capture(model) as rec:
            unclipped_logits = forward(model, ids).logits[0]
        q_abs = torch.cat([rec["q"][i].abs().flatten() for i in range(L)])
        clip = round(float(torch.quantile(q_abs, variant.clip_percentile / 100.0)), 2)
        set_clip_qkv(model, clip)
        print(f"  clip_qkv = {clip} (p{variant.clip_percentile:g} of |q| in the unclipped model)")

    # Reference forward with instrumentation.
    with capture(model) as rec:
        out = forward(model, ids)
    logits = out.logits[0].float().clone()
    hidden = [rec["layer_in"][i][0] for i in range(L)] + [rec["final"][0]]
    checks.expect(bool(torch.isfinite(logits).all()), "logits finite")

    # Cross-check the hooks against output_hidden_states (informational).
    if out.hidden_states is not None:
        diffs = [(hs[0] - h).abs().max().item() if hs[0].shape == h.shape else float("nan")
                 for hs, h in zip(out.hidden_states, hidden)]
        print(f"  output_hidden_states: {len(out.hidden_states)} entries; max|diff| vs layer inputs "
              f"+ final norm: {['%.1e' % d for d in diffs]}")
    lm_diff = (hidden[-1] @ model.lm_head.weight.T - logits).abs().max().item()
    checks.expect(lm_diff < 1e-5, f"lm_head(hidden_{L}) reproduces logits (max diff {lm_diff:.2e})")

    if variant.clip_percentile is not None:
        for name in ("q", "k", "v"):
            vals = torch.cat([rec[name][i].flatten() for i in range(L)])
            frac = (vals.abs() > clip).float().mean().item()
            per_layer = [(rec[name][i].abs() > clip).float().mean().item() for i in range(L)]
            print(f"  fraction of {name} clipped: {frac:.4f} (per layer {['%.3f' % f for f in per_layer]})")
        change = (logits - unclipped_logits).abs().max().item()
        checks.expect(change > 1e-3, f"clipping changes the logits (max diff vs unclipped {change:.3e})")

    # Routing spread.
    for i, (idx, gap) in enumerate(routing(model, rec)):
        used = sorted(set(idx.flatten().tolist()))
        print(f"  layer {i}: {len(used)}/{E} distinct experts {used}; min p(k)-p(k+1) gap {gap:.2e}")

    # Logit diagnostics.
    top2 = torch.topk(logits, 2, dim=-1)
    print(f"  max|logit| {logits.abs().max().item():.4f}, logit std {logits.std().item():.4f}")
    print(f"  argmax per position {top2.indices[:, 0].tolist()}")
    print(f"  min top1-top2 margin over positions {(top2.values[:, 0] - top2.values[:, 1]).min().item():.2e}")

    # Greedy generation.
    greedy = hf_greedy(model, ids, args.new_tokens)
    manual, margins = manual_greedy(model, ids, args.new_tokens)
    checks.expect(greedy.numel() == args.new_tokens, f"generate returned {greedy.numel()} new tokens")
    checks.expect(torch.equal(greedy, manual), "generate (KV cache) == greedy by full forwards")
    print(f"  greedy {greedy.tolist()}; min top1-top2 margin {min(margins):.2e}")

    # Save the checkpoint.
    vdir = os.path.join(args.outdir, variant.name)
    os.makedirs(vdir, exist_ok=True)
    to_save = copy.deepcopy(model).to(torch.bfloat16) if variant.save_bf16 else model
    save_kwargs = {"max_shard_size": variant.max_shard_size} if variant.max_shard_size else {}
    to_save.save_pretrained(vdir, **save_kwargs)
    del to_save

    # Save the oracle.
    tensors = {"input_ids": ids.contiguous(), "logits": logits.contiguous(), "greedy": greedy.contiguous()}
    for i, h in enumerate(hidden):
        tensors[f"hidden_{i}"] = h.float().contiguous()
    meta = {
        "variant": variant.name,
        "seed": str(seed),
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "hidden_i": f"i<{L}: input of decoder layer i; i={L}: final RMSNorm output",
    }
    if variant.clip_percentile is not None:
        meta["clip_qkv"] = str(clip)
    save_file(tensors, os.path.join(vdir, "oracle.safetensors"), metadata=meta)

    # Inspect what was written.
    with open(os.path.join(vdir, "config.json")) as f:
        cfg_json = json.load(f)
    tensors_on_disk, files = checkpoint_tensors(vdir)
    dtypes = sorted({t["dtype"] for t in tensors_on_disk.values()})
    cfg_dtype = cfg_json.get("dtype", cfg_json.get("torch_dtype"))
    want = "bfloat16" if variant.save_bf16 else "float32"
    checks.expect(cfg_dtype == want, f"config.json dtype field = {cfg_dtype!r} (want {want!r})")
    checks.expect(dtypes == (["BF16"] if variant.save_bf16 else ["F32"]), f"safetensors dtypes {dtypes}")
    if variant.max_shard_size:
        checks.expect(len(files) >= 3, f"{len(files)} shards: {files}")
    expert_names = [n for n in tensors_on_disk if EXPERT_NAME.match(n)]
    checks.expect(len(expert_names) == 3 * L * E,
                  f"{len(expert_names)} per-expert tensors model.layers.L.mlp.experts.E.*_proj.weight "
                  f"(want {3 * L * E})")
    fused = [n for n in tensors_on_disk if ".experts." in n and not EXPERT_NAME.match(n)]
    checks.expect(not fused, f"no fused expert tensors on disk {fused[:4]}")
    if variant.clip_percentile is not None:
        checks.expect(cfg_json.get("clip_qkv") == clip, f"config.json clip_qkv = {cfg_json.get('clip_qkv')}")

    if print_names:
        print(f"  tensors on disk ({len(tensors_on_disk)}):")
        for n in sorted(tensors_on_disk, key=_natural_key):
            t = tensors_on_disk[n]
            print(f"    {n} {t['dtype']} {t['shape']}")

    # Reload and compare.
    reloaded = OlmoeForCausalLM.from_pretrained(vdir, dtype=torch.float32, attn_implementation="eager").eval()
    with torch.no_grad():
        re_logits = reloaded(input_ids=ids[None], use_cache=False).logits[0].float()
    diff = (re_logits - logits).abs().max().item()
    checks.expect(diff <= 1e-6, f"from_pretrained reload reproduces logits (max abs diff {diff:.3e})")

    listing = ", ".join(f"{f} {os.path.getsize(os.path.join(vdir, f))}" for f in sorted(os.listdir(vdir)))
    print(f"  files: {listing}")
    print(f"  directory size {dir_size(vdir) / 1024:.1f} KiB")
    return cfg_json


def _natural_key(name):
    return [int(tok) if tok.isdigit() else tok for tok in re.split(r"(\d+)", name)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("outdir", help="output folder; one subfolder per variant")
    parser.add_argument("--variants", nargs="*", default=[v.name for v in VARIANTS],
                        choices=[v.name for v in VARIANTS], help="subset of variants (default: all)")
    parser.add_argument("--seed", type=int, default=0, help="base seed (variant i uses seed + 17*i)")
    parser.add_argument("--seq-len", type=int, default=16, help="prompt length T")
    parser.add_argument("--new-tokens", type=int, default=8, help="greedy tokens to generate")
    args = parser.parse_args()

    print(f"python {sys.version.split()[0]}, torch {torch.__version__}, transformers {transformers.__version__}")
    torch.set_num_threads(min(8, os.cpu_count() or 1))
    os.makedirs(args.outdir, exist_ok=True)
    checks = Checks()
    configs = {}
    for i, variant in enumerate(VARIANTS):
        if variant.name in args.variants:
            configs[variant.name] = make_variant(variant, i, args, checks, print_names=(i == 0))

    first = next(iter(configs))
    print(f"\n=== {first}/config.json ===")
    with open(os.path.join(args.outdir, first, "config.json")) as f:
        print(f.read())
    gen_path = os.path.join(args.outdir, first, "generation_config.json")
    if os.path.exists(gen_path):
        print(f"=== {first}/generation_config.json ===")
        with open(gen_path) as f:
            print(f.read())

    if checks.failures:
        print(f"\n{len(checks.failures)} check(s) FAILED:")
        for what in checks.failures:
            print(f"  - {what}")
        return 1
    print("\nall checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
