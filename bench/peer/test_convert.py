#!/usr/bin/env python3
"""Checks convert_olmoe.py on a tiny `coli synth --arch olmoe` checkpoint (CTest: coli_peer_convert).

Usage: python3 bench/peer/test_convert.py path/to/coli

What it checks, against expectations written here from llama.cpp's olmoe loader (tensor names and shapes
{ne0, ne1, ...} it asks for), not from the converter's own output:
  - the GGUF has exactly the tensors llama.cpp's olmoe expects, with those shapes; matrices keep the
    checkpoint's bf16, norms and routers are f32;
  - the bytes: every stacked expert tensor is the concatenation of the checkpoint's experts, in id order,
    and an f32 norm holds exactly the bf16 values of the checkpoint (read here independently);
  - the metadata llama.cpp reads for olmoe, and a vocabulary of vocab_size unique tokens with the byte
    tokens and the EOS id of config.json;
  - a checkpoint that sets norm_topk_prob (which llama.cpp's olmoe ignores) is refused.
"""

import json
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import convert_olmoe  # noqa: E402
import gguf  # noqa: E402

LAYERS, EXPERTS, SCALE = 2, 4, 16
failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)


def safetensors_tensors(model_dir):
    """name -> (dtype, shape, raw bytes), read with a parser of its own."""
    out = {}
    for path in sorted(model_dir.glob("*.safetensors")):
        raw = path.read_bytes()
        (n,) = struct.unpack("<Q", raw[:8])
        header = json.loads(raw[8:8 + n])
        for name, info in header.items():
            if name != "__metadata__":
                b, e = info["data_offsets"]
                out[name] = (info["dtype"], info["shape"], raw[8 + n + b:8 + n + e])
    return out


def expected_tensors(c):
    """GGUF name -> (dims innermost first, ggml type), as llama.cpp's olmoe loader asks for them."""
    d, ff, v, e = c["hidden_size"], c["intermediate_size"], c["vocab_size"], c["num_experts"]
    kv = c["num_key_value_heads"] * (d // c["num_attention_heads"])
    bf16, f32 = gguf.GGML_BF16, gguf.GGML_F32
    t = {"token_embd.weight": ([d, v], bf16), "output_norm.weight": ([d], f32), "output.weight": ([d, v], bf16)}
    for l in range(c["num_hidden_layers"]):
        t.update({
            f"blk.{l}.attn_norm.weight": ([d], f32), f"blk.{l}.attn_q.weight": ([d, d], bf16),
            f"blk.{l}.attn_k.weight": ([d, kv], bf16), f"blk.{l}.attn_v.weight": ([d, kv], bf16),
            f"blk.{l}.attn_output.weight": ([d, d], bf16), f"blk.{l}.attn_q_norm.weight": ([d], f32),
            f"blk.{l}.attn_k_norm.weight": ([kv], f32), f"blk.{l}.ffn_norm.weight": ([d], f32),
            f"blk.{l}.ffn_gate_inp.weight": ([d, e], f32),
            f"blk.{l}.ffn_gate_exps.weight": ([d, ff, e], bf16), f"blk.{l}.ffn_up_exps.weight": ([d, ff, e], bf16),
            f"blk.{l}.ffn_down_exps.weight": ([ff, d, e], bf16)})
    return t


def main(coli):
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "olmoe"
        subprocess.run([coli, "synth", "--arch", "olmoe", "--scale", str(SCALE), "--layers", str(LAYERS),
                        "--experts", str(EXPERTS), "-o", str(model)], check=True, stdout=subprocess.DEVNULL)
        c = json.loads((model / "config.json").read_text())
        out = Path(tmp) / "olmoe.gguf"
        convert_olmoe.convert(model, out)
        meta, tensors, data_start = gguf.read_header(out)
        raw = out.read_bytes()
        src = safetensors_tensors(model)

        # Names, shapes, types.
        want = expected_tensors(c)
        got = {name: (dims, t) for name, dims, t, _ in tensors}
        expect(set(got) == set(want),
               f"tensor names differ: extra {set(got) - set(want)}, missing {set(want) - set(got)}")
        for name in set(got) & set(want):
            expect(got[name] == want[name], f"{name}: {got[name]}, llama.cpp wants {want[name]}")

        # Bytes.
        def data(name):
            for n, dims, t, off in tensors:
                if n == name:
                    size = gguf.GGML_TYPE_BYTES[t]
                    for x in dims:
                        size *= x
                    expect(off % gguf.ALIGNMENT == 0, f"{name}: offset {off} is not aligned")
                    return raw[data_start + off:data_start + off + size]
            return b""

        for l in range(LAYERS):
            for proj, name in (("gate_proj", "ffn_gate_exps"), ("up_proj", "ffn_up_exps"),
                               ("down_proj", "ffn_down_exps")):
                joined = b"".join(src[f"model.layers.{l}.mlp.experts.{e}.{proj}.weight"][2]
                                  for e in range(EXPERTS))
                expect(data(f"blk.{l}.{name}.weight") == joined, f"blk.{l}.{name}: not the experts in id order")
        expect(data("blk.1.attn_q.weight") == src["model.layers.1.self_attn.q_proj.weight"][2], "attn_q bytes")
        bf16 = src["model.layers.1.post_attention_layernorm.weight"][2]
        values = [struct.unpack("<f", b"\0\0" + bf16[i:i + 2])[0] for i in range(0, len(bf16), 2)]
        f32 = data("blk.1.ffn_norm.weight")
        expect(list(struct.unpack(f"<{len(f32) // 4}f", f32)) == values, "ffn_norm: not the bf16 values as f32")

        # Metadata and vocabulary.
        for key, value in (("general.architecture", "olmoe"), ("olmoe.block_count", LAYERS),
                           ("olmoe.embedding_length", c["hidden_size"]),
                           ("olmoe.feed_forward_length", c["intermediate_size"]),
                           ("olmoe.attention.head_count", c["num_attention_heads"]),
                           ("olmoe.attention.head_count_kv", c["num_key_value_heads"]),
                           ("olmoe.expert_count", EXPERTS), ("olmoe.expert_used_count", c["num_experts_per_tok"]),
                           ("olmoe.rope.freq_base", c["rope_theta"]),
                           ("tokenizer.ggml.eos_token_id", c["eos_token_id"])):
            expect(meta.get(key) == value, f"{key}: {meta.get(key)!r}, expected {value!r}")
        eps = meta.get("olmoe.attention.layer_norm_rms_epsilon", 0)
        expect(abs(eps - c["rms_norm_eps"]) < 1e-12, f"rms eps {eps}")
        toks = meta.get("tokenizer.ggml.tokens", [])
        expect(len(toks) == c["vocab_size"] and len(set(toks)) == len(toks), "vocabulary: size or uniqueness")
        expect(all(f"<0x{b:02X}>" in toks for b in range(256)), "vocabulary: byte tokens missing")

        # A model llama.cpp's olmoe graph would run differently is refused.
        bad = Path(tmp) / "bad"
        shutil.copytree(model, bad)
        (bad / "config.json").write_text(json.dumps({**c, "norm_topk_prob": True}))
        try:
            convert_olmoe.convert(bad, Path(tmp) / "bad.gguf")
            failures.append("norm_topk_prob true was converted, not refused")
        except SystemExit:
            pass

    for f in failures:
        print(f"FAIL: {f}")
    print(f"test_convert: {'FAILED' if failures else 'passed'} ({len(tensors)} tensors checked)")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__.split("\n\n")[1])
    sys.exit(main(sys.argv[1]))
