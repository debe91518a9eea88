#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <numeric>

#include "backend/registry.h"
#include "cli/commands.h"
#include "core/error.h"
#include "store/expert_store.h"

namespace coli {

namespace {
constexpr const char* kDemoModelPath = "models/demo";  // the bundled model, relative to the repository
// Where `cmake --install` puts it, relative to the prefix (the binary is in prefix/bin).
constexpr const char* kInstalledDemoModelPath = "share/colibri/models/demo";
}  // namespace

std::filesystem::path default_model_dir() {
    if (const char* env = std::getenv("COLI_MODEL"); env && *env) return env;
    std::error_code ec;
    const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    for (auto dir = exe.parent_path(); !ec && dir.has_relative_path(); dir = dir.parent_path())
        for (const char* demo : {kDemoModelPath, kInstalledDemoModelPath})
            if (std::filesystem::exists(dir / demo / "config.json")) return dir / demo;
    return kDemoModelPath;
}

void prefix_cache_flags_add(CLI::App& cmd, PrefixCacheArgs& args) {
    cmd.add_option("--prefix-cache-gb", args.gb,
                   "RAM for the states of prompts and their shared prefixes (a long system message), "
                   "restored for later prompts that start alike, GB (0 = off)")
        ->capture_default_str();
    cmd.add_option("--cache-dir", args.dir,
                   "Keep the prefix cache's entries in this directory too, and read them back at start "
                   "(needs --prefix-cache-gb)");
}

PrefixCacheOptions prefix_cache_options(const PrefixCacheArgs& args) {
    check(args.gb >= 0, "--prefix-cache-gb must be >= 0, got {}", args.gb);
    check(args.dir.empty() || args.gb > 0, "--cache-dir needs --prefix-cache-gb (the RAM the entries take)");
    return {.ram_bytes = static_cast<uint64_t>(args.gb * kBytesPerGB), .dir = args.dir};
}

void model_flags_add(CLI::App& cmd, EngineOptions& o, bool model_required) {
    auto* model = cmd.add_option("--model,-m", o.model_dir,
                                 "Model directory (config.json + safetensors), or a Hugging Face repo id "
                                 "(org/name[@revision]) in the local Hugging Face cache");
    if (model_required) {
        model->required();
    } else {
        o.model_dir = default_model_dir();
        model->description(model->get_description() + "; default: the bundled demo model")
            ->capture_default_str();
    }
    cmd.add_option("--backend,-b", o.backend, "Backend: " + backend_names())->capture_default_str();
    cmd.add_option("--threads,-t", o.threads, "CPU threads (0 = all cores)")->capture_default_str();
    cmd.add_option("--ram-gb", o.ram_gb, "Hard RAM budget for cached experts, GB (0 = unlimited)")
        ->capture_default_str();
    cmd.add_option("--vram-gb", o.vram_gb,
                   "Device memory for dense weights and the expert tier, GB (0 = free memory less a reserve)")
        ->capture_default_str();
    backend_flags_add(cmd, o.backend_options);
    cmd.add_option("--expert-cache", o.expert_cache,
                   "Cached experts per layer (0 = limited by --ram-gb only)")
        ->capture_default_str();
    cmd.add_option("--io-threads", o.io_threads, "Concurrent expert reads")->capture_default_str();
    cmd.add_flag("!--no-direct-io", o.direct_io, "Read experts through the page cache instead of O_DIRECT");
    cmd.add_flag("!--no-mmap", o.mmap,
                 "Copy experts into a RAM cache even without --ram-gb or --expert-cache (by default they are "
                 "then used in place from the page cache)");
    cmd.add_option("--hot-set", o.hot_set,
                   "Routing-history file for the pinned hot set: auto ($XDG_CACHE_HOME/coli, by the model's "
                   "fingerprint), none, or a path")
        ->capture_default_str();
    cmd.add_option("--dense-bits", o.dense_bits,
                   "Quantize dense weights at load to 8 or 4 bits (lossy; 0 = as stored)")
        ->capture_default_str();
    cmd.add_option("--ctx", o.max_ctx, "Context length (0 = the model's maximum)")->capture_default_str();
    cmd.add_flag(
        "--preload", o.preload,
        "Read experts into RAM at start, layer by layer, as many as --ram-gb holds (all without it), "
        "so that the first prompts wait for no disk");
    cmd.add_flag(
        "--speculate", o.speculate,
        "Speculative decoding: the model's own multi-token-prediction layer drafts the next token and "
        "each step checks it in the same pass (the same tokens when greedy, the same distribution "
        "when sampling; DeepSeek-V3, V3.2 and GLM-5 checkpoints that ship the layer)");
}

void backend_flags_add(CLI::App& cmd, std::map<std::string, std::string>& values) {
    for (const BackendEntry& e : backend_entries())
        for (const BackendOption& option : e.options) {
            std::string& value = values[option.name];
            value = option.default_value;
            cmd.add_option("--" + option.name, value, option.help)
                ->type_name(option.integer ? "INT" : "TEXT")
                ->capture_default_str();
        }
}

void sampler_flags_add(CLI::App& cmd, SamplerOptions& o) {
    cmd.add_option("--temperature", o.temperature, "Sampling temperature (0 = greedy)")
        ->capture_default_str();
    cmd.add_option("--top-k", o.top_k, "Keep the k most likely tokens (0 = all)")->capture_default_str();
    cmd.add_option("--top-p", o.top_p, "Nucleus sampling mass")->capture_default_str();
    cmd.add_option("--seed", o.seed, "Random seed for sampling")->capture_default_str();
}

std::vector<int32_t> ids_parse(const std::string& text) {
    std::vector<int32_t> ids;
    const char* p = text.data();
    const char* end = p + text.size();
    while (p < end) {
        int32_t v = 0;
        auto [next, ec] = std::from_chars(p, end, v);
        check(ec == std::errc() && v >= 0, "--ids: expected comma-separated token ids, got '{}'", text);
        ids.push_back(v);
        p = next;
        if (p < end) {
            check(*p == ',', "--ids: expected comma-separated token ids, got '{}'", text);
            ++p;
        }
    }
    check(!ids.empty(), "--ids: no token ids given");
    return ids;
}

void placement_print(Engine& engine) {
    if (!engine.backend_note().empty()) fmt::print(stderr, "{}\n", engine.backend_note());
    if (!engine.preload_note().empty()) fmt::print(stderr, "{}\n", engine.preload_note());
    const Backend& b = engine.ops().backend();
    fmt::print(
        stderr, "ops run on {}{}\n", b.name(),
        b.name() == "cpu" ? "" : "; an op it declines or fails runs on the cpu, counted (see the end)");
}

void drafts_print(const DraftStats& d) {
    if (d.drafted == 0) return;
    fmt::print(stderr, "speculative: {} of {} drafts kept ({:.1f}%)\n", d.accepted, d.drafted,
               100 * d.acceptance());
}

void stats_print(Engine& engine) {
    const OpCounters& c = engine.ops().counters();
    // Nothing ran (a chat's /stats before the first turn): said so, rather than rates of zero.
    const uint64_t ops_run = std::accumulate(c.native.begin(), c.native.end(), uint64_t{0}) +
                             std::accumulate(c.fallback.begin(), c.fallback.end(), uint64_t{0});
    if (ops_run == 0) {
        fmt::print(stderr, "ops on {}: none ran yet\n", engine.ops().backend().name());
        return;
    }
    fmt::print(stderr, "ops on {}: {}\n", engine.ops().backend().name(), c.summary());
    if (c.total_host_steps() > 0)
        fmt::print(stderr, "host steps: {} (ops the backend finished on the host after a read-back)\n",
                   c.total_host_steps());
    if (c.total_fallbacks() > 0) {
        std::string per;
        for (const auto& [what, n] : c.fallback_by_format) per += fmt::format(" {}={}", what, n);
        fmt::print(stderr, "fallbacks to cpu: {} ({}), {} of them device faults, transfers {}\n",
                   c.total_fallbacks(), per, c.total_faults(), bytes_human(c.transfer_bytes));
    } else if (engine.ops().backend().name() != "cpu") {
        fmt::print(stderr, "fallbacks to cpu: none\n");
    }
    if (const std::string s = engine.ops().backend().stats(); !s.empty()) fmt::print(stderr, "{}\n", s);
    const StoreStats s = engine.model().store().stats();
    if (s.hits + s.misses == 0) {  // a model without routed experts, or no token yet
        fmt::print(stderr, "experts: none fetched, {} cached, {} pinned\n", bytes_human(s.cached_bytes),
                   s.pinned_experts);
        return;
    }
    if (s.mapped) {
        fmt::print(
            stderr,
            "experts: used in place from the file mappings (--no-mmap copies them); {} hits, {} misses "
            "(hit rate {:.1f}%), {} brought in at {:.2f} GB/s, {:.3f} s stalled on I/O, {} mapped\n",
            s.hits, s.misses, 100 * s.hit_rate(), bytes_human(s.bytes_read), s.read_gbps(), s.stall_seconds,
            bytes_human(s.cached_bytes));
    } else {
        fmt::print(stderr,
                   "experts: {} hits, {} misses (hit rate {:.1f}%), {} read at {:.2f} GB/s, {:.3f} s stalled "
                   "on I/O, "
                   "{} evictions, {} cached, {} pinned\n",
                   s.hits, s.misses, 100 * s.hit_rate(), bytes_human(s.bytes_read), s.read_gbps(),
                   s.stall_seconds, s.evictions, bytes_human(s.cached_bytes), s.pinned_experts);
    }
    if (s.slow_reads > 0)
        fmt::print(stderr, "slow expert reads: {} took longer than {} s (the disk stalled)\n", s.slow_reads,
                   kSlowReadSeconds);
    if (s.budget_lowerings > 0)
        fmt::print(stderr, "RAM budget for experts: lowered to {} (failed allocations: {})\n",
                   bytes_human(s.budget_bytes), s.budget_lowerings);
    fmt::print(stderr, "routing: {:.1f} distinct experts per layer, {:.2f} shared by consecutive tokens\n",
               s.distinct_per_layer, s.consecutive_shared);
}

}  // namespace coli
