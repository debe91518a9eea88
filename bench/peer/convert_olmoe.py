#!/usr/bin/env python3
"""Writes an OLMoE checkpoint (a safetensors directory with config.json: `coli synth --arch olmoe` output or
allenai/OLMoE-1B-7B-*) as a GGUF file that llama.cpp runs with the same weights, for bench/peer.

Usage: python3 bench/peer/convert_olmoe.py MODEL_DIR OUT.gguf

Same weights: every matrix keeps its stored dtype and bytes (bf16 stays bf16, copied file to file), the
routed experts of a layer are stacked into one [experts, out, in] tensor as llama.cpp's olmoe graph
expects, and the 1-D tensors (the norms) and the routers are widened to f32, exactly (every bf16 or f16
value is an f32 value), which is what llama.cpp's own converter stores for them. So both engines see the
same numbers and route identically up to their arithmetic.

llama.cpp's olmoe graph has no clip_qkv and never renormalizes the top-k weights, so a checkpoint that
sets clip_qkv or norm_topk_prob is refused (the engines would run different models). The file gets a
small SentencePiece-style vocabulary (unknown, BOS, EOS, the 256 byte tokens, then placeholder tokens up to
the checkpoint's vocab_size): llama.cpp needs one to load a model, and the benchmark feeds token ids, so the
text of the tokens never matters.

Every tensor of the checkpoint must be used exactly once; a name this mapping does not know is an error.
"""

import json
import os
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gguf  # noqa: E402

ARCH = "olmoe"

# safetensors dtype -> (ggml type, bytes per element)
DTYPES = {"BF16": (gguf.GGML_BF16, 2), "F16": (gguf.GGML_F16, 2), "F32": (gguf.GGML_F32, 4)}

# llama.cpp vocabulary token types.
TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_BYTE = 1, 2, 3, 6

# Per-layer tensors that map one to one: Hugging Face suffix -> GGUF name (without "blk.L.").
LAYER_TENSORS = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate.weight": "ffn_gate_inp.weight",
}
# Routed experts: Hugging Face projection -> GGUF stacked tensor (without "blk.L.").
EXPERT_TENSORS = {"gate_proj": "ffn_gate_exps.weight", "up_proj": "ffn_up_exps.weight",
                  "down_proj": "ffn_down_exps.weight"}
GLOBAL_TENSORS = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
                  "lm_head.weight": "output.weight"}
# GGUF tensors stored as f32 whatever the checkpoint's dtype (an exact widening).
F32_ALWAYS = ("_norm.weight", "ffn_gate_inp.weight")

COPY_CHUNK = 64 << 20  # bytes per read/write when copy_file_range is not available


class Source:
    """One checkpoint tensor: which file, where its bytes are, its dtype and shape."""

    def __init__(self, path, start, end, dtype, shape):
        self.path = path    # the safetensors file
        self.start = start  # absolute byte offset of the data in the file
        self.nbytes = end - start
        self.dtype = dtype  # safetensors dtype string
        self.shape = shape  # row-major, outermost first


def safetensors_index(model_dir):
    """name -> Source for every tensor of every *.safetensors file in model_dir."""
    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise SystemExit(f"{model_dir}: no *.safetensors files")
    index = {}
    for path in files:
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
        for name, info in header.items():
            if name == "__metadata__":
                continue
            if info["dtype"] not in DTYPES:
                raise SystemExit(f"{name}: dtype {info['dtype']} is not supported (bf16, f16, f32)")
            begin, end = info["data_offsets"]
            index[name] = Source(path, 8 + n + begin, 8 + n + end, info["dtype"], info["shape"])
    return index


def copy_range(src_path, offset, nbytes, out):
    """Appends nbytes of src_path from offset to the raw file out, kernel to kernel where possible."""
    with open(src_path, "rb", buffering=0) as src:
        done = 0
        try:
            while done < nbytes:
                n = os.copy_file_range(src.fileno(), out.fileno(), nbytes - done, offset + done)
                if n == 0:
                    raise RuntimeError(f"{src_path}: ends before byte {offset + nbytes}")
                done += n
        except (AttributeError, OSError):
            while done < nbytes:
                chunk = os.pread(src.fileno(), min(COPY_CHUNK, nbytes - done), offset + done)
                gguf.write_all(out, chunk)
                done += len(chunk)


