// Errors: one exception type whose message is a complete, user-facing sentence.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace coli {

// Thrown for every failure a user can cause or fix (bad files, bad flags, missing devices).
// The CLI prints what() on one line and exits non-zero; nothing else catches it silently.
class Error : public std::runtime_error {
public:
    explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// An allocation that failed (RAM or device memory). What can do with less memory (the expert store's RAM
// cache, a device's expert tier) catches it, lowers its budget and tries again; elsewhere it is an Error.
class OutOfMemory : public Error {
public:
    explicit OutOfMemory(const std::string& what) : Error(what) {}
};

// Throws coli::Error with a formatted message.
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
    throw Error(fmt::format(f, std::forward<Args>(args)...));
}

// Throws coli::Error with the message when cond is false.
template <typename... Args>
void check(bool cond, fmt::format_string<Args...> f, Args&&... args) {
    if (!cond) fail(f, std::forward<Args>(args)...);
}

}  // namespace coli
