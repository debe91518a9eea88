// jinja2's built-in filters that chat templates use, with jinja2 3.1's semantics, and transformers' tojson.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>

#include "core/error.h"
#include "text/jinja_builtins.h"
#include "text/jinja_json.h"
#include "text/jinja_string.h"

namespace coli::text::jinja {

namespace {

using FilterFn = Value (*)(const Value& operand, ArgReader& args);

Value as_list_value(List items) {
    return Value::list(std::move(items));
}

// jinja2's make_attrgetter: "a.b.0" looks up a, then b, then item 0, each with getitem semantics.
Value attribute_path(const Value& item, const Value& path, int line) {
    if (!path.is_string()) return value_get_item(item, path, line);
    Value current = item;
    std::string_view rest = path.as_string();
    while (true) {
        size_t dot = rest.find('.');
        std::string part(rest.substr(0, dot));
        bool numeric = !part.empty() &&
                       std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
        current = value_get_item(current,
                                 numeric ? Value(static_cast<int64_t>(std::stoll(part))) : Value(part), line);
        if (dot == std::string_view::npos) return current;
        if (current.is_undefined()) return current;
        rest = rest.substr(dot + 1);
    }
}

// The sort key of jinja2's sort/dictsort/unique: strings are lowercased unless case_sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
    if (!case_sensitive && v.is_string()) return Value(python_lower(v.as_string()));
    return v;
}

bool less_or_fail(const Value& a, const Value& b, ArgReader& args) {
    bool comparable = true;
    bool less = value_less(a, b, comparable);
    if (!comparable) {
        args.fail_here(fmt::format("'<' not supported between instances of '{}' and '{}'", value_type_name(a),
                                   value_type_name(b)));
    }
    return less;
}

std::string soft_string(const Value& v) {
    return value_to_string(v);
}

Value filter_default(const Value& v, ArgReader& args) {
    Value fallback = args.get(0, "default_value", Value(""));
    bool boolean = args.as_bool(args.get(1, "boolean", Value(false)), "boolean");
    if (v.is_undefined() || (boolean && !v.truthy())) return fallback;
    return v;
}

Value filter_length(const Value& v, ArgReader& args) {
    switch (v.kind()) {
        case Value::Kind::undefined:
            return Value(0);
        case Value::Kind::string:
            return static_cast<int64_t>(utf8_to_code_points(v.as_string()).size());
        case Value::Kind::list:
            return static_cast<int64_t>(v.as_list().size());
        case Value::Kind::dict:
            return static_cast<int64_t>(v.as_dict().size());
        default:
            args.fail_here(fmt::format("object of type '{}' has no len()", value_type_name(v)));
    }
}

Value filter_first(const Value& v, ArgReader& args) {
    List items = value_iterate(v, args.line());
    if (items.empty()) return Value::undefined("No first item, sequence was empty.");
    return items.front();
}

Value filter_last(const Value& v, ArgReader& args) {
    List items = value_iterate(v, args.line());
    if (items.empty()) return Value::undefined("No last item, sequence was empty.");
    return items.back();
}

Value filter_join(const Value& v, ArgReader& args) {
    std::string separator = soft_string(args.get(0, "d", Value("")));
    Value attribute = args.get(1, "attribute", Value::none());
    std::string out;
    List items = value_iterate(v, args.line());
    for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += separator;
        out += soft_string(attribute.is_none() ? items[i] : attribute_path(items[i], attribute, args.line()));
    }
    return Value(std::move(out));
}

Value filter_string(const Value& v, ArgReader&) {
    return Value(soft_string(v));
}
Value filter_upper(const Value& v, ArgReader&) {
    return Value(python_upper(soft_string(v)));
}
Value filter_lower(const Value& v, ArgReader&) {
    return Value(python_lower(soft_string(v)));
}
Value filter_capitalize(const Value& v, ArgReader&) {
    return Value(python_capitalize(soft_string(v)));
}
Value filter_title(const Value& v, ArgReader&) {
    return Value(jinja_title(soft_string(v)));
}
Value filter_safe(const Value& v, ArgReader&) {
    return v;
}

Value filter_trim(const Value& v, ArgReader& args) {
    Value chars = args.get(0, "chars", Value::none());
    std::optional<std::string> set;
    if (!chars.is_none()) set = args.as_string(chars, "chars");
    return Value(python_strip(soft_string(v), set, true, true));
}

