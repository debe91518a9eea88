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

    void system_set(const std::string& text);  // the system message of the next turns
    void reset();                              // forget the turns and the cache
    const Session& session() const { return session_; }
    const text::Tokenizer& tokenizer() const { return *tokenizer_; }

private:
    // Feeds ids after the longest prefix already in the cache (or from scratch), then generates.
    std::vector<int32_t> continue_with(const std::vector<int32_t>& ids, int max_tokens, Sampler& sampler,
                                       const std::function<void(const std::string&)>& on_text);

    Session session_;
    std::unique_ptr<text::Tokenizer> tokenizer_;
    std::unique_ptr<text::ChatTemplate> template_;
    std::vector<int32_t> stop_ids_;
    std::vector<text::ChatMessage> messages_;
    std::vector<int32_t> cached_;  // the tokens whose keys and values are in the session's cache
};

}  // namespace coli
