// `coli info`: what a model is, how big each part is, and the memory plan.
#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <memory>

#include "cli/commands.h"

namespace coli {
namespace {

void info(const EngineOptions& opts) {
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
    const uint64_t budget = static_cast<uint64_t>(opts.ram_gb * kBytesPerGB);
    // What the machine's RAM holds for the cache once the resident weights and the expert budget are in.
    const uint64_t ram =
        static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    const uint64_t taken = m.dense_held_bytes + budget + m.state_bytes;
    const uint64_t left = ram > taken ? ram - taken : 0;
    if (m.kv_bytes_per_token > 0)
        fmt::print(
            "context fit:  {} tokens in the {} of RAM left beside the resident weights and expert budget\n",
            left / m.kv_bytes_per_token, bytes_human(left));
    fmt::print("memory plan:  resident {} + kv {}{} + expert cache {}{}\n", bytes_human(m.dense_held_bytes),
               bytes_human(m.kv_bytes_per_token * m.max_ctx),
               m.state_bytes ? " + state " + bytes_human(m.state_bytes) : "",
               budget ? bytes_human(budget) : "unlimited",
               budget && budget < m.expert_bytes
                   ? fmt::format(" ({:.1f}% of the experts fit; the rest stream from disk)",
                                 100.0 * budget / m.expert_bytes)
                   : "");
    fmt::print("backend:      {}\n", engine.backend().description());
}

}  // namespace

void cmd_info_add(CLI::App& app) {
    auto opts = std::make_shared<EngineOptions>();
    CLI::App* cmd = app.add_subcommand("info", "Show a model's architecture, sizes by part and memory plan");
    model_flags_add(*cmd, *opts, false);
    cmd->callback([opts] { info(*opts); });
}

}  // namespace coli
