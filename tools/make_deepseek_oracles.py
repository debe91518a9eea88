#!/usr/bin/env python3
"""Generate tiny random-weight DeepSeek-V3 checkpoints plus reference outputs (oracles).

The reference is transformers' ``DeepseekV3ForCausalLM`` on CPU in fp32 with eager attention
(docs/models.md 2 and 11). Each variant goes to ``OUTDIR/<variant>/``: what ``save_pretrained`` writes
(config.json, generation_config.json, model.safetensors with per-expert tensor names) and
``oracle.safetensors`` in the layout of tools/make_olmoe_oracles.py:

  input_ids  I64 [T]          random prompt ids
  logits     F32 [T, vocab]   full-forward logits at every prompt position
  greedy     I64 [N]          N greedy tokens by repeated full forwards (no eos)
  hidden_i   F32 [T, D]       i < L: input of decoder layer i; i = L: final RMSNorm output
  mtp_logits F32 [T-1, vocab] (deepseek_v3_mtp) the MTP layer's draft logits for the pairs (h_i, t_{i+1}),
                              i < T-1: h_i the last decoder layer's output (before the final norm)

Variants (vocab 256, hidden 64, 4 heads, kv_lora 32, rope 16, nope 32, v 24, 16 experts in 4 groups keep 2,
top-4, 1 shared expert, first layer dense, yarn factor 40 on an original context of 128):
  deepseek_v3        q_lora_rank 48 (q_a_proj / q_a_layernorm / q_b_proj), interleaved rope
  deepseek_v3_noq    q_lora_rank None (q_proj), rope_interleave False (half-split), norm_topk_prob False
  deepseek_v32       DeepseekV32ForCausalLM: DSA with index_topk 4 < the 12-token prompt (really sparse), 16
                     indexer heads of 32, half-split indexer rope
  glm_moe_dsa        GlmMoeDsaForCausalLM: 4 layers, indexer_types full/full/shared/full (GLM-5.2 IndexShare),
                     interleaved indexer rope, default rope theta 1e6, no group routing
  deepseek_v3_mtp    as deepseek_v3 with a multi-token-prediction layer (num_nextn_predict_layers 1) at
                     model.layers.3 (docs/models.md 2.5); the oracle adds mtp_logits (below)
  deepseek_v3_fp8    as deepseek_v3, stored as the hub's block-FP8 checkpoints are (docs/models.md 9.4):
                     every projection weight F8_E4M3 with a `<name>_scale_inv` F32 scale per 128 x 128
                     block (scale = block max / 448), quantization_config fp8; embeddings, norms, router and
                     lm_head as they were.
                     The oracle is the model whose projection weights are the dequantized fp8 * scale values.

Every zero-initialised buffer (the router's e_score_correction_bias) and every norm weight is randomized, so
that a missing one shows in the logits. Needs torch, transformers 5.x, safetensors. On the GPU machine:

  python3 tools/make_deepseek_oracles.py /tmp/oracles [VARIANT...] && tar czf $OUT/oracles.tgz -C /tmp/oracles .

Top-k selections (routing, DSA) are discontinuous: the script reports the smallest gap at any top-k boundary
of the forward and fails on a tie, which torch.topk would break in an order of its own.
"""

import argparse
import copy
import json
import os
import shutil
import sys

import torch
import transformers
from safetensors import safe_open
from safetensors.torch import save_file
from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3DecoderLayer, DeepseekV3RMSNorm
from transformers import (DeepseekV3Config, DeepseekV3ForCausalLM, DeepseekV32Config, DeepseekV32ForCausalLM,
                          GlmMoeDsaConfig, GlmMoeDsaForCausalLM)

TINY = dict(
    vocab_size=256,
    hidden_size=64,
    intermediate_size=96,
    moe_intermediate_size=32,
    num_hidden_layers=3,
    num_attention_heads=4,
    num_key_value_heads=4,
    n_shared_experts=1,
    n_routed_experts=16,
    kv_lora_rank=32,
    qk_rope_head_dim=16,
    v_head_dim=24,
    qk_nope_head_dim=32,
    n_group=4,
    topk_group=2,
    num_experts_per_tok=4,
    first_k_dense_replace=1,
    routed_scaling_factor=2.5,
    max_position_embeddings=5120,
    rope_parameters={"rope_type": "yarn", "rope_theta": 1e4, "factor": 40.0,
                     "original_max_position_embeddings": 128, "beta_fast": 32.0, "beta_slow": 1.0,
                     "mscale": 1.0, "mscale_all_dim": 1.0},
    initializer_range=0.1,
    num_mtp_layers=0,
    tie_word_embeddings=False,
    bos_token_id=None,
    eos_token_id=None,
    pad_token_id=None,
)

