// `coli info`: what a model is, how big each part is, and the memory plan.
#include <fmt/format.h>

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
    const uint64_t budget = static_cast<uint64_t>(opts.ram_gb * kBytesPerGB);
    fmt::print("memory plan:  resident {} + kv {} + expert cache {}{}\n", bytes_human(m.dense_held_bytes),
               bytes_human(m.kv_bytes_per_token * m.max_ctx), budget ? bytes_human(budget) : "unlimited",
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
    model_flags_add(*cmd, *opts);
    cmd->callback([opts] { info(*opts); });
}

}  // namespace coli
