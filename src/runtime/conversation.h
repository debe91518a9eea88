// Text in, text out: a session plus the model's tokenizer and chat template. Keeps the KV cache across
// turns by feeding only the tokens that differ from what the cache already holds.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/model_text.h"
#include "runtime/prefix_cache.h"
#include "runtime/reply_text.h"
#include "runtime/session.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace coli {

// What one chat turn did besides generating.
struct TurnResult {
    GenerateResult generated;
    int dropped_turns = 0;     // the oldest user/assistant turns dropped so that this one fits the context
    bool context_end = false;  // the reply stopped because the context is full
};

class Conversation {
public:
    // Loads the tokenizer (and the chat template when chat is true) from the model's directory.
    Conversation(Model& model, const Checkpoint& ckpt, bool chat);

    // One chat turn: appends the user message, renders the whole conversation with the template, generates
    // the assistant's reply and appends it (also when on_text stopped it: the part shown). When the
    // conversation does not leave room for the reply (max_tokens, at most half the context), the oldest
    // turns are dropped first, never the system message; a reply that reaches the context's end stops
    // there. A message that does not fit the context by itself is an error, and the conversation stays as
    // it was.
    TurnResult reply(const std::string& user_text, int max_tokens, Sampler& sampler,
                     const std::function<bool(const std::string&)>& on_text);

    // Continues ids (from text().prompt_ids, or text().chat_ids when chat is true: end-of-turn tokens stop
    // it too), feeding only what follows the longest prefix already in the cache (the session's, or the
    // prefix cache's when opened, which keeps the state at the prompt's end and at opts.keep_prefix).
    // on_text is called once for each generated token but the end token, with the text that became final
    // (possibly empty; stop strings are held back until settled), and once more if text remains at the end;
    // it may return false to cancel. On an error the cache is dropped, never left stale.
    GenerateResult generate(const std::vector<int32_t>& ids, bool chat, const GenerateOptions& opts,
                            Sampler& sampler, const std::function<bool(const std::string&)>& on_text);

    void system_set(const std::string& text);  // the system message of the next turns
    void reset();                              // forget the turns and the cache
    const Session& session() const { return session_; }
    // The tokenizer, chat template and prompts (model_text.h): never changed after construction.
    const ModelText& text() const { return text_; }

    // Keeps the states of prompts and their shared prefixes in a prefix cache (runtime/prefix_cache.h) and
    // restores them for later prompts that start alike; with opts.dir, reads back the entries kept there.
    void prefix_cache_open(const PrefixCacheOptions& opts, Engine& engine);
    const PrefixCache* prefix_cache() const { return prefix_cache_.get(); }  // null when not opened

private:
    Session session_;
    ModelText text_;
    std::vector<text::ChatMessage> messages_;
    std::vector<int32_t> cached_;  // the tokens whose keys and values are in the session's cache
    std::unique_ptr<PrefixCache> prefix_cache_;  // null: states are not kept beyond cached_
};

}  // namespace coli
