#include "text/stream_decoder.h"

#include "text/utf8.h"

namespace coli::text {

std::string StreamDecoder::push(int32_t id) {
    const std::string& bytes = tokenizer_.token_bytes(id);
    if (skip_special_ && tokenizer_.is_special(id)) return {};
    pending_ += bytes;
    size_t keep = utf8_incomplete_tail(pending_);
    std::string_view ready = std::string_view(pending_).substr(0, pending_.size() - keep);
    std::string out = utf8_is_valid(ready) ? std::string(ready) : utf8_sanitize(ready);
    pending_.erase(0, ready.size());
    return out;
}

std::string StreamDecoder::finish() {
    std::string out = utf8_sanitize(pending_);
    pending_.clear();
    return out;
}

}  // namespace coli::text
