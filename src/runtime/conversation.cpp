#include "runtime/conversation.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "text/stop_strings.h"
#include "text/stream_decoder.h"

namespace coli {

Conversation::Conversation(Model& model, const Checkpoint& ckpt, bool chat)
    : session_(model), text_(ckpt, chat) {}

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

void Conversation::prefix_cache_open(const PrefixCacheOptions& opts, Engine& engine) {
    prefix_cache_ = std::make_unique<PrefixCache>(opts, prefix_cache_fingerprint(engine, session_.state()));
}

GenerateResult Conversation::generate(const std::vector<int32_t>& ids, bool chat, const GenerateOptions& opts,
                                      Sampler& sampler,
                                      const std::function<bool(const std::string&)>& on_text) {
    check(!ids.empty(), "the prompt is empty");
    size_t common = reusable_prefix(cached_, ids);
    if (common == 0) {  // a diverging history starts over
        session_.reset();
        cached_.clear();
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
    GenerateResult result;
    result.prompt_tokens = static_cast<int64_t>(ids.size());
    result.cached_tokens = static_cast<int64_t>(reused);
    ReplyText reply(text_.tokenizer(), text_.end_ids(chat, opts.ignore_eos), opts.stop, on_text);
    const std::span<const int32_t> fresh(ids.data() + common, ids.size() - common);
    std::vector<int32_t> out;
    try {
        out = session_.generate(
            fresh, opts.max_tokens, sampler, {}, [&](int32_t id) { return reply.push(id); },
            [&] {
                if (prefix_cache_) prefix_cache_->insert(session_, ids);
            });
    } catch (...) {
        session_.reset();  // the cache may hold part of this prompt: it no longer matches cached_
        cached_.clear();
        throw;
    }
    reply.finish(result);
    cached_ = ids;
    if (!out.empty()) cached_.insert(cached_.end(), out.begin(), out.end() - 1);  // the last was never fed
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
    std::vector<int32_t> ids = text_.chat_ids(messages_);
    // Drop the oldest turns (a user message and the replies up to the next one) while the reply has no room;
    // the new message (the last, a user message) always stays.
    while (static_cast<int64_t>(ids.size()) + room > ctx && messages_.size() > first + 1) {
        const auto oldest = messages_.begin() + static_cast<std::ptrdiff_t>(first);
        const auto next_user = std::find_if(oldest + 1, messages_.end(),
                                            [](const text::ChatMessage& m) { return m.role == "user"; });
        messages_.erase(oldest, next_user);
        ++turn.dropped_turns;
        ids = text_.chat_ids(messages_);
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
