// Runtime values of the Jinja subset that chat templates use, with Python's semantics (transformers renders
// chat templates with Python's jinja2, so Python's str(), ==, truthiness and json.dumps are the contract).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace coli::text::jinja {

class Value;

// Python dict: insertion-ordered, string keys only (JSON objects and template literals need nothing else).
using Dict = std::vector<std::pair<std::string, Value>>;
using List = std::vector<Value>;

// Arguments of a call: positional, then keyword, as the caller wrote them.
struct CallArgs {
    std::vector<Value> positional;
    std::vector<std::pair<std::string, Value>> keyword;
};

// A built-in function, bound method or macro. `name` is what error messages call it; `line` is the
// template line of the call, for the errors the callee raises.
struct Callable {
    std::string name;
    std::function<Value(CallArgs& args, int line)> call;
};

// An undefined name or attribute. `hint` says what was missing ("'tools' is undefined"), for the error
// raised when a template uses it in a way Python's jinja2 rejects (attribute access, arithmetic, calls).
struct Undefined {
    std::string hint;
};

// A Python list or tuple; the flag only changes repr(): [1, 2] versus (1, 2).
struct Sequence {
    List items;
    bool tuple = false;
};

// jinja2's namespace(): the one mutable object a template can create (`{% set ns.x = ... %}`).
struct Namespace {
    Dict attributes;
};

class Value {
public:
    enum class Kind { undefined, none, boolean, integer, floating, string, list, dict, ns, callable };

    Value() : data_(Undefined{}) {}
    static Value undefined(std::string hint) { return Value(Undefined{std::move(hint)}); }
    static Value none() { return Value(nullptr); }
    Value(bool b) : data_(b) {}
    Value(int64_t i) : data_(i) {}
    Value(int i) : data_(int64_t{i}) {}
    Value(double d) : data_(d) {}
    Value(std::string s) : data_(std::move(s)) {}
    Value(const char* s) : data_(std::string(s)) {}
    Value(std::string_view s) : data_(std::string(s)) {}
    static Value list(List items) {
        return Value(std::make_shared<const Sequence>(Sequence{std::move(items), false}));
    }
    static Value tuple(List items) {
        return Value(std::make_shared<const Sequence>(Sequence{std::move(items), true}));
    }
    static Value dict(Dict entries) { return Value(std::make_shared<const Dict>(std::move(entries))); }
    static Value make_namespace(Dict attributes) {
        return Value(std::make_shared<Namespace>(Namespace{std::move(attributes)}));
    }
    static Value function(std::string name, std::function<Value(CallArgs&, int)> call) {
        return Value(std::make_shared<const Callable>(Callable{std::move(name), std::move(call)}));
    }

    Kind kind() const { return static_cast<Kind>(data_.index()); }
    bool is_undefined() const { return kind() == Kind::undefined; }
    bool is_none() const { return kind() == Kind::none; }
    bool is_bool() const { return kind() == Kind::boolean; }
    bool is_int() const { return kind() == Kind::integer; }
    bool is_float() const { return kind() == Kind::floating; }
    // Python's numbers.Number: bool is an int subclass, so True counts.
    bool is_number() const { return is_bool() || is_int() || is_float(); }
    bool is_string() const { return kind() == Kind::string; }
    bool is_list() const { return kind() == Kind::list; }
    bool is_dict() const { return kind() == Kind::dict; }
    bool is_namespace() const { return kind() == Kind::ns; }
    bool is_callable() const { return kind() == Kind::callable; }

    bool as_bool() const { return std::get<bool>(data_); }
    int64_t as_int() const { return std::get<int64_t>(data_); }
    double as_float() const { return std::get<double>(data_); }
    // Numeric value of a bool, int or float, for arithmetic that mixes them as Python does.
    double as_double() const;
    const std::string& as_string() const { return std::get<std::string>(data_); }
    const Sequence& as_sequence() const { return *std::get<std::shared_ptr<const Sequence>>(data_); }
    const List& as_list() const { return as_sequence().items; }
    const Dict& as_dict() const { return *std::get<std::shared_ptr<const Dict>>(data_); }
    Namespace& as_namespace() const { return *std::get<std::shared_ptr<Namespace>>(data_); }
    const Callable& as_callable() const { return *std::get<std::shared_ptr<const Callable>>(data_); }
    const std::string& undefined_hint() const { return std::get<Undefined>(data_).hint; }

    // Python truthiness: undefined, None, False, 0, 0.0 and empty strings, lists and dicts are false.
    bool truthy() const;

private:
    using Data = std::variant<Undefined, std::nullptr_t, bool, int64_t, double, std::string,
                              std::shared_ptr<const Sequence>, std::shared_ptr<const Dict>,
                              std::shared_ptr<Namespace>, std::shared_ptr<const Callable>>;
    explicit Value(Undefined u) : data_(std::move(u)) {}
    explicit Value(std::nullptr_t) : data_(nullptr) {}
    explicit Value(std::shared_ptr<const Sequence> s) : data_(std::move(s)) {}
    explicit Value(std::shared_ptr<const Dict> d) : data_(std::move(d)) {}
    explicit Value(std::shared_ptr<Namespace> n) : data_(std::move(n)) {}
    explicit Value(std::shared_ptr<const Callable> c) : data_(std::move(c)) {}

    Data data_;
};

// Looks `key` up in a dict; nullptr when absent.
const Value* dict_find(const Dict& dict, std::string_view key);

// The Python type name of a value, for error messages ("str", "dict", "NoneType").
std::string_view value_type_name(const Value& v);

// Python's str(value) as jinja2 prints it: undefined is "", None is "None", True is "True", floats use
// repr()'s shortest round-trip form, lists and dicts use repr() of their items.
std::string value_to_string(const Value& v);

// Python's repr(value): strings quoted the way Python quotes them.
std::string value_repr(const Value& v);

// Python's ==: numbers compare by value across bool/int/float, containers element by element; two
// undefined values are equal (jinja2's Undefined.__eq__), a namespace equals only itself.
bool value_equal(const Value& a, const Value& b);

// Python's <: numbers with numbers, strings with strings (by code point), lists lexicographically.
// Anything else is not ordered: returns false in `comparable`.
bool value_less(const Value& a, const Value& b, bool& comparable);

}  // namespace coli::text::jinja