VARIANTS = {
    "deepseek_v3": dict(q_lora_rank=48, rope_interleave=True, norm_topk_prob=True),
    "deepseek_v3_noq": dict(q_lora_rank=None, rope_interleave=False, norm_topk_prob=False),
    "deepseek_v3_mtp": dict(q_lora_rank=48, rope_interleave=True, norm_topk_prob=True),
    "deepseek_v3_fp8": dict(q_lora_rank=48, rope_interleave=True, norm_topk_prob=True),
    # DSA: index_topk 4 < the 12-token prompt, so the selection is really sparse.
    # 16 indexer heads: a key scores exactly 0 only when every head's ReLU is 0, so ties at the top-k
    # boundary (which torch.topk breaks in its own order) become rare; check_topk_ties verifies there are none.
    "deepseek_v32": dict(q_lora_rank=48, rope_interleave=True, norm_topk_prob=True, index_topk=4,
                         index_head_dim=32, index_n_heads=16),
    "glm_moe_dsa": dict(q_lora_rank=48, rope_interleave=True, norm_topk_prob=True, index_topk=4,
                        index_head_dim=32, index_n_heads=16, qk_nope_head_dim=24, v_head_dim=32,
                        num_hidden_layers=4, indexer_types=["full", "full", "shared", "full"], n_group=1,
                        topk_group=1, rope_parameters={"rope_type": "default", "rope_theta": 1e6}),
}
CLASSES = {
    "deepseek_v32": (DeepseekV32Config, DeepseekV32ForCausalLM),
    "glm_moe_dsa": (GlmMoeDsaConfig, GlmMoeDsaForCausalLM),
}
FP8_BLOCK = 128
FP8_MAX = 448.0  # largest finite e4m3fn value
PROJECTIONS = ("q_a_proj", "q_b_proj", "q_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj",
               "gate_proj", "up_proj", "down_proj")
PROMPT_TOKENS = 12
NEW_TOKENS = 8


def classes(name):
    return CLASSES.get(name, (DeepseekV3Config, DeepseekV3ForCausalLM))


def build(name, seed):
    torch.manual_seed(seed)
    config_class, model_class = classes(name)
    cfg = config_class(**{**TINY, **VARIANTS[name]})
    cfg._attn_implementation = "eager"
    model = model_class(cfg).float().eval()
    with torch.no_grad():
        for n, b in list(model.named_buffers()) + list(model.named_parameters()):
            if n.endswith("e_score_correction_bias") or (n.endswith(".bias") and "norm" in n):
                b.normal_(0, 0.1)
            elif "norm" in n and n.endswith(".weight"):
                b.uniform_(0.5, 1.5)
    return model


