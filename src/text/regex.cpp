#include "text/regex.h"

#include <limits>

#include "core/error.h"
#include "text/utf8.h"

namespace coli::text {

namespace {

// ---- Syntax tree ----------------------------------------------------------------------------------

struct Node {
    enum class Kind { kEmpty, kChar, kSet, kConcat, kAlt, kRepeat, kLook, kAtomic };
    Kind kind = Kind::kEmpty;
    char32_t cp = 0;  // kChar
    int set = -1;     // kSet: index into the program's sets
    std::vector<Node> children;
    int min = 0;
    int max = -1;  // kRepeat; -1 = unbounded
    bool greedy = true;
    bool possessive = false;
    bool negate = false;  // kLook
};

constexpr int kUnbounded = -1;

Node make(Node::Kind kind) {
    Node n;
    n.kind = kind;
    return n;
}

CharSetExpr range_expr(char32_t lo, char32_t hi) {
    CharSetExpr e;
    e.kind = CharSetExpr::Kind::kRange;
    e.lo = lo;
    e.hi = hi;
    return e;
}

CharSetExpr leaf_expr(CharSetExpr::Kind kind, bool negated) {
    CharSetExpr e;
    e.kind = kind;
    e.negated = negated;
    return e;
}

// ---- Parser ---------------------------------------------------------------------------------------

class Parser {
public:
    Parser(std::string_view pattern, std::vector<CharSet>& sets) : src_(pattern), sets_(sets) {
        for (size_t i = 0; i < pattern.size();) {
            Utf8Step step = utf8_decode(pattern.substr(i));
            if (!step.valid) fail("regex {}: invalid UTF-8", quoted());
            p_.push_back(step.cp);
            i += step.length;
        }
    }

    Node parse() {
        Node n = parse_alternation();
        if (i_ != p_.size()) error("unbalanced ')'");
        return n;
    }

private:
    bool at_end() const { return i_ >= p_.size(); }
    char32_t peek(size_t ahead = 0) const { return i_ + ahead < p_.size() ? p_[i_ + ahead] : 0; }
    char32_t next() {
        if (at_end()) error("unexpected end of pattern");
        return p_[i_++];
    }
    bool eat(char32_t c) {
        if (peek() != c || at_end()) return false;
        ++i_;
        return true;
    }
    std::string quoted() const {
        constexpr size_t kShownChars = 120;
        std::string s(src_.substr(0, kShownChars));
        return "\"" + s + (src_.size() > kShownChars ? "...\"" : "\"");
    }
    [[noreturn]] void error(std::string_view what) const {
        fail("regex {}: {} at code point {} (not supported by colibri's tokenizer regex)", quoted(), what,
             i_);
    }

    int add_set(CharSetExpr expr, bool case_insensitive) {
        sets_.emplace_back(std::move(expr), case_insensitive);
        return static_cast<int>(sets_.size()) - 1;
    }

    Node set_node(CharSetExpr expr) {
        Node n = make(Node::Kind::kSet);
        n.set = add_set(std::move(expr), case_insensitive_);
        return n;
    }

    Node char_node(char32_t cp) {
        if (case_insensitive_) {
            std::vector<char32_t> equivalents = case_fold_equivalents(cp);
            if (equivalents.size() > 1) {
                CharSetExpr u;
                for (char32_t e : equivalents) u.children.push_back(range_expr(e, e));
                Node n = make(Node::Kind::kSet);
                n.set = add_set(std::move(u), false);
                return n;
            }
        }
        Node n = make(Node::Kind::kChar);
        n.cp = cp;
        return n;
    }

    Node parse_alternation() {
        Node first = parse_concatenation();
        if (peek() != '|' || at_end()) return first;
        Node alt = make(Node::Kind::kAlt);
        alt.children.push_back(std::move(first));
        while (eat('|')) alt.children.push_back(parse_concatenation());
        return alt;
    }

