// What a run or a server holds in RAM at most, by part: the plan `coli info` prints, the one `coli serve`
// sizes its batch by and prints at start. A server's peak resident set is measured against it
// (docs/reliability.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "models/model.h"

namespace coli {

struct MemoryPlan {
    uint64_t resident = 0;      // dense weights as held
    uint64_t per_sequence = 0;  // one sequence's caches: KV at full context and recurrent state
    size_t sequences = 1;       // sequences whose caches are held at once (coli serve's --parallel)
    uint64_t experts = 0;       // the RAM budget for experts; 0: unlimited (used in place, or unbounded)
    uint64_t expert_total = 0;  // every routed expert's bytes (to say what share of them the budget holds)
    uint64_t prefix = 0;        // the prefix cache's budget; 0: off

    // The parts' sum: a bound on what the plan holds only when the experts have a budget.
    uint64_t total() const { return resident + per_sequence * sequences + experts + prefix; }
    // "resident 32.27 MB + kv 100.66 MB (4 sequences of 25.17 MB at full context) + expert cache 40.00 MB
    // (26.5% of the experts fit; ...) = 172.93 MB at most (172930000 bytes)".
    std::string describe() const;
};

// The plan for a model with an expert budget (0: none), `sequences` at once and a prefix cache of `prefix`.
MemoryPlan memory_plan(const ModelSummary& m, uint64_t expert_budget, size_t sequences, uint64_t prefix);

// The machine's physical RAM.
uint64_t ram_physical();

// How many sequences, from 1 to `most`, have room for their caches in `ram` beside the plan's other parts.
size_t sequences_that_fit(const MemoryPlan& plan, uint64_t ram, size_t most);

}  // namespace coli