Value filter_replace(const Value& v, ArgReader& args) {
    std::string old_text = soft_string(args.require(0, "old"));
    std::string new_text = soft_string(args.require(1, "new"));
    Value count = args.get(2, "count", Value::none());
    return Value(python_replace(soft_string(v), old_text, new_text,
                                count.is_none() ? -1 : args.as_int(count, "count")));
}

// Python's int(): optional sign, digits with single underscores between them, surrounding whitespace.
std::optional<int64_t> parse_python_int(const std::string& text) {
    std::string s = python_strip(text, std::nullopt, true, true);
    size_t i = 0;
    bool negative = false;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
    if (i == s.size()) return std::nullopt;
    int64_t value = 0;
    bool previous_digit = false;
    for (; i < s.size(); ++i) {
        if (s[i] == '_' && previous_digit && i + 1 < s.size() && s[i + 1] != '_') {
            previous_digit = false;
            continue;
        }
        if (s[i] < '0' || s[i] > '9') return std::nullopt;
        if (__builtin_mul_overflow(value, 10, &value) || __builtin_add_overflow(value, s[i] - '0', &value)) {
            return std::nullopt;
        }
        previous_digit = true;
    }
    return negative ? -value : value;
}

// Python's float() of a string: decimal or scientific notation, inf, nan; no hex floats.
std::optional<double> parse_python_float(const std::string& text) {
    std::string s = python_strip(text, std::nullopt, true, true);
    if (s.empty() || s.find_first_of("xXpP") != std::string::npos) return std::nullopt;
    s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
    char* end = nullptr;
    double d = std::strtod(s.c_str(), &end);
    if (end != s.c_str() + s.size()) return std::nullopt;
    return d;
}

Value filter_int(const Value& v, ArgReader& args) {
    Value fallback = args.get(0, "default", Value(0));
    Value base = args.get(1, "base", Value(10));
    if (args.as_int(base, "base") != 10) args.fail_here("only base 10 is supported");
    if (v.is_int()) return v;
    if (v.is_bool()) return Value(int64_t{v.as_bool()});
    if (v.is_float()) {
        if (!std::isfinite(v.as_float())) return fallback;
        return Value(static_cast<int64_t>(std::trunc(v.as_float())));
    }
    if (v.is_string()) {
        if (auto i = parse_python_int(v.as_string())) return Value(*i);
        if (auto d = parse_python_float(v.as_string()); d && std::isfinite(*d)) {
            return Value(static_cast<int64_t>(std::trunc(*d)));
        }
    }
    return fallback;
}

Value filter_float(const Value& v, ArgReader& args) {
    Value fallback = args.get(0, "default", Value(0.0));
    if (v.is_number()) return Value(v.as_double());
    if (v.is_string()) {
        if (auto d = parse_python_float(v.as_string())) return Value(*d);
    }
    return fallback;
}

Value filter_abs(const Value& v, ArgReader& args) {
    if (v.is_int() || v.is_bool()) return Value(std::abs(v.is_bool() ? int64_t{v.as_bool()} : v.as_int()));
    if (v.is_float()) return Value(std::fabs(v.as_float()));
    args.fail_here(fmt::format("bad operand type for abs(): '{}'", value_type_name(v)));
}

Value filter_list(const Value& v, ArgReader& args) {
    return as_list_value(value_iterate(v, args.line()));
}

Value filter_items(const Value& v, ArgReader& args) {
    if (v.is_undefined()) return as_list_value({});
    if (!v.is_dict()) args.fail_here("can only get item pairs from a mapping");
    List items;
    for (const auto& [k, item] : v.as_dict()) items.push_back(Value::tuple({Value(k), item}));
    return as_list_value(std::move(items));
}

Value filter_reverse(const Value& v, ArgReader& args) {
    if (v.is_string()) {
        std::u32string cps = utf8_to_code_points(v.as_string());
        std::reverse(cps.begin(), cps.end());
        return Value(code_points_to_utf8(cps));
    }
    List items = value_iterate(v, args.line());
    std::reverse(items.begin(), items.end());
    return as_list_value(std::move(items));
}

