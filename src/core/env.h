// Numbers from the environment, for the test hooks of docs/reliability.md (COLI_FAIL_READS=N,
// COLI_STORE_MEMORY_LIMIT=BYTES, ...).
#pragma once

#include <cstdint>
#include <cstdlib>

namespace coli {

// The number in the environment variable `name`; 0 when it is unset or does not start with digits.
inline uint64_t env_number(const char* name) {
    const char* env = std::getenv(name);
    return env != nullptr ? std::strtoull(env, nullptr, 10) : uint64_t{0};
}

}  // namespace coli
