#include "text/added_tokens.h"

#include <algorithm>

#include "text/unicode.h"
#include "text/utf8.h"

namespace coli::text {

namespace {

// The code point that ends at byte `end` of valid UTF-8 text, and where it starts.
std::pair<char32_t, size_t> last_code_point(std::string_view text, size_t end) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) --start;
    return {utf8_decode(text.substr(start, end - start)).cp, start};
}

bool is_space(char32_t cp) {
    return unicode_properties(cp).white_space();
}

// Rust's char::is_alphanumeric, approximated by the letter and number categories.
bool is_word_char(char32_t cp) {
    constexpr CategoryMask kWord = category_bit(GeneralCategory::Lu) | category_bit(GeneralCategory::Ll) |
                                   category_bit(GeneralCategory::Lt) | category_bit(GeneralCategory::Lm) |
                                   category_bit(GeneralCategory::Lo) | category_bit(GeneralCategory::Nd) |
                                   category_bit(GeneralCategory::Nl) | category_bit(GeneralCategory::No);
    return (kWord & category_bit(unicode_properties(cp).category())) != 0;
}

}  // namespace

int32_t AddedTokenMatcher::child(int32_t node, uint8_t byte) const {
    const auto& ch = nodes_[node].children;
    auto it = std::lower_bound(ch.begin(), ch.end(), std::pair<uint8_t, int32_t>{byte, -1});
    return (it != ch.end() && it->first == byte) ? it->second : -1;
}

void AddedTokenMatcher::add(const AddedToken& token) {
    if (token.content.empty()) return;
    int32_t node = 0;
    for (char c : token.content) {
        auto byte = static_cast<uint8_t>(c);
        int32_t next = child(node, byte);
        if (next < 0) {
            next = static_cast<int32_t>(nodes_.size());
            nodes_.emplace_back();
            auto& ch = nodes_[node].children;
            ch.insert(std::lower_bound(ch.begin(), ch.end(), std::pair<uint8_t, int32_t>{byte, -1}),
                      {byte, next});
        }
        node = next;
    }
    if (nodes_[node].token >= 0) return;  // the same content twice: the first one wins
    nodes_[node].token = static_cast<int32_t>(tokens_.size());
    tokens_.push_back(token);
    first_byte_[static_cast<uint8_t>(token.content[0])] = true;
}

int32_t AddedTokenMatcher::longest_at(std::string_view text, size_t pos, size_t end) const {
    int32_t node = 0;
    int32_t found = -1;
    for (size_t i = pos; i < end; ++i) {
        node = child(node, static_cast<uint8_t>(text[i]));
        if (node < 0) break;
        if (nodes_[node].token >= 0) found = nodes_[node].token;
    }
    return found;
}

void AddedTokenMatcher::split(std::string_view text, size_t begin, size_t end,
                              std::vector<Segment>& out) const {
    size_t plain_start = begin;  // where the text not yet emitted starts
    size_t pos = begin;
    while (pos < end) {
        if (!first_byte_[static_cast<uint8_t>(text[pos])]) {
            ++pos;
            continue;
        }
        int32_t t = longest_at(text, pos, end);
        if (t < 0) {
            ++pos;
            continue;
        }
        const AddedToken& tok = tokens_[t];
        size_t start = pos;
        size_t stop = pos + tok.content.size();
        if (tok.single_word) {
            bool word_before = start > begin && is_word_char(last_code_point(text, start).first);
            bool word_after = stop < end && is_word_char(utf8_decode(text.substr(stop, end - stop)).cp);
            if (word_before || word_after) {
                ++pos;
                continue;
            }
        }
        if (tok.lstrip) {
            while (start > plain_start) {
                auto [cp, cp_start] = last_code_point(text, start);
                if (!is_space(cp)) break;
                start = cp_start;
            }
        }
        if (tok.rstrip) {
            while (stop < end) {
                Utf8Step step = utf8_decode(text.substr(stop, end - stop));
                if (!is_space(step.cp)) break;
                stop += step.length;
            }
        }
        if (plain_start < start) out.push_back({plain_start, start, -1});
        out.push_back({start, stop, tok.id});
        plain_start = pos = stop;
    }
    if (plain_start < end) out.push_back({plain_start, end, -1});
}

}  // namespace coli::text
