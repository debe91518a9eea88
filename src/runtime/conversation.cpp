#include "runtime/conversation.h"

#include <algorithm>

#include "core/error.h"
#include "text/stream_decoder.h"

namespace coli {

namespace {
// Tokens that end an assistant turn in chat templates, besides the model's eos ids.
constexpr const char* kTurnEndTokens[] = {"<|end|>", "<|eot_id|>", "<|im_end|>", "<|end_of_turn|>",
                                          "<end_of_turn>"};
}  // namespace

Conversation::Conversation(Model& model, const Checkpoint& ckpt, bool chat)
    : session_(model), tokenizer_(text::Tokenizer::load(ckpt.dir())), stop_ids_(eos_ids(ckpt)) {
    if (tokenizer_->eos_id()) stop_ids_.push_back(*tokenizer_->eos_id());
    if (chat) {
        template_ = std::make_unique<text::ChatTemplate>(text::ChatTemplate::load(ckpt.dir()));
        for (const char* t : kTurnEndTokens)
            if (auto id = tokenizer_->token_id(t)) stop_ids_.push_back(*id);
    }
}

void Conversation::reset() {
    session_.reset();
    cached_.clear();
    const bool keep_system = !messages_.empty() && messages_.front().role == "system";
    messages_.erase(messages_.begin() + (keep_system ? 1 : 0), messages_.end());
}

void Conversation::system_set(const std::string& text) {
    if (!messages_.empty() && messages_.front().role == "system")
        messages_.front().content = text;
    else
        messages_.insert(messages_.begin(), {"system", text});
}

std::vector<int32_t> Conversation::continue_with(const std::vector<int32_t>& ids, int max_tokens,
                                                 Sampler& sampler,
                                                 const std::function<void(const std::string&)>& on_text) {
    const auto mismatch = std::mismatch(cached_.begin(), cached_.end(), ids.begin(), ids.end());
    size_t common = static_cast<size_t>(mismatch.first - cached_.begin());
    // The cache cannot be rewound in general (recurrent states), so a diverging history starts over; the
    // last prompt token is always fed again so that its logits exist.
    if (common < cached_.size() || common == ids.size()) {
        session_.reset();
        cached_.clear();
        common = 0;
    }
    const std::span<const int32_t> fresh(ids.data() + common, ids.size() - common);
    text::StreamDecoder decoder(*tokenizer_, true);
    std::vector<int32_t> out = session_.generate(fresh, max_tokens, sampler, stop_ids_, [&](int32_t id) {
        if (on_text) on_text(decoder.push(id));
        return true;
    });
    if (on_text) on_text(decoder.finish());
    cached_ = ids;
    if (!out.empty()) cached_.insert(cached_.end(), out.begin(), out.end() - 1);  // the last was never fed
    return out;
}

void Conversation::complete(const std::string& text, int max_tokens, Sampler& sampler,
                            const std::function<void(const std::string&)>& on_text) {
    std::vector<int32_t> ids = tokenizer_->encode(text, true);
    if (tokenizer_->add_bos() && tokenizer_->bos_id() &&
        (ids.empty() || ids.front() != *tokenizer_->bos_id()))
        ids.insert(ids.begin(), *tokenizer_->bos_id());
    check(!ids.empty(), "the prompt is empty");
    continue_with(ids, max_tokens, sampler, on_text);
}

std::string Conversation::reply(const std::string& user_text, int max_tokens, Sampler& sampler,
                                const std::function<void(const std::string&)>& on_text) {
    check(template_ != nullptr, "this conversation was opened without a chat template");
    messages_.push_back({"user", user_text});
    // Special tokens in the rendered prompt are meant as tokens; the template already adds BOS if needed.
    const std::vector<int32_t> ids = tokenizer_->encode(template_->render(messages_, true), false);
    const std::vector<int32_t> out = continue_with(ids, max_tokens, sampler, on_text);
    std::vector<int32_t> content(out.begin(), out.end());
    if (!content.empty() && std::find(stop_ids_.begin(), stop_ids_.end(), content.back()) != stop_ids_.end())
        content.pop_back();
    std::string text = tokenizer_->decode(content, true);
    messages_.push_back({"assistant", text});
    return text;
}

}  // namespace coli
