// Builds the syntax tree of a template from its tokens, with jinja2's grammar and operator precedence.
// Statements outside the chat-template subset (call, filter, include, import, extends, block, with, raw,
// recursive loops, ...) are a coli::Error naming the statement and its line.
#pragma once

#include <vector>

#include "text/jinja_ast.h"
#include "text/jinja_lexer.h"

namespace coli::text::jinja {

Body jinja_parse(const std::vector<Token>& tokens);

}  // namespace coli::text::jinja
