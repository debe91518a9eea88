#include "text/stop_strings.h"

#include <algorithm>

namespace coli::text {

namespace {
const std::string kNone;
}  // namespace

StopStrings::StopStrings(std::vector<std::string> stops) : stops_(std::move(stops)) {
    std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

const std::string& StopStrings::matched() const {
    return matched_ ? *matched_ : kNone;
}

std::string StopStrings::push(std::string_view piece) {
    if (stopped()) return {};
    held_.append(piece);
    // The earliest occurrence wins; among stop strings starting at the same place, the first given.
    size_t first = std::string::npos;
    for (const std::string& s : stops_) {
        const size_t at = held_.find(s);
        if (at < first) first = at, matched_ = &s;
    }
    if (first != std::string::npos) {
        std::string out = held_.substr(0, first);
        held_.clear();
        return out;
    }
    // Keep the longest suffix that is a proper prefix of some stop string; the rest is final.
    size_t keep = 0;
    for (const std::string& s : stops_)
        for (size_t n = std::min(s.size() - 1, held_.size()); n > keep; --n)
            if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
                keep = n;
                break;
            }
    std::string out = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
}

std::string StopStrings::finish() {
    std::string out;
    out.swap(held_);
    return out;
}

}  // namespace coli::text