Value filter_sort(const Value& v, ArgReader& args) {
    bool reverse = args.as_bool(args.get(0, "reverse", Value(false)), "reverse");
    bool case_sensitive = args.as_bool(args.get(1, "case_sensitive", Value(false)), "case_sensitive");
    Value attribute = args.get(2, "attribute", Value::none());
    List items = value_iterate(v, args.line());
    std::vector<std::pair<Value, Value>> keyed;
    for (const Value& item : items) {
        Value key = attribute.is_none() ? item : attribute_path(item, attribute, args.line());
        keyed.emplace_back(sort_key(key, case_sensitive), item);
    }
    // Python's sort is stable, and so is reverse=True: equal items keep their order.
    std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
        return reverse ? less_or_fail(b.first, a.first, args) : less_or_fail(a.first, b.first, args);
    });
    List sorted;
    for (auto& kv : keyed) sorted.push_back(std::move(kv.second));
    return as_list_value(std::move(sorted));
}

Value filter_dictsort(const Value& v, ArgReader& args) {
    bool case_sensitive = args.as_bool(args.get(0, "case_sensitive", Value(false)), "case_sensitive");
    std::string by = args.as_string(args.get(1, "by", Value("key")), "by");
    bool reverse = args.as_bool(args.get(2, "reverse", Value(false)), "reverse");
    if (by != "key" && by != "value") args.fail_here("by must be 'key' or 'value'");
    if (!v.is_dict()) args.fail_here(fmt::format("expected a mapping, got {}", value_type_name(v)));
    std::vector<std::pair<Value, Value>> keyed;
    for (const auto& [k, item] : v.as_dict()) {
        keyed.emplace_back(sort_key(by == "key" ? Value(k) : item, case_sensitive),
                           Value::tuple({Value(k), item}));
    }
    std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
        return reverse ? less_or_fail(b.first, a.first, args) : less_or_fail(a.first, b.first, args);
    });
    List sorted;
    for (auto& kv : keyed) sorted.push_back(std::move(kv.second));
    return as_list_value(std::move(sorted));
}

Value filter_unique(const Value& v, ArgReader& args) {
    bool case_sensitive = args.as_bool(args.get(0, "case_sensitive", Value(false)), "case_sensitive");
    Value attribute = args.get(1, "attribute", Value::none());
    List seen, out;
    for (const Value& item : value_iterate(v, args.line())) {
        Value key = sort_key(attribute.is_none() ? item : attribute_path(item, attribute, args.line()),
                             case_sensitive);
        if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return value_equal(s, key); }))
            continue;
        seen.push_back(key);
        out.push_back(item);
    }
    return as_list_value(std::move(out));
}

Value filter_attr(const Value& v, ArgReader& args) {
    return value_get_attribute(v, args.as_string(args.require(0, "name"), "name"), args.line());
}

// select / reject / selectattr / rejectattr: keep items whose test result equals `keep`.
Value select_items(const Value& v, ArgReader& args, bool by_attribute, bool keep) {
    Value attribute = by_attribute ? args.require(0, "attribute") : Value::none();
    size_t test_position = by_attribute ? 1 : 0;
    Value test_name = args.get(test_position, "test", Value::none());
    List test_args = args.rest_positional(test_position + 1);
    List out;
    for (const Value& item : value_iterate(v, args.line())) {
        Value subject = by_attribute ? attribute_path(item, attribute, args.line()) : item;
        bool result;
        if (test_name.is_none()) {
            result = subject.truthy();
        } else {
            CallArgs call{test_args, {}};
            result = test_apply(args.as_string(test_name, "test"), subject, call, args.line());
        }
        if (result == keep) out.push_back(item);
    }
    return as_list_value(std::move(out));
}

Value filter_select(const Value& v, ArgReader& args) {
    return select_items(v, args, false, true);
}
Value filter_reject(const Value& v, ArgReader& args) {
    return select_items(v, args, false, false);
}
Value filter_selectattr(const Value& v, ArgReader& args) {
    return select_items(v, args, true, true);
}
Value filter_rejectattr(const Value& v, ArgReader& args) {
    return select_items(v, args, true, false);
}

