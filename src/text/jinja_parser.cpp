#include "text/jinja_parser.h"

#include <algorithm>
#include <charconv>
#include <initializer_list>

#include "core/error.h"
#include "io/json.h"

namespace coli::text::jinja {

namespace {

// Statements jinja2 has that chat templates do not need; named in the error so the gap is obvious.
constexpr std::string_view kUnsupportedStatements[] = {
    "call",  "filter", "include",    "import", "from", "extends",
    "block", "with",   "autoescape", "do",     "raw",  "trans",
};

// Templates nest a few levels deep; a limit turns absurd nesting into an error instead of a stack overflow.
constexpr int kMaxNesting = 128;

// Names that are syntax, never variables.
bool is_reserved(std::string_view name) {
    return name == "and" || name == "or" || name == "not" || name == "in" || name == "is" || name == "if" ||
           name == "else";
}

class Parser {
public:
    explicit Parser(const std::vector<Token>& tokens) : tokens_(tokens) {}

    Body parse_template() {
        Body body = parse_body({}, "");
        return body;
    }

private:
    // Counts one level of recursion for as long as it lives.
    struct NestingGuard {
        NestingGuard(Parser& p, int line) : parser(p) {
            check(++parser.depth_ <= kMaxNesting, "chat template line {}: nesting deeper than {} levels",
                  line, kMaxNesting);
        }
        ~NestingGuard() { --parser.depth_; }
        Parser& parser;
    };

    const Token& peek(size_t ahead = 0) const {
        size_t i = std::min(pos_ + ahead, tokens_.size() - 1);
        return tokens_[i];
    }
    const Token& next() {
        const Token& t = tokens_[pos_];
        if (pos_ + 1 < tokens_.size()) ++pos_;
        return t;
    }
    bool at_op(std::string_view op, size_t ahead = 0) const {
        return peek(ahead).kind == TokenKind::op && peek(ahead).value == op;
    }
    bool at_name(std::string_view name, size_t ahead = 0) const {
        return peek(ahead).kind == TokenKind::name && peek(ahead).value == name;
    }
    bool skip_op(std::string_view op) {
        if (!at_op(op)) return false;
        next();
        return true;
    }
    bool skip_name(std::string_view name) {
        if (!at_name(name)) return false;
        next();
        return true;
    }

    static std::string describe(const Token& t) {
        switch (t.kind) {
            case TokenKind::end:
                return "the end of the template";
            case TokenKind::text:
                return "template text";
            case TokenKind::string:
                return "string " + quote(t.value);
            default:
                return "'" + t.value + "'";
        }
    }

    [[noreturn]] void fail_at(const Token& t, const std::string& what) const {
        fail("chat template line {}: {}", t.line, what);
    }

    void expect_op(std::string_view op) {
        if (!skip_op(op)) fail_at(peek(), fmt::format("expected '{}', found {}", op, describe(peek())));
    }
    std::string expect_name() {
        if (peek().kind != TokenKind::name)
            fail_at(peek(), fmt::format("expected a name, found {}", describe(peek())));
        return next().value;
    }
    void expect_block_end() {
        if (peek().kind != TokenKind::block_end) {
            fail_at(peek(), fmt::format("expected '%}}', found {}", describe(peek())));
        }
        next();
    }

    // ---- statements ----

    // Parses until `{% name %}` for a name in `ends` (left unconsumed) or, with no ends, the template's end.
    Body parse_body(std::initializer_list<std::string_view> ends, std::string_view opener,
                    int opener_line = 0) {
        Body body;
        while (true) {
            const Token& t = peek();
            if (t.kind == TokenKind::end) {
                check(ends.size() == 0, "chat template line {}: {{% {} %}} is never closed", opener_line,
                      opener);
                return body;
            }
            if (t.kind == TokenKind::text) {
                body.push_back(std::make_unique<Stmt>(Stmt{t.line, TextStmt{t.value}}));
                next();
            } else if (t.kind == TokenKind::variable_begin) {
                next();
                ExprPtr value = parse_tuple(true, false);
                if (peek().kind != TokenKind::variable_end) {
                    fail_at(peek(), fmt::format("expected '}}}}', found {}", describe(peek())));
                }
                next();
                body.push_back(std::make_unique<Stmt>(Stmt{t.line, OutputStmt{std::move(value)}}));
            } else if (t.kind == TokenKind::block_begin) {
                const Token& name = peek(1);
                if (name.kind == TokenKind::name &&
                    std::find(ends.begin(), ends.end(), std::string_view(name.value)) != ends.end()) {
                    return body;
                }
                next();
                body.push_back(parse_statement());
            } else {
                fail_at(t, fmt::format("unexpected {}", describe(t)));
            }
        }
    }

