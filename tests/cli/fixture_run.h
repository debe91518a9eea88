// `coli run` on an oracle fixture, as the CLI tests call it: the fixture's prompt ids, greedy, as many
// tokens as its oracle holds; and whether a Vulkan device is here to run it on.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "common/fixture.h"

namespace coli::test {

// Token ids as `--ids` and `--print-ids` write them: "3,17,42".
inline std::string ids_text(const std::vector<int32_t>& ids) {
    return fmt::format("{}", fmt::join(ids, ","));
}

// The arguments of `coli run` on fixture `fx`'s prompt for its oracle's greedy tokens, then `extra`.
inline std::string fixture_run_args(const Fixture& fx, const std::string& extra) {
    return fmt::format(
        "run --model {} --ids {} --max-tokens {} --temperature 0 --print-ids --hot-set none {}",
        fx.dir.string(), ids_text(fx.input_ids), fx.greedy.size(), extra);
}

inline bool vulkan_available() {
    for (const BackendInfo& b : backend_list())
        if (b.name == "vulkan") return b.available;
    return false;
}

}  // namespace coli::test
