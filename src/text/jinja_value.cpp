#include "text/jinja_value.h"

#include "text/jinja_string.h"

namespace coli::text::jinja {

double Value::as_double() const {
    switch (kind()) {
        case Kind::boolean:
            return as_bool() ? 1.0 : 0.0;
        case Kind::integer:
            return static_cast<double>(as_int());
        default:
            return as_float();
    }
}

bool Value::truthy() const {
    switch (kind()) {
        case Kind::undefined:
        case Kind::none:
            return false;
        case Kind::boolean:
            return as_bool();
        case Kind::integer:
            return as_int() != 0;
        case Kind::floating:
            return as_float() != 0.0;
        case Kind::string:
            return !as_string().empty();
        case Kind::list:
            return !as_list().empty();
        case Kind::dict:
            return !as_dict().empty();
        case Kind::ns:
        case Kind::callable:
            return true;
    }
    return false;
}

const Value* dict_find(const Dict& dict, std::string_view key) {
    for (const auto& [k, v] : dict) {
        if (k == key) return &v;
    }
    return nullptr;
}

std::string_view value_type_name(const Value& v) {
    switch (v.kind()) {
        case Value::Kind::undefined:
            return "Undefined";
        case Value::Kind::none:
            return "NoneType";
        case Value::Kind::boolean:
            return "bool";
        case Value::Kind::integer:
            return "int";
        case Value::Kind::floating:
            return "float";
        case Value::Kind::string:
            return "str";
        case Value::Kind::list:
            return v.as_sequence().tuple ? "tuple" : "list";
        case Value::Kind::dict:
            return "dict";
        case Value::Kind::ns:
            return "Namespace";
        case Value::Kind::callable:
            return "function";
    }
    return "?";
}

namespace {

std::string sequence_repr(const Sequence& seq) {
    std::string out = seq.tuple ? "(" : "[";
    for (size_t i = 0; i < seq.items.size(); ++i) {
        if (i > 0) out += ", ";
        out += value_repr(seq.items[i]);
    }
    if (seq.tuple && seq.items.size() == 1) out += ",";  // (1,) is a tuple, (1) is not
    out += seq.tuple ? ")" : "]";
    return out;
}

std::string dict_repr(const Dict& dict) {
    std::string out = "{";
    for (size_t i = 0; i < dict.size(); ++i) {
        if (i > 0) out += ", ";
        out += python_repr_string(dict[i].first) + ": " + value_repr(dict[i].second);
    }
    return out + "}";
}

}  // namespace

std::string value_to_string(const Value& v) {
    switch (v.kind()) {
        case Value::Kind::undefined:
            return "";
        case Value::Kind::string:
            return v.as_string();
        default:
            return value_repr(v);
    }
}

std::string value_repr(const Value& v) {
    switch (v.kind()) {
        case Value::Kind::undefined:
            return "Undefined";
        case Value::Kind::none:
            return "None";
        case Value::Kind::boolean:
            return v.as_bool() ? "True" : "False";
        case Value::Kind::integer:
            return std::to_string(v.as_int());
        case Value::Kind::floating:
            return python_repr_float(v.as_float());
        case Value::Kind::string:
            return python_repr_string(v.as_string());
        case Value::Kind::list:
            return sequence_repr(v.as_sequence());
        case Value::Kind::dict:
            return dict_repr(v.as_dict());
        case Value::Kind::ns:
            return "<Namespace " + dict_repr(v.as_namespace().attributes) + ">";
        case Value::Kind::callable:
            return "<function " + v.as_callable().name + ">";
    }
    return "";
}

bool value_equal(const Value& a, const Value& b) {
    if (a.is_number() && b.is_number()) {
        if ((a.is_int() || a.is_bool()) && (b.is_int() || b.is_bool())) {
            auto as_integer = [](const Value& v) { return v.is_bool() ? int64_t{v.as_bool()} : v.as_int(); };
            return as_integer(a) == as_integer(b);
        }
        return a.as_double() == b.as_double();
    }
    if (a.kind() != b.kind()) return false;
    switch (a.kind()) {
        case Value::Kind::undefined:
        case Value::Kind::none:
            return true;
        case Value::Kind::string:
            return a.as_string() == b.as_string();
        case Value::Kind::list: {
            const Sequence& x = a.as_sequence();
            const Sequence& y = b.as_sequence();
            if (x.tuple != y.tuple || x.items.size() != y.items.size()) return false;
            for (size_t i = 0; i < x.items.size(); ++i) {
                if (!value_equal(x.items[i], y.items[i])) return false;
            }
            return true;
        }
        case Value::Kind::dict: {
            const Dict& x = a.as_dict();
            const Dict& y = b.as_dict();
            if (x.size() != y.size()) return false;
            for (const auto& [key, value] : x) {
                const Value* other = dict_find(y, key);
                if (other == nullptr || !value_equal(value, *other)) return false;
            }
            return true;
        }
        case Value::Kind::ns:
            return &a.as_namespace() == &b.as_namespace();
        case Value::Kind::callable:
            return &a.as_callable() == &b.as_callable();
        default:
            return false;
    }
}

bool value_less(const Value& a, const Value& b, bool& comparable) {
    comparable = true;
    if (a.is_number() && b.is_number()) {
        if ((a.is_int() || a.is_bool()) && (b.is_int() || b.is_bool())) {
            auto as_integer = [](const Value& v) { return v.is_bool() ? int64_t{v.as_bool()} : v.as_int(); };
            return as_integer(a) < as_integer(b);
        }
        return a.as_double() < b.as_double();
    }
    if (a.is_string() && b.is_string())
        return a.as_string() < b.as_string();  // UTF-8 order is code point order
    if (a.is_list() && b.is_list() && a.as_sequence().tuple == b.as_sequence().tuple) {
        const List& x = a.as_list();
        const List& y = b.as_list();
        for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
            if (value_equal(x[i], y[i])) continue;
            return value_less(x[i], y[i], comparable);
        }
        return x.size() < y.size();
    }
    comparable = false;
    return false;
}

}  // namespace coli::text::jinja
