#!/usr/bin/env python3
"""Train the small demo model bundled in models/demo: an OLMoE-architecture MoE with its own BPE tokenizer.

Everything is trained from one public-domain English text, the King James Bible as the Debian package
bible-kjv-text ships it (dump it with `bible -l100000 "gen1:1-rev22:21" > kjv.txt`: "Book N" heading lines,
then one "  V text" line per verse). The script

  1. trains a byte-level BPE tokenizer with Hugging Face `tokenizers` (GPT-2 / OLMoE style ByteLevel
     pre-tokenizer and decoder, no normalizer) with the special tokens <|endoftext|> <|pad|> <|system|>
     <|user|> <|assistant|> <|end|>, and writes tokenizer.json and tokenizer_config.json (bos/eos/pad and a
     plain-Jinja chat_template: "<|role|>\\n" + content + "<|end|>\\n" per turn, "<|assistant|>\\n" as the
     generation prompt);
  2. trains transformers' OlmoeForCausalLM (fp32 master weights, bf16 autocast, AdamW, load-balancing aux
     loss) for a fixed wall-clock budget (--minutes) on the chapters as plain text plus little dialogues made
     from the verses (user quotes the first half of a verse, the assistant continues it; "tell me about X"
     answered by a verse about X; "quote Book C:V"; a few greetings), printing the loss as it goes;
  3. saves the model with save_pretrained in bf16, in the original per-expert layout (config.json,
     generation_config.json with eos_token_id = [<|endoftext|>, <|end|>], model.safetensors), prints greedy
     and sampled continuations of a few plain and chat prompts, writes oracle.safetensors in the format of
     tests/fixtures/olmoe_*/oracle.safetensors (input_ids I64 [T], logits F32 [T, vocab] from the
     fp32-upcast bf16 weights on CPU with eager attention, greedy I64 [N]: argmax continuation without eos
     stop), and a README.md describing the run (config, sizes, losses, samples).

Outputs (exactly these files, flat, in OUT): config.json generation_config.json model.safetensors
tokenizer.json tokenizer_config.json oracle.safetensors README.md. Needs torch, transformers (5.x),
tokenizers, safetensors, jinja2; a CUDA GPU for training (CPU works for a smoke test with --minutes 0.2).

Typical use on the GPU machine (the corpus travels in an ignored folder named in `carry`):

  PYTHONUNBUFFERED=1 python3 tools/train_demo_model.py --corpus .corpus/kjv.txt --out $OUT --minutes 4.5

`--prep-only` parses the corpus, builds the dialogues and renders the chat template with jinja2 (no torch,
no tokenizers needed) to check the data preparation anywhere.
"""

import argparse
import collections
import json
import math
import os
import random
import re
import shutil
import sys
import tempfile
import time

SPECIAL_TOKENS = ["<|endoftext|>", "<|pad|>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]
EOT, PAD, SYSTEM, USER, ASSISTANT, END = SPECIAL_TOKENS

# Plain Jinja: for loop, if/elif, message['role'] / message['content'], ~ and + concatenation.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'system' -%}"
    "{{ '<|system|>\\n' ~ message['content'] ~ '<|end|>\\n' }}"
    "{%- elif message['role'] == 'user' -%}"
    "{{ '<|user|>\\n' ~ message['content'] ~ '<|end|>\\n' }}"
    "{%- elif message['role'] == 'assistant' -%}"
    "{{ '<|assistant|>\\n' + message['content'] + '<|end|>\\n' }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{ '<|assistant|>\\n' }}"
    "{%- endif -%}"
)

MARKER = {"system": SYSTEM, "user": USER, "assistant": ASSISTANT}

SYSTEM_PROMPTS = [
    "You are a helpful assistant.",
    "You speak in the words of the King James Bible.",
    "Answer with a verse.",
    "You are a small demo model.",
]

CONTINUE_ASKS = ["Continue the verse: {}", "Finish this verse: {}", "{}", "Continue: {}", "How does it go on? {}"]
ABOUT_ASKS = ["Tell me about {}.", "What does the Bible say about {}?", "Give me a verse about {}.",
              "Speak to me of {}.", "{}?"]
QUOTE_ASKS = ["Quote {}.", "What is written in {}?", "Read {} to me.", "{}"]

GREETINGS = [
    (["Hello", "Hello!", "Hi", "Hi!", "Good morning.", "Greetings."],
     ["Peace be unto you.", "Grace be unto you, and peace.", "The LORD bless thee, and keep thee."]),
    (["Who are you?", "What are you?", "Who art thou?", "What is your name?"],
     ["I am a small model, and I speak the words of the King James Bible.",
      "I am a little mixture of experts, trained on the King James Bible."]),
    (["What can you do?", "Help", "How can you help me?"],
     ["Give me the beginning of a verse and I will finish it, or ask me about a thing, as love or the sea, "
      "and I will answer with a verse."]),
    (["Thank you.", "Thanks!", "Goodbye.", "Bye"],
     ["The grace of our Lord Jesus Christ be with you all. Amen.", "Go in peace."]),
]

