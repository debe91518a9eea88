// Drives a running `coli serve` with the official OpenAI and Anthropic SDKs (pinned by package-lock.json):
// streaming and non-streaming chat, completions, Anthropic messages, stop strings, seeds, error cases, and
// concurrent clients.
// Usage: node clients.mjs BASE_URL MODEL_ID   (BASE_URL like http://127.0.0.1:8080)
// Prints one line per check and exits non-zero when any fails.
import assert from "node:assert/strict";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";

const [base, model] = process.argv.slice(2);
if (!base || !model) {
  console.error("usage: node clients.mjs BASE_URL MODEL_ID");
  process.exit(2);
}
// No retries: a 429 or 5xx must show up as it is, not be hidden by the SDK trying again.
const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: "unused", maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: base, apiKey: "unused", maxRetries: 0 });

const kMaxTokens = 12;
const chatMessages = [
  { role: "system", content: "You are a helpful assistant." },
  { role: "user", content: "Who created the heaven and the earth?" },
];
const prompt = "In the beginning God created";

let passed = 0;
let failed = 0;
async function check(name, fn) {
  try {
    await fn();
    passed++;
    console.log(`ok   ${name}`);
  } catch (err) {
    failed++;
    console.log(`FAIL ${name}: ${err.stack ?? err}`);
  }
}

function usageCheck(u, maxTokens) {
  assert.ok(u.prompt_tokens > 0, "prompt_tokens > 0");
  assert.ok(u.completion_tokens > 0 && u.completion_tokens <= maxTokens, `completion_tokens in [1, ${maxTokens}]`);
  assert.equal(u.total_tokens, u.prompt_tokens + u.completion_tokens);
}

// Expects `promise` to reject with the SDK's error class for `status`; returns the error.
async function rejects(promise, ErrorClass, status) {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof ErrorClass, `expected ${ErrorClass.name}, got ${err?.constructor?.name}: ${err}`);
    assert.equal(err.status, status);
    return err;
  }
  assert.fail(`expected ${ErrorClass.name} (${status}), the call succeeded`);
}

let chatText = "";
let completionText = "";

await check("openai models.list names the served model", async () => {
  const ids = [];
  for await (const m of openai.models.list()) ids.push(m.id);
  assert.deepEqual(ids, [model]);
});

await check("openai chat, non-streaming", async () => {
  const r = await openai.chat.completions.create({ model, messages: chatMessages, max_tokens: kMaxTokens, temperature: 0 });
  assert.equal(r.object, "chat.completion");
  assert.equal(r.model, model);
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, "assistant");
  assert.equal(typeof r.choices[0].message.content, "string");
  assert.ok(r.choices[0].message.content.length > 0, "some text");
  assert.ok(["stop", "length"].includes(r.choices[0].finish_reason));
  usageCheck(r.usage, kMaxTokens);
  chatText = r.choices[0].message.content;
});

