// Logging to stderr. stdout is reserved for what a command produces (ids, text, tables).
#pragma once

#include <fmt/format.h>

#include <cstdio>

namespace coli {

enum class LogLevel { quiet, warn, info, debug };

// The process-wide level; set once by the CLI from --verbose / --quiet.
LogLevel& log_level();

template <typename... Args>
void log_at(LogLevel level, const char* tag, fmt::format_string<Args...> f, Args&&... args) {
    if (log_level() < level) return;
    fmt::print(stderr, "{}{}\n", tag, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void log_warn(fmt::format_string<Args...> f, Args&&... args) {
    log_at(LogLevel::warn, "warning: ", f, std::forward<Args>(args)...);
}
template <typename... Args>
void log_info(fmt::format_string<Args...> f, Args&&... args) {
    log_at(LogLevel::info, "", f, std::forward<Args>(args)...);
}
template <typename... Args>
void log_debug(fmt::format_string<Args...> f, Args&&... args) {
    log_at(LogLevel::debug, "debug: ", f, std::forward<Args>(args)...);
}

}  // namespace coli