THEMES = """
love faith hope wisdom peace light darkness death life sin mercy grace joy fear king water sea fire bread
wine heaven earth night morning truth righteousness war gold silver children mother father brother sister
friend enemy angel spirit prayer praise song sword lion sheep shepherd mountain river tree fruit garden
city house temple riches poor rich heart soul strength blood tears rest sleep dream star stars sun moon
rain wind famine harvest seed field vineyard fish bird eagle dove serpent horse gate wall door path way
law judgment justice forgive repent salvation glory power kingdom crown throne marriage wife husband
woman youth wealth labour pride anger patience kindness honour shame lies hunger thirst heal music
understanding knowledge counsel fool wise child prophet priest money silence comfort sorrow beauty
""".split()

STOPWORDS = set("""
and the that shall unto with them they their there this then thee thou thy thine have hath from which
were when what will into upon also said saith came come cometh every before after because him his her
hers she all not for but was are ye you your our ours out over under again against among about above
these those than more most made make maketh even shalt wilt hast doth neither nor also therefore
wherefore whom whose who any some such been being should would could might must went go goes going
let like one two three four five six seven eight nine ten hundred thousand day days sons son children
things thing man men people time times words word great many much thereof therein whereof
""".split())


# ----------------------------------------------------------------------------------------------------------
# Corpus and training text (pure Python)


def parse_kjv(path):
    """[(book, chapter, verse, text)] from the `bible -l100000` dump (headings 'Book N', verses '  V text')."""
    heading = re.compile(r"^(\S.*\S) (\d+)$")
    verse_re = re.compile(r"^\s+(\d+) (.*\S)\s*$")
    verses, book, chapter = [], None, None
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip():
                continue
            m = verse_re.match(line)
            if m and book is not None:
                verses.append((book, chapter, int(m.group(1)), m.group(2)))
                continue
            m = heading.match(line)
            if m:
                book, chapter = m.group(1), int(m.group(2))
                continue
            raise ValueError(f"{path}: unexpected line {line[:80]!r}")
    if len(verses) < 1000:
        raise ValueError(f"{path}: only {len(verses)} verses parsed")
    return verses


def chapters_of(verses):
    """{(book, chapter): [verse texts]} in corpus order."""
    out = collections.OrderedDict()
    for book, chap, _, text in verses:
        out.setdefault((book, chap), []).append(text)
    return out


def chapter_text(key, texts):
    """A chapter as one plain-text document: heading line, blank line, one verse a line (no numbers)."""
    return f"{key[0]} {key[1]}\n\n" + "\n".join(texts)


def render_turns(messages, add_generation_prompt=False):
    """What CHAT_TEMPLATE renders; training dialogues are built with this (checked against jinja2)."""
    s = "".join(f"{MARKER[m['role']]}\n{m['content']}{END}\n" for m in messages)
    return s + (f"{ASSISTANT}\n" if add_generation_prompt else "")


def theme_words(verses, lo=40, hi=1500, max_words=45):
    """{word: [index of a verse of at most max_words words containing it]}: THEMES (found in >= 5 verses)
    and the content words found in lo..hi verses."""
    index = collections.defaultdict(list)
    for i, (_, _, _, text) in enumerate(verses):
        if len(text.split()) > max_words:
            continue
        for w in set(re.findall(r"[a-z]+", text.lower())):
            if len(w) >= 4 and w not in STOPWORDS or w in THEMES:
                index[w].append(i)
    common = {w: ix for w, ix in index.items() if lo <= len(ix) <= hi}
    curated = {w: index[w] for w in THEMES if len(index.get(w, ())) >= 5}
    return curated, common


