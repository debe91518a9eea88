// Attribute and item access, iteration, membership, and the Python methods of str, dict and list.
#include <algorithm>
#include <array>

#include "core/error.h"
#include "text/jinja_builtins.h"
#include "text/jinja_string.h"

namespace coli::text::jinja {

namespace {

// Every method Python's str, dict and list have: a name listed here exists (`s.zfill is defined` holds),
// and calling one colibri does not implement is an error naming it rather than a different prompt.
constexpr std::array<std::string_view, 47> kStrMethods = {
    "capitalize", "casefold",     "center",       "count",   "encode",     "endswith",    "expandtabs",
    "find",       "format",       "format_map",   "index",   "isalnum",    "isalpha",     "isascii",
    "isdecimal",  "isdigit",      "isidentifier", "islower", "isnumeric",  "isprintable", "isspace",
    "istitle",    "isupper",      "join",         "ljust",   "lower",      "lstrip",      "maketrans",
    "partition",  "removeprefix", "removesuffix", "replace", "rfind",      "rindex",      "rjust",
    "rpartition", "rsplit",       "rstrip",       "split",   "splitlines", "startswith",  "strip",
    "swapcase",   "title",        "translate",    "upper",   "zfill",
};
constexpr std::array<std::string_view, 11> kDictMethods = {
    "clear", "copy", "fromkeys", "get", "items", "keys", "pop", "popitem", "setdefault", "update", "values",
};
constexpr std::array<std::string_view, 11> kListMethods = {
    "append", "clear", "copy", "count", "extend", "index", "insert", "pop", "remove", "reverse", "sort",
};
// Methods that modify their object: transformers renders in jinja2's ImmutableSandboxedEnvironment,
// which refuses them, so a template that calls one fails there too.
constexpr std::array<std::string_view, 12> kMutatingMethods = {
    "append", "clear",   "extend",     "insert", "pop",    "popitem",
    "remove", "reverse", "setdefault", "sort",   "update", "fromkeys",
};

template <size_t N>
bool contains(const std::array<std::string_view, N>& names, std::string_view name) {
    return std::find(names.begin(), names.end(), name) != names.end();
}

// Code point index of byte offset `byte` in `s`.
int64_t code_point_index(std::string_view s, size_t byte) {
    int64_t n = 0;
    for (size_t i = 0; i < byte; ++i) n += (static_cast<unsigned char>(s[i]) & 0xC0) != 0x80;
    return n;
}

std::optional<std::string> optional_chars(ArgReader& r, const Value& v) {
    if (v.is_none() || v.is_undefined()) return std::nullopt;
    return r.as_string(v, "chars");
}

// str.startswith / endswith: a prefix or a tuple of them.
bool affix_matches(ArgReader& r, const std::string& s, const Value& affix, bool at_start) {
    auto one = [&](const Value& v) {
        std::string a = r.as_string(v, "prefix");
        if (a.size() > s.size()) return false;
        return at_start ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0;
    };
    if (affix.is_list()) {
        return std::any_of(affix.as_list().begin(), affix.as_list().end(), one);
    }
    return one(affix);
}

// str.format with {} / {0} / {name} fields and {{ }} escapes; format specs and conversions are not supported.
std::string python_format(ArgReader& r, const std::string& fmt_text, CallArgs& args) {
    std::string out;
    size_t auto_index = 0;
    for (size_t i = 0; i < fmt_text.size(); ++i) {
        char c = fmt_text[i];
        if (c == '}') {
            if (i + 1 < fmt_text.size() && fmt_text[i + 1] == '}')
                ++i;
            else
                r.fail_here("single '}' in the format string");
            out += '}';
            continue;
        }
        if (c != '{') {
            out += c;
            continue;
        }
        if (i + 1 < fmt_text.size() && fmt_text[i + 1] == '{') {
            out += '{';
            ++i;
            continue;
        }
        size_t close = fmt_text.find('}', i);
        if (close == std::string::npos) r.fail_here("unclosed '{' in the format string");
        std::string field = fmt_text.substr(i + 1, close - i - 1);
        if (field.find_first_of(":!.[") != std::string::npos) {
            r.fail_here(
                fmt::format("format field {{{}}} uses a spec or conversion, which is not supported", field));
        }
        Value v;
        if (field.empty() ||
            std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
            size_t index = field.empty() ? auto_index++ : std::stoul(field);
            if (index >= args.positional.size())
                r.fail_here(fmt::format("format index {} out of range", index));
            v = args.positional[index];
        } else {
            const Value* named = nullptr;
            for (const auto& kw : args.keyword) {
                if (kw.first == field) named = &kw.second;
            }
            if (named == nullptr) r.fail_here(fmt::format("format key '{}' is missing", field));
            v = *named;
        }
        out += value_to_string(v);
        i = close;
    }
    return out;
}

Value call_str_method(const std::string& s, const std::string& name, CallArgs& args, int line) {
    ArgReader r("str." + name + "()", args, line);
    Value result;
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
        auto chars = optional_chars(r, r.get(0, "chars", Value::none()));
        result = python_strip(s, chars, name != "rstrip", name != "lstrip");
    } else if (name == "split" || name == "rsplit") {
        Value sep = r.get(0, "sep", Value::none());
        int64_t maxsplit = r.as_int(r.get(1, "maxsplit", Value(-1)), "maxsplit");
        std::optional<std::string> separator;
        if (!sep.is_none()) separator = r.as_string(sep, "sep");
        if (name == "rsplit" && maxsplit >= 0) {
            r.fail_here("rsplit() with maxsplit is not supported");
        }
        List parts;
        for (auto& p : python_split(s, separator, maxsplit)) parts.emplace_back(std::move(p));
        result = Value::list(std::move(parts));
    } else if (name == "splitlines") {
        List lines;
        for (auto& l : python_splitlines(s)) lines.emplace_back(std::move(l));
        result = Value::list(std::move(lines));
    } else if (name == "startswith" || name == "endswith") {
        Value affix = r.require(0, "prefix");
        if (args.positional.size() > 1) r.fail_here("start/end arguments are not supported");
        result = affix_matches(r, s, affix, name == "startswith");
    } else if (name == "upper") {
        result = python_upper(s);
    } else if (name == "lower") {
        result = python_lower(s);
    } else if (name == "title") {
        result = python_title(s);
    } else if (name == "capitalize") {
        result = python_capitalize(s);
    } else if (name == "replace") {
        std::string old_text = r.as_string(r.require(0, "old"), "old");
        std::string new_text = r.as_string(r.require(1, "new"), "new");
        int64_t count = r.as_int(r.get(2, "count", Value(-1)), "count");
        result = python_replace(s, old_text, new_text, count);
    } else if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
        std::string sub = r.as_string(r.require(0, "sub"), "sub");
        if (args.positional.size() > 1) r.fail_here("start/end arguments are not supported");
        if (name == "count") {
            int64_t n = 0;
            if (sub.empty()) {
                n = static_cast<int64_t>(utf8_to_code_points(s).size()) + 1;
            } else {
                for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
            }
            result = n;
        } else {
            size_t at = (name[0] == 'r') ? s.rfind(sub) : s.find(sub);
            if (at == std::string::npos && (name == "index" || name == "rindex"))
                r.fail_here("substring not found");
            result = at == std::string::npos ? int64_t{-1} : code_point_index(s, at);
        }
    } else if (name == "join") {
        std::string out;
        List items = value_iterate(r.require(0, "iterable"), line);
        for (size_t i = 0; i < items.size(); ++i) {
            if (i > 0) out += s;
            out += r.as_string(items[i], "iterable item");
        }
        result = std::move(out);
    } else if (name == "removeprefix" || name == "removesuffix") {
        std::string affix = r.as_string(r.require(0, "affix"), "affix");
        bool prefix = name == "removeprefix";
        bool has = affix.size() <= s.size() &&
                   (prefix ? s.compare(0, affix.size(), affix) == 0
                           : s.compare(s.size() - affix.size(), affix.size(), affix) == 0);
        result = has ? (prefix ? s.substr(affix.size()) : s.substr(0, s.size() - affix.size())) : s;
    } else if (name == "isspace") {
        auto cps = utf8_to_code_points(s);
        result = !cps.empty() && std::all_of(cps.begin(), cps.end(), is_python_space);
    } else if (name == "format") {
        return Value(python_format(r, s, args));
    } else {
        r.fail_here("this str method is not supported by colibri's Jinja subset");
    }
    r.finish();
    return result;
}

