// JSON in and out of templates: template variables come from JSON (messages, tools), and the tojson
// filter writes JSON exactly as transformers' override does: json.dumps(x, ensure_ascii=False,
// indent=None, separators=None, sort_keys=False), with Python's float repr and key order kept.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "text/jinja_value.h"

namespace coli::text::jinja {

// JSON null/bool/number/string/array/object as None/bool/int or float/str/list/dict, order kept.
Value value_from_json(const nlohmann::ordered_json& json);

struct JsonFormat {
    bool ensure_ascii = false;
    std::optional<std::string> indent;  // absent: one line; otherwise the text of one indentation level
    std::optional<std::string> item_separator, key_separator;  // absent: json.dumps' defaults
    bool sort_keys = false;
};

// json.dumps(value) with `format`; values JSON cannot hold (undefined, namespaces, functions) are an
// error naming the template line.
std::string value_to_json(const Value& value, const JsonFormat& format, int line);

}  // namespace coli::text::jinja
