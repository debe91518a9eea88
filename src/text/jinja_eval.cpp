// Renders a parsed template: statements write output, expressions compute Values with Python's rules.
#include <cmath>
#include <limits>
#include <unordered_map>

#include "core/error.h"
#include "text/jinja_builtins.h"
#include "text/jinja_parser.h"
#include "text/jinja_string.h"
#include "text/jinja_template.h"

namespace coli::text::jinja {

namespace {

// Deep macro recursion (a template formatting nested JSON by hand) is legitimate; unbounded recursion is
// not, and must end in an error rather than a stack overflow.
constexpr int kMaxCallDepth = 200;

// Variables of one frame. jinja2 frames: the template, each for-loop iteration, each macro call.
// `if` bodies share their enclosing frame, so a set inside an if is seen after it.
struct Scope {
    std::unordered_map<std::string, Value> vars;
    std::shared_ptr<Scope> parent;

    const Value* find(const std::string& name) const {
        for (const Scope* s = this; s != nullptr; s = s->parent.get()) {
            auto it = s->vars.find(name);
            if (it != s->vars.end()) return &it->second;
        }
        return nullptr;
    }
};
using ScopePtr = std::shared_ptr<Scope>;

enum class Flow { normal, break_loop, continue_loop };

[[noreturn]] void fail_type(int line, std::string_view op, const Value& a, const Value& b) {
    fail("chat template line {}: unsupported operand type(s) for {}: '{}' and '{}'", line, op,
         value_type_name(a), value_type_name(b));
}

bool is_integral(const Value& v) {
    return v.is_int() || v.is_bool();
}
int64_t integral(const Value& v) {
    return v.is_bool() ? int64_t{v.as_bool()} : v.as_int();
}

// Python integers do not overflow; ours are 64-bit, and a result that does not fit is an error.
template <typename Op>
Value checked_integer(Op op, int64_t a, int64_t b, int line) {
    int64_t result = 0;
    bool overflow = op(a, b, &result);
    check(!overflow, "chat template line {}: integer overflow", line);
    return Value(result);
}

Value repeat(const Value& seq, int64_t times, int line) {
    constexpr int64_t kMaxRepeatBytes = int64_t{1} << 26;  // a template has no business building more
    times = std::max<int64_t>(times, 0);
    if (seq.is_string()) {
        check(static_cast<int64_t>(seq.as_string().size()) * times <= kMaxRepeatBytes,
              "chat template line {}: string repetition is too large", line);
        std::string out;
        for (int64_t i = 0; i < times; ++i) out += seq.as_string();
        return Value(std::move(out));
    }
    check(static_cast<int64_t>(seq.as_list().size()) * times <= kMaxRepeatBytes,
          "chat template line {}: list repetition is too large", line);
    List out;
    for (int64_t i = 0; i < times; ++i) out.insert(out.end(), seq.as_list().begin(), seq.as_list().end());
    return seq.as_sequence().tuple ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

Value arithmetic(const std::string& op, const Value& a, const Value& b, int line) {
    if (op == "~") return Value(value_to_string(a) + value_to_string(b));
    check_defined(a, line);
    check_defined(b, line);
    bool ints = is_integral(a) && is_integral(b);
    bool numbers = a.is_number() && b.is_number();
    if (op == "+") {
        if (ints) {
            return checked_integer(
                [](int64_t x, int64_t y, int64_t* r) { return __builtin_add_overflow(x, y, r); }, integral(a),
                integral(b), line);
        }
        if (numbers) return Value(a.as_double() + b.as_double());
        if (a.is_string() && b.is_string()) return Value(a.as_string() + b.as_string());
        if (a.is_list() && b.is_list() && a.as_sequence().tuple == b.as_sequence().tuple) {
            List joined = a.as_list();
            joined.insert(joined.end(), b.as_list().begin(), b.as_list().end());
            return a.as_sequence().tuple ? Value::tuple(std::move(joined)) : Value::list(std::move(joined));
        }
        fail_type(line, op, a, b);
    }
    if (op == "-") {
        if (ints) {
            return checked_integer(
                [](int64_t x, int64_t y, int64_t* r) { return __builtin_sub_overflow(x, y, r); }, integral(a),
                integral(b), line);
        }
        if (numbers) return Value(a.as_double() - b.as_double());
        fail_type(line, op, a, b);
    }
    if (op == "*") {
        if (ints) {
            return checked_integer(
                [](int64_t x, int64_t y, int64_t* r) { return __builtin_mul_overflow(x, y, r); }, integral(a),
                integral(b), line);
        }
        if (numbers) return Value(a.as_double() * b.as_double());
        if ((a.is_string() || a.is_list()) && is_integral(b)) return repeat(a, integral(b), line);
        if (is_integral(a) && (b.is_string() || b.is_list())) return repeat(b, integral(a), line);
        fail_type(line, op, a, b);
    }
    if (!numbers) {
        if (op == "%" && a.is_string()) {
            fail("chat template line {}: printf-style string formatting ('...' % x) is not supported", line);
        }
        fail_type(line, op, a, b);
    }
    if (op == "/") {
        check(b.as_double() != 0.0, "chat template line {}: division by zero", line);
        return Value(a.as_double() / b.as_double());
    }
    if (op == "//" || op == "%") {
        if (ints) {
            int64_t x = integral(a), y = integral(b);
            check(y != 0, "chat template line {}: integer division or modulo by zero", line);
            check(!(x == std::numeric_limits<int64_t>::min() && y == -1),
                  "chat template line {}: integer overflow", line);
            int64_t q = x / y, r = x % y;
            if (r != 0 && ((r < 0) != (y < 0))) {  // Python rounds toward negative infinity
                --q;
                r += y;
            }
            return Value(op == "//" ? q : r);
        }
        double x = a.as_double(), y = b.as_double();
        check(y != 0.0, "chat template line {}: float division or modulo by zero", line);
        if (op == "//") return Value(std::floor(x / y));
        double r = std::fmod(x, y);
        if (r != 0.0 && ((r < 0) != (y < 0))) r += y;
        return Value(r);
    }
    if (op == "**") {
        if (ints && integral(b) >= 0) {
            int64_t base = integral(a), result = 1;
            for (int64_t e = integral(b); e > 0; --e) {
                check(!__builtin_mul_overflow(result, base, &result),
                      "chat template line {}: integer overflow", line);
                if (result == 0 || result == 1) break;  // further factors change nothing (base 0 or 1)
            }
            return Value(result);
        }
        return Value(std::pow(a.as_double(), b.as_double()));
    }
    fail("chat template line {}: unknown operator '{}'", line, op);
}

bool compare(const std::string& op, const Value& a, const Value& b, int line) {
    if (op == "==") return value_equal(a, b);
    if (op == "!=") return !value_equal(a, b);
    if (op == "in") return value_contains(b, a, line);
    if (op == "not in") return !value_contains(b, a, line);
    check_defined(a, line);
    check_defined(b, line);
    bool comparable = true;
    bool result = false;
    if (op == "<")
        result = value_less(a, b, comparable);
    else if (op == ">")
        result = value_less(b, a, comparable);
    else if (op == "<=")
        result = !value_less(b, a, comparable);
    else if (op == ">=")
        result = !value_less(a, b, comparable);
    if (!comparable) {
        fail("chat template line {}: '{}' not supported between instances of '{}' and '{}'", line, op,
             value_type_name(a), value_type_name(b));
    }
    return result;
}

class Evaluator {
public:
    Flow exec(const Body& body, const ScopePtr& scope, std::string& out) {
        for (const StmtPtr& stmt : body) {
            Flow flow = exec_statement(*stmt, scope, out);
            if (flow != Flow::normal) return flow;
        }
        return Flow::normal;
    }

    // A body that must not end in break/continue: the template itself and macro bodies.
    void exec_outside_loop(const Body& body, const ScopePtr& scope, std::string& out, int line) {
        Flow flow = exec(body, scope, out);
        check(flow == Flow::normal,
              "chat template line {}: {{% break %}} or {{% continue %}} outside a for loop", line);
    }

    Value eval(const Expr& e, const ScopePtr& scope) {
        return std::visit([&](const auto& node) { return eval_node(node, e.line, scope); }, e.node);
    }

private:
    Flow exec_statement(const Stmt& stmt, const ScopePtr& scope, std::string& out) {
        return std::visit([&](const auto& node) { return exec_node(node, stmt.line, scope, out); },
                          stmt.node);
    }

    Flow exec_node(const TextStmt& node, int, const ScopePtr&, std::string& out) {
        out += node.text;
        return Flow::normal;
    }

    Flow exec_node(const OutputStmt& node, int, const ScopePtr& scope, std::string& out) {
        out += value_to_string(eval(*node.value, scope));
        return Flow::normal;
    }

    Flow exec_node(const IfStmt& node, int, const ScopePtr& scope, std::string& out) {
        for (const auto& [condition, body] : node.branches) {
            if (eval(*condition, scope).truthy()) return exec(body, scope, out);
        }
        return exec(node.otherwise, scope, out);
    }

    void bind_targets(Scope& scope, const std::vector<std::string>& targets, const Value& v, int line) {
        if (targets.size() == 1) {
            scope.vars[targets[0]] = v;
            return;
        }
        List items = v.is_list() || v.is_string() ? value_iterate(v, line) : List{};
        check(v.is_list() || v.is_string(), "chat template line {}: cannot unpack a {} into {} names", line,
              value_type_name(v), targets.size());
        check(items.size() == targets.size(), "chat template line {}: cannot unpack {} values into {} names",
              line, items.size(), targets.size());
        for (size_t i = 0; i < targets.size(); ++i) scope.vars[targets[i]] = items[i];
    }

    Value loop_object(const List& items, size_t i) {
        auto n = static_cast<int64_t>(items.size());
        auto index0 = static_cast<int64_t>(i);
        Dict loop = {
            {"index", Value(index0 + 1)},
            {"index0", Value(index0)},
            {"revindex", Value(n - index0)},
            {"revindex0", Value(n - index0 - 1)},
            {"first", Value(i == 0)},
            {"last", Value(index0 == n - 1)},
            {"length", Value(n)},
            {"depth", Value(1)},
            {"depth0", Value(0)},
            {"previtem", i > 0 ? items[i - 1] : Value::undefined("there is no previous item")},
            {"nextitem", index0 + 1 < n ? items[i + 1] : Value::undefined("there is no next item")},
            {"cycle",
             Value::function("loop.cycle",
                             [index0](CallArgs& args, int line) -> Value {
                                 check(!args.positional.empty(),
                                       "chat template line {}: loop.cycle() needs at least one value", line);
                                 return args.positional[static_cast<size_t>(index0) % args.positional.size()];
                             })},
        };
        return Value::dict(std::move(loop));
    }

    Flow exec_node(const ForStmt& node, int line, const ScopePtr& scope, std::string& out) {
        List items = value_iterate(eval(*node.iterable, scope), line);
        if (node.filter) {
            List kept;
            for (const Value& item : items) {
                auto probe = std::make_shared<Scope>(Scope{{}, scope});
                bind_targets(*probe, node.targets, item, line);
                if (eval(*node.filter, probe).truthy()) kept.push_back(item);
            }
            items = std::move(kept);
        }
        for (size_t i = 0; i < items.size(); ++i) {
            // Each iteration is a fresh frame: what the body sets is gone in the next iteration.
            auto iteration = std::make_shared<Scope>(Scope{{}, scope});
            iteration->vars["loop"] = loop_object(items, i);
            bind_targets(*iteration, node.targets, items[i], line);
            Flow flow = exec(node.body, iteration, out);
            if (flow == Flow::break_loop) break;
        }
        if (items.empty()) {
            return exec(node.otherwise, std::make_shared<Scope>(Scope{{}, scope}), out);
        }
        return Flow::normal;
    }

    Flow exec_node(const SetStmt& node, int line, const ScopePtr& scope, std::string& out) {
        Value v;
        if (node.value) {
            v = eval(*node.value, scope);
        } else {
            std::string captured;
            exec_outside_loop(node.body, scope, captured, line);
            v = Value(std::move(captured));
        }
        if (node.attribute.empty()) {
            bind_targets(*scope, node.targets, v, line);
            return Flow::normal;
        }
        const Value* target = scope->find(node.targets[0]);
        check(target != nullptr && target->is_namespace(),
              "chat template line {}: cannot assign attribute '{}' of '{}': only namespace() objects take "
              "attributes",
              line, node.attribute, node.targets[0]);
        Dict& attributes = target->as_namespace().attributes;
        for (auto& [k, existing] : attributes) {
            if (k == node.attribute) {
                existing = std::move(v);
                return Flow::normal;
            }
        }
        attributes.emplace_back(node.attribute, std::move(v));
        return Flow::normal;
    }

    Flow exec_node(const MacroStmt& node, int line, const ScopePtr& scope, std::string&) {
        // The macro sees the frame it was defined in (jinja2 compiles macros as closures). A weak pointer:
        // the frame holds the macro, and a strong one would keep both alive forever.
        std::weak_ptr<Scope> defined_in = scope;
        const MacroStmt* macro = &node;
        scope->vars[node.name] =
            Value::function(node.name, [this, macro, defined_in, line](CallArgs& args, int call_line) {
                return call_macro(*macro, defined_in.lock(), args, call_line);
            });
        return Flow::normal;
    }

    Value call_macro(const MacroStmt& macro, const ScopePtr& defined_in, CallArgs& args, int line) {
        check(defined_in != nullptr,
              "chat template line {}: macro '{}' was called outside the block that defined it", line,
              macro.name);
        check(call_depth_ < kMaxCallDepth, "chat template line {}: macro calls nest deeper than {}", line,
              kMaxCallDepth);
        auto frame = std::make_shared<Scope>(Scope{{}, defined_in});
        std::vector<bool> keyword_used(args.keyword.size(), false);
        for (size_t i = 0; i < macro.params.size(); ++i) {
            const auto& [name, default_value] = macro.params[i];
            Value v =
                Value::undefined(fmt::format("parameter '{}' of macro '{}' was not given", name, macro.name));
            bool given = false;
            if (i < args.positional.size()) {
                v = args.positional[i];
                given = true;
            }
            for (size_t k = 0; k < args.keyword.size(); ++k) {
                if (args.keyword[k].first != name) continue;
                check(!given, "chat template line {}: macro '{}' got multiple values for '{}'", line,
                      macro.name, name);
                v = args.keyword[k].second;
                keyword_used[k] = true;
                given = true;
            }
            if (!given && default_value) v = eval(*default_value, frame);
            frame->vars[name] = std::move(v);
        }
        // Extra arguments land in varargs / kwargs, as for a jinja2 macro that reads them.
        List varargs;
        for (size_t i = macro.params.size(); i < args.positional.size(); ++i)
            varargs.push_back(args.positional[i]);
        Dict kwargs;
        for (size_t k = 0; k < args.keyword.size(); ++k) {
            if (!keyword_used[k]) kwargs.push_back(args.keyword[k]);
        }
        frame->vars["varargs"] = Value::tuple(std::move(varargs));
        frame->vars["kwargs"] = Value::dict(std::move(kwargs));
        std::string out;
        ++call_depth_;
        try {
            exec_outside_loop(macro.body, frame, out, line);
        } catch (...) {
            --call_depth_;
            throw;
        }
        --call_depth_;
        return Value(std::move(out));
    }

    Flow exec_node(const BreakStmt&, int, const ScopePtr&, std::string&) { return Flow::break_loop; }
    Flow exec_node(const ContinueStmt&, int, const ScopePtr&, std::string&) { return Flow::continue_loop; }
    Flow exec_node(const GenerationStmt& node, int, const ScopePtr& scope, std::string& out) {
        return exec(node.body, scope, out);
    }

    // ---- expressions ----

    Value eval_node(const LiteralExpr& node, int, const ScopePtr&) { return node.value; }

    Value eval_node(const NameExpr& node, int, const ScopePtr& scope) {
        if (const Value* v = scope->find(node.name)) return *v;
        return Value::undefined(fmt::format("'{}' is undefined", node.name));
    }

    Value eval_node(const ListExpr& node, int, const ScopePtr& scope) {
        List items;
        items.reserve(node.items.size());
        for (const ExprPtr& item : node.items) items.push_back(eval(*item, scope));
        return node.tuple ? Value::tuple(std::move(items)) : Value::list(std::move(items));
    }

    Value eval_node(const DictExpr& node, int line, const ScopePtr& scope) {
        Dict entries;
        for (const auto& [key_expr, value_expr] : node.items) {
            Value key = eval(*key_expr, scope);
            check(key.is_string(), "chat template line {}: dict keys must be strings, not {}", line,
                  value_type_name(key));
            Value v = eval(*value_expr, scope);
            bool replaced = false;
            for (auto& [k, existing] : entries) {
                if (k == key.as_string()) {
                    existing = v;
                    replaced = true;
                }
            }
            if (!replaced) entries.emplace_back(key.as_string(), std::move(v));
        }
        return Value::dict(std::move(entries));
    }

    Value eval_node(const AttributeExpr& node, int line, const ScopePtr& scope) {
        return value_get_attribute(eval(*node.object, scope), node.name, line);
    }

    Value eval_node(const ItemExpr& node, int line, const ScopePtr& scope) {
        Value object = eval(*node.object, scope);
        return value_get_item(object, eval(*node.key, scope), line);
    }

    std::optional<int64_t> slice_bound(const ExprPtr& e, const ScopePtr& scope, int line) {
        if (!e) return std::nullopt;
        Value v = eval(*e, scope);
        if (v.is_none()) return std::nullopt;
        check(is_integral(v), "chat template line {}: slice indices must be integers or None, not {}", line,
              value_type_name(v));
        return integral(v);
    }

    Value eval_node(const SliceExpr& node, int line, const ScopePtr& scope) {
        Value object = eval(*node.object, scope);
        check_defined(object, line);
        auto start = slice_bound(node.start, scope, line);
        auto stop = slice_bound(node.stop, scope, line);
        int64_t step = slice_bound(node.step, scope, line).value_or(1);
        check(step != 0, "chat template line {}: slice step cannot be zero", line);
        check(object.is_list() || object.is_string(), "chat template line {}: a {} cannot be sliced", line,
              value_type_name(object));
        std::u32string cps = object.is_string() ? utf8_to_code_points(object.as_string()) : std::u32string();
        auto n = static_cast<int64_t>(object.is_string() ? cps.size() : object.as_list().size());
        // Python's slice.indices(): clamp each bound into range for the step's direction.
        auto clamp = [&](std::optional<int64_t> b, int64_t fallback) {
            if (!b) return fallback;
            int64_t v = *b < 0 ? *b + n : *b;
            if (step > 0) return std::clamp<int64_t>(v, 0, n);
            return std::clamp<int64_t>(v, -1, n - 1);
        };
        int64_t from = clamp(start, step > 0 ? 0 : n - 1);
        int64_t to = clamp(stop, step > 0 ? n : -1);
        std::vector<size_t> picked;
        for (int64_t i = from; step > 0 ? i < to : i > to; i += step)
            picked.push_back(static_cast<size_t>(i));
        if (object.is_string()) {
            std::u32string out;
            for (size_t i : picked) out += cps[i];
            return Value(code_points_to_utf8(out));
        }
        List out;
        for (size_t i : picked) out.push_back(object.as_list()[i]);
        return object.as_sequence().tuple ? Value::tuple(std::move(out)) : Value::list(std::move(out));
    }

    CallArgs eval_args(const Arguments& args, const ScopePtr& scope) {
        CallArgs out;
        for (const ExprPtr& e : args.positional) out.positional.push_back(eval(*e, scope));
        for (const auto& [name, e] : args.keyword) out.keyword.emplace_back(name, eval(*e, scope));
        return out;
    }

    Value eval_node(const CallExpr& node, int line, const ScopePtr& scope) {
        Value callee = eval(*node.callee, scope);
        check_defined(callee, line);
        check(callee.is_callable(), "chat template line {}: a {} is not callable", line,
              value_type_name(callee));
        CallArgs args = eval_args(node.args, scope);
        return callee.as_callable().call(args, line);
    }

    Value eval_node(const FilterExpr& node, int line, const ScopePtr& scope) {
        Value operand = eval(*node.operand, scope);
        CallArgs args = eval_args(node.args, scope);
        return filter_apply(node.name, operand, args, line);
    }

    Value eval_node(const TestExpr& node, int line, const ScopePtr& scope) {
        Value operand = eval(*node.operand, scope);
        CallArgs args = eval_args(node.args, scope);
        return Value(test_apply(node.name, operand, args, line) != node.negated);
    }

    Value eval_node(const UnaryExpr& node, int line, const ScopePtr& scope) {
        Value v = eval(*node.operand, scope);
        if (node.op == "not") return Value(!v.truthy());
        check_defined(v, line);
        check(v.is_number(), "chat template line {}: bad operand type for unary {}: '{}'", line, node.op,
              value_type_name(v));
        if (node.op == "+") return v.is_bool() ? Value(integral(v)) : v;
        if (v.is_float()) return Value(-v.as_float());
        check(integral(v) != std::numeric_limits<int64_t>::min(), "chat template line {}: integer overflow",
              line);
        return Value(-integral(v));
    }

    Value eval_node(const BinaryExpr& node, int line, const ScopePtr& scope) {
        Value left = eval(*node.left, scope);
        // and / or return an operand, not a bool, and skip the right side when the left decides.
        if (node.op == "and") return left.truthy() ? eval(*node.right, scope) : left;
        if (node.op == "or") return left.truthy() ? left : eval(*node.right, scope);
        return arithmetic(node.op, left, eval(*node.right, scope), line);
    }

    Value eval_node(const CompareExpr& node, int line, const ScopePtr& scope) {
        Value left = eval(*node.first, scope);
        for (const auto& [op, right_expr] : node.rest) {
            Value right = eval(*right_expr, scope);
            if (!compare(op, left, right, line)) return Value(false);
            left = std::move(right);
        }
        return Value(true);
    }

    Value eval_node(const ConditionalExpr& node, int, const ScopePtr& scope) {
        if (eval(*node.condition, scope).truthy()) return eval(*node.then_value, scope);
        if (node.else_value) return eval(*node.else_value, scope);
        return Value::undefined("the inline if-expression evaluated to false and has no else");
    }

    int call_depth_ = 0;
};

}  // namespace

Template::Template(std::string_view source, const LexOptions& options)
    : body_(std::make_shared<const Body>(jinja_parse(jinja_lex(source, options)))) {}

std::string Template::render(const Dict& variables) const {
    auto globals = std::make_shared<Scope>();
    for (auto& [name, v] : builtin_globals()) globals->vars[name] = std::move(v);
    for (const auto& [name, v] : variables) globals->vars[name] = v;
    // Top-level sets go into a frame of their own above the globals, as jinja2's template frame.
    auto root = std::make_shared<Scope>(Scope{{}, globals});
    Evaluator evaluator;
    std::string out;
    evaluator.exec_outside_loop(*body_, root, out, 1);
    return out;
}

}  // namespace coli::text::jinja