Value call_dict_method(const Dict& d, const std::string& name, CallArgs& args, int line) {
    ArgReader r("dict." + name + "()", args, line);
    Value result;
    if (name == "get") {
        std::string key = r.as_string(r.require(0, "key"), "key");
        Value fallback = r.get(1, "default", Value::none());
        const Value* found = dict_find(d, key);
        result = found != nullptr ? *found : fallback;
    } else if (name == "items") {
        List items;
        for (const auto& [k, v] : d) items.push_back(Value::tuple({Value(k), v}));
        result = Value::list(std::move(items));
    } else if (name == "keys") {
        List keys;
        for (const auto& kv : d) keys.emplace_back(kv.first);
        result = Value::list(std::move(keys));
    } else if (name == "values") {
        List values;
        for (const auto& kv : d) values.push_back(kv.second);
        result = Value::list(std::move(values));
    } else if (name == "copy") {
        result = Value::dict(d);
    } else {
        r.fail_here("this dict method is not supported by colibri's Jinja subset");
    }
    r.finish();
    return result;
}

Value call_list_method(const List& items, const std::string& name, CallArgs& args, int line) {
    ArgReader r("list." + name + "()", args, line);
    Value result;
    if (name == "count") {
        Value x = r.require(0, "value");
        result = static_cast<int64_t>(
            std::count_if(items.begin(), items.end(), [&](const Value& v) { return value_equal(v, x); }));
    } else if (name == "index") {
        Value x = r.require(0, "value");
        auto it = std::find_if(items.begin(), items.end(), [&](const Value& v) { return value_equal(v, x); });
        if (it == items.end()) r.fail_here(fmt::format("{} is not in list", value_repr(x)));
        result = static_cast<int64_t>(it - items.begin());
    } else if (name == "copy") {
        result = Value::list(items);
    } else {
        r.fail_here("this list method is not supported by colibri's Jinja subset");
    }
    r.finish();
    return result;
}

}  // namespace

