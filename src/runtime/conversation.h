// Text in, text out: a session plus the model's tokenizer and chat template. Keeps the KV cache across
// turns by feeding only the tokens that differ from what the cache already holds.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/prefix_cache.h"
#include "runtime/session.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace coli {

// Why a generation ended.
enum class FinishReason {
    stop,       // an end-of-turn token or a stop string
    length,     // max_tokens were generated
    cancelled,  // the caller's on_text returned false
};

// What one generate() call may do besides sampling.
struct GenerateOptions {
    int max_tokens = 0;             // most tokens to generate
    std::vector<std::string> stop;  // stop strings: the text ends just before the first one
    bool ignore_eos = false;        // keep going past end-of-turn tokens (benchmarks, load tests)
    // A prefix of the prompt worth a prefix-cache entry of its own, where later prompts are expected to
    // share it (the system message: chat_system_tokens); 0: none.
    int64_t keep_prefix = 0;
};

// What one generate() call produced.
struct GenerateResult {
    std::string text;               // the generated text, without the end token or stop string
    int64_t prompt_tokens = 0;      // tokens of the prompt, cached prefix included
    int64_t cached_tokens = 0;      // of those, tokens whose cache entries were reused
    int64_t completion_tokens = 0;  // tokens generated, the end token included
    FinishReason finish = FinishReason::length;
    std::string stop_matched;  // the stop string that ended the text, if one did
};

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

    // The ids of a completion prompt: the text encoded, with BOS when the tokenizer's config asks for it.
    std::vector<int32_t> prompt_ids(const std::string& text) const;
    // The ids of a chat rendered with the template, ready for the assistant's reply. Independent of the
    // turns this conversation keeps (a server sends the whole chat with every request).
    std::vector<int32_t> chat_ids(const std::vector<text::ChatMessage>& messages) const;
    // How many of ids (chat_ids(messages)) the chat's leading system message renders to by itself, where
    // those are a prefix of ids: what requests with the same system message share. 0 when the chat has
    // no system message or its render is no prefix of ids (the template or the tokenizer joins it to what
    // follows).
    int64_t chat_system_tokens(const std::vector<text::ChatMessage>& messages,
                               const std::vector<int32_t>& ids) const;

    // Keeps the states of prompts and their shared prefixes in a prefix cache (runtime/prefix_cache.h) and
    // restores them for later prompts that start alike; with opts.dir, reads back the entries kept there.
    void prefix_cache_open(const PrefixCacheOptions& opts, Engine& engine);
    const PrefixCache* prefix_cache() const { return prefix_cache_.get(); }  // null when not opened

    // Continues ids (from prompt_ids, or chat_ids when chat is true: end-of-turn tokens stop it too),
    // feeding only what follows the longest prefix already in the cache (the session's, or the prefix
    // cache's when opened, which keeps the state at the prompt's end and at opts.keep_prefix). on_text is
    // called once for each generated token but the end token, with the text that became final (possibly
    // empty; stop strings are held back until settled), and once more if text remains at the end; it may
    // return false to cancel. On an error the cache is dropped, never left stale.
    GenerateResult generate(const std::vector<int32_t>& ids, bool chat, const GenerateOptions& opts,
                            Sampler& sampler, const std::function<bool(const std::string&)>& on_text);

    void system_set(const std::string& text);  // the system message of the next turns
    void reset();                              // forget the turns and the cache
    const Session& session() const { return session_; }
    const text::Tokenizer& tokenizer() const { return *tokenizer_; }
    // The chat template, or null when opened without one. Like the tokenizer, never changed after
    // construction: other threads may read both while this one generates.
    const text::ChatTemplate* chat_template() const { return template_.get(); }

private:
    Session session_;
    std::unique_ptr<text::Tokenizer> tokenizer_;
    std::unique_ptr<text::ChatTemplate> template_;
    std::vector<int32_t> stop_ids_;      // the model's end-of-sequence ids: stop every generation
    std::vector<int32_t> turn_end_ids_;  // the template's end-of-turn tokens: stop chat replies too
    std::vector<text::ChatMessage> messages_;
    std::vector<int32_t> cached_;  // the tokens whose keys and values are in the session's cache
    std::unique_ptr<PrefixCache> prefix_cache_;  // null: states are not kept beyond cached_
};

}  // namespace coli