    // Consumes `{% name %}` for a closing tag.
    void expect_end_tag(std::string_view name) {
        next();  // {%
        if (!skip_name(name)) fail_at(peek(), fmt::format("expected '{}'", name));
        expect_block_end();
    }

    StmtPtr parse_statement() {
        const Token& t = peek();
        NestingGuard guard(*this, t.line);
        if (t.kind != TokenKind::name)
            fail_at(t, fmt::format("expected a statement name, found {}", describe(t)));
        std::string name = next().value;
        int line = t.line;
        if (name == "if") return parse_if(line);
        if (name == "for") return parse_for(line);
        if (name == "set") return parse_set(line);
        if (name == "macro") return parse_macro(line);
        if (name == "break" || name == "continue") {
            expect_block_end();
            if (name == "break") return std::make_unique<Stmt>(Stmt{line, BreakStmt{}});
            return std::make_unique<Stmt>(Stmt{line, ContinueStmt{}});
        }
        if (name == "generation") {
            expect_block_end();
            Body body = parse_body({"endgeneration"}, "generation", line);
            expect_end_tag("endgeneration");
            return std::make_unique<Stmt>(Stmt{line, GenerationStmt{std::move(body)}});
        }
        for (std::string_view unsupported : kUnsupportedStatements) {
            if (name == unsupported) {
                fail(
                    "chat template line {}: the {{% {} %}} statement is not supported by colibri's Jinja "
                    "subset",
                    line, name);
            }
        }
        fail("chat template line {}: unknown statement {{% {} %}}", line, name);
    }

    StmtPtr parse_if(int line) {
        IfStmt node;
        ExprPtr condition = parse_tuple(false, false);
        expect_block_end();
        while (true) {
            Body body = parse_body({"elif", "else", "endif"}, "if", line);
            node.branches.emplace_back(std::move(condition), std::move(body));
            next();  // {%
            std::string keyword = next().value;
            if (keyword == "elif") {
                condition = parse_tuple(false, false);
                expect_block_end();
                continue;
            }
            if (keyword == "else") {
                expect_block_end();
                node.otherwise = parse_body({"endif"}, "if", line);
                expect_end_tag("endif");
            } else {
                expect_block_end();  // endif
            }
            break;
        }
        return std::make_unique<Stmt>(Stmt{line, std::move(node)});
    }

    StmtPtr parse_for(int line) {
        ForStmt node;
        bool parenthesized = skip_op("(");
        do {
            node.targets.push_back(expect_name());
        } while (skip_op(","));
        if (parenthesized) expect_op(")");
        if (!skip_name("in"))
            fail_at(peek(), fmt::format("expected 'in' in the for loop, found {}", describe(peek())));
        node.iterable = parse_tuple(false, false);
        if (skip_name("if")) node.filter = parse_expression(true);
        if (at_name("recursive"))
            fail_at(peek(), "recursive for loops are not supported by colibri's Jinja subset");
        expect_block_end();
        node.body = parse_body({"endfor", "else"}, "for", line);
        if (at_name("else", 1)) {
            next();
            next();
            expect_block_end();
            node.otherwise = parse_body({"endfor"}, "for", line);
        }
        expect_end_tag("endfor");
        return std::make_unique<Stmt>(Stmt{line, std::move(node)});
    }

    StmtPtr parse_set(int line) {
        SetStmt node;
        node.targets.push_back(expect_name());
        if (skip_op(".")) {
            node.attribute = expect_name();
        } else {
            while (skip_op(",")) node.targets.push_back(expect_name());
        }
        if (skip_op("=")) {
            node.value = parse_tuple(true, false);
            expect_block_end();
        } else {
            if (!node.attribute.empty() || node.targets.size() != 1) {
                fail_at(peek(), "a block {% set %} assigns exactly one name");
            }
            if (at_op("|")) fail_at(peek(), "filtered block {% set x | filter %} is not supported");
            expect_block_end();
            node.body = parse_body({"endset"}, "set", line);
            expect_end_tag("endset");
        }
        return std::make_unique<Stmt>(Stmt{line, std::move(node)});
    }

