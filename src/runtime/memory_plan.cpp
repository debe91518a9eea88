#include "runtime/memory_plan.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>

#include "core/bytes.h"

namespace coli {

std::string MemoryPlan::describe() const {
    std::string s = "resident " + bytes_human(resident);
    if (per_sequence > 0)
        s += sequences == 1
                 ? fmt::format(" + kv and state {}", bytes_human(per_sequence))
                 : fmt::format(" + kv and state {} ({} sequences of {} at full context)",
                               bytes_human(per_sequence * sequences), sequences, bytes_human(per_sequence));
    s += " + expert cache " + (experts > 0 ? bytes_human(experts) : std::string("unlimited"));
    if (experts > 0 && experts < expert_total)
        s += fmt::format(" ({:.1f}% of the experts fit; the rest stream from disk)",
                         100.0 * experts / expert_total);
    if (prefix > 0) s += " + prefix cache " + bytes_human(prefix);
    if (experts > 0) s += fmt::format(" = {} at most ({} bytes)", bytes_human(total()), total());
    return s;
}

MemoryPlan memory_plan(const ModelSummary& m, uint64_t expert_budget, size_t sequences, uint64_t prefix) {
    return {.resident = m.dense_held_bytes,
            .per_sequence = m.kv_bytes_per_token * static_cast<uint64_t>(m.max_ctx) + m.state_bytes,
            .sequences = sequences,
            .experts = expert_budget,
            .expert_total = m.expert_bytes,
            .prefix = prefix};
}

uint64_t ram_physical() {
    return static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

size_t sequences_that_fit(const MemoryPlan& plan, uint64_t ram, size_t most) {
    if (plan.per_sequence == 0) return most;
    const uint64_t others = plan.resident + plan.experts + plan.prefix;
    const uint64_t left = ram > others ? ram - others : 0;
    return std::clamp<size_t>(left / plan.per_sequence, 1, most);
}

}  // namespace coli
