// Splits a Jinja template into tokens the way Python's jinja2 lexer does, whitespace control included:
// `{%-`/`-%}` strip all whitespace on that side, `{%+`/`+%}` turn lstrip/trim off for that tag,
// trim_blocks drops the first newline after a block or comment tag, lstrip_blocks drops spaces and tabs
// between the start of a line and a block or comment tag. Comments disappear here.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace coli::text::jinja {

enum class TokenKind {
    text,            // template data between tags, already whitespace-controlled
    variable_begin,  // {{
    variable_end,    // }}
    block_begin,     // {%
    block_end,       // %}
    name,            // identifiers and keywords (if, for, and, not, true, ...)
    string,          // a string literal, unescaped
    integer,         // digits, underscores removed
    floating,        // a float literal, underscores removed
    op,              // an operator or punctuation: + - * / // % ** ~ == != < > <= >= = ( ) [ ] { } , . : |
    end,             // end of the template
};

struct Token {
    TokenKind kind;
    std::string value;
    int line;  // 1-based line in the template source, for error messages
};

// Hugging Face renders chat templates with both options on; tests turn them off to check the lexer.
struct LexOptions {
    bool trim_blocks = true;
    bool lstrip_blocks = true;
};

// Tokenizes `source`. Newlines are normalized to \n and one trailing newline is dropped, as jinja2 does
// by default. Unclosed tags, unterminated strings and unknown characters are a coli::Error with the line.
std::vector<Token> jinja_lex(std::string_view source, const LexOptions& options = {});

}  // namespace coli::text::jinja
