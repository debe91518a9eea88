// The text endpoints, in the shapes llama.cpp's server uses: POST /tokenize, /detokenize and
// /apply-template. They read the model's tokenizer and chat template only, so they answer at once on the
// HTTP thread, never waiting for the worker.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "server/request.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace coli::server {

// {"tokens": [id, ...]}, or with_pieces {"tokens": [{"id": id, "piece": text or [bytes]}, ...]}.
std::string tokenize_body(const text::Tokenizer& tokenizer, const TokenizeRequest& r);

// {"content": text}: the ids' bytes, special tokens included, invalid UTF-8 replaced by U+FFFD.
std::string detokenize_body(const text::Tokenizer& tokenizer, std::span<const int32_t> ids);

// {"prompt": text}: the conversation rendered with the template and the generation prompt, exactly the
// text /v1/chat/completions tokenizes. A template that refuses the conversation (raise_exception) is an
// ApiException (400) with the template's message.
std::string apply_template_body(const text::ChatTemplate& tmpl,
                                const std::vector<text::ChatMessage>& messages);

}  // namespace coli::server
