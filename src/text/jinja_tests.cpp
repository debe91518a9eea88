// jinja2's built-in tests (`x is defined`, `x is string`, ...), with jinja2 3.1's semantics.
#include <functional>
#include <map>

#include "core/error.h"
#include "text/jinja_builtins.h"
#include "text/jinja_string.h"

namespace coli::text::jinja {

namespace {

using TestFn = bool (*)(const Value& v, ArgReader& args);

int64_t integer_operand(const Value& v, ArgReader& args) {
    if (v.is_bool()) return v.as_bool() ? 1 : 0;
    if (!v.is_int()) args.fail_here(fmt::format("expects an int, not {}", value_type_name(v)));
    return v.as_int();
}

bool compare(const Value& a, const Value& b, ArgReader& args, bool want_less, bool or_equal) {
    if (or_equal && value_equal(a, b)) return true;
    bool comparable = true;
    bool result = want_less ? value_less(a, b, comparable) : value_less(b, a, comparable);
    if (!comparable) {
        args.fail_here(fmt::format("comparison not supported between instances of '{}' and '{}'",
                                   value_type_name(a), value_type_name(b)));
    }
    return result;
}

bool test_defined(const Value& v, ArgReader&) {
    return !v.is_undefined();
}
bool test_undefined(const Value& v, ArgReader&) {
    return v.is_undefined();
}
bool test_none(const Value& v, ArgReader&) {
    return v.is_none();
}
bool test_boolean(const Value& v, ArgReader&) {
    return v.is_bool();
}
bool test_true(const Value& v, ArgReader&) {
    return v.is_bool() && v.as_bool();
}
bool test_false(const Value& v, ArgReader&) {
    return v.is_bool() && !v.as_bool();
}
bool test_integer(const Value& v, ArgReader&) {
    return v.is_int();
}
bool test_float(const Value& v, ArgReader&) {
    return v.is_float();
}
bool test_number(const Value& v, ArgReader&) {
    return v.is_number();
}
bool test_string(const Value& v, ArgReader&) {
    return v.is_string();
}
bool test_mapping(const Value& v, ArgReader&) {
    return v.is_dict();
}
bool test_callable(const Value& v, ArgReader&) {
    return v.is_callable();
}
// Python's iter() accepts str, list, dict, and jinja2's Undefined (which iterates as empty).
bool test_iterable(const Value& v, ArgReader&) {
    return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
}
// jinja2: has len() and __getitem__, which Undefined also has.
bool test_sequence(const Value& v, ArgReader& args) {
    return test_iterable(v, args);
}
bool test_odd(const Value& v, ArgReader& args) {
    return integer_operand(v, args) % 2 != 0;
}
bool test_even(const Value& v, ArgReader& args) {
    return integer_operand(v, args) % 2 == 0;
}
bool test_lower(const Value& v, ArgReader&) {
    std::string s = value_to_string(v);
    return python_lower(s) == s && python_upper(s) != s;
}
bool test_upper(const Value& v, ArgReader&) {
    std::string s = value_to_string(v);
    return python_upper(s) == s && python_lower(s) != s;
}
bool test_divisibleby(const Value& v, ArgReader& args) {
    int64_t divisor = args.as_int(args.require(0, "num"), "num");
    if (divisor == 0) args.fail_here("integer division or modulo by zero");
    return integer_operand(v, args) % divisor == 0;
}
bool test_eq(const Value& v, ArgReader& args) {
    return value_equal(v, args.require(0, "other"));
}
bool test_ne(const Value& v, ArgReader& args) {
    return !value_equal(v, args.require(0, "other"));
}
bool test_lt(const Value& v, ArgReader& args) {
    return compare(v, args.require(0, "other"), args, true, false);
}
bool test_le(const Value& v, ArgReader& args) {
    return compare(v, args.require(0, "other"), args, true, true);
}
bool test_gt(const Value& v, ArgReader& args) {
    return compare(v, args.require(0, "other"), args, false, false);
}
bool test_ge(const Value& v, ArgReader& args) {
    return compare(v, args.require(0, "other"), args, false, true);
}
bool test_in(const Value& v, ArgReader& args) {
    return value_contains(args.require(0, "seq"), v, args.line());
}
// `is sameas`: identity. Singletons (None, booleans, undefined) by value, containers by object.
bool test_sameas(const Value& v, ArgReader& args) {
    Value other = args.require(0, "other");
    if (v.kind() != other.kind()) return false;
    switch (v.kind()) {
        case Value::Kind::list:
            return &v.as_sequence() == &other.as_sequence();
        case Value::Kind::dict:
            return &v.as_dict() == &other.as_dict();
        default:
            return value_equal(v, other);
    }
}

const std::map<std::string, TestFn, std::less<>>& test_table() {
    static const std::map<std::string, TestFn, std::less<>> table = {
        {"!=", test_ne},
        {"<", test_lt},
        {"<=", test_le},
        {"==", test_eq},
        {">", test_gt},
        {">=", test_ge},
        {"boolean", test_boolean},
        {"callable", test_callable},
        {"defined", test_defined},
        {"divisibleby", test_divisibleby},
        {"eq", test_eq},
        {"equalto", test_eq},
        {"even", test_even},
        {"false", test_false},
        {"float", test_float},
        {"ge", test_ge},
        {"greaterthan", test_gt},
        {"gt", test_gt},
        {"in", test_in},
        {"integer", test_integer},
        {"iterable", test_iterable},
        {"le", test_le},
        {"lessthan", test_lt},
        {"lower", test_lower},
        {"lt", test_lt},
        {"mapping", test_mapping},
        {"ne", test_ne},
        {"none", test_none},
        {"number", test_number},
        {"odd", test_odd},
        {"sameas", test_sameas},
        {"sequence", test_sequence},
        {"string", test_string},
        {"true", test_true},
        {"undefined", test_undefined},
        {"upper", test_upper},
    };
    return table;
}

}  // namespace

bool test_apply(std::string_view name, const Value& operand, CallArgs& args, int line) {
    const auto& table = test_table();
    auto it = table.find(name);
    if (it == table.end()) {
        fail("chat template line {}: the test '{}' is not supported by colibri's Jinja subset", line, name);
    }
    ArgReader reader(fmt::format("test '{}'", name), args, line);
    bool result = it->second(operand, reader);
    reader.finish();
    return result;
}

}  // namespace coli::text::jinja
