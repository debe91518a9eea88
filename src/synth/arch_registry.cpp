// The table of architectures `coli synth` knows. One line per architecture.
#include <fmt/format.h>

#include "core/error.h"
#include "synth/synth_arch.h"

namespace coli {

extern const SynthArch kSynthOlmoe;  // arch_olmoe.cpp

namespace {
const SynthArch* const kArchs[] = {&kSynthOlmoe};
}  // namespace

const SynthArch& synth_arch_find(std::string_view name) {
    for (const SynthArch* a : kArchs)
        if (a->name == name) return *a;
    fail("coli synth: unknown --arch '{}'; known: {}", name, fmt::join(synth_arch_names(), ", "));
}

std::vector<std::string_view> synth_arch_names() {
    std::vector<std::string_view> names;
    for (const SynthArch* a : kArchs) names.push_back(a->name);
    return names;
}

int64_t synth_scaled(int64_t value, int scale, std::string_view what) {
    check(scale >= 1 && value % scale == 0, "--scale {} does not divide {} {}; use a power of two", scale,
          what, value);
    return value / scale;
}

}  // namespace coli