Value filter_map(const Value& v, ArgReader& args) {
    Value attribute = args.keyword("attribute", Value::none());
    List out;
    if (!attribute.is_none()) {
        Value fallback = args.keyword("default", Value::none());
        for (const Value& item : value_iterate(v, args.line())) {
            Value mapped = attribute_path(item, attribute, args.line());
            out.push_back(mapped.is_undefined() && !fallback.is_none() ? fallback : mapped);
        }
        return as_list_value(std::move(out));
    }
    std::string filter_name = args.as_string(args.require(0, "filter"), "filter");
    List filter_args = args.rest_positional(1);
    for (const Value& item : value_iterate(v, args.line())) {
        CallArgs call{filter_args, {}};
        out.push_back(filter_apply(filter_name, item, call, args.line()));
    }
    return as_list_value(std::move(out));
}

Value filter_indent(const Value& v, ArgReader& args) {
    Value width = args.get(0, "width", Value(4));
    bool first = args.as_bool(args.get(1, "first", Value(false)), "first");
    bool blank = args.as_bool(args.get(2, "blank", Value(false)), "blank");
    std::string indentation =
        width.is_string()
            ? width.as_string()
            : std::string(static_cast<size_t>(std::max<int64_t>(0, args.as_int(width, "width"))), ' ');
    // jinja2 appends a newline before splitlines() so that a trailing newline survives.
    std::vector<std::string> lines = python_splitlines(soft_string(v) + "\n");
    std::string out;
    for (size_t i = 0; i < lines.size(); ++i) {
        if (i > 0) out += "\n";
        bool indent_this = i == 0 ? first : (blank || !lines[i].empty());
        if (indent_this) out += indentation;
        out += lines[i];
    }
    return Value(std::move(out));
}

// transformers' override: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
Value filter_tojson(const Value& v, ArgReader& args) {
    JsonFormat format;
    format.ensure_ascii = args.as_bool(args.get(0, "ensure_ascii", Value(false)), "ensure_ascii");
    Value indent = args.get(1, "indent", Value::none());
    if (indent.is_string()) {
        format.indent = indent.as_string();
    } else if (!indent.is_none()) {
        format.indent =
            std::string(static_cast<size_t>(std::max<int64_t>(0, args.as_int(indent, "indent"))), ' ');
    }
    Value separators = args.get(2, "separators", Value::none());
    if (!separators.is_none()) {
        if (!separators.is_list() || separators.as_list().size() != 2) {
            args.fail_here("separators must be an (item_separator, key_separator) pair");
        }
        format.item_separator = args.as_string(separators.as_list()[0], "separators");
        format.key_separator = args.as_string(separators.as_list()[1], "separators");
    }
    format.sort_keys = args.as_bool(args.get(3, "sort_keys", Value(false)), "sort_keys");
    return Value(value_to_json(v, format, args.line()));
}

const std::map<std::string, FilterFn, std::less<>>& filter_table() {
    static const std::map<std::string, FilterFn, std::less<>> table = {
        {"abs", filter_abs},
        {"attr", filter_attr},
        {"capitalize", filter_capitalize},
        {"count", filter_length},
        {"d", filter_default},
        {"default", filter_default},
        {"dictsort", filter_dictsort},
        {"first", filter_first},
        {"float", filter_float},
        {"indent", filter_indent},
        {"int", filter_int},
        {"items", filter_items},
        {"join", filter_join},
        {"last", filter_last},
        {"length", filter_length},
        {"list", filter_list},
        {"lower", filter_lower},
        {"map", filter_map},
        {"reject", filter_reject},
        {"rejectattr", filter_rejectattr},
        {"replace", filter_replace},
        {"reverse", filter_reverse},
        {"safe", filter_safe},
        {"select", filter_select},
        {"selectattr", filter_selectattr},
        {"sort", filter_sort},
        {"string", filter_string},
        {"title", filter_title},
        {"tojson", filter_tojson},
        {"trim", filter_trim},
        {"unique", filter_unique},
        {"upper", filter_upper},
    };
    return table;
}

}  // namespace

Value filter_apply(std::string_view name, const Value& operand, CallArgs& args, int line) {
    const auto& table = filter_table();
    auto it = table.find(name);
    if (it == table.end()) {
        fail("chat template line {}: the filter '{}' is not supported by colibri's Jinja subset", line, name);
    }
    ArgReader reader(fmt::format("filter '{}'", name), args, line);
    Value result = it->second(operand, reader);
    reader.finish();
    return result;
}

}  // namespace coli::text::jinja
