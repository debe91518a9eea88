#!/usr/bin/env python3
"""Generate tiny random-weight Kimi Linear and Kimi K3 checkpoints plus reference outputs (oracles).

kimi_linear: transformers' ``KimiLinearForCausalLM`` (docs/models.md 5 and 11) on CPU in fp32 with eager
attention; what ``save_pretrained`` writes, plus oracle.safetensors.

kimi_k3: there is no transformers class (docs/models.md 7.2). The model is assembled from transformers'
own modules where they exist and written from the equations of docs/models.md 7.1 where they do not:
  KDA layers      ``Glm5NextTextLinearAttention`` (the lower-bounded "safe" gate, linear_lower_bound -5),
                  its low-rank output gate replaced by K3's full-rank one (g_a_proj = Identity,
                  g_b_proj = W_g);
  MLA layers      ``KimiLinearAttention`` (NoPE, q LoRA) with K3's output gate sigmoid(W_g x) applied
                  before o_proj;
  LatentMoE, SiTU, AttnRes (block attention residuals), the dense first layer: docs/models.md 7.1, below.
The checkpoint is written in the real K3 layout: config.json with model_type kimi_k3 and the text model in
text_config, every text tensor under ``language_model.``, conv weights / A_log (zero-padded past the heads) /
dt_bias / o_norm / the router bias in F32, other dense weights BF16, routed experts in compressed-tensors
MXFP4 (``weight_packed`` U8 [out, in/2], ``weight_scale`` U8 e8m0 [out, in/32], docs/models.md 9.3). The
oracle runs on exactly those values: BF16 weights rounded, experts decoded from their codes.

Both prompts are longer than one KDA prefill chunk (64) and the K3 model has several AttnRes blocks (block
size 2 over 6 layers). oracle.safetensors holds input_ids [T], logits [T, vocab] and greedy [N] (repeated
full forwards), as tools/make_deepseek_oracles.py documents. On the GPU machine:

  python3 tools/make_kimi_oracles.py /tmp/oracles && tar czf $OUT/oracles.tgz -C /tmp/oracles .
"""

import argparse
import json
import math
import os
import sys

import torch
import torch.nn.functional as F
import transformers
from safetensors.torch import save_file
from torch import nn
from transformers import KimiLinearConfig, KimiLinearForCausalLM
from transformers.models.glm5_next.configuration_glm5_next import Glm5NextTextConfig
from transformers.models.glm5_next.modeling_glm5_next import Glm5NextTextLinearAttention
from transformers.models.kimi_linear.modeling_kimi_linear import KimiLinearAttention

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_deepseek_oracles import TopkTies  # noqa: E402  (one tie check for every oracle)

PROMPT_TOKENS = 80  # longer than one chunk (64) of transformers' chunked KDA prefill
NEW_TOKENS = 8
VOCAB = 256

LINEAR = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, moe_intermediate_size=32,
              num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=32,
              q_lora_rank=None, qk_rope_head_dim=16, qk_nope_head_dim=32, v_head_dim=32, num_experts=8,
              num_experts_per_token=2, num_shared_experts=1, first_k_dense_replace=1, initializer_range=0.1,
              linear_attn_config={"kda_layers": [1, 2, 3], "full_attn_layers": [4], "head_dim": 16,
                                  "num_heads": 4, "short_conv_kernel_size": 4},
              pad_token_id=0, bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)

