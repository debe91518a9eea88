#include "backend/device/faults.h"

#include <fmt/format.h>

#include <cctype>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "core/log.h"

namespace coli {

namespace {

constexpr std::string_view kPoisonAll = "1";

// The comma-separated entries of a variable's value.
std::vector<std::string_view> entries_of(std::string_view list) {
    std::vector<std::string_view> out;
    while (!list.empty()) {
        const size_t end = std::min(list.find(','), list.size());
        if (end > 0) out.push_back(list.substr(0, end));
        list.remove_prefix(std::min(end + 1, list.size()));
    }
    return out;
}

// Refuses COLI_<BACKEND>_<suffix>, which `replacement` took over.
void old_name_refuse(std::string_view backend, std::string_view suffix, std::string_view replacement) {
    std::string old = "COLI_";
    for (char c : backend) old += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    old += suffix;
    check(std::getenv(old.c_str()) == nullptr, "{} is no longer read: set {} instead", old, replacement);
}

}  // namespace

OpSet fault_ops(std::string_view backend) {
    old_name_refuse(backend, "_FAIL_OP", fmt::format("{}={}:op[,{}:op...]", kFailOpEnv, backend, backend));
    OpSet ops{};
    const char* env = std::getenv(kFailOpEnv);
    if (env == nullptr) return ops;
    bool any = false;
    for (std::string_view entry : entries_of(env)) {
        const size_t colon = entry.find(':');
        check(colon != std::string_view::npos, "{}: '{}' names no backend: write backend:op, e.g. cuda:{}",
              kFailOpEnv, entry, entry);
        const std::string_view name = entry.substr(colon + 1);
        bool known = false;
        for (size_t i = 0; i < ops.size(); ++i)
            if (op_name(static_cast<OpKind>(i)) == name) {
                known = true;
                if (entry.substr(0, colon) == backend) ops[i] = any = true;
            }
        check(known, "{}: unknown op '{}'", kFailOpEnv, name);
    }
    if (any) log_warn("{}={}: those ops fail on {} on purpose (fault injection)", kFailOpEnv, env, backend);
    return ops;
}

bool poison_outputs(std::string_view backend) {
    old_name_refuse(backend, "_POISON_OUTPUTS", fmt::format("{}={}", kPoisonOutputsEnv, backend));
    const char* env = std::getenv(kPoisonOutputsEnv);
    if (env == nullptr) return false;
    for (std::string_view entry : entries_of(env))
        if (entry == backend || entry == kPoisonAll) return true;
    return false;
}

}  // namespace coli
