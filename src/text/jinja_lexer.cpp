#include "text/jinja_lexer.h"

#include <array>

#include "core/error.h"
#include "io/json.h"
#include "text/jinja_string.h"
#include "text/utf8.h"

namespace coli::text::jinja {

namespace {

// Operators, longest first so that `//` wins over `/` and `**` over `*`.
constexpr std::array<std::string_view, 25> kOperators = {
    "//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
    ">",  "=",  "(",  ")",  "[",  "]",  "{", "}", ",", ".", ":", "|",
};

// A tag's whitespace-control sign: '-' strips, '+' disables lstrip/trim, 0 is neither.
char sign_at(std::string_view s, size_t pos) {
    return pos < s.size() && (s[pos] == '-' || s[pos] == '+') ? s[pos] : 0;
}

bool is_ascii_digit(char c) {
    return c >= '0' && c <= '9';
}
bool is_name_start(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_name_char(char c) {
    return is_name_start(c) || is_ascii_digit(c);
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

class Lexer {
public:
    Lexer(std::string source, const LexOptions& options) : src_(std::move(source)), options_(options) {}

    std::vector<Token> run() {
        while (pos_ < src_.size()) lex_data();
        tokens_.push_back({TokenKind::end, "", line_});
        return std::move(tokens_);
    }

private:
    // Template data up to the next tag, then the tag.
    void lex_data() {
        size_t tag = find_tag_start(pos_);
        std::string text = src_.substr(pos_, tag - pos_);
        if (tag == src_.size()) {
            emit_text(std::move(text), count_lines(pos_, tag));
            pos_ = tag;
            return;
        }
        char kind = src_[tag + 1];  // '{', '%' or '#'
        char sign = sign_at(src_, tag + 2);
        int text_lines = count_lines(pos_, tag);
        if (sign == '-') {
            text = python_strip(text, std::nullopt, false, true);
        } else if (sign != '+' && options_.lstrip_blocks && kind != '{') {
            text = lstrip_line(text);
        }
        emit_text(std::move(text), text_lines);
        pos_ = tag + 2 + (sign != 0 ? 1 : 0);
        if (kind == '#') {
            lex_comment();
        } else {
            lex_tag(kind == '{' ? TokenKind::variable_begin : TokenKind::block_begin);
        }
    }

    size_t find_tag_start(size_t from) const {
        for (size_t i = from; i + 1 < src_.size(); ++i) {
            if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
        }
        return src_.size();
    }

    // lstrip_blocks: whitespace between the line start and a block tag goes (jinja2 checks the text after
    // the last newline, or all of it when the previous token ended a line).
    std::string lstrip_line(const std::string& text) const {
        size_t line_start = text.rfind('\n');
        line_start = line_start == std::string::npos ? 0 : line_start + 1;
        if (line_start == 0 && !line_starting_) return text;
        std::string_view tail = std::string_view(text).substr(line_start);
        if (tail.empty()) return text;
        for (char32_t cp : utf8_to_code_points(tail)) {
            if (!is_python_space(cp)) return text;
        }
        return text.substr(0, line_start);
    }

    void emit_text(std::string text, int lines_in_text) {
        int line = line_;
        line_ += lines_in_text;
        if (!text.empty()) tokens_.push_back({TokenKind::text, std::move(text), line});
    }

    int count_lines(size_t from, size_t to) const {
        int n = 0;
        for (size_t i = from; i < to; ++i) n += src_[i] == '\n';
        return n;
    }

    void lex_comment() {
        int start_line = line_;
        size_t close = src_.find("#}", pos_);
        check(close != std::string::npos, "chat template line {}: comment {{# is never closed", start_line);
        char sign =
            (close > pos_ && (src_[close - 1] == '-' || src_[close - 1] == '+')) ? src_[close - 1] : 0;
        line_ += count_lines(pos_, close);
        pos_ = close + 2;
        finish_tag(sign, true);
    }

    // After an end tag: `-` eats all following whitespace; trim_blocks eats one newline after a block.
    void finish_tag(char sign, bool is_block) {
        size_t start = pos_;
        if (sign == '-') {
            skip_whitespace();
        } else if (sign != '+' && is_block && options_.trim_blocks && pos_ < src_.size() &&
                   src_[pos_] == '\n') {
            ++pos_;
            ++line_;
        }
        line_starting_ = pos_ > start && src_[pos_ - 1] == '\n';
    }

    void skip_whitespace() {
        while (pos_ < src_.size()) {
            Utf8Step step = utf8_decode(std::string_view(src_).substr(pos_));
            if (!is_python_space(step.cp)) break;
            line_ += step.cp == '\n';
            pos_ += step.length;
        }
    }

    void lex_tag(TokenKind begin) {
        bool is_block = begin == TokenKind::block_begin;
        std::string_view close = is_block ? "%}" : "}}";
        int open_line = line_;
        tokens_.push_back({begin, is_block ? "{%" : "{{", line_});
        int bracket_depth = 0;  // `}}` inside a dict literal closes braces, not the tag (as in jinja2)
        while (true) {
            skip_whitespace();
            check(pos_ < src_.size(), "chat template line {}: {} is never closed", open_line,
                  is_block ? "{%" : "{{");
            std::string_view rest = std::string_view(src_).substr(pos_);
            if (bracket_depth == 0) {
                char sign = sign_at(rest, 0);
                if (rest.substr(sign != 0 ? 1 : 0, 2) == close && !(sign == '+' && !is_block)) {
                    tokens_.push_back({is_block ? TokenKind::block_end : TokenKind::variable_end,
                                       std::string(close), line_});
                    pos_ += 2 + (sign != 0 ? 1 : 0);
                    finish_tag(sign, is_block);
                    return;
                }
            }
            char c = rest[0];
            if (is_ascii_digit(c)) {
                lex_number();
            } else if (is_name_start(c)) {
                size_t end = pos_;
                while (end < src_.size() && is_name_char(src_[end])) ++end;
                tokens_.push_back({TokenKind::name, src_.substr(pos_, end - pos_), line_});
                pos_ = end;
            } else if (c == '\'' || c == '"') {
                lex_string(c);
            } else {
                lex_operator(rest, bracket_depth);
            }
        }
    }

    void lex_operator(std::string_view rest, int& bracket_depth) {
        for (std::string_view op : kOperators) {
            if (rest.substr(0, op.size()) != op) continue;
            if (op == "(" || op == "[" || op == "{") ++bracket_depth;
            if (op == ")" || op == "]" || op == "}") {
                check(bracket_depth > 0, "chat template line {}: unbalanced '{}'", line_, op);
                --bracket_depth;
            }
            tokens_.push_back({TokenKind::op, std::string(op), line_});
            pos_ += op.size();
            return;
        }
        Utf8Step step = utf8_decode(rest);
        fail("chat template line {}: unexpected character {} in a tag", line_,
             quote(rest.substr(0, step.length)));
    }

    // Digits with optional `_` separators.
    std::string take_digits() {
        std::string digits;
        while (pos_ < src_.size() &&
               (is_ascii_digit(src_[pos_]) ||
                (src_[pos_] == '_' && pos_ + 1 < src_.size() && is_ascii_digit(src_[pos_ + 1])))) {
            if (src_[pos_] != '_') digits += src_[pos_];
            ++pos_;
        }
        return digits;
    }

    void lex_number() {
        // After a dot (`foo.0.1`) jinja2 reads integers only: no float can start right after a `.`.
        bool after_dot = pos_ > 0 && src_[pos_ - 1] == '.';
        std::string text = take_digits();
        bool is_float = false;
        if (!after_dot && pos_ + 1 < src_.size() && src_[pos_] == '.' && is_ascii_digit(src_[pos_ + 1])) {
            ++pos_;
            text += '.';
            text += take_digits();
            is_float = true;
        }
        if (!after_dot && pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
            size_t save = pos_;
            std::string exponent = "e";
            ++pos_;
            if (pos_ < src_.size() && (src_[pos_] == '+' || src_[pos_] == '-')) exponent += src_[pos_++];
            if (pos_ < src_.size() && is_ascii_digit(src_[pos_])) {
                text += exponent + take_digits();
                is_float = true;
            } else {
                pos_ = save;
            }
        }
        tokens_.push_back({is_float ? TokenKind::floating : TokenKind::integer, text, line_});
    }

    // Python's unicode-escape rules: known escapes decode, unknown ones stay as written.
    void lex_string(char quote_char) {
        int start_line = line_;
        ++pos_;
        std::string value;
        while (true) {
            check(pos_ < src_.size(), "chat template line {}: string literal is never closed", start_line);
            char c = src_[pos_];
            if (c == quote_char) {
                ++pos_;
                break;
            }
            if (c == '\n') ++line_;
            if (c != '\\') {
                value += c;
                ++pos_;
                continue;
            }
            check(pos_ + 1 < src_.size(), "chat template line {}: string literal is never closed",
                  start_line);
            char e = src_[pos_ + 1];
            pos_ += 2;
            switch (e) {
                case '\\':
                    value += '\\';
                    break;
                case '\'':
                    value += '\'';
                    break;
                case '"':
                    value += '"';
                    break;
                case 'a':
                    value += '\a';
                    break;
                case 'b':
                    value += '\b';
                    break;
                case 'f':
                    value += '\f';
                    break;
                case 'n':
                    value += '\n';
                    break;
                case 'r':
                    value += '\r';
                    break;
                case 't':
                    value += '\t';
                    break;
                case 'v':
                    value += '\v';
                    break;
                case '\n':
                    ++line_;
                    break;  // a backslash-newline continues the line
                case 'x':
                    value_append_hex(value, 2, start_line);
                    break;
                case 'u':
                    value_append_hex(value, 4, start_line);
                    break;
                case 'U':
                    value_append_hex(value, 8, start_line);
                    break;
                case 'N':
                    fail("chat template line {}: \\N{{...}} escapes are not supported", start_line);
                default:
                    if (e >= '0' && e <= '7') {
                        char32_t cp = static_cast<char32_t>(e - '0');
                        for (int i = 0; i < 2 && pos_ < src_.size() && src_[pos_] >= '0' && src_[pos_] <= '7';
                             ++i) {
                            cp = cp * 8 + static_cast<char32_t>(src_[pos_++] - '0');
                        }
                        utf8_append(value, cp);
                    } else {
                        value += '\\';
                        pos_ -= 1;  // the character after the backslash is read again as itself
                    }
            }
        }
        tokens_.push_back({TokenKind::string, std::move(value), start_line});
    }

    void value_append_hex(std::string& value, int digits, int start_line) {
        char32_t cp = 0;
        for (int i = 0; i < digits; ++i) {
            int h = pos_ < src_.size() ? hex_value(src_[pos_]) : -1;
            check(h >= 0, "chat template line {}: truncated \\x/\\u escape in a string literal", start_line);
            cp = cp * 16 + static_cast<char32_t>(h);
            ++pos_;
        }
        constexpr char32_t kMaxCodePoint = 0x10FFFF;
        check(cp <= kMaxCodePoint, "chat template line {}: escape above U+10FFFF in a string literal",
              start_line);
        utf8_append(value, cp);
    }

    std::string src_;
    LexOptions options_;
    size_t pos_ = 0;
    int line_ = 1;
    bool line_starting_ = true;
    std::vector<Token> tokens_;
};

std::string normalize_newlines(std::string_view source) {
    std::string out;
    out.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
        if (source[i] == '\r') {
            out += '\n';
            if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
        } else {
            out += source[i];
        }
    }
    if (!out.empty() && out.back() == '\n') out.pop_back();  // keep_trailing_newline=False
    return out;
}

}  // namespace

std::vector<Token> jinja_lex(std::string_view source, const LexOptions& options) {
    return Lexer(normalize_newlines(source), options).run();
}

}  // namespace coli::text::jinja