std::optional<Value> method_bind(const Value& receiver, std::string_view name) {
    bool known = (receiver.is_string() && contains(kStrMethods, name)) ||
                 (receiver.is_dict() && contains(kDictMethods, name)) ||
                 (receiver.is_list() && contains(kListMethods, name));
    if (!known) return std::nullopt;
    std::string method(name);
    std::string qualified = std::string(value_type_name(receiver)) + "." + method;
    if (contains(kMutatingMethods, name)) {
        return Value::function(qualified, [qualified](CallArgs&, int line) -> Value {
            fail(
                "chat template line {}: {}() modifies its object, which the sandbox transformers renders "
                "chat templates in does not allow",
                line, qualified);
        });
    }
    return Value::function(qualified, [receiver, method](CallArgs& args, int line) -> Value {
        if (receiver.is_string()) return call_str_method(receiver.as_string(), method, args, line);
        if (receiver.is_dict()) return call_dict_method(receiver.as_dict(), method, args, line);
        return call_list_method(receiver.as_list(), method, args, line);
    });
}

Value value_get_attribute(const Value& object, std::string_view name, int line) {
    check_defined(object, line);
    if (auto method = method_bind(object, name)) return *method;
    if (object.is_dict()) {
        if (const Value* found = dict_find(object.as_dict(), name)) return *found;
    } else if (object.is_namespace()) {
        if (const Value* found = dict_find(object.as_namespace().attributes, name)) return *found;
    }
    return Value::undefined(fmt::format("'{} object' has no attribute '{}'", value_type_name(object), name));
}

Value value_get_item(const Value& object, const Value& key, int line) {
    check_defined(object, line);
    check_defined(key, line);
    if (key.is_string()) {
        if (object.is_dict()) {
            if (const Value* found = dict_find(object.as_dict(), key.as_string())) return *found;
        } else if (object.is_namespace()) {
            if (const Value* found = dict_find(object.as_namespace().attributes, key.as_string()))
                return *found;
        }
        if (auto method = method_bind(object, key.as_string())) return *method;
        return Value::undefined(
            fmt::format("'{} object' has no attribute '{}'", value_type_name(object), key.as_string()));
    }
    if ((key.is_int() || key.is_bool()) && (object.is_list() || object.is_string())) {
        int64_t index = key.is_bool() ? int64_t{key.as_bool()} : key.as_int();
        if (object.is_list()) {
            const List& items = object.as_list();
            auto n = static_cast<int64_t>(items.size());
            if (index < 0) index += n;
            if (index >= 0 && index < n) return items[static_cast<size_t>(index)];
        } else {
            std::u32string cps = utf8_to_code_points(object.as_string());
            auto n = static_cast<int64_t>(cps.size());
            if (index < 0) index += n;
            if (index >= 0 && index < n)
                return Value(code_points_to_utf8(cps.substr(static_cast<size_t>(index), 1)));
        }
        return Value::undefined(fmt::format("{} index {} is out of range", value_type_name(object), index));
    }
    return Value::undefined(
        fmt::format("'{} object' has no item {}", value_type_name(object), value_repr(key)));
}

List value_iterate(const Value& v, int line) {
    switch (v.kind()) {
        case Value::Kind::undefined:
            return {};
        case Value::Kind::list:
            return v.as_list();
        case Value::Kind::dict: {
            List keys;
            for (const auto& kv : v.as_dict()) keys.emplace_back(kv.first);
            return keys;
        }
        case Value::Kind::string: {
            List chars;
            for (char32_t cp : utf8_to_code_points(v.as_string()))
                chars.emplace_back(code_points_to_utf8({&cp, 1}));
            return chars;
        }
        default:
            fail("chat template line {}: '{}' object is not iterable", line, value_type_name(v));
    }
}

bool value_contains(const Value& container, const Value& item, int line) {
    switch (container.kind()) {
        case Value::Kind::undefined:
            return false;
        case Value::Kind::string:
            if (!item.is_string()) {
                fail("chat template line {}: 'in <string>' requires a string on the left, not {}", line,
                     value_type_name(item));
            }
            return container.as_string().find(item.as_string()) != std::string::npos;
        case Value::Kind::list:
            return std::any_of(container.as_list().begin(), container.as_list().end(),
                               [&](const Value& v) { return value_equal(v, item); });
        case Value::Kind::dict:
            return item.is_string() && dict_find(container.as_dict(), item.as_string()) != nullptr;
        default:
            fail("chat template line {}: argument of type '{}' is not iterable", line,
                 value_type_name(container));
    }
}

}  // namespace coli::text::jinja