def make_dialogues(verses, n, rng):
    """n little chat dialogues (strings as the template renders them) built from the verses."""
    curated, common = theme_words(verses)
    curated_list, common_list = sorted(curated), sorted(common)
    long_verses = [i for i, v in enumerate(verses) if len(v[3].split()) >= 8]

    def exchange():
        kind = rng.random()
        if kind < 0.45:  # first half of a verse -> the rest of it
            book, chap, vn, text = verses[rng.choice(long_verses)]
            words = text.split()
            k = max(3, min(len(words) - 3, len(words) // 2 + rng.randint(-2, 2)))
            return rng.choice(CONTINUE_ASKS).format(" ".join(words[:k])), " ".join(words[k:])
        if kind < 0.75:  # about a theme -> a verse containing it (sometimes two verses)
            themes, words = (curated, curated_list) if rng.random() < 0.7 else (common, common_list)
            w = rng.choice(words)
            i = rng.choice(themes[w])
            answer = verses[i][3]
            if rng.random() < 0.25 and i + 1 < len(verses) and verses[i + 1][:2] == verses[i][:2]:
                answer += " " + verses[i + 1][3]
            return rng.choice(ABOUT_ASKS).format(w), answer
        if kind < 0.95:  # a reference -> the verse
            book, chap, vn, text = rng.choice(verses)
            return rng.choice(QUOTE_ASKS).format(f"{book} {chap}:{vn}"), text
        asks, answers = rng.choice(GREETINGS)
        return rng.choice(asks), rng.choice(answers)

    dialogues = []
    for _ in range(n):
        messages = []
        if rng.random() < 0.3:
            messages.append({"role": "system", "content": rng.choice(SYSTEM_PROMPTS)})
        for _ in range(1 if rng.random() < 0.7 else rng.randint(2, 3)):
            q, a = exchange()
            messages += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
        dialogues.append(render_turns(messages))
    return dialogues


def check_template(verbose=True):
    """Render CHAT_TEMPLATE with jinja2 and compare it with render_turns on a few conversations."""
    import jinja2

    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    tmpl = env.from_string(CHAT_TEMPLATE)
    convs = [
        [{"role": "user", "content": "Hello"}],
        [{"role": "system", "content": "Answer with a verse."}, {"role": "user", "content": "Tell me of love."},
         {"role": "assistant", "content": "God is love."}, {"role": "user", "content": "More."}],
    ]
    for conv in convs:
        for gen in (False, True):
            got = tmpl.render(messages=conv, add_generation_prompt=gen, bos_token=EOT, eos_token=EOT)
            want = render_turns(conv, gen)
            if got != want:
                raise AssertionError(f"chat template renders {got!r}, expected {want!r}")
    if verbose:
        print("chat template (jinja2) == render_turns: ok; example:")
        print("  " + repr(tmpl.render(messages=convs[1], add_generation_prompt=True)))


def build_documents(verses, n_dialogues, n_val_chapters, rng):
    chapters = chapters_of(verses)
    keys = list(chapters)
    val_keys = set(rng.sample(keys, n_val_chapters))
    train_docs = [chapter_text(k, chapters[k]) for k in keys if k not in val_keys]
    val_docs = [chapter_text(k, chapters[k]) for k in keys if k in val_keys]
    dialogues = make_dialogues(verses, n_dialogues, rng)
    return train_docs, val_docs, dialogues


# ----------------------------------------------------------------------------------------------------------
# Tokenizer


def train_tokenizer(docs, vocab_size):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(docs, trainer=trainer)
    for i, t in enumerate(SPECIAL_TOKENS):
        if tok.token_to_id(t) != i:
            print(f"WARNING: special token {t} has id {tok.token_to_id(t)}, expected {i}")
    return tok


def tokenizer_config(model_max_length):
    added = {str(i): {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                      "single_word": False, "special": True} for i, t in enumerate(SPECIAL_TOKENS)}
    return {
        "add_bos_token": False,
        "add_eos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": added,
        "bos_token": EOT,
        "eos_token": EOT,
        "pad_token": PAD,
        "unk_token": None,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "model_max_length": model_max_length,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }


def save_tokenizer(tok, outdir, model_max_length):
    tok.save(os.path.join(outdir, "tokenizer.json"))
    with open(os.path.join(outdir, "tokenizer_config.json"), "w") as f:
        json.dump(tokenizer_config(model_max_length), f, indent=2, ensure_ascii=False)
        f.write("\n")


def check_tokenizer_with_transformers(outdir, tok, texts):
    """Load the saved files with AutoTokenizer; ids and the rendered chat prompt must agree with ours."""
    from transformers import AutoTokenizer

    tmp = tempfile.mkdtemp()
    try:
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(outdir, f), tmp)
        hf = AutoTokenizer.from_pretrained(tmp)
        for t in texts:
            a, b = hf(t, add_special_tokens=True)["input_ids"], tok.encode(t).ids
            assert a == b, f"AutoTokenizer ids differ on {t!r}: {a[:12]} vs {b[:12]}"
            assert hf.decode(a) == t, f"AutoTokenizer decode does not round-trip {t!r}"
        conv = [{"role": "user", "content": "Tell me about love."}]
        rendered = hf.apply_chat_template(conv, tokenize=False, add_generation_prompt=True)
        assert rendered == render_turns(conv, True), rendered
        print(f"AutoTokenizer check: ok (eos {hf.eos_token!r}, bos {hf.bos_token!r}, pad {hf.pad_token!r})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ----------------------------------------------------------------------------------------------------------
# Model


def make_config(args, vocab_size):
    from transformers import OlmoeConfig

    return OlmoeConfig(
        vocab_size=vocab_size,
        hidden_size=args.hidden,
        intermediate_size=args.expert_intermediate,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads or args.heads,
        num_experts=args.experts,
        num_experts_per_tok=args.top_k,
        max_position_embeddings=args.context,
        rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        initializer_range=0.02,
        tie_word_embeddings=False,
        attention_bias=False,
        hidden_act="silu",
        norm_topk_prob=False,
        output_router_logits=True,
        router_aux_loss_coef=args.aux_loss,
        pad_token_id=SPECIAL_TOKENS.index(PAD),
        bos_token_id=SPECIAL_TOKENS.index(EOT),
        eos_token_id=SPECIAL_TOKENS.index(EOT),
    )


def set_experts_impl(model, name):
    if hasattr(model, "set_experts_implementation"):
        model.set_experts_implementation(name)
    else:
        model.config._experts_implementation = name


def count_params(model):
    return sum(p.numel() for p in model.parameters())


def lr_at(step, frac, args):
    warm = min(1.0, (step + 1) / args.warmup)
    return args.lr * warm * (args.min_lr_frac + (1 - args.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0))))