    StmtPtr parse_macro(int line) {
        MacroStmt node;
        node.name = expect_name();
        expect_op("(");
        while (!at_op(")")) {
            if (!node.params.empty()) expect_op(",");
            if (at_op(")")) break;
            std::string param = expect_name();
            ExprPtr default_value;
            if (skip_op("=")) {
                default_value = parse_expression(true);
            } else if (!node.params.empty() && node.params.back().second) {
                fail_at(
                    peek(),
                    fmt::format("macro parameter '{}' without a default follows one with a default", param));
            }
            node.params.emplace_back(std::move(param), std::move(default_value));
        }
        expect_op(")");
        expect_block_end();
        node.body = parse_body({"endmacro"}, "macro", line);
        expect_end_tag("endmacro");
        return std::make_unique<Stmt>(Stmt{line, std::move(node)});
    }

    // ---- expressions (jinja2's precedence, loosest first) ----

    ExprPtr make(int line, auto node) { return std::make_unique<Expr>(Expr{line, std::move(node)}); }

    // Comma-separated expressions form a tuple; `explicit_parens` allows the empty tuple `()`.
    ExprPtr parse_tuple(bool with_condexpr, bool explicit_parens) {
        int line = peek().line;
        std::vector<ExprPtr> items;
        bool is_tuple = false;
        while (true) {
            if (!items.empty()) expect_op(",");
            if (at_tuple_end()) break;
            items.push_back(parse_expression(with_condexpr));
            if (at_op(",")) {
                is_tuple = true;
            } else {
                break;
            }
        }
        if (!is_tuple) {
            if (!items.empty()) return std::move(items[0]);
            if (!explicit_parens)
                fail_at(peek(), fmt::format("expected an expression, found {}", describe(peek())));
        }
        return make(line, ListExpr{std::move(items), true});
    }

    bool at_tuple_end() const {
        const Token& t = peek();
        return t.kind == TokenKind::variable_end || t.kind == TokenKind::block_end ||
               t.kind == TokenKind::end || at_op(")") || at_name("if");
    }

    ExprPtr parse_expression(bool with_condexpr) {
        NestingGuard guard(*this, peek().line);
        return with_condexpr ? parse_conditional() : parse_or();
    }

    ExprPtr parse_conditional() {
        ExprPtr value = parse_or();
        while (at_name("if")) {
            int line = next().line;
            ExprPtr condition = parse_or();
            ExprPtr otherwise;
            if (skip_name("else")) otherwise = parse_conditional();
            value = make(line, ConditionalExpr{std::move(condition), std::move(value), std::move(otherwise)});
        }
        return value;
    }

    ExprPtr parse_or() {
        ExprPtr left = parse_and();
        while (at_name("or")) {
            int line = next().line;
            left = make(line, BinaryExpr{"or", std::move(left), parse_and()});
        }
        return left;
    }

    ExprPtr parse_and() {
        ExprPtr left = parse_not();
        while (at_name("and")) {
            int line = next().line;
            left = make(line, BinaryExpr{"and", std::move(left), parse_not()});
        }
        return left;
    }

    ExprPtr parse_not() {
        if (at_name("not")) {
            int line = next().line;
            return make(line, UnaryExpr{"not", parse_not()});
        }
        return parse_compare();
    }

    ExprPtr parse_compare() {
        int line = peek().line;
        ExprPtr first = parse_math1();
        std::vector<std::pair<std::string, ExprPtr>> rest;
        while (true) {
            const Token& t = peek();
            if (t.kind == TokenKind::op && (t.value == "==" || t.value == "!=" || t.value == "<" ||
                                            t.value == ">" || t.value == "<=" || t.value == ">=")) {
                std::string op = next().value;
                rest.emplace_back(op, parse_math1());
            } else if (skip_name("in")) {
                rest.emplace_back("in", parse_math1());
            } else if (at_name("not") && at_name("in", 1)) {
                next();
                next();
                rest.emplace_back("not in", parse_math1());
            } else {
                break;
            }
        }
        if (rest.empty()) return first;
        return make(line, CompareExpr{std::move(first), std::move(rest)});
    }

