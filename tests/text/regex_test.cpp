#include "text/regex.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "text/utf8.h"

namespace coli::text {
namespace {

std::vector<char32_t> cps(std::string_view s) {
    std::vector<char32_t> out;
    for (size_t i = 0; i < s.size();) {
        Utf8Step st = utf8_decode(s.substr(i));
        out.push_back(st.cp);
        i += st.length;
    }
    return out;
}

// All matches of `pattern` in `text`, as UTF-8 strings.
std::vector<std::string> matches(std::string_view pattern, std::string_view text) {
    Regex re(pattern);
    auto t = cps(text);
    std::vector<std::string> out;
    size_t from = 0;
    while (auto m = re.find(t, from)) {
        std::string s;
        for (size_t i = m->first; i < m->second; ++i) utf8_append(s, t[i]);
        out.push_back(s);
        from = m->second > m->first ? m->second : m->second + 1;
    }
    return out;
}

using V = std::vector<std::string>;

TEST(Regex, Gpt2Pattern) {
    constexpr std::string_view kPat =
        R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
    EXPECT_EQ(matches(kPat, "Hello world's 123  x\n\n"),
              (V{"Hello", " world", "'s", " 123", " ", " x", "\n\n"}));
    EXPECT_EQ(matches(kPat, "a   b"), (V{"a", "  ", " b"}));
}

TEST(Regex, CaseInsensitiveGroupFoldsUnicode) {
    EXPECT_EQ(matches("(?i:'s|'t)", "'S 'T 'ſ 's"), (V{"'S", "'T", "'ſ", "'s"}));
}

TEST(Regex, ClassIntersectionAndHan) {
    EXPECT_EQ(matches(R"([\p{L}&&[^\p{Han}]]+)", "abc漢字def"), (V{"abc", "def"}));
    EXPECT_EQ(matches(R"([\p{Han}]+)", "abc漢字def"), (V{"漢字"}));
}

TEST(Regex, CountedRepeatAndLiteralRanges) {
    EXPECT_EQ(matches(R"(\p{N}{1,3})", "1234567"), (V{"123", "456", "7"}));
    EXPECT_EQ(matches("[一-龥぀-ゟ゠-ヿ]+", "xひらがな漢字カタカナy"), (V{"ひらがな漢字カタカナ"}));
}

TEST(Regex, LazyPossessiveAtomic) {
    EXPECT_EQ(matches("a+?", "aaa"), (V{"a", "a", "a"}));
    EXPECT_EQ(matches("a++a", "aaaa"), V{});
    EXPECT_EQ(matches("(?>a|ab)c", "abc ac"), (V{"ac"}));
    EXPECT_EQ(matches("(?:ab)+", "ababx"), (V{"abab"}));
    EXPECT_EQ(matches("x(?=y)", "xy xz"), (V{"x"}));
}

TEST(Regex, WhiteSpaceIsTheUnicodeProperty) {
    // Oniguruma's \s: U+0085 is white space, U+FEFF is not (JavaScript's \s differs on both).
    EXPECT_EQ(matches(R"(\s+)", "a\u0085b\uFEFFc\u3000"), (V{"\u0085", "\u3000"}));
}

TEST(Regex, UnsupportedConstructsAreErrors) {
    for (const char* p :
         {"\\d", "\\w", "(?<=a)b", "^a", "a$", "\\1", "[[:alpha:]]", "\\p{Greek}", "(?i)a", "a{2}+"}) {
        EXPECT_THROW(Regex{p}, Error) << p;
    }
}

}  // namespace
}  // namespace coli::text