def fp8_blocks(w):
    """Block-FP8 encoding of a [rows, cols] weight: e4m3 codes and the f32 scale of each 128 x 128 block."""
    rows, cols = w.shape
    br, bc = -(-rows // FP8_BLOCK), -(-cols // FP8_BLOCK)
    scales = torch.empty(br, bc, dtype=torch.float32)
    codes = torch.empty(rows, cols, dtype=torch.float8_e4m3fn)
    for i in range(br):
        for j in range(bc):
            blk = w[i * FP8_BLOCK:(i + 1) * FP8_BLOCK, j * FP8_BLOCK:(j + 1) * FP8_BLOCK]
            s = blk.abs().max().clamp(min=1e-12) / FP8_MAX
            scales[i, j] = s
            codes[i * FP8_BLOCK:(i + 1) * FP8_BLOCK, j * FP8_BLOCK:(j + 1) * FP8_BLOCK] = (blk / s).to(torch.float8_e4m3fn)
    return codes, scales


def fp8_dequantize(codes, scales):
    w = codes.float()
    for i in range(scales.shape[0]):
        for j in range(scales.shape[1]):
            w[i * FP8_BLOCK:(i + 1) * FP8_BLOCK, j * FP8_BLOCK:(j + 1) * FP8_BLOCK] *= scales[i, j]
    return w


def fp8_roundtrip(model, workdir):
    """The model whose projection weights are their block-FP8 round trip, and the FP8 encodings by checkpoint
    name. Goes through save_pretrained / from_pretrained so that the per-expert names on disk (transformers
    fuses experts in memory) are what gets quantized, as in the hub checkpoints."""
    src, deq = os.path.join(workdir, "fp32"), os.path.join(workdir, "dequantized")
    model.save_pretrained(src)
    stored, tensors = {}, {}
    with safe_open(os.path.join(src, "model.safetensors"), "pt") as f:
        for n in f.keys():
            t = f.get_tensor(n)
            parts = n.split(".")
            if len(parts) >= 2 and parts[-1] == "weight" and parts[-2] in PROJECTIONS and t.dim() == 2:
                stored[n] = fp8_blocks(t.float())
                t = fp8_dequantize(*stored[n])
            tensors[n] = t.contiguous()
    os.makedirs(deq, exist_ok=True)
    save_file(tensors, os.path.join(deq, "model.safetensors"), metadata={"format": "pt"})
    for extra in ("config.json", "generation_config.json"):
        if os.path.exists(os.path.join(src, extra)):
            with open(os.path.join(src, extra)) as fi, open(os.path.join(deq, extra), "w") as fo:
                fo.write(fi.read())
    rt = DeepseekV3ForCausalLM.from_pretrained(deq, dtype=torch.float32, attn_implementation="eager").eval()
    return rt, stored


def rewrite_as_fp8(vdir, stored):
    """Rewrites model.safetensors in the hub's FP8 layout and adds quantization_config to config.json."""
    path = os.path.join(vdir, "model.safetensors")
    tensors = {}
    with safe_open(path, "pt") as f:
        for n in f.keys():
            tensors[n] = f.get_tensor(n)
    experts = [n for n in tensors if ".mlp.experts." in n]
    for name, (codes, scales) in stored.items():
        if name not in tensors:  # HF fuses experts in memory: map back to the per-expert names on disk
            continue
        tensors[name] = codes.contiguous()
        tensors[name + "_scale_inv"] = scales.contiguous()
    missing = [n for n in experts if n.endswith(".weight") and tensors[n].dtype != torch.float8_e4m3fn]
    save_file(tensors, path, metadata={"format": "pt"})
    with open(os.path.join(vdir, "config.json")) as f:
        cfg = json.load(f)
    cfg["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                  "weight_block_size": [FP8_BLOCK, FP8_BLOCK]}
    with open(os.path.join(vdir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
    return missing


class Mtp(torch.nn.Module):
    """DeepSeek's multi-token-prediction layer (docs/models.md 2.5) made of transformers' own decoder layer and
    RMSNorm: h'_i = eh_proj(cat[enorm(embed(t_{i+1})), hnorm(h_i)]), one decoder layer at t_{i+1}'s position,
    then shared_head.norm and the main model's lm_head. Its tensors are named as in the hub checkpoints
    (model.layers.<num_hidden_layers>.*), with the copies of the embedding and head they carry."""

    def __init__(self, model):
        super().__init__()
        cfg = model.config
        d, layer = cfg.hidden_size, cfg.num_hidden_layers
        self.main = model
        self.enorm = DeepseekV3RMSNorm(d, eps=cfg.rms_norm_eps)
        self.hnorm = DeepseekV3RMSNorm(d, eps=cfg.rms_norm_eps)
        self.eh_proj = torch.nn.Linear(2 * d, d, bias=False)
        self.layer = DeepseekV3DecoderLayer(cfg, layer_idx=layer)
        self.head_norm = DeepseekV3RMSNorm(d, eps=cfg.rms_norm_eps)
        self.prefix = f"model.layers.{layer}."
        with torch.no_grad():
            for n, p in self.named_parameters():
                if n.startswith("main."):
                    continue
                if "norm" in n:
                    p.uniform_(0.5, 1.5)
                else:
                    p.normal_(0, cfg.initializer_range)
            for n, b in self.layer.named_buffers():
                if n.endswith("e_score_correction_bias"):
                    b.normal_(0, 0.1)

    def last_hidden(self, ids):
        """The last decoder layer's output (before the final norm) at every position: [T, D]."""
        seen = {}
        hook = self.main.model.layers[-1].register_forward_hook(
            lambda mod, inp, out: seen.setdefault("h", out[0] if isinstance(out, tuple) else out))
        try:
            self.main(input_ids=ids[None], use_cache=False)
        finally:
            hook.remove()
        return seen["h"][0].float()

    def forward(self, ids):
        """Draft logits for the pairs (h_i, t_{i+1}), i < T-1: [T-1, vocab]."""
        h = self.last_hidden(ids)[:-1]
        e = self.main.model.embed_tokens(ids[1:])
        x = self.eh_proj(torch.cat([self.enorm(e), self.hnorm(h)], dim=-1))[None]
        n = x.shape[1]
        positions = torch.arange(1, n + 1)[None]
        rope = self.main.model.rotary_emb(x, positions)
        mask = torch.full((n, n), float("-inf")).triu(1)[None, None]
        out = self.layer(x, attention_mask=mask, position_ids=positions, position_embeddings=rope)
        out = out[0] if isinstance(out, tuple) else out
        return self.main.lm_head(self.head_norm(out))[0].float()

    def save(self, vdir):
        """Rewrites the checkpoint saved in vdir with this layer added as the hub's checkpoints hold it. The
        decoder layer goes through save_pretrained as layer num_hidden_layers of a one-layer-longer model, so
        that its experts are written per expert by transformers' own conversion."""
        main, tmp = self.main, vdir + "_mtp_work"
        cfg = copy.deepcopy(main.config)
        cfg.num_hidden_layers += 1
        longer = type(main)(cfg).float()
        longer.model.embed_tokens, longer.model.norm, longer.lm_head = (main.model.embed_tokens, main.model.norm,
                                                                        main.lm_head)
        longer.model.layers = torch.nn.ModuleList(list(main.model.layers) + [self.layer])
        longer.save_pretrained(tmp)
        with safe_open(os.path.join(tmp, "model.safetensors"), "pt") as f:
            tensors = {n: f.get_tensor(n) for n in f.keys()}
        shutil.rmtree(tmp)
        p = self.prefix
        for n, t in {"enorm.weight": self.enorm.weight, "hnorm.weight": self.hnorm.weight,
                     "eh_proj.weight": self.eh_proj.weight, "shared_head.norm.weight": self.head_norm.weight,
                     "shared_head.head.weight": main.lm_head.weight,
                     "embed_tokens.weight": main.model.embed_tokens.weight}.items():
            tensors[p + n] = t.detach().float().contiguous().clone()
        save_file(tensors, os.path.join(vdir, "model.safetensors"), metadata={"format": "pt"})
        with open(os.path.join(vdir, "config.json")) as f:
            config = json.load(f)
        config["num_nextn_predict_layers"] = 1
        with open(os.path.join(vdir, "config.json"), "w") as f:
            json.dump(config, f, indent=2, sort_keys=True)
        print("  mtp tensors:", sorted(n for n in tensors if n.startswith(p) and ".experts." not in n))


class TopkTies:
    """Records, for every torch topk the model calls, the gap between the k-th and the (k+1)-th largest of the
    finite (unmasked) values: 0 means a tie that torch breaks in an order of its own."""

    def __enter__(self):
        self.min_gap = float("inf")
        self.originals = (torch.Tensor.topk, torch.topk)
        ties = self

        def record(t, k):
            v = t.detach().float().reshape(-1, t.shape[-1])
            visible = v > torch.finfo(torch.float32).min / 2
            for row, ok in zip(v, visible):
                r = row[ok].sort(descending=True).values
                if r.numel() > k:
                    ties.min_gap = min(ties.min_gap, float(r[k - 1] - r[k]))

        def method(t, k, *args, **kwargs):
            record(t, k)
            return ties.originals[0](t, k, *args, **kwargs)

        def function(t, k, *args, **kwargs):
            record(t, k)
            return ties.originals[1](t, k, *args, **kwargs)

        torch.Tensor.topk, torch.topk = method, function
        return self

    def __exit__(self, *exc):
        torch.Tensor.topk, torch.topk = self.originals


def greedy(model, ids, n):
    seq = ids.clone()
    out = []
    with torch.no_grad():
        for _ in range(n):
            nxt = int(model(input_ids=seq[None], use_cache=False).logits[0, -1].argmax())
            out.append(nxt)
            seq = torch.cat([seq, torch.tensor([nxt])])
    return torch.tensor(out, dtype=torch.int64)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("variants", nargs="*", help="only these variants (default: all)")
    args = ap.parse_args()
    failures = 0
    only = set(args.variants)
    for i, name in enumerate(VARIANTS):
        if only and name not in only:
            continue
        print(f"== {name}")
        model = build(name, 1234 + i)
        stored = None
        if name.endswith("_fp8"):
            model, stored = fp8_roundtrip(model, os.path.join(args.outdir, "_work_" + name))
        gen = torch.Generator().manual_seed(99 + i)
        ids = torch.randint(0, TINY["vocab_size"], (PROMPT_TOKENS,), generator=gen)
        with torch.no_grad(), TopkTies() as ties:
            out = model(input_ids=ids[None], output_hidden_states=True, use_cache=False)
        logits = out.logits[0].float()
        print(f"  smallest gap at a top-k boundary (routing, DSA): {ties.min_gap:.2e}")
        failures += ties.min_gap <= 0
        hidden = [h[0].float() for h in out.hidden_states]
        top2 = torch.topk(logits, 2, dim=-1)
        print(f"  max|logit| {logits.abs().max():.4f}; min top1-top2 margin "
              f"{(top2.values[:, 0] - top2.values[:, 1]).min():.2e}")
        g = greedy(model, ids, NEW_TOKENS)
        print(f"  greedy {g.tolist()}")
        # Incremental decode with HF's own cache agrees with the full forward (checks the cache path).
        with torch.no_grad():
            pre = model(input_ids=ids[None, :-1], use_cache=True)
            step = model(input_ids=ids[None, -1:], past_key_values=pre.past_key_values, use_cache=True)
        d = (step.logits[0, -1] - logits[-1]).abs().max().item()
        print(f"  prefix + 1 token vs full forward: max diff {d:.2e}")
        failures += d > 1e-4
        vdir = os.path.join(args.outdir, name)
        os.makedirs(vdir, exist_ok=True)
        model.save_pretrained(vdir)
        if stored is not None:
            missing = rewrite_as_fp8(vdir, stored)
            print(f"  fp8: {len(stored)} projection weights stored as F8_E4M3 + _scale_inv; expert weights "
                  f"not fp8: {missing}")
            failures += bool(missing)
        tensors = {"input_ids": ids.contiguous(), "logits": logits.contiguous(), "greedy": g}
        if name.endswith("_mtp"):
            mtp = Mtp(model).eval()
            with torch.no_grad(), TopkTies() as ties:
                tensors["mtp_logits"] = mtp(ids).contiguous()
            print(f"  mtp: smallest top-k gap {ties.min_gap:.2e}; draft argmax "
                  f"{tensors['mtp_logits'].argmax(-1).tolist()} vs next tokens {ids[2:].tolist()}")
            failures += ties.min_gap <= 0
            mtp.save(vdir)
        for j, h in enumerate(hidden):
            tensors[f"hidden_{j}"] = h.contiguous()
        save_file(tensors, os.path.join(vdir, "oracle.safetensors"),
                  metadata={"variant": name, "transformers": transformers.__version__, "torch": torch.__version__})
        if stored is None:
            reloaded = classes(name)[1].from_pretrained(vdir, dtype=torch.float32,
                                                        attn_implementation="eager").eval()
            with torch.no_grad():
                r = reloaded(input_ids=ids[None], use_cache=False).logits[0]
            d = (r - logits).abs().max().item()
            print(f"  reload max diff {d:.2e}; files {sorted(os.listdir(vdir))}")
            failures += d > 1e-6
        else:
            # What the checkpoint holds decodes to the weights the oracle ran with.
            with safe_open(os.path.join(vdir, "model.safetensors"), "pt") as f:
                worst = max((fp8_dequantize(f.get_tensor(n), f.get_tensor(n + "_scale_inv")) -
                             fp8_dequantize(*stored[n])).abs().max().item() for n in stored)
            print(f"  fp8 checkpoint decodes to the oracle's weights: max diff {worst:.1e}")
            failures += worst > 0
        with safe_open(os.path.join(vdir, "model.safetensors"), "pt") as f:
            names = sorted(f.keys())
        print(f"  {len(names)} tensors:", [n for n in names if ("layers.1." in n or "layers.2." in n or
                                                              "layers" not in n) and ".experts." not in n])
        with open(os.path.join(vdir, "config.json")) as f:
            print("  config:", json.dumps(json.load(f), sort_keys=True)[:2000])
    for n in os.listdir(args.outdir):
        if n.startswith("_work_"):
            shutil.rmtree(os.path.join(args.outdir, n))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
