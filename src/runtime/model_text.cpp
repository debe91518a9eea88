#include "runtime/model_text.h"

#include <algorithm>

#include "core/error.h"
#include "runtime/session.h"

namespace coli {

namespace {
// Tokens that end an assistant turn in chat templates, besides the model's eos ids.
constexpr const char* kTurnEndTokens[] = {"<|end|>", "<|eot_id|>", "<|im_end|>", "<|end_of_turn|>",
                                          "<end_of_turn>"};
}  // namespace

ModelText::ModelText(const Checkpoint& ckpt, bool chat)
    : tokenizer_(text::Tokenizer::load(ckpt.dir())), stop_ids_(eos_ids(ckpt)) {
    if (tokenizer_->eos_id()) stop_ids_.push_back(*tokenizer_->eos_id());
    if (chat) {
        template_ = std::make_unique<text::ChatTemplate>(text::ChatTemplate::load(ckpt.dir()));
        for (const char* t : kTurnEndTokens)
            if (auto id = tokenizer_->token_id(t)) turn_end_ids_.push_back(*id);
    }
}

std::vector<int32_t> ModelText::prompt_ids(const std::string& text) const {
    std::vector<int32_t> ids = tokenizer_->encode(text, true);
    if (tokenizer_->add_bos() && tokenizer_->bos_id() &&
        (ids.empty() || ids.front() != *tokenizer_->bos_id()))
        ids.insert(ids.begin(), *tokenizer_->bos_id());
    return ids;
}

std::vector<int32_t> ModelText::chat_ids(const std::vector<text::ChatMessage>& messages) const {
    check(template_ != nullptr, "this conversation was opened without a chat template");
    // Special tokens in the rendered prompt are meant as tokens; the template already adds BOS if needed.
    return tokenizer_->encode(template_->render(messages, true), false);
}

int64_t ModelText::chat_system_tokens(const std::vector<text::ChatMessage>& messages,
                                      const std::vector<int32_t>& ids) const {
    if (!template_ || messages.empty() || messages.front().role != "system") return 0;
    std::vector<int32_t> system;
    try {
        system = tokenizer_->encode(template_->render({messages.front()}, false), false);
    } catch (const Error&) {  // a template that wants more than a system message: no boundary
        return 0;
    }
    const bool prefix = system.size() < ids.size() && std::equal(system.begin(), system.end(), ids.begin());
    return prefix ? static_cast<int64_t>(system.size()) : 0;
}

std::vector<int32_t> ModelText::end_ids(bool chat, bool ignore_eos) const {
    if (ignore_eos) return {};
    std::vector<int32_t> ids = stop_ids_;
    if (chat) ids.insert(ids.end(), turn_end_ids_.begin(), turn_end_ids_.end());
    return ids;
}

}  // namespace coli
