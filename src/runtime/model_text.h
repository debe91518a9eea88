// A model's text interface: its tokenizer, its chat template, the ids that end a generation, and the
// prompts they make. Immutable once loaded, so any thread may use it while another generates.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace coli {

class ModelText {
public:
    // Loads the tokenizer (and the chat template when chat is true) from the checkpoint's directory.
    ModelText(const Checkpoint& ckpt, bool chat);

    // The ids of a completion prompt: the text encoded, with BOS when the tokenizer's config asks for it.
    std::vector<int32_t> prompt_ids(const std::string& text) const;
    // The ids of a chat rendered with the template, ready for the assistant's reply.
    std::vector<int32_t> chat_ids(const std::vector<text::ChatMessage>& messages) const;
    // How many of ids (chat_ids(messages)) the chat's leading system message renders to by itself, where
    // those are a prefix of ids: what requests with the same system message share. 0 when the chat has
    // no system message or its render is no prefix of ids (the template or the tokenizer joins it to what
    // follows).
    int64_t chat_system_tokens(const std::vector<text::ChatMessage>& messages,
                               const std::vector<int32_t>& ids) const;
    // The ids that end a generation: the model's end-of-sequence ids, and for a chat reply the template's
    // end-of-turn tokens too; none with ignore_eos.
    std::vector<int32_t> end_ids(bool chat, bool ignore_eos) const;

    const text::Tokenizer& tokenizer() const { return *tokenizer_; }
    const text::ChatTemplate* chat_template() const { return template_.get(); }  // null: opened without

private:
    std::unique_ptr<text::Tokenizer> tokenizer_;
    std::unique_ptr<text::ChatTemplate> template_;
    std::vector<int32_t> stop_ids_;      // the model's end-of-sequence ids: stop every generation
    std::vector<int32_t> turn_end_ids_;  // the template's end-of-turn tokens: stop chat replies too
};

}  // namespace coli
