// What a template can reach besides its own variables: attribute and item access (with Python's methods
// of str, dict and list), filters, tests and global functions, as transformers' sandboxed jinja2 offers them.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "text/jinja_value.h"

namespace coli::text::jinja {

// Reads a call's arguments by position or keyword, Python style, and rejects the ones nobody read.
class ArgReader {
public:
    ArgReader(std::string_view function, CallArgs& args, int line);

    // The argument at `position` or named `name`; `fallback` when absent.
    Value get(size_t position, std::string_view name, Value fallback = Value());
    // A keyword-only argument.
    Value keyword(std::string_view name, Value fallback = Value());
    // Like get(), but a missing argument is an error.
    Value require(size_t position, std::string_view name);
    // Arguments from `position` on that nobody read (for *args of select, map, ...).
    List rest_positional(size_t position);
    // Errors for arguments that were passed but never read.
    void finish();

    // Argument type checks that name the function and the argument in their errors.
    std::string as_string(const Value& v, std::string_view name) const;
    int64_t as_int(const Value& v, std::string_view name) const;
    bool as_bool(const Value& v, std::string_view name) const;

    int line() const { return line_; }
    [[noreturn]] void fail_here(const std::string& what) const;

private:
    std::string function_;
    CallArgs& args_;
    int line_;
    size_t positional_read_ = 0;
    std::vector<bool> keyword_read_;
};

// jinja2's getattr (obj.name): a Python attribute first (str/dict/list methods), then the item.
Value value_get_attribute(const Value& object, std::string_view name, int line);
// jinja2's getitem (obj[key]): the item first, then, for a string key, a Python attribute.
Value value_get_item(const Value& object, const Value& key, int line);
// A bound method of a str, dict or list (str.strip, dict.items, ...), or nothing when `name` is not one.
std::optional<Value> method_bind(const Value& receiver, std::string_view name);

// The items a for loop or a filter iterates: a list's items, a dict's keys, a string's characters;
// undefined iterates as empty (jinja2's Undefined); anything else is an error.
List value_iterate(const Value& v, int line);
// Python's `item in container` for str (substring), list (an equal item), dict (a key), undefined (false).
bool value_contains(const Value& container, const Value& item, int line);

// Applies filter `name`; an unknown filter is an error naming it.
Value filter_apply(std::string_view name, const Value& operand, CallArgs& args, int line);
// Evaluates test `name` (`x is name(args)`); an unknown test is an error naming it.
bool test_apply(std::string_view name, const Value& operand, CallArgs& args, int line);

// The functions every template sees: range, namespace, dict, raise_exception, strftime_now.
Dict builtin_globals();

// Fails with the undefined value's hint when `v` is undefined: the operations Python's jinja2 rejects on
// Undefined (attribute access, calls, arithmetic) go through this.
void check_defined(const Value& v, int line);

}  // namespace coli::text::jinja
