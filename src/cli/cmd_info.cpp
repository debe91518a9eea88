// `coli info`: what a model is, how big each part is, and the memory plan.
#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "cli/commands.h"

namespace coli {
namespace {

// sequences: whose caches the plan holds at once (coli serve's --parallel).
void info(const EngineOptions& opts, size_t sequences) {
    Engine engine(opts);
    const ModelSummary& m = engine.model().summary();
    fmt::print("model:        {}\n", opts.model_dir.string());
    fmt::print("family:       {}\n", m.family);
    fmt::print("architecture: {}\n", m.architecture);
    fmt::print("formats:      {}\n", m.formats);
    fmt::print("dense:        {} stored, {} held{}\n", bytes_human(m.dense_bytes),
               bytes_human(m.dense_held_bytes),
               opts.dense_bits ? fmt::format(" (--dense-bits {}: lossy, as asked)", opts.dense_bits) : "");
    fmt::print("experts:      {} routed experts, {} on disk ({} per expert)\n", m.expert_count,
               bytes_human(m.expert_bytes),
               bytes_human(m.expert_count ? m.expert_bytes / m.expert_count : 0));
    fmt::print("kv cache:     {} per token, {} for the context of {}\n", bytes_human(m.kv_bytes_per_token),
               bytes_human(m.kv_bytes_per_token * m.max_ctx), m.max_ctx);
    if (!m.kv_detail.empty()) fmt::print("kv layout:    {}\n", m.kv_detail);
    if (m.state_bytes > 0)
        fmt::print("state:        {} per session (recurrent layers, sliding windows: whatever the context)\n",
                   bytes_human(m.state_bytes));
    const MemoryPlan plan = memory_plan(m, static_cast<uint64_t>(opts.ram_gb * kBytesPerGB), sequences, 0);
    // What the machine's RAM holds for the cache once the resident weights and the expert budget are in.
    const uint64_t ram = ram_physical();
    const uint64_t taken = plan.resident + plan.experts + m.state_bytes;
    const uint64_t left = ram > taken ? ram - taken : 0;
    if (m.kv_bytes_per_token > 0)
        fmt::print(
            "context fit:  {} tokens in the {} of RAM left beside the resident weights and expert budget\n",
            left / m.kv_bytes_per_token, bytes_human(left));
    fmt::print("memory plan:  {}\n", plan.describe());
    fmt::print("backend:      {}\n", engine.backend().description());
}

}  // namespace

void cmd_info_add(CLI::App& app) {
    auto opts = std::make_shared<EngineOptions>();
    auto sequences = std::make_shared<size_t>(1);
    CLI::App* cmd = app.add_subcommand("info", "Show a model's architecture, sizes by part and memory plan");
    model_flags_add(*cmd, *opts, false);
    cmd->add_option("--parallel", *sequences,
                    "Sequences whose caches the memory plan holds at once, as coli serve --parallel does")
        ->check(CLI::PositiveNumber);
    cmd->callback([opts, sequences] { info(*opts, *sequences); });
}

}  // namespace coli