def train(args, stream, val_stream, vocab_size):
    import torch
    import torch.nn.functional as F
    from transformers import OlmoeForCausalLM

    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    config = make_config(args, vocab_size)
    model = OlmoeForCausalLM(config).to(dev)
    model.train()
    n_params = count_params(model)
    n_expert = sum(p.numel() for n, p in model.named_parameters() if ".experts." in n)
    print(f"model: {n_params / 1e6:.2f}M parameters ({n_expert / 1e6:.2f}M in experts, "
          f"{2 * n_params / 2**20:.1f} MiB in bf16); device {dev}")
    amp = dict(device_type=dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda")
    T, B = args.context, args.batch
    stream_t = torch.tensor(stream, dtype=torch.int64, device=dev)
    val_t = torch.tensor(val_stream, dtype=torch.int64, device=dev)
    offs = torch.arange(T + 1, device=dev)
    gen = torch.Generator(device=dev).manual_seed(args.seed)

    def batch(src, n):
        starts = torch.randint(0, src.numel() - T - 1, (n,), device=dev, generator=gen)
        x = src[starts[:, None] + offs]
        return x[:, :-1], x[:, 1:]

    def loss_of(inp, tgt, with_aux=True):
        with torch.autocast(**amp):
            out = model(input_ids=inp, use_cache=False)  # config.output_router_logits adds aux_loss
        ce = F.cross_entropy(out.logits.float().reshape(-1, vocab_size), tgt.reshape(-1))
        aux = getattr(out, "aux_loss", None) if with_aux else None
        return ce, (ce + args.aux_loss * aux if aux is not None else ce)

    # Pick the fastest experts implementation that works (transformers 5: grouped_mm, eager).
    inp, tgt = batch(stream_t, B)
    timings = {}
    for name in args.experts_impls.split(","):
        try:
            set_experts_impl(model, name)
            for i in range(4):
                if i == 1:
                    if dev.type == "cuda":
                        torch.cuda.synchronize()
                    t0 = time.time()
                ce, total = loss_of(inp, tgt)
                total.backward()
                model.zero_grad(set_to_none=True)
            if dev.type == "cuda":
                torch.cuda.synchronize()
            timings[name] = (time.time() - t0) / 3
            print(f"experts implementation {name!r}: {timings[name] * 1e3:.1f} ms/step, first loss {ce.item():.4f}")
        except Exception as e:  # noqa: BLE001 - try the next one
            print(f"experts implementation {name!r} failed: {type(e).__name__}: {str(e)[:300]}")
            model.zero_grad(set_to_none=True)
    if not timings:
        raise RuntimeError("no experts implementation worked")
    impl = min(timings, key=timings.get)
    set_experts_impl(model, impl)
    print(f"using experts implementation {impl!r}")

    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "embed" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.ndim >= 2 and "embed" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=dev.type == "cuda")

    budget = args.minutes * 60.0
    t0 = time.time()
    step, tokens, hist = 0, 0, []
    ema = None
    last_print = t0
    while True:
        frac = (time.time() - t0) / budget
        if frac >= 1.0:
            break
        lr = lr_at(step, frac, args)
        for g in opt.param_groups:
            g["lr"] = lr
        inp, tgt = batch(stream_t, B)
        ce, total = loss_of(inp, tgt)
        opt.zero_grad(set_to_none=True)
        total.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        tokens += B * T
        if step % 25 == 0:
            v = ce.item()
            ema = v if ema is None else 0.9 * ema + 0.1 * v
            now = time.time()
            if now - last_print >= args.print_every or step == 25:
                last_print = now
                hist.append((round(now - t0, 1), step, round(ema, 4)))
                print(f"step {step:6d}  {now - t0:6.1f}s  lr {lr:.2e}  loss {v:.4f} (ema {ema:.4f})  "
                      f"{tokens / (now - t0) / 1e3:.0f}k tok/s")
    train_seconds = time.time() - t0
    model.eval()
    with torch.no_grad():
        vals = []
        for _ in range(8):
            inp, tgt = batch(val_t, B)
            vals.append(loss_of(inp, tgt, with_aux=False)[0].item())
        trains = []
        for _ in range(8):
            inp, tgt = batch(stream_t, B)
            trains.append(loss_of(inp, tgt, with_aux=False)[0].item())
    stats = {
        "steps": step, "tokens": tokens, "train_seconds": round(train_seconds, 1), "experts_impl": impl,
        "train_loss": round(sum(trains) / len(trains), 4), "val_loss": round(sum(vals) / len(vals), 4),
        "params": n_params, "expert_params": n_expert, "history": hist,
    }
    print(f"trained {step} steps, {tokens / 1e6:.1f}M tokens in {train_seconds:.0f}s; "
          f"train loss {stats['train_loss']:.4f}, held-out chapters loss {stats['val_loss']:.4f}")
    return model, stats


