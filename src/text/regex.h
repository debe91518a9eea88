// A backtracking regex engine over code points for the pre-tokenizer patterns of tokenizer.json and
// tiktoken (Oniguruma / fancy-regex syntax and leftmost-first semantics). std::regex has no Unicode
// classes, so this is ours. Supported: alternation, (?:...), (?i:...), (?=...), (?!...), (?>...),
// classes with ranges, negation, nesting, && intersection, \p{..}/\P{..} (general categories and Han),
// \s \S, ., quantifiers * + ? {n} {n,} {n,m} with lazy (?) and possessive (+) forms, escapes \r \n \t
// \f \v \xHH \x{..} \uHHHH and escaped punctuation. Anything else (backreferences, lookbehind, anchors,
// \w, \d, \b, named classes) is a coli::Error naming the construct.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/char_set.h"

namespace coli::text {

class Regex {
public:
    // Compiles `pattern` (UTF-8). Throws coli::Error naming the unsupported construct and the pattern.
    explicit Regex(std::string_view pattern);
    ~Regex();
    Regex(Regex&&) noexcept;
    Regex& operator=(Regex&&) noexcept;

    // The first match starting at or after `from`, as [start, end) code point indices. An empty match
    // is reported as such; the caller steps past it.
    std::optional<std::pair<size_t, size_t>> find(std::span<const char32_t> text, size_t from) const;

    const std::string& pattern() const { return pattern_; }

    struct Program;

private:
    std::string pattern_;
    std::unique_ptr<Program> program_;
};

}  // namespace coli::text
