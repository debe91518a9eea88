// `coli synth`: a random-weight checkpoint of a real architecture, in its original layout, for tests and
// benchmarks at real scale (see src/synth/).
#include <fmt/format.h>

#include <map>
#include <memory>

#include "cli/commands.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "synth/synth.h"

namespace coli {
namespace {

struct SynthArgs {
    SynthOptions synth;
    std::string dtype = "bf16";
    int threads = 0;
};

void synth(SynthArgs& a) {
    const std::map<std::string, DType> dtypes = {
        {"bf16", DType::bf16}, {"f16", DType::f16}, {"f32", DType::f32}};
    auto it = dtypes.find(a.dtype);
    check(it != dtypes.end(), "--dtype must be bf16, f16 or f32, got '{}'", a.dtype);
    a.synth.dtype = it->second;
    if (a.threads > 0) set_default_threads(a.threads);
    const SynthResult r = synth_write(a.synth, default_pool());
    fmt::print("wrote {}: {} ({} tensors, {}, {} shard{}) in {:.1f} s\n", a.synth.out.string(), a.synth.arch,
               r.tensors, bytes_human(r.bytes), r.shards, r.shards == 1 ? "" : "s", r.seconds);
}

}  // namespace

void cmd_synth_add(CLI::App& app) {
    auto a = std::make_shared<SynthArgs>();
    CLI::App* cmd = app.add_subcommand(
        "synth", "Write a random-weight checkpoint of a real architecture (for tests and benchmarks)");
    cmd->add_option("--arch", a->synth.arch,
                    fmt::format("Architecture ({})", fmt::join(synth_arch_names(), ", ")))
        ->capture_default_str();
    cmd->add_option("--out,-o", a->synth.out, "Output directory (new or empty)")->required();
    cmd->add_option("--scale", a->synth.scale,
                    "Divide the widths (hidden, intermediate, vocabulary, heads) by S")
        ->capture_default_str();
    cmd->add_option("--layers", a->synth.layers, "Number of layers (0 = the real model's)")
        ->capture_default_str();
    cmd->add_option("--experts", a->synth.experts, "Routed experts per layer (0 = the real model's)")
        ->capture_default_str();
    cmd->add_option("--dtype", a->dtype,
                    "Stored dtype of the weights: bf16, f16 or f32 (those the real model stores as F32, FP8 "
                    "or MXFP4 keep it)")
        ->capture_default_str();
    cmd->add_option("--seed", a->synth.seed, "Random seed (same seed, same bytes)")->capture_default_str();
    cmd->add_option("--shard-gb", a->synth.shard_gb, "Largest shard file, GB")->capture_default_str();
    cmd->add_option("--threads,-t", a->threads, "Threads generating random values (0 = all cores)")
        ->capture_default_str();
    cmd->callback([a] { synth(*a); });
}

}  // namespace coli
