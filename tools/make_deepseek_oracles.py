#!/usr/bin/env python3
"""Generate tiny random-weight DeepSeek-V3 checkpoints plus reference outputs (oracles).

The reference is transformers' ``DeepseekV3ForCausalLM`` on CPU in fp32 with eager attention (spec
section 2 and recipe 11). Each variant goes to ``OUTDIR/<variant>/``: what ``save_pretrained`` writes
(config.json, generation_config.json, model.safetensors with per-expert tensor names) and
``oracle.safetensors`` in the layout of tools/make_olmoe_oracles.py:

  input_ids  I64 [T]          random prompt ids
  logits     F32 [T, vocab]   full-forward logits at every prompt position
  greedy     I64 [N]          N greedy tokens by repeated full forwards (no eos)
  hidden_i   F32 [T, D]       i < L: input of decoder layer i; i = L: final RMSNorm output

Variants (vocab 256, hidden 64, 4 heads, kv_lora 32, rope 16, nope 32, v 24, 16 experts in 4 groups keep 2,
top-4, 1 shared expert, first layer dense, yarn factor 40 on an original context of 128):
  deepseek_v3        q_lora_rank 48 (q_a_proj / q_a_layernorm / q_b_proj), interleaved rope
  deepseek_v3_noq    q_lora_rank None (q_proj), rope_interleave False (half-split), norm_topk_prob False

Every zero-initialised buffer (the router's e_score_correction_bias) and every norm weight is randomized, so
that a missing one shows in the logits. Needs torch, transformers 5.x, safetensors. On the GPU machine:

  python3 tools/make_deepseek_oracles.py /tmp/oracles && tar czf $OUT/oracles.tgz -C /tmp/oracles .
"""

import argparse
import json
import os
import sys

import torch
import transformers
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import DeepseekV3Config, DeepseekV3ForCausalLM

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
}
PROMPT_TOKENS = 12
NEW_TOKENS = 8


def build(name, seed):
    torch.manual_seed(seed)
    cfg = DeepseekV3Config(**TINY, **VARIANTS[name])
    cfg._attn_implementation = "eager"
    model = DeepseekV3ForCausalLM(cfg).float().eval()
    with torch.no_grad():
        for n, b in model.named_buffers():
            if n.endswith("e_score_correction_bias"):
                b.normal_(0, 0.1)
        for n, p in model.named_parameters():
            if "norm" in n and n.endswith(".weight"):
                p.uniform_(0.5, 1.5)
    return model


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
    args = ap.parse_args()
    failures = 0
    for i, name in enumerate(VARIANTS):
        print(f"== {name}")
        model = build(name, 1234 + i)
        gen = torch.Generator().manual_seed(99 + i)
        ids = torch.randint(0, TINY["vocab_size"], (PROMPT_TOKENS,), generator=gen)
        with torch.no_grad():
            out = model(input_ids=ids[None], output_hidden_states=True, use_cache=False)
        logits = out.logits[0].float()
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
        tensors = {"input_ids": ids.contiguous(), "logits": logits.contiguous(), "greedy": g}
        for j, h in enumerate(hidden):
            tensors[f"hidden_{j}"] = h.contiguous()
        save_file(tensors, os.path.join(vdir, "oracle.safetensors"),
                  metadata={"variant": name, "transformers": transformers.__version__, "torch": torch.__version__})
        reloaded = DeepseekV3ForCausalLM.from_pretrained(vdir, dtype=torch.float32,
                                                         attn_implementation="eager").eval()
        with torch.no_grad():
            r = reloaded(input_ids=ids[None], use_cache=False).logits[0]
        d = (r - logits).abs().max().item()
        print(f"  reload max diff {d:.2e}; files {sorted(os.listdir(vdir))}")
        failures += d > 1e-6
        with safe_open(os.path.join(vdir, "model.safetensors"), "pt") as f:
            names = sorted(f.keys())
        print(f"  {len(names)} tensors:", [n for n in names if "layers.1." in n or "layers" not in n])
        with open(os.path.join(vdir, "config.json")) as f:
            print("  config:", json.dumps(json.load(f), sort_keys=True)[:2000])
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
