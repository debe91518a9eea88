#include "text/jinja_json.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "text/jinja_string.h"

namespace coli::text::jinja {

Value value_from_json(const nlohmann::ordered_json& json) {
    using Type = nlohmann::ordered_json::value_t;
    switch (json.type()) {
        case Type::null:
            return Value::none();
        case Type::boolean:
            return Value(json.get<bool>());
        case Type::number_integer:
            return Value(json.get<int64_t>());
        case Type::number_unsigned: {
            auto u = json.get<uint64_t>();
            check(u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
                  "chat template input: integer {} is too large", u);
            return Value(static_cast<int64_t>(u));
        }
        case Type::number_float:
            return Value(json.get<double>());
        case Type::string:
            return Value(json.get<std::string>());
        case Type::array: {
            List items;
            items.reserve(json.size());
            for (const auto& item : json) items.push_back(value_from_json(item));
            return Value::list(std::move(items));
        }
        case Type::object: {
            Dict entries;
            entries.reserve(json.size());
            for (const auto& [key, item] : json.items()) entries.emplace_back(key, value_from_json(item));
            return Value::dict(std::move(entries));
        }
        default:
            fail("chat template input: JSON binary values are not supported");
    }
}

namespace {

class JsonWriter {
public:
    JsonWriter(const JsonFormat& format, int line) : format_(format), line_(line) {
        item_separator_ = format.item_separator.value_or(format.indent ? "," : ", ");
        key_separator_ = format.key_separator.value_or(": ");
    }

    void write(const Value& v, int depth) {
        switch (v.kind()) {
            case Value::Kind::none:
                out += "null";
                return;
            case Value::Kind::boolean:
                out += v.as_bool() ? "true" : "false";
                return;
            case Value::Kind::integer:
                out += std::to_string(v.as_int());
                return;
            case Value::Kind::floating:
                write_float(v.as_float());
                return;
            case Value::Kind::string:
                json_quote(out, v.as_string(), format_.ensure_ascii);
                return;
            case Value::Kind::list:
                write_list(v.as_list(), depth);
                return;
            case Value::Kind::dict:
                write_dict(v.as_dict(), depth);
                return;
            default:
                fail("chat template line {}: tojson: object of type {} is not JSON serializable", line_,
                     value_type_name(v));
        }
    }

    std::string out;

private:
    void write_float(double d) {
        // json.dumps spells the non-finite floats as JavaScript does (allow_nan=True).
        if (std::isnan(d))
            out += "NaN";
        else if (std::isinf(d))
            out += d > 0 ? "Infinity" : "-Infinity";
        else
            out += python_repr_float(d);
    }

    void newline(int depth) {
        out += '\n';
        for (int i = 0; i < depth; ++i) out += *format_.indent;
    }

    void write_list(const List& items, int depth) {
        if (items.empty()) {
            out += "[]";
            return;
        }
        out += '[';
        for (size_t i = 0; i < items.size(); ++i) {
            if (i > 0) out += item_separator_;
            if (format_.indent) newline(depth + 1);
            write(items[i], depth + 1);
        }
        if (format_.indent) newline(depth);
        out += ']';
    }

    void write_dict(const Dict& dict, int depth) {
        if (dict.empty()) {
            out += "{}";
            return;
        }
        std::vector<const std::pair<std::string, Value>*> entries;
        for (const auto& entry : dict) entries.push_back(&entry);
        if (format_.sort_keys) {
            std::stable_sort(entries.begin(), entries.end(),
                             [](auto* a, auto* b) { return a->first < b->first; });
        }
        out += '{';
        for (size_t i = 0; i < entries.size(); ++i) {
            if (i > 0) out += item_separator_;
            if (format_.indent) newline(depth + 1);
            json_quote(out, entries[i]->first, format_.ensure_ascii);
            out += key_separator_;
            write(entries[i]->second, depth + 1);
        }
        if (format_.indent) newline(depth);
        out += '}';
    }

    const JsonFormat& format_;
    int line_;
    std::string item_separator_, key_separator_;
};

}  // namespace

std::string value_to_json(const Value& value, const JsonFormat& format, int line) {
    JsonWriter writer(format, line);
    writer.write(value, 0);
    return std::move(writer.out);
}

}  // namespace coli::text::jinja