def widened_f32(src):
    """The tensor's values as little-endian f32 bytes (exact for bf16 and f16)."""
    with open(src.path, "rb") as f:
        f.seek(src.start)
        raw = f.read(src.nbytes)
    if src.dtype == "F32":
        return raw
    if src.dtype == "BF16":  # a bf16 value is the top half of the f32 with the same value
        out = bytearray(2 * len(raw))
        out[2::4] = raw[0::2]
        out[3::4] = raw[1::2]
        return bytes(out)
    count = len(raw) // 2
    return struct.pack(f"<{count}f", *struct.unpack(f"<{count}e", raw))


def config_check(c):
    if c.get("model_type") != ARCH:
        raise SystemExit(f"config.json: model_type {c.get('model_type')!r}, this converter writes olmoe only")
    refused = {"clip_qkv": c.get("clip_qkv") is not None, "norm_topk_prob": bool(c.get("norm_topk_prob")),
               "rope_scaling": c.get("rope_scaling") is not None,
               "hidden_act != silu": c.get("hidden_act", "silu") != "silu"}
    bad = [k for k, v in refused.items() if v]
    if bad:
        raise SystemExit(f"config.json sets {', '.join(bad)}: llama.cpp's olmoe graph would run another model")


def first_id(v):
    return v[0] if isinstance(v, list) else v


def vocabulary(vocab_size, eos_id, pad_id):
    """(tokens, scores, types, special ids): unknown 0, BOS 1, EOS and pad where config.json puts them,
    the 256 byte tokens <0xXX> (llama.cpp's SentencePiece tokenizer looks up <0x0A> for newlines), then
    placeholders."""
    specials = {0: ("<unk>", TOKEN_UNKNOWN), 1: ("<s>", TOKEN_CONTROL)}
    if eos_id is not None:
        specials.setdefault(eos_id, ("</s>", TOKEN_CONTROL))
    if pad_id is not None:
        specials.setdefault(pad_id, ("<pad>", TOKEN_CONTROL))
    if vocab_size < len(specials) + 256 or max(specials) >= vocab_size:
        raise SystemExit(f"vocab_size {vocab_size} is too small for the special and byte tokens")
    tokens, types = [None] * vocab_size, [TOKEN_NORMAL] * vocab_size
    for i, (text, kind) in specials.items():
        tokens[i], types[i] = text, kind
    free = (i for i in range(vocab_size) if tokens[i] is None)
    for byte in range(256):
        i = next(free)
        tokens[i], types[i] = f"<0x{byte:02X}>", TOKEN_BYTE
    for i in free:
        tokens[i] = f"<tok{i}>"
    scores = [0.0 if types[i] != TOKEN_NORMAL else -float(i) for i in range(vocab_size)]
    return tokens, scores, types


