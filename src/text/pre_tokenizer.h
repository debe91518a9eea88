// Pre-tokenization: cutting normalized text into the pieces that BPE encodes one by one. The steps of a
// tokenizer.json `pre_tokenizer` (Split, ByteLevel's regex, Digits) each refine the pieces of the
// previous step; tiktoken is one Split that keeps only the matches.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "text/regex.h"

namespace coli::text {

// What happens to the matches of a split pattern (the HF SplitDelimiterBehavior names).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct SplitStep {
    enum class Kind { kRegex, kAsciiDigits };
    Kind kind = Kind::kRegex;
    std::shared_ptr<const Regex> regex;  // kRegex
    SplitBehavior behavior = SplitBehavior::kIsolated;
    bool invert = false;  // the gaps between matches are what `behavior` applies to
};

// A piece: [begin, end) code point indices into the decoded text.
struct Piece {
    uint32_t begin;
    uint32_t end;
};

// The text decoded once: code points and the byte offset where each starts (one extra at the end).
struct DecodedText {
    std::vector<char32_t> cps;
    std::vector<uint32_t> offsets;
    void assign(std::string_view utf8);  // valid UTF-8
};

// Applies `steps` in order to the whole of `text`, leaving the final pieces in `out`.
void pre_tokenize(const std::vector<SplitStep>& steps, const DecodedText& text, std::vector<Piece>& out);

// GPT-2's pattern, which the ByteLevel pre-tokenizer splits with when `use_regex` is true.
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace coli::text
