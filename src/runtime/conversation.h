// Text in, text out: a session plus the model's tokenizer and chat template. Keeps the KV cache across
// turns by feeding only the tokens that differ from what the cache already holds.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

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

class Conversation {
public:
    // Loads the tokenizer (and the chat template when chat is true) from the model's directory.
    Conversation(Model& model, const Checkpoint& ckpt, bool chat);

    // Plain completion: encodes text (with BOS when the tokenizer's config asks for it) and continues it.
    // on_text receives the generated text as it becomes complete UTF-8.
    void complete(const std::string& text, int max_tokens, Sampler& sampler,
                  const std::function<void(const std::string&)>& on_text);

    // One chat turn: appends the user message, renders the whole conversation with the template,
    // generates the assistant's reply and appends it. Returns the reply.
    std::string reply(const std::string& user_text, int max_tokens, Sampler& sampler,
                      const std::function<void(const std::string&)>& on_text);

    // The ids of a completion prompt: the text encoded, with BOS when the tokenizer's config asks for it.
    std::vector<int32_t> prompt_ids(const std::string& text) const;
    // The ids of a chat rendered with the template, ready for the assistant's reply. Independent of the
    // turns this conversation keeps (a server sends the whole chat with every request).
    std::vector<int32_t> chat_ids(const std::vector<text::ChatMessage>& messages) const;

    // Continues ids (from prompt_ids, or chat_ids when chat is true: end-of-turn tokens stop it too),
    // feeding only what follows the longest prefix already in the cache. on_text is called once for each
    // generated token but the end token, with the text that became final (possibly empty; stop strings are
    // held back until settled), and once more if text remains at the end; it may return false to cancel.
    // On an error the cache is dropped, never left stale.
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
};

}  // namespace coli