    Node parse_concatenation() {
        Node cat = make(Node::Kind::kConcat);
        while (!at_end() && peek() != '|' && peek() != ')') {
            Node atom = parse_atom();
            parse_quantifiers(atom);
            cat.children.push_back(std::move(atom));
        }
        if (cat.children.size() == 1) return std::move(cat.children[0]);
        return cat;
    }

    Node parse_group() {
        // After '('.
        Node::Kind kind = Node::Kind::kConcat;
        bool negate = false;
        bool saved_ci = case_insensitive_;
        if (eat('?')) {
            char32_t c = next();
            if (c == ':') {
            } else if (c == '=' || c == '!') {
                kind = Node::Kind::kLook;
                negate = c == '!';
            } else if (c == '>') {
                kind = Node::Kind::kAtomic;
            } else if (c == 'i' && eat(':')) {
                case_insensitive_ = true;
            } else if (c == '<') {
                error("lookbehind or named group '(?<'");
            } else {
                error("group flag '(?" + std::string(1, static_cast<char>(c)) + "'");
            }
        }
        Node body = parse_alternation();
        case_insensitive_ = saved_ci;
        if (!eat(')')) error("missing ')'");
        if (kind == Node::Kind::kConcat) return body;
        Node n = make(kind);
        n.negate = negate;
        n.children.push_back(std::move(body));
        return n;
    }

    Node parse_atom() {
        char32_t c = next();
        switch (c) {
            case '(':
                return parse_group();
            case '[':
                return set_node(parse_class());
            case '.': {  // any code point but \n (Oniguruma's default)
                CharSetExpr u;
                u.children.push_back(range_expr(0, '\n' - 1));
                u.children.push_back(range_expr('\n' + 1, kMaxCodePoint));
                return set_node(std::move(u));
            }
            case '\\': {
                if (auto set = parse_set_escape()) return set_node(std::move(*set));
                return char_node(parse_char_escape());
            }
            case '^':
            case '$':
                error("anchor '^'/'$'");
            case '*':
            case '+':
            case '?':
            case '{':
                error("quantifier with nothing to repeat");
            default:
                return char_node(c);
        }
    }

    int parse_number() {
        if (peek() < '0' || peek() > '9' || at_end()) error("bad {n,m} quantifier");
        constexpr int kMaxCount = 1000;
        int v = 0;
        while (!at_end() && peek() >= '0' && peek() <= '9') {
            v = v * 10 + static_cast<int>(next() - '0');
            if (v > kMaxCount) error("repeat count above 1000");
        }
        return v;
    }

