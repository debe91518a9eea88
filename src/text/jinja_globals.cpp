// Global functions: jinja2's range, namespace and dict, and transformers' raise_exception and strftime_now.
#include <ctime>

#include "core/error.h"
#include "text/jinja_builtins.h"

namespace coli::text::jinja {

namespace {

// jinja2's sandbox refuses larger ranges (MAX_RANGE), so a template cannot make one either.
constexpr int64_t kMaxRange = 100000;

Value global_range(CallArgs& call, int line) {
    ArgReader args("range()", call, line);
    if (!call.keyword.empty()) args.fail_here("takes no keyword arguments");
    int64_t start = 0, stop = 0, step = 1;
    if (call.positional.size() == 1) {
        stop = args.as_int(args.require(0, "stop"), "stop");
    } else {
        start = args.as_int(args.require(0, "start"), "start");
        stop = args.as_int(args.require(1, "stop"), "stop");
        step = args.as_int(args.get(2, "step", Value(1)), "step");
    }
    args.finish();
    if (step == 0) args.fail_here("arg 3 must not be zero");
    List items;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        if (static_cast<int64_t>(items.size()) >= kMaxRange) {
            args.fail_here(fmt::format("a range of more than {} items is not allowed", kMaxRange));
        }
        items.emplace_back(i);
    }
    return Value::list(std::move(items));
}

// namespace(mapping_or_pairs?, **attributes): the one object templates may modify.
Value global_namespace(CallArgs& call, int line) {
    ArgReader args("namespace()", call, line);
    if (call.positional.size() > 1) args.fail_here("takes at most one positional argument");
    Dict attributes;
    auto assign = [&](const std::string& key, const Value& v) {
        for (auto& [k, existing] : attributes) {
            if (k == key) {
                existing = v;
                return;
            }
        }
        attributes.emplace_back(key, v);
    };
    if (!call.positional.empty()) {
        const Value& init = call.positional[0];
        if (init.is_dict()) {
            for (const auto& [k, v] : init.as_dict()) assign(k, v);
        } else {
            for (const Value& pair : value_iterate(init, line)) {
                if (!pair.is_list() || pair.as_list().size() != 2 || !pair.as_list()[0].is_string()) {
                    args.fail_here("expects a mapping or (name, value) pairs");
                }
                assign(pair.as_list()[0].as_string(), pair.as_list()[1]);
            }
        }
    }
    for (const auto& [k, v] : call.keyword) assign(k, v);
    return Value::make_namespace(std::move(attributes));
}

Value global_dict(CallArgs& call, int line) {
    ArgReader args("dict()", call, line);
    if (!call.positional.empty()) args.fail_here("only keyword arguments are supported");
    Dict entries;
    for (const auto& [k, v] : call.keyword) entries.emplace_back(k, v);
    return Value::dict(std::move(entries));
}

// transformers: raise_exception(message) raises TemplateError(message); the template asked to stop.
Value global_raise_exception(CallArgs& call, int line) {
    ArgReader args("raise_exception()", call, line);
    std::string message = value_to_string(args.require(0, "message"));
    fail("chat template line {}: the template raised an error: {}", line, message);
}

// transformers: strftime_now(format) is datetime.now().strftime(format), in local time.
Value global_strftime_now(CallArgs& call, int line) {
    ArgReader args("strftime_now()", call, line);
    std::string format = args.as_string(args.require(0, "format"), "format");
    args.finish();
    std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    constexpr size_t kMaxDateLength = 512;
    std::string out(kMaxDateLength, '\0');
    size_t n = format.empty() ? 0 : std::strftime(out.data(), out.size(), format.c_str(), &local);
    if (n == 0 && !format.empty()) args.fail_here("the formatted date is empty or too long");
    out.resize(n);
    return Value(std::move(out));
}

}  // namespace

Dict builtin_globals() {
    return {
        {"range", Value::function("range", global_range)},
        {"namespace", Value::function("namespace", global_namespace)},
        {"dict", Value::function("dict", global_dict)},
        {"raise_exception", Value::function("raise_exception", global_raise_exception)},
        {"strftime_now", Value::function("strftime_now", global_strftime_now)},
    };
}

}  // namespace coli::text::jinja