    ExprPtr parse_math1() {
        ExprPtr left = parse_concat();
        while (at_op("+") || at_op("-")) {
            const Token& t = next();
            left = make(t.line, BinaryExpr{t.value, std::move(left), parse_concat()});
        }
        return left;
    }

    ExprPtr parse_concat() {
        ExprPtr left = parse_math2();
        while (at_op("~")) {
            int line = next().line;
            left = make(line, BinaryExpr{"~", std::move(left), parse_math2()});
        }
        return left;
    }

    ExprPtr parse_math2() {
        ExprPtr left = parse_pow();
        while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
            const Token& t = next();
            left = make(t.line, BinaryExpr{t.value, std::move(left), parse_pow()});
        }
        return left;
    }

    ExprPtr parse_pow() {
        ExprPtr left = parse_unary(true);
        while (at_op("**")) {
            int line = next().line;
            left = make(line, BinaryExpr{"**", std::move(left), parse_unary(true)});
        }
        return left;
    }

    ExprPtr parse_unary(bool with_filter) {
        NestingGuard guard(*this, peek().line);
        ExprPtr node;
        if (at_op("-") || at_op("+")) {
            const Token& t = next();
            node = make(t.line, UnaryExpr{t.value, parse_unary(false)});
        } else {
            node = parse_primary();
        }
        node = parse_postfix(std::move(node));
        if (with_filter) node = parse_filters_and_tests(std::move(node));
        return node;
    }

    ExprPtr parse_primary() {
        const Token& t = peek();
        switch (t.kind) {
            case TokenKind::name: {
                next();
                if (t.value == "true" || t.value == "True") return make(t.line, LiteralExpr{Value(true)});
                if (t.value == "false" || t.value == "False") return make(t.line, LiteralExpr{Value(false)});
                if (t.value == "none" || t.value == "None") return make(t.line, LiteralExpr{Value::none()});
                if (is_reserved(t.value)) fail_at(t, fmt::format("unexpected '{}'", t.value));
                return make(t.line, NameExpr{t.value});
            }
            case TokenKind::string: {
                std::string text;
                while (peek().kind == TokenKind::string)
                    text += next().value;  // adjacent literals concatenate
                return make(t.line, LiteralExpr{Value(std::move(text))});
            }
            case TokenKind::integer: {
                next();
                int64_t v = 0;
                auto [p, ec] = std::from_chars(t.value.data(), t.value.data() + t.value.size(), v);
                if (ec != std::errc()) fail_at(t, fmt::format("integer literal {} is out of range", t.value));
                return make(t.line, LiteralExpr{Value(v)});
            }
            case TokenKind::floating: {
                next();
                return make(t.line, LiteralExpr{Value(std::stod(t.value))});
            }
            case TokenKind::op:
                if (t.value == "(") {
                    next();
                    ExprPtr inner = parse_tuple(true, true);
                    expect_op(")");
                    return inner;
                }
                if (t.value == "[") {
                    next();
                    std::vector<ExprPtr> items;
                    while (!at_op("]")) {
                        if (!items.empty()) expect_op(",");
                        if (at_op("]")) break;
                        items.push_back(parse_expression(true));
                    }
                    expect_op("]");
                    return make(t.line, ListExpr{std::move(items), false});
                }
                if (t.value == "{") {
                    next();
                    DictExpr dict;
                    while (!at_op("}")) {
                        if (!dict.items.empty()) expect_op(",");
                        if (at_op("}")) break;
                        ExprPtr key = parse_expression(true);
                        expect_op(":");
                        dict.items.emplace_back(std::move(key), parse_expression(true));
                    }
                    expect_op("}");
                    return make(t.line, std::move(dict));
                }
                break;
            default:
                break;
        }
        fail_at(t, fmt::format("unexpected {}", describe(t)));
    }