await check("openai chat, streaming: same greedy text, usage chunk", async () => {
  const stream = await openai.chat.completions.create({
    model, messages: chatMessages, max_tokens: kMaxTokens, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  let text = "";
  let finish = null;
  let usage = null;
  let chunks = 0;
  const ids = new Set();
  for await (const chunk of stream) {
    chunks++;
    ids.add(chunk.id);
    assert.equal(chunk.object, "chat.completion.chunk");
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta?.content ?? "";
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.ok(chunks > 2, "several chunks");
  assert.equal(ids.size, 1, "one id for every chunk");
  assert.equal(text, chatText);
  assert.ok(["stop", "length"].includes(finish));
  assert.ok(usage, "a usage chunk");
  usageCheck(usage, kMaxTokens);
});

await check("openai completions, non-streaming", async () => {
  const r = await openai.completions.create({ model, prompt, max_tokens: kMaxTokens, temperature: 0 });
  assert.equal(r.object, "text_completion");
  assert.equal(r.choices.length, 1);
  assert.ok(r.choices[0].text.length > 0, "some text");
  usageCheck(r.usage, kMaxTokens);
  completionText = r.choices[0].text;
});

await check("openai completions, streaming: same greedy text", async () => {
  const stream = await openai.completions.create({ model, prompt, max_tokens: kMaxTokens, temperature: 0, stream: true });
  let text = "";
  let finish = null;
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      text += c.text;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(text, completionText);
  assert.ok(["stop", "length"].includes(finish));
});

await check("openai completions: a stop string cuts the text before it", async () => {
  // A stop string taken from the middle of the greedy text: the answer must end just before it.
  const words = completionText.split(" ").filter((w) => w.length > 0);
  assert.ok(words.length >= 3, `need a few words, got '${completionText}'`);
  const stop = ` ${words[2]}`;
  const expected = completionText.slice(0, completionText.indexOf(stop));
  const r = await openai.completions.create({ model, prompt, max_tokens: kMaxTokens, temperature: 0, stop: [stop] });
  assert.equal(r.choices[0].text, expected);
  assert.equal(r.choices[0].finish_reason, "stop");
});

await check("openai: the same seed gives the same sampled text", async () => {
  const ask = () => openai.completions.create({ model, prompt, max_tokens: kMaxTokens, temperature: 1, top_p: 0.9, seed: 1234 });
  const [a, b] = [await ask(), await ask()];
  assert.equal(a.choices[0].text, b.choices[0].text);
});

await check("openai error: unknown model is a NotFoundError with code model_not_found", async () => {
  const err = await rejects(openai.chat.completions.create({ model: "no-such-model", messages: chatMessages }),
                            OpenAI.NotFoundError, 404);
  assert.equal(err.code, "model_not_found");
  assert.equal(err.param, "model");
});

await check("openai error: max_tokens 0 is a BadRequestError naming the parameter", async () => {
  const err = await rejects(openai.completions.create({ model, prompt, max_tokens: 0 }), OpenAI.BadRequestError, 400);
  assert.equal(err.param, "max_tokens");
  assert.equal(err.type, "invalid_request_error");
});

let messageText = "";
await check("anthropic messages, non-streaming", async () => {
  const m = await anthropic.messages.create({ model, max_tokens: kMaxTokens, temperature: 0, system: chatMessages[0].content,
                                              messages: [chatMessages[1]] });
  assert.equal(m.type, "message");
  assert.equal(m.role, "assistant");
  assert.equal(m.model, model);
  assert.equal(m.content.length, 1);
  assert.equal(m.content[0].type, "text");
  assert.ok(m.content[0].text.length > 0, "some text");
  assert.ok(["end_turn", "max_tokens"].includes(m.stop_reason));
  assert.ok(m.usage.input_tokens > 0);
  assert.ok(m.usage.output_tokens > 0 && m.usage.output_tokens <= kMaxTokens);
  messageText = m.content[0].text;
  // The same conversation through both APIs renders the same prompt: the same greedy answer.
  assert.equal(messageText, chatText);
});

await check("anthropic messages, streaming: events and final message", async () => {
  const stream = anthropic.messages.stream({ model, max_tokens: kMaxTokens, temperature: 0, system: chatMessages[0].content,
                                             messages: [chatMessages[1]] });
  let text = "";
  stream.on("text", (t) => { text += t; });
  const m = await stream.finalMessage();
  assert.equal(text, messageText);
  assert.equal(m.content[0].text, messageText);
  assert.ok(["end_turn", "max_tokens"].includes(m.stop_reason));
  assert.ok(m.usage.output_tokens > 0 && m.usage.output_tokens <= kMaxTokens);
});

await check("anthropic: a stop sequence ends the message with stop_reason stop_sequence", async () => {
  const words = messageText.split(" ").filter((w) => w.length > 0);
  assert.ok(words.length >= 3, `need a few words, got '${messageText}'`);
  const stop = ` ${words[2]}`;
  const m = await anthropic.messages.create({ model, max_tokens: kMaxTokens, temperature: 0, system: chatMessages[0].content,
                                              messages: [chatMessages[1]], stop_sequences: [stop] });
  assert.equal(m.content[0].text, messageText.slice(0, messageText.indexOf(stop)));
  assert.equal(m.stop_reason, "stop_sequence");
  assert.equal(m.stop_sequence, stop);
});

await check("anthropic error: unknown model is a NotFoundError in Anthropic's error shape", async () => {
  const err = await rejects(anthropic.messages.create({ model: "no-such-model", max_tokens: kMaxTokens,
                                                        messages: [chatMessages[1]] }),
                            Anthropic.NotFoundError, 404);
  assert.equal(err.error?.type, "error");
  assert.equal(err.error?.error?.type, "not_found_error");
});

await check("anthropic error: a wrong type is a BadRequestError", async () => {
  const err = await rejects(anthropic.messages.create({ model, max_tokens: "many", messages: [chatMessages[1]] }),
                            Anthropic.BadRequestError, 400);
  assert.equal(err.error?.error?.type, "invalid_request_error");
});

await check("concurrent clients (batched by the server): each streamed answer equals its answer alone", async () => {
  // Eight requests at once through both SDKs, streaming; the server runs them in one batch.
  const openaiStream = async () => {
    const stream = await openai.chat.completions.create({
      model, messages: chatMessages, max_tokens: kMaxTokens, temperature: 0, stream: true });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
    return text;
  };
  const completionStream = async () => {
    const stream = await openai.completions.create({ model, prompt, max_tokens: kMaxTokens, temperature: 0, stream: true });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.text ?? "";
    return text;
  };
  const anthropicStream = async () => {
    const stream = anthropic.messages.stream({ model, max_tokens: kMaxTokens, temperature: 0,
                                               system: chatMessages[0].content, messages: [chatMessages[1]] });
    return (await stream.finalMessage()).content[0].text;
  };
  const kinds = [[openaiStream, chatText], [completionStream, completionText], [anthropicStream, messageText]];
  const runs = Array.from({ length: 8 }, (_, i) => kinds[i % kinds.length]);
  const texts = await Promise.all(runs.map(([fn]) => fn()));
  texts.forEach((t, i) => assert.equal(t, runs[i][1], `request ${i}`));
});

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
