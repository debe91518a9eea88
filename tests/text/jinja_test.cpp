// The Jinja subset feature by feature, and the errors for what lies outside it. Every expected render
// below is what Python's jinja2 3.1.6 produces in transformers' chat-template environment (trim_blocks,
// lstrip_blocks, loopcontrols, transformers' tojson), recorded when the case was written.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "text/jinja_json.h"
#include "text/jinja_lexer.h"
#include "text/jinja_template.h"

namespace coli::text::jinja {
namespace {

std::string render(const std::string& source, const std::string& vars_json = "{}") {
    Value vars = value_from_json(nlohmann::ordered_json::parse(vars_json));
    return Template(source).render(vars.as_dict());
}

// The error a template raises (at parse or render time); empty when it renders.
std::string error_of(const std::string& source, const std::string& vars_json = "{}") {
    try {
        render(source, vars_json);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

struct Case {
    const char* source;
    const char* vars_json;
    const char* expected;
};

// Whitespace control, literals, operators, access, methods, filters, tests, statements, macros, globals.
const Case kCases[] = {
    {"{% if true %}\n  yes\n{% endif %}\nafter", "{}", "  yes\nafter"},
    {"  {% if true %}x{% endif %}  \n", "{}", "x  "},
    {"a  {%- if true -%}  b  {%- endif -%}  c", "{}", "abc"},
    {"a {{- ' b ' -}} c", "{}", "a b c"},
    {"line\n    {%+ if true %}kept{% endif %}", "{}", "line\n    kept"},
    {"{% if true +%}\nkept newline{% endif %}", "{}", "\nkept newline"},
    {"x {# comment #}\ny\n  {# indented comment #}\nz", "{}", "x y\nz"},
    {"{#- strip -#}  \n text", "{}", "text"},
    {"end with newline\n", "{}", "end with newline"},
    {"a\r\nb\rc", "{}", "a\nb\nc"},
    {"{{ 42 }} {{ -7 }} {{ 1.5 }} {{ 1e3 }} {{ 2.0 }} {{ 1_000 }}", "{}", "42 -7 1.5 1000.0 2.0 1000"},
    {"{{ 'single' }} {{ \"double\" }} {{ 'a' 'b' }} {{ '\\n\\t\\\\\\'' }} {{ '\\u00e9\\x41' }} {{ 'keep \\d' "
     "}}",
     "{}", "single double ab \n\t\\' éA keep \\d"},
    {"{{ none }}|{{ None }}|{{ true }}|{{ False }}|{{ [1, 'a', none] }}|{{ {'k': 'v', 'n': 1.0} }}|{{ (1,) "
     "}}|{{ ('a', 2) }}",
     "{}", "None|None|True|False|[1, 'a', None]|{'k': 'v', 'n': 1.0}|(1,)|('a', 2)"},
    {"{{ undefined_name }}|{{ d.missing }}|{{ d['missing'] }}", "{\"d\": {}}", "||"},
    {"{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 4 / 2 }} {{ 7.5 // 2 }} {{ -7.5 % "
     "2 }}",
     "{}", "3 -4 2 3.5 1024 2.0 3.0 0.5"},
    {"{{ 'a' ~ 1 ~ none ~ true }} {{ 'ab' * 3 }} {{ [1] + [2, 3] }} {{ 1 + true }} {{ 0.1 + 0.2 }}", "{}",
     "a1NoneTrue ababab [1, 2, 3] 2 0.30000000000000004"},
    {"{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'a' in 'cat' }} {{ 2 not in [1, 3] }} {{ 'k' in {'k': 1} }} {{ 1 == "
     "1.0 }} {{ true == 1 }}",
     "{}", "True False True True True True True"},
    {"{{ x and 'yes' }}|{{ x or 'fallback' }}|{{ not x }}|{{ '' or [] or 0 }}", "{\"x\": 0}",
     "0|fallback|True|0"},
    {"{{ 'yes' if x else 'no' }}|{{ 'only if' if x }}|{{ 'a' if false else 'b' if true else 'c' }}",
     "{\"x\": false}", "no||b"},
    {"{{ m.role }} {{ m['content'] }} {{ m.get('missing', 'dflt') }} {{ m.get('role') }} {{ l[0] }} {{ l[-1] "
     "}} {{ l.1 }} {{ s[0] }} {{ s[-1] }}",
     "{\"m\": {\"role\": \"user\", \"content\": \"hi\"}, \"l\": [1, 2, 3], \"s\": \"héllo\"}",
     "user hi dflt user 1 3 2 h o"},
    {"{{ l[1:] }} {{ l[:-1] }} {{ l[::-1] }} {{ l[::2] }} {{ s[1:3] }} {{ s[::-1] }} {{ l[5:] }}",
     "{\"l\": [1, 2, 3, 4], \"s\": \"héllo\"}", "[2, 3, 4] [1, 2, 3] [4, 3, 2, 1] [1, 3] él olléh []"},
    {"{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{{ d.keys() | list }}{{ d.values() | list }}",
     "{\"d\": {\"b\": 1, \"a\": 2}}", "b=1;a=2;['b', 'a'][1, 2]"},
    {"{{ d['items'] }} {{ d.items is callable }}", "{\"d\": {\"items\": \"an item named like a method\"}}",
     "an item named like a method True"},
    {"{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ '--x--'.strip('-') }}|{{ 'xxhixx'.lstrip('x') "
     "}}|{{ '\\n\\nhi\\n'.strip('\\n') }}",
     "{\"s\": \"  pad  \"}", "pad|pad  |  pad|x|hixx|hi"},
    {"{{ 'a,b,,c'.split(',') }} {{ '  a  b '.split() }} {{ 'a b c'.split(' ', 1) }} {{ "
     "'x</think>y</think>z'.split('</think>')[-1] }}",
     "{}", "['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b c'] z"},
    {"{{ 'Hello'.startswith('He') }} {{ 'Hello'.endswith(('x', 'lo')) }} {{ 'ab'.upper() }} {{ 'AB'.lower() "
     "}} {{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }}",
     "{}", "True True AB ab Hello World Hello"},
    {"{{ 'aaa'.replace('a', 'b', 2) }} {{ 'abcabc'.find('c') }} {{ 'abc'.find('z') }} {{ "
     "'abcabc'.count('bc') }} {{ ', '.join(['x', 'y']) }} {{ '{} and {}'.format(1, 'two') }} {{ "
     "'éa'.find('a') }}",
     "{}", "bba 2 -1 2 x, y 1 and two 1"},
    {"{{ '  x  ' | trim }}|{{ 'xxyxx' | trim('x') }}|{{ [1,2,3] | length }}|{{ 'héllo' | length }}|{{ {'a': "
     "1} | length }}|{{ undefined_x | length }}",
     "{}", "x|y|3|5|1|0"},
    {"{{ [3,1,2] | first }} {{ [3,1,2] | last }} {{ 'abc' | first }} {{ [1, 2] | join(', ') }} {{ ['a','b'] "
     "| join }} {{ 'ab' | upper }} {{ 'AB' | lower }} {{ 'hello-world foo' | title }} {{ 'hELLO' | "
     "capitalize }}",
     "{}", "3 2 a 1, 2 ab AB ab Hello-World Foo Hello"},
    {"{{ x | default('d') }} {{ '' | default('d') }} {{ '' | default('d', true) }} {{ none | default('d') }} "
     "{{ x | d('short') }}",
     "{}", "d  d None short"},
    {"{{ 'a-b-c' | replace('-', '+') }} {{ 'aaa' | replace('a', 'b', 1) }} {{ 42 | string }} {{ true | "
     "string }} {{ '12' | int + 1 }} {{ '3.7' | int }} {{ 'x' | int }} {{ 3.9 | int }} {{ '2.5' | float }} "
     "{{ -3 | abs }}",
     "{}", "a+b+c baa 42 True 13 3 0 3 2.5 3"},
    {"{{ d | items | list }} {{ d | dictsort }} {{ d | dictsort(reverse=true) }} {{ [3, 1, 2] | sort }} {{ "
     "['b', 'A', 'c'] | sort }} {{ ['b', 'A', 'c'] | sort(case_sensitive=true) }} {{ [1,2,2,1] | unique | "
     "list }} {{ [1, 2] | reverse | list }}",
     "{\"d\": {\"b\": 1, \"a\": 2}}",
     "[('b', 1), ('a', 2)] [('a', 2), ('b', 1)] [('b', 1), ('a', 2)] [1, 2, 3] ['A', 'b', 'c'] ['A', 'b', "
     "'c'] [1, 2] [2, 1]"},
    {"{{ users | selectattr('admin') | map(attribute='name') | list }} {{ users | rejectattr('admin') | "
     "map(attribute='name') | join(',') }} {{ users | selectattr('name', 'equalto', 'bo') | list | length }} "
     "{{ [1, 2, 3, 4] | select('even') | list }} {{ ['a', 'b'] | map('upper') | list }} {{ users | "
     "map(attribute='age', default=0) | list }} {{ users | sort(attribute='name') | map(attribute='name') | "
     "list }}",
     "{\"users\": [{\"name\": \"bo\", \"admin\": true}, {\"name\": \"al\", \"admin\": false, \"age\": 3}]}",
     "['bo'] al 1 [2, 4] ['A', 'B'] [0, 3] ['al', 'bo']"},
    {"{{ x | tojson }}|{{ x | tojson(indent=2) }}|{{ 'é\"<>&' | tojson }}|{{ 'é' | tojson(ensure_ascii=true) "
     "}}|{{ x | tojson(separators=(',', ':')) }}|{{ x | tojson(sort_keys=true) }}",
     "{\"x\": {\"b\": [1, 2.5, null, true, \"s\"], \"a\": {}, \"c\": []}}",
     "{\"b\": [1, 2.5, null, true, \"s\"], \"a\": {}, \"c\": []}|{\n  \"b\": [\n    1,\n    2.5,\n    "
     "null,\n    true,\n    \"s\"\n  ],\n  \"a\": {},\n  \"c\": "
     "[]\n}|\"é\\\"<>&\"|\"\\u00e9\"|{\"b\":[1,2.5,null,true,\"s\"],\"a\":{},\"c\":[]}|{\"a\": {}, \"b\": "
     "[1, 2.5, null, true, \"s\"], \"c\": []}"},
    {"{{ 'a\\nb\\n\\nc' | indent }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'a\\n\\nb' | indent(width='> ', "
     "blank=true) }}",
     "{}", "a\n    b\n\n    c|  a\n  b|a\n> \n> b"},
    {"{{ x is defined }} {{ y is undefined }} {{ none is none }} {{ 's' is string }} {{ {} is mapping }} {{ "
     "[] is iterable }} {{ 's' is sequence }} {{ 1 is number }} {{ true is number }} {{ 1 is integer }} {{ "
     "1.0 is float }} {{ true is boolean }} {{ true is true }} {{ 0 is false }} {{ 3 is odd }} {{ 4 is even "
     "}} {{ 9 is divisibleby 3 }} {{ 'a' is eq 'a' }} {{ 2 is gt 1 }} {{ 'a' is in ['a'] }} {{ 'ab' is lower "
     "}} {{ x is not none }}",
     "{\"x\": 1}",
     "True True True True True True True True True True True True True False True True True True True True "
     "True True"},
    {"{% for x in [1, 2, 3] %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.first }}/{{ "
     "loop.last }}/{{ loop.length }};{% endfor %}",
     "{}", "1/0/3/True/False/3;2/1/2/False/False/3;3/2/1/False/True/3;"},
    {"{% for x in [1, 2, 3, 4] if x is even %}{{ x }}@{{ loop.index }}{% else %}none{% endfor %}|{% for x in "
     "[] %}x{% else %}empty{% endfor %}",
     "{}", "2@14@2|empty"},
    {"{% for x in range(5) %}{% if x == 1 %}{% continue %}{% endif %}{% if x == 3 %}{% break %}{% endif %}{{ "
     "x }}{% endfor %}",
     "{}", "02"},
    {"{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }},{% endfor %}{% for i in range(1, 7, 2) %}{{ i }}{% "
     "endfor %}{% for c in 'ab' %}[{{ c }}]{% endfor %}",
     "{}", "3,7,135[a][b]"},
    {"{% for x in [1, 2] %}{{ loop.cycle('odd', 'even') }} {{ loop.previtem is defined }} {{ loop.nextitem "
     "}};{% endfor %}",
     "{}", "odd False 2;even True ;"},
    {"{% set x = 0 %}{% for i in range(3) %}{% set x = x + 1 %}{{ x }}{% endfor %}:{{ x }}", "{}", "111:0"},
    {"{% set ns = namespace(n=0, items=[]) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}{% set ns.items "
     "= ns.items + [i] %}{% endfor %}{{ ns.n }} {{ ns.items }}",
     "{}", "3 [0, 1, 2]"},
    {"{% if true %}{% set z = 'set in if' %}{% endif %}{{ z }}", "{}", "set in if"},
    {"{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set block %}inner {{ a }}{% endset %}[{{ block }}]", "{}",
     "12[inner 1]"},
    {"{% if x == 1 %}one{% elif x == 2 %}two{% elif x == 3 %}three{% else %}other{% endif %}", "{\"x\": 3}",
     "three"},
    {"{% macro greet(name, greeting='Hello', punct='!') %}{{ greeting }}, {{ name }}{{ punct }}{% endmacro "
     "%}{{ greet('Ann') }} {{ greet('Bob', 'Hi') }} {{ greet('Cy', punct='?') }}",
     "{}", "Hello, Ann! Hi, Bob! Hello, Cy?"},
    {"{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * (fact(n - 1) | int) }}{% endif %}{% endmacro %}{{ "
     "fact(10) }}",
     "{}", "3628800"},
    {"{% macro show() %}{{ top }}{% endmacro %}{% set top = 'late' %}{{ show() }}{% for top in ['loop'] %}{{ "
     "show() }}{% endfor %}",
     "{}", "latelate"},
    {"{% macro m(a) %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k='v') }}", "{}",
     "(2, 3){'k': 'v'}"},
    {"{% generation %}tracked {{ 1 }}{% endgeneration %}", "{}", "tracked 1"},
    {"{{ dict(a=1, b='x') }} {{ namespace(a=1).a }} {{ range(3) | list }}", "{}",
     "{'a': 1, 'b': 'x'} 1 [0, 1, 2]"},
};

TEST(Jinja, RendersLikePythonJinja2) {
    for (const Case& c : kCases) {
        std::string got;
        try {
            got = render(c.source, c.vars_json);
        } catch (const Error& e) {
            got = std::string("error: ") + e.what();
        }
        EXPECT_EQ(got, c.expected) << "template: " << c.source;
    }
}

TEST(Jinja, LexerOptionsOff) {
    // Without trim_blocks / lstrip_blocks the newline after a tag and the indentation before it stay.
    LexOptions plain{false, false};
    EXPECT_EQ(Template("  {% if true %}\nx\n  {% endif %}\n", plain).render({}), "  \nx\n  ");
}

TEST(Jinja, UndefinedBehavesAsInJinja2) {
    EXPECT_EQ(render("[{{ missing }}]{{ missing | default('d') }}{% for x in missing %}x{% endfor %}"),
              "[]d");
    EXPECT_EQ(render("{{ missing is defined }} {{ missing == missing }} {{ 'a' in missing }}"),
              "False True False");
    EXPECT_EQ(render("{{ none.attribute is defined }}"), "False");
}

// An error must name what is wrong and where: a construct outside the subset, or a template bug.
struct ErrorCase {
    std::string source;
    std::string vars_json;
    std::vector<std::string> mentions;
};

const ErrorCase kErrors[] = {
    {"{% include 'other.jinja' %}", "{}", {"line 1", "include", "not supported"}},
    {"a\n{% call m() %}x{% endcall %}", "{}", {"line 2", "call", "not supported"}},
    {"{% filter upper %}x{% endfilter %}", "{}", {"filter", "not supported"}},
    {"{% raw %}{{ x }}{% endraw %}", "{}", {"raw", "not supported"}},
    {"{% extends 'base' %}", "{}", {"extends", "not supported"}},
    {"{% for x in xs recursive %}{% endfor %}", "{}", {"recursive"}},
    {"{% frobnicate %}", "{}", {"unknown statement", "frobnicate"}},
    {"\n\n{{ x | wordcount }}", "{\"x\": \"a b\"}", {"line 3", "filter 'wordcount'", "not supported"}},
    {"{{ x is escaped }}", "{}", {"test 'escaped'", "not supported"}},
    {"{{ 'x'.zfill(3) }}", "{}", {"str.zfill", "not supported"}},
    {"{{ [1].append(2) }}", "{}", {"list.append", "modifies"}},
    {"{{ f(*xs) }}", "{}", {"unpacking", "not supported"}},
    {"{{ '%s' % 1 }}", "{}", {"printf-style"}},
    {"{{ 'ß' | upper }}", "{}", {"full case mapping"}},
    {"text {{ x", "{}", {"line 1", "never closed"}},
    {"{% if x %}\nno endif", "{}", {"line 1", "{% if %} is never closed"}},
    {"{# no end", "{}", {"comment", "never closed"}},
    {"{{ x $ y }}", "{}", {"unexpected character", "$"}},
    {"{{ 'abc }}", "{}", {"string literal is never closed"}},
    {"{% for x in [1] %}{% endif %}", "{}", {"line 1", "unknown statement {% endif %}"}},
    {"one\ntwo\n{{ foo.bar }}", "{}", {"line 3", "'foo' is undefined"}},
    {"{{ d.x.y }}", "{\"d\": {}}", {"'dict object' has no attribute 'x'"}},
    {"{{ raise_exception('Roles must alternate') }}", "{}", {"line 1", "Roles must alternate"}},
    {"{{ 'a' + 1 }}", "{}", {"unsupported operand", "'str' and 'int'"}},
    {"{{ none < 1 }}", "{}", {"not supported between", "NoneType"}},
    {"{{ 9223372036854775807 + 1 }}", "{}", {"integer overflow"}},
    {"{{ 1 / 0 }}", "{}", {"division by zero"}},
    {"{% break %}", "{}", {"outside a for loop"}},
    {"{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "{}", {"nest deeper"}},
    {"{% set d = {} %}{% set d.x = 1 %}", "{}", {"only namespace() objects take attributes"}},
    {"{{ range(1000000) | length }}", "{}", {"range of more than"}},
    {"{{ x | tojson }}", "{}", {"not JSON serializable"}},
    {"{{ 5() }}", "{}", {"not callable"}},
    {"{% set a, b = [1] %}", "{}", {"cannot unpack"}},
    {"{{ " + std::string(10000, '(') + "1" + std::string(10000, ')') + " }}", "{}", {"nesting deeper than"}},
    {"{{ " + std::string(10000, '-') + "1 }}", "{}", {"nesting deeper than"}},
};

TEST(Jinja, ErrorsNameTheConstructAndLine) {
    for (const ErrorCase& c : kErrors) {
        std::string error = error_of(c.source, c.vars_json);
        ASSERT_FALSE(error.empty()) << "expected an error from: " << c.source;
        for (const std::string& m : c.mentions) {
            EXPECT_NE(error.find(m), std::string::npos)
                << "error for " << c.source << " lacks \"" << m << "\": " << error;
        }
    }
}

}  // namespace
}  // namespace coli::text::jinja