def convert(model_dir, out_path):
    model_dir = Path(model_dir)
    c = json.loads((model_dir / "config.json").read_text())
    config_check(c)
    index = safetensors_index(model_dir)
    used = set()
    w = gguf.Writer()

    vocab = c["vocab_size"]
    d = c["hidden_size"]
    heads = c["num_attention_heads"]
    eos_id = first_id(c.get("eos_token_id"))
    pad_id = first_id(c.get("pad_token_id"))
    w.add("general.architecture", gguf.T_STRING, ARCH)
    w.add("general.name", gguf.T_STRING, model_dir.name)
    w.add(f"{ARCH}.context_length", gguf.T_UINT32, c.get("max_position_embeddings", 4096))
    w.add(f"{ARCH}.embedding_length", gguf.T_UINT32, d)
    w.add(f"{ARCH}.block_count", gguf.T_UINT32, c["num_hidden_layers"])
    w.add(f"{ARCH}.feed_forward_length", gguf.T_UINT32, c["intermediate_size"])  # one expert's
    w.add(f"{ARCH}.attention.head_count", gguf.T_UINT32, heads)
    w.add(f"{ARCH}.attention.head_count_kv", gguf.T_UINT32, c.get("num_key_value_heads", heads))
    w.add(f"{ARCH}.rope.freq_base", gguf.T_FLOAT32, c.get("rope_theta", 10000.0))
    w.add(f"{ARCH}.attention.layer_norm_rms_epsilon", gguf.T_FLOAT32, c.get("rms_norm_eps", 1e-5))
    w.add(f"{ARCH}.expert_count", gguf.T_UINT32, c["num_experts"])
    w.add(f"{ARCH}.expert_used_count", gguf.T_UINT32, c["num_experts_per_tok"])

    tokens, scores, types = vocabulary(vocab, eos_id, pad_id)
    w.add("tokenizer.ggml.model", gguf.T_STRING, "llama")
    w.add_array("tokenizer.ggml.tokens", gguf.T_STRING, tokens)
    w.add_array("tokenizer.ggml.scores", gguf.T_FLOAT32, scores)
    w.add_array("tokenizer.ggml.token_type", gguf.T_INT32, types)
    w.add("tokenizer.ggml.unknown_token_id", gguf.T_UINT32, 0)
    w.add("tokenizer.ggml.bos_token_id", gguf.T_UINT32, 1)
    if eos_id is not None:
        w.add("tokenizer.ggml.eos_token_id", gguf.T_UINT32, eos_id)
    if pad_id is not None:
        w.add("tokenizer.ggml.padding_token_id", gguf.T_UINT32, pad_id)
    w.add("tokenizer.ggml.add_bos_token", gguf.T_BOOL, False)
    w.add("tokenizer.ggml.add_eos_token", gguf.T_BOOL, False)

    def take(name):
        if name not in index:
            raise SystemExit(f"{model_dir}: tensor {name} is missing")
        used.add(name)
        return index[name]

    def add_plain(gguf_name, src):
        if gguf_name.endswith(F32_ALWAYS) or len(src.shape) == 1:
            w.add_tensor(gguf_name, src.shape, gguf.GGML_F32, lambda f, s=src: gguf.write_all(f, widened_f32(s)))
        else:
            w.add_tensor(gguf_name, src.shape, DTYPES[src.dtype][0],
                         lambda f, s=src: copy_range(s.path, s.start, s.nbytes, f))

    def add_experts(gguf_name, srcs):
        first = srcs[0]
        if any(s.dtype != first.dtype or s.shape != first.shape for s in srcs):
            raise SystemExit(f"{gguf_name}: the experts differ in dtype or shape")

        def fill(f):
            for s in srcs:
                copy_range(s.path, s.start, s.nbytes, f)

        w.add_tensor(gguf_name, [len(srcs)] + first.shape, DTYPES[first.dtype][0], fill)

    add_plain("token_embd.weight", take("model.embed_tokens.weight"))
    for layer in range(c["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        for hf, name in LAYER_TENSORS.items():
            add_plain(f"blk.{layer}.{name}", take(p + hf))
        for proj, name in EXPERT_TENSORS.items():
            srcs = [take(f"{p}mlp.experts.{e}.{proj}.weight") for e in range(c["num_experts"])]
            add_experts(f"blk.{layer}.{name}", srcs)
    add_plain("output_norm.weight", take("model.norm.weight"))
    # llama.cpp's olmoe needs output.weight; a tied checkpoint gets the embedding's bytes there.
    tied = "lm_head.weight" not in index and c.get("tie_word_embeddings", False)
    add_plain("output.weight", index["model.embed_tokens.weight"] if tied else take("lm_head.weight"))

    unused = sorted(set(index) - used)
    if unused:
        raise SystemExit(f"{len(unused)} tensors have no GGUF name here, e.g. {unused[:3]}")
    tmp = Path(str(out_path) + ".part")
    w.write(tmp)
    tmp.rename(out_path)
    return len(w.tensors)


def main(argv):
    if len(argv) != 3:
        raise SystemExit(__doc__.split("\n\n")[1])
    n = convert(argv[1], argv[2])
    print(f"wrote {argv[2]}: {n} tensors, {os.path.getsize(argv[2]) / 1e9:.2f} GB")


if __name__ == "__main__":
    main(sys.argv)
