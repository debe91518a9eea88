#include "core/error.h"
#include "text/jinja_builtins.h"

namespace coli::text::jinja {

ArgReader::ArgReader(std::string_view function, CallArgs& args, int line)
    : function_(function), args_(args), line_(line), keyword_read_(args.keyword.size(), false) {}

void ArgReader::fail_here(const std::string& what) const {
    fail("chat template line {}: {}: {}", line_, function_, what);
}

Value ArgReader::get(size_t position, std::string_view name, Value fallback) {
    for (size_t i = 0; i < args_.keyword.size(); ++i) {
        if (args_.keyword[i].first != name) continue;
        if (position < args_.positional.size()) fail_here(fmt::format("got multiple values for '{}'", name));
        keyword_read_[i] = true;
        return args_.keyword[i].second;
    }
    if (position < args_.positional.size()) {
        positional_read_ = std::max(positional_read_, position + 1);
        return args_.positional[position];
    }
    return fallback;
}

Value ArgReader::keyword(std::string_view name, Value fallback) {
    for (size_t i = 0; i < args_.keyword.size(); ++i) {
        if (args_.keyword[i].first != name) continue;
        keyword_read_[i] = true;
        return args_.keyword[i].second;
    }
    return fallback;
}

Value ArgReader::require(size_t position, std::string_view name) {
    bool present = position < args_.positional.size();
    for (const auto& kw : args_.keyword) present = present || kw.first == name;
    if (!present) fail_here(fmt::format("missing required argument '{}'", name));
    return get(position, name);
}

List ArgReader::rest_positional(size_t position) {
    List rest;
    for (size_t i = position; i < args_.positional.size(); ++i) rest.push_back(args_.positional[i]);
    positional_read_ = std::max(positional_read_, args_.positional.size());
    return rest;
}

void ArgReader::finish() {
    if (positional_read_ < args_.positional.size()) {
        fail_here(fmt::format("takes at most {} positional argument(s), got {}", positional_read_,
                              args_.positional.size()));
    }
    for (size_t i = 0; i < args_.keyword.size(); ++i) {
        if (!keyword_read_[i])
            fail_here(fmt::format("unexpected keyword argument '{}'", args_.keyword[i].first));
    }
}

std::string ArgReader::as_string(const Value& v, std::string_view name) const {
    if (!v.is_string())
        fail_here(fmt::format("argument '{}' must be a str, not {}", name, value_type_name(v)));
    return v.as_string();
}

int64_t ArgReader::as_int(const Value& v, std::string_view name) const {
    if (v.is_bool()) return v.as_bool() ? 1 : 0;
    if (!v.is_int()) fail_here(fmt::format("argument '{}' must be an int, not {}", name, value_type_name(v)));
    return v.as_int();
}

bool ArgReader::as_bool(const Value& v, std::string_view name) const {
    // jinja2 filters take any value here and use its truthiness.
    return v.truthy();
}

void check_defined(const Value& v, int line) {
    if (!v.is_undefined()) return;
    const std::string& hint = v.undefined_hint();
    fail("chat template line {}: {}", line, hint.empty() ? std::string("a value is undefined") : hint);
}

}  // namespace coli::text::jinja
