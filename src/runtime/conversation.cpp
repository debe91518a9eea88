#include "runtime/conversation.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "text/stop_strings.h"
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
            if (auto id = tokenizer_->token_id(t)) turn_end_ids_.push_back(*id);
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

std::vector<int32_t> Conversation::prompt_ids(const std::string& text) const {
    std::vector<int32_t> ids = tokenizer_->encode(text, true);
    if (tokenizer_->add_bos() && tokenizer_->bos_id() &&
        (ids.empty() || ids.front() != *tokenizer_->bos_id()))
        ids.insert(ids.begin(), *tokenizer_->bos_id());
    return ids;
}

std::vector<int32_t> Conversation::chat_ids(const std::vector<text::ChatMessage>& messages) const {
    check(template_ != nullptr, "this conversation was opened without a chat template");
    // Special tokens in the rendered prompt are meant as tokens; the template already adds BOS if needed.
    return tokenizer_->encode(template_->render(messages, true), false);
}

int64_t Conversation::chat_system_tokens(const std::vector<text::ChatMessage>& messages,
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

void Conversation::prefix_cache_open(const PrefixCacheOptions& opts, Engine& engine) {
    prefix_cache_ = std::make_unique<PrefixCache>(opts, prefix_cache_fingerprint(engine, session_.state()));
}

GenerateResult Conversation::generate(const std::vector<int32_t>& ids, bool chat, const GenerateOptions& opts,
                                      Sampler& sampler,
                                      const std::function<bool(const std::string&)>& on_text) {
    check(!ids.empty(), "the prompt is empty");
    const auto mismatch = std::mismatch(cached_.begin(), cached_.end(), ids.begin(), ids.end());
    size_t common = static_cast<size_t>(mismatch.first - cached_.begin());
    // The cache cannot be rewound in general (recurrent states), so a diverging history starts over; the
    // last prompt token is always fed again so that its logits exist.
    if (common < cached_.size() || common == ids.size()) {
        session_.reset();
        cached_.clear();
        common = 0;
    }
    size_t reused = common;
    if (prefix_cache_) {
        try {
            const PrefixFill fill =
                prefix_cache_->prefill(session_, ids, static_cast<int64_t>(common), opts.keep_prefix);
            common = static_cast<size_t>(fill.held);
            reused = static_cast<size_t>(fill.reused);
        } catch (...) {
            session_.reset();  // the state may hold part of a prefix: it no longer matches cached_
            cached_.clear();
            throw;
        }
        cached_.assign(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(common));
    }
    std::vector<int32_t> stop_ids;
    if (!opts.ignore_eos) {
        stop_ids = stop_ids_;
        if (chat) stop_ids.insert(stop_ids.end(), turn_end_ids_.begin(), turn_end_ids_.end());
    }
    GenerateResult result;
    result.prompt_tokens = static_cast<int64_t>(ids.size());
    result.cached_tokens = static_cast<int64_t>(reused);
    text::StreamDecoder decoder(*tokenizer_, true);
    text::StopStrings stops(opts.stop);
    bool cancelled = false;
    const auto emit = [&](const std::string& piece) {
        if (cancelled) return;
        result.text += piece;
        if (on_text && !on_text(piece)) cancelled = true;
    };
    const std::span<const int32_t> fresh(ids.data() + common, ids.size() - common);
    std::vector<int32_t> out;
    try {
        out = session_.generate(
            fresh, opts.max_tokens, sampler, stop_ids,
            [&](int32_t id) {
                // An end token is not text: it ends the reply.
                if (std::find(stop_ids.begin(), stop_ids.end(), id) != stop_ids.end()) return true;
                emit(stops.push(decoder.push(id)));
                return !stops.stopped() && !cancelled;
            },
            [&] {
                if (prefix_cache_) prefix_cache_->insert(session_, ids);
            });
    } catch (...) {
        session_.reset();  // the cache may hold part of this prompt: it no longer matches cached_
        cached_.clear();
        throw;
    }
    if (!stops.stopped())
        if (const std::string rest = stops.push(decoder.finish()) + stops.finish(); !rest.empty()) emit(rest);
    cached_ = ids;
    if (!out.empty()) cached_.insert(cached_.end(), out.begin(), out.end() - 1);  // the last was never fed
    result.completion_tokens = static_cast<int64_t>(out.size());
    result.stop_matched = stops.matched();
    const bool ended =
        !out.empty() && std::find(stop_ids.begin(), stop_ids.end(), out.back()) != stop_ids.end();
    if (stops.stopped() || ended)
        result.finish = FinishReason::stop;
    else if (cancelled)
        result.finish = FinishReason::cancelled;
    else
        result.finish = FinishReason::length;
    return result;
}

TurnResult Conversation::reply(const std::string& user_text, int max_tokens, Sampler& sampler,
                               const std::function<bool(const std::string&)>& on_text) {
    const int64_t ctx = session_.model().summary().max_ctx;
    const int64_t room = std::min<int64_t>(max_tokens, ctx / 2);  // what the reply needs left in the context
    const size_t first = !messages_.empty() && messages_.front().role == "system";  // the oldest turn
    TurnResult turn;
    const std::vector<text::ChatMessage> before = messages_;  // restored when the turn fails
    messages_.push_back({"user", user_text});
    std::vector<int32_t> ids = chat_ids(messages_);
    // Drop the oldest turns (a user message and the replies up to the next one) while the reply has no room;
    // the new message (the last, a user message) always stays.
    while (static_cast<int64_t>(ids.size()) + room > ctx && messages_.size() > first + 1) {
        const auto oldest = messages_.begin() + static_cast<std::ptrdiff_t>(first);
        const auto next_user = std::find_if(oldest + 1, messages_.end(),
                                            [](const text::ChatMessage& m) { return m.role == "user"; });
        messages_.erase(oldest, next_user);
        ++turn.dropped_turns;
        ids = chat_ids(messages_);
    }
    if (static_cast<int64_t>(ids.size()) >= ctx) {
        messages_ = before;
        throw Error(fmt::format("the message is {} tokens with the chat template, the context is {}",
                                ids.size(), ctx));
    }
    const int limit = static_cast<int>(std::min<int64_t>(max_tokens, ctx - static_cast<int64_t>(ids.size())));
    try {
        turn.generated = generate(ids, true, GenerateOptions{limit, {}, false}, sampler, on_text);
    } catch (...) {
        messages_ = before;
        throw;
    }
    turn.context_end = limit < max_tokens && turn.generated.finish == FinishReason::length;
    messages_.push_back({"assistant", turn.generated.text});
    return turn;
}

}  // namespace coli
