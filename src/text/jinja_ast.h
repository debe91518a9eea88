// The syntax tree of a parsed Jinja template: expressions and statements, each with its source line.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "text/jinja_value.h"

namespace coli::text::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Arguments {
    std::vector<ExprPtr> positional;
    std::vector<std::pair<std::string, ExprPtr>> keyword;
};

struct LiteralExpr {
    Value value;
};
struct NameExpr {
    std::string name;
};
struct ListExpr {
    std::vector<ExprPtr> items;
    bool tuple = false;
};
struct DictExpr {
    std::vector<std::pair<ExprPtr, ExprPtr>> items;
};
struct AttributeExpr {
    ExprPtr object;
    std::string name;
};  // obj.name
struct ItemExpr {
    ExprPtr object;
    ExprPtr key;
};  // obj[key]
struct SliceExpr {
    ExprPtr object;
    ExprPtr start, stop, step;
};  // obj[start:stop:step], parts may be null
struct CallExpr {
    ExprPtr callee;
    Arguments args;
};
struct FilterExpr {
    ExprPtr operand;
    std::string name;
    Arguments args;
};  // operand | name(args)
struct TestExpr {
    ExprPtr operand;
    std::string name;
    Arguments args;
    bool negated = false;
};  // is [not] name
struct UnaryExpr {
    std::string op;
    ExprPtr operand;
};  // - + not
struct BinaryExpr {
    std::string op;
    ExprPtr left, right;
};                    // + - * / // % ** ~ and or
struct CompareExpr {  // a < b == c, in, not in (chained)
    ExprPtr first;
    std::vector<std::pair<std::string, ExprPtr>> rest;
};
struct ConditionalExpr {
    ExprPtr condition, then_value, else_value;
};  // else_value may be null

struct Expr {
    int line;
    std::variant<LiteralExpr, NameExpr, ListExpr, DictExpr, AttributeExpr, ItemExpr, SliceExpr, CallExpr,
                 FilterExpr, TestExpr, UnaryExpr, BinaryExpr, CompareExpr, ConditionalExpr>
        node;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct TextStmt {
    std::string text;
};
struct OutputStmt {
    ExprPtr value;
};
struct IfStmt {
    std::vector<std::pair<ExprPtr, Body>> branches;  // if, then each elif
    Body otherwise;
};
struct ForStmt {
    std::vector<std::string> targets;  // one name, or several to unpack each item into
    ExprPtr iterable;
    ExprPtr filter;  // `for x in xs if cond`, may be null
    Body body;
    Body otherwise;  // runs when no item was iterated
};
struct SetStmt {
    std::vector<std::string> targets;  // `set a = ...` or `set a, b = ...`
    std::string attribute;             // `set ns.attribute = ...`: targets holds the namespace's name
    ExprPtr value;                     // null for a block set: `{% set x %}body{% endset %}`
    Body body;
};
struct MacroStmt {
    std::string name;
    std::vector<std::pair<std::string, ExprPtr>> params;  // default may be null
    Body body;
};
struct BreakStmt {};
struct ContinueStmt {};
struct GenerationStmt {
    Body body;
};  // transformers' {% generation %}: renders its body unchanged

struct Stmt {
    int line;
    std::variant<TextStmt, OutputStmt, IfStmt, ForStmt, SetStmt, MacroStmt, BreakStmt, ContinueStmt,
                 GenerationStmt>
        node;
};

}  // namespace coli::text::jinja