    ExprPtr parse_postfix(ExprPtr node) {
        while (true) {
            if (at_op(".")) {
                int line = next().line;
                const Token& t = next();
                if (t.kind == TokenKind::name) {
                    node = make(line, AttributeExpr{std::move(node), t.value});
                } else if (t.kind == TokenKind::integer) {  // foo.0 is foo[0]
                    node = make(
                        line,
                        ItemExpr{std::move(node),
                                 make(line, LiteralExpr{Value(static_cast<int64_t>(std::stoll(t.value)))})});
                } else {
                    fail_at(t, fmt::format("expected an attribute name after '.', found {}", describe(t)));
                }
            } else if (at_op("[")) {
                node = parse_subscript(std::move(node));
            } else if (at_op("(")) {
                int line = peek().line;
                Arguments args = parse_call_args();
                node = make(line, CallExpr{std::move(node), std::move(args)});
            } else {
                return node;
            }
        }
    }

    ExprPtr parse_subscript(ExprPtr object) {
        int line = next().line;  // [
        ExprPtr parts[3];
        int part = 0;
        bool is_slice = false;
        while (true) {
            if (at_op(":")) {
                next();
                is_slice = true;
                ++part;
                if (part > 2) fail_at(peek(), "a slice has at most three parts");
                continue;
            }
            if (at_op("]")) break;
            if (parts[part]) fail_at(peek(), fmt::format("unexpected {} in a subscript", describe(peek())));
            parts[part] = parse_expression(true);
        }
        expect_op("]");
        if (!is_slice) {
            if (!parts[0]) fail_at(peek(), "empty subscript []");
            return make(line, ItemExpr{std::move(object), std::move(parts[0])});
        }
        return make(line, SliceExpr{std::move(object), std::move(parts[0]), std::move(parts[1]),
                                    std::move(parts[2])});
    }

    Arguments parse_call_args() {
        expect_op("(");
        Arguments args;
        bool first = true;
        while (!at_op(")")) {
            if (!first) expect_op(",");
            first = false;
            if (at_op(")")) break;
            if (at_op("*") || at_op("**"))
                fail_at(peek(), "argument unpacking (*args, **kwargs) is not supported");
            if (peek().kind == TokenKind::name && at_op("=", 1)) {
                std::string key = next().value;
                next();
                args.keyword.emplace_back(std::move(key), parse_expression(true));
            } else {
                if (!args.keyword.empty()) fail_at(peek(), "positional argument follows keyword argument");
                args.positional.push_back(parse_expression(true));
            }
        }
        expect_op(")");
        return args;
    }

    // Filter and test names may be dotted in jinja2; chat templates use plain names.
    ExprPtr parse_filters_and_tests(ExprPtr node) {
        while (true) {
            if (at_op("|")) {
                int line = next().line;
                std::string name = expect_name();
                Arguments args;
                if (at_op("(")) args = parse_call_args();
                node = make(line, FilterExpr{std::move(node), std::move(name), std::move(args)});
            } else if (at_name("is")) {
                int line = next().line;
                bool negated = skip_name("not");
                std::string name = expect_name();
                Arguments args;
                if (at_op("(")) {
                    args = parse_call_args();
                } else if (starts_test_argument()) {
                    // `x is divisibleby 3`, `x is sameas none`: one argument without parentheses.
                    args.positional.push_back(parse_postfix(parse_primary()));
                }
                node = make(line, TestExpr{std::move(node), std::move(name), std::move(args), negated});
            } else if (at_op("(")) {
                int line = peek().line;
                Arguments args = parse_call_args();
                node = make(line, CallExpr{std::move(node), std::move(args)});
            } else {
                return node;
            }
        }
    }

    bool starts_test_argument() const {
        const Token& t = peek();
        if (t.kind == TokenKind::name) return t.value != "else" && t.value != "or" && t.value != "and";
        if (t.kind == TokenKind::string || t.kind == TokenKind::integer || t.kind == TokenKind::floating)
            return true;
        return at_op("(") || at_op("[") || at_op("{");
    }

    const std::vector<Token>& tokens_;
    size_t pos_ = 0;
    int depth_ = 0;
};

}  // namespace

Body jinja_parse(const std::vector<Token>& tokens) {
    return Parser(tokens).parse_template();
}

}  // namespace coli::text::jinja
