#include "runtime/reply_text.h"

#include <algorithm>

namespace coli {

ReplyText::ReplyText(const text::Tokenizer& tok, std::vector<int32_t> end_ids,
                     const std::vector<std::string>& stop, std::function<bool(const std::string&)> on_text)
    : end_ids_(std::move(end_ids)), decoder_(tok, true), stops_(stop), on_text_(std::move(on_text)) {}

bool ReplyText::is_end(int32_t id) const {
    return std::find(end_ids_.begin(), end_ids_.end(), id) != end_ids_.end();
}

void ReplyText::emit(const std::string& piece) {
    if (cancelled_) return;
    text_ += piece;
    if (on_text_ && !on_text_(piece)) cancelled_ = true;
}

bool ReplyText::push(int32_t id) {
    ++tokens_;
    // An end token is not text: it ends the reply.
    if (is_end(id)) {
        ended_ = true;
        return false;
    }
    emit(stops_.push(decoder_.push(id)));
    return !stops_.stopped() && !cancelled_;
}

void ReplyText::finish(GenerateResult& result) {
    if (!stops_.stopped())
        if (const std::string rest = stops_.push(decoder_.finish()) + stops_.finish(); !rest.empty())
            emit(rest);
    result.text = text_;
    result.completion_tokens = tokens_;
    result.stop_matched = stops_.matched();
    if (stops_.stopped() || ended_)
        result.finish = FinishReason::stop;
    else if (cancelled_)
        result.finish = FinishReason::cancelled;
    else
        result.finish = FinishReason::length;
}

}  // namespace coli