# Kimi K3 at a tiny size: every dimension of docs/models.md 7 scaled down, the structure kept (q LoRA, NoPE
# MLA with output gate, full-rank KDA gate, latent experts at half the width, two shared experts, a dense
# layer 0).
K3 = dict(hidden_size=128, num_hidden_layers=6, vocab_size=VOCAB, num_attention_heads=4, q_lora_rank=32,
          kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16, mla_use_nope=True,
          mla_use_output_gate=True, num_experts=8, num_experts_per_token=2, moe_intermediate_size=64,
          routed_expert_hidden_size=64, latent_moe_use_norm=True, num_shared_experts=2,
          routed_scaling_factor=1.0, moe_renormalize=True, moe_router_activation_func="sigmoid",
          num_expert_group=1, topk_method="noaux_tc", first_k_dense_replace=1, hidden_act="situ",
          activation_situ_beta=4.0, activation_situ_linear_beta=25.0, attn_res_block_size=2,
          intermediate_size=192, rms_norm_eps=1e-5, max_position_embeddings=4096, bos_token_id=1,
          eos_token_id=2, tie_word_embeddings=False, model_type="kimi_k3_text",
          quantization_config={"quant_method": "compressed-tensors", "format": "mxfp4-pack-quantized"})
K3_KDA = dict(num_heads=4, head_dim=32, short_conv_kernel_size=4, gate_lower_bound=-5.0, use_full_rank_gate=True)
A_LOG_PAD = 4  # K3 stores A_log zero-padded past the heads ([128] for 96); so does the fixture
MLA_NORM_EPS = 1e-6  # q_a / kv_a layernorms (transformers' class default, as in the official code)
ROUTER_EPS = 1e-20
E2M1 = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])
MX_BLOCK = 32
E8M0_BIAS = 127


def randomize_norms_and_biases(module):
    with torch.no_grad():
        for n, b in list(module.named_buffers()) + list(module.named_parameters()):
            if n.endswith("e_score_correction_bias"):
                b.normal_(0, 0.1)
            elif "norm" in n and n.endswith(".weight"):
                b.uniform_(0.5, 1.5)


def causal_mask(t):
    return torch.full((t, t), float("-inf")).triu(1)[None, None]


def greedy(forward, ids, n):
    seq, out = ids.clone(), []
    with torch.no_grad():
        for _ in range(n):
            nxt = int(forward(seq)[-1].argmax())
            out.append(nxt)
            seq = torch.cat([seq, torch.tensor([nxt])])
    return torch.tensor(out, dtype=torch.int64)


def report(name, logits, ties):
    top2 = torch.topk(logits, 2, dim=-1)
    print(f"  smallest gap at a top-k boundary (routing): {ties.min_gap:.2e}")
    print(f"  max|logit| {logits.abs().max():.4f}; min top1-top2 margin "
          f"{(top2.values[:, 0] - top2.values[:, 1]).min():.2e}")
    return ties.min_gap <= 0


def save_oracle(vdir, name, ids, logits, g, extra=None):
    tensors = {"input_ids": ids.contiguous(), "logits": logits.contiguous(), "greedy": g, **(extra or {})}
    save_file(tensors, os.path.join(vdir, "oracle.safetensors"),
              metadata={"variant": name, "transformers": transformers.__version__, "torch": torch.__version__})


