// A parsed Jinja template and its renderer: the subset of jinja2 that chat templates use, with the
// semantics of transformers' ImmutableSandboxedEnvironment (trim_blocks and lstrip_blocks on,
// loopcontrols on, tojson/raise_exception/strftime_now as transformers defines them).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "text/jinja_ast.h"
#include "text/jinja_lexer.h"
#include "text/jinja_value.h"

namespace coli::text::jinja {

class Template {
public:
    // Parses `source`; syntax outside the subset is a coli::Error naming the construct and its line.
    explicit Template(std::string_view source, const LexOptions& options = {});

    // Renders with `variables` as the template's globals (next to range, namespace, dict, ...).
    // Runtime errors (raise_exception, undefined attribute access, type errors) are coli::Errors.
    std::string render(const Dict& variables) const;

private:
    std::shared_ptr<const Body> body_;
};

}  // namespace coli::text::jinja