def router_usage(model, ids):
    """Per layer, the share of top-k slots each expert gets on `ids` (list of fractions)."""
    import torch

    with torch.no_grad():
        out = model(input_ids=ids[None], use_cache=False, output_router_logits=True)
    k = model.config.num_experts_per_tok
    usage = []
    for rl in out.router_logits:
        top = torch.topk(rl.float().reshape(-1, rl.shape[-1]), k, dim=-1).indices.flatten()
        counts = torch.bincount(top, minlength=rl.shape[-1]).float()
        usage.append([round(x, 3) for x in (counts / counts.sum()).tolist()])
    return usage


def greedy_ids(model, ids, n):
    """argmax continuation by full forwards (no cache, no eos stop) and the smallest top1-top2 margin."""
    import torch

    seq, new, margin = ids.clone(), [], float("inf")
    with torch.no_grad():
        for _ in range(n):
            last = model(input_ids=seq[None], use_cache=False).logits[0, -1].float()
            top2 = torch.topk(last, 2)
            new.append(int(top2.indices[0]))
            margin = min(margin, float(top2.values[0] - top2.values[1]))
            seq = torch.cat([seq, top2.indices[:1]])
    return torch.tensor(new, dtype=torch.int64), margin


def save_and_check(model, tok, args, outdir, stats):
    """Save bf16 checkpoint, reload in fp32 on CPU, write the oracle; returns the fp32 model and facts."""
    import struct

    import torch
    import transformers
    from safetensors.torch import save_file
    from transformers import OlmoeForCausalLM

    eot, end = tok.token_to_id(EOT), tok.token_to_id(END)
    model.config.output_router_logits = False
    model.generation_config.eos_token_id = [eot, end]
    model.generation_config.bos_token_id = eot
    model.generation_config.pad_token_id = tok.token_to_id(PAD)
    tmp = tempfile.mkdtemp()
    model.to(torch.bfloat16).cpu().save_pretrained(tmp)
    files = sorted(os.listdir(tmp))
    print(f"save_pretrained wrote {files}")
    for f in ("config.json", "generation_config.json", "model.safetensors"):
        shutil.copy(os.path.join(tmp, f), outdir)
    with open(os.path.join(outdir, "model.safetensors"), "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    expert_re = re.compile(r"^model\.layers\.\d+\.mlp\.experts\.\d+\.(gate|up|down)_proj\.weight$")
    n_expert_tensors = sum(1 for k in header if expert_re.match(k))
    fused = [k for k in header if ".experts." in k and not expert_re.match(k)]
    dtypes = sorted({v["dtype"] for v in header.values()})
    want = 3 * args.layers * args.experts
    print(f"model.safetensors: {len(header)} tensors, dtypes {dtypes}, {n_expert_tensors} per-expert tensors "
          f"(want {want}), fused expert tensors {fused[:3]}")
    if n_expert_tensors != want or fused or dtypes != ["BF16"]:
        print("WARNING: checkpoint is not in the per-expert bf16 layout")
    shutil.rmtree(tmp, ignore_errors=True)

    ref = OlmoeForCausalLM.from_pretrained(outdir, dtype=torch.float32, attn_implementation="eager").eval()
    set_experts_impl(ref, "eager")
    facts = {"files": {}}
    # Oracle prompt: the first candidate whose greedy continuation has no eos id.
    candidates = ["In the beginning God created the heaven and the earth. And the earth was",
                  "And the LORD spake unto Moses, saying, Speak unto the children of Israel,",
                  "Blessed are the poor in spirit: for theirs is the kingdom of heaven. Blessed are"]
    for prompt in candidates:
        ids = torch.tensor(tok.encode(prompt).ids, dtype=torch.int64)
        greedy, margin = greedy_ids(ref, ids, args.oracle_tokens)
        if not any(int(t) in (eot, end) for t in greedy):
            break
    with torch.no_grad():
        logits = ref(input_ids=ids[None], use_cache=False).logits[0].float().contiguous()
    meta = {"prompt": prompt, "transformers": transformers.__version__, "torch": torch.__version__,
            "note": "fp32 forward (CPU, eager) of the bf16 checkpoint; greedy = argmax without eos stop"}
    save_file({"input_ids": ids.contiguous(), "logits": logits, "greedy": greedy.contiguous()},
              os.path.join(outdir, "oracle.safetensors"), metadata=meta)
    facts.update(oracle_prompt=prompt, oracle_ids=ids.tolist(), oracle_greedy=greedy.tolist(),
                 oracle_greedy_text=tok.decode(greedy.tolist(), skip_special_tokens=False),
                 oracle_margin=round(margin, 4), max_abs_logit=round(float(logits.abs().max()), 3))
    print(f"oracle: prompt {prompt!r} -> {len(ids)} ids {ids.tolist()}")
    print(f"oracle: greedy {greedy.tolist()} = {facts['oracle_greedy_text']!r}; min top1-top2 margin "
          f"{margin:.4f}; max|logit| {facts['max_abs_logit']}")
    try:
        with torch.no_grad():
            hf = ref.generate(input_ids=ids[None], attention_mask=torch.ones(1, len(ids), dtype=torch.int64),
                              max_new_tokens=args.oracle_tokens, do_sample=False)
        hf = hf[0, len(ids):].tolist()
        print(f"oracle: generate() (stops at eos) gives {hf}; agrees with the argmax loop: "
              f"{hf == greedy.tolist()[:len(hf)]}")
    except Exception as e:  # noqa: BLE001
        print(f"oracle: generate() cross-check skipped: {type(e).__name__}: {e}")
    try:
        facts["router_usage"] = router_usage(ref, ids)
        print(f"router usage on the oracle prompt (share of top-k slots per expert): {facts['router_usage']}")
    except Exception as e:  # noqa: BLE001
        print(f"router usage skipped: {type(e).__name__}: {e}")
    for f in sorted(os.listdir(outdir)):
        facts["files"][f] = os.path.getsize(os.path.join(outdir, f))
    return ref, facts


PLAIN_PROMPTS = ["In the beginning", "And Jesus said unto them,", "The LORD is my shepherd;", "Blessed are the",
                 "Love is"]
CHAT_PROMPTS = [
    [{"role": "user", "content": "Continue the verse: For God so loved the world,"}],
    [{"role": "user", "content": "Tell me about love."}],
    [{"role": "user", "content": "What does the Bible say about wisdom?"}],
    [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "Who are you?"}],
    [{"role": "user", "content": "Hello"}],
]


