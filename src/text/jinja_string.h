// Python's str operations on UTF-8 text, for the Jinja evaluator: Python counts, indexes and slices by
// code point and has its own notion of whitespace and case, and chat templates rely on all of it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace coli::text::jinja {

// The code points of `s` (invalid UTF-8 decodes to U+FFFD; template inputs come from JSON and are valid).
std::u32string utf8_to_code_points(std::string_view s);
std::string code_points_to_utf8(std::u32string_view cps);

// Python's str.isspace() for one code point.
bool is_python_space(char32_t cp);

// str.strip / lstrip / rstrip: `chars` absent strips whitespace, otherwise any of those code points.
std::string python_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);

// str.split(sep=None, maxsplit=-1).
std::vector<std::string> python_split(std::string_view s, const std::optional<std::string>& sep,
                                      int64_t maxsplit);

// str.splitlines() (no keepends), with Python's set of line boundaries.
std::vector<std::string> python_splitlines(std::string_view s);

// str.replace(old, new, count=-1).
std::string python_replace(std::string_view s, std::string_view old_text, std::string_view new_text,
                           int64_t count);

// Case mappings. Python applies full Unicode mappings (ß -> SS, final sigma); the few code points whose
// full mapping differs from the simple one are a coli::Error rather than a silently different prompt.
std::string python_upper(std::string_view s);
std::string python_lower(std::string_view s);
std::string python_capitalize(std::string_view s);  // str.capitalize()
std::string python_title(std::string_view s);       // str.title()
std::string jinja_title(std::string_view s);  // jinja2's |title filter (word starts after -, space, brackets)

// repr() of a str: single quotes unless the text holds ' and no ", escapes as Python does.
std::string python_repr_string(std::string_view s);

// repr() of a float: the shortest text that round-trips, in Python's layout (1.0, 1e-05, 1e+16, inf, nan).
std::string python_repr_float(double d);

// JSON string literal as Python's json.dumps writes it; ensure_ascii escapes everything above U+007F.
void json_quote(std::string& out, std::string_view s, bool ensure_ascii);

}  // namespace coli::text::jinja