def make_linear(outdir, seed):
    torch.manual_seed(seed)
    cfg = KimiLinearConfig(**LINEAR)
    cfg._attn_implementation = "eager"
    model = KimiLinearForCausalLM(cfg).float().eval()
    randomize_norms_and_biases(model)
    ids = torch.randint(0, VOCAB, (PROMPT_TOKENS,), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad(), TopkTies() as ties:
        out = model(input_ids=ids[None], output_hidden_states=True, use_cache=False)
    logits = out.logits[0].float()
    failures = report("kimi_linear", logits, ties)
    g = greedy(lambda s: model(input_ids=s[None], use_cache=False).logits[0], ids, NEW_TOKENS)
    print(f"  greedy {g.tolist()}")
    with torch.no_grad():  # transformers' recurrent decode agrees with its chunked prefill
        pre = model(input_ids=ids[None, :-1], use_cache=True)
        step = model(input_ids=ids[None, -1:], past_key_values=pre.past_key_values, use_cache=True)
    d = (step.logits[0, -1] - logits[-1]).abs().max().item()
    print(f"  prefix + 1 token (recurrent KDA) vs full forward: max diff {d:.2e}")
    failures += d > 1e-4
    vdir = os.path.join(outdir, "kimi_linear")
    os.makedirs(vdir, exist_ok=True)
    model.save_pretrained(vdir)
    hidden = {f"hidden_{j}": h[0].float().contiguous() for j, h in enumerate(out.hidden_states)}
    save_oracle(vdir, "kimi_linear", ids, logits, g, hidden)
    return failures


def bf16(t):
    return t.to(torch.bfloat16).float()


def mxfp4_random(rows, cols, gen):
    """Random MXFP4 weight [rows, cols]: the packed codes, the e8m0 scales and the decoded values."""
    codes = torch.randint(0, 16, (rows, cols), generator=gen, dtype=torch.uint8)
    # Scales 2^-5 .. 2^-3 give weights of about the size of the dense ones (|e2m1| averages ~2.3).
    scales = torch.randint(E8M0_BIAS - 5, E8M0_BIAS - 2, (rows, cols // MX_BLOCK), generator=gen, dtype=torch.uint8)
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).contiguous()
    values = E2M1[codes.long()] * torch.pow(2.0, scales.float() - E8M0_BIAS).repeat_interleave(MX_BLOCK, dim=1)
    return packed, scales.contiguous(), values


def situ(g, u, c):
    b1, b2 = c["activation_situ_beta"], c["activation_situ_linear_beta"]
    return b1 * torch.tanh(g / b1) * torch.sigmoid(g) * (b2 * torch.tanh(u / b2))


def rms_norm(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


class GatedOutput(nn.Module):
    """K3's MLA output gate: o_proj(attn * sigmoid(W_g x)), x set by the layer before each call."""

    def __init__(self, o_proj, g_proj):
        super().__init__()
        self.o_proj, self.g_proj, self.x = o_proj, g_proj, None

    def forward(self, a):
        return self.o_proj(a * torch.sigmoid(self.g_proj(self.x)))


class K3Model(nn.Module):
    """Kimi K3's text model (docs/models.md 7.1) on transformers' KDA and MLA modules."""

    def __init__(self, c, gen):
        super().__init__()
        self.c = c
        d, lora = c["hidden_size"], c["routed_expert_hidden_size"]
        lin = nn.Linear
        self.embed = nn.Embedding(c["vocab_size"], d)
        self.lm_head = lin(d, c["vocab_size"], bias=False)
        self.norm = nn.Parameter(torch.ones(d))
        self.out_res_norm, self.out_res_proj = nn.Parameter(torch.ones(d)), lin(d, 1, bias=False)
        kda_cfg = Glm5NextTextConfig()
        for k, v in dict(hidden_size=d, linear_num_heads=K3_KDA["num_heads"], linear_head_dim=K3_KDA["head_dim"],
                         linear_conv_kernel_dim=K3_KDA["short_conv_kernel_size"], hidden_act="silu",
                         rms_norm_eps=c["rms_norm_eps"], linear_lower_bound=K3_KDA["gate_lower_bound"],
                         layer_types=["linear_attention"] * c["num_hidden_layers"]).items():
            setattr(kda_cfg, k, v)
        mla_cfg = KimiLinearConfig(vocab_size=VOCAB, hidden_size=d, num_attention_heads=c["num_attention_heads"],
                                   num_key_value_heads=c["num_attention_heads"], q_lora_rank=c["q_lora_rank"],
                                   kv_lora_rank=c["kv_lora_rank"], qk_nope_head_dim=c["qk_nope_head_dim"],
                                   qk_rope_head_dim=c["qk_rope_head_dim"], v_head_dim=c["v_head_dim"],
                                   pad_token_id=0, bos_token_id=1, eos_token_id=2)
        mla_cfg._attn_implementation = "eager"
        p_kda = K3_KDA["num_heads"] * K3_KDA["head_dim"]
        self.layers = nn.ModuleList()
        self.experts = []  # per MoE layer: {expert: {w1|w2|w3: (packed, scale)}}
        for l in range(c["num_hidden_layers"]):
            L = nn.Module()
            L.kind = "mla" if l in k3_mla_layers(c) else "kda"
            if L.kind == "kda":
                L.attn = Glm5NextTextLinearAttention(kda_cfg, l)
                L.attn.g_a_proj = nn.Identity()
                L.attn.g_b_proj = lin(d, p_kda, bias=False)  # the full-rank output gate W_g
                with torch.no_grad():
                    L.attn.forget_gate.A_log.copy_(torch.empty(K3_KDA["num_heads"]).uniform_(1, 16, generator=gen).log())
                    L.attn.forget_gate.dt_bias.normal_(0, 1, generator=gen)
            else:
                L.attn = KimiLinearAttention(mla_cfg, l)
                L.attn.o_proj = GatedOutput(L.attn.o_proj,
                                            lin(d, c["num_attention_heads"] * c["v_head_dim"], bias=False))
            for name in ("input_layernorm", "post_attention_layernorm", "attn_res_norm", "mlp_res_norm"):
                setattr(L, name, nn.Parameter(torch.ones(d)))
            L.attn_res_proj, L.mlp_res_proj = lin(d, 1, bias=False), lin(d, 1, bias=False)
            if l < c["first_k_dense_replace"]:
                w = c["intermediate_size"]
                L.gate_proj, L.up_proj, L.down_proj = lin(d, w, bias=False), lin(d, w, bias=False), lin(w, d, bias=False)
                self.experts.append(None)
            else:
                e, w, ws = c["num_experts"], c["moe_intermediate_size"], c["moe_intermediate_size"] * c["num_shared_experts"]
                L.router = lin(d, e, bias=False)
                L.router_bias = nn.Parameter(torch.zeros(e))
                L.latent_down, L.latent_up = lin(d, lora, bias=False), lin(lora, d, bias=False)
                L.expert_norm = nn.Parameter(torch.ones(lora))
                L.shared_gate, L.shared_up, L.shared_down = lin(d, ws, bias=False), lin(d, ws, bias=False), lin(ws, d, bias=False)
                self.experts.append([{"w1": mxfp4_random(w, lora, gen), "w3": mxfp4_random(w, lora, gen),
                                      "w2": mxfp4_random(lora, w, gen)} for _ in range(e)])
            self.layers.append(L)
        with torch.no_grad():
            for n, p in self.named_parameters():
                if n.endswith("norm") or n.endswith("norm.weight") or n.endswith("_norm"):
                    p.uniform_(0.5, 1.5, generator=gen)
                elif n.endswith("router_bias"):
                    p.normal_(0, 0.1, generator=gen)
                elif p.dim() == 2 and "conv" not in n:
                    p.normal_(0, 1 / math.sqrt(p.shape[1]), generator=gen)
            self.embed.weight.normal_(0, 1, generator=gen)
            for n, p in self.named_parameters():  # what the checkpoint stores in BF16 is what runs
                if not k3_is_f32(n):
                    p.copy_(bf16(p))

    def mix(self, entries, norm_w, proj):
        v = torch.stack(entries)                                                   # [m, T, D]
        scores = proj(rms_norm(v, norm_w, self.c["rms_norm_eps"])).squeeze(-1)     # [m, T]
        return (torch.softmax(scores, dim=0).unsqueeze(-1) * v).sum(0)

    def attn(self, L, x):
        if L.kind == "kda":
            out = L.attn(x[None])
            return (out[0] if isinstance(out, tuple) else out)[0]
        L.attn.o_proj.x = x[None]
        return L.attn(x[None], causal_mask(x.shape[0]))[0][0]

    def mlp(self, l, L, x):
        c = self.c
        if self.experts[l] is None:
            return L.down_proj(situ(L.gate_proj(x), L.up_proj(x), c))
        s = torch.sigmoid(F.linear(x.float(), L.router.weight.float()))            # [T, E]
        idx = (s + L.router_bias).topk(c["num_experts_per_token"], dim=-1).indices
        w = s.gather(1, idx)
        w = w / (w.sum(-1, keepdim=True) + ROUTER_EPS) * c["routed_scaling_factor"]
        z = L.latent_down(x)                                                       # [T, latent]
        u = torch.zeros_like(z)
        for e in sorted(set(idx.flatten().tolist())):                              # ascending expert id
            tok, slot = (idx == e).nonzero(as_tuple=True)
            ex = self.experts[l][e]
            h = situ(z[tok] @ ex["w1"][2].T, z[tok] @ ex["w3"][2].T, c) @ ex["w2"][2].T
            u.index_add_(0, tok, h * w[tok, slot, None])
        u = rms_norm(u, L.expert_norm, c["rms_norm_eps"])
        return L.latent_up(u) + L.shared_down(situ(L.shared_gate(x), L.shared_up(x), c))

    def forward(self, ids):
        c, eps = self.c, self.c["rms_norm_eps"]
        p, blocks = self.embed(ids), []
        for l, L in enumerate(self.layers):
            h = self.mix(blocks + [p], L.attn_res_norm, L.attn_res_proj) if blocks else p
            if l % c["attn_res_block_size"] == 0:
                blocks.append(p)
                p = None
            a = self.attn(L, rms_norm(h, L.input_layernorm, eps))
            p = a if p is None else p + a
            h2 = self.mix(blocks + [p], L.mlp_res_norm, L.mlp_res_proj)
            p = p + self.mlp(l, L, rms_norm(h2, L.post_attention_layernorm, eps))
        x = self.mix(blocks + [p], self.out_res_norm, self.out_res_proj)
        return self.lm_head(rms_norm(x, self.norm, eps))


def k3_mla_layers(c):
    n = c["num_hidden_layers"]
    return [l for l in range(n) if l % 4 == 3 or l == n - 1]


def k3_is_f32(name):
    return any(k in name for k in ("conv1d", "A_log", "dt_bias", "o_norm", "router_bias"))


def k3_tensors(m):
    """The checkpoint of K3Model m under the real K3 names, dtypes and layouts (docs/models.md 7)."""
    c, pre, t = m.c, "language_model.model.", {}

    def put(name, value, f32=False):
        t[name] = value.detach().float().contiguous() if f32 else value.detach().to(torch.bfloat16).contiguous()

    put("language_model.lm_head.weight", m.lm_head.weight)
    put(pre + "embed_tokens.weight", m.embed.weight)
    put(pre + "norm.weight", m.norm)
    put(pre + "output_attn_res_norm.weight", m.out_res_norm)
    put(pre + "output_attn_res_proj.weight", m.out_res_proj.weight)
    p = K3_KDA["num_heads"] * K3_KDA["head_dim"]
    for l, L in enumerate(m.layers):
        lp = f"{pre}layers.{l}."
        put(lp + "input_layernorm.weight", L.input_layernorm)
        put(lp + "post_attention_layernorm.weight", L.post_attention_layernorm)
        put(lp + "self_attention_res_norm.weight", L.attn_res_norm)
        put(lp + "self_attention_res_proj.weight", L.attn_res_proj.weight)
        put(lp + "mlp_res_norm.weight", L.mlp_res_norm)
        put(lp + "mlp_res_proj.weight", L.mlp_res_proj.weight)
        a, ap = L.attn, lp + "self_attn."
        if L.kind == "kda":
            for n in ("q_proj", "k_proj", "v_proj", "b_proj", "o_proj"):
                put(ap + n + ".weight", getattr(a, n).weight)
            conv = a.conv1d.weight                                                 # [3P, 1, K]: q, k, v
            for i, n in enumerate(("q_conv1d", "k_conv1d", "v_conv1d")):
                put(ap + n + ".weight", conv[i * p:(i + 1) * p], f32=True)
            put(ap + "f_a_proj.weight", a.forget_gate.f_a_proj.weight)
            put(ap + "f_b_proj.weight", a.forget_gate.f_b_proj.weight)
            put(ap + "dt_bias", a.forget_gate.dt_bias, f32=True)
            put(ap + "A_log", F.pad(a.forget_gate.A_log, (0, A_LOG_PAD)), f32=True)
            put(ap + "g_proj.weight", a.g_b_proj.weight)
            put(ap + "o_norm.weight", a.o_norm.weight, f32=True)
        else:
            for n in ("q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj"):
                put(ap + n + ".weight", getattr(a, n).weight)
            put(ap + "q_a_layernorm.weight", a.q_a_layernorm.weight)
            put(ap + "kv_a_layernorm.weight", a.kv_a_layernorm.weight)
            put(ap + "o_proj.weight", a.o_proj.o_proj.weight)
            put(ap + "g_proj.weight", a.o_proj.g_proj.weight)
        if m.experts[l] is None:
            for n in ("gate_proj", "up_proj", "down_proj"):
                put(f"{lp}mlp.{n}.weight", getattr(L, n).weight)
            continue
        mp = lp + "block_sparse_moe."
        put(mp + "gate.weight", L.router.weight)
        put(mp + "gate.e_score_correction_bias", L.router_bias, f32=True)
        put(mp + "routed_expert_down_proj.weight", L.latent_down.weight)
        put(mp + "routed_expert_up_proj.weight", L.latent_up.weight)
        put(mp + "routed_expert_norm.weight", L.expert_norm)
        for n, w in (("gate_proj", L.shared_gate), ("up_proj", L.shared_up), ("down_proj", L.shared_down)):
            put(f"{mp}shared_experts.{n}.weight", w.weight)
        for e, ex in enumerate(m.experts[l]):
            for n, (packed, scale, _) in ex.items():
                t[f"{mp}experts.{e}.{n}.weight_packed"] = packed
                t[f"{mp}experts.{e}.{n}.weight_scale"] = scale
    return t


def k3_config(c):
    n = c["num_hidden_layers"]
    mla = k3_mla_layers(c)
    text = dict(c, linear_attn_config=dict(K3_KDA, kda_layers=[l + 1 for l in range(n) if l not in mla],
                                           full_attn_layers=[l + 1 for l in mla]))
    return {"model_type": "kimi_k3", "architectures": ["KimiK3ForConditionalGeneration"], "text_config": text,
            "vision_config": {"model_type": "kimi_k3_vision"}}


def make_k3(outdir, seed):
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    m = K3Model(K3, gen).float().eval()
    ids = torch.randint(0, VOCAB, (PROMPT_TOKENS,), generator=gen)
    with torch.no_grad(), TopkTies() as ties:
        logits = m(ids).float()
    failures = report("kimi_k3", logits, ties)
    g = greedy(m, ids, NEW_TOKENS)
    print(f"  greedy {g.tolist()}")
    with torch.no_grad():  # causality: a prefix's logits do not depend on later tokens
        d = (m(ids[:-5]) - logits[:-5]).abs().max().item()
    print(f"  prefix logits vs full forward: max diff {d:.2e}")
    failures += d > 1e-4
    vdir = os.path.join(outdir, "kimi_k3")
    os.makedirs(vdir, exist_ok=True)
    save_file(k3_tensors(m), os.path.join(vdir, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(vdir, "config.json"), "w") as f:
        json.dump(k3_config(K3), f, indent=2, sort_keys=True)
    save_oracle(vdir, "kimi_k3", ids, logits, g)
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("variants", nargs="*", help="kimi_linear, kimi_k3 (default: both)")
    args = ap.parse_args()
    makers = {"kimi_linear": make_linear, "kimi_k3": make_k3}
    failures = 0
    for i, (name, make) in enumerate(makers.items()):
        if args.variants and name not in args.variants:
            continue
        print(f"== {name}")
        failures += make(args.outdir, 4321 + i)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