    void parse_quantifiers(Node& atom) {
        bool counted_before = false;
        while (!at_end()) {
            int min, max;
            bool counted = false;
            char32_t c = peek();
            if (c == '*') {
                min = 0, max = kUnbounded;
            } else if (c == '+') {
                min = 1, max = kUnbounded;
            } else if (c == '?') {
                min = 0, max = 1;
            } else if (c == '{') {
                counted = true;
            } else {
                return;
            }
            // Oniguruma (Ruby syntax) reads X{n}+ as (X{n})+ and X*+ as possessive; Perl-style engines read
            // both as possessive. Refuse the ambiguous stacking rather than pick one.
            if (counted_before) error("quantifier after {n,m}");
            ++i_;
            if (counted) {
                min = parse_number();
                max = min;
                if (eat(',')) max = peek() == '}' ? kUnbounded : parse_number();
                if (!eat('}')) error("bad {n,m} quantifier");
                if (max != kUnbounded && max < min) error("{n,m} with m < n");
            }
            Node rep = make(Node::Kind::kRepeat);
            rep.min = min;
            rep.max = max;
            if (eat('?')) {
                rep.greedy = false;
            } else if (!counted && eat('+')) {
                rep.possessive = true;
            }
            rep.children.push_back(std::move(atom));
            atom = std::move(rep);
            counted_before = counted;
            if (!counted) {
                if (!at_end() && (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{'))
                    error("stacked quantifiers");
                return;
            }
        }
    }

    char32_t parse_hex(size_t digits) {
        char32_t v = 0;
        for (size_t k = 0; k < digits; ++k) {
            char32_t c = next();
            int d = (c >= '0' && c <= '9')   ? int(c - '0')
                    : (c >= 'a' && c <= 'f') ? int(c - 'a' + 10)
                    : (c >= 'A' && c <= 'F') ? int(c - 'A' + 10)
                                             : -1;
            if (d < 0) error("bad hex escape");
            v = v * 16 + static_cast<char32_t>(d);
        }
        return v;
    }

    // After '\': a class escape (\p{..} \P{..} \s \S), or nullopt (the '\' is left consumed and the
    // escape letter unread).
    std::optional<CharSetExpr> parse_set_escape() {
        char32_t c = peek();
        if (c == 's' || c == 'S') {
            ++i_;
            return leaf_expr(CharSetExpr::Kind::kWhiteSpace, c == 'S');
        }
        if (c != 'p' && c != 'P') return std::nullopt;
        ++i_;
        bool negated = c == 'P';
        if (!eat('{')) error("\\p without {name}");
        std::string name;
        while (!eat('}')) name += static_cast<char>(next());
        if (!name.empty() && name[0] == '^') {
            negated = !negated;
            name.erase(0, 1);
        }
        if (name == "Han") return leaf_expr(CharSetExpr::Kind::kHan, negated);
        if (name == "White_Space") return leaf_expr(CharSetExpr::Kind::kWhiteSpace, negated);
        auto mask = category_mask_from_name(name);
        if (!mask) error("Unicode property \\p{" + name + "}");
        CharSetExpr e = leaf_expr(CharSetExpr::Kind::kCategory, negated);
        e.categories = *mask;
        return e;
    }

    // After '\': a single-character escape.
    char32_t parse_char_escape() {
        char32_t c = next();
        switch (c) {
            case 'r':
                return '\r';
            case 'n':
                return '\n';
            case 't':
                return '\t';
            case 'f':
                return '\f';
            case 'v':
                return '\v';
            case 'x':
                if (eat('{')) {
                    char32_t v = 0;
                    while (!eat('}')) v = v * 16 + parse_hex(1);
                    if (v > kMaxCodePoint) error("\\x{} above U+10FFFF");
                    return v;
                }
                return parse_hex(2);
            case 'u':
                return parse_hex(4);
            default:
                break;
        }
        bool ascii_punct =
            c < 0x80 && !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'));
        if (ascii_punct || c >= 0x80) return c;
        error("escape '\\" + std::string(1, static_cast<char>(c)) + "'");
    }

    // After '[': the class up to and including its ']'. Items union; '&&' intersects what is left of it
    // with what is right of it; a leading '^' negates the whole.
    CharSetExpr parse_class() {
        bool negated = eat('^');
        std::vector<CharSetExpr> operands;
        CharSetExpr current;  // union of the items since the last '&&'
        for (;;) {
            if (at_end()) error("missing ']'");
            char32_t c = next();
            if (c == ']') break;
            if (c == '&' && peek() == '&') {
                ++i_;
                operands.push_back(std::move(current));
                current = CharSetExpr{};
                continue;
            }
            if (c == '[') {
                if (peek() == ':') error("POSIX bracket expression");
                current.children.push_back(parse_class());
                continue;
            }
            char32_t lo;
            if (c == '\\') {
                if (auto set = parse_set_escape()) {
                    current.children.push_back(std::move(*set));
                    continue;
                }
                lo = parse_char_escape();
            } else {
                lo = c;
            }
            char32_t hi = lo;
            if (peek() == '-' && peek(1) != ']' && i_ + 1 < p_.size()) {
                ++i_;
                char32_t h = next();
                if (h == '[') error("range to a class");
                if (h == '\\') {
                    if (peek() == 'p' || peek() == 'P' || peek() == 's' || peek() == 'S')
                        error("range to a class");
                    h = parse_char_escape();
                }
                hi = h;
                if (hi < lo) error("reversed range");
            }
            current.children.push_back(range_expr(lo, hi));
        }
        CharSetExpr result;
        if (operands.empty()) {
            result = std::move(current);
        } else {
            operands.push_back(std::move(current));
            result.kind = CharSetExpr::Kind::kIntersection;
            result.children = std::move(operands);
        }
        result.negated = negated;
        return result;
    }

    std::string_view src_;
    std::vector<char32_t> p_;
    size_t i_ = 0;
    std::vector<CharSet>& sets_;
    bool case_insensitive_ = false;
};

// ---- Program --------------------------------------------------------------------------------------

enum class Op : uint8_t { kChar, kSet, kSplit, kJmp, kRepeat, kLook, kAtomic, kMatch };

struct Inst {
    Op op;
    bool negate = false;      // kLook
    bool possessive = false;  // kRepeat
    char32_t cp = 0;          // kChar; kRepeat of a single character when set < 0
    int set = -1;             // kSet; kRepeat of a class
    int x = 0;                // kSplit preferred branch, kJmp target, kLook/kAtomic body
    int y = 0;                // kSplit other branch
    int min = 0, max = 0;     // kRepeat
};

// What can start a match from an instruction: a bitmap of ASCII first characters, whether a non-ASCII
// one may, and whether the empty string may match (then anything may follow).
struct FirstSet {
    uint64_t ascii[2] = {0, 0};
    bool non_ascii = false;
    bool nullable = false;

    bool admits(std::span<const char32_t> text, size_t pos) const {
        if (nullable) return true;
        if (pos >= text.size()) return false;
        char32_t c = text[pos];
        if (c >= 0x80) return non_ascii;
        return (ascii[c >> 6] >> (c & 63)) & 1;
    }
    void merge(const FirstSet& o) {
        ascii[0] |= o.ascii[0], ascii[1] |= o.ascii[1];
        non_ascii |= o.non_ascii;
        nullable |= o.nullable;
    }
    static FirstSet everything() {
        FirstSet f;
        f.ascii[0] = f.ascii[1] = ~uint64_t{0};
        f.non_ascii = f.nullable = true;
        return f;
    }
};

bool node_nullable(const Node& n) {
    switch (n.kind) {
        case Node::Kind::kEmpty:
        case Node::Kind::kLook:
            return true;
        case Node::Kind::kChar:
        case Node::Kind::kSet:
            return false;
        case Node::Kind::kConcat:
            for (const Node& c : n.children)
                if (!node_nullable(c)) return false;
            return true;
        case Node::Kind::kAlt:
            for (const Node& c : n.children)
                if (node_nullable(c)) return true;
            return false;
        case Node::Kind::kRepeat:
            return n.min == 0 || node_nullable(n.children[0]);
        case Node::Kind::kAtomic:
            return node_nullable(n.children[0]);
    }
    return true;
}

}  // namespace

struct Regex::Program {
    std::vector<CharSet> sets;
    std::vector<Inst> code;
    std::vector<FirstSet> split_x, split_y;  // per instruction: first sets of a kSplit's branches
    FirstSet start;

    bool matches(const Inst& in, char32_t c) const {
        return in.set < 0 ? c == in.cp : sets[in.set].contains(c);
    }

    int emit(Inst in) {
        code.push_back(in);
        return static_cast<int>(code.size()) - 1;
    }
    int pc() const { return static_cast<int>(code.size()); }

    void compile(const Node& n, std::string_view pattern) {
        switch (n.kind) {
            case Node::Kind::kEmpty:
                break;
            case Node::Kind::kChar:
                emit({.op = Op::kChar, .cp = n.cp});
                break;
            case Node::Kind::kSet:
                emit({.op = Op::kSet, .set = n.set});
                break;
            case Node::Kind::kConcat:
                for (const Node& c : n.children) compile(c, pattern);
                break;
            case Node::Kind::kAlt: {
                std::vector<int> jumps;
                for (size_t i = 0; i + 1 < n.children.size(); ++i) {
                    int split = emit({.op = Op::kSplit});
                    code[split].x = pc();
                    compile(n.children[i], pattern);
                    jumps.push_back(emit({.op = Op::kJmp}));
                    code[split].y = pc();
                }
                compile(n.children.back(), pattern);
                for (int j : jumps) code[j].x = pc();
                break;
            }
            case Node::Kind::kRepeat:
                compile_repeat(n, pattern);
                break;
            case Node::Kind::kLook:
            case Node::Kind::kAtomic: {
                int head =
                    emit({.op = n.kind == Node::Kind::kLook ? Op::kLook : Op::kAtomic, .negate = n.negate});
                int skip = emit({.op = Op::kJmp});
                code[head].x = pc();
                compile(n.children[0], pattern);
                emit({.op = Op::kMatch});
                code[skip].x = pc();
                break;
            }
        }
    }

    void compile_repeat(const Node& n, std::string_view pattern) {
        const Node& body = n.children[0];
        bool single = body.kind == Node::Kind::kChar || body.kind == Node::Kind::kSet;
        if (single && n.greedy) {  // the fast path: count matches, give back one at a time
            emit({.op = Op::kRepeat,
                  .possessive = n.possessive,
                  .cp = body.cp,
                  .set = body.kind == Node::Kind::kSet ? body.set : -1,
                  .min = n.min,
                  .max = n.max == kUnbounded ? std::numeric_limits<int>::max() : n.max});
            return;
        }
        if (n.possessive) {  // X*+ == (?>X*)
            Node atomic = make(Node::Kind::kAtomic);
            Node greedy = n;
            greedy.possessive = false;
            atomic.children.push_back(std::move(greedy));
            compile(atomic, pattern);
            return;
        }
        if (n.max == kUnbounded && node_nullable(body))
            fail("regex \"{}\": a repeated group that can match empty is not supported", pattern);
        for (int k = 0; k < n.min; ++k) compile(body, pattern);
        if (n.max == kUnbounded) {
            int loop = emit({.op = Op::kSplit});
            int body_pc = pc();
            compile(body, pattern);
            emit({.op = Op::kJmp, .x = loop});
            set_split(loop, body_pc, pc(), n.greedy);
            return;
        }
        std::vector<int> splits;
        for (int k = n.min; k < n.max; ++k) {
            splits.push_back(emit({.op = Op::kSplit}));
            code[splits.back()].x = pc();
            compile(body, pattern);
        }
        for (int s : splits) set_split(s, code[s].x, pc(), n.greedy);
    }

    void set_split(int split, int take, int skip, bool greedy) {
        code[split].x = greedy ? take : skip;
        code[split].y = greedy ? skip : take;
    }

    FirstSet first_of(int at, std::vector<char>& visiting) const {
        FirstSet f;
        if (visiting[at]) return f;  // a loop back: contributes nothing new
        visiting[at] = 1;
        const Inst& in = code[at];
        switch (in.op) {
            case Op::kChar:
            case Op::kSet:
                add_first(f, in);
                break;
            case Op::kRepeat:
                add_first(f, in);
                if (in.min == 0) f.merge(first_of(at + 1, visiting));
                break;
            case Op::kSplit:
                f = first_of(in.x, visiting);
                f.merge(first_of(in.y, visiting));
                break;
            case Op::kJmp:
                f = first_of(in.x, visiting);
                break;
            case Op::kLook:
            case Op::kAtomic:
                f = FirstSet::everything();
                break;
            case Op::kMatch:
                f.nullable = true;
                break;
        }
        visiting[at] = 0;
        return f;
    }

    void add_first(FirstSet& f, const Inst& in) const {
        for (char32_t c = 0; c < 0x80; ++c)
            if (matches(in, c)) f.ascii[c >> 6] |= uint64_t{1} << (c & 63);
        f.non_ascii = in.set >= 0 || in.cp >= 0x80;
    }

    void analyze() {
        std::vector<char> visiting(code.size(), 0);
        split_x.resize(code.size());
        split_y.resize(code.size());
        for (size_t i = 0; i < code.size(); ++i) {
            if (code[i].op != Op::kSplit) continue;
            split_x[i] = first_of(code[i].x, visiting);
            split_y[i] = first_of(code[i].y, visiting);
        }
        start = first_of(0, visiting);
    }

    // A backtrack point: resume at pc with pos. For a kRepeat giving back, `floor` is the lowest pos it
    // may give back to; kNoFloor otherwise.
    struct Frame {
        int pc;
        uint32_t pos;
        uint32_t floor;
    };
    static constexpr uint32_t kNoFloor = std::numeric_limits<uint32_t>::max();

    std::optional<size_t> run(int pc, std::span<const char32_t> text, size_t start_pos,
                              std::vector<Frame>& stack) const {
        const size_t base = stack.size();
        size_t pos = start_pos;
        const size_t n = text.size();
        for (;;) {
            bool failed = false;
            while (!failed) {
                const Inst& in = code[pc];
                switch (in.op) {
                    case Op::kChar:
                    case Op::kSet:
                        if (pos < n && matches(in, text[pos])) {
                            ++pos, ++pc;
                        } else {
                            failed = true;
                        }
                        break;
                    case Op::kSplit: {
                        bool take_x = split_x[pc].admits(text, pos);
                        if (split_y[pc].admits(text, pos)) {
                            if (!take_x) {
                                pc = in.y;
                                break;
                            }
                            stack.push_back({in.y, static_cast<uint32_t>(pos), kNoFloor});
                        } else if (!take_x) {
                            failed = true;
                            break;
                        }
                        pc = in.x;
                        break;
                    }
                    case Op::kJmp:
                        pc = in.x;
                        break;
                    case Op::kRepeat: {
                        size_t count = 0;
                        size_t limit = static_cast<size_t>(in.max);
                        while (count < limit && pos + count < n && matches(in, text[pos + count])) ++count;
                        if (count < static_cast<size_t>(in.min)) {
                            failed = true;
                            break;
                        }
                        if (!in.possessive && count > static_cast<size_t>(in.min))
                            stack.push_back({pc + 1, static_cast<uint32_t>(pos + count - 1),
                                             static_cast<uint32_t>(pos + in.min)});
                        pos += count;
                        ++pc;
                        break;
                    }
                    case Op::kLook: {
                        bool found = run(in.x, text, pos, stack).has_value();
                        if (found == in.negate)
                            failed = true;
                        else
                            ++pc;
                        break;
                    }
                    case Op::kAtomic: {
                        auto end = run(in.x, text, pos, stack);
                        if (!end)
                            failed = true;
                        else
                            pos = *end, ++pc;
                        break;
                    }
                    case Op::kMatch:
                        stack.resize(base);
                        return pos;
                }
            }
            if (stack.size() == base) return std::nullopt;
            Frame f = stack.back();
            stack.pop_back();
            if (f.floor != kNoFloor && f.pos > f.floor) stack.push_back({f.pc, f.pos - 1, f.floor});
            pc = f.pc;
            pos = f.pos;
        }
    }
};

Regex::Regex(std::string_view pattern) : pattern_(pattern), program_(std::make_unique<Program>()) {
    Parser parser(pattern, program_->sets);
    Node root = parser.parse();
    program_->compile(root, pattern);
    program_->emit({.op = Op::kMatch});
    program_->analyze();
}

Regex::~Regex() = default;
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;

namespace {
std::vector<Regex::Program::Frame>& backtrack_stack() {
    thread_local std::vector<Regex::Program::Frame> stack;
    return stack;
}
}  // namespace

std::optional<std::pair<size_t, size_t>> Regex::find(std::span<const char32_t> text, size_t from) const {
    auto& stack = backtrack_stack();
    for (size_t start = from; start <= text.size(); ++start) {
        if (!program_->start.admits(text, start)) continue;
        if (auto end = program_->run(0, text, start, stack)) return std::pair{start, *end};
    }
    return std::nullopt;
}

}  // namespace coli::text