def samples(model, tok, args):
    """Greedy and sampled continuations of the plain and chat prompts: [(kind, prompt, mode, text)]."""
    import torch

    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = model.to(dev)
    out = []
    jobs = [("plain", p, p) for p in PLAIN_PROMPTS] + [("chat", m, render_turns(m, True)) for m in CHAT_PROMPTS]
    for kind, shown, text in jobs:
        ids = torch.tensor([tok.encode(text).ids], dtype=torch.int64, device=dev)
        for mode in ("greedy", "sampled"):
            kw = dict(do_sample=False) if mode == "greedy" else dict(do_sample=True, temperature=0.8, top_p=0.95)
            torch.manual_seed(args.seed)
            with torch.no_grad():
                g = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                   max_new_tokens=args.sample_tokens, **kw)
            cont = tok.decode(g[0, ids.shape[1]:].tolist(), skip_special_tokens=False)
            label = shown if kind == "plain" else " | ".join(f"{m['role']}: {m['content']}" for m in shown)
            out.append((kind, label, mode, cont))
            print(f"--- {kind} {mode}: {label!r}\n{cont}\n")
    return out


# ----------------------------------------------------------------------------------------------------------
# README


def write_readme(outdir, args, corpus_facts, stats, facts, sample_list, config):
    mib = lambda b: f"{b / 2**20:.1f} MiB"  # noqa: E731
    lines = [
        "# models/demo: a small trained OLMoE model",
        "",
        "A tiny Mixture-of-Experts language model in the OLMoE architecture (transformers `OlmoeForCausalLM`),",
        "with its own byte-level BPE tokenizer, trained from scratch on the King James Bible so that a first",
        "`coli run` prints readable (if archaic) English. It is a demo, not a useful model: it mostly recites",
        "and recombines verses.",
        "",
        "Made by `tools/train_demo_model.py` on one NVIDIA H200 (see its docstring for how to rerun it):",
        "",
        "```sh",
        "bible -l100000 \"gen1:1-rev22:21\" > kjv.txt     # Debian package bible-kjv (text: bible-kjv-text)",
        f"python3 tools/train_demo_model.py --corpus kjv.txt --out models/demo --minutes {args.minutes:g}",
        "```",
        "",
        "## Corpus",
        "",
        "The King James Version (1611, public domain), from the Debian package `bible-kjv-text` 4.38",
        f"({corpus_facts['verses']} verses, {corpus_facts['chars'] / 1e6:.1f} M characters). Training text: every chapter as a",
        "document (heading line `Book N`, then one verse a line, no verse numbers), plus",
        f"{args.dialogues} little chat dialogues built from the verses (the user quotes the first half of a",
        "verse and the assistant continues it; \"Tell me about X\" answered by a verse containing X; \"Quote",
        "Book C:V\"; a few greetings), all rendered with the chat template below, documents separated by",
        f"`<|endoftext|>`. {args.val_chapters} random chapters are held out for a validation loss.",
        f"Tokens: {corpus_facts['train_tokens']:,} for training ({corpus_facts['dialogue_share']:.0%} of them dialogues),",
        f"{corpus_facts['val_tokens']:,} held out.",
        "",
        "## Tokenizer",
        "",
        f"Byte-level BPE trained with Hugging Face `tokenizers` on the chapters: vocabulary {corpus_facts['vocab']}",
        "(256 byte symbols, merges, and the special tokens `<|endoftext|>`=0 `<|pad|>`=1 `<|system|>`=2",
        "`<|user|>`=3 `<|assistant|>`=4 `<|end|>`=5). GPT-2 / OLMoE style: no normalizer, ByteLevel",
        "pre-tokenizer (GPT-2 split regex, no prefix space), ByteLevel decoder, no post-processor (no BOS",
        "added). `tokenizer_config.json`: bos = eos = `<|endoftext|>`, pad = `<|pad|>`, and the chat template",
        "",
        "```jinja",
        CHAT_TEMPLATE.replace("-%}{%-", "-%}\n{%-").replace("-%}{{", "-%}\n{{").replace("}}{%-", "}}\n{%-"),
        "```",
        "",
        "which renders each turn as `<|role|>\\n` + content + `<|end|>\\n` and the generation prompt as",
        "`<|assistant|>\\n`. `generation_config.json` stops at `<|endoftext|>` or `<|end|>` (eos_token_id [0, 5]).",
        "",
        "## Model",
        "",
        "| | |",
        "|---|---|",
        f"| architecture | OlmoeForCausalLM (model_type olmoe), {config.num_hidden_layers} layers, hidden {config.hidden_size}, "
        f"{config.num_attention_heads} heads of {config.hidden_size // config.num_attention_heads} (MHA, QK-norm), RoPE theta 10000 |",
        f"| experts | {config.num_experts} per layer, top-{config.num_experts_per_tok}, expert intermediate "
        f"{config.intermediate_size}, norm_topk_prob false |",
        f"| context | {config.max_position_embeddings} (trained on {args.context}-token windows) |",
        f"| parameters | {stats['params'] / 1e6:.2f} M ({stats['expert_params'] / 1e6:.2f} M in routed experts); "
        f"untied embeddings and lm_head |",
        f"| checkpoint | model.safetensors, bf16, per-expert tensors `model.layers.L.mlp.experts.E.*_proj.weight`, "
        f"{mib(facts['files'].get('model.safetensors', 0))} |",
        f"| training | {stats['train_seconds']:.0f} s on one H200, {stats['steps']} steps of {args.batch} x "
        f"{args.context} tokens ({stats['tokens'] / 1e6:.0f} M tokens), AdamW lr {args.lr:g} (warmup "
        f"{args.warmup} steps, cosine over the time budget to {args.min_lr_frac:g}x), weight decay "
        f"{args.weight_decay:g}, bf16 autocast, load-balancing loss {args.aux_loss:g} |",
        f"| final loss | train {stats['train_loss']:.3f}, held-out chapters {stats['val_loss']:.3f} "
        f"(cross-entropy, nats per token) |",
        "",
        f"The model saw its {corpus_facts['train_tokens'] / 1e6:.1f} M training tokens about "
        f"{stats['tokens'] / corpus_facts['train_tokens']:.0f} times, so the gap between the training and the",
        "held-out loss is memorization: the model recites and splices verses it has seen rather than",
        "generalizing. That is what a demo wants (grammatical, recognizable text from a few MB of weights);",
        "do not read the held-out loss as a language-modelling score.",
        "",
        "Loss during training (seconds, step, smoothed loss): "
        + ", ".join(f"{t:.0f}s/{s}: {l:.2f}" for t, s, l in stats["history"][:: max(1, len(stats['history']) // 12)]),
        "",
        "## Oracle",
        "",
        "`oracle.safetensors` (same format as tests/fixtures/olmoe_*/oracle.safetensors): `input_ids` I64 [T],",
        "`logits` F32 [T, vocab] of transformers' fp32 eager forward on CPU over the bf16 weights, `greedy` I64",
        f"[{args.oracle_tokens}], the argmax continuation (no eos stop). Prompt {facts['oracle_prompt']!r},",
        f"ids {','.join(map(str, facts['oracle_ids']))}; greedy {facts['oracle_greedy']} = {facts['oracle_greedy_text']!r}",
        f"(smallest top1-top2 logit margin {facts['oracle_margin']}).",
        "",
        "## Samples",
        "",
        f"transformers `generate`, up to {args.sample_tokens} new tokens; sampled = temperature 0.8, top-p 0.95,",
        f"seed {args.seed}. Chat prompts go through the chat template with the generation prompt.",
        "",
    ]
    for kind, label, mode, cont in sample_list:
        lines += [f"**{kind}, {mode}**: `{label}`", "", "```", cont.strip("\n") or "(empty)", "```", ""]
    with open(os.path.join(outdir, "README.md"), "w") as f:
        f.write("\n".join(lines))


# ----------------------------------------------------------------------------------------------------------


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", required=True, help="KJV dump from `bible -l100000 \"gen1:1-rev22:21\"`")
    p.add_argument("--out", required=True, help="output folder (flat; created)")
    p.add_argument("--minutes", type=float, default=4.5, help="training wall-clock budget")
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--kv-heads", type=int, default=0, help="0 = same as --heads (MHA)")
    p.add_argument("--experts", type=int, default=8)
    p.add_argument("--top-k", type=int, default=2)
    p.add_argument("--expert-intermediate", type=int, default=160)
    p.add_argument("--context", type=int, default=512, help="max_position_embeddings and training window")
    p.add_argument("--batch", type=int, default=64, help="sequences per step")
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--min-lr-frac", type=float, default=0.1)
    p.add_argument("--warmup", type=int, default=150)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--aux-loss", type=float, default=0.01, help="router load-balancing loss weight")
    p.add_argument("--dialogues", type=int, default=9000)
    p.add_argument("--val-chapters", type=int, default=20)
    p.add_argument("--experts-impls", default="grouped_mm,eager", help="transformers experts implementations to try")
    p.add_argument("--print-every", type=float, default=10.0, help="seconds between loss lines")
    p.add_argument("--sample-tokens", type=int, default=64)
    p.add_argument("--oracle-tokens", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--prep-only", action="store_true", help="check data preparation and the template; no training")
    args = p.parse_args()

    t_start = time.time()
    rng = random.Random(args.seed)
    verses = parse_kjv(args.corpus)
    with open(args.corpus, encoding="utf-8") as f:
        n_chars = len(f.read())
    train_docs, val_docs, dialogues = build_documents(verses, args.dialogues, args.val_chapters, rng)
    n_doc_chars, n_dia_chars = sum(map(len, train_docs)), sum(map(len, dialogues))
    print(f"corpus: {len(verses)} verses, {len(train_docs) + len(val_docs)} chapters "
          f"({len(val_docs)} held out), {len(dialogues)} dialogues; characters: chapters {n_doc_chars:,}, "
          f"dialogues {n_dia_chars:,} ({n_dia_chars / (n_doc_chars + n_dia_chars):.0%})")
    for d in dialogues[:4]:
        print("  dialogue: " + repr(d[:300]))
    check_template()
    if args.prep_only:
        return 0

    import torch
    import transformers

    print(f"python {sys.version.split()[0]}, torch {torch.__version__}, transformers {transformers.__version__}, "
          f"cuda {torch.cuda.is_available()}")
    os.makedirs(args.out, exist_ok=True)

    t0 = time.time()
    # The chat phrasing words appear in the corpus anyway; train merges on the chapters alone.
    tok = train_tokenizer(train_docs + val_docs, args.vocab)
    vocab = tok.get_vocab_size()
    save_tokenizer(tok, args.out, args.context)
    print(f"tokenizer: vocab {vocab}, trained in {time.time() - t0:.1f}s; "
          f"'In the beginning God created' -> {tok.encode('In the beginning God created').tokens}")
    probe = ["In the beginning God created the heaven and the earth.", render_turns(CHAT_PROMPTS[3], True),
             "Naïve café — 東京 🙂 \t  spaces\n\nnew", "<|user|>x<|end|><|endoftext|>"]
    for t in probe:
        back = tok.decode(tok.encode(t).ids, skip_special_tokens=False)
        if back != t:
            print(f"WARNING: decode(encode(s)) != s for {t!r}: {back!r}")
    try:
        check_tokenizer_with_transformers(args.out, tok, probe)
    except Exception as e:  # noqa: BLE001
        print(f"WARNING: AutoTokenizer check failed: {type(e).__name__}: {e}")

    eot = tok.token_to_id(EOT)
    docs = [(d, False) for d in train_docs] + [(d, True) for d in dialogues]
    rng.shuffle(docs)
    enc = tok.encode_batch([d for d, _ in docs])
    stream, n_dialogue_tokens = [], 0
    for (d, is_dialogue), e in zip(docs, enc):
        stream.append(eot)
        stream.extend(e.ids)
        n_dialogue_tokens += len(e.ids) + 1 if is_dialogue else 0
    val_stream = []
    for e in tok.encode_batch(val_docs):
        val_stream.append(eot)
        val_stream.extend(e.ids)
    corpus_facts = {"verses": len(verses), "chars": n_chars, "vocab": vocab, "train_tokens": len(stream),
                    "val_tokens": len(val_stream), "dialogue_share": n_dialogue_tokens / len(stream)}
    print(f"tokens: {len(stream):,} train ({corpus_facts['dialogue_share']:.0%} dialogues), {len(val_stream):,} "
          f"held out; data ready at {time.time() - t_start:.0f}s")

    model, stats = train(args, stream, val_stream, vocab)
    ref, facts = save_and_check(model, tok, args, args.out, stats)
    sample_list = []
    try:
        sample_list = samples(ref, tok, args)
    except Exception as e:  # noqa: BLE001
        print(f"WARNING: sampling failed: {type(e).__name__}: {e}")
    write_readme(args.out, args, corpus_facts, stats, facts, sample_list, ref.config)
    for f in sorted(os.listdir(args.out)):
        print(f"  {f}: {os.path.getsize(os.path.join(args.out, f)):,} bytes")
    print(f"done in {time.time() - t_start:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
