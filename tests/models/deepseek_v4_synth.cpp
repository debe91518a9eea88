#include "deepseek_v4_synth.h"

#include <memory>
#include <mutex>

#include "common/test_util.h"
#include "core/thread_pool.h"
#include "synth/synth.h"
#include "synth/synth_arch.h"

namespace coli::test {
namespace {

constexpr int kScale = 64, kLayers = 4, kExperts = 16;
constexpr uint64_t kSeed = 25;
constexpr uint32_t kIdMultiplier = 2654435761u;  // spreads consecutive positions over the vocabulary

}  // namespace

const SynthModel& deepseek_v4_synth() {
    static std::once_flag once;
    static std::unique_ptr<TempDir> dir;
    static SynthModel model;
    std::call_once(once, [] {
        dir = std::make_unique<TempDir>("v4synth");
        SynthOptions o;
        o.arch = "deepseek_v4";
        o.out = dir->path() / "model";
        o.scale = kScale;
        o.layers = kLayers;
        o.experts = kExperts;
        o.seed = kSeed;
        ThreadPool pool(1);
        synth_write(o, pool);
        model.dir = o.out;
        model.vocab = synth_arch_find("deepseek_v4").config(o)["vocab_size"].get<int64_t>();
        for (size_t t = 0; t < kV4SynthTokens; ++t)
            model.input_ids.push_back(static_cast<int32_t>((uint32_t(t + 1) * kIdMultiplier) % model.vocab));
    });
    return model;
}

}  // namespace coli::test
